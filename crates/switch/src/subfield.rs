//! Bits of a field as Open vSwitch's `load` and `move` actions name them, `NXM_NX_REG0[0..15]`
//! or `NXM_OF_ETH_SRC[]`: a field by its NXM name (Nicira's numbering, which those actions
//! carry on the wire) and a run of its bits, counted from the least significant.
//!
//! An NXM field's bits are our field's bits at the same places: `NXM_OF_IN_PORT` is the low
//! 16 bits of `in_port`, and `NXM_NX_IP_ECN`, a byte on the wire, has the two bits of
//! `nw_ecn` (as in Open vSwitch, where it is two bits wide).

use core::fmt;

use crate::action::SETTABLE_FIELDS;
use crate::field::{Field, parse_uint};
use crate::flow_match::Prerequisite;

/// One NXM field: its name, its header's class and number, its width in bytes, and ours.
pub struct NxmField {
    pub name: &'static str,
    pub class: u16,
    pub number: u8,
    pub bytes: u8,
    pub field: Field,
}

const NXM_OF: u16 = 0x0000;
const NXM_NX: u16 = 0x0001;
const OXM_OF: u16 = 0x8000;

const fn nxm(name: &'static str, class: u16, number: u8, bytes: u8, field: Field) -> NxmField {
    NxmField {
        name,
        class,
        number,
        bytes,
        field,
    }
}

/// The fields `load` and `move` may name: each of ours once at least (`tcp_src` and
/// `udp_src` are both `tp_src`), metadata by its OXM name as ovs-ofctl writes it (it has no
/// NXM one). Geneve's options are not here: their NXM fields are variable-length.
const NXM_FIELDS: [NxmField; 48] = [
    nxm("NXM_OF_IN_PORT", NXM_OF, 0, 2, Field::InPort),
    nxm("NXM_OF_ETH_DST", NXM_OF, 1, 6, Field::DlDst),
    nxm("NXM_OF_ETH_SRC", NXM_OF, 2, 6, Field::DlSrc),
    nxm("NXM_OF_ETH_TYPE", NXM_OF, 3, 2, Field::DlType),
    nxm("NXM_OF_VLAN_TCI", NXM_OF, 4, 2, Field::VlanTci),
    nxm("NXM_OF_IP_TOS", NXM_OF, 5, 1, Field::NwTos),
    nxm("NXM_OF_IP_PROTO", NXM_OF, 6, 1, Field::NwProto),
    nxm("NXM_OF_IP_SRC", NXM_OF, 7, 4, Field::NwSrc),
    nxm("NXM_OF_IP_DST", NXM_OF, 8, 4, Field::NwDst),
    nxm("NXM_OF_TCP_SRC", NXM_OF, 9, 2, Field::TpSrc),
    nxm("NXM_OF_TCP_DST", NXM_OF, 10, 2, Field::TpDst),
    nxm("NXM_OF_UDP_SRC", NXM_OF, 11, 2, Field::TpSrc),
    nxm("NXM_OF_UDP_DST", NXM_OF, 12, 2, Field::TpDst),
    nxm("NXM_OF_ICMP_TYPE", NXM_OF, 13, 1, Field::IcmpType),
    nxm("NXM_OF_ICMP_CODE", NXM_OF, 14, 1, Field::IcmpCode),
    nxm("NXM_OF_ARP_OP", NXM_OF, 15, 2, Field::ArpOp),
    nxm("NXM_OF_ARP_SPA", NXM_OF, 16, 4, Field::ArpSpa),
    nxm("NXM_OF_ARP_TPA", NXM_OF, 17, 4, Field::ArpTpa),
    nxm("NXM_NX_REG0", NXM_NX, 0, 4, Field::Reg(0)),
    nxm("NXM_NX_REG1", NXM_NX, 1, 4, Field::Reg(1)),
    nxm("NXM_NX_REG2", NXM_NX, 2, 4, Field::Reg(2)),
    nxm("NXM_NX_REG3", NXM_NX, 3, 4, Field::Reg(3)),
    nxm("NXM_NX_REG4", NXM_NX, 4, 4, Field::Reg(4)),
    nxm("NXM_NX_REG5", NXM_NX, 5, 4, Field::Reg(5)),
    nxm("NXM_NX_REG6", NXM_NX, 6, 4, Field::Reg(6)),
    nxm("NXM_NX_REG7", NXM_NX, 7, 4, Field::Reg(7)),
    nxm("NXM_NX_REG8", NXM_NX, 8, 4, Field::Reg(8)),
    nxm("NXM_NX_REG9", NXM_NX, 9, 4, Field::Reg(9)),
    nxm("NXM_NX_REG10", NXM_NX, 10, 4, Field::Reg(10)),
    nxm("NXM_NX_REG11", NXM_NX, 11, 4, Field::Reg(11)),
    nxm("NXM_NX_REG12", NXM_NX, 12, 4, Field::Reg(12)),
    nxm("NXM_NX_REG13", NXM_NX, 13, 4, Field::Reg(13)),
    nxm("NXM_NX_REG14", NXM_NX, 14, 4, Field::Reg(14)),
    nxm("NXM_NX_REG15", NXM_NX, 15, 4, Field::Reg(15)),
    nxm("NXM_NX_TUN_ID", NXM_NX, 16, 8, Field::TunId),
    nxm("NXM_NX_ARP_SHA", NXM_NX, 17, 6, Field::ArpSha),
    nxm("NXM_NX_ARP_THA", NXM_NX, 18, 6, Field::ArpTha),
    nxm("NXM_NX_IPV6_SRC", NXM_NX, 19, 16, Field::Ipv6Src),
    nxm("NXM_NX_IPV6_DST", NXM_NX, 20, 16, Field::Ipv6Dst),
    nxm("NXM_NX_ICMPV6_TYPE", NXM_NX, 21, 1, Field::IcmpType),
    nxm("NXM_NX_ICMPV6_CODE", NXM_NX, 22, 1, Field::IcmpCode),
    nxm("NXM_NX_IPV6_LABEL", NXM_NX, 27, 4, Field::Ipv6Label),
    nxm("NXM_NX_IP_ECN", NXM_NX, 28, 1, Field::NwEcn),
    nxm("NXM_NX_IP_TTL", NXM_NX, 29, 1, Field::NwTtl),
    nxm("NXM_NX_TUN_IPV4_SRC", NXM_NX, 31, 4, Field::TunSrc),
    nxm("NXM_NX_TUN_IPV4_DST", NXM_NX, 32, 4, Field::TunDst),
    nxm("NXM_NX_TCP_FLAGS", NXM_NX, 34, 2, Field::TcpFlags),
    nxm("OXM_OF_METADATA", OXM_OF, 2, 8, Field::Metadata),
];

