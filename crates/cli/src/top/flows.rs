//! The switch's rules and their counters, read from `ctl dump-flows` lines
//! (`cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, priority=100,ip actions=...`),
//! and the busiest of them over an interval.

use std::collections::HashMap;

use serde::Serialize;

/// How many of the busiest rules an update keeps.
pub const BUSIEST_RULES: usize = 20;

/// One rule: what names it (everything but its changing counters and age), and its counters.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleCount {
    pub rule: String,
    pub n_packets: u64,
    pub n_bytes: u64,
}

/// The rules of a dump-flows answer; lines without counters are skipped.
pub fn parse_dump_flows(text: &str) -> Vec<RuleCount> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<RuleCount> {
    let (mut n_packets, mut n_bytes) = (None, None);
    let mut rule = Vec::new();
    // The leading `key=value, ` fields; what follows the last of them (the match and the
    // actions) has no ", " in it.
    let mut rest = line.trim();
    while let Some((field, after)) = rest.split_once(", ") {
        match field.split_once('=') {
            Some(("n_packets", v)) => n_packets = v.parse().ok(),
            Some(("n_bytes", v)) => n_bytes = v.parse().ok(),
            // Ages change every dump: not part of the rule's name.
            Some(("duration" | "idle_age" | "hard_age", _)) => {}
            Some(("cookie", "0x0")) => {}
            Some(_) => rule.push(field),
            None => break,
        }
        rest = after;
    }
    rule.push(rest);
    Some(RuleCount {
        rule: rule.join(", "),
        n_packets: n_packets?,
        n_bytes: n_bytes?,
    })
}

/// One rule's packets and bits per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleRate {
    pub rule: String,
    pub packets: f64,
    pub bits: f64,
}

/// The rules that counted packets from `before` to `now`, most packets first (then most
/// bytes, then by name), at most BUSIEST_RULES.
pub fn busiest_rules(before: &[RuleCount], now: &[RuleCount], seconds: f64) -> Vec<RuleRate> {
    let old: HashMap<&str, (u64, u64)> = before
        .iter()
        .map(|r| (r.rule.as_str(), (r.n_packets, r.n_bytes)))
        .collect();
    let mut moved: Vec<(u64, u64, &str)> = now
        .iter()
        .map(|r| {
            let (packets, bytes) = match old.get(r.rule.as_str()) {
                Some(&(p, b)) if r.n_packets >= p && r.n_bytes >= b => {
                    (r.n_packets - p, r.n_bytes - b)
                }
                // A rule replaced (its counters restarted) or new since the last dump.
                _ => (r.n_packets, r.n_bytes),
            };
            (packets, bytes, r.rule.as_str())
        })
        .filter(|(packets, _, _)| *packets > 0)
        .collect();
    moved.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(a.2.cmp(b.2)));
    moved
        .into_iter()
        .take(BUSIEST_RULES)
        .map(|(packets, bytes, rule)| RuleRate {
            rule: rule.to_string(),
            packets: packets as f64 / seconds,
            bits: 8.0 * bytes as f64 / seconds,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_and_names_of_rules() {
        let text = "cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, priority=100,ip,in_port=1,nw_dst=10.0.0.2 actions=output:2\n\
                    cookie=0x1f, duration=0.5s, table=1, n_packets=0, n_bytes=0, idle_timeout=5, tcp6,dl_vlan=3 actions=drop\n\
                    cookie=0x0, duration=9.000s, table=0, n_packets=12, n_bytes=720, actions=NORMAL\n\
                    not a rule\n";
        assert_eq!(
            parse_dump_flows(text),
            vec![
                RuleCount {
                    rule: "table=0, priority=100,ip,in_port=1,nw_dst=10.0.0.2 actions=output:2"
                        .into(),
                    n_packets: 3,
                    n_bytes: 180
                },
                RuleCount {
                    rule: "cookie=0x1f, table=1, idle_timeout=5, tcp6,dl_vlan=3 actions=drop"
                        .into(),
                    n_packets: 0,
                    n_bytes: 0
                },
                RuleCount {
                    rule: "table=0, actions=NORMAL".into(),
                    n_packets: 12,
                    n_bytes: 720
                },
            ]
        );
    }

    #[test]
    fn busiest_rules_by_packets_then_bytes() {
        let before = "cookie=0x0, duration=1s, table=0, n_packets=100, n_bytes=6000, priority=10,in_port=1 actions=output:2\n\
                      cookie=0x0, duration=1s, table=0, n_packets=50, n_bytes=3000, priority=10,in_port=2 actions=output:1\n\
                      cookie=0x0, duration=1s, table=0, n_packets=7, n_bytes=420, priority=0 actions=drop\n";
        let after = "cookie=0x0, duration=2s, table=0, n_packets=150, n_bytes=9000, priority=10,in_port=1 actions=output:2\n\
                     cookie=0x0, duration=2s, table=0, n_packets=100, n_bytes=9000, priority=10,in_port=2 actions=output:1\n\
                     cookie=0x0, duration=2s, table=0, n_packets=7, n_bytes=420, priority=0 actions=drop\n\
                     cookie=0x0, duration=0.5s, table=0, n_packets=4, n_bytes=240, priority=20,icmp actions=NORMAL\n";
        // Over half a second.
        assert_eq!(
            busiest_rules(&parse_dump_flows(before), &parse_dump_flows(after), 0.5),
            vec![
                RuleRate {
                    rule: "table=0, priority=10,in_port=2 actions=output:1".into(),
                    packets: 100.0,
                    bits: 96000.0
                },
                RuleRate {
                    rule: "table=0, priority=10,in_port=1 actions=output:2".into(),
                    packets: 100.0,
                    bits: 48000.0
                },
                RuleRate {
                    rule: "table=0, priority=20,icmp actions=NORMAL".into(),
                    packets: 8.0,
                    bits: 3840.0
                },
            ]
        );
    }
}
