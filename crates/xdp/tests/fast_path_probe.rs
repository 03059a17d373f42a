//! The kernel's parser (bpf/switch_fast_path.c, built with its result exported) and the Rust
//! one (`fast_key`) agree on every frame: the same key byte for byte, or both refuse it.
//! User space installs entries under the Rust key and the kernel looks them up under its
//! own, so a disagreement would be a flow forwarded under another flow's decision, or never
//! forwarded. Valid frames of every shape the fast path takes, then header bytes changed
//! (edge values first, then random ones), bytes added and the frame cut short. Needs root
//! (BPF_PROG_RUN).

use std::cell::RefCell;

use proptest::prelude::*;
use wirespeed_xdp::fast_path::{PROBE_IFINDEX, Probe, fast_key};

thread_local! {
    // Loaded once: the object's maps (a 262144-entry flow table) take a while to create.
    static PROBE: RefCell<Probe> =
        RefCell::new(Probe::load().expect("load the probe program (the tests run as root)"));
}

/// A frame the fast path takes: optional 802.1Q tag, IPv4 without options, TCP/UDP/ICMP
/// (protocol 47, GRE, it refuses).
fn frame(tagged: bool, proto: u8, fields: &[u8; 16], payload: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, fields[0], 2, 0, 0, 0, 0, fields[1]];
    if tagged {
        f.extend_from_slice(&[0x81, 0x00, fields[2], fields[3]]);
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let l4_len = if proto == 6 { 20 } else { 8 };
    let total = (20 + l4_len + payload) as u16;
    f.extend_from_slice(&[0x45, fields[4]]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[fields[5], fields[6], 0x40, 0, fields[7], proto, 0xaa, 0xbb]);
    f.extend_from_slice(&[10, 0, fields[8], fields[9], 10, 0, fields[10], fields[11]]);
    let ports = [fields[12], fields[13], fields[14], fields[15]];
    match proto {
        6 => {
            f.extend_from_slice(&ports);
            f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        }
        17 => {
            f.extend_from_slice(&ports);
            f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0]);
        }
        _ => f.extend_from_slice(&[ports[0], ports[1], 0x12, 0x34, 0, 1, 0, 1]),
    }
    f.extend((0..payload).map(|i| i as u8));
    f
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
    ) {
        let mut f = frame(tagged, proto, &fields, payload);
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
