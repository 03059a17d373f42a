//! A match: a masked flow (value and mask per field) and the protocol prerequisites of fields.

use core::fmt;

use wirespeed_packet::{EtherType, IpProtocol};

use crate::field::{Field, FlowBits};

// The numbers `wirespeed_packet` names, widened to a field's value (a match compares `u128`s
// and a constant pattern cannot read a tuple struct's field).
pub const DL_TYPE_IPV4: u128 = EtherType::IPV4.0 as u128;
pub const DL_TYPE_ARP: u128 = EtherType::ARP.0 as u128;
pub const DL_TYPE_IPV6: u128 = EtherType::IPV6.0 as u128;
pub const NW_PROTO_ICMP: u128 = IpProtocol::ICMP.0 as u128;
pub const NW_PROTO_TCP: u128 = IpProtocol::TCP.0 as u128;
pub const NW_PROTO_UDP: u128 = IpProtocol::UDP.0 as u128;
pub const NW_PROTO_ICMPV6: u128 = IpProtocol::ICMPV6.0 as u128;

/// What a match must pin down before a field can be matched or set.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Prerequisite {
    None,
    Ipv4,
    Ipv6,
    Ip,
    Arp,
    TcpOrUdp,
    Icmp,
    /// One protocol of those, as an NXM field names it (`NXM_OF_UDP_SRC`).
    Tcp,
    Udp,
    Icmpv4,
    Icmpv6,
}

impl Prerequisite {
    pub fn of(field: Field) -> Prerequisite {
        match field {
            Field::NwSrc | Field::NwDst => Prerequisite::Ipv4,
            Field::Ipv6Src | Field::Ipv6Dst | Field::Ipv6Label => Prerequisite::Ipv6,
            Field::NwProto | Field::NwTos | Field::NwEcn | Field::NwTtl => Prerequisite::Ip,
            Field::ArpSpa | Field::ArpTpa | Field::ArpOp | Field::ArpSha | Field::ArpTha => {
                Prerequisite::Arp
            }
            Field::TpSrc | Field::TpDst => Prerequisite::TcpOrUdp,
            Field::TcpFlags => Prerequisite::Tcp,
            Field::IcmpType | Field::IcmpCode => Prerequisite::Icmp,
            Field::InPort
            | Field::Metadata
            | Field::DlSrc
            | Field::DlDst
            | Field::VlanTci
            | Field::DlType
            | Field::TunId
            | Field::TunSrc
            | Field::TunDst
            | Field::TunOpts
            | Field::Reg(_) => Prerequisite::None,
        }
    }

