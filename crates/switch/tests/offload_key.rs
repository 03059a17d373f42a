//! The fast path's key must hold everything the switch decides on: two frames with the same
//! key (both taken by the fast path) have the same flow key, so the kernel may forward the
//! second the way user space decided the first. Random frames, random one-byte changes.

use proptest::prelude::*;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_xdp::fast_path::fast_key;

/// A frame the fast path takes: optional 802.1Q tag, IPv4 (no options), TCP/UDP/ICMP.
fn frame(tagged: bool, proto: u8, fields: [u8; 16], payload: usize) -> Vec<u8> {
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
        let original = frame(tagged, proto, fields, payload);
        let key = fast_key(&original, 3);
        prop_assert!(key.is_some(), "the fast path takes {:02x?}", original);
        let mut changed = original.clone();
        changed.extend(std::iter::repeat_n(0u8, extra));
        let i = at.index(changed.len());
        changed[i] = value;
        if fast_key(&changed, 3) == key {
            prop_assert_eq!(FlowKey::parse(&changed, 1), FlowKey::parse(&original, 1));
        }
    }

    #[test]
    fn different_ports_different_keys(
        proto in prop::sample::select(vec![1u8, 6, 17]),
        fields in any::<[u8; 16]>(),
    ) {
        let original = frame(false, proto, fields, 0);
        prop_assert_ne!(fast_key(&original, 3), fast_key(&original, 4));
    }
}
