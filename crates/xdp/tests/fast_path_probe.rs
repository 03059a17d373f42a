//! The kernel's parser (bpf/switch_fast_path.c, built with its result exported) and the Rust
//! one (`fast_key`) agree on every frame: the same key byte for byte, or both refuse it.
//! User space installs entries under the Rust key and the kernel looks them up under its
//! own, so a disagreement would be a flow forwarded under another flow's decision, or never
//! forwarded. Valid frames of every shape the fast path takes (and TCP/UDP ones with a
//! checksum left partial, which both refuse), then header bytes changed
//! (edge values first, then random ones), bytes added and the frame cut short. Needs root
//! (BPF_PROG_RUN).

use std::cell::RefCell;

use proptest::prelude::*;
use wirespeed_xdp::fast_path::{PROBE_IFINDEX, Probe, fast_key};

mod common;
use common::fast_path_frames::{frame, make_partial};

thread_local! {
    // Loaded once: the object's maps (a 262144-entry flow table) take a while to create.
    static PROBE: RefCell<Probe> =
        RefCell::new(Probe::load().expect("load the probe program (the tests run as root)"));
}

/// A byte of the headers (Ethernet to the first 20 bytes of L4), where a change decides
/// whether the frame is taken and what its key is.
fn header_index(len: usize, tagged: bool, pick: usize) -> usize {
    let headers = if tagged { 18 + 20 + 20 } else { 14 + 20 + 20 };
    pick % headers.min(len)
}

fn check(f: &[u8]) -> Result<(), TestCaseError> {
    if f.len() < 14 {
        // The kernel runs XDP on nothing shorter than an Ethernet header.
        return Ok(());
    }
    let kernel = PROBE.with_borrow_mut(|p| p.key_of(f).expect("run the probe program"));
    let rust = fast_key(f, PROBE_IFINDEX);
    prop_assert_eq!(kernel, rust, "frame {:02x?}", f);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn kernel_and_rust_parse_alike(
        tagged in any::<bool>(),
        proto in prop::sample::select(vec![1u8, 6, 17, 47]),
        fields in any::<[u8; 16]>(),
        payload in 0usize..40,
        changes in prop::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        cut in prop::option::of(any::<usize>()),
        extra in 0usize..4,
        edge in prop::sample::select(vec![0u8, 0x08, 0x10, 0x20, 0x3f, 0x45, 0x46, 0x81, 0xff]),
        partial in any::<bool>(),
    ) {
        let mut f = frame(tagged, proto, &fields, payload);
        if partial && (proto == 6 || proto == 17) {
            make_partial(&mut f, tagged);
            prop_assert!(fast_key(&f, PROBE_IFINDEX).is_none(), "partial {:02x?}", f);
        }
        check(&f)?;
        for (i, &(pick, value)) in changes.iter().enumerate() {
            let at = header_index(f.len(), tagged, pick);
            f[at] = if i == 0 { edge } else { value };
            check(&f)?;
        }
        f.extend(std::iter::repeat_n(0u8, extra));
        check(&f)?;
        if let Some(cut) = cut {
            f.truncate(cut % (f.len() + 1));
            check(&f)?;
        }
    }
}
