//! A controller's changes to the switch's tables, applied as the agent applies them: any
//! FLOW_MOD, GROUP_MOD, METER_MOD, PACKET_OUT and bundle that decodes is taken or refused
//! with an error, never a panic. Past that:
//! - a bundle whose commit fails leaves the tables exactly as they were;
//! - every flow dumped loads back (what `ovs-ofctl diff-flows` and `replace-flows` do with a
//!   saved dump): its entry decodes as a FLOW_MOD of the same match, whose actions the
//!   checks take and which dumps to the same bytes again;
//! - every statistics reply (flows, groups and their statistics, meters and their
//!   configuration) keeps its message's and its entries' 16-bit lengths true;
//! - a frame then crosses the pipeline (lookup, groups, meters, actions, rewrites) from
//!   every port.
//!
//! The input: one byte, the frame's length; the frame; then the messages, each cut at its
//! header's length (the last one at the input's end).
#![no_main]

use core::time::Duration;
use std::sync::Mutex;

use libfuzzer_sys::fuzz_target;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_switch::dpif::process::{BurstLock, process};
use wirespeed_switch::field::TunnelOut;
use wirespeed_switch::openflow::actions::{MatchFacts, write_instructions};
use wirespeed_switch::openflow::bundle::{self, Bundles, control};
use wirespeed_switch::openflow::flow_mod::apply_flow_mod;
use wirespeed_switch::openflow::group_mod::apply_group_mod;
use wirespeed_switch::openflow::message::{Incoming, command, decode, multipart as mp};
use wirespeed_switch::openflow::meters::{self, METER_ALL, apply_meter_mod};
use wirespeed_switch::openflow::oxm::write_match;
use wirespeed_switch::openflow::reply::{self, MAX_MESSAGE};
use wirespeed_switch::openflow::wire::{GROUP_ANY, NO_BUFFER, Writer, msg, port};
use wirespeed_switch::rule::check_actions;
use wirespeed_switch::{FlowBits, FlowCache, Frame, MacView, Ofproto, Rule, Verdict};

/// The bridge's ports: what outputs and watches may name.
const PORTS: [u32; 4] = [1, 2, 3, 4];
/// Messages taken from one input, so one input stays quick.
const MAX_MESSAGES: usize = 64;
/// Headroom before the frame, for pushed tags.
const HEADROOM: usize = 64;

fuzz_target!(|input: &[u8]| {
    let Some((&frame_len, rest)) = input.split_first() else {
        return;
    };
    let frame_len = usize::from(frame_len).min(rest.len());
    let (frame, mut stream) = rest.split_at(frame_len);
    let mut dp = Ofproto::new();
    for p in PORTS {
        dp.add_port(p);
    }
    let mut bundles = Bundles::default();
    let mut now = Duration::from_secs(1);
    for _ in 0..MAX_MESSAGES {
        let Some(message) = next_message(&mut stream) else {
            break;
        };
        now += Duration::from_millis(250);
        let Ok((header, incoming)) = decode(&message) else {
            continue;
        };
        match incoming {
            Incoming::FlowMod(fm) => {
                let _ = apply_flow_mod(&mut dp, &fm, now);
            }
            Incoming::GroupMod(gm) => {
                let _ = apply_group_mod(&mut dp, &gm, now);
            }
            Incoming::MeterMod(mm) => {
                let _ = apply_meter_mod(&mut dp, &mm, now);
            }
            Incoming::PacketOut(po) => {
                if dp.check_groups_and_meters(&po.actions).is_ok() {
                    let key = FlowKey::parse(&po.data, po.in_port);
                    let decision = wirespeed_switch::ofproto::translate::translate_actions(
                        &dp.tables,
                        &FlowBits::from_key(&key),
                        &po.actions,
                    );
                    let _ = dp.add_learned_rules(decision.learned, now);
                }
            }
            Incoming::BundleControl(request) => {
                let opener = request.encode(header.xid);
                let (id, flags) = (request.bundle_id, request.flags);
                let _ = match request.kind {
                    control::OPEN_REQUEST => bundles.open(id, flags, &opener),
                    control::CLOSE_REQUEST => bundles.close(id, flags),
                    control::DISCARD_REQUEST => bundles.discard(id),
                    control::COMMIT_REQUEST => match bundles.take(id, flags) {
                        Ok(staged) => {
                            commit_or_keep(&mut dp, &staged, now);
                            Ok(())
                        }
                        Err(e) => Err(e),
                    },
                    _ => Ok(()),
                };
            }
            Incoming::BundleAdd(add) => {
                let _ = bundles.add(add);
            }
            _ => {}
        }
        dp.tables.expire_taking(now);
    }
    check_dumps_load_back(&dp, now);
    check_replies(&mut dp, now);
    run_frame(dp, frame, now);
});

/// The next message of `stream`: cut at its header's length, or, where that is less than a
/// header or past the end, the rest with its length set to fit (as a stream's reader would
/// frame what it takes).
fn next_message(stream: &mut &[u8]) -> Option<Vec<u8>> {
    if stream.len() < 8 {
        return None;
    }
    let said = usize::from(u16::from_be_bytes([stream[2], stream[3]]));
    let len = match said {
        8.. if said <= stream.len() => said,
        _ => stream.len().min(MAX_MESSAGE),
    };
    let mut message = stream[..len].to_vec();
    message[2..4].copy_from_slice(&(len as u16).to_be_bytes());
    *stream = &stream[len..];
    Some(message)
}

