//! ovs-ofctl's group syntax, in and out: `group_id=1,type=select,bucket=weight:2,output:1,
//! bucket=output:2` (`add-group`, `mod-group`), `group_id=1` (`del-groups`, `dump-groups`),
//! and the lines of `dump-groups` and `dump-group-stats`.

use crate::action::ActionList;
use crate::error::{FlowError, error};
use crate::field::parse_uint;
use crate::group::{Bucket, GROUP_MAX, Group, GroupType, GroupUsage};
use crate::ofctl::action_parse::{parse_actions, split_top_level};

/// A group as `add-group` takes it: `group_id=ID`, `type=all|select|indirect|fast_failover`,
/// then its buckets, each `bucket=` followed by its settings (`weight:N`, `watch_port:P`,
/// `=` or `:` alike) and actions (after `actions=`, or bare).
pub fn parse_group(text: &str) -> Result<Group, FlowError> {
    let text = text.trim();
    let (mut id, mut kind) = (None, None);
    let mut buckets: Vec<Vec<&str>> = Vec::new();
    for token in split_top_level(text)?
        .into_iter()
        .filter(|token| !token.is_empty())
    {
        if let Some(first) = token.strip_prefix("bucket=") {
            buckets.push(vec![first]);
            continue;
        }
        if let Some(bucket) = buckets.last_mut() {
            bucket.push(token);
            continue;
        }
        let (key, value) = token.split_once('=').ok_or_else(|| {
            error(format!(
                "{token}: a group's settings are group_id=ID and type=TYPE, then bucket=..."
            ))
        })?;
        match key {
            "group_id" => {
                id = Some(
                    parse_group_id(value)?
                        .ok_or_else(|| error("group_id=all names no one group to add"))?,
                )
            }
            "type" => kind = Some(GroupType::from_name(value).ok_or_else(|| {
                error(format!(
                    "type={value}: a group's type is all, select, indirect or fast_failover (ff)"
                ))
            })?),
            "selection_method" | "selection_method_param" | "fields" => {
                return Err(error(format!(
                    "{token}: OpenFlow 1.5's selection methods are not taken (select hashes \
                     the flow)"
                )));
            }
            _ => {
                return Err(error(format!(
                    "{token}: not a group setting (group_id, type, bucket)"
                )));
            }
        }
    }
    let id = id.ok_or_else(|| error("a group needs group_id=ID"))?;
    let kind = kind
        .ok_or_else(|| error("a group needs type=all, select, indirect or fast_failover (ff)"))?;
    let buckets = buckets
        .iter()
        .map(|tokens| parse_bucket(tokens, kind))
        .collect::<Result<Vec<Bucket>, FlowError>>()?;
    let group = Group { id, kind, buckets };
    group.check().map_err(|e| error(e.to_string()))?;
    Ok(group)
}

/// One bucket's tokens: its settings, wherever they stand, and its actions in order.
fn parse_bucket(tokens: &[&str], kind: GroupType) -> Result<Bucket, FlowError> {
    let mut bucket = Bucket {
        weight: kind.default_weight(),
        watch_port: None,
        actions: Vec::new(),
    };
    let mut actions: Vec<&str> = Vec::new();
    for &token in tokens {
        if let Some(rest) = token
            .strip_prefix("actions=")
            .or_else(|| token.strip_prefix("action="))
        {
            actions.push(rest);
            continue;
        }
        let (key, value) = match token.find(['=', ':']) {
            Some(at) => (&token[..at], &token[at + 1..]),
            None => (token, ""),
        };
        let number = |max: u128| {
            parse_uint(value)
                .filter(|&n| n <= max)
                .ok_or_else(|| error(format!("{token}: '{value}' is not a number up to {max}")))
        };
        match key {
            "weight" => bucket.weight = number(u128::from(u16::MAX))? as u16,
            "watch_port" => bucket.watch_port = Some(number(u128::from(u32::MAX))? as u32),
            "watch_group" => {
                return Err(error(format!(
                    "{token}: buckets watch ports only (watch_port=P)"
                )));
            }
            "bucket_id" => {
                return Err(error(format!(
                    "{token}: bucket ids are OpenFlow 1.5's; buckets are numbered in order"
                )));
            }
            _ => actions.push(token),
        }
    }
    bucket.actions = parse_actions(&actions.join(","))?;
    Ok(bucket)
}

/// `group_id=ID`, or `group_id=all` and nothing (None): the groups a `del-groups`,
/// `dump-groups` or `dump-group-stats` names.
pub fn parse_group_selector(text: &str) -> Result<Option<u32>, FlowError> {
    match text.trim() {
        "" => Ok(None),
        text => match text.strip_prefix("group_id=") {
            Some(value) => parse_group_id(value),
            None => Err(error(format!(
                "{text}: name a group as group_id=ID or group_id=all"
            ))),
        },
    }
}

fn parse_group_id(value: &str) -> Result<Option<u32>, FlowError> {
    if value == "all" {
        return Ok(None);
    }
    match parse_uint(value) {
        Some(id) if id <= u128::from(GROUP_MAX) => Ok(Some(id as u32)),
        _ => Err(error(format!(
            "group_id={value}: a group id is a number up to {GROUP_MAX}, or all"
        ))),
    }
}

