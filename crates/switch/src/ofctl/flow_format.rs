//! ovs-ofctl's flow syntax, printed: matches, rules and `dump-flows` lines, each of which
//! [`crate::ofctl::flow_parse::parse_rule`] reads back to the same rule.

use core::fmt;
use core::time::Duration;

use wirespeed_packet::flow_key::{VLAN_PRESENT, VLAN_VID_MASK};

use crate::action::ActionList;
use crate::dpif::megaflow::Megaflow;
use crate::field::{Field, REGISTERS, ValueFormat};
use crate::flow_match::Match;
use crate::ofctl::flow_parse::SHORTHANDS;
use crate::ofproto::rule_table::{InstalledRule, RuleSelector, RuleTables};
use crate::rule::{Rule, RuleStats, flow_flags};
use crate::tcp_flags;

/// The order `dump-flows` prints fields in after the shorthand, the tunnel's, metadata,
/// in_port and VLAN.
const PRINT_ORDER: [Field; 22] = [
    Field::DlSrc,
    Field::DlDst,
    Field::DlType,
    Field::NwSrc,
    Field::NwDst,
    Field::Ipv6Src,
    Field::Ipv6Dst,
    Field::Ipv6Label,
    Field::ArpSpa,
    Field::ArpTpa,
    Field::ArpOp,
    Field::ArpSha,
    Field::ArpTha,
    Field::NwProto,
    Field::NwTos,
    Field::NwEcn,
    Field::NwTtl,
    Field::TpSrc,
    Field::TpDst,
    Field::TcpFlags,
    Field::IcmpType,
    Field::IcmpCode,
];

/// A match in flow syntax: `tcp,in_port=1,nw_dst=10.0.0.0/8`; empty for the match of all.
pub struct MatchDisplay<'a>(pub &'a Match);

impl fmt::Display for MatchDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let flow_match = self.0;
        let mut parts = Parts { f, first: true };
        let shorthand = SHORTHANDS.iter().rev().find(|(_, dl_type, nw_proto)| {
            flow_match.exact(Field::DlType) == Some(*dl_type)
                && nw_proto.is_none_or(|proto| flow_match.exact(Field::NwProto) == Some(proto))
        });
        if let Some((name, ..)) = shorthand {
            parts.push(format_args!("{name}"))?;
        }
        // The registers, then the tunnel's fields, as ovs-ofctl prints them.
        for field in (0..REGISTERS).map(Field::Reg) {
            write_field(&mut parts, flow_match, field)?;
        }
        for field in [Field::TunId, Field::TunSrc, Field::TunDst, Field::TunOpts] {
            write_field(&mut parts, flow_match, field)?;
        }
        write_field(&mut parts, flow_match, Field::Metadata)?;
        write_field(&mut parts, flow_match, Field::InPort)?;
        write_vlan(&mut parts, flow_match)?;
        for field in PRINT_ORDER {
            let covered = shorthand.is_some_and(|(_, _, nw_proto)| {
                field == Field::DlType || (field == Field::NwProto && nw_proto.is_some())
            });
            // ARP's fields share IPv6's and TCP's bits (see crate::field).
            if !covered && flow_match.owns(field) {
                write_field(&mut parts, flow_match, field)?;
            }
        }
        Ok(())
    }
}

/// Comma-separated output.
struct Parts<'a, 'b> {
    f: &'a mut fmt::Formatter<'b>,
    first: bool,
}

impl Parts<'_, '_> {
    fn push(&mut self, part: fmt::Arguments<'_>) -> fmt::Result {
        if !self.first {
            self.f.write_str(",")?;
        }
        self.first = false;
        self.f.write_fmt(part)
    }
}

