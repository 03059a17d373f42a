//! ovs-ofctl's flow syntax, parsed: `priority=100,in_port=1,ip,nw_dst=10.0.0.2,actions=output:2`.
//!
//! Fields are separated by commas or white space and `actions=` comes last, as in ovs-ofctl(8).
//! The statistics `dump-flows` prints (`duration=`, `n_packets=`...) are accepted and ignored, so
//! a dumped line parses back to its rule. Errors name the token that is wrong.

use wirespeed_packet::flow_key::{VLAN_PRESENT, VLAN_VID_MASK};

use crate::action::Action;
pub use crate::error::FlowError;
use crate::error::{error, value_help};
use crate::field::{Field, ValueFormat, parse_uint};
use crate::flow_match::{
    DL_TYPE_ARP, DL_TYPE_IPV4, DL_TYPE_IPV6, Match, NW_PROTO_ICMP, NW_PROTO_ICMPV6, NW_PROTO_TCP,
    NW_PROTO_UDP, Prerequisite,
};
use crate::ofctl::action_parse::parse_actions;
use crate::ofproto::rule_table::RuleSelector;
use crate::rule::flow_flags::SEND_FLOW_REM;
use crate::rule::{Rule, check_actions};
use crate::tcp_flags;

/// The match part of a flow: what `del-flows` takes, and the first half of `add-flow`'s.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct MatchSpec {
    pub table: Option<u8>,
    pub priority: Option<u16>,
    /// `cookie=VALUE`: the cookie a rule gets (add-flow; mod-flows, for the rules it changes).
    pub cookie: Option<u64>,
    /// `cookie=VALUE/MASK`: the rules to select (mod-flows, del-flows), as ovs-ofctl reads a
    /// cookie with a mask (`/-1`: every bit).
    pub cookie_match: Option<(u64, u64)>,
    pub idle_timeout: Option<u16>,
    pub hard_timeout: Option<u16>,
    /// `out_port=N`: the rules that output to port N (dump-flows, del-flows).
    pub out_port: Option<u32>,
    /// `send_flow_rem`: OpenFlow's flow flag (a FLOW_REMOVED to controllers when it goes).
    pub flags: u16,
    pub flow_match: Match,
}

/// What `mod-flows` does: the rules it changes, their new actions, and their new cookie when
/// `cookie=` came without a mask.
#[derive(Clone, Debug)]
pub struct FlowMod {
    pub selector: RuleSelector,
    pub actions: Vec<Action>,
    pub new_cookie: Option<u64>,
}

/// The shorthands: (name, dl_type, nw_proto).
pub const SHORTHANDS: [(&str, u128, Option<u128>); 14] = [
    ("ip", DL_TYPE_IPV4, None),
    ("ipv6", DL_TYPE_IPV6, None),
    ("arp", DL_TYPE_ARP, None),
    ("rarp", 0x8035, None),
    ("mpls", 0x8847, None),
    ("mplsm", 0x8848, None),
    ("sctp", DL_TYPE_IPV4, Some(132)),
    ("sctp6", DL_TYPE_IPV6, Some(132)),
    ("tcp", DL_TYPE_IPV4, Some(NW_PROTO_TCP)),
    ("udp", DL_TYPE_IPV4, Some(NW_PROTO_UDP)),
    ("icmp", DL_TYPE_IPV4, Some(NW_PROTO_ICMP)),
    ("tcp6", DL_TYPE_IPV6, Some(NW_PROTO_TCP)),
    ("udp6", DL_TYPE_IPV6, Some(NW_PROTO_UDP)),
    ("icmp6", DL_TYPE_IPV6, Some(NW_PROTO_ICMPV6)),
];

/// Keys `dump-flows` prints that are statistics, not part of the rule.
const STATISTICS: [&str; 5] = ["duration", "n_packets", "n_bytes", "idle_age", "hard_age"];

/// Parses a whole flow, as `add-flow` and `mod-flows` take it and `dump-flows` prints it.
pub fn parse_rule(text: &str) -> Result<Rule, FlowError> {
    let (match_text, actions_text) =
        split_actions(text).ok_or_else(|| error("must specify an action (actions=...)"))?;
    let spec = parse_match(match_text)?;
    let mut rule = Rule::new(spec.flow_match, parse_actions(actions_text)?);
    rule.table = spec.table.unwrap_or(0);
    rule.priority = spec.priority.unwrap_or(Rule::DEFAULT_PRIORITY);
    if spec.cookie_match.is_some() {
        return Err(error(
            "flow additions cannot use a cookie mask (cookie=VALUE/MASK)",
        ));
    }
    rule.cookie = spec.cookie.unwrap_or(0);
    rule.idle_timeout = spec.idle_timeout.unwrap_or(0);
    rule.hard_timeout = spec.hard_timeout.unwrap_or(0);
    if let Some(port) = spec.out_port {
        return Err(error(format!(
            "out_port={port}: selects rules (dump-flows, del-flows); a flow has its actions"
        )));
    }
    rule.flags = spec.flags;
    check_actions(&rule)?;
    Ok(rule)
}

