//! The switch's actions on a frame off the wire: completing a partial checksum, setting
//! every settable field, decrementing the TTL, pushing and popping VLAN tags. Whatever the
//! bytes, each is done or refused inside the buffer, never a panic; and the generator's
//! payload reader (recv, rxdrop --verify) takes the result like any frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::frame_reader::read_test_frame;
use wirespeed_packet::partial_checksum::complete_in_frame;
use wirespeed_switch::action::SETTABLE_FIELDS;
use wirespeed_switch::execute::rewrite::{PacketHeaders, dec_ttl, set_field, set_vlan, strip_vlan};
use wirespeed_switch::frame::Frame;

fuzz_target!(|input: &[u8]| {
    let Some((&value, frame)) = input.split_first() else {
        return;
    };
    // Headroom for a pushed tag, as a port's frame has.
    let mut buffer = vec![0u8; 64 + frame.len() + 64];
    buffer[64..64 + frame.len()].copy_from_slice(frame);
    let Some(mut frame) = Frame::new(&mut buffer, 64, input.len() - 1) else {
        return;
    };
    let (key, offsets) = FlowKey::parse_with_offsets(frame.data(), 1);
    if let (Some(l3), Some(l4)) = (offsets.l3, offsets.l4) {
        let _ = complete_in_frame(frame.data_mut(), l3, l4);
    }
    let mut headers = PacketHeaders::new(&key, offsets);
    for field in SETTABLE_FIELDS {
        set_field(
            &mut frame,
            &headers,
            field,
            u128::from(value) * 0x0101_0101_0101_0101,
        );
    }
    let _ = dec_ttl(&mut frame, &headers);
    let _ = set_vlan(
        &mut frame,
        &mut headers,
        Some(u16::from(value)),
        Some(value),
    );
    strip_vlan(&mut frame, &mut headers);
    strip_vlan(&mut frame, &mut headers);
    let _ = read_test_frame(frame.data());
});
