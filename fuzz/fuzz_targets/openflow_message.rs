//! OpenFlow messages from a controller: any bytes decode to a message or the
//! specification's error, never a panic or a read past them; a FLOW_MOD, GROUP_MOD,
//! PACKET_OUT, METER_MOD or bundle message that decodes encodes back to bytes that decode
//! to it again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wirespeed_switch::openflow::bundle::BundleAdd;
use wirespeed_switch::openflow::message::{Incoming, decode};

fuzz_target!(|bytes: &[u8]| {
    // The stream is cut at the header's length before decoding: so does the fuzzer.
    let mut message = bytes.to_vec();
    if message.len() >= 4 {
        let len = (message.len().min(0xffff)) as u16;
        message.truncate(usize::from(len));
        message[2..4].copy_from_slice(&len.to_be_bytes());
    }
    match decode(&message) {
        Ok((header, Incoming::FlowMod(flow_mod))) => {
            let again = decode(&flow_mod.encode(header.xid)).map(|(_, m)| m);
            assert_eq!(again, Ok(Incoming::FlowMod(flow_mod)));
        }
        Ok((header, Incoming::PacketOut(packet_out))) => {
            let again = decode(&packet_out.encode(header.xid)).map(|(_, m)| m);
            assert_eq!(again, Ok(Incoming::PacketOut(packet_out)));
        }
        Ok((header, Incoming::GroupMod(group_mod))) => {
            let again = decode(&group_mod.encode(header.xid)).map(|(_, m)| m);
            assert_eq!(again, Ok(Incoming::GroupMod(group_mod)));
        }
        Ok((header, Incoming::MeterMod(meter_mod))) => {
            let again = decode(&meter_mod.encode(header.xid)).map(|(_, m)| m);
            assert_eq!(again, Ok(Incoming::MeterMod(meter_mod)));
        }
        Ok((header, Incoming::BundleControl(control))) => {
            let again = decode(&control.encode(header.xid)).map(|(_, m)| m);
            assert_eq!(again, Ok(Incoming::BundleControl(control)));
        }
        Ok((header, Incoming::BundleAdd(add))) => {
            // The message itself is not compared: padding and properties are not kept.
            let bytes = BundleAdd::encode(add.bundle_id, add.flags, &add.change, header.xid);
            match decode(&bytes) {
                Ok((_, Incoming::BundleAdd(again))) => assert_eq!(
                    (again.bundle_id, again.flags, again.change),
                    (add.bundle_id, add.flags, add.change)
                ),
                other => panic!("{add:?} encoded decodes to {other:?}"),
            }
        }
        _ => {}
    }
});