    /// The fields [`Prerequisite::is_met_by`] reads.
    pub fn fields(self) -> &'static [Field] {
        match self {
            Prerequisite::None => &[],
            Prerequisite::Ipv4 | Prerequisite::Ipv6 | Prerequisite::Ip | Prerequisite::Arp => {
                &[Field::DlType]
            }
            _ => &[Field::DlType, Field::NwProto],
        }
    }

    /// True if every packet `flow_match` admits has the protocol this prerequisite asks for.
    pub fn is_met_by(self, flow_match: &Match) -> bool {
        let dl_type = flow_match.exact(Field::DlType);
        let nw_proto = flow_match.exact(Field::NwProto);
        let ip = matches!(dl_type, Some(DL_TYPE_IPV4 | DL_TYPE_IPV6));
        match self {
            Prerequisite::None => true,
            Prerequisite::Ipv4 => dl_type == Some(DL_TYPE_IPV4),
            Prerequisite::Ipv6 => dl_type == Some(DL_TYPE_IPV6),
            Prerequisite::Ip => ip,
            Prerequisite::Arp => dl_type == Some(DL_TYPE_ARP),
            Prerequisite::TcpOrUdp => ip && matches!(nw_proto, Some(NW_PROTO_TCP | NW_PROTO_UDP)),
            Prerequisite::Icmp => {
                Prerequisite::Icmpv4.is_met_by(flow_match)
                    || Prerequisite::Icmpv6.is_met_by(flow_match)
            }
            Prerequisite::Tcp => ip && nw_proto == Some(NW_PROTO_TCP),
            Prerequisite::Udp => ip && nw_proto == Some(NW_PROTO_UDP),
            Prerequisite::Icmpv4 => {
                (dl_type, nw_proto) == (Some(DL_TYPE_IPV4), Some(NW_PROTO_ICMP))
            }
            Prerequisite::Icmpv6 => {
                (dl_type, nw_proto) == (Some(DL_TYPE_IPV6), Some(NW_PROTO_ICMPV6))
            }
        }
    }

    /// What to write in the match, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            Prerequisite::None => "nothing",
            Prerequisite::Ipv4 => "ip (dl_type=0x0800)",
            Prerequisite::Ipv6 => "ipv6 (dl_type=0x86dd)",
            Prerequisite::Ip => "ip or ipv6 (dl_type)",
            Prerequisite::Arp => "arp (dl_type=0x0806)",
            Prerequisite::TcpOrUdp => "tcp or udp (dl_type and nw_proto)",
            Prerequisite::Icmp => {
                "icmp (dl_type=0x0800,nw_proto=1) or icmp6 (dl_type=0x86dd,nw_proto=58)"
            }
            Prerequisite::Tcp => "tcp or tcp6 (nw_proto=6)",
            Prerequisite::Udp => "udp or udp6 (nw_proto=17)",
            Prerequisite::Icmpv4 => "icmp (dl_type=0x0800,nw_proto=1)",
            Prerequisite::Icmpv6 => "icmp6 (dl_type=0x86dd,nw_proto=58)",
        }
    }
}

/// The packets a rule applies to: those whose flow equals `value` where `mask` has ones.
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug, Hash)]
pub struct Match {
    value: FlowBits,
    mask: FlowBits,
}

/// Why a field could not be added to a match: it contradicts what the match already says.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ConflictError {
    pub field: Field,
}

impl Match {
    /// The match of every packet.
    pub const ANY: Match = Match {
        value: FlowBits::ZERO,
        mask: FlowBits::ZERO,
    };

    /// Builds a match from a value and mask (the value is masked here).
    pub fn new(value: FlowBits, mask: FlowBits) -> Match {
        Match {
            value: value.and(&mask),
            mask,
        }
    }

    /// The match of exactly one flow.
    pub fn exactly(flow: &FlowBits) -> Match {
        Match::new(*flow, FlowBits::ALL_ONES)
    }

    pub fn value(&self) -> &FlowBits {
        &self.value
    }

    pub fn mask(&self) -> &FlowBits {
        &self.mask
    }

    pub fn matches(&self, flow: &FlowBits) -> bool {
        flow.matches(&self.value, &self.mask)
    }

    /// The (value, mask) of one field.
    pub fn field(&self, field: Field) -> (u128, u128) {
        (field.get(&self.value), field.get(&self.mask))
    }

    /// The field's value if the match pins all of its bits.
    pub fn exact(&self, field: Field) -> Option<u128> {
        let (value, mask) = self.field(field);
        (mask == field.full_mask()).then_some(value)
    }

    pub fn is_wildcarded(&self, field: Field) -> bool {
        field.get(&self.mask) == 0
    }

    /// Adds `field & mask == value & mask`; bits the match already constrains must agree.
    pub fn add(&mut self, field: Field, value: u128, mask: u128) -> Result<(), ConflictError> {
        let (old_value, old_mask) = self.field(field);
        let mask = mask & field.full_mask();
        let value = value & mask;
        if (old_value ^ value) & old_mask & mask != 0 {
            return Err(ConflictError { field });
        }
        field.set(&mut self.value, old_value | value);
        field.set(&mut self.mask, old_mask | mask);
        Ok(())
    }

    /// Sets the field's value and mask, replacing what was there.
    pub fn set(&mut self, field: Field, value: u128, mask: u128) {
        let mask = mask & field.full_mask();
        field.set(&mut self.value, value & mask);
        field.set(&mut self.mask, mask);
    }

