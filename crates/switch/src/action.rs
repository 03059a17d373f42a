//! OpenFlow-style actions, what they do to a flow during translation, and how they print.
//!
//! A new action touches, besides [`Action`] and its `Display` here:
//! - `ofctl/action_parse.rs`: its ovs-ofctl spelling (and `tests/flow_syntax_round_trip.rs`,
//!   which prints and parses every action back);
//! - `openflow/actions.rs`: its OpenFlow 1.3 or Nicira encoding, both ways (where it may
//!   go: apply, write, a group's bucket), and `openflow/reply.rs`'s table and group features
//!   that list the action types;
//! - `ofproto/translate.rs`: what it does to the flow as a miss is translated (the fields it
//!   reads go into the megaflow's mask) and whether it reaches the datapath's actions;
//! - `execute/mod.rs`: what it does to a frame (`execute/rewrite.rs` for header rewrites);
//! - the kernel fast path (`offload/`), which takes only the flows it can forward itself:
//!   an action it cannot do keeps the flow in user space;
//! - an integration test against ovs-ofctl in `crates/cli/tests/switch_openflow.rs`.

use core::fmt;

use wirespeed_packet::flow_key::{VLAN_PCP_MASK, VLAN_PRESENT, VLAN_VID_MASK};

use crate::field::{Field, FlowBits};
use crate::flow_match::{DL_TYPE_IPV4, DL_TYPE_IPV6, Prerequisite};
use crate::learn::LearnId;
use crate::subfield::Subfield;

/// The fields `set_field` (and the `mod_*` spellings) may write.
pub const SETTABLE_FIELDS: [Field; 16] = [
    Field::DlSrc,
    Field::DlDst,
    Field::NwSrc,
    Field::NwDst,
    Field::NwTos,
    Field::NwEcn,
    Field::NwTtl,
    Field::TpSrc,
    Field::TpDst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::Ipv6Label,
    Field::ArpSha,
    Field::ArpTha,
    // The VNI an output to a tunnel port with key=flow sends, and the far end one with
    // remote_ip=flow sends to; the packet is not touched.
    Field::TunId,
    Field::TunDst,
];

/// One action of a rule. A rule with no actions drops the packet.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Action {
    Output(u32),
    /// Forward as a MAC-learning switch.
    Normal,
    /// Every port but the input port.
    Flood,
    /// Every port but the input port (OpenFlow's `OFPP_ALL`; no port is excluded from flooding
    /// yet, so the same set as `Flood`).
    All,
    /// Back out of the port the packet came in on.
    InPort,
    /// To the controller, at most this many bytes of the packet (`controller:MAX_LEN`,
    /// 65535 when not given: all of it).
    Controller(u16),
    /// Sets the VLAN id, pushing a tag (priority 0) if the frame is untagged.
    ModVlanVid(u16),
    /// Sets the VLAN priority, pushing a tag (id 0) if the frame is untagged.
    ModVlanPcp(u8),
    StripVlan,
    /// Writes a header field, or a register; `mod_dl_src:X` is `SetField(DlSrc, X)`. For
    /// `nw_tos` the value is the ToS byte with the ECN bits clear (ovs-ofctl's convention).
    SetField(Field, u128),
    /// Nicira's `load:VALUE->DST`: writes a number into some bits of a field.
    Load(Subfield, u64),
    /// Nicira's `move:SRC->DST`: copies bits of one field into as many of another.
    Move(Subfield, Subfield),
    /// Nicira's `output:SRC`: out of the port the bits hold as the action runs (a register
    /// an earlier table loaded); none if they hold no port number.
    OutputReg(Subfield),
    /// Nicira's `learn(...)`: adds a rule built from the packet's fields ([`crate::learn`]).
    Learn(LearnId),
    /// Decrements the IPv4 TTL or IPv6 hop limit; drops the packet if it would reach zero.
    DecTtl,
    /// OpenFlow's `set_queue`: which of the output port's queues the packet leaves by. These
    /// ports have one queue each (nothing configures QoS on them), so it changes nothing the
    /// datapath does, as in Open vSwitch on a port without QoS; it is kept and shown so a
    /// controller's rules with it install and read back as written.
    SetQueue(u32),
    /// Looks the packet up in another table, then carries on with the next action.
    Resubmit(u8),
    /// Continues in a later table; always the last action of a rule.
    GotoTable(u8),
    /// Hands the packet to a group's buckets ([`crate::group`]).
    Group(u32),
    /// OpenFlow's `clear_actions`: empties the action set.
    ClearActions,
    /// OpenFlow's `write_actions`: the next N actions of the list go into the action set,
    /// which runs when the pipeline ends (in the specification's order), not now.
    WriteActions(u8),
    /// OpenFlow's `write_metadata`: the metadata's bits under the mask (second) become the
    /// value's (first), for the tables after this rule; the packet is not touched.
    WriteMetadata(u64, u64),
    /// OpenFlow's `meter` instruction: the packet passes meter N ([`crate::meter`]) or is
    /// dropped by its band. Always the first action of a rule, as the instruction runs first.
    Meter(u32),
}

