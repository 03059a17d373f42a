//! Actions and instructions on the wire (OpenFlow 1.3 §7.2.4-5), to and from the switch's
//! [`Action`] list. A `meter` instruction becomes the rule's first action and an
//! `apply_actions` instruction its actions, then `clear_actions`, `write_actions` (a marker
//! and the actions written), `write_metadata` and `goto_table` follow in the order the
//! specification runs them. `set_queue` is read and written, and changes nothing the datapath does
//! ([`Action::SetQueue`]).
//!
//! `push_vlan` followed by `set_field:vlan_vid` is our `mod_vlan_vid` (push a tag if there is
//! none, set its id): the switch keeps one tag at most, so a push onto a tagged frame rewrites
//! that tag, and an 802.1ad push (TPID 0x88a8) is refused. Nicira's `resubmit(,T)`, `load`
//! (`NXAST_REG_LOAD`), `move` (`NXAST_REG_MOVE`) and `output:SRC` (`NXAST_OUTPUT_REG`),
//! experimenter actions ovs-ofctl sends, are read and written, so flows with them survive a
//! round trip; `set_field` also writes the registers. So is `learn` (`NXAST_LEARN`, in [`crate::openflow::learn_wire`]).

use wirespeed_packet::flow_key::{VLAN_PRESENT, VLAN_VID_MASK};

use crate::action::Action;
use crate::field::Field;
use crate::flow_match::Match;
use crate::openflow::error::{OfpError, bad_action, bad_instruction};
use crate::openflow::learn_wire::{NXAST_LEARN, read_learn, write_learn};
use crate::openflow::oxm::{Oxm, OxmField, field_no, read_oxm, register_field_no, wire_header};
use crate::openflow::wire::{CML_NO_BUFFER, Reader, Writer, port};
use crate::rule::TABLE_COUNT;
use crate::subfield::{Nxm, Subfield};

mod kind {
    pub const OUTPUT: u16 = 0;
    pub const SET_QUEUE: u16 = 21;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const EXPERIMENTER: u16 = 0xffff;
}

mod instruction {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
}

/// The actions the switch takes, in `apply_actions` and `write_actions` alike (Nicira's
/// resubmit aside), as table features list them.
pub const ACTION_TYPES: [u16; 8] = [
    kind::OUTPUT,
    kind::SET_QUEUE,
    kind::PUSH_VLAN,
    kind::POP_VLAN,
    kind::GROUP,
    kind::SET_NW_TTL,
    kind::DEC_NW_TTL,
    kind::SET_FIELD,
];

/// The instructions the switch takes.
pub const INSTRUCTION_TYPES: [u16; 6] = [
    instruction::GOTO_TABLE,
    instruction::WRITE_METADATA,
    instruction::WRITE_ACTIONS,
    instruction::APPLY_ACTIONS,
    instruction::CLEAR_ACTIONS,
    instruction::METER,
];
pub const GOTO_TABLE: u16 = instruction::GOTO_TABLE;

/// The fields `set_field` may write, besides `vlan_vid` and `vlan_pcp` (which make
/// [`Action::ModVlanVid`] and [`Action::ModVlanPcp`]).
const SET_FIELDS: [u8; 17] = [
    field_no::ETH_SRC,
    field_no::ETH_DST,
    field_no::IPV4_SRC,
    field_no::IPV4_DST,
    field_no::IPV6_SRC,
    field_no::IPV6_DST,
    field_no::IPV6_FLABEL,
    field_no::TCP_SRC,
    field_no::TCP_DST,
    field_no::UDP_SRC,
    field_no::UDP_DST,
    field_no::IP_DSCP,
    field_no::IP_ECN,
    field_no::ARP_SHA,
    field_no::ARP_THA,
    field_no::TUNNEL_ID,
    field_no::TUN_IPV4_DST,
];

/// Every field `set_field` takes, as table features list them.
pub fn settable_field_numbers() -> impl Iterator<Item = u8> {
    [field_no::VLAN_VID, field_no::VLAN_PCP]
        .into_iter()
        .chain(SET_FIELDS)
        .chain(field_no::REG0..=field_no::REG15)
}

