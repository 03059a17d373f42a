//! The switch's rules and their counters, read from `ctl dump-flows` lines
//! (`cookie=0x0, duration=1.234s, table=0, n_packets=3, n_bytes=180, priority=100,ip actions=...`).

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
}
