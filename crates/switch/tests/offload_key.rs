//! The fast path's key must hold everything the switch decides on: two frames with the same
//! key (both taken by the fast path) have the same flow key, so the kernel may forward the
//! second the way user space decided the first. Random frames, random one-byte changes.

use proptest::prelude::*;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_xdp::fast_path::fast_key;

#[path = "../../xdp/tests/common/fast_path_frames.rs"]
mod fast_path_frames;
use fast_path_frames::frame;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    #[test]
    fn same_key_same_flow_key(
        tagged in any::<bool>(),
        proto in prop::sample::select(vec![1u8, 6, 17]),
        fields in any::<[u8; 16]>(),
        payload in 0usize..40,
        at in any::<prop::sample::Index>(),
        value in any::<u8>(),
        extra in 0usize..3,
    ) {
        let original = frame(tagged, proto, &fields, payload);
        let key = fast_key(&original, 3);
        prop_assert!(key.is_some(), "the fast path takes {:02x?}", original);
        let mut changed = original.clone();
        changed.extend(std::iter::repeat_n(0u8, extra));
        let i = at.index(changed.len());
        changed[i] = value;
        // The key leaves TCP's flags out: a megaflow that pins them never becomes an entry
        // (dpif::process).
        let without_flags = |frame: &[u8]| FlowKey {
            tcp_flags: 0,
            ..FlowKey::parse(frame, 1)
        };
        if fast_key(&changed, 3) == key {
            prop_assert_eq!(without_flags(&changed), without_flags(&original));
        }
    }

    #[test]
    fn different_ports_different_keys(
        proto in prop::sample::select(vec![1u8, 6, 17]),
        fields in any::<[u8; 16]>(),
    ) {
        let original = frame(false, proto, &fields, 0);
        prop_assert_ne!(fast_key(&original, 3), fast_key(&original, 4));
    }
}