impl Action {
    /// What the rule's match must pin down for the action to make sense (a `move` reads one
    /// field and writes another: two; a `learn` reads as many as its specs name).
    pub fn prerequisites(&self) -> Vec<Prerequisite> {
        match self {
            Action::SetField(field, _) => vec![Prerequisite::of(*field)],
            Action::Load(dst, _) => vec![dst.nxm.prerequisite()],
            Action::Move(src, dst) => vec![src.nxm.prerequisite(), dst.nxm.prerequisite()],
            Action::OutputReg(src) => vec![src.nxm.prerequisite()],
            Action::Learn(id) => id.get().source_prerequisites().collect(),
            _ => Vec::new(),
        }
    }

    /// Applies the action to the flow a later table will see. When the new value is computed
    /// from the old (not a constant), sets in `dependencies` the bits it was computed from: a
    /// later lookup that examines [`Action::derived_field`] has examined those too.
    pub fn apply_to_flow(&self, flow: &mut FlowBits, dependencies: &mut FlowBits) {
        match *self {
            Action::SetField(field, value) => field.set(flow, value),
            Action::ModVlanVid(vid) => {
                Field::VlanTci.or_mask(dependencies, u128::from(VLAN_PCP_MASK | VLAN_PRESENT));
                let tci = Field::VlanTci.get(flow) as u16;
                let kept = if tci & VLAN_PRESENT != 0 {
                    tci & VLAN_PCP_MASK
                } else {
                    0
                };
                let tci = kept | VLAN_PRESENT | (vid & VLAN_VID_MASK);
                Field::VlanTci.set(flow, u128::from(tci));
            }
            Action::ModVlanPcp(pcp) => {
                Field::VlanTci.or_mask(dependencies, u128::from(VLAN_VID_MASK | VLAN_PRESENT));
                let tci = Field::VlanTci.get(flow) as u16;
                let kept = if tci & VLAN_PRESENT != 0 {
                    tci & VLAN_VID_MASK
                } else {
                    0
                };
                let tci = kept | VLAN_PRESENT | (u16::from(pcp & 0x07) << 13);
                Field::VlanTci.set(flow, u128::from(tci));
            }
            Action::StripVlan => Field::VlanTci.set(flow, 0),
            // What a move reads, the translation un-wildcards as it runs (see
            // `crate::ofproto::translate`), so nothing is noted here.
            Action::Load(dst, value) => dst.set(flow, u128::from(value)),
            Action::Move(src, dst) => dst.set(flow, src.get(flow)),
            // Every packet arrives with metadata zero and only constants are written to it, so
            // the result depends on no packet bits.
            Action::WriteMetadata(value, mask) => {
                let old = Field::Metadata.get(flow) as u64;
                Field::Metadata.set(flow, u128::from((old & !mask) | (value & mask)));
            }
            Action::DecTtl => {
                Field::DlType.or_mask(dependencies, Field::DlType.full_mask());
                Field::NwTtl.or_mask(dependencies, Field::NwTtl.full_mask());
                let dl_type = Field::DlType.get(flow);
                if dl_type == DL_TYPE_IPV4 || dl_type == DL_TYPE_IPV6 {
                    let ttl = Field::NwTtl.get(flow);
                    Field::NwTtl.set(flow, ttl.saturating_sub(1));
                }
            }
            _ => {}
        }
    }

