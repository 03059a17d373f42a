//! A frame off the wire, parsed to the switch's flow key: any bytes are a result, never a
//! panic, and the header offsets it reports lie inside the frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_packet::flow_key::FlowKey;

fuzz_target!(|frame: &[u8]| {
    let (key, offsets) = FlowKey::parse_with_offsets(frame, 1);
    let _ = (key.dl_vlan(), key.dl_vlan_pcp());
    for offset in [offsets.l3, offsets.l4].into_iter().flatten() {
        assert!(
            offset <= frame.len(),
            "{offsets:?} past {} bytes",
            frame.len()
        );
    }
});