/// Nicira's experimenter id and the subtypes of its actions taken here.
const NX_VENDOR: u32 = 0x0000_2320;
const NXAST_REG_MOVE: u16 = 6;
const NXAST_REG_LOAD: u16 = 7;
const NXAST_RESUBMIT_TABLE: u16 = 14;
const NXAST_OUTPUT_REG: u16 = 15;
/// `OFPP_IN_PORT` in Nicira's 16-bit port numbers.
const NX_IN_PORT: u16 = 0xfff8;
/// `OFPBIC_DUP_INST`.
const DUP_INST: OfpError = OfpError { kind: 3, code: 9 };

/// Where an action list comes from: a PACKET_OUT may send to `TABLE` (the pipeline, which we
/// write as `resubmit(,0)`); a rule may not.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ActionsIn {
    Rule,
    PacketOut,
}

/// Reads an action list (all of `r`).
pub fn read_actions(r: &mut Reader<'_>, place: ActionsIn) -> Result<Vec<Action>, OfpError> {
    let mut actions = Vec::new();
    let mut pending_push = false;
    while !r.is_empty() {
        let kind = r.u16().map_err(|_| bad_action::BAD_LEN)?;
        let len = usize::from(r.u16().map_err(|_| bad_action::BAD_LEN)?);
        if len < 8 || len % 8 != 0 {
            return Err(bad_action::BAD_LEN);
        }
        let mut body = r.nested(len, 4).map_err(|_| bad_action::BAD_LEN)?;
        let action = match kind {
            kind::OUTPUT => {
                let out = body.u32().map_err(|_| bad_action::BAD_LEN)?;
                let max_len = body.u16().map_err(|_| bad_action::BAD_LEN)?;
                output(out, max_len, place)?
            }
            kind::PUSH_VLAN => {
                // 802.1Q only: an 802.1ad (0x88a8) tag would go out as 0x8100.
                if body.u16()? != 0x8100 {
                    return Err(bad_action::BAD_ARGUMENT);
                }
                pending_push = true;
                continue;
            }
            kind::POP_VLAN => Action::StripVlan,
            kind::SET_NW_TTL => Action::SetField(Field::NwTtl, u128::from(body.u8()?)),
            kind::DEC_NW_TTL => Action::DecTtl,
            kind::SET_FIELD => {
                let oxm = read_oxm(&mut body).map_err(|_| bad_action::BAD_SET_LEN)?;
                let action = set_field(&oxm)?;
                // Our mod_vlan_vid and mod_vlan_pcp each tag an untagged packet: the push
                // is theirs.
                if matches!(action, Action::ModVlanVid(_) | Action::ModVlanPcp(_)) {
                    pending_push = false;
                }
                action
            }
            kind::EXPERIMENTER => nicira(&mut body)?,
            kind::GROUP => Action::Group(body.u32()?),
            kind::SET_QUEUE => Action::SetQueue(body.u32()?),
            _ => return Err(bad_action::BAD_TYPE),
        };
        if pending_push {
            // A push whose id is not set next: a tag with id 0.
            actions.push(Action::ModVlanVid(0));
            pending_push = false;
        }
        actions.push(action);
    }
    if pending_push {
        actions.push(Action::ModVlanVid(0));
    }
    Ok(actions)
}

fn output(out: u32, max_len: u16, place: ActionsIn) -> Result<Action, OfpError> {
    Ok(match out {
        port::IN_PORT => Action::InPort,
        port::NORMAL => Action::Normal,
        port::FLOOD => Action::Flood,
        port::ALL => Action::All,
        port::CONTROLLER => Action::Controller(max_len),
        port::TABLE if place == ActionsIn::PacketOut => Action::Resubmit(0),
        1..port::MAX => Action::Output(out),
        _ => return Err(bad_action::BAD_OUT_PORT),
    })
}

fn set_field(o: &Oxm) -> Result<Action, OfpError> {
    if o.mask.is_some() {
        return Err(bad_action::BAD_SET_ARGUMENT);
    }
    let info = OxmField::of(o.number).ok_or(bad_action::BAD_SET_TYPE)?;
    Ok(match o.number {
        field_no::VLAN_VID => Action::ModVlanVid(o.value as u16 & VLAN_VID_MASK),
        field_no::VLAN_PCP => Action::ModVlanPcp(o.value as u8),
        field_no::REG0..=field_no::REG15 => Action::SetField(info.field, o.value),
        number if SET_FIELDS.contains(&number) => {
            if o.value > info.bits >> info.shift {
                return Err(bad_action::BAD_SET_ARGUMENT);
            }
            Action::SetField(info.field, o.value << info.shift)
        }
        _ => return Err(bad_action::BAD_SET_TYPE),
    })
}