fn write_field(parts: &mut Parts<'_, '_>, flow_match: &Match, field: Field) -> fmt::Result {
    let (value, mask) = flow_match.field(field);
    if mask == 0 {
        return Ok(());
    }
    let full = field.full_mask();
    // The match prints the flow label five digits wide (`set_field` and `learn` do not).
    if field == Field::Ipv6Label {
        return match mask == full {
            true => parts.push(format_args!("{field}=0x{value:05x}")),
            false => parts.push(format_args!("{field}=0x{value:05x}/0x{mask:05x}")),
        };
    }
    // nw_tos ignores the ECN bits: its whole mask is 0xfc, printed as a plain value.
    if mask == full || (field == Field::NwTos && mask == 0xfc) {
        return parts.push(format_args!("{field}={}", field.display(value)));
    }
    // A prefix mask is ones then zeros: its host part is all ones up from bit 0.
    let host = !mask & full;
    let is_prefix = host & host.wrapping_add(1) == 0;
    match field.value_format() {
        ValueFormat::Ipv4 | ValueFormat::Ipv6 if is_prefix => parts.push(format_args!(
            "{field}={}/{}",
            field.display(value),
            mask.count_ones()
        )),
        ValueFormat::Ipv4 | ValueFormat::Ipv6 | ValueFormat::Mac => parts.push(format_args!(
            "{field}={}/{}",
            field.display(value),
            field.display(mask)
        )),
        ValueFormat::TcpFlags => parts.push(format_args!(
            "{field}={}",
            tcp_flags::Masked {
                value: value as u16,
                mask: mask as u16
            }
        )),
        ValueFormat::Hex
            if matches!(
                field,
                Field::Metadata | Field::TunId | Field::TunOpts | Field::Reg(_)
            ) =>
        {
            parts.push(format_args!(
                "{field}={}/{}",
                field.display(value),
                field.display(mask)
            ))
        }
        ValueFormat::Decimal | ValueFormat::Hex => {
            parts.push(format_args!("{field}=0x{value:x}/0x{mask:x}"))
        }
    }
}

/// `dl_vlan` / `dl_vlan_pcp` where they say it, `vlan_tci=V/M` otherwise.
fn write_vlan(parts: &mut Parts<'_, '_>, flow_match: &Match) -> fmt::Result {
    let (value, mask) = flow_match.field(Field::VlanTci);
    let (value, mask) = (value as u16, mask as u16);
    let tagged = value & VLAN_PRESENT != 0;
    match mask {
        0 => Ok(()),
        // Untagged: ovs-ofctl prints `dl_vlan=0xffff` so.
        0xffff if value == 0 => parts.push(format_args!("vlan_tci=0x0000")),
        0x1fff if tagged => parts.push(format_args!("dl_vlan={}", value & VLAN_VID_MASK)),
        0xf000 if tagged => parts.push(format_args!("dl_vlan_pcp={}", value >> 13)),
        0xffff if tagged => {
            parts.push(format_args!("dl_vlan={}", value & VLAN_VID_MASK))?;
            parts.push(format_args!("dl_vlan_pcp={}", value >> 13))
        }
        0xffff => parts.push(format_args!("vlan_tci=0x{value:04x}")),
        _ => parts.push(format_args!("vlan_tci=0x{value:04x}/0x{mask:04x}")),
    }
}

/// OpenFlow's flow flags, by the names ovs-ofctl prints.
const FLAG_NAMES: [(u16, &str); 5] = [
    (flow_flags::SEND_FLOW_REM, "send_flow_rem"),
    (flow_flags::CHECK_OVERLAP, "check_overlap"),
    (flow_flags::RESET_COUNTS, "reset_counts"),
    (flow_flags::NO_PKT_COUNTS, "no_packet_counts"),
    (flow_flags::NO_BYT_COUNTS, "no_byte_counts"),
];

/// A rule as `add-flow` takes it: `table=0,priority=100,ip,nw_dst=10.0.0.2,actions=output:2`.
pub struct RuleDisplay<'a>(pub &'a Rule);

impl fmt::Display for RuleDisplay<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rule = self.0;
        write!(f, "table={},priority={}", rule.table, rule.priority)?;
        if rule.cookie != 0 {
            write!(f, ",cookie=0x{:x}", rule.cookie)?;
        }
        if rule.idle_timeout != 0 {
            write!(f, ",idle_timeout={}", rule.idle_timeout)?;
        }
        if rule.hard_timeout != 0 {
            write!(f, ",hard_timeout={}", rule.hard_timeout)?;
        }
        // The one flag add-flow takes back.
        if rule.flags & flow_flags::SEND_FLOW_REM != 0 {
            f.write_str(",send_flow_rem")?;
        }
        if rule.flow_match != Match::ANY {
            write!(f, ",{}", MatchDisplay(&rule.flow_match))?;
        }
        write!(f, ",actions={}", ActionList(&rule.actions))
    }
}