/// Everything a controller could read back: each rule's entry, each group's and each
/// meter's.
fn everything(dp: &Ofproto, now: Duration) -> Vec<Vec<u8>> {
    let rules = dp.tables.dump_order();
    let flows = rules.iter().map(|r| reply::flow_stats_entry(r, now));
    let groups = dp.tables.groups().map(reply::group_desc_entry);
    let meters = meters::config_entries(&dp.tables, METER_ALL).into_iter();
    flows.chain(groups).chain(meters).collect()
}

/// A commit all or none: applied, or refused with the tables as they were.
fn commit_or_keep(dp: &mut Ofproto, staged: &[bundle::StagedMessage], now: Duration) {
    let before = everything(dp, now);
    if let Err((i, e)) = bundle::commit(dp, staged, now) {
        assert!(i < staged.len());
        assert_eq!(
            everything(dp, now),
            before,
            "a bundle refused ({e:?} at change {i}) changed the tables"
        );
    }
}

/// Each rule's `ofp_flow_stats` entry, as the FLOW_MOD that adds it: its match and
/// instructions decode to the rule's match, actions the checks take, and the same bytes.
fn check_dumps_load_back(dp: &Ofproto, now: Duration) {
    for r in dp.tables.dump_order() {
        let entry = reply::flow_stats_entry(r, now);
        let body = &entry[48..];
        let mut w = Writer::message(msg::FLOW_MOD, 7);
        w.u64(r.rule.cookie).u64(0).u8(r.rule.table).u8(command::ADD);
        w.u16(r.rule.idle_timeout).u16(r.rule.hard_timeout);
        w.u16(r.rule.priority).u32(NO_BUFFER).u32(port::ANY).u32(GROUP_ANY);
        w.u16(r.rule.flags).zeros(2).slice(body);
        let bytes = w.finish();
        let fm = match decode(&bytes) {
            Ok((_, Incoming::FlowMod(fm))) => fm,
            other => panic!("the dump of {:?} decodes to {other:?}", r.rule),
        };
        assert_eq!(fm.flow_match, r.rule.flow_match, "the dumped match differs");
        let again = Rule {
            actions: fm.actions.clone(),
            ..r.rule.clone()
        };
        assert!(
            check_actions(&again).is_ok(),
            "the dump of {:?} reads back as {:?}, which is refused",
            r.rule,
            again.actions
        );
        let mut w = Writer::default();
        write_match(&mut w, &fm.flow_match);
        write_instructions(&mut w, &fm.actions, MatchFacts::of(&fm.flow_match));
        assert_eq!(w.bytes, body, "the dump of {:?} dumps again otherwise", r.rule);
    }
}

/// Every statistics reply's messages: each no longer than a message can say, and saying
/// its own length.
fn check_replies(dp: &mut Ofproto, now: Duration) {
    let _ = dp.harvest(now);
    let flows: Vec<Vec<u8>> = dp
        .tables
        .dump_order()
        .iter()
        .map(|r| reply::flow_stats_entry(r, now))
        .collect();
    let descs: Vec<Vec<u8>> = dp.tables.groups().map(reply::group_desc_entry).collect();
    let stats: Vec<Vec<u8>> = dp
        .group_stats(None, now)
        .iter()
        .map(|(g, usage)| reply::group_stats_entry(g, usage))
        .collect();
    let meters = meters::stats_entries(&dp.tables, METER_ALL, now);
    let meter_configs = meters::config_entries(&dp.tables, METER_ALL);
    for (kind, entries) in [
        (mp::FLOW, flows),
        (mp::GROUP_DESC, descs),
        (mp::GROUP, stats),
        (mp::METER, meters),
        (mp::METER_CONFIG, meter_configs),
    ] {
        for m in reply::multipart(9, kind, &entries) {
            assert!(m.len() <= MAX_MESSAGE, "a reply of {} bytes", m.len());
            assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), m.len());
        }
        // Each entry says its length truly (a meter's statistics after its id).
        let at = if kind == mp::METER { 4 } else { 0 };
        for e in &entries {
            let said = u16::from_be_bytes([e[at], e[at + 1]]);
            assert_eq!(usize::from(said), e.len(), "an entry of {kind}");
        }
    }
}

/// The frame from each port through the tables, twice (a miss, then the cache's hit).
fn run_frame(dp: Ofproto, bytes: &[u8], now: Duration) {
    if bytes.len() < 14 {
        return;
    }
    let mut macs = MacView::new(&dp.mac_table);
    let ofproto = Mutex::new(dp);
    let mut verdict = Verdict::default();
    // One cache (it is large to make): its entries are each port's own.
    let mut cache = FlowCache::default();
    for in_port in PORTS {
        for _ in 0..2 {
            let mut buffer = vec![0u8; HEADROOM + bytes.len() + HEADROOM];
            buffer[HEADROOM..HEADROOM + bytes.len()].copy_from_slice(bytes);
            let Some(mut frame) = Frame::new(&mut buffer, HEADROOM, bytes.len()) else {
                return;
            };
            verdict.reset();
            let mut shared = BurstLock::new(&ofproto, &mut macs, &PORTS, false);
            let mut emit = |_: &[u8], _: &[u32], _: TunnelOut| {};
            process(
                &mut cache,
                &mut shared,
                &mut frame,
                in_port,
                now,
                &mut verdict,
                &mut emit,
            );
        }
    }
}