/// Which NXM field: an index into the table above.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct Nxm(u8);

impl Nxm {
    /// Every NXM field `load` and `move` may name.
    pub fn all() -> impl Iterator<Item = Nxm> {
        (0..NXM_FIELDS.len() as u8).map(Nxm)
    }

    pub fn info(self) -> &'static NxmField {
        &NXM_FIELDS[usize::from(self.0)]
    }

    pub fn field(self) -> Field {
        self.info().field
    }

    /// What a rule's match must pin down to read or write it: its field's, or its own
    /// protocol's where the field is several protocols' (`NXM_OF_UDP_SRC` wants udp).
    pub fn prerequisite(self) -> Prerequisite {
        match (self.info().class, self.info().number) {
            (NXM_OF, 9 | 10) => Prerequisite::Tcp,
            (NXM_OF, 11 | 12) => Prerequisite::Udp,
            (NXM_OF, 13 | 14) => Prerequisite::Icmpv4,
            (NXM_NX, 21 | 22) => Prerequisite::Icmpv6,
            _ => Prerequisite::of(self.field()),
        }
    }

    /// Its width in bits: its bytes', or fewer where our field holds fewer.
    pub fn bits(self) -> u32 {
        let f = self.info();
        (u32::from(f.bytes) * 8).min(f.field.width())
    }

    fn find(found: impl Fn(&NxmField) -> bool) -> Option<Nxm> {
        NXM_FIELDS.iter().position(found).map(|i| Nxm(i as u8))
    }

    /// The field an NXM header names (class, number and length; a header with a mask is
    /// none of these).
    pub fn of_header(header: u32) -> Option<Nxm> {
        let (class, number, bytes) = (
            (header >> 16) as u16,
            (header >> 9) as u8 & 0x7f,
            header as u8,
        );
        let has_mask = header & 0x100 != 0;
        Nxm::find(|f| f.class == class && f.number == number && f.bytes == bytes && !has_mask)
    }

    /// The header ovs-ofctl writes for the field.
    pub fn header(self) -> u32 {
        let f = self.info();
        u32::from(f.class) << 16 | u32::from(f.number) << 9 | u32::from(f.bytes)
    }

    /// The field named `name`: its NXM name, or the flow-syntax name of its field
    /// (`reg0`, `eth_src`, `udp_src`), as ovs-ofctl takes both.
    pub fn from_name(name: &str) -> Option<Nxm> {
        if let Some(nxm) = Nxm::find(|f| f.name.eq_ignore_ascii_case(name)) {
            return Some(nxm);
        }
        let by_protocol = match name {
            "tcp_src" => Some("NXM_OF_TCP_SRC"),
            "tcp_dst" => Some("NXM_OF_TCP_DST"),
            "udp_src" => Some("NXM_OF_UDP_SRC"),
            "udp_dst" => Some("NXM_OF_UDP_DST"),
            "icmpv6_type" => Some("NXM_NX_ICMPV6_TYPE"),
            "icmpv6_code" => Some("NXM_NX_ICMPV6_CODE"),
            _ => None,
        };
        if let Some(nxm_name) = by_protocol {
            return Nxm::find(|f| f.name == nxm_name);
        }
        let field = Field::from_name(name)?;
        Nxm::find(|f| f.field == field)
    }
}