/// A `dump-groups` line, as ovs-ofctl prints one (less its leading space): a bucket's
/// weight only where it is not its type's default, `actions=` always.
pub fn group_line(group: &Group) -> String {
    let mut line = format!("group_id={},type={}", group.id, group.kind.name());
    for bucket in &group.buckets {
        line += ",bucket=";
        if bucket.weight != group.kind.default_weight() {
            line += &format!("weight:{},", bucket.weight);
        }
        if let Some(port) = bucket.watch_port {
            line += &format!("watch_port:{port},");
        }
        line += &format!("actions={}", ActionList(&bucket.actions));
    }
    line
}

/// A `dump-group-stats` line, in ovs-ofctl's words: `group_id=1,duration=2.500s,ref_count=1,
/// packet_count=3,byte_count=294,bucket0:packet_count=3,byte_count=294`.
pub fn group_stats_line(group: &Group, usage: &GroupUsage) -> String {
    let total = usage.counts.total;
    let mut line = format!(
        "group_id={},duration={:.3}s,ref_count={},packet_count={},byte_count={}",
        group.id,
        usage.age.as_secs_f64(),
        usage.rules,
        total.packets,
        total.bytes
    );
    let buckets = usage.counts.buckets.iter().take(group.buckets.len());
    for (i, bucket) in buckets.enumerate() {
        line += &format!(
            ",bucket{i}:packet_count={},byte_count={}",
            bucket.packets, bucket.bytes
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::action::Action;
    use crate::group::{BucketsTaken, GroupCounts};

    #[test]
    fn groups_parse_and_print_as_ovs_ofctl_writes_them() {
        for (written, printed) in [
            (
                "group_id=1,type=all,bucket=output:2,bucket=actions=output:3",
                "group_id=1,type=all,bucket=actions=output:2,bucket=actions=output:3",
            ),
            (
                "group_id=0x10,type=select,bucket=weight:1,output:1,bucket=weight=5,output:2",
                "group_id=16,type=select,bucket=actions=output:1,bucket=weight:5,actions=output:2",
            ),
            (
                "group_id=3,type=fast_failover,bucket=output:2,watch_port:2",
                "group_id=3,type=ff,bucket=watch_port:2,actions=output:2",
            ),
            (
                "group_id=4,type=indirect,bucket=actions=drop",
                "group_id=4,type=indirect,bucket=actions=drop",
            ),
            ("group_id=5,type=all", "group_id=5,type=all"),
        ] {
            let group = parse_group(written).unwrap_or_else(|e| panic!("{written}: {e}"));
            assert_eq!(group_line(&group), printed, "{written}");
            assert_eq!(parse_group(printed), Ok(group), "{printed} parses back");
        }
        let group = parse_group(
            "group_id=2,type=select,bucket=mod_vlan_vid:5,weight:7,actions=output:1,bucket=output:2",
        )
        .unwrap();
        assert_eq!(group.buckets[0].weight, 7);
        assert_eq!(
            group.buckets[0].actions,
            [Action::ModVlanVid(5), Action::Output(1)],
            "settings anywhere in a bucket, actions in order"
        );
        assert_eq!(group.buckets[1].weight, 1, "select's default weight");
    }

    #[test]
    fn bad_groups_are_named() {
        for (text, reason) in [
            ("type=all,bucket=output:1", "needs group_id=ID"),
            ("group_id=1,bucket=output:1", "needs type="),
            ("group_id=all,type=all", "names no one group"),
            ("group_id=4294967041,type=all", "a number up to 4294967040"),
            ("group_id=1,type=some", "type=some"),
            ("group_id=1,type=all,prio=3", "prio=3: not a group setting"),
            (
                "group_id=1,type=select,selection_method=hash",
                "OpenFlow 1.5",
            ),
            (
                "group_id=1,type=select,bucket=weight:70000,output:1",
                "weight:70000",
            ),
            (
                "group_id=1,type=ff,bucket=watch_group:2,output:1",
                "watch ports only",
            ),
            (
                "group_id=1,type=all,bucket=bucket_id:0,output:1",
                "OpenFlow 1.5",
            ),
            (
                "group_id=1,type=all,bucket=output:1,frobnicate",
                "frobnicate",
            ),
            ("group_id=1,type=indirect", "exactly one bucket"),
            ("group_id=1,type=all,bucket=goto_table:1", "no chaining"),
            ("group_id=1,type=all,bucket=meter:1,output:1", "no chaining"),
        ] {
            let e = parse_group(text).expect_err(text);
            assert!(e.0.contains(reason), "{text}: {e}");
        }
    }

    #[test]
    fn selectors_name_one_group_or_all() {
        assert_eq!(parse_group_selector(""), Ok(None));
        assert_eq!(parse_group_selector("group_id=all"), Ok(None));
        assert_eq!(parse_group_selector(" group_id=7 "), Ok(Some(7)));
        assert!(parse_group_selector("7").is_err());
        assert!(parse_group_selector("group_id=x").is_err());
    }

    #[test]
    fn stats_lines_give_the_group_and_each_bucket() {
        let group = parse_group("group_id=2,type=select,bucket=output:1,bucket=output:2").unwrap();
        let mut counts = GroupCounts::new(2);
        counts.credit(BucketsTaken::One(1), 3, 294);
        counts.credit(BucketsTaken::Nothing, 1, 60);
        let usage = GroupUsage {
            rules: 2,
            counts,
            age: core::time::Duration::from_millis(2500),
        };
        assert_eq!(
            group_stats_line(&group, &usage),
            "group_id=2,duration=2.500s,ref_count=2,packet_count=4,byte_count=354,\
             bucket0:packet_count=0,byte_count=0,bucket1:packet_count=3,byte_count=294"
        );
    }
}