/// Nicira's `resubmit(,TABLE)`, `load`, `move` and `output:SRC`: the experimenter actions
/// taken.
fn nicira(body: &mut Reader<'_>) -> Result<Action, OfpError> {
    let vendor = body.u32()?;
    let subtype = body.u16()?;
    match (vendor, subtype) {
        (NX_VENDOR, NXAST_RESUBMIT_TABLE) => resubmit(body),
        (NX_VENDOR, NXAST_REG_LOAD) => reg_load(body),
        (NX_VENDOR, NXAST_REG_MOVE) => reg_move(body),
        (NX_VENDOR, NXAST_OUTPUT_REG) => output_reg(body),
        (NX_VENDOR, NXAST_LEARN) => read_learn(body),
        _ => Err(bad_action::BAD_TYPE),
    }
}

/// `NXAST_REG_LOAD`: the destination's bits (offset and width packed in 16 bits), its NXM
/// header, a 64-bit value.
fn reg_load(body: &mut Reader<'_>) -> Result<Action, OfpError> {
    let ofs_nbits = body.u16()?;
    let dst = destination(subfield(
        body.u32()?,
        ofs_nbits >> 6,
        (ofs_nbits & 0x3f) + 1,
    )?)?;
    let value = body.u64()?;
    if !body.is_empty() {
        return Err(bad_action::BAD_LEN);
    }
    if dst.n_bits < 64 && value >> dst.n_bits != 0 {
        return Err(bad_action::BAD_ARGUMENT);
    }
    Ok(Action::Load(dst, value))
}

/// `NXAST_REG_MOVE`: the width, the source's and destination's offsets, their NXM headers.
fn reg_move(body: &mut Reader<'_>) -> Result<Action, OfpError> {
    let n_bits = body.u16()?;
    let (src_ofs, dst_ofs) = (body.u16()?, body.u16()?);
    let (src, dst) = (body.u32()?, body.u32()?);
    if body.rest().iter().any(|&b| b != 0) {
        return Err(bad_action::BAD_ARGUMENT);
    }
    Ok(Action::Move(
        subfield(src, src_ofs, n_bits)?,
        destination(subfield(dst, dst_ofs, n_bits)?)?,
    ))
}

/// `NXAST_OUTPUT_REG`: the source's bits (as a load's), its NXM header, a byte limit for
/// the controller (unused: a register never holds the controller's port here), zeros.
fn output_reg(body: &mut Reader<'_>) -> Result<Action, OfpError> {
    let ofs_nbits = body.u16()?;
    let src = subfield(body.u32()?, ofs_nbits >> 6, (ofs_nbits & 0x3f) + 1)?;
    let _max_len = body.u16()?;
    if src.n_bits > 32 || body.rest().iter().any(|&b| b != 0) {
        return Err(bad_action::BAD_ARGUMENT);
    }
    Ok(Action::OutputReg(src))
}

/// The bits an NXM header and offset name.
fn subfield(header: u32, ofs: u16, n_bits: u16) -> Result<Subfield, OfpError> {
    let nxm = Nxm::of_header(header).ok_or(bad_action::BAD_SET_TYPE)?;
    // Open vSwitch's errors: bits outside the field are BAD_SET_LEN.
    Subfield::new(nxm, u32::from(ofs), u32::from(n_bits)).map_err(|_| bad_action::BAD_SET_LEN)
}

/// `dst`, if `load` and `move` may write there (else BAD_SET_ARGUMENT, Open vSwitch's error
/// for a field it cannot write).
fn destination(dst: Subfield) -> Result<Subfield, OfpError> {
    dst.writable().map_err(|_| bad_action::BAD_SET_ARGUMENT)?;
    Ok(dst)
}

fn resubmit(body: &mut Reader<'_>) -> Result<Action, OfpError> {
    let in_port = body.u16()?;
    let table = body.u8()?;
    if in_port != NX_IN_PORT || usize::from(table) >= TABLE_COUNT {
        return Err(bad_action::BAD_ARGUMENT);
    }
    Ok(Action::Resubmit(table))
}

