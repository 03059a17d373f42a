//! Matches on the wire: `ofp_match` with OXM fields (OpenFlow 1.3 §7.2.3), to and from the
//! switch's [`Match`]. Each OXM field maps onto the bits of one of our fields (`ip_dscp` is
//! the top six bits of `nw_tos`, `vlan_vid` the low thirteen of `vlan_tci`, `tcp_src` and
//! `udp_src` are both `tp_src`); one the flow key does not hold (`in_phy_port`, SCTP, ND,
//! MPLS, PBB and IPv6 extension headers) is `BAD_FIELD`. Besides the basic class, Nicira's
//! tunnel addresses (`NXM_NX_TUN_IPV4_SRC` and `_DST`, class 0x0001), TTL (`NXM_NX_IP_TTL`),
//! TCP flags (`NXM_NX_TCP_FLAGS`) and registers (`NXM_NX_REG0` to `NXM_NX_REG15`), as Open
//! vSwitch and its controllers send them for `tun_src`, `tun_dst`, `nw_ttl`, `tcp_flags` and
//! `reg0` to `reg15`. Open vSwitch sends `tcp_flags` over OpenFlow 1.3 as ONF's experimenter
//! field (`ONFOXM_ET_TCP_FLAGS`, what OpenFlow 1.5 made basic), which is read too.

use wirespeed_packet::flow_key::{VLAN_PCP_MASK, VLAN_PRESENT};

use crate::field::Field;
use crate::flow_match::{
    DL_TYPE_ARP, DL_TYPE_IPV4, DL_TYPE_IPV6, Match, NW_PROTO_ICMP, NW_PROTO_ICMPV6, NW_PROTO_TCP,
    NW_PROTO_UDP,
};
use crate::openflow::error::{OfpError, bad_match};
use crate::openflow::wire::{Reader, Writer};

/// `OFPMT_OXM`.
const MATCH_TYPE_OXM: u16 = 1;
/// `OFPXMC_OPENFLOW_BASIC`.
const CLASS_BASIC: u16 = 0x8000;
/// `OFPXMC_NXM_1`: Nicira's extensible match fields.
const CLASS_NXM_1: u16 = 0x0001;
/// Nicira's numbers of the tunnel's outer IPv4 source and destination in [`CLASS_NXM_1`].
const NXM_NX_TUN_IPV4_SRC: u8 = 31;
const NXM_NX_TUN_IPV4_DST: u8 = 32;
const NXM_NX_IP_TTL: u8 = 29;
const NXM_NX_TCP_FLAGS: u8 = 34;
/// `OFPXMC_EXPERIMENTER`: the header is followed by the experimenter's id.
const CLASS_EXPERIMENTER: u16 = 0xffff;
/// ONF's experimenter id, and its number of `tcp_flags` under it.
const ONF_EXPERIMENTER: u32 = 0x4f4e_4600;
const ONFOXM_ET_TCP_FLAGS: u8 = 42;
/// Nicira's register `n` is field `n` of [`CLASS_NXM_1`].
const NXM_NX_REGISTERS: u8 = crate::field::REGISTERS;
/// Our field numbers are below this: the basic class's below 64, ours for Nicira's fields
/// above.
pub const FIELD_NUMBERS: usize = 128;
/// The bits of `vlan_tci` that `vlan_vid` covers: the id and `OFPVID_PRESENT`.
const VID_BITS: u128 = 0x1fff;