/// Parses an `add-flows` file: one flow a line; blank lines and `#` comments are skipped. All
/// or nothing: the first bad line is the error, prefixed with its line number.
pub fn parse_flows(text: &str) -> Result<Vec<Rule>, FlowError> {
    Ok(parse_flow_lines(text)?
        .into_iter()
        .map(|(_, rule)| rule)
        .collect())
}

/// [`parse_flows`], each rule with its line number (from 1), for errors found later.
pub fn parse_flow_lines(text: &str) -> Result<Vec<(usize, Rule)>, FlowError> {
    parse_lines(text, parse_rule)
}

/// A file of one item a line (flows, groups, meters), each with its line number; blank
/// lines and `#` comments are skipped, and an error names its line.
pub fn parse_lines<T>(
    text: &str,
    parse: impl Fn(&str) -> Result<T, FlowError>,
) -> Result<Vec<(usize, T)>, FlowError> {
    let mut items = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let item = parse(line).map_err(|e| error(format!("line {}: {e}", index + 1)))?;
        items.push((index + 1, item));
    }
    Ok(items)
}

/// Parses `mod-flows`' argument: which rules (a [`RuleSelector`]: no `table=` means every table,
/// `strict` also needs the priority, 32768 if not given), their new actions and maybe cookie.
/// The actions are checked against each selected rule's table when applied
/// ([`crate::RuleTables::modify`]).
pub fn parse_flow_mod(text: &str, strict: bool) -> Result<FlowMod, FlowError> {
    let (match_text, actions_text) =
        split_actions(text).ok_or_else(|| error("must specify an action (actions=...)"))?;
    let spec = parse_match(match_text)?;
    let mut rule = Rule::new(spec.flow_match, parse_actions(actions_text)?);
    rule.table = spec.table.unwrap_or(0);
    check_actions(&rule)?;
    Ok(FlowMod {
        selector: spec.selector("mod-flows", strict)?,
        actions: rule.actions,
        new_cookie: spec.cookie,
    })
}

/// Parses the match of `del-flows` or `dump-flows` (`command`, for the messages), maybe
/// empty, into the rules it selects.
pub fn parse_selector(text: &str, command: &str, strict: bool) -> Result<RuleSelector, FlowError> {
    if split_actions(text).is_some() {
        return Err(error(format!("{command} takes a match without actions=")));
    }
    let spec = parse_match(text)?;
    if let Some(cookie) = spec.cookie {
        return Err(error(format!(
            "cookie={cookie:#x}: {command} cannot set a cookie; to select rules by cookie give \
             a mask: cookie={cookie:#x}/-1"
        )));
    }
    spec.selector(command, strict)
}

impl MatchSpec {
    /// The rules this match selects for `command` (`mod-flows`, `del-flows`, `dump-flows`).
    /// Keys that would select nothing there are refused rather than ignored, as ovs-ofctl
    /// does: ignored, they would widen the command to rules the user did not mean.
    pub fn selector(&self, command: &str, strict: bool) -> Result<RuleSelector, FlowError> {
        if let (Some(priority), false) = (self.priority, strict) {
            return Err(error(format!(
                "priority={priority}: {command} selects rules by their match, not by priority"
            )));
        }
        for (key, given) in [
            ("idle_timeout", self.idle_timeout),
            ("hard_timeout", self.hard_timeout),
        ] {
            if let Some(value) = given {
                return Err(error(format!(
                    "{key}={value}: only add-flow sets timeouts; {command} cannot select by them"
                )));
            }
        }
        if self.flags != 0 {
            return Err(error(format!(
                "send_flow_rem: only add-flow sets flags; {command} cannot select by them"
            )));
        }
        Ok(RuleSelector {
            table: self.table,
            flow_match: self.flow_match,
            strict_priority: strict.then(|| self.priority.unwrap_or(Rule::DEFAULT_PRIORITY)),
            cookie: self.cookie_match,
            out_port: self.out_port,
            out_group: None,
        })
    }
}