/// One line of `dump-flows`: `cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180,
/// priority=100,ip,nw_dst=10.0.0.2 actions=output:2`.
pub struct DumpLine<'a> {
    pub rule: &'a Rule,
    pub stats: &'a RuleStats,
    /// The caller's clock, on the same scale as `stats.installed_at`.
    pub now: Duration,
}

impl fmt::Display for DumpLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (rule, stats) = (self.rule, self.stats);
        let duration = self.now.saturating_sub(stats.installed_at);
        write!(
            f,
            "cookie=0x{:x}, duration={}.{:03}s, table={}, n_packets={}, n_bytes={}, ",
            rule.cookie,
            duration.as_secs(),
            duration.subsec_millis(),
            rule.table,
            stats.n_packets,
            stats.n_bytes
        )?;
        if rule.idle_timeout != 0 {
            write!(f, "idle_timeout={}, ", rule.idle_timeout)?;
        }
        if rule.hard_timeout != 0 {
            write!(f, "hard_timeout={}, ", rule.hard_timeout)?;
        }
        // As ovs-ofctl prints a flow's flags: each name, then a space.
        for (flag, name) in FLAG_NAMES {
            if rule.flags & flag != 0 {
                write!(f, "{name} ")?;
            }
        }
        // ovs-ofctl leaves the default priority out.
        let priority = rule.priority != Rule::DEFAULT_PRIORITY;
        if priority {
            write!(f, "priority={}", rule.priority)?;
        }
        let matches = rule.flow_match != Match::ANY;
        if matches {
            let comma = if priority { "," } else { "" };
            write!(f, "{comma}{}", MatchDisplay(&rule.flow_match))?;
        }
        // One space before the actions, whatever came before them.
        let space = if priority || matches { " " } else { "" };
        write!(f, "{space}actions={}", ActionList(&rule.actions))
    }
}

/// One line of `dump-cache`: a megaflow in flow syntax, with its counters and datapath actions,
/// shaped like `ovs-appctl dpctl/dump-flows` (`in_port=1,ip, packets:3, bytes:180, actions:output:2`).
pub struct MegaflowLine<'a>(pub &'a Megaflow);

impl fmt::Display for MegaflowLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let megaflow = self.0;
        if megaflow.flow_match == Match::ANY {
            f.write_str("any")?;
        } else {
            write!(f, "{}", MatchDisplay(&megaflow.flow_match))?;
        }
        write!(
            f,
            ", packets:{}, bytes:{}, actions:{}",
            megaflow.n_packets,
            megaflow.n_bytes,
            ActionList(&megaflow.decision.actions)
        )?;
        if megaflow.decision.too_deep {
            f.write_str(" (resubmit limit)")?;
        }
        Ok(())
    }
}

/// The rules `dump-flows` shows: those `selector` picks, by table then best first.
pub fn dumped_rules<'a>(tables: &'a RuleTables, selector: &RuleSelector) -> Vec<&'a InstalledRule> {
    let mut rules = tables.dump_order();
    rules.retain(|installed| selector.selects(&installed.rule));
    rules
}