/// OXM field numbers (`oxm_ofb_match_fields`).
pub mod field_no {
    pub const IN_PORT: u8 = 0;
    pub const METADATA: u8 = 2;
    pub const ETH_DST: u8 = 3;
    pub const ETH_SRC: u8 = 4;
    pub const ETH_TYPE: u8 = 5;
    pub const VLAN_VID: u8 = 6;
    pub const VLAN_PCP: u8 = 7;
    pub const IP_DSCP: u8 = 8;
    pub const IP_ECN: u8 = 9;
    pub const IP_PROTO: u8 = 10;
    pub const IPV4_SRC: u8 = 11;
    pub const IPV4_DST: u8 = 12;
    pub const TCP_SRC: u8 = 13;
    pub const TCP_DST: u8 = 14;
    pub const UDP_SRC: u8 = 15;
    pub const UDP_DST: u8 = 16;
    pub const ICMPV4_TYPE: u8 = 19;
    pub const ICMPV4_CODE: u8 = 20;
    pub const ARP_OP: u8 = 21;
    pub const ARP_SPA: u8 = 22;
    pub const ARP_TPA: u8 = 23;
    pub const ARP_SHA: u8 = 24;
    pub const ARP_THA: u8 = 25;
    pub const IPV6_SRC: u8 = 26;
    pub const IPV6_DST: u8 = 27;
    pub const IPV6_FLABEL: u8 = 28;
    pub const ICMPV6_TYPE: u8 = 29;
    pub const ICMPV6_CODE: u8 = 30;
    pub const TUNNEL_ID: u8 = 38;
    /// Nicira's tunnel addresses, numbered here past the basic class's fields (on the wire:
    /// class 0x0001, fields 31 and 32).
    pub const TUN_IPV4_SRC: u8 = 100;
    pub const TUN_IPV4_DST: u8 = 101;
    /// Nicira's registers: `reg0` is this, `reg15` fifteen past it (on the wire: class
    /// 0x0001, fields 0 to 15).
    pub const REG0: u8 = 102;
    pub const REG15: u8 = REG0 + 15;
    /// Nicira's IP TTL (on the wire: class 0x0001, field 29).
    pub const IP_TTL: u8 = 118;
    /// Nicira's TCP flags (on the wire: class 0x0001, field 34; or ONF's experimenter
    /// field 42).
    pub const TCP_FLAGS: u8 = 119;
}

/// Register `n`'s field number (`n` below 16).
pub const fn register_field_no(n: u8) -> u8 {
    field_no::REG0 + n
}

/// Every field a match may hold, in the order a match is written and table features list
/// them.
pub const MATCH_FIELDS: [u8; 49] = [
    field_no::IN_PORT,
    field_no::METADATA,
    field_no::ETH_DST,
    field_no::ETH_SRC,
    field_no::ETH_TYPE,
    field_no::VLAN_VID,
    field_no::VLAN_PCP,
    field_no::IP_DSCP,
    field_no::IP_ECN,
    field_no::IP_PROTO,
    field_no::IPV4_SRC,
    field_no::IPV4_DST,
    field_no::TCP_SRC,
    field_no::TCP_DST,
    field_no::UDP_SRC,
    field_no::UDP_DST,
    field_no::ICMPV4_TYPE,
    field_no::ICMPV4_CODE,
    field_no::ARP_OP,
    field_no::ARP_SPA,
    field_no::ARP_TPA,
    field_no::ARP_SHA,
    field_no::ARP_THA,
    field_no::IPV6_SRC,
    field_no::IPV6_DST,
    field_no::IPV6_FLABEL,
    field_no::ICMPV6_TYPE,
    field_no::ICMPV6_CODE,
    field_no::TUNNEL_ID,
    field_no::TUN_IPV4_SRC,
    field_no::TUN_IPV4_DST,
    field_no::IP_TTL,
    field_no::TCP_FLAGS,
    register_field_no(0),
    register_field_no(1),
    register_field_no(2),
    register_field_no(3),
    register_field_no(4),
    register_field_no(5),
    register_field_no(6),
    register_field_no(7),
    register_field_no(8),
    register_field_no(9),
    register_field_no(10),
    register_field_no(11),
    register_field_no(12),
    register_field_no(13),
    register_field_no(14),
    register_field_no(15),
];

/// An OXM header alone (class, number, whether a mask follows, length), as table features
/// list fields: `masked` for a field that takes a mask.
pub fn oxm_header(w: &mut Writer, number: u8, masked: bool) {
    let Some(info) = OxmField::of(number) else {
        return;
    };
    let (class, wire) = wire_header(number);
    let len = info.bytes * if masked { 2 } else { 1 };
    w.u16(class).u8(wire << 1 | u8::from(masked)).u8(len as u8);
}

/// The class and number field `number` has on the wire.
pub fn wire_header(number: u8) -> (u16, u8) {
    match number {
        field_no::TUN_IPV4_SRC => (CLASS_NXM_1, NXM_NX_TUN_IPV4_SRC),
        field_no::TUN_IPV4_DST => (CLASS_NXM_1, NXM_NX_TUN_IPV4_DST),
        field_no::REG0..=field_no::REG15 => (CLASS_NXM_1, number - field_no::REG0),
        field_no::IP_TTL => (CLASS_NXM_1, NXM_NX_IP_TTL),
        field_no::TCP_FLAGS => (CLASS_NXM_1, NXM_NX_TCP_FLAGS),
        _ => (CLASS_BASIC, number),
    }
}