/// Reads the instructions of a rule in `table` (all of `r`) into its action list.
pub fn read_instructions(r: &mut Reader<'_>, table: u8) -> Result<Vec<Action>, OfpError> {
    let mut apply = Vec::new();
    let mut written: Vec<Action> = Vec::new();
    let mut clear = false;
    let mut goto = None;
    let mut metadata = None;
    let mut meter = None;
    let mut seen = [false; 8];
    while !r.is_empty() {
        let kind = r.u16().map_err(|_| bad_instruction::BAD_LEN)?;
        let len = usize::from(r.u16().map_err(|_| bad_instruction::BAD_LEN)?);
        if len < 8 || len % 8 != 0 {
            return Err(bad_instruction::BAD_LEN);
        }
        let mut body = r.nested(len, 4).map_err(|_| bad_instruction::BAD_LEN)?;
        if let Some(seen) = seen.get_mut(usize::from(kind)) {
            if *seen {
                return Err(DUP_INST);
            }
            *seen = true;
        }
        match kind {
            instruction::GOTO_TABLE => {
                let target = body.u8()?;
                if target <= table || usize::from(target) >= TABLE_COUNT {
                    return Err(bad_instruction::BAD_TABLE_ID);
                }
                goto = Some(target);
            }
            instruction::APPLY_ACTIONS => {
                body.skip(4)?;
                apply = read_actions(&mut body, ActionsIn::Rule)?;
            }
            instruction::CLEAR_ACTIONS => clear = true,
            instruction::WRITE_ACTIONS => {
                body.skip(4)?;
                written = read_actions(&mut body, ActionsIn::Rule)?;
                if !written.iter().all(Action::fits_the_action_set) {
                    return Err(bad_action::BAD_TYPE);
                }
                if written.len() > usize::from(u8::MAX) {
                    return Err(bad_action::TOO_MANY);
                }
            }
            instruction::WRITE_METADATA => {
                if len != 24 {
                    return Err(bad_instruction::BAD_LEN);
                }
                body.skip(4)?;
                metadata = Some(Action::WriteMetadata(body.u64()?, body.u64()?));
            }
            instruction::METER => {
                if len != 8 {
                    return Err(bad_instruction::BAD_LEN);
                }
                meter = Some(Action::Meter(body.u32()?));
            }
            _ => return Err(bad_instruction::UNKNOWN_INST),
        }
    }
    // In the order the specification runs instructions: meter, apply, clear, write,
    // metadata, goto.
    if let Some(meter) = meter {
        apply.insert(0, meter);
    }
    if clear {
        apply.push(Action::ClearActions);
    }
    if !written.is_empty() {
        apply.push(Action::WriteActions(written.len() as u8));
        apply.extend(written);
    }
    apply.extend(metadata);
    apply.extend(goto.map(Action::GotoTable));
    Ok(apply)
}

