//! Nicira's `learn` action: a rule that adds rules. As a packet is translated, each `learn`
//! it meets builds a rule from the packet's fields (`NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[]`
//! matches the destination on the source just seen; `load:NXM_OF_IN_PORT[]->NXM_NX_REG0[]`
//! loads the port it came in on), which the bridge then adds to its tables.
//!
//! A learn's specs have no fixed length, while an [`crate::action::Action`] is a small `Copy`
//! value the hot path moves about; so the action holds a [`LearnId`], a handle to the learn
//! kept once (equal learns share one) in a table that lives as long as the process.

use core::fmt;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

use crate::action::Action;
use crate::field::{Field, FlowBits, ValueFormat};
use crate::flow_match::{Match, Prerequisite};
use crate::rule::{Rule, flow_flags};
use crate::subfield::{Nxm, Subfield};

/// Nicira's `NX_LEARN_F_SEND_FLOW_REM`, on the wire (`send_flow_rem`): the rules it learns
/// have OpenFlow's `SEND_FLOW_REM` flag.
pub const SEND_FLOW_REM: u16 = 1;
/// Nicira's `NX_LEARN_F_DELETE_LEARNED`, on the wire (`delete_learned`).
pub const DELETE_LEARNED: u16 = 1 << 1;
/// Distinct learns kept at most; a controller sending more is refused.
pub const MAX_LEARNS: usize = 65536;
/// Specs a learn holds at most (Open vSwitch's are bounded by the action's 64 KiB only).
pub const MAX_SPECS: usize = 256;
/// Specs all kept learns hold at most (about 12 MB): the table is never emptied, so a
/// controller varying large learns must not grow it without end.
pub const MAX_KEPT_SPECS: usize = 1 << 18;

/// Where a spec's bits come from: the packet's field as translated, or a constant.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum LearnSource {
    Field(Subfield),
    Value(u128),
}

/// One spec of a learn: what the learned rule matches, loads or outputs to.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum LearnSpec {
    /// The learned rule matches `dst`'s bits on the source's value.
    Match { dst: Subfield, src: LearnSource },
    /// The learned rule loads the source's value into `dst` (`load:VALUE->DST`).
    Load { dst: Subfield, src: LearnSource },
    /// The learned rule outputs to the port `src` holds.
    Output(Subfield),
}

/// A `learn(...)`: the learned rule's table, priority, timeouts and cookie, and its specs.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Learn {
    pub table: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub cookie: u64,
    /// The learned rule sends a FLOW_REMOVED when it goes (`send_flow_rem`).
    pub send_flow_rem: bool,
    /// When the last rule holding a learn with this one's table and cookie and this flag
    /// goes, every rule of that table with that cookie goes too (`delete_learned`, as in
    /// Open vSwitch: see [`crate::ofproto::learned::delete_learned_flows`]).
    pub delete_learned: bool,
    pub specs: Vec<LearnSpec>,
}

impl Default for Learn {
    /// Open vSwitch's defaults: table 1, the default priority, no timeouts.
    fn default() -> Learn {
        Learn {
            table: 1,
            priority: Rule::DEFAULT_PRIORITY,
            idle_timeout: 0,
            hard_timeout: 0,
            cookie: 0,
            send_flow_rem: false,
            delete_learned: false,
            specs: Vec::new(),
        }
    }
}

/// Why a learn is refused: the kind (for OpenFlow's error) and what to tell a user.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct LearnError {
    pub kind: LearnErrorKind,
    pub message: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LearnErrorKind {
    /// A field the learned rule matches or loads lacks its protocol's match before it.
    Prerequisite,
    /// A load into a field that cannot be written.
    ReadOnly,
    /// Anything else: widths, values, the table, too many learns.
    Argument,
}

impl fmt::Display for LearnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn refuse(message: impl Into<String>) -> LearnError {
    refuse_for(LearnErrorKind::Argument, message)
}

fn refuse_for(kind: LearnErrorKind, message: impl Into<String>) -> LearnError {
    LearnError {
        kind,
        message: message.into(),
    }
}