/// Our number of the field a TLV's class and number name, if it is one we take.
fn from_wire(class: u16, number: u8) -> Option<u8> {
    match (class, number) {
        (CLASS_BASIC, number) if usize::from(number) < 64 => Some(number),
        (CLASS_NXM_1, NXM_NX_TUN_IPV4_SRC) => Some(field_no::TUN_IPV4_SRC),
        (CLASS_NXM_1, NXM_NX_TUN_IPV4_DST) => Some(field_no::TUN_IPV4_DST),
        (CLASS_NXM_1, n) if n < NXM_NX_REGISTERS => Some(register_field_no(n)),
        (CLASS_NXM_1, NXM_NX_IP_TTL) => Some(field_no::IP_TTL),
        (CLASS_NXM_1, NXM_NX_TCP_FLAGS) => Some(field_no::TCP_FLAGS),
        _ => None,
    }
}

/// What an OXM field is in our terms: the field, its width on the wire in bytes, whether
/// OpenFlow allows a mask, and how its value sits in our field's bits.
#[derive(Clone, Copy)]
pub struct OxmField {
    pub field: Field,
    pub bytes: usize,
    pub maskable: bool,
    /// Our field's bits this OXM field covers.
    pub bits: u128,
    /// Left shift from the wire value to our field's bits.
    pub shift: u32,
}

impl OxmField {
    pub fn of(number: u8) -> Option<OxmField> {
        let f = |field: Field, bytes: usize, maskable: bool| OxmField {
            field,
            bytes,
            maskable,
            bits: field.full_mask(),
            shift: 0,
        };
        Some(match number {
            field_no::IN_PORT => f(Field::InPort, 4, false),
            field_no::METADATA => f(Field::Metadata, 8, true),
            field_no::ETH_DST => f(Field::DlDst, 6, true),
            field_no::ETH_SRC => f(Field::DlSrc, 6, true),
            field_no::ETH_TYPE => f(Field::DlType, 2, false),
            field_no::VLAN_VID => OxmField {
                bits: VID_BITS,
                ..f(Field::VlanTci, 2, true)
            },
            field_no::VLAN_PCP => OxmField {
                bits: u128::from(VLAN_PCP_MASK),
                shift: 13,
                ..f(Field::VlanTci, 1, false)
            },
            field_no::IP_DSCP => OxmField {
                bits: 0xfc,
                shift: 2,
                ..f(Field::NwTos, 1, false)
            },
            field_no::IP_ECN => f(Field::NwEcn, 1, false),
            field_no::IP_PROTO => f(Field::NwProto, 1, false),
            field_no::IPV4_SRC => f(Field::NwSrc, 4, true),
            field_no::IPV4_DST => f(Field::NwDst, 4, true),
            // Maskable as in Open vSwitch (port ranges), where OpenFlow 1.3 has them exact.
            field_no::TCP_SRC | field_no::UDP_SRC => f(Field::TpSrc, 2, true),
            field_no::TCP_DST | field_no::UDP_DST => f(Field::TpDst, 2, true),
            field_no::ICMPV4_TYPE | field_no::ICMPV6_TYPE => f(Field::IcmpType, 1, false),
            field_no::ICMPV4_CODE | field_no::ICMPV6_CODE => f(Field::IcmpCode, 1, false),
            field_no::ARP_OP => f(Field::ArpOp, 2, false),
            field_no::ARP_SPA => f(Field::ArpSpa, 4, true),
            field_no::ARP_TPA => f(Field::ArpTpa, 4, true),
            field_no::ARP_SHA => f(Field::ArpSha, 6, true),
            field_no::ARP_THA => f(Field::ArpTha, 6, true),
            field_no::IPV6_SRC => f(Field::Ipv6Src, 16, true),
            field_no::IPV6_DST => f(Field::Ipv6Dst, 16, true),
            field_no::IPV6_FLABEL => f(Field::Ipv6Label, 4, true),
            field_no::TUNNEL_ID => f(Field::TunId, 8, true),
            field_no::TUN_IPV4_SRC => f(Field::TunSrc, 4, true),
            field_no::TUN_IPV4_DST => f(Field::TunDst, 4, true),
            field_no::REG0..=field_no::REG15 => f(Field::Reg(number - field_no::REG0), 4, true),
            field_no::IP_TTL => f(Field::NwTtl, 1, false),
            field_no::TCP_FLAGS => f(Field::TcpFlags, 2, true),
            _ => return None,
        })
    }