/// Writes one action; `udp` picks `udp_src` over `tcp_src` for a port rewrite.
fn write_action(w: &mut Writer, action: &Action, udp: bool) {
    let output = |w: &mut Writer, port: u32, max_len: u16| {
        w.u16(kind::OUTPUT).u16(16).u32(port).u16(max_len).zeros(6);
    };
    let set = |w: &mut Writer, number: u8, bytes: usize, value: u128| {
        let start = w.len();
        w.u16(kind::SET_FIELD).u16(0);
        let (class, number) = wire_header(number);
        w.u16(class).u8(number << 1).u8(bytes as u8);
        w.slice(&value.to_be_bytes()[16 - bytes..]);
        w.pad8();
        w.set_len(start + 2, start);
    };
    match *action {
        Action::Output(n) => output(w, n, 0),
        Action::InPort => output(w, port::IN_PORT, 0),
        Action::Normal => output(w, port::NORMAL, 0),
        Action::Flood => output(w, port::FLOOD, 0),
        Action::All => output(w, port::ALL, 0),
        Action::Controller(max_len) => output(w, port::CONTROLLER, max_len),
        Action::ModVlanVid(vid) => set(w, field_no::VLAN_VID, 2, u128::from(vid | 0x1000)),
        Action::ModVlanPcp(pcp) => set(w, field_no::VLAN_PCP, 1, u128::from(pcp)),
        Action::StripVlan => {
            w.u16(kind::POP_VLAN).u16(8).zeros(4);
        }
        Action::DecTtl => {
            w.u16(kind::DEC_NW_TTL).u16(8).zeros(4);
        }
        Action::SetQueue(queue) => {
            w.u16(kind::SET_QUEUE).u16(8).u32(queue);
        }
        Action::SetField(Field::NwTtl, ttl) => {
            w.u16(kind::SET_NW_TTL).u16(8).u8(ttl as u8).zeros(3);
        }
        Action::SetField(field, value) => {
            let number = match field {
                Field::DlSrc => field_no::ETH_SRC,
                Field::DlDst => field_no::ETH_DST,
                Field::NwSrc => field_no::IPV4_SRC,
                Field::NwDst => field_no::IPV4_DST,
                Field::Ipv6Src => field_no::IPV6_SRC,
                Field::Ipv6Dst => field_no::IPV6_DST,
                Field::Ipv6Label => field_no::IPV6_FLABEL,
                Field::TpSrc if udp => field_no::UDP_SRC,
                Field::TpSrc => field_no::TCP_SRC,
                Field::TpDst if udp => field_no::UDP_DST,
                Field::TpDst => field_no::TCP_DST,
                Field::NwTos => field_no::IP_DSCP,
                Field::NwEcn => field_no::IP_ECN,
                Field::ArpSha => field_no::ARP_SHA,
                Field::ArpTha => field_no::ARP_THA,
                Field::TunId => field_no::TUNNEL_ID,
                Field::TunDst => field_no::TUN_IPV4_DST,
                Field::Reg(n) => register_field_no(n),
                _ => return,
            };
            let info = OxmField::of(number).expect("a field of ours");
            set(w, number, info.bytes, value >> info.shift);
        }
        Action::Resubmit(table) => {
            w.u16(kind::EXPERIMENTER).u16(16).u32(NX_VENDOR);
            w.u16(NXAST_RESUBMIT_TABLE)
                .u16(NX_IN_PORT)
                .u8(table)
                .zeros(3);
        }
        Action::Group(group) => {
            w.u16(kind::GROUP).u16(8).u32(group);
        }
        Action::Load(dst, value) => {
            w.u16(kind::EXPERIMENTER).u16(24).u32(NX_VENDOR);
            let ofs_nbits = u16::from(dst.ofs) << 6 | u16::from(dst.n_bits - 1);
            w.u16(NXAST_REG_LOAD)
                .u16(ofs_nbits)
                .u32(dst.nxm.header())
                .u64(value);
        }
        Action::OutputReg(src) => {
            w.u16(kind::EXPERIMENTER).u16(24).u32(NX_VENDOR);
            let ofs_nbits = u16::from(src.ofs) << 6 | u16::from(src.n_bits - 1);
            w.u16(NXAST_OUTPUT_REG)
                .u16(ofs_nbits)
                .u32(src.nxm.header())
                .u16(u16::MAX)
                .zeros(6);
        }
        Action::Move(src, dst) => {
            w.u16(kind::EXPERIMENTER).u16(24).u32(NX_VENDOR);
            w.u16(NXAST_REG_MOVE)
                .u16(u16::from(src.n_bits))
                .u16(u16::from(src.ofs))
                .u16(u16::from(dst.ofs))
                .u32(src.nxm.header())
                .u32(dst.nxm.header());
        }
        Action::Learn(id) => write_learn(w, &id.get(), |w| {
            w.u16(kind::EXPERIMENTER).u16(0).u32(NX_VENDOR);
        }),
        // Instructions, not actions (`write_instructions`).
        Action::GotoTable(_)
        | Action::ClearActions
        | Action::WriteActions(_)
        | Action::WriteMetadata(..)
        | Action::Meter(_) => {}
    }
}

/// What a rule's match tells the writing of its actions.
#[derive(Clone, Copy, Default, Debug)]
pub struct MatchFacts {
    /// Port rewrites are `udp_src` and `udp_dst` (else `tcp_src` and `tcp_dst`).
    pub udp: bool,
    /// Every packet it matches has a VLAN tag.
    pub tagged: bool,
}

impl MatchFacts {
    pub fn of(m: &Match) -> MatchFacts {
        let (tci, mask) = m.field(Field::VlanTci);
        let present = u128::from(VLAN_PRESENT);
        MatchFacts {
            udp: m.exact(Field::NwProto) == Some(crate::flow_match::NW_PROTO_UDP),
            tagged: mask & present != 0 && tci & present != 0,
        }
    }
}