    /// True if every packet `other` admits is admitted by `self` (ovs-ofctl's non-strict
    /// `del-flows` / `mod-flows` selection: rules at least as specific as the given match).
    pub fn covers(&self, other: &Match) -> bool {
        self.mask.is_subset_of(&other.mask) && other.value.and(&self.mask) == self.value
    }

    /// Whether the bits of `field` are that field's here, not those of the field it shares
    /// them with ([`Field::overlaps`]): they are unless the other's prerequisite is met.
    pub fn owns(&self, field: Field) -> bool {
        field
            .overlaps()
            .is_none_or(|other| !Prerequisite::of(other).is_met_by(self))
    }

    /// The first field whose prerequisite the match does not meet.
    pub fn unmet_prerequisite(&self) -> Option<(Field, Prerequisite)> {
        Field::ALL
            .into_iter()
            .filter(|&field| !self.is_wildcarded(field) && self.owns(field))
            .map(|field| (field, Prerequisite::of(field)))
            .find(|(_, prerequisite)| !prerequisite.is_met_by(self))
    }
}

impl fmt::Display for ConflictError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conflicts with an earlier match on {}", self.field)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tcp_match() -> Match {
        let mut flow_match = Match::ANY;
        flow_match
            .add(Field::DlType, DL_TYPE_IPV4, u128::MAX)
            .unwrap();
        flow_match
            .add(Field::NwProto, NW_PROTO_TCP, u128::MAX)
            .unwrap();
        flow_match
    }

    #[test]
    fn add_merges_and_detects_conflicts() {
        let mut flow_match = tcp_match();
        assert_eq!(flow_match.add(Field::NwProto, 6, 0xff), Ok(()));
        assert_eq!(
            flow_match.add(Field::NwProto, 17, 0xff),
            Err(ConflictError {
                field: Field::NwProto
            })
        );
        // dl_vlan and dl_vlan_pcp share vlan_tci and agree on the present bit.
        flow_match.add(Field::VlanTci, 0x1064, 0x1fff).unwrap();
        flow_match.add(Field::VlanTci, 0xb000, 0xf000).unwrap();
        assert_eq!(flow_match.field(Field::VlanTci), (0xb064, 0xffff));
    }

    #[test]
    fn prerequisites() {
        let mut flow_match = Match::ANY;
        flow_match.add(Field::TpSrc, 80, 0xffff).unwrap();
        assert_eq!(
            flow_match.unmet_prerequisite(),
            Some((Field::TpSrc, Prerequisite::TcpOrUdp))
        );
        let mut flow_match = tcp_match();
        flow_match.add(Field::TpSrc, 80, 0xffff).unwrap();
        assert_eq!(flow_match.unmet_prerequisite(), None);
        // In a TCP match, the bits ARP's opcode shares are TCP's flags.
        flow_match.add(Field::ArpOp, 1, 0xffff).unwrap();
        assert_eq!(flow_match.unmet_prerequisite(), None);
        assert!(flow_match.owns(Field::TcpFlags) && !flow_match.owns(Field::ArpOp));
        flow_match.add(Field::ArpTpa, 1, 0xffff_ffff).unwrap();
        assert_eq!(
            flow_match.unmet_prerequisite(),
            Some((Field::ArpTpa, Prerequisite::Arp))
        );
    }

    #[test]
    fn covers_is_less_or_equally_specific() {
        let tcp = tcp_match();
        let mut web = tcp;
        web.add(Field::TpDst, 80, 0xffff).unwrap();
        assert!(Match::ANY.covers(&web));
        assert!(tcp.covers(&web));
        assert!(!web.covers(&tcp));
        assert!(web.covers(&web));
        let mut udp = Match::ANY;
        udp.add(Field::NwProto, NW_PROTO_UDP, u128::MAX).unwrap();
        assert!(!udp.covers(&web));
    }
}