    /// The wire value's largest value (its bits shifted back down).
    fn wire_max(&self) -> u128 {
        self.bits >> self.shift
    }
}

/// One OXM TLV: the field number, the value and mask (all ones when it has none).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Oxm {
    pub number: u8,
    pub value: u128,
    pub mask: Option<u128>,
}

/// Reads one OXM TLV of the basic class, a Nicira field of ours, or ONF's `tcp_flags` (a
/// value of at most 16 bytes).
pub fn read_oxm(r: &mut Reader<'_>) -> Result<Oxm, OfpError> {
    let class = r.u16().map_err(|_| bad_match::BAD_LEN)?;
    let number_mask = r.u8().map_err(|_| bad_match::BAD_LEN)?;
    let len = usize::from(r.u8().map_err(|_| bad_match::BAD_LEN)?);
    let mut body = r.take(len).map_err(|_| bad_match::BAD_LEN)?;
    let has_mask = number_mask & 1 == 1;
    let number = match class {
        // The length counts the experimenter's id, which comes first.
        CLASS_EXPERIMENTER => {
            let (id, rest) = body.split_first_chunk::<4>().ok_or(bad_match::BAD_LEN)?;
            body = rest;
            match (u32::from_be_bytes(*id), number_mask >> 1) {
                (ONF_EXPERIMENTER, ONFOXM_ET_TCP_FLAGS) => field_no::TCP_FLAGS,
                _ => return Err(bad_match::BAD_FIELD),
            }
        }
        _ => from_wire(class, number_mask >> 1).ok_or(bad_match::BAD_FIELD)?,
    };
    let len = body.len();
    let Some(info) = OxmField::of(number) else {
        return Err(bad_match::BAD_FIELD);
    };
    let expected = info.bytes * if has_mask { 2 } else { 1 };
    if len != expected {
        return Err(bad_match::BAD_LEN);
    }
    let number_of = |b: &[u8]| b.iter().fold(0u128, |v, &b| v << 8 | u128::from(b));
    let value = number_of(&body[..info.bytes]);
    let mask = has_mask.then(|| number_of(&body[info.bytes..]));
    Ok(Oxm {
        number,
        value,
        mask,
    })
}

/// Decodes an `ofp_match` (its padding included) into a match, checking masks, duplicates and
/// prerequisites as §7.2.3.6-7 say.
pub fn read_match(r: &mut Reader<'_>) -> Result<Match, OfpError> {
    let kind = r.u16().map_err(|_| bad_match::BAD_LEN)?;
    let len = usize::from(r.u16().map_err(|_| bad_match::BAD_LEN)?);
    if kind != MATCH_TYPE_OXM {
        return Err(bad_match::BAD_TYPE);
    }
    if len < 4 {
        return Err(bad_match::BAD_LEN);
    }
    let mut fields = Reader::new(r.take(len - 4).map_err(|_| bad_match::BAD_LEN)?);
    r.skip(len.next_multiple_of(8) - len)
        .map_err(|_| bad_match::BAD_LEN)?;
    let mut flow_match = Match::ANY;
    let mut seen = [false; FIELD_NUMBERS];
    while !fields.is_empty() {
        let oxm = read_oxm(&mut fields)?;
        let seen = &mut seen[usize::from(oxm.number)];
        if *seen {
            return Err(bad_match::DUP_FIELD);
        }
        *seen = true;
        add_oxm(&mut flow_match, &oxm)?;
    }
    check_prerequisites(&flow_match, &seen)?;
    Ok(flow_match)
}

