//! Where the datapath's user-space time goes, stage by stage, without I/O: parse (flow key),
//! cache lookup (EMC, megaflows, the slow path on a miss) and the megaflow's counters, then
//! actions (the rules are credited from the megaflows' counts later, off the packet path).
//! Each stage's cost is the difference between loops that stop after it (each loop's fastest
//! of 5 interleaved rounds). The switch's benchmark (bench/switch_peers.py) puts the I/O
//! stage beside it: the switch's whole user-space time per packet, less these. What a VXLAN
//! tunnel port (a GRE one with `--gre 1`) adds is timed alone: popping (an underlay's packet
//! checked, its tunnel port found) and pushing (the outer headers written in front of the
//! frame).
//!
//! cargo run --release -p wirespeed-switch --example stages -- [--rules N] [--flows N]
//!     [--packets N] [--size BYTES] [--metered 1] [--gre 1]
//! prints one JSON object (nanoseconds; the benchmark turns them into cycles). Rules and
//! flows are the benchmark's: N-1 drop rules the traffic misses over
//! `priority=1,in_port=1,actions=output:2`; flows vary the UDP source port, then the source
//! address, like `wirespeed gen --flows`. `--metered 1` puts a meter in front of that
//! output, one whose rate every packet passes: what charging a meter costs.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use wirespeed_packet::{MacAddr, UdpTemplate};
use wirespeed_switch::dpif::process::{BurstLock, process};
use wirespeed_switch::extract::extract;
use wirespeed_switch::field::TunnelOut;
use wirespeed_switch::meter::{Band, MeterConfig, Unit};
use wirespeed_switch::tunnel::header::{OUTER_LEN, OuterTemplate};
use wirespeed_switch::tunnel::{Landing, Mtu, TunnelConfig, TunnelPlane, TunnelPort, Tunnels};
use wirespeed_switch::{FlowCache, Frame, MacView, Ofproto, Verdict, parse_flows};

const HEADROOM: usize = 64;

struct Options {
    rules: usize,
    flows: usize,
    packets: usize,
    size: usize,
    metered: bool,
    gre: bool,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        rules: 1,
        flows: 1,
        packets: 5_000_000,
        size: 64,
        metered: false,
        gre: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or(format!("{flag} needs a value"))?;
        let n: usize = value
            .parse()
            .map_err(|_| format!("{flag} {value}: not a number"))?;
        match flag.as_str() {
            "--rules" => o.rules = n.max(1),
            "--flows" => o.flows = n.max(1),
            "--packets" => o.packets = n.max(1),
            "--size" => o.size = n,
            "--metered" => o.metered = n != 0,
            "--gre" => o.gre = n != 0,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    Ok(o)
}

fn rules(n: usize, metered: bool) -> String {
    let mut text = String::new();
    for i in 0..n - 1 {
        text += &format!(
            "priority={},udp,nw_dst=10.{}.{}.{},tp_dst={},actions=drop\n",
            100 + i % 1000,
            200 + i / 65536 % 50,
            i / 256 % 256,
            i % 256,
            1000 + i % 5000
        );
    }
    match metered {
        true => text + "priority=1,in_port=1,actions=meter:1,output:2\n",
        false => text + "priority=1,in_port=1,actions=output:2\n",
    }
}

/// One frame per flow, each with headroom in front (as a UMEM frame has).
fn frames(o: &Options) -> Result<Vec<Vec<u8>>, String> {
    (0..o.flows)
        .map(|i| {
            let ports = 65536 - 1024;
            let template = UdpTemplate {
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                src_ip: Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 1)) + (i / ports) as u32),
                dst_ip: Ipv4Addr::new(10, 0, 0, 2),
                src_port: (1024 + i % ports) as u16,
                dst_port: 9,
                frame_len: o.size - 4,
                generator: 1,
            };
            let mut buffer = vec![0u8; HEADROOM + o.size];
            template
                .write(&mut buffer[HEADROOM..], i as u64, 0)
                .map_err(|e| format!("frame: {e:?}"))?;
            Ok(buffer)
        })
        .collect()
}

