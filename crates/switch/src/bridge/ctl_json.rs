//! `wirespeed ctl --json`: what `dump-flows`, `dump-tables`, `dump-ports`,
//! `dump-group-stats` and `meter-stats` show, as one JSON value each, for scripts. The
//! counts are the same as the text's (the kernel's fast path harvested first); matches and
//! actions stay in ovs-ofctl's syntax, and cookies are hex strings, as a 64-bit number does
//! not survive every JSON reader.

use core::time::Duration;

use serde_json::{Value, json};

use crate::action::ActionList;
use crate::bridge::Bridge;
use crate::bridge::summary::summary_json;
use crate::meter::METER_CONTROLLER;
use crate::ofctl::flow_format::{MatchDisplay, dumped_rules};
use crate::ofproto::rule_table::{RuleSelector, RuleTables, TableStats};

/// The commands that answer `--json`.
pub const JSON_COMMANDS: [&str; 5] = [
    "dump-flows",
    "dump-tables",
    "dump-ports",
    "dump-group-stats",
    "meter-stats",
];

/// The request argument that asks for JSON.
pub const JSON: &str = "--json";

/// `dump-flows --json`: the rules `selector` picks, by table then best first; as the text,
/// an error if the kernel's counts cannot be read.
pub fn flows(bridge: &mut Bridge, selector: &RuleSelector) -> Result<Value, String> {
    let now = bridge.now();
    bridge.edit(|dp| {
        dp.harvest(now).map_err(|e| format!("offload: {e}"))?;
        Ok(flows_of(&dp.tables, selector, now))
    })
}

fn flows_of(tables: &RuleTables, selector: &RuleSelector, now: Duration) -> Value {
    let rules: Vec<Value> = dumped_rules(tables, selector)
        .into_iter()
        .map(|installed| {
            let (rule, stats) = (&installed.rule, &installed.stats);
            json!({
                "table": rule.table,
                "priority": rule.priority,
                "cookie": format!("{:#x}", rule.cookie),
                "match": MatchDisplay(&rule.flow_match).to_string(),
                "actions": ActionList(&rule.actions).to_string(),
                "n_packets": stats.n_packets,
                "n_bytes": stats.n_bytes,
                "duration": now.saturating_sub(stats.installed_at).as_secs_f64(),
                "idle_timeout": rule.idle_timeout,
                "hard_timeout": rule.hard_timeout,
            })
        })
        .collect();
    Value::Array(rules)
}

/// `dump-tables --json`: each table shown, its rules, lookups and matches.
pub fn tables(tables: &[TableStats]) -> Value {
    tables
        .iter()
        .map(|t| {
            json!({
                "table": t.table, "active": t.active,
                "lookup": t.counts.lookups, "matched": t.counts.matched,
            })
        })
        .collect()
}

/// `meter-stats --json`: each meter, the flows that use it, what it was offered and what
/// its band dropped (an empty `bands` for a meter without one).
pub fn meter_stats(bridge: &Bridge) -> Value {
    let now = bridge.now();
    let dp = bridge.ofproto();
    let meters: Vec<Value> = dp
        .tables
        .meters()
        .map(|m| {
            let (meter, c) = (&m.0, m.0.counts());
            let id = match meter.config.id {
                METER_CONTROLLER => json!("controller"),
                id => json!(id),
            };
            let bands: Vec<Value> = meter
                .config
                .band
                .iter()
                .map(|_| json!({ "packet_count": c.band_packets, "byte_count": c.band_bytes }))
                .collect();
            json!({
                "meter_id": id,
                "flow_count": dp.tables.meter_flow_count(meter.config.id),
                "packet_in_count": c.packets,
                "byte_in_count": c.bytes,
                "duration": now.saturating_sub(meter.installed_at).as_secs_f64(),
                "bands": bands,
            })
        })
        .collect();
    Value::Array(meters)
}

/// `dump-ports --json`: the summary `switch --json` prints at exit (less its OpenFlow and
/// IPFIX parts), now; with `only`, its `ports` and `tunnels` hold that one port alone (the
/// bridge's own counts stay the bridge's).
pub fn ports(bridge: &mut Bridge, only: Option<u32>) -> Value {
    let snapshots = bridge.snapshots();
    let mut summary = summary_json(bridge, &snapshots);
    if let Some(only) = only {
        for list in ["ports", "tunnels"] {
            if let Some(Value::Array(entries)) = summary.get_mut(list) {
                entries.retain(|e| e["port"] == only);
            }
        }
    }
    summary
}

/// `dump-group-stats --json`: each group (or group `only`), its counts and each bucket's.
pub fn group_stats(bridge: &mut Bridge, only: Option<u32>) -> Value {
    let now = bridge.now();
    let groups: Vec<Value> = bridge
        .edit(|dp| dp.group_stats(only, now))
        .iter()
        .map(|(g, usage)| {
            let buckets: Vec<Value> = usage
                .counts
                .buckets
                .iter()
                .map(|b| json!({ "packet_count": b.packets, "byte_count": b.bytes }))
                .collect();
            json!({
                "group_id": g.id,
                "type": g.kind.name(),
                "duration": usage.age.as_secs_f64(),
                "ref_count": usage.rules,
                "packet_count": usage.counts.total.packets,
                "byte_count": usage.counts.total.bytes,
                "buckets": buckets,
            })
        })
        .collect();
    Value::Array(groups)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ofctl::flow_parse::parse_rule;

    #[test]
    fn a_flow_is_its_fields_with_match_and_actions_in_flow_syntax() {
        let mut tables = RuleTables::new();
        let rule = parse_rule(
            "cookie=0xffffffffffffff01,table=2,priority=7,idle_timeout=9,icmp,in_port=1,\
             actions=output:2",
        )
        .unwrap();
        let id = tables.add(rule, Duration::from_secs(1));
        tables.credit_many(id, 3, 294, Duration::from_secs(2));
        let all = RuleSelector::default();
        assert_eq!(
            flows_of(&tables, &all, Duration::from_millis(3500)),
            json!([{
                "table": 2, "priority": 7, "cookie": "0xffffffffffffff01",
                "match": "icmp,in_port=1", "actions": "output:2",
                "n_packets": 3, "n_bytes": 294, "duration": 2.5,
                "idle_timeout": 9, "hard_timeout": 0,
            }])
        );
    }
}