/// Writes an action list (a PACKET_OUT's, a bucket's, or inside an instruction). A
/// `mod_vlan_vid` or `mod_vlan_pcp` where the packet may have no tag yet goes as
/// `push_vlan` and a `set_field`, as Open vSwitch writes it: a `set_field` alone is refused
/// on such a packet (ovs-ofctl would not take the dumped flow back); read, the two are the
/// one action again.
pub fn write_actions(w: &mut Writer, actions: &[Action], facts: MatchFacts) {
    let mut tagged = facts.tagged;
    for action in actions {
        match action {
            // Our mod_vlan_pcp tags an untagged packet too (id 0), as a push does.
            Action::ModVlanVid(_) | Action::ModVlanPcp(_) if !tagged => {
                w.u16(kind::PUSH_VLAN).u16(8).u16(0x8100).zeros(2);
                tagged = true;
            }
            Action::StripVlan => tagged = false,
            _ => {}
        }
        write_action(w, action, facts.udp);
    }
}

/// Writes a rule's actions as instructions: `meter`, `apply_actions`, `clear_actions`,
/// `write_actions`, `write_metadata`, `goto_table`.
pub fn write_instructions(w: &mut Writer, actions: &[Action], facts: MatchFacts) {
    let actions = match actions.split_first() {
        Some((Action::Meter(id), rest)) => {
            w.u16(instruction::METER).u16(8).u32(*id);
            rest
        }
        _ => actions,
    };
    let marker = |a: &Action| {
        matches!(
            a,
            Action::ClearActions
                | Action::WriteActions(_)
                | Action::WriteMetadata(..)
                | Action::GotoTable(_)
        )
    };
    let applied = actions.iter().position(marker).unwrap_or(actions.len());
    let with_actions = |w: &mut Writer, kind: u16, list: &[Action]| {
        let start = w.len();
        w.u16(kind).u16(0).zeros(4);
        write_actions(w, list, facts);
        w.set_len(start + 2, start);
    };
    if applied > 0 {
        with_actions(w, instruction::APPLY_ACTIONS, &actions[..applied]);
    }
    let mut rest = &actions[applied..];
    while let Some((action, tail)) = rest.split_first() {
        rest = tail;
        match *action {
            Action::ClearActions => {
                w.u16(instruction::CLEAR_ACTIONS).u16(8).zeros(4);
            }
            Action::WriteActions(n) => {
                let n = usize::from(n).min(rest.len());
                with_actions(w, instruction::WRITE_ACTIONS, &rest[..n]);
                rest = &rest[n..];
            }
            Action::WriteMetadata(value, mask) => {
                w.u16(instruction::WRITE_METADATA).u16(24).zeros(4);
                w.u64(value).u64(mask);
            }
            Action::GotoTable(table) => {
                w.u16(instruction::GOTO_TABLE).u16(8).u8(table).zeros(3);
            }
            _ => {}
        }
    }
}