/// A plane with one tunnel port of `kind` (10, key 42) over port 2, its next hop known, and
/// the packets its far end would send it: `frames` pushed.
fn tunnel(frames: &[Vec<u8>], len: usize, kind: &str) -> (TunnelPlane, Vec<Vec<u8>>) {
    let (local, remote) = (Ipv4Addr::new(192, 0, 2, 1), Ipv4Addr::new(192, 0, 2, 2));
    let (mac, far_mac) = (MacAddr([2, 0, 0, 0, 0, 0xa]), MacAddr([2, 0, 0, 0, 0, 0xb]));
    let port = TunnelPort {
        number: 10,
        config: format!("{kind}:remote_ip=192.0.2.2,key=42")
            .parse()
            .expect("options"),
        underlay: 2,
        iface: "ul0".to_string(),
        local_ip: local,
        local_mac: mac,
        mtu: Mtu::new(9000),
    };
    let mut plane = TunnelPlane::new(std::sync::Arc::new(Tunnels {
        ports: vec![port],
        neighbours: Default::default(),
    }));
    plane.set_next_hop(0, remote, far_mac);
    let far: TunnelConfig = format!("{kind}:remote_ip=192.0.2.1,key=42")
        .parse()
        .expect("options");
    let far = OuterTemplate::new(&far, far_mac, mac, remote, local);
    let arriving = frames
        .iter()
        .map(|f| {
            let mut packet = vec![0u8; OUTER_LEN];
            packet.extend_from_slice(&f[HEADROOM..HEADROOM + len]);
            let at = far.push(&mut packet, 42, 0);
            packet.split_off(at)
        })
        .collect();
    (plane, arriving)
}

/// Runs `work` on `packets` frames round robin; nanoseconds per packet.
const ROUNDS: usize = 5;

fn per_packet(frames: &mut [Vec<u8>], packets: usize, mut work: impl FnMut(&mut Vec<u8>)) -> f64 {
    // The next frame by a wrapping index, not `i % frames.len()`: a division per packet
    // (tens of cycles) would be counted as parse time.
    let start = Instant::now();
    let mut next = 0;
    for _ in 0..packets {
        work(&mut frames[next]);
        next += 1;
        if next == frames.len() {
            next = 0;
        }
    }
    let elapsed: Duration = start.elapsed();
    elapsed.as_nanos() as f64 / packets as f64
}