/// Splits at the `actions=` keyword (at a token start); None if there is none.
pub(crate) fn split_actions(text: &str) -> Option<(&str, &str)> {
    text.match_indices("actions=")
        .find(|(at, _)| {
            text[..*at]
                .chars()
                .next_back()
                .is_none_or(|c| c == ',' || c.is_whitespace())
        })
        .map(|(at, keyword)| (&text[..at], &text[at + keyword.len()..]))
}

/// Parses the match part of a flow (no `actions=`).
pub fn parse_match(text: &str) -> Result<MatchSpec, FlowError> {
    let mut spec = MatchSpec::default();
    let tokens = text.split(|c: char| c == ',' || c.is_whitespace());
    let tokens: Vec<&str> = tokens.filter(|token| !token.is_empty()).collect();
    for token in &tokens {
        parse_match_token(token, &mut spec)?;
    }
    // Fields that share bits (see crate::field) cannot be told apart in the match alone, so
    // each one named must meet its own prerequisite (and is the one the error names).
    let shared = tokens
        .iter()
        .filter_map(|token| Field::from_name(token.split_once('=').map_or(token, |(k, _)| k)))
        .filter(|field| field.overlaps().is_some())
        .map(|field| (field, Prerequisite::of(field)));
    let unmet = spec.flow_match.unmet_prerequisite();
    if let Some((field, prerequisite)) = shared
        .chain(unmet)
        .find(|(_, p)| !p.is_met_by(&spec.flow_match))
    {
        return Err(error(format!(
            "{field} requires {}",
            prerequisite.describe()
        )));
    }
    Ok(spec)
}

fn parse_match_token(token: &str, spec: &mut MatchSpec) -> Result<(), FlowError> {
    let (key, value) = match token.split_once('=') {
        Some((key, value)) => (key, Some(value)),
        None => (token, None),
    };
    match (key, value) {
        ("send_flow_rem", None) => {
            spec.flags |= SEND_FLOW_REM;
            return Ok(());
        }
        // The other flags change what an add does (an overlap refused, counts reset), which
        // ctl's add does not do: said, not ignored. OpenFlow's FLOW_MOD takes them.
        ("check_overlap" | "reset_counts" | "no_packet_counts" | "no_byte_counts", None) => {
            return Err(error(format!(
                "{key}: ctl does not take this flag; send the flow over OpenFlow \
                 (ovs-ofctl add-flow) for it"
            )));
        }
        _ => {}
    }
    if let Some(&(_, dl_type, nw_proto)) = SHORTHANDS.iter().find(|(name, ..)| *name == key) {
        if value.is_some() {
            return Err(error(format!("{token}: '{key}' takes no value")));
        }
        add(spec, token, Field::DlType, dl_type, u128::MAX)?;
        if let Some(nw_proto) = nw_proto {
            add(spec, token, Field::NwProto, nw_proto, u128::MAX)?;
        }
        return Ok(());
    }
    let known = STATISTICS.contains(&key)
        || Field::from_name(key).is_some()
        || matches!(
            key,
            "table"
                | "priority"
                | "cookie"
                | "idle_timeout"
                | "hard_timeout"
                | "out_port"
                | "dl_vlan"
                | "dl_vlan_pcp"
        );
    if !known {
        return Err(error(format!("unknown field '{key}'")));
    }
    let Some(value) = value.filter(|value| !value.is_empty()) else {
        return Err(error(format!(
            "{token}: field '{key}' needs a value ({key}=VALUE)"
        )));
    };
    match key {
        _ if STATISTICS.contains(&key) => {}
        "table" => spec.table = Some(number(key, value, 254)? as u8),
        "priority" => spec.priority = Some(number(key, value, 0xffff)? as u16),
        "cookie" => match value.split_once('/') {
            None => spec.cookie = Some(number(key, value, u128::from(u64::MAX))? as u64),
            Some((value, mask)) => spec.cookie_match = Some(cookie_match(value, mask)?),
        },
        "idle_timeout" => spec.idle_timeout = Some(number(key, value, 0xffff)? as u16),
        "hard_timeout" => spec.hard_timeout = Some(number(key, value, 0xffff)? as u16),
        "out_port" => spec.out_port = Some(number(key, value, u128::from(u32::MAX))? as u32),
        _ => parse_field(token, key, value, spec)?,
    }
    Ok(())
}

