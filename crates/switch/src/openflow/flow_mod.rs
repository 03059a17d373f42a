//! FLOW_MOD on the bridge's rule tables: add (with OpenFlow's overlap check and counters
//! kept or reset), modify and delete (strict or not, by cookie, out_port and out_group).
//! Each works on the tables inside one `Bridge::edit` (the agent's, or a bundle's commit
//! of many), so the caches and the kernel's fast path follow before the next message is
//! handled.

use core::time::Duration;

use crate::action::Action;
use crate::flow_match::Match;
use crate::meter::METER_MAX;
use crate::ofproto::rule_table::{InstalledRule, RuleSelector};
use crate::ofproto::state::Ofproto;
use crate::openflow::error::{OfpError, bad_action, flow_mod_failed, meter_mod_failed};
use crate::openflow::message::{OfFlowMod, command};
use crate::openflow::reply;
use crate::openflow::wire::{GROUP_ANY, TABLE_ALL, port};
use crate::rule::{N_TABLES, Rule, check_actions, flow_flags};

/// True if some packet could match both (they agree wherever both look).
fn overlaps(a: &Match, b: &Match) -> bool {
    let both = a.mask().and(b.mask());
    a.value().and(&both) == b.value().and(&both)
}

/// A FLOW_MOD of any command; the rules it deleted. A rule whose statistics could not be
/// dumped (its entry longer than a message holds: see [`reply::fits_a_reply`]) is refused
/// with BAD_LEN.
pub fn apply_flow_mod(
    dp: &mut Ofproto,
    fm: &OfFlowMod,
    now: Duration,
) -> Result<Vec<InstalledRule>, OfpError> {
    if fm.table_id != TABLE_ALL && fm.table_id >= N_TABLES {
        return Err(flow_mod_failed::BAD_TABLE_ID);
    }
    match fm.command {
        command::ADD => add_flow(dp, fm, now).map(|()| Vec::new()),
        command::MODIFY | command::MODIFY_STRICT => modify_flows(dp, fm, now).map(|()| Vec::new()),
        _ => Ok(delete_flows(dp, fm, now)),
    }
}

fn add_flow(dp: &mut Ofproto, fm: &OfFlowMod, now: Duration) -> Result<(), OfpError> {
    let rule = Rule {
        table: fm.table_id,
        priority: fm.priority,
        cookie: fm.cookie,
        idle_timeout: fm.idle_timeout,
        hard_timeout: fm.hard_timeout,
        flow_match: fm.flow_match,
        actions: fm.actions.clone(),
        // What describes the flow stays with it (and shows in its statistics, as Open
        // vSwitch keeps them); check_overlap and reset_counts are about this add alone.
        flags: fm.flags
            & (flow_flags::SEND_FLOW_REM | flow_flags::NO_PKT_COUNTS | flow_flags::NO_BYT_COUNTS),
    };
    check_actions(&rule).map_err(|_| bad_action::MATCH_INCONSISTENT)?;
    check_targets(dp, &rule.actions)?;
    if !reply::dumpable_rule(&rule.flow_match, &rule.actions) {
        return Err(bad_action::BAD_LEN);
    }
    if fm.flags & flow_flags::CHECK_OVERLAP != 0 {
        let clash = dp.tables.iter().any(|(_, r)| {
            r.rule.table == rule.table
                && r.rule.priority == rule.priority
                && r.rule.flow_match != rule.flow_match
                && overlaps(&r.rule.flow_match, &rule.flow_match)
        });
        if clash {
            return Err(flow_mod_failed::OVERLAP);
        }
    }
    let replacing = dp
        .tables
        .find_exact(rule.table, &rule.flow_match, rule.priority);
    // A rule replaced goes: its counts from the kernel's fast path come first, and go on
    // to the new rule with the rest.
    let going: Vec<_> = replacing.into_iter().collect();
    let _ = dp.before_taking(&going, now);
    let replaced = replacing.and_then(|id| dp.tables.get(id)).map(|r| r.stats);
    let keep = fm.flags & flow_flags::RESET_COUNTS == 0;
    let id = dp.tables.add(rule, now);
    if let Some(old) = replaced.filter(|_| keep) {
        dp.tables
            .credit_many(id, old.n_packets, old.n_bytes, old.last_used);
    }
    Ok(())
}

/// The groups and meter `actions` name exist. Their ports may be any number (the decoder
/// took 1 to 0xfeff and the reserved ones), as Open vSwitch takes from a controller, whose
/// configuration may name ports this switch lacks: what goes there is dropped, counted as
/// `unknown_port` ([`crate::ofproto::state::OutputPorts::AnyNumber`]).
pub(crate) fn check_targets(dp: &Ofproto, actions: &[Action]) -> Result<(), OfpError> {
    let missing_group = actions
        .iter()
        .any(|a| matches!(a, Action::Group(g) if dp.tables.group(*g).is_none()));
    if missing_group {
        return Err(bad_action::BAD_OUT_GROUP);
    }
    // Open vSwitch's answer to a flow naming a meter it does not have.
    if let Some(Action::Meter(m)) = actions.first()
        && (*m > METER_MAX || dp.tables.meter(*m).is_none())
    {
        return Err(meter_mod_failed::INVALID_METER);
    }
    Ok(())
}