/// The largest packet-in a `controller` action asks for, as a byte count.
pub fn controller_bytes(max_len: u16) -> usize {
    match max_len {
        CML_NO_BUFFER => usize::MAX,
        n => usize::from(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::action_parse::parse_actions;

    fn round_trip(text: &str, table: u8) -> Vec<Action> {
        let actions = parse_actions(text).unwrap();
        let mut w = Writer::default();
        write_instructions(&mut w, &actions, MatchFacts::default());
        read_instructions(&mut Reader::new(&w.bytes), table).unwrap()
    }

    #[test]
    fn ovs_ofctl_actions_round_trip() {
        for text in [
            "output:2",
            "NORMAL",
            "FLOOD,ALL,IN_PORT",
            "controller:128",
            "mod_vlan_vid:5,output:1",
            "mod_vlan_pcp:3",
            "strip_vlan,dec_ttl",
            "mod_dl_src:02:00:00:00:00:01,mod_nw_dst:10.0.0.9,mod_tp_dst:8080",
            "mod_nw_tos:184",
            "resubmit(,3),output:1",
            "output:1,goto_table:4",
            "group:7",
            "output:1,clear_actions,write_actions(group:7,mod_nw_dst:10.0.0.1),goto_table:3",
            "output:1,write_metadata:0x5/0xff,goto_table:3",
            "write_metadata:0xffffffffffffffff",
            "mod_nw_ecn:2,set_field:1->nw_ecn,set_field:02:00:00:00:00:07->arp_sha",
            "set_field:02:00:00:00:00:08->arp_tha",
            "set_field:42->tun_id,set_field:192.168.77.3->tun_dst,output:10",
            "load:0x5->NXM_NX_REG0[],load:0->NXM_OF_ETH_DST[8..15],set_field:0x7->reg15",
            "move:NXM_OF_IN_PORT[]->NXM_NX_REG1[16..31],move:OXM_OF_METADATA[0..31]->NXM_NX_REG2[]",
            "output:NXM_NX_REG0[0..15],output:NXM_NX_REG3[]",
            "set_queue:3,output:1",
            "output:1,write_actions(set_queue:4294967295,output:2)",
        ] {
            assert_eq!(round_trip(text, 0), parse_actions(text).unwrap(), "{text}");
        }
    }

    /// OpenFlow 1.3's `ofp_action_set_queue`: type 21, length 8, the queue id.
    #[test]
    fn set_queue_bytes() {
        let mut w = Writer::default();
        write_action(&mut w, &Action::SetQueue(0x0102_0304), false);
        assert_eq!(w.bytes, [0, 21, 0, 8, 1, 2, 3, 4]);
        let read = read_actions(&mut Reader::new(&w.bytes), ActionsIn::Rule);
        assert_eq!(read, Ok(vec![Action::SetQueue(0x0102_0304)]));
    }

    #[test]
    fn output_action_bytes() {
        let mut w = Writer::default();
        write_action(&mut w, &Action::Controller(0xffff), false);
        assert_eq!(
            w.bytes,
            [
                0, 0, 0, 16, 0xff, 0xff, 0xff, 0xfd, 0xff, 0xff, 0, 0, 0, 0, 0, 0
            ]
        );
    }

    /// NXAST_REG_LOAD and NXAST_REG_MOVE laid out as Open vSwitch's `nx_action_reg_load` and
    /// `nx_action_reg_move`.
    #[test]
    fn load_and_move_bytes() {
        let load = parse_actions("load:0x5->NXM_NX_REG1[4..11]").unwrap();
        let mut w = Writer::default();
        write_actions(&mut w, &load, MatchFacts::default());
        #[rustfmt::skip]
        let expected = [
            0xff, 0xff, 0, 24, 0, 0, 0x23, 0x20, 0, 7,
            0x01, 0x07, // ofs 4 << 6 | 8 bits - 1
            0, 1, 0x02, 4, // NXM_NX_REG1
            0, 0, 0, 0, 0, 0, 0, 5,
        ];
        assert_eq!(w.bytes, expected);
        let moved = parse_actions("move:NXM_OF_ETH_SRC[0..31]->NXM_NX_REG0[]").unwrap();
        let mut w = Writer::default();
        write_actions(&mut w, &moved, MatchFacts::default());
        #[rustfmt::skip]
        let expected = [
            0xff, 0xff, 0, 24, 0, 0, 0x23, 0x20, 0, 6,
            0, 32, 0, 0, 0, 0, // 32 bits, from bit 0 to bit 0
            0, 0, 0x04, 6, // NXM_OF_ETH_SRC
            0, 1, 0x00, 4, // NXM_NX_REG0
        ];
        assert_eq!(w.bytes, expected);
        // A load past its bits; a move into a field that cannot be written (in_port).
        let mut bad = expected;
        bad[20..24].copy_from_slice(&[0, 0, 0, 2]);
        bad[11] = 16;
        let read = |b: &[u8]| read_actions(&mut Reader::new(b), ActionsIn::Rule);
        assert_eq!(read(&bad), Err(bad_action::BAD_SET_ARGUMENT));
        let mut w = Writer::default();
        write_actions(&mut w, &load, MatchFacts::default());
        w.bytes[22] = 1; // 0x105: nine bits
        assert_eq!(read(&w.bytes), Err(bad_action::BAD_ARGUMENT));
    }

    /// mod_vlan_vid is written as push_vlan and set_field unless the match has a tag
    /// already (ovs-ofctl refuses a set_field of the id without one: a dumped flow would not
    /// load back), and reads back as itself either way.
    #[test]
    fn mod_vlan_vid_is_written_with_its_push_where_the_packet_may_be_untagged() {
        let written = |flow: &str| {
            let rule = crate::ofctl::flow_parse::parse_rule(flow).unwrap();
            let mut w = Writer::default();
            write_actions(&mut w, &rule.actions, MatchFacts::of(&rule.flow_match));
            let read = read_actions(&mut Reader::new(&w.bytes), ActionsIn::Rule).unwrap();
            assert_eq!(read, rule.actions, "{flow}");
            w.bytes
                .chunks(8)
                .filter(|c| u16::from_be_bytes([c[0], c[1]]) == kind::PUSH_VLAN)
                .count()
        };
        assert_eq!(written("udp,actions=mod_vlan_vid:5,output:1"), 1);
        assert_eq!(written("udp,actions=mod_vlan_pcp:3,output:1"), 1);
        assert_eq!(written("udp,actions=mod_vlan_pcp:3,mod_vlan_vid:5"), 1);
        assert_eq!(written("dl_vlan=7,actions=mod_vlan_vid:5,output:1"), 0);
        // Once tagged, no second push; stripped, a push again.
        assert_eq!(
            written("actions=mod_vlan_vid:5,mod_vlan_vid:6,strip_vlan,mod_vlan_vid:7"),
            2
        );
    }

    #[test]
    fn push_vlan_then_set_vid_is_mod_vlan_vid() {
        let mut w = Writer::default();
        w.u16(kind::PUSH_VLAN).u16(8).u16(0x8100).zeros(2);
        write_action(&mut w, &Action::ModVlanVid(10), false);
        write_action(&mut w, &Action::Output(3), false);
        let actions = read_actions(&mut Reader::new(&w.bytes), ActionsIn::Rule).unwrap();
        assert_eq!(actions, [Action::ModVlanVid(10), Action::Output(3)]);
        // An 802.1ad tag cannot be made: refused, not sent as 802.1Q.
        let mut w = Writer::default();
        w.u16(kind::PUSH_VLAN).u16(8).u16(0x88a8).zeros(2);
        write_action(&mut w, &Action::Output(3), false);
        assert_eq!(
            read_actions(&mut Reader::new(&w.bytes), ActionsIn::Rule),
            Err(bad_action::BAD_ARGUMENT)
        );
    }

    #[test]
    fn bad_instructions_and_actions() {
        let read = |bytes: &[u8]| read_instructions(&mut Reader::new(bytes), 1);
        assert_eq!(
            read(&[0, 1, 0, 8, 1, 0, 0, 0]),
            Err(bad_instruction::BAD_TABLE_ID)
        );
        // write_metadata: value and mask; a short one.
        let mut metadata = vec![0, 2, 0, 24, 0, 0, 0, 0];
        metadata.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 0xff]);
        assert_eq!(read(&metadata), Ok(vec![Action::WriteMetadata(5, 0xff)]));
        assert_eq!(
            read(&[0, 2, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5]),
            Err(bad_instruction::BAD_LEN)
        );
        // meter: first, whatever the order on the wire; eight bytes.
        assert_eq!(
            read(&[0, 4, 0, 8, 0, 0, 0, 0, 0, 6, 0, 8, 0, 0, 0, 1]),
            Ok(vec![Action::Meter(1)])
        );
        assert_eq!(
            read(&[0, 6, 0, 16, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]),
            Err(bad_instruction::BAD_LEN)
        );
        assert_eq!(
            read(&[0, 1, 0, 9, 2, 0, 0, 0, 0]),
            Err(bad_instruction::BAD_LEN)
        );
        assert_eq!(
            read(&[0, 1, 0, 16, 2, 0, 0, 0]),
            Err(bad_instruction::BAD_LEN)
        );
        assert_eq!(
            read(&[0, 5, 0, 8, 0, 0, 0, 0, 0, 5, 0, 8, 0, 0, 0, 0]),
            Err(DUP_INST)
        );
        let apply = |action: &[u8]| {
            let mut w = Writer::default();
            w.u16(4).u16(8 + action.len() as u16).zeros(4).slice(action);
            read(&w.bytes)
        };
        // output:LOCAL (no local port), output:TABLE outside a PACKET_OUT, a group.
        let out = |port: u32| {
            let mut w = Writer::default();
            w.u16(0).u16(16).u32(port).u16(0).zeros(6);
            w.bytes
        };
        assert_eq!(apply(&out(port::LOCAL)), Err(bad_action::BAD_OUT_PORT));
        assert_eq!(apply(&out(port::TABLE)), Err(bad_action::BAD_OUT_PORT));
        assert_eq!(apply(&out(0)), Err(bad_action::BAD_OUT_PORT));
        assert_eq!(apply(&[0, 0, 0, 24, 0, 0, 0, 0]), Err(bad_action::BAD_LEN));
        assert_eq!(apply(&[0, 99, 0, 8, 0, 0, 0, 0]), Err(bad_action::BAD_TYPE));
    }
}