/// Adds one field to the match.
pub fn add_oxm(flow_match: &mut Match, oxm: &Oxm) -> Result<(), OfpError> {
    let info = OxmField::of(oxm.number).ok_or(bad_match::BAD_FIELD)?;
    if oxm.mask.is_some() && !info.maskable {
        return Err(bad_match::BAD_MASK);
    }
    if oxm.value > info.wire_max() {
        return Err(bad_match::BAD_VALUE);
    }
    let mask = oxm.mask.unwrap_or(info.wire_max()) & info.wire_max();
    if oxm.value & !mask != 0 {
        // §7.2.3.5: a value bit where the mask is zero (OFPBMC_BAD_WILDCARDS).
        return Err(OfpError { kind: 4, code: 5 });
    }
    let (value, mask) = match (oxm.number, oxm.value, mask) {
        // OFPVID_NONE: untagged, so the priority bits are zero too (`vlan_tci=0`).
        (field_no::VLAN_VID, 0, VID_BITS) => (0, info.field.full_mask()),
        _ => (oxm.value << info.shift, mask << info.shift),
    };
    let (old_value, old_mask) = flow_match.field(info.field);
    flow_match.set(info.field, old_value | value, old_mask | mask);
    Ok(())
}

fn check_prerequisites(m: &Match, seen: &[bool; FIELD_NUMBERS]) -> Result<(), OfpError> {
    let eth_type = m.exact(Field::DlType);
    let proto = m.exact(Field::NwProto);
    let ip = matches!(eth_type, Some(DL_TYPE_IPV4 | DL_TYPE_IPV6));
    let met = |number: u8| match number {
        field_no::VLAN_PCP => {
            let (value, mask) = m.field(Field::VlanTci);
            let present = u128::from(VLAN_PRESENT);
            value & mask & present != 0
        }
        field_no::IP_DSCP | field_no::IP_ECN | field_no::IP_PROTO | field_no::IP_TTL => ip,
        field_no::IPV4_SRC | field_no::IPV4_DST => eth_type == Some(DL_TYPE_IPV4),
        field_no::IPV6_SRC | field_no::IPV6_DST | field_no::IPV6_FLABEL => {
            eth_type == Some(DL_TYPE_IPV6)
        }
        field_no::TCP_SRC | field_no::TCP_DST | field_no::TCP_FLAGS => {
            ip && proto == Some(NW_PROTO_TCP)
        }
        field_no::UDP_SRC | field_no::UDP_DST => ip && proto == Some(NW_PROTO_UDP),
        field_no::ICMPV4_TYPE | field_no::ICMPV4_CODE => {
            eth_type == Some(DL_TYPE_IPV4) && proto == Some(NW_PROTO_ICMP)
        }
        field_no::ICMPV6_TYPE | field_no::ICMPV6_CODE => {
            eth_type == Some(DL_TYPE_IPV6) && proto == Some(NW_PROTO_ICMPV6)
        }
        field_no::ARP_OP
        | field_no::ARP_SPA
        | field_no::ARP_TPA
        | field_no::ARP_SHA
        | field_no::ARP_THA => eth_type == Some(DL_TYPE_ARP),
        _ => true,
    };
    match (0..FIELD_NUMBERS as u8).find(|&n| seen[usize::from(n)] && !met(n)) {
        Some(_) => Err(bad_match::BAD_PREREQ),
        None => Ok(()),
    }
}

fn write_oxm(w: &mut Writer, number: u8, bytes: usize, value: u128, mask: Option<u128>) {
    let len = bytes * if mask.is_some() { 2 } else { 1 };
    let (class, number) = wire_header(number);
    w.u16(class)
        .u8(number << 1 | u8::from(mask.is_some()))
        .u8(len as u8);
    w.slice(&value.to_be_bytes()[16 - bytes..]);
    if let Some(mask) = mask {
        w.slice(&mask.to_be_bytes()[16 - bytes..]);
    }
}

/// Writes one field of `m` as `number`, if `m` constrains its bits: without a mask when it
/// pins them all, masked when OpenFlow allows, left out when it does not (a mask OpenFlow
/// cannot say, from flow syntax).
fn write_field(w: &mut Writer, m: &Match, number: u8) {
    let Some(info) = OxmField::of(number) else {
        return;
    };
    let (value, mask) = m.field(info.field);
    let (value, mask) = (
        (value & info.bits) >> info.shift,
        (mask & info.bits) >> info.shift,
    );
    if mask == 0 {
        return;
    }
    if mask == info.wire_max() {
        write_oxm(w, number, info.bytes, value, None);
    } else if info.maskable {
        write_oxm(w, number, info.bytes, value, Some(mask));
    }
}