/// A match field's `key=value[/mask]`, `dl_vlan` and `dl_vlan_pcp` included.
fn parse_field(token: &str, key: &str, value: &str, spec: &mut MatchSpec) -> Result<(), FlowError> {
    match key {
        "dl_vlan" => {
            let (tci, mask) = match number(key, value, 0xffff)? {
                0xffff => (0, 0xffff),
                vid @ 0..=0x0fff => (
                    u128::from(VLAN_PRESENT) | vid,
                    u128::from(VLAN_PRESENT | VLAN_VID_MASK),
                ),
                _ => {
                    let message =
                        format!("{token}: VLAN id must be 0..4095 (or 0xffff for untagged)");
                    return Err(error(message));
                }
            };
            add(spec, token, Field::VlanTci, tci, mask)
        }
        "dl_vlan_pcp" => {
            let pcp = number(key, value, 7)?;
            add(
                spec,
                token,
                Field::VlanTci,
                u128::from(VLAN_PRESENT) | pcp << 13,
                0xf000,
            )
        }
        _ => {
            let field = arp_alias(
                Field::from_name(key).expect("the caller checked the name"),
                spec,
            );
            let (value, mask) = parse_masked(field, value)
                .ok_or_else(|| error(format!("{token}: {}", value_help(field))))?;
            // ovs-ofctl: "the two lower reserved bits are ignored" in nw_tos.
            let mask = if field == Field::NwTos {
                mask & 0xfc
            } else {
                mask
            };
            add(spec, token, field, value, mask)
        }
    }
}

/// After `arp`, ovs-ofctl reads `nw_src`, `nw_dst` and `nw_proto` as `arp_spa`, `arp_tpa` and
/// `arp_op` (OpenFlow 1.0 kept the ARP fields there).
fn arp_alias(field: Field, spec: &MatchSpec) -> Field {
    if spec.flow_match.field(Field::DlType) != (0x0806, u128::from(u16::MAX)) {
        return field;
    }
    match field {
        Field::NwSrc => Field::ArpSpa,
        Field::NwDst => Field::ArpTpa,
        Field::NwProto => Field::ArpOp,
        other => other,
    }
}

fn add(
    spec: &mut MatchSpec,
    token: &str,
    field: Field,
    value: u128,
    mask: u128,
) -> Result<(), FlowError> {
    spec.flow_match
        .add(field, value, mask)
        .map_err(|conflict| error(format!("{token}: {conflict}")))
}

/// `cookie=VALUE/MASK`'s two numbers; MASK may be `-1` (every bit).
fn cookie_match(value: &str, mask: &str) -> Result<(u64, u64), FlowError> {
    let max = u128::from(u64::MAX);
    let value = number("cookie", value, max)? as u64;
    let mask = match mask {
        "-1" => u64::MAX,
        mask => number("cookie mask", mask, max)? as u64,
    };
    Ok((value, mask))
}

fn number(key: &str, text: &str, max: u128) -> Result<u128, FlowError> {
    match parse_uint(text) {
        Some(value) if value <= max => Ok(value),
        Some(_) => Err(error(format!(
            "{key}={text}: value out of range (at most {max})"
        ))),
        None => Err(error(format!("{key}={text}: '{text}' is not a number"))),
    }
}

