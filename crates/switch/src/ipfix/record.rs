//! One flow record: the flow's key (what tells flows apart), and what one report of it
//! carries (counts since the last report, times, the reason it was sent), encoded under the
//! templates of [`crate::ipfix::template`].

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::ipfix::template::{
    FieldsOf, IPV4_GRE_TEMPLATE, IPV4_TEMPLATE, IPV4_TUNNEL_TEMPLATE, IPV6_GRE_TEMPLATE,
    IPV6_TEMPLATE, IPV6_TUNNEL_TEMPLATE, TUNNEL_TYPE_GENEVE, TUNNEL_TYPE_GRE, TUNNEL_TYPE_VXLAN,
    ipv4_fields, ipv4_gre_fields, ipv4_tunnel_fields, ipv6_fields, ipv6_gre_fields,
    ipv6_tunnel_fields, record_len,
};
use crate::tunnel::TunnelKind;

/// A flow's addresses.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Addresses {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

/// The tunnel a flow's packets went out through, or else came in by (Open vSwitch reports
/// the same one): the outer addresses and UDP destination port (0 for GRE) they had on the
/// underlay, and the VNI (GRE's key).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct TunnelEnds {
    pub kind: TunnelKind,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub dst_port: u16,
    pub vni: u32,
}

impl TunnelEnds {
    /// Open vSwitch's tunnelType.
    fn tunnel_type(&self) -> u8 {
        match self.kind {
            TunnelKind::Vxlan => TUNNEL_TYPE_VXLAN,
            TunnelKind::Geneve => TUNNEL_TYPE_GENEVE,
            TunnelKind::Gre => TUNNEL_TYPE_GRE,
        }
    }

    /// The outer IP protocol.
    fn protocol(&self) -> u8 {
        match self.kind {
            TunnelKind::Vxlan | TunnelKind::Geneve => UDP,
            TunnelKind::Gre => GRE,
        }
    }
}

/// What makes a flow one flow: addresses, protocol, transport ports (ICMP: 0 and
/// type * 256 + code, as NetFlow collectors read them), VLAN id (0 untagged), the
/// OpenFlow port it came in on, and the tunnel it crossed, if any.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct FlowKey {
    pub addresses: Addresses,
    pub protocol: u8,
    pub src_port: u16,
    pub dst_port: u16,
    pub vlan: u16,
    pub ingress: u32,
    pub tunnel: Option<TunnelEnds>,
}

impl FlowKey {
    /// A hash of the key that is the same in every run and on every machine, for choosing
    /// which flows are sampled (FNV-1a over the key's fields).
    pub fn stable_hash(&self) -> u64 {
        let mut hash = 0xcbf2_9ce4_8422_2325u64;
        let mut eat = |bytes: &[u8]| {
            for &b in bytes {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        match self.addresses {
            Addresses::V4(src, dst) => {
                eat(&src.octets());
                eat(&dst.octets());
            }
            Addresses::V6(src, dst) => {
                eat(&src.octets());
                eat(&dst.octets());
            }
        }
        eat(&[self.protocol]);
        eat(&self.src_port.to_be_bytes());
        eat(&self.dst_port.to_be_bytes());
        eat(&self.vlan.to_be_bytes());
        eat(&self.ingress.to_be_bytes());
        if let Some(t) = &self.tunnel {
            eat(&t.src.octets());
            eat(&t.dst.octets());
            eat(&t.vni.to_be_bytes());
        }
        hash
    }
}

/// Why a record was sent (IANA's flowEndReason).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EndReason {
    IdleTimeout = 1,
    ActiveTimeout = 2,
    /// The switch stopped.
    ForcedEnd = 4,
}

/// The outer IP protocols of the switch's tunnels: VXLAN and Geneve are over UDP.
const UDP: u8 = 17;
const GRE: u8 = 47;

/// Nanoseconds since the Unix epoch.
pub type UnixNanos = u64;

/// Seconds between the NTP era (1900) and the Unix epoch.
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// dateTimeNanoseconds (RFC 7011 section 6.1.10): NTP's 64-bit format, seconds since 1900
/// above a binary fraction of a second.
pub fn ntp_timestamp(nanos: UnixNanos) -> u64 {
    let seconds = nanos / 1_000_000_000 + NTP_UNIX_OFFSET;
    let fraction = ((nanos % 1_000_000_000) << 32) / 1_000_000_000;
    (seconds << 32) | fraction
}

/// One report of a flow.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct FlowRecord {
    pub key: FlowKey,
    /// The OpenFlow port its packets went out of; 0 when not one port (see
    /// [`crate::ipfix::observe`]).
    pub egress: u32,
    pub packets: u64,
    /// IP bytes (headers and payload: octetDeltaCount)...
    pub octets: u64,
    /// ...and Ethernet frame bytes (layer2OctetDeltaCount), FCS not included.
    pub layer2_octets: u64,
    pub start: UnixNanos,
    pub end: UnixNanos,
    pub reason: EndReason,
    /// TCP's flags of its packets, ORed (0 when not TCP).
    pub tcp_flags: u16,
}