fn main() {
    let o = options().unwrap_or_else(|e| {
        eprintln!("stages: {e}");
        std::process::exit(2);
    });
    let mut frames = frames(&o).unwrap_or_else(|e| {
        eprintln!("stages: --size {}: {e}", o.size);
        std::process::exit(2);
    });
    let mut ofproto = Ofproto::without_rules();
    ofproto.add_port(1);
    ofproto.add_port(2);
    // A meter every packet passes: u32::MAX packets a second, a second's worth in the bucket.
    let meter = MeterConfig {
        id: 1,
        unit: Unit::Packets,
        band: Some(Band {
            rate: u32::MAX,
            burst_size: 0,
        }),
        burst: false,
        stats: true,
    };
    ofproto
        .tables
        .set_meter(meter, false, Duration::ZERO)
        .expect("a valid meter");
    for rule in parse_flows(&rules(o.rules, o.metered)).expect("the benchmark's rules parse") {
        ofproto.tables.add(rule, Duration::ZERO);
    }
    let len = o.size - 4;
    let now = Duration::from_secs(1);
    let ports = ofproto.ports().to_vec();
    let mut macs = MacView::new(&ofproto.mac_table);
    let ofproto = Mutex::new(ofproto);
    let mut cache = FlowCache::default();

    // Warm the caches the way a running switch has them, then measure each prefix of the path.
    let mut verdict = Verdict::default();
    let mut full = |cache: &mut FlowCache, buffer: &mut Vec<u8>, verdict: &mut Verdict| {
        let mut frame = Frame::new(buffer, HEADROOM, len).expect("frame fits");
        verdict.reset();
        let mut shared = BurstLock::new(&ofproto, &mut macs, &ports, false);
        let mut emit = |_: &[u8], _: &[u32], _: TunnelOut| {};
        process(cache, &mut shared, &mut frame, 1, now, verdict, &mut emit);
    };
    per_packet(&mut frames, o.flows.max(100_000), |b| {
        full(&mut cache, b, &mut verdict)
    });
    let before = cache.stats;
    // Each stage is timed in ROUNDS interleaved rounds and its fastest round kept: the
    // stages are differences of these times, and one preempted round would skew them.
    let round = (o.packets / ROUNDS).max(1);
    let (mut parse, mut lookup, mut whole) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        parse = parse.min(per_packet(&mut frames, round, |b| {
            black_box(extract(&b[HEADROOM..], 1));
        }));
        lookup = lookup.min(per_packet(&mut frames, round, |b| {
            // As `process` does it (the flow used in its return slot, not moved out).
            let parsed = extract(&b[HEADROOM..], 1);
            black_box(parsed.1);
            let id = match cache.hit(&parsed.0) {
                Some(id) => id,
                None => cache.miss(&mut ofproto.lock().unwrap().tables, &parsed.0, now),
            };
            black_box(cache.credit(id, len, now).decision.rules.len());
        }));
        whole = whole.min(per_packet(&mut frames, round, |b| {
            full(&mut cache, b, &mut verdict)
        }));
    }
    assert_eq!(verdict.outputs.as_slice(), &[2], "the traffic is forwarded");
    let after = cache.stats;
    let kind = if o.gre { "gre" } else { "vxlan" };
    let (mut plane, mut arriving) = tunnel(&frames, len, kind);
    let (mut pop, mut push) = (f64::MAX, f64::MAX);
    let mut pushed: Vec<Vec<u8>> = frames
        .iter()
        .map(|f| {
            let mut packet = vec![0u8; OUTER_LEN];
            packet.extend_from_slice(&f[HEADROOM..HEADROOM + len]);
            packet
        })
        .collect();
    for _ in 0..ROUNDS {
        pop = pop.min(per_packet(&mut arriving, round, |p| {
            let landing = plane.arrive(2, p, &[], Duration::ZERO);
            assert!(matches!(landing, Landing::Tunnel { port: 10, .. }));
            black_box(landing);
        }));
        push = push.min(per_packet(&mut pushed, round, |p| {
            black_box(plane.push(0, p, TunnelOut::default(), now).is_ok());
        }));
    }
    assert_eq!(
        plane.counters[0].no_neighbour + plane.counters[0].no_route,
        0
    );
    let stages = [
        ("parse", parse),
        ("lookup", (lookup - parse).max(0.0)),
        ("actions", (whole - lookup).max(0.0)),
        ("total", whole),
        ("tunnel_pop", pop),
        ("tunnel_push", push),
    ];
    let ns: Vec<String> = stages
        .iter()
        .map(|(k, v)| format!("\"{k}\": {v:.2}"))
        .collect();
    println!(
        "{{\"rules\": {}, \"flows\": {}, \"size\": {}, \"packets\": {}, \"metered\": {}, \
         \"tunnel\": \"{kind}\", \"ns_per_packet\": {{{}}}, \
         \"cache\": {{\"emc_hits\": {}, \"megaflow_hits\": {}, \"misses\": {}, \
         \"megaflows\": {}, \"masks\": {}}}}}",
        o.rules,
        o.flows,
        o.size,
        o.packets,
        o.metered,
        ns.join(", "),
        after.emc_hits - before.emc_hits,
        after.megaflow_hits - before.megaflow_hits,
        after.misses - before.misses,
        cache.megaflows().count(),
        cache.megaflow_masks(),
    );
}