/// The rules a request selects, in OpenFlow's terms: a table (or `OFPTT_ALL`), a match
/// (exactly, with `strict`'s priority), a cookie under its mask, and the output port and
/// group filters (`OFPP_ANY`, `OFPG_ANY`: none).
pub(crate) fn selector_of(
    table: u8,
    flow_match: Match,
    strict: Option<u16>,
    (cookie, cookie_mask): (u64, u64),
    (out_port, out_group): (u32, u32),
) -> RuleSelector {
    RuleSelector {
        table: (table != TABLE_ALL).then_some(table),
        flow_match,
        strict_priority: strict,
        cookie: (cookie_mask != 0).then_some((cookie, cookie_mask)),
        out_port: (out_port != port::ANY).then_some(out_port),
        out_group: (out_group != GROUP_ANY).then_some(out_group),
    }
}

fn modify_flows(dp: &mut Ofproto, fm: &OfFlowMod, now: Duration) -> Result<(), OfpError> {
    let strict = (fm.command == command::MODIFY_STRICT).then_some(fm.priority);
    // A modify ignores out_port and out_group (§7.3.4.1).
    let selector = selector_of(
        fm.table_id,
        fm.flow_match,
        strict,
        (fm.cookie, fm.cookie_mask),
        (port::ANY, GROUP_ANY),
    );
    check_targets(dp, &fm.actions)?;
    let undumpable = dp.tables.selected(&selector).iter().any(|&id| {
        dp.tables
            .get(id)
            .is_some_and(|r| !reply::dumpable_rule(&r.rule.flow_match, &fm.actions))
    });
    if undumpable {
        return Err(bad_action::BAD_LEN);
    }
    // No rule goes, but counts reset must not take the kernel's later.
    let resetting = match fm.flags & flow_flags::RESET_COUNTS {
        0 => Vec::new(),
        _ => dp.tables.selected(&selector),
    };
    let _ = dp.before_taking(&resetting, now);
    dp.tables
        .modify(&selector, &fm.actions, None)
        .map_err(|_| bad_action::MATCH_INCONSISTENT)?;
    if fm.flags & flow_flags::RESET_COUNTS != 0 {
        let ids: Vec<_> = dp
            .tables
            .iter()
            .filter(|(_, r)| selector.selects(&r.rule))
            .map(|(id, _)| id)
            .collect();
        for id in ids {
            dp.tables.reset_counts(id);
        }
    }
    Ok(())
}

fn delete_flows(dp: &mut Ofproto, fm: &OfFlowMod, now: Duration) -> Vec<InstalledRule> {
    let strict = (fm.command == command::DELETE_STRICT).then_some(fm.priority);
    let selector = selector_of(
        fm.table_id,
        fm.flow_match,
        strict,
        (fm.cookie, fm.cookie_mask),
        (fm.out_port, fm.out_group),
    );
    let going = dp.tables.selected(&selector);
    let _ = dp.before_taking(&going, now);
    dp.tables.remove_all(going)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ofproto() -> Ofproto {
        let mut dp = Ofproto::new();
        dp.add_port(1);
        dp
    }

    fn add(actions: usize) -> OfFlowMod {
        let rule = crate::ofctl::flow_parse::parse_rule("udp,actions=drop").unwrap();
        let mut fm = OfFlowMod::for_rule(rule, command::ADD, 0);
        fm.actions = vec![Action::Output(1); actions];
        fm
    }

    /// A flow too long for its statistics to be dumped (in one message of 64 KiB) is
    /// refused, added or modified: dumped, its length would wrap.
    #[test]
    fn a_flow_too_long_to_dump_is_refused() {
        let mut dp = ofproto();
        let at_most = (reply::MAX_MESSAGE - 16 - 48 - 16 - 8) / 16;
        assert_eq!(
            apply_flow_mod(&mut dp, &add(at_most + 1), Duration::ZERO).err(),
            Some(bad_action::BAD_LEN)
        );
        // The most that fits is taken (and then replaced by the same match's next add).
        assert!(apply_flow_mod(&mut dp, &add(at_most), Duration::ZERO).is_ok());
        assert!(apply_flow_mod(&mut dp, &add(100), Duration::ZERO).is_ok());
        let mut modify = add(at_most + 1);
        modify.command = command::MODIFY;
        assert_eq!(
            apply_flow_mod(&mut dp, &modify, Duration::ZERO).err(),
            Some(bad_action::BAD_LEN)
        );
        let kept = dp.tables.iter().map(|(_, r)| r.rule.actions.len()).max();
        assert_eq!(kept, Some(100));
    }
}