/// `value` or `value/mask`; IP addresses also take `/prefix-length`, and `tcp_flags` the
/// flags set and not (`+syn-ack`).
fn parse_masked(field: Field, text: &str) -> Option<(u128, u128)> {
    if field == Field::TcpFlags {
        let (value, mask) = tcp_flags::parse_masked(text)?;
        return Some((u128::from(value), u128::from(mask)));
    }
    let (value, mask) = match text.split_once('/') {
        Some(_) if !field.maskable() => return None,
        Some((value, mask)) => (value, Some(mask)),
        None => (text, None),
    };
    let value = field.parse_value(value)?;
    let full = field.full_mask();
    let mask = match (mask, field.value_format()) {
        (None, _) => full,
        (Some(mask), ValueFormat::Ipv4 | ValueFormat::Ipv6)
            if mask.bytes().all(|b| b.is_ascii_digit()) =>
        {
            let prefix: u32 = mask.parse().ok()?;
            let width = field.width();
            if prefix > width {
                return None;
            }
            if prefix == 0 {
                0
            } else {
                (full >> (width - prefix)) << (width - prefix)
            }
        }
        (Some(mask), _) => field.parse_value(mask)?,
    };
    Some((value & mask, mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_only_where_ovs_ofctl_takes_them() {
        for text in [
            "in_port=1/0xff",
            "dl_type=0x0800/0xff00",
            "ip,nw_proto=6/0xf",
            "icmp,icmp_type=8/0xf0",
            "arp,arp_op=1/1",
            "ip,nw_ttl=64/0xf0",
        ] {
            let e = parse_rule(&format!("{text},actions=drop"))
                .unwrap_err()
                .to_string();
            assert!(e.contains("(and no mask)"), "{text}: {e}");
            let token = text.rsplit(',').next().unwrap();
            assert!(e.starts_with(token), "{text}: {e}");
        }
        for text in [
            "dl_dst=01:00:00:00:00:00/01:00:00:00:00:00",
            "ip,nw_src=10.0.0.0/8",
            "tcp,tp_dst=0x50/0xfff0",
            "ipv6,ipv6_src=2001:db8::/32",
            "arp,arp_tpa=10.0.0.0/255.0.0.0",
            "vlan_tci=0x1000/0x1000",
        ] {
            assert!(
                parse_rule(&format!("{text},actions=drop")).is_ok(),
                "{text}"
            );
        }
    }

    #[test]
    fn sctp_rarp_and_mpls_shorthands() {
        for (text, dl_type, nw_proto) in [
            ("sctp", 0x0800, Some(132)),
            ("sctp6", 0x86dd, Some(132)),
            ("rarp", 0x8035, None),
            ("mpls", 0x8847, None),
            ("mplsm", 0x8848, None),
        ] {
            let rule = parse_rule(&format!("{text},actions=drop")).unwrap();
            assert_eq!(
                rule.flow_match.exact(Field::DlType),
                Some(dl_type),
                "{text}"
            );
            assert_eq!(rule.flow_match.exact(Field::NwProto), nw_proto, "{text}");
            let printed = crate::RuleDisplay(&rule).to_string();
            assert!(printed.contains(&format!(",{text},")), "{printed}");
        }
    }

    /// ovs-ofctl's other names for fields parse to the same rule as ours.
    #[test]
    fn oxm_names_and_arp_fields_under_their_openflow_1_0_names() {
        let same = |theirs: &str, ours: &str| {
            assert_eq!(parse_rule(theirs), parse_rule(ours), "{theirs}");
            assert!(parse_rule(ours).is_ok(), "{ours}");
        };
        same(
            "eth_type=0x800,ip_src=1.2.3.4,ipv4_dst=5.6.7.8,ip_proto=17,actions=set_field:02:00:00:00:00:01->eth_src",
            "ip,nw_src=1.2.3.4,nw_dst=5.6.7.8,nw_proto=17,actions=mod_dl_src:02:00:00:00:00:01",
        );
        same(
            "eth_src=02:00:00:00:00:01,eth_dst=02:00:00:00:00:02,icmp,icmpv4_type=8,icmpv4_code=0,actions=drop",
            "dl_src=02:00:00:00:00:01,dl_dst=02:00:00:00:00:02,icmp,icmp_type=8,icmp_code=0,actions=drop",
        );
        same(
            "arp,nw_src=10.0.0.1,nw_dst=10.0.0.0/24,nw_proto=2,actions=drop",
            "arp,arp_spa=10.0.0.1,arp_tpa=10.0.0.0/24,arp_op=2,actions=drop",
        );
        // OpenFlow 1.2's transport and ICMPv6 names, and 1.1's pop_vlan.
        same(
            "tcp,tcp_src=1024,tcp_dst=80,actions=set_field:8080->tcp_dst,pop_vlan",
            "tcp,tp_src=1024,tp_dst=80,actions=mod_tp_dst:8080,strip_vlan",
        );
        same(
            "udp6,udp_dst=53,actions=set_field:5353->udp_dst",
            "udp6,tp_dst=53,actions=mod_tp_dst:5353",
        );
        same(
            "icmp6,icmpv6_type=135,icmpv6_code=0,actions=drop",
            "icmp6,icmp_type=135,icmp_code=0,actions=drop",
        );
    }

    /// `send_flow_rem` is kept and printed back; the flags ctl's add does not honour are
    /// refused, not ignored; `out_port=` selects.
    #[test]
    fn flags_and_out_port() {
        let rule = parse_rule("priority=5,in_port=1,send_flow_rem,actions=output:2").unwrap();
        assert_eq!(rule.flags, SEND_FLOW_REM);
        assert_eq!(
            crate::ofctl::flow_format::RuleDisplay(&rule).to_string(),
            "table=0,priority=5,send_flow_rem,in_port=1,actions=output:2"
        );
        assert_eq!(
            parse_rule("check_overlap,in_port=1,actions=drop")
                .unwrap_err()
                .0,
            "check_overlap: ctl does not take this flag; send the flow over OpenFlow \
             (ovs-ofctl add-flow) for it"
        );
        let selector = parse_selector("table=0,out_port=2", "dump-flows", false).unwrap();
        assert_eq!(selector.out_port, Some(2));
        assert!(parse_rule("out_port=2,actions=drop").is_err());
        assert!(parse_selector("send_flow_rem", "del-flows", false).is_err());
    }

    #[test]
    fn the_design_example() {
        let rule =
            parse_rule("priority=100,in_port=1,dl_type=0x0800,nw_dst=10.0.0.2,actions=output:2")
                .unwrap();
        assert_eq!(rule.priority, 100);
        assert_eq!(rule.flow_match.exact(Field::InPort), Some(1));
        assert_eq!(rule.flow_match.exact(Field::DlType), Some(0x0800));
        assert_eq!(rule.flow_match.exact(Field::NwDst), Some(0x0a00_0002));
        assert_eq!(rule.actions, vec![Action::Output(2)]);
    }

    #[test]
    fn masks_and_shorthands() {
        let rule = parse_rule(
            "table=2 tcp nw_src=10.1.0.0/16 nw_dst=10.0.0.0/255.0.255.0 tp_dst=0x1000/0xf000 \
             dl_src=02:00:00:00:00:00/ff:ff:ff:00:00:00 ipv6_src=::1 actions=drop",
        );
        assert_eq!(
            rule.unwrap_err().0,
            "ipv6_src requires ipv6 (dl_type=0x86dd)"
        );
        // Fields that share bits with another are checked by the name they were given.
        let e = |text: &str| parse_rule(text).unwrap_err().0;
        assert_eq!(
            e("arp,ipv6_src=::1,actions=drop"),
            "ipv6_src requires ipv6 (dl_type=0x86dd)"
        );
        assert_eq!(
            e("ipv6,arp_tha=02:00:00:00:00:01,actions=drop"),
            "arp_tha requires arp (dl_type=0x0806)"
        );
        assert!(parse_rule("arp,arp_sha=02:00:00:00:00:01,actions=drop").is_ok());
        assert_eq!(
            e("udp,tcp_flags=+syn,actions=drop"),
            "tcp_flags requires tcp or tcp6 (nw_proto=6)"
        );
        assert_eq!(
            e("arp,ipv6_label=5,actions=drop"),
            "ipv6_label requires ipv6 (dl_type=0x86dd)"
        );
        assert_eq!(
            e("tcp,tcp_flags=+syn+syn,actions=drop"),
            format!("tcp_flags=+syn+syn: {}", value_help(Field::TcpFlags))
        );
        assert_eq!(
            e("ipv6,ipv6_label=0x100000,actions=drop"),
            "ipv6_label=0x100000: 'ipv6_label' takes a number up to 1048575[/mask]"
        );
        for (text, field, value, mask) in [
            ("tcp,tcp_flags=+syn-ack", Field::TcpFlags, 0x002, 0x012),
            ("tcp6,tcp_flags=syn|ack", Field::TcpFlags, 0x012, 0xfff),
            ("tcp,tcp_flags=0x012/0x0ff", Field::TcpFlags, 0x012, 0x0ff),
            (
                "ipv6,ipv6_label=0x12345",
                Field::Ipv6Label,
                0x12345,
                0xfffff,
            ),
            ("ipv6,ipv6_label=5/0xf0001", Field::Ipv6Label, 1, 0xf0001),
        ] {
            let rule = parse_rule(&format!("{text},actions=drop")).unwrap();
            assert_eq!(rule.flow_match.field(field), (value, mask), "{text}");
        }
        let rule = parse_rule(
            "table=2 tcp nw_src=10.1.2.3/16 nw_dst=10.0.0.0/255.0.255.0 tp_dst=0x1000/0xf000 \
             dl_src=02:00:00:00:00:00/ff:ff:ff:00:00:00 actions=drop",
        )
        .unwrap();
        assert_eq!(rule.table, 2);
        assert_eq!(
            rule.flow_match.field(Field::NwSrc),
            (0x0a01_0000, 0xffff_0000)
        );
        assert_eq!(
            rule.flow_match.field(Field::NwDst),
            (0x0a00_0000, 0xff00_ff00)
        );
        assert_eq!(rule.flow_match.field(Field::TpDst), (0x1000, 0xf000));
        assert_eq!(
            rule.flow_match.field(Field::DlSrc),
            (0x0200_0000_0000, 0xffff_ff00_0000)
        );
        assert_eq!(rule.flow_match.exact(Field::NwProto), Some(6));
        assert!(rule.actions.is_empty());
    }

    #[test]
    fn vlan_fields() {
        let rule = parse_rule("dl_vlan=100,dl_vlan_pcp=5,actions=strip_vlan,NORMAL").unwrap();
        assert_eq!(rule.flow_match.field(Field::VlanTci), (0xb064, 0xffff));
        let rule =
            parse_rule("dl_vlan=0xffff,actions=mod_vlan_vid:7,mod_vlan_pcp:3,FLOOD").unwrap();
        assert_eq!(rule.flow_match.field(Field::VlanTci), (0, 0xffff));
        assert_eq!(
            rule.actions,
            vec![Action::ModVlanVid(7), Action::ModVlanPcp(3), Action::Flood]
        );
        assert_eq!(
            parse_rule("dl_vlan=0xffff,dl_vlan_pcp=1,actions=drop")
                .unwrap_err()
                .0,
            "dl_vlan_pcp=1: conflicts with an earlier match on vlan_tci"
        );
    }

    #[test]
    fn errors_name_the_bad_token() {
        let cases = [
            ("foo=1,actions=drop", "unknown field 'foo'"),
            ("in_port=1", "must specify an action (actions=...)"),
            (
                "tp_src=80,actions=drop",
                "tp_src requires tcp or udp (dl_type and nw_proto)",
            ),
            (
                "ip,tp_dst=80,actions=drop",
                "tp_dst requires tcp or udp (dl_type and nw_proto)",
            ),
            (
                "icmp_type=8,actions=drop",
                "icmp_type requires icmp (dl_type=0x0800,nw_proto=1) or icmp6 (dl_type=0x86dd,nw_proto=58)",
            ),
            (
                "arp_op=1,actions=drop",
                "arp_op requires arp (dl_type=0x0806)",
            ),
            (
                "nw_dst=10.0.0.300,ip,actions=drop",
                "nw_dst=10.0.0.300: 'nw_dst' takes an IPv4 address like 10.0.0.1[/prefix or /mask]",
            ),
            (
                "arp,udp,actions=drop",
                "udp: conflicts with an earlier match on dl_type",
            ),
            (
                "tcp,nw_proto=17,actions=drop",
                "nw_proto=17: conflicts with an earlier match on nw_proto",
            ),
            (
                "priority=70000,actions=drop",
                "priority=70000: value out of range (at most 65535)",
            ),
            (
                "in_port,actions=drop",
                "in_port: field 'in_port' needs a value (in_port=VALUE)",
            ),
            ("actions=frobnicate", "unknown action 'frobnicate'"),
            ("actions=output:1,drop", "drop must be the only action"),
            ("actions=output:x", "output:x: 'x' is not a number"),
            (
                "actions=mod_vlan_vid:5000",
                "mod_vlan_vid:5000: value out of range (at most 4095)",
            ),
            (
                "actions=mod_nw_src:10.0.0.1",
                "mod_nw_src:10.0.0.1 requires ip (dl_type=0x0800)",
            ),
            (
                "ip,actions=mod_tp_dst:80",
                "mod_tp_dst:80 requires tcp or udp (dl_type and nw_proto)",
            ),
            (
                "actions=goto_table:2,output:1",
                "goto_table:2: goto_table must be the last action",
            ),
            (
                "table=3,actions=goto_table:2",
                "goto_table:2: must go to a later table than this rule's table 3",
            ),
            ("actions=output:1,meter:2", "meter:2: a meter comes first"),
            (
                "actions=write_actions(meter:2)",
                "write_actions(meter:2): write_actions takes output, group and header actions only",
            ),
            (
                "actions=set_field:1->in_port",
                "set_field:1->in_port: field 'in_port' cannot be set",
            ),
            (
                "actions=resubmit(1,2)",
                "resubmit(1,2): only resubmit(,TABLE) is supported",
            ),
            (
                "ip,actions=mod_nw_tos:5",
                "mod_nw_tos:5: ToS must be a multiple of 4 (the DSCP bits)",
            ),
            ("ip=1,actions=drop", "ip=1: 'ip' takes no value"),
        ];
        for (text, message) in cases {
            assert_eq!(
                parse_rule(text).map_err(|e| e.0),
                Err(message.to_string()),
                "{text}"
            );
        }
    }

    #[test]
    fn dump_flows_statistics_are_ignored() {
        let rule = parse_rule(
            "cookie=0x5, duration=12.5s, table=1, n_packets=3, n_bytes=180, idle_timeout=10, \
             priority=7,arp,arp_op=1 actions=NORMAL",
        )
        .unwrap();
        assert_eq!(
            (rule.cookie, rule.table, rule.priority, rule.idle_timeout),
            (5, 1, 7, 10)
        );
        assert_eq!(rule.flow_match.exact(Field::ArpOp), Some(1));
        assert_eq!(rule.actions, vec![Action::Normal]);
    }

    #[test]
    fn flows_file() {
        let rules =
            parse_flows("# two rules\n\npriority=5,ip,actions=drop\n  actions=normal  \n").unwrap();
        assert_eq!(rules.len(), 2);
        assert_eq!(rules[1].actions, vec![Action::Normal]);
        assert_eq!(
            parse_flows("actions=drop\nfoo=1,actions=drop\n")
                .unwrap_err()
                .0,
            "line 2: unknown field 'foo'"
        );
    }

    #[test]
    fn mod_and_del_selectors() {
        let m = parse_flow_mod("tcp,tp_dst=80,actions=output:2", false).unwrap();
        assert_eq!((m.selector.table, m.selector.strict_priority), (None, None));
        assert_eq!(m.actions, vec![Action::Output(2)]);
        assert_eq!((m.selector.cookie, m.new_cookie), (None, None));
        let m = parse_flow_mod("table=1,ip,actions=drop", true).unwrap();
        assert_eq!(
            (m.selector.table, m.selector.strict_priority),
            (Some(1), Some(32768))
        );
        let selector = parse_selector("priority=5,in_port=1", "del-flows", true).unwrap();
        assert_eq!(selector.strict_priority, Some(5));
        assert_eq!(selector.flow_match.exact(Field::InPort), Some(1));
        assert!(parse_selector("", "del-flows", false).unwrap().flow_match == Match::ANY);
        assert_eq!(
            parse_selector("in_port=1,actions=drop", "del-flows", false)
                .unwrap_err()
                .0,
            "del-flows takes a match without actions="
        );
        assert_eq!(
            parse_flow_mod("ip,actions=mod_tp_dst:1", false)
                .unwrap_err()
                .0,
            "mod_tp_dst:1 requires tcp or udp (dl_type and nw_proto)"
        );
    }

    /// ovs-ofctl's cookie rules: a bare cookie is set, `value/mask` selects.
    #[test]
    fn cookies_set_and_select() {
        assert_eq!(parse_rule("cookie=0x5,actions=drop").unwrap().cookie, 5);
        assert_eq!(
            parse_rule("cookie=5/-1,actions=drop").unwrap_err().0,
            "flow additions cannot use a cookie mask (cookie=VALUE/MASK)"
        );
        let m = parse_flow_mod("cookie=0x10/0xf0,actions=drop", false).unwrap();
        assert_eq!(
            (m.selector.cookie, m.new_cookie),
            (Some((0x10, 0xf0)), None)
        );
        let m = parse_flow_mod("in_port=1,cookie=7,actions=drop", false).unwrap();
        assert_eq!((m.selector.cookie, m.new_cookie), (None, Some(7)));
        let m = parse_flow_mod("cookie=1/1,cookie=2,actions=drop", false).unwrap();
        assert_eq!((m.selector.cookie, m.new_cookie), (Some((1, 1)), Some(2)));
        let selector = parse_selector("cookie=5/-1", "del-flows", false).unwrap();
        assert_eq!(selector.cookie, Some((5, u64::MAX)));
        assert_eq!(
            parse_selector("cookie=5", "del-flows", false)
                .unwrap_err()
                .0,
            "cookie=0x5: del-flows cannot set a cookie; to select rules by cookie give a mask: \
             cookie=0x5/-1"
        );
        assert_eq!(
            parse_selector("cookie=5/x", "del-flows", false)
                .unwrap_err()
                .0,
            "cookie mask=x: 'x' is not a number"
        );
    }

    /// Keys that select nothing in del-flows / mod-flows are refused: ignored, they would widen
    /// the command to every rule.
    #[test]
    fn selectors_refuse_what_they_cannot_select_by() {
        assert_eq!(
            parse_selector("priority=5", "del-flows", false)
                .unwrap_err()
                .0,
            "priority=5: del-flows selects rules by their match, not by priority"
        );
        assert_eq!(
            parse_selector("ip,idle_timeout=10", "del-flows", false)
                .unwrap_err()
                .0,
            "idle_timeout=10: only add-flow sets timeouts; del-flows cannot select by them"
        );
        assert_eq!(
            parse_flow_mod("hard_timeout=3,actions=drop", false)
                .unwrap_err()
                .0,
            "hard_timeout=3: only add-flow sets timeouts; mod-flows cannot select by them"
        );
        assert_eq!(
            parse_flow_mod("priority=9,actions=drop", false)
                .unwrap_err()
                .0,
            "priority=9: mod-flows selects rules by their match, not by priority"
        );
    }

    #[test]
    fn actions_keyword_inside_a_value_is_not_the_split() {
        assert_eq!(
            split_actions("priority=1,xactions=1,actions=drop"),
            Some(("priority=1,xactions=1,", "drop"))
        );
    }
}