/// `dump-flows`: one line per rule `selector` picks, by table then best first; `now` on the
/// clock the rules were installed with.
pub fn dump_flows(tables: &RuleTables, selector: &RuleSelector, now: Duration) -> Vec<String> {
    dumped_rules(tables, selector)
        .into_iter()
        .map(|installed| {
            DumpLine {
                rule: &installed.rule,
                stats: &installed.stats,
                now,
            }
            .to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::flow_parse::parse_rule;

    fn dump(text: &str) -> String {
        let rule = parse_rule(text).unwrap();
        let stats = RuleStats {
            n_packets: 3,
            n_bytes: 180,
            installed_at: Duration::from_millis(500),
            modified_at: Duration::from_millis(500),
            last_used: Duration::from_millis(900),
        };
        DumpLine {
            rule: &rule,
            stats: &stats,
            now: Duration::from_millis(1734),
        }
        .to_string()
    }

    #[test]
    fn dump_lines_look_like_ovs_ofctl() {
        assert_eq!(
            dump("priority=100,in_port=1,dl_type=0x0800,nw_dst=10.0.0.2,actions=output:2"),
            "cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, priority=100,ip,in_port=1,nw_dst=10.0.0.2 actions=output:2"
        );
        assert_eq!(
            dump("priority=0,actions=normal"),
            "cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, priority=0 actions=NORMAL"
        );
        assert_eq!(
            dump(
                "table=1,cookie=0x1f,idle_timeout=5,tcp6,tp_dst=0x50/0xfff0,ipv6_src=2001:db8::/32,dl_vlan=3,actions=drop"
            ),
            "cookie=0x1f, duration=1.234s, table=1, n_packets=3, n_bytes=180, idle_timeout=5, tcp6,dl_vlan=3,ipv6_src=2001:db8::/32,tp_dst=0x50/0xfff0 actions=drop"
        );
        // The default priority and no match: ovs-ofctl prints neither.
        assert_eq!(
            dump("actions=controller:100"),
            "cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, actions=CONTROLLER:100"
        );
        assert_eq!(
            dump("dl_vlan=0xffff,actions=controller"),
            "cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, vlan_tci=0x0000 actions=CONTROLLER:65535"
        );
        // Registers after the shorthand, before the tunnel's fields and in_port.
        assert_eq!(
            dump("table=2,in_port=3,ip,reg1=0,reg0=0x5/0xff,tun_id=7,actions=output:1"),
            "cookie=0x0, duration=1.234s, table=2, n_packets=3, n_bytes=180, ip,reg0=0x5/0xff,reg1=0,tun_id=0x7,in_port=3 actions=output:1"
        );
        // An exact TCI no dl_vlan form says: no mask, as ovs-ofctl prints it.
        assert_eq!(
            dump("vlan_tci=0x28a6/0xffff,actions=drop"),
            "cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, vlan_tci=0x28a6 actions=drop"
        );
    }

    #[test]
    fn masks_print_as_prefix_or_mask() {
        assert_eq!(
            dump(
                "ip,nw_src=10.0.0.0/255.0.255.0,nw_dst=192.168.0.0/16,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,nw_proto=47,actions=drop"
            ),
            "cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, ip,dl_dst=01:00:00:00:00:00/01:00:00:00:00:00,nw_src=10.0.0.0/255.0.255.0,nw_dst=192.168.0.0/16,nw_proto=47 actions=drop"
        );
    }

    #[test]
    fn megaflow_lines() {
        use crate::dpif::upcall::Decision;
        let rule = parse_rule("in_port=1,ip,actions=output:2").unwrap();
        let decision = Decision {
            actions: rule.actions,
            ..Decision::default()
        };
        let megaflow = Megaflow {
            n_packets: 3,
            n_bytes: 180,
            ..Megaflow::new(rule.flow_match, decision, Duration::ZERO)
        };
        assert_eq!(
            MegaflowLine(&megaflow).to_string(),
            "ip,in_port=1, packets:3, bytes:180, actions:output:2"
        );
        let megaflow = Megaflow::new(Match::ANY, Decision::default(), Duration::ZERO);
        assert_eq!(
            MegaflowLine(&megaflow).to_string(),
            "any, packets:0, bytes:0, actions:drop"
        );
    }

    #[test]
    fn rule_display_parses_back() {
        for text in [
            "priority=5,udp,tp_src=53,actions=mod_tp_src:5353,output:1",
            "table=3,hard_timeout=9,arp,arp_tpa=10.0.0.0/8,actions=FLOOD",
            "vlan_tci=0x0123/0x0fff,actions=strip_vlan,resubmit(,2),goto_table:1",
            "dl_vlan_pcp=6,actions=CONTROLLER:65535",
        ] {
            let rule = parse_rule(text).unwrap();
            let printed = RuleDisplay(&rule).to_string();
            assert_eq!(parse_rule(&printed), Ok(rule), "{text} -> {printed}");
        }
    }
}