/// A run of bits of an NXM field: `n_bits` from bit `ofs` up.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub struct Subfield {
    pub nxm: Nxm,
    pub ofs: u8,
    pub n_bits: u8,
}

/// Why a subfield or a `load` / `move` is refused.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SubfieldError {
    /// The bits run past the field's end (or there are none).
    OutOfRange,
    /// The field cannot be written.
    ReadOnly,
    /// A `move`'s source and destination differ in width.
    WidthsDiffer,
    /// A `load`'s value has bits past the destination's width.
    ValueTooWide,
}

impl fmt::Display for SubfieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SubfieldError::OutOfRange => "the bits lie outside the field",
            SubfieldError::ReadOnly => "the field cannot be written",
            SubfieldError::WidthsDiffer => "source and destination differ in width",
            SubfieldError::ValueTooWide => "the value does not fit in the bits",
        })
    }
}

impl Subfield {
    /// `n_bits` of `nxm` from bit `ofs` up, if they are within it.
    pub fn new(nxm: Nxm, ofs: u32, n_bits: u32) -> Result<Subfield, SubfieldError> {
        // In 64 bits: hostile numbers near u32::MAX must not wrap into range.
        if n_bits == 0 || u64::from(ofs) + u64::from(n_bits) > u64::from(nxm.bits()) {
            return Err(SubfieldError::OutOfRange);
        }
        Ok(Subfield {
            nxm,
            ofs: ofs as u8,
            n_bits: n_bits as u8,
        })
    }

    /// All of the field.
    pub fn whole(nxm: Nxm) -> Subfield {
        Subfield {
            nxm,
            ofs: 0,
            n_bits: nxm.bits() as u8,
        }
    }

    pub fn field(self) -> Field {
        self.nxm.field()
    }

    /// The bits, within our field's value.
    pub fn mask(self) -> u128 {
        let ones = match self.n_bits {
            128 => u128::MAX,
            n => (1u128 << n) - 1,
        };
        ones << self.ofs
    }

    /// The bits' value in `flow`, shifted down to bit 0.
    pub fn get(self, flow: &crate::field::FlowBits) -> u128 {
        (self.field().get(flow) & self.mask()) >> self.ofs
    }

    /// Writes `value` (its low `n_bits`) into the bits, leaving the field's others.
    pub fn set(self, flow: &mut crate::field::FlowBits, value: u128) {
        let field = self.field();
        let mut mask = self.mask();
        // nw_tos holds the DSCP bits only (its ECN bits are nw_ecn's), as Open vSwitch keeps it.
        if field == Field::NwTos {
            mask &= 0xfc;
        }
        let old = field.get(flow);
        field.set(flow, (old & !mask) | ((value << self.ofs) & mask));
    }

    /// Whether `load` and `move` may write here: the pipeline's state or a field `set_field`
    /// writes (the datapath then writes the whole field).
    pub fn writable(self) -> Result<(), SubfieldError> {
        let field = self.field();
        match field.is_pipeline_state() || SETTABLE_FIELDS.contains(&field) {
            true => Ok(()),
            false => Err(SubfieldError::ReadOnly),
        }
    }

    /// Parses `NAME[]`, `NAME[BIT]`, `NAME[START..END]` or a bare `NAME` (all its bits).
    pub fn parse(text: &str) -> Result<Subfield, String> {
        let (name, range) = match text.split_once('[') {
            Some((name, rest)) => {
                let range = rest
                    .strip_suffix(']')
                    .ok_or_else(|| format!("{text}: missing ']'"))?;
                (name, Some(range))
            }
            None => (text, None),
        };
        let nxm = Nxm::from_name(name).ok_or_else(|| format!("{text}: unknown field '{name}'"))?;
        let bit = |s: &str| {
            parse_uint(s)
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{text}: '{s}' is not a bit number"))
        };
        let subfield = match range {
            None | Some("") => return Ok(Subfield::whole(nxm)),
            Some(range) => match range.split_once("..") {
                Some((start, end)) => {
                    let (start, end) = (bit(start)?, bit(end)?);
                    if end < start {
                        return Err(format!("{text}: the range ends before it starts"));
                    }
                    Subfield::new(nxm, start, (end - start).saturating_add(1))
                }
                None => Subfield::new(nxm, bit(range)?, 1),
            },
        };
        subfield.map_err(|_| format!("{text}: {} is {} bits wide", nxm.info().name, nxm.bits()))
    }
}

