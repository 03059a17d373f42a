//! Checksums stay correct after every rewrite: random generator frames (IPv4/IPv6, UDP, TCP,
//! ICMP, tagged or not) through random rewrite actions, then the packet crate's reader checks
//! every checksum, the payload survives, and the frame parses to the flow the actions promised.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use proptest::prelude::*;
use wirespeed_packet::MacAddr;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_packet::frame_builder::{FrameSpec, IpPair, L4Kind};
use wirespeed_packet::frame_reader::read_test_frame;
use wirespeed_switch::execute::rewrite::PacketHeaders;
use wirespeed_switch::execute::{ActionContext, Packet, execute};
use wirespeed_switch::field::TunnelOut;
use wirespeed_switch::{Action, Field, FlowBits, Frame, MacTable};

const HEADROOM: usize = 8;

fn frame_spec() -> impl Strategy<Value = FrameSpec> {
    (
        any::<[u8; 6]>(),
        any::<[u8; 6]>(),
        prop::option::of(0u16..4095),
        any::<bool>(),
        any::<(u32, u32, u128, u128)>(),
        prop::sample::select(vec![L4Kind::Udp, L4Kind::TcpSyn, L4Kind::IcmpEcho]),
        any::<(u16, u16)>(),
    )
        .prop_map(
            |(src, dst, vlan, v6, (a, b, c, d), l4, (src_port, dst_port))| FrameSpec {
                src_mac: MacAddr(src),
                dst_mac: MacAddr(dst),
                vlan,
                ip: if v6 {
                    IpPair::V6(Ipv6Addr::from(c), Ipv6Addr::from(d))
                } else {
                    IpPair::V4(Ipv4Addr::from(a), Ipv4Addr::from(b))
                },
                l4,
                src_port,
                dst_port,
                generator: 7,
            },
        )
}

/// A rewrite valid for the frame (the prerequisites a rule's match would have guaranteed).
fn rewrite(spec: &FrameSpec, choice: u8, value: u128) -> Action {
    let v6 = matches!(spec.ip, IpPair::V6(..));
    let ports = spec.l4 != L4Kind::IcmpEcho;
    match choice % 12 {
        0 => Action::SetField(Field::DlSrc, value & Field::DlSrc.full_mask()),
        1 => Action::SetField(Field::DlDst, value & Field::DlDst.full_mask()),
        2 => Action::ModVlanVid(value as u16 & 0x0fff),
        3 => Action::ModVlanPcp(value as u8 & 0x07),
        4 => Action::StripVlan,
        5 => Action::SetField(Field::NwTos, value & 0xfc),
        6 => Action::SetField(Field::NwTtl, 2 + value % 250),
        7 => Action::DecTtl,
        8 | 9 if v6 => Action::SetField(
            if choice % 12 == 8 {
                Field::Ipv6Src
            } else {
                Field::Ipv6Dst
            },
            value,
        ),
        8 | 9 => Action::SetField(
            if choice % 12 == 8 {
                Field::NwSrc
            } else {
                Field::NwDst
            },
            value & 0xffff_ffff,
        ),
        10 | 11 if ports => Action::SetField(
            if choice % 12 == 10 {
                Field::TpSrc
            } else {
                Field::TpDst
            },
            value & 0xffff,
        ),
        _ => Action::DecTtl,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn rewrites_keep_every_checksum(
        spec in frame_spec(),
        extra_len in 0usize..64,
        choices in prop::collection::vec((any::<u8>(), any::<u128>()), 1..8),
    ) {
        let frame_len = spec.min_frame_len().max(60) + extra_len;
        let mut buffer = vec![0u8; HEADROOM + frame_len];
        spec.write(&mut buffer[HEADROOM..], frame_len, 42, 1234).unwrap();
        let sent = read_test_frame(&buffer[HEADROOM..]).unwrap();
        prop_assert!(sent.checksums_ok);

        let actions: Vec<Action> = choices.iter().map(|&(choice, value)| rewrite(&spec, choice, value)).collect();
        let (key, offsets) = FlowKey::parse_with_offsets(&buffer[HEADROOM..], 1);
        let mut expected = FlowBits::from_key(&key);
        let ttl_drops = {
            let mut ttl = key.nw_ttl;
            actions.iter().any(|action| match *action {
                Action::SetField(Field::NwTtl, value) => { ttl = value as u8; false }
                Action::DecTtl if ttl <= 1 => true,
                Action::DecTtl => { ttl -= 1; false }
                _ => false,
            })
        };
        for action in &actions {
            action.apply_to_flow(&mut expected, &mut FlowBits::default());
        }

        let mut frame = Frame::new(&mut buffer, HEADROOM, frame_len).unwrap();
        let mut packet = Packet { frame: &mut frame, headers: PacketHeaders::new(&key, offsets), flow: FlowBits::from_key(&key), in_port: 1 };
        let mut mac_table = MacTable::default();
        let mut bridge = ActionContext { ports: &[1, 2], learning: &mut mac_table, now: Duration::ZERO, meters: &[] };
        let mut verdict = wirespeed_switch::Verdict::default();
        execute(&actions, &mut packet, &mut bridge, &mut verdict, &mut |_: &[u8], _: &[u32], _: TunnelOut| {});
        prop_assume!(!ttl_drops);
        prop_assert!(verdict.dropped.is_some(), "rewrites alone output nowhere");

        let data = frame.data();
        let received = read_test_frame(data).unwrap();
        prop_assert!(received.checksums_ok, "{:?} broke a checksum", actions);
        prop_assert_eq!(received.payload, sent.payload);
        let got = FlowBits::from_key(&FlowKey::parse(data, 1));
        prop_assert_eq!(got, expected, "{:?}", actions);
    }
}