/// Whether `value` has bits past the low `n_bits`.
fn too_wide(value: u128, n_bits: u8) -> bool {
    n_bits < 128 && value >> n_bits != 0
}

impl LearnSpec {
    /// The bits the spec writes in the learned rule (a match's or a load's), if any.
    pub fn destination(&self) -> Option<Subfield> {
        match *self {
            LearnSpec::Match { dst, .. } | LearnSpec::Load { dst, .. } => Some(dst),
            LearnSpec::Output(_) => None,
        }
    }

    /// The packet's bits the spec reads, if any.
    pub fn source_field(&self) -> Option<Subfield> {
        match *self {
            LearnSpec::Match {
                src: LearnSource::Field(src),
                ..
            }
            | LearnSpec::Load {
                src: LearnSource::Field(src),
                ..
            }
            | LearnSpec::Output(src) => Some(src),
            _ => None,
        }
    }
}

impl Learn {
    /// Checks what the learning rule cannot: the widths, what a load may write, and that each
    /// field the learned rule matches or loads has its prerequisite matched by an earlier
    /// constant spec (`eth_type=0x800` before `NXM_OF_IP_DST[]=...`), as Open vSwitch checks.
    pub fn check(&self) -> Result<(), LearnError> {
        if usize::from(self.table) >= crate::rule::TABLE_COUNT {
            return Err(refuse(format!("table={}: no such table", self.table)));
        }
        let mut learned = Match::ANY;
        for spec in &self.specs {
            if let (Some(dst), Some(src)) = (spec.destination(), spec.source_field())
                && dst.n_bits != src.n_bits
            {
                return Err(refuse(format!(
                    "{dst}={src}: source and destination differ in width"
                )));
            }
            let Some(dst) = spec.destination() else {
                continue;
            };
            let prerequisite = dst.nxm.prerequisite();
            if !prerequisite.is_met_by(&learned) {
                return Err(refuse_for(
                    LearnErrorKind::Prerequisite,
                    format!(
                        "{dst}: the learned rule must match {} first",
                        prerequisite.describe()
                    ),
                ));
            }
            match *spec {
                LearnSpec::Match {
                    src: LearnSource::Value(value),
                    ..
                } => {
                    if too_wide(value, dst.n_bits) {
                        return Err(refuse(format!("{dst}={value:#x}: the value is too wide")));
                    }
                    set_bits(&mut learned, dst, value);
                }
                LearnSpec::Load { src, .. } => {
                    dst.writable().map_err(|e| {
                        refuse_for(LearnErrorKind::ReadOnly, format!("load:...->{dst}: {e}"))
                    })?;
                    if dst.n_bits > 64 {
                        return Err(refuse(format!("load:...->{dst}: at most 64 bits")));
                    }
                    if let LearnSource::Value(value) = src
                        && too_wide(value, dst.n_bits)
                    {
                        return Err(refuse(format!(
                            "load:{value:#x}->{dst}: the value is too wide"
                        )));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// What the learning rule's match must pin down for the fields the specs read.
    pub fn source_prerequisites(&self) -> impl Iterator<Item = Prerequisite> + '_ {
        self.specs
            .iter()
            .filter_map(LearnSpec::source_field)
            .map(|src| src.nxm.prerequisite())
    }

    /// The rule learned from `flow` (as the translation has it at the learn); the bits it
    /// read are set in `read`.
    pub fn rule_for(&self, flow: &FlowBits, read: &mut FlowBits) -> Rule {
        let mut value_of = |src: LearnSource| match src {
            LearnSource::Field(src) => {
                src.field().or_mask(read, src.mask());
                src.get(flow)
            }
            LearnSource::Value(value) => value,
        };
        let mut learned = Match::ANY;
        let mut actions = Vec::new();
        for spec in &self.specs {
            match *spec {
                LearnSpec::Match { dst, src } => set_bits(&mut learned, dst, value_of(src)),
                LearnSpec::Load { dst, src } => {
                    actions.push(Action::Load(dst, value_of(src) as u64));
                }
                LearnSpec::Output(src) => {
                    actions.extend(port_action(value_of(LearnSource::Field(src))));
                }
            }
        }
        Rule {
            table: self.table,
            priority: self.priority,
            cookie: self.cookie,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            flow_match: learned,
            actions,
            flags: if self.send_flow_rem {
                flow_flags::SEND_FLOW_REM
            } else {
                0
            },
        }
    }
}

/// The output a port number read from a field means, as Open vSwitch reads an OpenFlow 1.0
/// port: `0xfff8` is `in_port`, `0xfffb` and `0xfffc` flood; other reserved numbers, zero
/// and anything wider output nowhere.
pub fn port_action(port: u128) -> Option<Action> {
    match port {
        0xfff8 => Some(Action::InPort),
        0xfffb => Some(Action::Flood),
        0xfffc => Some(Action::All),
        port @ 1..0xff00 => Some(Action::Output(port as u32)),
        _ => None,
    }
}

/// Makes `flow_match` match `dst`'s bits on `value`, over what it said of them before. All of
/// an NXM field narrower than ours (`NXM_OF_IN_PORT`, 16 bits of `in_port`'s 32) pins all of
/// ours: a port number, not its low bits (which OpenFlow's `in_port` could not carry).
fn set_bits(flow_match: &mut Match, dst: Subfield, value: u128) {
    let field = dst.field();
    let (old_value, old_mask) = flow_match.field(field);
    let mask = match dst == Subfield::whole(dst.nxm) {
        true => field.full_mask(),
        false => dst.mask(),
    };
    flow_match.set(
        field,
        (old_value & !mask) | ((value << dst.ofs) & mask),
        old_mask | mask,
    );
}

impl fmt::Display for Learn {
    /// ovs-ofctl's spelling: `learn(table=10,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],...)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "learn(table={}", self.table)?;
        if self.idle_timeout != 0 {
            write!(f, ",idle_timeout={}", self.idle_timeout)?;
        }
        if self.hard_timeout != 0 {
            write!(f, ",hard_timeout={}", self.hard_timeout)?;
        }
        if self.priority != Rule::DEFAULT_PRIORITY {
            write!(f, ",priority={}", self.priority)?;
        }
        if self.send_flow_rem {
            f.write_str(",send_flow_rem")?;
        }
        if self.delete_learned {
            f.write_str(",delete_learned")?;
        }
        if self.cookie != 0 {
            write!(f, ",cookie={:#x}", self.cookie)?;
        }
        for spec in &self.specs {
            f.write_str(",")?;
            match *spec {
                LearnSpec::Match {
                    dst,
                    src: LearnSource::Field(src),
                } if src == dst => write!(f, "{dst}")?,
                LearnSpec::Match {
                    dst,
                    src: LearnSource::Field(src),
                } => write!(f, "{dst}={src}")?,
                LearnSpec::Match {
                    dst,
                    src: LearnSource::Value(value),
                } if dst == Subfield::whole(dst.nxm) => write!(
                    f,
                    "{}={}",
                    whole_name(dst.nxm),
                    whole_value(dst.field(), value)
                )?,
                LearnSpec::Match {
                    dst,
                    src: LearnSource::Value(value),
                } => write!(f, "{dst}={}", hex(value))?,
                LearnSpec::Load {
                    dst,
                    src: LearnSource::Field(src),
                } => write!(f, "load:{src}->{dst}")?,
                LearnSpec::Load {
                    dst,
                    src: LearnSource::Value(value),
                } => write!(f, "load:{}->{dst}", hex(value))?,
                LearnSpec::Output(src) => write!(f, "output:{src}")?,
            }
        }
        f.write_str(")")
    }
}

/// C's "%#x", as ovs-ofctl prints numbers: zero without "0x".
fn hex(value: u128) -> String {
    match value {
        0 => "0".into(),
        value => format!("{value:#x}"),
    }
}

/// The name Open vSwitch gives a whole field in a learn's constant match (`ip_src=...`).
fn whole_name(nxm: Nxm) -> String {
    let name = nxm.info().name;
    match name {
        "NXM_OF_IP_TOS" => "nw_tos".into(),
        "NXM_OF_IP_PROTO" => "nw_proto".into(),
        "NXM_NX_IP_ECN" => "nw_ecn".into(),
        "NXM_NX_IP_TTL" => "nw_ttl".into(),
        "NXM_NX_TUN_IPV4_SRC" => "tun_src".into(),
        "NXM_NX_TUN_IPV4_DST" => "tun_dst".into(),
        _ => name
            .trim_start_matches("NXM_OF_")
            .trim_start_matches("NXM_NX_")
            .trim_start_matches("OXM_OF_")
            .to_ascii_lowercase(),
    }
}

/// A whole field's value as Open vSwitch prints it in a learn (`eth_type=0x800`; a zero in
/// hexadecimal, as C's "%#x" writes it, `0`).
fn whole_value(field: Field, value: u128) -> String {
    match field.value_format() {
        ValueFormat::Hex => hex(value),
        _ => field.display(value).to_string(),
    }
}

/// A learn, kept once: what [`Action::Learn`] holds.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct LearnId(u32);

#[derive(Default)]
struct Kept {
    learns: Vec<Arc<Learn>>,
    ids: HashMap<Arc<Learn>, u32>,
    specs: usize,
}

/// Read by every translation that meets a learn, written when a new one is parsed.
fn kept() -> &'static RwLock<Kept> {
    static KEPT: OnceLock<RwLock<Kept>> = OnceLock::new();
    KEPT.get_or_init(RwLock::default)
}

impl LearnId {
    /// The handle of `learn` (checked first), the same for equal learns; refused past
    /// [`MAX_SPECS`] specs, or when [`MAX_LEARNS`] distinct ones or [`MAX_KEPT_SPECS`] specs
    /// are kept.
    pub fn keep(learn: Learn) -> Result<LearnId, LearnError> {
        if learn.specs.len() > MAX_SPECS {
            return Err(refuse(format!("more than {MAX_SPECS} specs")));
        }
        learn.check()?;
        let mut kept = kept().write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = kept.ids.get(&learn) {
            return Ok(LearnId(id));
        }
        if kept.learns.len() >= MAX_LEARNS || kept.specs + learn.specs.len() > MAX_KEPT_SPECS {
            return Err(refuse(format!(
                "more different learn actions than the switch keeps ({MAX_LEARNS}, or \
                 {MAX_KEPT_SPECS} specs in all)"
            )));
        }
        let id = kept.learns.len() as u32;
        kept.specs += learn.specs.len();
        let learn = Arc::new(learn);
        kept.learns.push(learn.clone());
        kept.ids.insert(learn, id);
        Ok(LearnId(id))
    }

    pub fn get(self) -> Arc<Learn> {
        let kept = kept().read().unwrap_or_else(|e| e.into_inner());
        kept.learns[self.0 as usize].clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(text: &str) -> Subfield {
        Subfield::parse(text).unwrap()
    }

    fn mac_learning() -> Learn {
        Learn {
            table: 10,
            specs: vec![
                LearnSpec::Match {
                    dst: sub("NXM_OF_VLAN_TCI[0..11]"),
                    src: LearnSource::Field(sub("NXM_OF_VLAN_TCI[0..11]")),
                },
                LearnSpec::Match {
                    dst: sub("NXM_OF_ETH_DST[]"),
                    src: LearnSource::Field(sub("NXM_OF_ETH_SRC[]")),
                },
                LearnSpec::Load {
                    dst: sub("NXM_NX_REG0[0..15]"),
                    src: LearnSource::Field(sub("NXM_OF_IN_PORT[]")),
                },
                LearnSpec::Output(sub("NXM_OF_IN_PORT[]")),
            ],
            ..Learn::default()
        }
    }

    #[test]
    fn builds_the_rule_from_the_flow_and_reads_only_the_sources() {
        let mut flow = FlowBits::ZERO;
        Field::InPort.set(&mut flow, 3);
        Field::DlSrc.set(&mut flow, 0x0a00_0000_0001);
        Field::DlDst.set(&mut flow, 0x0a00_0000_0002);
        Field::VlanTci.set(&mut flow, 0x1000 | 20);
        let mut read = FlowBits::ZERO;
        let rule = mac_learning().rule_for(&flow, &mut read);
        assert_eq!(rule.table, 10);
        assert_eq!(rule.priority, Rule::DEFAULT_PRIORITY);
        assert_eq!(rule.flow_match.field(Field::VlanTci), (20, 0x0fff));
        assert_eq!(rule.flow_match.exact(Field::DlDst), Some(0x0a00_0000_0001));
        assert!(rule.flow_match.is_wildcarded(Field::DlSrc));
        assert_eq!(
            rule.actions,
            [
                Action::Load(sub("NXM_NX_REG0[0..15]"), 3),
                Action::Output(3)
            ]
        );
        let mut expected = FlowBits::ZERO;
        Field::VlanTci.set(&mut expected, 0x0fff);
        Field::DlSrc.set(&mut expected, Field::DlSrc.full_mask());
        Field::InPort.set(&mut expected, 0xffff);
        assert_eq!(read, expected);
    }

    #[test]
    fn a_learned_in_port_is_the_whole_port_number() {
        let learn = Learn {
            specs: vec![LearnSpec::Match {
                dst: sub("NXM_OF_IN_PORT[]"),
                src: LearnSource::Field(sub("NXM_NX_REG1[0..15]")),
            }],
            ..Learn::default()
        };
        let mut flow = FlowBits::ZERO;
        Field::Reg(1).set(&mut flow, 0x5_0007);
        let rule = learn.rule_for(&flow, &mut FlowBits::default());
        assert_eq!(rule.flow_match.exact(Field::InPort), Some(7));
    }

    #[test]
    fn prints_as_ovs_ofctl() {
        assert_eq!(
            mac_learning().to_string(),
            "learn(table=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
             load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15],output:NXM_OF_IN_PORT[])"
        );
    }

    #[test]
    fn checks_widths_prerequisites_and_what_loads_write() {
        let with = |specs: Vec<LearnSpec>| {
            Learn {
                specs,
                ..Learn::default()
            }
            .check()
        };
        let ip_dst = LearnSpec::Match {
            dst: sub("NXM_OF_IP_DST[]"),
            src: LearnSource::Field(sub("NXM_OF_IP_SRC[]")),
        };
        let ip = LearnSpec::Match {
            dst: sub("NXM_OF_ETH_TYPE[]"),
            src: LearnSource::Value(0x800),
        };
        assert!(with(vec![ip_dst]).is_err(), "ip_dst before eth_type=0x800");
        assert_eq!(with(vec![ip, ip_dst]), Ok(()));
        let narrow = LearnSpec::Match {
            dst: sub("NXM_OF_ETH_DST[]"),
            src: LearnSource::Field(sub("NXM_NX_REG0[]")),
        };
        assert!(with(vec![narrow]).is_err());
        let read_only = LearnSpec::Load {
            dst: sub("NXM_OF_ETH_TYPE[]"),
            src: LearnSource::Value(1),
        };
        assert!(with(vec![read_only]).is_err());
        let too_wide = LearnSpec::Load {
            dst: sub("NXM_NX_REG0[0..3]"),
            src: LearnSource::Value(0x10),
        };
        assert!(with(vec![too_wide]).is_err());
    }

    #[test]
    fn a_learn_holds_at_most_max_specs() {
        let spec = LearnSpec::Output(sub("NXM_OF_IN_PORT[]"));
        let learn = |n: usize| Learn {
            specs: vec![spec; n],
            ..Learn::default()
        };
        assert!(LearnId::keep(learn(MAX_SPECS)).is_ok());
        let refused = LearnId::keep(learn(MAX_SPECS + 1)).unwrap_err();
        assert_eq!(refused.message, "more than 256 specs");
    }

    #[test]
    fn equal_learns_share_a_handle() {
        let a = LearnId::keep(mac_learning()).unwrap();
        let b = LearnId::keep(mac_learning()).unwrap();
        assert_eq!(a, b);
        assert_eq!(*a.get(), mac_learning());
        let other = LearnId::keep(Learn::default()).unwrap();
        assert_ne!(a, other);
    }
}