impl fmt::Display for Subfield {
    /// ovs-ofctl's spelling: `NXM_NX_REG0[]` for all of it, `[3]` for one bit, else `[0..15]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.nxm.info().name)?;
        match (self.ofs, u32::from(self.n_bits)) {
            (0, n) if n == self.nxm.bits() => f.write_str("[]"),
            (ofs, 1) => write!(f, "[{ofs}]"),
            (ofs, n) => write!(f, "[{ofs}..{}]", u32::from(ofs) + n - 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::FlowBits;

    #[test]
    fn parses_and_prints_as_ovs_ofctl() {
        for (text, printed) in [
            ("NXM_NX_REG0[]", "NXM_NX_REG0[]"),
            ("reg3[0..15]", "NXM_NX_REG3[0..15]"),
            ("NXM_OF_ETH_SRC[40]", "NXM_OF_ETH_SRC[40]"),
            ("in_port", "NXM_OF_IN_PORT[]"),
            ("udp_dst[]", "NXM_OF_UDP_DST[]"),
            ("tp_dst[]", "NXM_OF_TCP_DST[]"),
            ("metadata[0..31]", "OXM_OF_METADATA[0..31]"),
            ("NXM_NX_IPV6_SRC[64..127]", "NXM_NX_IPV6_SRC[64..127]"),
        ] {
            assert_eq!(
                Subfield::parse(text).unwrap().to_string(),
                printed,
                "{text}"
            );
        }
        assert_eq!(
            Subfield::parse("NXM_NX_REG0[0..32]").unwrap_err(),
            "NXM_NX_REG0[0..32]: NXM_NX_REG0 is 32 bits wide"
        );
        assert_eq!(
            Subfield::parse("NXM_NX_REG16[]").unwrap_err(),
            "NXM_NX_REG16[]: unknown field 'NXM_NX_REG16'"
        );
        assert!(Subfield::parse("reg0[5..1]").is_err());
        // Numbers that would wrap a 32-bit sum.
        assert!(Subfield::parse("reg0[4294967295]").is_err());
        assert!(Subfield::parse("reg0[0..4294967295]").is_err());
        assert!(Subfield::parse("reg0[4294967295..4294967295]").is_err());
        assert!(Subfield::parse("reg0[0..x]").is_err());
    }

    #[test]
    fn headers_name_the_fields_both_ways() {
        // NXM_NX_REG5, four bytes: class 1, number 5.
        let reg5 = Nxm::of_header(0x0001_0a04).unwrap();
        assert_eq!(reg5.field(), Field::Reg(5));
        assert_eq!(reg5.header(), 0x0001_0a04);
        assert_eq!(Nxm::of_header(0x0001_0b08), None, "with a mask");
        let udp = Nxm::from_name("udp_src").unwrap();
        assert_eq!(Nxm::of_header(udp.header()), Some(udp));
        let tcp = Nxm::from_name("tcp_src").unwrap();
        assert_eq!(Nxm::of_header(tcp.header()), Some(tcp));
        let mut flow = FlowBits::ZERO;
        Subfield::parse("NXM_OF_IP_TOS[]")
            .unwrap()
            .set(&mut flow, 0xbb);
        assert_eq!(
            Field::NwTos.get(&flow),
            0xb8,
            "the ECN bits are not nw_tos's"
        );
        let ecn = Nxm::from_name("NXM_NX_IP_ECN").unwrap();
        assert_eq!(
            (ecn.bits(), Subfield::whole(ecn).to_string()),
            (2, "NXM_NX_IP_ECN[]".into())
        );
    }

    #[test]
    fn bits_read_and_write_in_place() {
        let mut flow = FlowBits::ZERO;
        let reg = Subfield::parse("reg1[8..15]").unwrap();
        Field::Reg(1).set(&mut flow, 0xaaaa_aaaa);
        reg.set(&mut flow, 0x1ff);
        assert_eq!(Field::Reg(1).get(&flow), 0xaaaa_ffaa);
        assert_eq!(reg.get(&flow), 0xff);
        let in_port = Subfield::parse("NXM_OF_IN_PORT[]").unwrap();
        Field::InPort.set(&mut flow, 0x0001_0007);
        assert_eq!(in_port.get(&flow), 7);
        assert_eq!(
            Subfield::parse("NXM_OF_VLAN_TCI[]").unwrap().writable(),
            Err(SubfieldError::ReadOnly)
        );
        assert_eq!(Subfield::parse("reg1[]").unwrap().writable(), Ok(()));
        assert_eq!(Subfield::parse("eth_dst[]").unwrap().writable(), Ok(()));
    }
}