impl FlowRecord {
    /// The template the record is sent under, and its fields.
    fn template(&self) -> (u16, FieldsOf) {
        let v4 = matches!(self.key.addresses, Addresses::V4(..));
        match (v4, self.key.tunnel.map(|t| t.kind)) {
            (true, None) => (IPV4_TEMPLATE, ipv4_fields),
            (false, None) => (IPV6_TEMPLATE, ipv6_fields),
            (true, Some(TunnelKind::Gre)) => (IPV4_GRE_TEMPLATE, ipv4_gre_fields),
            (false, Some(TunnelKind::Gre)) => (IPV6_GRE_TEMPLATE, ipv6_gre_fields),
            (true, Some(_)) => (IPV4_TUNNEL_TEMPLATE, ipv4_tunnel_fields),
            (false, Some(_)) => (IPV6_TUNNEL_TEMPLATE, ipv6_tunnel_fields),
        }
    }

    pub fn template_id(&self) -> u16 {
        self.template().0
    }

    /// The record's bytes under its template (see [`crate::ipfix::template::ipv4_fields`],
    /// [`crate::ipfix::template::ipv4_tunnel_fields`] and
    /// [`crate::ipfix::template::ipv4_gre_fields`]).
    pub fn encode(&self) -> Vec<u8> {
        let len = record_len(&(self.template().1)());
        let mut out = Vec::with_capacity(len);
        match self.key.addresses {
            Addresses::V4(src, dst) => {
                out.extend_from_slice(&src.octets());
                out.extend_from_slice(&dst.octets());
            }
            Addresses::V6(src, dst) => {
                out.extend_from_slice(&src.octets());
                out.extend_from_slice(&dst.octets());
            }
        }
        out.extend_from_slice(&self.key.src_port.to_be_bytes());
        out.extend_from_slice(&self.key.dst_port.to_be_bytes());
        out.push(self.key.protocol);
        out.extend_from_slice(&self.key.vlan.to_be_bytes());
        out.extend_from_slice(&self.key.ingress.to_be_bytes());
        out.extend_from_slice(&self.egress.to_be_bytes());
        out.extend_from_slice(&self.packets.to_be_bytes());
        out.extend_from_slice(&self.octets.to_be_bytes());
        out.extend_from_slice(&self.layer2_octets.to_be_bytes());
        out.extend_from_slice(&ntp_timestamp(self.start).to_be_bytes());
        out.extend_from_slice(&ntp_timestamp(self.end).to_be_bytes());
        out.extend_from_slice(&(self.start / 1_000_000).to_be_bytes());
        out.extend_from_slice(&(self.end / 1_000_000).to_be_bytes());
        out.push(self.reason as u8);
        out.extend_from_slice(&self.tcp_flags.to_be_bytes());
        if let Some(t) = &self.key.tunnel {
            out.extend_from_slice(&t.src.octets());
            out.extend_from_slice(&t.dst.octets());
            out.push(t.protocol());
            out.extend_from_slice(&t.dst_port.to_be_bytes());
            out.push(t.tunnel_type());
            match t.kind {
                TunnelKind::Gre => out.extend_from_slice(&t.vni.to_be_bytes()),
                _ => out.extend_from_slice(&t.vni.to_be_bytes()[1..]),
            }
        }
        debug_assert_eq!(out.len(), len);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ntp_timestamps() {
        assert_eq!(ntp_timestamp(0), NTP_UNIX_OFFSET << 32);
        // Half a second is half of the fraction's range.
        assert_eq!(
            ntp_timestamp(1_500_000_000),
            ((NTP_UNIX_OFFSET + 1) << 32) | 0x8000_0000
        );
    }

    #[test]
    fn ipv4_record_bytes() {
        let record = FlowRecord {
            key: FlowKey {
                addresses: Addresses::V4(Ipv4Addr::new(10, 9, 0, 1), Ipv4Addr::new(10, 9, 0, 2)),
                protocol: 17,
                src_port: 1024,
                dst_port: 9,
                vlan: 10,
                ingress: 1,
                tunnel: None,
            },
            egress: 2,
            packets: 3,
            octets: 3 * 82,
            layer2_octets: 3 * 96,
            start: 1_000_000_000_250_000_000,
            end: 1_000_000_001_000_000_000,
            reason: EndReason::IdleTimeout,
            tcp_flags: 0,
        };
        assert_eq!(record.template_id(), 256);
        let start_seconds = (1_000_000_000 + NTP_UNIX_OFFSET) as u32;
        let mut expected = vec![10, 9, 0, 1, 10, 9, 0, 2, 4, 0, 0, 9, 17, 0, 10];
        expected.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2]);
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 3]);
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 246]);
        expected.extend_from_slice(&[0, 0, 0, 0, 0, 0, 1, 32]);
        expected.extend_from_slice(&start_seconds.to_be_bytes());
        expected.extend_from_slice(&[0x40, 0, 0, 0]); // a quarter of a second
        expected.extend_from_slice(&(start_seconds + 1).to_be_bytes());
        expected.extend_from_slice(&[0, 0, 0, 0]);
        expected.extend_from_slice(&1_000_000_000_250u64.to_be_bytes());
        expected.extend_from_slice(&1_000_000_001_000u64.to_be_bytes());
        expected.extend_from_slice(&[1, 0, 0]);
        assert_eq!(record.encode(), expected);
    }

    #[test]
    fn ipv6_records_are_longer_by_their_addresses() {
        let key = FlowKey {
            addresses: Addresses::V6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
            protocol: 6,
            src_port: 1,
            dst_port: 2,
            vlan: 0,
            ingress: 3,
            tunnel: None,
        };
        let record = FlowRecord {
            key,
            egress: 0,
            packets: 1,
            octets: 60,
            layer2_octets: 74,
            start: 0,
            end: 0,
            reason: EndReason::ForcedEnd,
            tcp_flags: 0x019,
        };
        let bytes = record.encode();
        assert_eq!(record.template_id(), 257);
        assert_eq!(bytes.len(), 106);
        assert_eq!(bytes[..16], "fd00::1".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(
            bytes[103..],
            [4, 0, 0x19],
            "ForcedEnd, then FIN, PSH and ACK"
        );
    }

    #[test]
    fn a_tunnelled_record_ends_with_the_tunnel() {
        let tunnel = TunnelEnds {
            kind: TunnelKind::Vxlan,
            src: Ipv4Addr::new(192, 168, 77, 2),
            dst: Ipv4Addr::new(192, 168, 77, 1),
            dst_port: 4789,
            vni: 0x12_3456,
        };
        let mut record = FlowRecord {
            key: FlowKey {
                addresses: Addresses::V4(Ipv4Addr::new(10, 9, 0, 2), Ipv4Addr::new(10, 9, 0, 1)),
                protocol: 1,
                src_port: 0,
                dst_port: 0x0800,
                vlan: 0,
                ingress: 10,
                tunnel: Some(tunnel),
            },
            egress: 1,
            packets: 5,
            octets: 420,
            layer2_octets: 490,
            start: 0,
            end: 0,
            reason: EndReason::ForcedEnd,
            tcp_flags: 0,
        };
        assert_eq!(record.template_id(), 259);
        let bytes = record.encode();
        assert_eq!(bytes.len(), 82 + 15);
        assert_eq!(
            bytes[82..],
            [
                192, 168, 77, 2, 192, 168, 77, 1, 17, 0x12, 0xb5, 1, 0x12, 0x34, 0x56
            ]
        );
        record.key.tunnel = Some(TunnelEnds {
            kind: TunnelKind::Geneve,
            ..tunnel
        });
        assert_eq!(
            record.encode()[93],
            7,
            "Geneve is Open vSwitch's tunnelType 7"
        );
        record.key.tunnel = Some(TunnelEnds {
            kind: TunnelKind::Gre,
            dst_port: 0,
            vni: 0xdead_beef,
            ..tunnel
        });
        assert_eq!(record.template_id(), 261);
        let bytes = record.encode();
        assert_eq!(bytes.len(), 82 + 16);
        assert_eq!(
            bytes[82..],
            [
                192, 168, 77, 2, 192, 168, 77, 1, 47, 0, 0, 2, 0xde, 0xad, 0xbe, 0xef
            ]
        );
    }

    #[test]
    fn the_sampling_hash_is_stable() {
        let key = FlowKey {
            addresses: Addresses::V4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
            protocol: 17,
            src_port: 1,
            dst_port: 2,
            vlan: 0,
            ingress: 1,
            tunnel: None,
        };
        assert_eq!(key.stable_hash(), key.stable_hash());
        let other = FlowKey { src_port: 3, ..key };
        assert_ne!(key.stable_hash(), other.stable_hash());
    }
}
