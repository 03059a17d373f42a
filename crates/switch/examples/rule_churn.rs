//! What changes to the rules cost the datapath, without I/O. A controller routes by
//! destination, one rule a host (`--hosts`); packets of `--flows` UDP flows to those hosts go
//! through parse and the caches (as the `stages` example's lookup stage), one megaflow a
//! host. Every `--every` packets the controller adds a rule for a new host, as the bridge's
//! control side does it: the rule added, the cache revalidated (the megaflows it removes
//! credited). With `--delete 1` every other change deletes the rule the change before added
//! instead, its megaflows' counts harvested first, as a controller that adds and takes back
//! a rule (bench/churn_peers.py).
//!
//! Two policies, in interleaved rounds (the fastest of 5 each, the change's cost included):
//! `precise`, what the switch does (only the megaflows the new rule could decide
//! otherwise go, [`wirespeed_switch::dpif::revalidate`]), and `flush`, what it did before
//! (every megaflow's counts harvested, every megaflow gone, and every flow misses again).
//!
//! cargo run --release -p wirespeed-switch --example rule_churn -- [--hosts N] [--flows N]
//!     [--packets N] [--every N] [--delete 1]
//! prints one JSON object: nanoseconds a packet, and per policy the misses, megaflows
//! removed and flushes.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use wirespeed_packet::{MacAddr, UdpTemplate};
use wirespeed_switch::extract::extract;
use wirespeed_switch::ofproto::rule_table::RuleTables;
use wirespeed_switch::{CacheStats, FlowCache, parse_flows};

const ROUNDS: usize = 5;
const SIZE: usize = 64;

struct Options {
    hosts: usize,
    flows: usize,
    packets: usize,
    every: usize,
    delete: bool,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        hosts: 10_000,
        flows: 100_000,
        packets: 5_000_000,
        every: 50_000,
        delete: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let n: usize = value
            .parse()
            .map_err(|_| format!("{flag} {value}: not a number"))?;
        match flag.as_str() {
            "--hosts" => o.hosts = n.clamp(1, 65536),
            "--flows" => o.flows = n.max(1),
            "--packets" => o.packets = n.max(1),
            "--every" => o.every = n.max(1),
            "--delete" => o.delete = n != 0,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(o)
}

#[derive(Clone, Copy, PartialEq)]
enum Policy {
    Precise,
    Flush,
}

/// Host `n`'s address: 10.1.0.0 and up; the hosts added later 10.2.0.0 and up.
fn host(n: usize, added: bool) -> Ipv4Addr {
    let base = Ipv4Addr::new(10, if added { 2 } else { 1 }, 0, 0);
    Ipv4Addr::from(u32::from(base) + n as u32)
}

/// The rule for host `n`, out of port 2.
fn host_rule(n: usize, added: bool) -> String {
    format!("ip,nw_dst={},actions=output:2", host(n, added))
}

/// One frame per flow, each with room in front (as a UMEM frame has): flow `i` goes to
/// host `i % hosts` from its own source port.
fn frames(o: &Options) -> Vec<Vec<u8>> {
    (0..o.flows)
        .map(|i| {
            let template = UdpTemplate {
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                src_ip: Ipv4Addr::new(10, 0, 0, 1),
                dst_ip: host(i % o.hosts, false),
                src_port: (1024 + i % 60_000) as u16,
                dst_port: 9,
                frame_len: SIZE - 4,
                generator: 1,
            };
            let mut buffer = vec![0u8; HEADROOM + SIZE];
            template
                .write(&mut buffer[HEADROOM..], i as u64, 0)
                .expect("a 64-byte UDP frame");
            buffer
        })
        .collect()
}

const HEADROOM: usize = 64;

/// One round: `packets` packets round robin over `frames`, a rule added (or, with
/// `delete`, the last one added deleted) every `every`; nanoseconds a packet.
fn round(
    tables: &mut RuleTables,
    cache: &mut FlowCache,
    frames: &[Vec<u8>],
    o: &Options,
    policy: Policy,
    added: &mut usize,
) -> f64 {
    let now = Duration::from_secs(1);
    let start = Instant::now();
    let mut next = 0;
    let mut last_added = None;
    for packet in 1..=o.packets {
        let flow = extract(&frames[next][HEADROOM..], 1).0;
        let id = match cache.hit(&flow) {
            Some(id) => id,
            None => cache.miss(tables, &flow, now),
        };
        black_box(cache.credit(id, SIZE, now).decision.rules.len());
        next += 1;
        if next == frames.len() {
            next = 0;
        }
        if packet % o.every == 0 {
            match last_added.take() {
                Some(id) => {
                    cache.harvest_for(tables, &[id], &[]);
                    tables.remove(id);
                }
                None => {
                    let rules = parse_flows(&host_rule(*added, true)).expect("the rule parses");
                    for rule in rules {
                        let id = tables.add(rule, now);
                        last_added = o.delete.then_some(id);
                    }
                }
            }
            *added += 1;
            if policy == Policy::Flush {
                cache.harvest(tables);
                cache.flush();
            }
            cache.revalidate(tables);
        }
    }
    start.elapsed().as_nanos() as f64 / o.packets as f64
}

fn stats_json(ns: f64, stats: &CacheStats, changes: usize) -> String {
    format!(
        "{{\"ns_per_packet\": {ns:.2}, \"changes\": {changes}, \"misses\": {}, \
         \"stale_megaflows\": {}, \"flushes\": {}}}",
        stats.misses, stats.stale, stats.flushes
    )
}

fn main() {
    let o = options().unwrap_or_else(|e| {
        eprintln!("rule_churn: {e}");
        std::process::exit(2);
    });
    let frames = frames(&o);
    let mut text: String = (0..o.hosts).map(|n| host_rule(n, false) + "\n").collect();
    text += "priority=0,actions=drop\n";
    let mut best = [f64::MAX; 2];
    let mut totals = [CacheStats::default(); 2];
    let mut changes = [0usize; 2];
    for _ in 0..ROUNDS {
        for (i, policy) in [Policy::Precise, Policy::Flush].into_iter().enumerate() {
            // Each round starts from the same rules and a warm cache.
            let mut tables = RuleTables::new();
            for rule in parse_flows(&text).expect("the benchmark's rules parse") {
                tables.add(rule, Duration::ZERO);
            }
            let mut cache = FlowCache::default();
            cache.revalidate(&mut tables);
            let mut added = 0;
            let warm = Options {
                every: usize::MAX,
                ..o
            };
            round(&mut tables, &mut cache, &frames, &warm, policy, &mut added);
            let before = cache.stats;
            let ns = round(&mut tables, &mut cache, &frames, &o, policy, &mut added);
            if ns < best[i] {
                best[i] = ns;
                let mut stats = cache.stats;
                stats.misses -= before.misses;
                stats.stale -= before.stale;
                stats.flushes -= before.flushes;
                totals[i] = stats;
                changes[i] = added;
            }
        }
    }
    println!(
        "{{\"hosts\": {}, \"flows\": {}, \"packets\": {}, \"every\": {}, \"delete\": {}, \
         \"precise\": {}, \"flush\": {}, \"flush_over_precise\": {:.2}}}",
        o.hosts,
        o.flows,
        o.packets,
        o.every,
        o.delete,
        stats_json(best[0], &totals[0], changes[0]),
        stats_json(best[1], &totals[1], changes[1]),
        best[1] / best[0]
    );
}