    /// The field whose new value [`Action::apply_to_flow`] computes from packet bits, if any.
    pub fn derived_field(&self) -> Option<Field> {
        match self {
            Action::ModVlanVid(_) | Action::ModVlanPcp(_) => Some(Field::VlanTci),
            Action::DecTtl => Some(Field::NwTtl),
            _ => None,
        }
    }

    /// True for the actions that only steer the lookup and never reach the datapath.
    pub fn is_table_jump(&self) -> bool {
        matches!(
            self,
            Action::Resubmit(_)
                | Action::GotoTable(_)
                | Action::Group(_)
                | Action::ClearActions
                | Action::WriteActions(_)
                | Action::WriteMetadata(..)
        )
    }

    /// Whether the action may go in OpenFlow's action set (`write_actions`): a group, not
    /// another that steers the lookup, not a meter, nor Nicira's `output:SRC` (nor in Open
    /// vSwitch's), nor `load` and `move`: Open vSwitch runs those in the set's set-field slot,
    /// which here holds one action a field ([`action_set_slot`]), so they are refused.
    pub fn fits_the_action_set(&self) -> bool {
        match self {
            Action::Group(_) => true,
            Action::Meter(_)
            | Action::Load(..)
            | Action::Move(..)
            | Action::OutputReg(_)
            | Action::Learn(_) => false,
            action => !action.is_table_jump(),
        }
    }
}

impl fmt::Display for Action {
    /// ovs-ofctl's spelling (reserved ports upper case, as `dump-flows` prints them).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Action::Output(port) => write!(f, "output:{port}"),
            Action::Normal => f.write_str("NORMAL"),
            Action::Flood => f.write_str("FLOOD"),
            Action::All => f.write_str("ALL"),
            Action::InPort => f.write_str("IN_PORT"),
            Action::Controller(max_len) => write!(f, "CONTROLLER:{max_len}"),
            Action::ModVlanVid(vid) => write!(f, "mod_vlan_vid:{vid}"),
            Action::ModVlanPcp(pcp) => write!(f, "mod_vlan_pcp:{pcp}"),
            Action::StripVlan => f.write_str("strip_vlan"),
            Action::SetField(field, value) => match mod_name(field) {
                Some(name) => write!(f, "{name}:{}", field.display(value)),
                None => write!(f, "set_field:{}->{field}", field.display(value)),
            },
            Action::DecTtl => f.write_str("dec_ttl"),
            Action::SetQueue(queue) => write!(f, "set_queue:{queue}"),
            // C's "%#x", as ovs-ofctl prints it: zero without "0x".
            Action::Load(dst, 0) => write!(f, "load:0->{dst}"),
            Action::Load(dst, value) => write!(f, "load:{value:#x}->{dst}"),
            Action::Move(src, dst) => write!(f, "move:{src}->{dst}"),
            Action::OutputReg(src) => write!(f, "output:{src}"),
            Action::Learn(id) => write!(f, "{}", id.get()),
            Action::Resubmit(table) => write!(f, "resubmit(,{table})"),
            Action::GotoTable(table) => write!(f, "goto_table:{table}"),
            Action::Group(group) => write!(f, "group:{group}"),
            Action::Meter(meter) => write!(f, "meter:{meter}"),
            Action::ClearActions => f.write_str("clear_actions"),
            // The actions it holds follow it: see `ActionList`, which brackets them.
            Action::WriteActions(_) => f.write_str("write_actions"),
            Action::WriteMetadata(value, mask) => {
                let hex = |n: u64| Field::Metadata.display(u128::from(n));
                write!(f, "write_metadata:{}", hex(value))?;
                match mask {
                    u64::MAX => Ok(()),
                    mask => write!(f, "/{}", hex(mask)),
                }
            }
        }
    }
}

/// Where an action goes in the action set (OpenFlow 1.3 §5.10): its place in the order
/// the set runs in, and what it replaces (one action of a kind, one set-field a field).
pub fn action_set_slot(action: &Action) -> (u8, Option<Field>) {
    match *action {
        Action::StripVlan => (1, None),
        Action::ModVlanVid(_) => (2, Some(Field::VlanTci)),
        Action::DecTtl => (3, None),
        Action::ModVlanPcp(_) => (4, None),
        Action::SetField(field, _) => (4, Some(field)),
        Action::SetQueue(_) => (5, None),
        Action::Group(_) => (6, None),
        _ => (7, None),
    }
}