/// The OXM fields of `m` (no `ofp_match` header), in the specification's order.
pub fn write_oxms(w: &mut Writer, m: &Match) {
    let proto = m.exact(Field::NwProto);
    let ipv6 = m.exact(Field::DlType) == Some(DL_TYPE_IPV6);
    let (tp_src, tp_dst) = match proto {
        Some(NW_PROTO_UDP) => (field_no::UDP_SRC, field_no::UDP_DST),
        _ => (field_no::TCP_SRC, field_no::TCP_DST),
    };
    let (icmp_type, icmp_code) = match ipv6 {
        true => (field_no::ICMPV6_TYPE, field_no::ICMPV6_CODE),
        false => (field_no::ICMPV4_TYPE, field_no::ICMPV4_CODE),
    };
    let vid_present = {
        let (value, mask) = m.field(Field::VlanTci);
        value & mask & u128::from(VLAN_PRESENT) != 0
    };
    for number in MATCH_FIELDS {
        // Our tp_src is TCP's or UDP's, icmp_type ICMPv4's or ICMPv6's: the protocol says.
        let another_protocols = match number {
            field_no::TCP_SRC | field_no::TCP_DST | field_no::UDP_SRC | field_no::UDP_DST => {
                number != tp_src && number != tp_dst
            }
            field_no::ICMPV4_TYPE
            | field_no::ICMPV4_CODE
            | field_no::ICMPV6_TYPE
            | field_no::ICMPV6_CODE => number != icmp_type && number != icmp_code,
            _ => false,
        };
        if another_protocols {
            continue;
        }
        if number == field_no::VLAN_PCP && !vid_present {
            continue;
        }
        // ARP's fields share bits with IPv6's and TCP's (see crate::field).
        if OxmField::of(number).is_some_and(|info| !m.owns(info.field)) {
            continue;
        }
        write_field(w, m, number);
    }
}

/// Writes `m` as an `ofp_match`, padded to eight bytes.
pub fn write_match(w: &mut Writer, m: &Match) {
    let start = w.len();
    w.u16(MATCH_TYPE_OXM).u16(0);
    write_oxms(w, m);
    w.set_len(start + 2, start);
    w.pad8();
}

/// The match a PACKET_IN carries: the input port only.
pub fn write_in_port_match(w: &mut Writer, in_port: u32) {
    let start = w.len();
    w.u16(MATCH_TYPE_OXM).u16(0);
    write_oxm(w, field_no::IN_PORT, 4, u128::from(in_port), None);
    w.set_len(start + 2, start);
    w.pad8();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::flow_parse::parse_match;

    fn encoded(text: &str) -> Vec<u8> {
        let mut w = Writer::default();
        write_match(&mut w, &parse_match(text).unwrap().flow_match);
        w.bytes
    }

    fn decoded(bytes: &[u8]) -> Result<Match, OfpError> {
        read_match(&mut Reader::new(bytes))
    }

    #[test]
    fn in_port_and_eth_type_as_the_specification_lays_them_out() {
        assert_eq!(
            encoded("in_port=3,ip"),
            [
                0, 1, 0, 18, // OXM match, 18 bytes before padding
                0x80, 0, 0, 4, 0, 0, 0, 3, // in_port=3
                0x80, 0, 10, 2, 0x08, 0x00, // eth_type=0x0800
                0, 0, 0, 0, 0, 0, // padding to 24
            ]
        );
    }

    #[test]
    fn flow_syntax_round_trips_through_oxm() {
        for text in [
            "",
            "in_port=1",
            "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
            "dl_vlan=5",
            "dl_vlan=5,dl_vlan_pcp=3",
            "vlan_tci=0",
            "tcp,nw_src=10.0.0.0/8,tp_dst=80",
            "udp,tp_src=53",
            // Port ranges by mask, as Open vSwitch takes them (OpenFlow 1.3 has them exact).
            "tcp,tp_dst=0x1000/0xf000",
            "udp,tp_src=1024/0xfc00,tp_dst=0x50/0xfff0",
            "icmp,icmp_type=8,icmp_code=0",
            "icmp6,icmp_type=135",
            "arp,arp_op=1,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24",
            "ipv6,ipv6_src=2001:db8::/32,nw_proto=17",
            "ip,nw_tos=184",
            "ip,nw_ecn=3",
            "ipv6,nw_tos=8,nw_ecn=1",
            "metadata=0x5",
            "metadata=0x5/0xff,in_port=2",
            "arp,arp_sha=02:00:00:00:00:01,arp_tha=02:00:00:00:00:00/ff:00:00:00:00:00",
            "ipv6,ipv6_src=2001:db8::1,ipv6_dst=::2",
            "in_port=10,tun_id=42,tun_src=192.168.77.2,tun_dst=192.168.77.0/24",
            "reg0=0x5,reg15=0x100/0xff00,ip",
            "ipv6,nw_ttl=64",
            "tcp,tcp_flags=+syn-ack",
            "tcp6,tcp_flags=fin|ack",
            "ipv6,ipv6_label=0x12345",
            "ipv6,ipv6_label=0x10000/0xf0000",
        ] {
            let spec = parse_match(text).unwrap();
            assert_eq!(decoded(&encoded(text)), Ok(spec.flow_match), "{text}");
        }
    }

    #[test]
    fn bad_matches_get_the_specifications_errors() {
        let match_of = |oxms: &[u8]| {
            let mut w = Writer::default();
            w.u16(1).u16(4 + oxms.len() as u16).slice(oxms).pad8();
            decoded(&w.bytes)
        };
        // tcp_dst without ip_proto=6.
        assert_eq!(
            match_of(&[0x80, 0, 28, 2, 0, 80]),
            Err(bad_match::BAD_PREREQ)
        );
        // in_port twice.
        let twice = [0x80, 0, 0, 4, 0, 0, 0, 1, 0x80, 0, 0, 4, 0, 0, 0, 2];
        assert_eq!(match_of(&twice), Err(bad_match::DUP_FIELD));
        // in_port with a mask.
        let masked = [0x80, 0, 1, 8, 0, 0, 0, 1, 0, 0, 0, 1];
        assert_eq!(match_of(&masked), Err(bad_match::BAD_MASK));
        // in_phy_port: not a field of ours.
        assert_eq!(
            match_of(&[0x80, 0, 2, 4, 0, 0, 0, 1]),
            Err(bad_match::BAD_FIELD)
        );
        // ip_ecn without eth_type ip; arp_sha without eth_type arp.
        assert_eq!(match_of(&[0x80, 0, 18, 1, 1]), Err(bad_match::BAD_PREREQ));
        let sha = [0x80, 0, 48, 6, 2, 0, 0, 0, 0, 1];
        assert_eq!(match_of(&sha), Err(bad_match::BAD_PREREQ));
        // ip_ecn of 4: two bits only.
        let ecn = [0x80, 0, 10, 2, 0x08, 0, 0x80, 0, 18, 1, 4];
        assert_eq!(match_of(&ecn), Err(bad_match::BAD_VALUE));
        // A field whose length runs past the match.
        assert_eq!(match_of(&[0x80, 0, 0, 200, 0]), Err(bad_match::BAD_LEN));
        // ip_dscp of 64: six bits only.
        let dscp = [0x80, 0, 10, 2, 0x08, 0, 0x80, 0, 16, 1, 64];
        assert_eq!(match_of(&dscp), Err(bad_match::BAD_VALUE));
        // A match whose length field runs past the message.
        assert_eq!(decoded(&[0, 1, 0, 40, 0, 0]), Err(bad_match::BAD_LEN));
    }

    /// `tcp_flags` goes out as Nicira's field and comes in as that or as ONF's experimenter
    /// field (as Open vSwitch sends it over OpenFlow 1.3); the flow label is a basic field.
    #[test]
    fn tcp_flags_and_the_flow_label() {
        let tcp = [0x80, 0, 10, 2, 0x08, 0, 0x80, 0, 20, 1, 6]; // eth_type ip, ip_proto 6
        let nicira = [0, 1, 34 << 1 | 1, 4, 0, 0x02, 0, 0x12]; // NXM_NX_TCP_FLAGS, masked
        let header = [0, 1, 0, 4 + (tcp.len() + nicira.len()) as u8];
        let mut expected = [&header[..], &tcp, &nicira].concat();
        expected.resize(expected.len().next_multiple_of(8), 0);
        assert_eq!(encoded("tcp,tcp_flags=+syn-ack"), expected);
        let onf = [
            0xff,
            0xff,
            42 << 1 | 1,
            8,
            0x4f,
            0x4e,
            0x46,
            0,
            0,
            0x02,
            0,
            0x12,
        ];
        let header = [0, 1, 0, 4 + (tcp.len() + onf.len()) as u8];
        let mut bytes = [&header[..], &tcp, &onf].concat();
        bytes.resize(bytes.len().next_multiple_of(8), 0);
        let want = parse_match("tcp,tcp_flags=+syn-ack").unwrap().flow_match;
        assert_eq!(decoded(&bytes), Ok(want));
        // Another experimenter's field, or ONF's without its id, is none of ours.
        bytes[19] = 0x47;
        assert_eq!(decoded(&bytes), Err(bad_match::BAD_FIELD));
        let cut = [
            0,
            1,
            0,
            8,
            0xff,
            0xff,
            42 << 1,
            2,
            0,
            0x02,
            0,
            0,
            0,
            0,
            0,
            0,
        ];
        assert_eq!(decoded(&cut), Err(bad_match::BAD_LEN));
        // tcp_flags needs TCP; the flow label IPv6, and 20 bits.
        let udp = [0x80, 0, 10, 2, 0x08, 0, 0x80, 0, 20, 1, 17];
        let header = [0, 1, 0, 4 + (udp.len() + nicira.len()) as u8];
        let mut bytes = [&header[..], &udp, &nicira].concat();
        bytes.resize(bytes.len().next_multiple_of(8), 0);
        assert_eq!(decoded(&bytes), Err(bad_match::BAD_PREREQ));
        let label = |value: u8| {
            let oxms = [
                0x80,
                0,
                10,
                2,
                0x86,
                0xdd,
                0x80,
                0,
                28 << 1,
                4,
                0,
                value,
                0,
                1,
            ];
            let mut bytes = [&[0, 1, 0, 4 + oxms.len() as u8][..], &oxms].concat();
            bytes.resize(bytes.len().next_multiple_of(8), 0);
            decoded(&bytes)
        };
        let want = parse_match("ipv6,ipv6_label=0xf0001").unwrap().flow_match;
        assert_eq!(label(0x0f), Ok(want));
        assert_eq!(label(0x10), Err(bad_match::BAD_VALUE));
    }

    #[test]
    fn tunnel_addresses_are_nicira_fields() {
        let header = [0, 1, 0, 12]; // OXM match, 12 bytes before padding
        let tun_src = [0, 1, 31 << 1, 4]; // NXM_NX_TUN_IPV4_SRC, 4 bytes
        let address = [192, 168, 77, 2];
        let padding = [0; 4];
        let nicira = [header, tun_src, address, padding].concat();
        assert_eq!(encoded("tun_src=192.168.77.2"), nicira);
        // A basic-class field of our number for it is not it.
        let basic = [header, [0x80, 0, 100 << 1, 4], address, padding].concat();
        assert_eq!(decoded(&basic), Err(bad_match::BAD_FIELD));
        // NXM_NX_REG3 as ovs-ofctl sends reg3=0x5.
        let reg3 = [0, 1, 3 << 1, 4];
        assert_eq!(
            encoded("reg3=5"),
            [header, reg3, [0, 0, 0, 5], padding].concat()
        );
        assert_eq!(
            decoded(&[header, [0, 1, 16 << 1, 4], [0, 0, 0, 5], padding].concat()),
            Err(bad_match::BAD_FIELD),
            "field 16 of the class is tun_id, eight bytes, not taken here"
        );
    }

    #[test]
    fn ovs_ofctl_vlan_vid_none_and_present() {
        // vlan_vid=0x0000 (OFPVID_NONE): untagged only.
        let none = [0, 1, 0, 10, 0x80, 0, 12, 2, 0, 0, 0, 0, 0, 0, 0, 0];
        let m = decoded(&none).unwrap();
        assert_eq!(m.field(Field::VlanTci), (0, 0xffff));
        // vlan_vid=0x1000/0x1000: any tag.
        let any = [0, 1, 0, 12, 0x80, 0, 13, 4, 0x10, 0, 0x10, 0, 0, 0, 0, 0];
        let m = decoded(&any).unwrap();
        assert_eq!(m.field(Field::VlanTci), (0x1000, 0x1000));
    }
}