/// The OpenFlow 1.0 spelling of a set-field action, where there is one.
pub fn mod_name(field: Field) -> Option<&'static str> {
    Some(match field {
        Field::DlSrc => "mod_dl_src",
        Field::DlDst => "mod_dl_dst",
        Field::NwSrc => "mod_nw_src",
        Field::NwDst => "mod_nw_dst",
        Field::NwTos => "mod_nw_tos",
        Field::NwEcn => "mod_nw_ecn",
        Field::TpSrc => "mod_tp_src",
        Field::TpDst => "mod_tp_dst",
        _ => return None,
    })
}

/// Writes an action list as ovs-ofctl does: comma-separated, `drop` when empty.
pub struct ActionList<'a>(pub &'a [Action]);

impl fmt::Display for ActionList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("drop");
        }
        let mut rest = self.0;
        let mut first = true;
        while let Some((action, tail)) = rest.split_first() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            rest = tail;
            if let Action::WriteActions(n) = *action {
                // write_actions(A,B): the N actions after the marker, bracketed.
                let n = usize::from(n).min(rest.len());
                write!(f, "write_actions({})", ActionList(&rest[..n]))?;
                rest = &rest[n..];
                continue;
            }
            write!(f, "{action}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_ovs_ofctl() {
        let actions = [
            Action::SetField(Field::DlSrc, 0x0200_0000_0001),
            Action::SetField(Field::Ipv6Dst, 1),
            Action::SetField(Field::NwTtl, 9),
            Action::Normal,
            Action::Resubmit(2),
            Action::Output(3),
        ];
        assert_eq!(
            ActionList(&actions).to_string(),
            "mod_dl_src:02:00:00:00:00:01,set_field:::1->ipv6_dst,set_field:9->nw_ttl,NORMAL,resubmit(,2),output:3"
        );
        assert_eq!(ActionList(&[]).to_string(), "drop");
    }

    #[test]
    fn vlan_actions_on_the_flow() {
        let mut flow = FlowBits::ZERO;
        let mut wildcards = FlowBits::ZERO;
        Action::ModVlanPcp(5).apply_to_flow(&mut flow, &mut wildcards);
        assert_eq!(Field::VlanTci.get(&flow), 0xb000);
        Action::ModVlanVid(100).apply_to_flow(&mut flow, &mut wildcards);
        assert_eq!(Field::VlanTci.get(&flow), 0xb064);
        assert_eq!(Field::VlanTci.get(&wildcards), 0xffff);
        Action::StripVlan.apply_to_flow(&mut flow, &mut wildcards);
        assert_eq!(Field::VlanTci.get(&flow), 0);
    }

    #[test]
    fn write_metadata_keeps_the_bits_outside_its_mask() {
        let mut flow = FlowBits::ZERO;
        let mut wildcards = FlowBits::ZERO;
        Action::WriteMetadata(0xab, u64::MAX).apply_to_flow(&mut flow, &mut wildcards);
        Action::WriteMetadata(0x1200, 0xff00).apply_to_flow(&mut flow, &mut wildcards);
        assert_eq!(Field::Metadata.get(&flow), 0x12ab);
        assert_eq!(wildcards, FlowBits::ZERO);
        assert_eq!(
            ActionList(&[
                Action::WriteMetadata(0x12ab, u64::MAX),
                Action::WriteMetadata(1, 3),
                Action::WriteMetadata(0, u64::MAX)
            ])
            .to_string(),
            "write_metadata:0x12ab,write_metadata:0x1/0x3,write_metadata:0"
        );
    }

    #[test]
    fn dec_ttl_on_the_flow_depends_on_dl_type_and_ttl() {
        let mut flow = FlowBits::ZERO;
        let mut wildcards = FlowBits::ZERO;
        Field::NwTtl.set(&mut flow, 64);
        Action::DecTtl.apply_to_flow(&mut flow, &mut wildcards);
        assert_eq!(Field::NwTtl.get(&flow), 64, "not IP: untouched");
        Field::DlType.set(&mut flow, DL_TYPE_IPV4);
        Action::DecTtl.apply_to_flow(&mut flow, &mut wildcards);
        assert_eq!(Field::NwTtl.get(&flow), 63);
        assert_eq!(Field::DlType.get(&wildcards), 0xffff);
        assert_eq!(Field::NwTtl.get(&wildcards), 0xff);
    }
}
