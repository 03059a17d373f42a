//! `wirespeed switch --ipfix`: flow records from the datapath's own counters, judged by
//! real collectors. nfcapd (nfdump's collector) on the switch's namespace's loopback takes
//! the export, and `nfdump` lists each flow that crossed the switch with exactly the packets
//! and bytes sent; tshark's cflow dissector decodes a capture of the export with no
//! malformed packet; a collector started after the switch decodes records once the
//! templates are sent again; flows the kernel's fast path carries (`--offload`) are
//! reported from its counters; sampling reports whole flows; flows through a tunnel carry
//! its ends and VNI; TCP flows carry their flags; bad flags are refused.

mod common;
use common::ovs_far_end::OvsFarEnd;
use common::switched::{Setup, Switched, field};
use common::tunnelled::{B_UNDERLAY, Far, JOIN_VNI_42, Tunnelled};
use common::*;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// IANA's IPFIX port; each test's collector is on its own namespace's loopback.
const PORT: &str = "4739";
/// Frames gen sends, FCS included (`--size`): 124 bytes on the wire here, 110 of IP.
const SIZE: u64 = 128;
const FRAME_BYTES: u64 = SIZE - 4;
const IP_BYTES: u64 = FRAME_BYTES - 14;

/// nfcapd on 127.0.0.1:4739 in a namespace, writing into a directory of its own.
struct Collector {
    child: Option<Child>,
    ns: String,
    dir: String,
}

/// One flow as nfdump lists it.
#[derive(Debug, Clone, PartialEq)]
struct Flow {
    src: String,
    dst: String,
    src_port: u16,
    /// ICMP: type * 256 + code (nfdump shows type.code).
    dst_port: u16,
    protocol: String,
    packets: u64,
    bytes: u64,
    input: u32,
    output: u32,
    vlan: u16,
    start: f64,
    end: f64,
    /// TCP's flags the flow's packets had, as nfdump prints them (`........` for none).
    flags: String,
}

impl Collector {
    fn start(ns: &str) -> Collector {
        let dir =
            std::env::temp_dir().join(format!("wirespeed-{}-nfcapd-{ns}", std::process::id()));
        let dir = dir.to_string_lossy().into_owned();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "nfcapd", "-w", &dir, "-p", PORT])
            .args(["-b", "127.0.0.1", "-t", "60"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nfcapd (install it: make deps)");
        let collector = Collector {
            child: Some(child),
            ns: ns.to_string(),
            dir,
        };
        collector.wait_listening();
        collector
    }

    /// Until nfcapd's socket is bound (it sets up its files first).
    fn wait_listening(&self) {
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            let out = must(&[
                "ip",
                "netns",
                "exec",
                &self.ns,
                "ss",
                "-Huln",
                &format!("sport = :{PORT}"),
            ]);
            if !out.trim().is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nfcapd never listened on 127.0.0.1:{PORT}");
    }

    /// Stops nfcapd (SIGTERM: it writes its file out), then the flows nfdump lists.
    fn stop(mut self) -> Vec<Flow> {
        // Let it read what the switch sent last.
        std::thread::sleep(Duration::from_millis(300));
        let mut child = self.child.take().unwrap();
        must(&["kill", "-TERM", &child.id().to_string()]);
        let status = child.wait().unwrap();
        assert!(status.success(), "nfcapd: {status}");
        let out = must(&[
            "nfdump",
            "-R",
            &self.dir,
            "-q",
            "-N",
            "-o",
            // Not %ter: nfdump 1.7.1 prints its milliseconds wrong; end = start + duration.
            "fmt:%sa|%da|%sp|%dp|%pr|%pkt|%byt|%in|%out|%svln|%tsr|%td|%flg",
        ]);
        out.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let f: Vec<&str> = line.split('|').map(str::trim).collect();
                assert_eq!(f.len(), 13, "{line}");
                let n = |i: usize| -> u64 {
                    f[i].parse()
                        .unwrap_or_else(|_| panic!("field {i} of {line}"))
                };
                let t = |i: usize| -> f64 { f[i].parse().unwrap() };
                Flow {
                    src: f[0].to_string(),
                    dst: f[1].to_string(),
                    src_port: n(2) as u16,
                    dst_port: match f[3].split_once('.') {
                        Some((t, c)) => t.parse::<u16>().unwrap() * 256 + c.parse::<u16>().unwrap(),
                        None => n(3) as u16,
                    },
                    protocol: f[4].to_string(),
                    packets: n(5),
                    bytes: n(6),
                    input: n(7) as u32,
                    output: n(8) as u32,
                    vlan: n(9) as u16,
                    start: t(10),
                    end: t(10) + t(11),
                    flags: f[12].to_string(),
                }
            })
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A switch between A and B exporting to nfcapd on 127.0.0.1:4739 in its namespace
/// (started first: it gets the templates the switch sends at start), port 1's packets going
/// out of port 2 by a rule (so each flow's egress is known).
fn exporting(tag: &str, setup: Setup<'_>, extra: &[&str]) -> (Switched, Collector) {
    let collector = format!("127.0.0.1:{PORT}");
    let mut args = vec!["--ipfix", &collector];
    args.extend_from_slice(extra);
    let (s, collector) = Switched::prepared(tag, setup, &args, |c| Collector::start(&c.ns_m));
    with_rules(&s);
    (s, collector)
}

fn with_rules(s: &Switched) {
    s.ctl_ok(&["add-flow", "priority=10,in_port=1,actions=output:2"]);
    s.ctl_ok(&["add-flow", "priority=10,in_port=2,actions=output:1"]);
}

/// Sends `per_flow` UDP frames of [`SIZE`] for each of `flows` flows from A (10.9.0.1,
/// source ports from `src_port`) to 10.9.0.3 port 7000 behind B's MAC, round robin. B
/// drops them without a word (not its address, no forwarding): only A's packets cross.
fn send(s: &Switched, flows: u32, per_flow: u64, src_port: u16) {
    send_with(s, flows, per_flow, src_port, &[]);
}

/// [`send`] with `extra` on gen's command line.
fn send_with(s: &Switched, flows: u32, per_flow: u64, src_port: u16, extra: &[&str]) {
    let port = format!("packet:{}", s.c.a);
    let dst_mac = mac_of(&s.c.ns_b, &s.c.b);
    let count = (u64::from(flows) * per_flow).to_string();
    let (flows, size, src_port) = (flows.to_string(), SIZE.to_string(), src_port.to_string());
    let mut argv = vec![
        "gen",
        "--port",
        &port,
        "--count",
        &count,
        "--flows",
        &flows,
        "--size",
        &size,
        "--rate",
        "20000",
        "--src-ip",
        "10.9.0.1",
        "--dst-ip",
        "10.9.0.3",
        "--src-port",
        &src_port,
        "--dst-port",
        "7000",
        "--dst-mac",
        &dst_mac,
        "--json",
        "-q",
    ];
    argv.extend_from_slice(extra);
    let tx = run_json(&s.c.ns_a, &argv);
    assert_eq!(
        tx["tx_packets"].as_u64(),
        Some(count.parse().unwrap()),
        "gen: {tx}"
    );
    // Until the switch has forwarded them.
    std::thread::sleep(Duration::from_millis(200));
}

/// The flows to 10.9.0.3 port 7000 (leaving out anything else hosts sent), by source port.
fn test_flows(flows: &[Flow]) -> Vec<Flow> {
    let mut ours: Vec<Flow> = flows
        .iter()
        .filter(|f| f.dst_port == 7000 && f.dst == "10.9.0.3")
        .cloned()
        .collect();
    ours.sort_by_key(|f| f.src_port);
    ours
}

/// Each flow of source port `ports` listed once, with `per_flow` packets of [`IP_BYTES`],
/// from port 1 out of port 2, within `window` (seconds since the epoch).
fn assert_flows(listed: &[Flow], ports: &[u16], per_flow: u64, window: (f64, f64)) {
    let ours = test_flows(listed);
    let got: Vec<u16> = ours.iter().map(|f| f.src_port).collect();
    assert_eq!(got, ports, "the flows nfdump lists: {listed:#?}");
    for f in &ours {
        assert_eq!(
            (
                f.src.as_str(),
                f.protocol.as_str(),
                f.input,
                f.output,
                f.vlan
            ),
            ("10.9.0.1", "17", 1, 2, 0),
            "{f:?}"
        );
        assert_eq!(
            (f.packets, f.bytes),
            (per_flow, per_flow * IP_BYTES),
            "{f:?}"
        );
        assert!(
            window.0 - 1.0 <= f.start && f.start <= f.end && f.end <= window.1 + 1.0,
            "times {} to {} outside the test's {window:?}",
            f.start,
            f.end
        );
    }
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// tshark's `fields` of each IPFIX message in `file` (the export's port decoded as cflow),
/// one line a message, several values of a field joined by commas.
fn tshark_cflow(file: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let decode = format!("udp.port=={PORT},cflow");
    let mut argv = vec![
        "tshark", "-r", file, "-n", "-d", &decode, "-Y", "cflow", "-T",
    ];
    argv.extend(["fields", "-E", "separator=/t", "-E", "aggregator=,"]);
    for f in fields {
        argv.extend(["-e", f]);
    }
    must(&argv)
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// tshark decodes every message of the export captured in `file` with no malformed packet
/// and no warning.
fn assert_cflow_clean(file: &str) {
    let decode = format!("udp.port=={PORT},cflow");
    let problems = must(&[
        "tshark",
        "-r",
        file,
        "-n",
        "-d",
        &decode,
        "-Y",
        "_ws.malformed || _ws.expert.severity >= warning",
    ]);
    assert!(problems.trim().is_empty(), "tshark: {problems}");
}

/// The numbers of a tshark field's comma-joined values.
fn numbers(values: &str) -> Vec<u64> {
    values
        .split(',')
        .filter(|v| !v.is_empty())
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{values}")))
        .collect()
}

#[test]
fn nfdump_and_tshark_read_each_flow_with_the_packets_and_bytes_the_switch_forwarded() {
    let export = ScratchFile::new("ipfix.pcap");
    let args = [&format!("127.0.0.1:{PORT}")[..], "--ipfix-domain", "42"];
    // tcpdump too records the export from the start, templates and all.
    let (mut s, (collector, capture)) = Switched::prepared(
        "ix",
        Setup::default(),
        &[&["--ipfix"][..], &args].concat(),
        |c| {
            let capture = Capture::tcpdump(&c.ns_m, "lo", "inout", &export);
            (Collector::start(&c.ns_m), capture)
        },
    );
    with_rules(&s);
    let begun = unix_now();
    send(&s, 3, 100, 5000);
    let flows = s.ctl_ok(&["dump-flows"]);
    let forwarded = field(&flows, "in_port=1 actions=output:2", "n_packets");
    let cache = s.ctl_ok(&["dump-cache"]);
    // One megaflow per flow: exact on addresses and ports while exporting.
    let megaflows = cache.lines().filter(|l| l.contains("tp_dst=7000")).count();
    assert_eq!(megaflows, 3, "one megaflow per flow:\n{cache}");
    let (j, _) = s.stop();
    let ended = unix_now();
    let captured = capture.stop(true);
    let listed = collector.stop();

    // nfdump: each flow once, exactly as sent and as the switch counted.
    assert_flows(&listed, &[5000, 5001, 5002], 100, (begun, ended));
    let reported: u64 = listed
        .iter()
        .filter(|f| f.input == 1)
        .map(|f| f.packets)
        .sum();
    assert_eq!(reported, forwarded, "{listed:#?}");
    assert_eq!(j["ports"][1]["tx_packets"], forwarded, "{j}");
    let ipfix = &j["ipfix"];
    assert_eq!(ipfix["records"], listed.len() as u64, "{j}");
    assert_eq!(ipfix["send_errors"], 0, "{j}");
    assert_eq!(ipfix["lost_megaflows"], 0, "{j}");
    assert_eq!(ipfix["templates"], 1, "{j}");
    assert_eq!(ipfix["messages"], captured.frames.len() as u64, "{j}");

    // tshark: every message decodes cleanly...
    assert_cflow_clean(&export);
    let messages = tshark_cflow(
        &export,
        &[
            "cflow.od_id",
            "cflow.sequence",
            "cflow.template_id",
            "cflow.sampling_population",
            "cflow.srcaddr",
            "cflow.srcport",
            "cflow.dstport",
            "cflow.protocol",
            "cflow.inputint",
            "cflow.outputint",
            "cflow.packets",
            "cflow.octets",
            "cflow.layer2_octet_delta_count",
            "cflow.flow_end_reason",
        ],
    );
    assert_eq!(messages.len(), captured.frames.len(), "{messages:?}");
    // ...the templates first (IPv4, IPv6, each again with VXLAN's or Geneve's tunnel and
    // with GRE's, the sampling options), with 1 in 1 sampled...
    assert_eq!(
        messages[0][2], "256,257,259,260,261,262,258",
        "{messages:?}"
    );
    assert_eq!(messages[0][3], "1", "{messages:?}");
    // ...each numbered by the data records before it (the options record is one)...
    let mut before = 0;
    for m in &messages {
        assert_eq!(m[0].split(',').next(), Some("42"), "{m:?}");
        assert_eq!(numbers(&m[1]), [before], "{messages:?}");
        before += (numbers(&m[3]).len() + numbers(&m[5]).len()) as u64;
    }
    // ...and the flows' records say what nfdump says, frame bytes too.
    let mut ours = Vec::new();
    for m in &messages[1..] {
        let columns: Vec<Vec<u64>> = (5..14).map(|i| numbers(&m[i])).collect();
        for r in 0..columns[0].len() {
            let record: Vec<u64> = columns.iter().map(|c| c[r]).collect();
            if record[1] == 7000 {
                ours.push(record);
            }
        }
    }
    ours.sort();
    let want = |port: u64| {
        vec![
            port,
            7000,
            17,
            1,
            2,
            100,
            100 * IP_BYTES,
            100 * FRAME_BYTES,
            4,
        ]
    };
    assert_eq!(ours, [want(5000), want(5001), want(5002)], "{messages:?}");
}

/// Each data record tshark decodes in `file` (the export's port decoded as cflow): the
/// lines of its "Flow N" block, trimmed ("SrcAddr: 10.9.0.1", "Enterprise Private entry:
/// (VMware Inc.) Type 893: Value (hex bytes): c0 a8 4d 02", ...).
fn tshark_records(file: &str) -> Vec<Vec<String>> {
    let decode = format!("udp.port=={PORT},cflow");
    let text = must(&["tshark", "-r", file, "-n", "-d", &decode, "-V"]);
    let mut records: Vec<Vec<String>> = Vec::new();
    let mut open: Option<usize> = None;
    for line in text.lines() {
        let depth = line.len() - line.trim_start().len();
        let trimmed = line.trim();
        if let Some(number) = trimmed.strip_prefix("Flow ")
            && number.parse::<u32>().is_ok()
        {
            open = Some(depth);
            records.push(Vec::new());
        } else if open.is_some_and(|at| depth > at) {
            records.last_mut().unwrap().push(trimmed.to_string());
        } else {
            open = None;
        }
    }
    records
}

/// A record's value after `label: `, or "" when it has none.
fn value_of<'a>(record: &'a [String], label: &str) -> &'a str {
    let prefix = format!("{label}: ");
    record
        .iter()
        .find_map(|l| l.strip_prefix(&prefix))
        .unwrap_or("")
}

/// The hex bytes of a record's VMware element `id` (Open vSwitch's tunnel elements).
fn vmware_element(record: &[String], id: u16) -> &str {
    value_of(
        record,
        &format!("Enterprise Private entry: (VMware Inc.) Type {id}: Value (hex bytes)"),
    )
}

/// Five pings each way between host A, behind the switch's tunnel port 10, and the kernel's
/// vxlan device (VNI 42) across the underlay. nfdump lists the four ICMP flows (requests
/// and replies each way) with exactly their packets and bytes; tshark finds in each record
/// the tunnel as Open vSwitch reports one: what came out of it from the far end
/// (192.168.77.2) to our address, what went in from ours to the far end, each over UDP to
/// port 4789, tunnelType 1 (VXLAN), tunnelKey 42.
#[test]
fn flows_through_a_tunnel_carry_its_ends_and_vni() {
    let mut t = Tunnelled::new("ti", Far::Kernel);
    t.kernel_tunnel("vxlan", 42);
    t.hosts_know_each_other();
    flows_are_reported_with_their_tunnel(&mut t, "vxlan", "11 | 12 b5 | 01 | 00 00 2a");
}

/// The same across GRE with Open vSwitch the far end (this kernel has no GRE): IP protocol
/// 47, no port, tunnelType 2 (GRE) and the key in four bytes, as Open vSwitch sends them.
#[test]
fn flows_through_gre_carry_its_ends_and_four_byte_key() {
    let mut t = Tunnelled::new("tg", Far::Switch);
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    let _ovs = OvsFarEnd::start(&t, "gre", "key=42");
    flows_are_reported_with_their_tunnel(&mut t, "gre", "2f | 00 00 | 02 | 00 00 00 2a");
}

/// Five pings each way across switch A's tunnel port 10 of `kind` (key=flow, the flows
/// setting 42) to `t`'s far end, exported by IPFIX; `outer` is what tshark must find of the
/// tunnel in each record after its addresses: protocol, port, tunnelType, tunnelKey.
fn flows_are_reported_with_their_tunnel(t: &mut Tunnelled, kind: &str, outer: &str) {
    must(&["ip", "-n", &t.ns_sa, "link", "set", "lo", "up"]);
    let export = ScratchFile::new("ipfix.pcap");
    let capture = Capture::tcpdump(&t.ns_sa, "lo", "inout", &export);
    let collector = Collector::start(&t.ns_sa);
    t.start_a_with(
        &format!("{kind}:remote_ip={B_UNDERLAY},key=flow"),
        JOIN_VNI_42,
        &["--ipfix", &format!("127.0.0.1:{PORT}")],
    );
    assert_eq!(ping(&t.ns_b, "10.9.0.1", 5), 5, "far end to A");
    assert_eq!(ping(&t.ns_ha, "10.9.0.2", 5), 5, "A to far end");
    let j = t.stop_a();
    capture.stop(true);
    let listed = collector.stop();
    t.assert_no_xdp_left();
    assert_eq!(j["ipfix"]["send_errors"], 0, "{j}");

    // nfdump (which keeps no tunnel fields) still reads each record: four flows, five
    // echoes each, 84 IP bytes an echo.
    let mut icmp: Vec<(String, String, u16, u32, u32, u64, u64)> = listed
        .iter()
        .filter(|f| f.protocol == "1" && f.src.starts_with("10.9.0."))
        .map(|f| {
            let (src, dst) = (f.src.clone(), f.dst.clone());
            (src, dst, f.dst_port, f.input, f.output, f.packets, f.bytes)
        })
        .collect();
    icmp.sort();
    let flow = |src: &str, dst: &str, icmp_type: u16, input: u32, output: u32| {
        let (src, dst) = (src.to_string(), dst.to_string());
        (src, dst, icmp_type << 8, input, output, 5, 5 * 84)
    };
    assert_eq!(
        icmp,
        [
            flow("10.9.0.1", "10.9.0.2", 0, 1, 10),
            flow("10.9.0.1", "10.9.0.2", 8, 1, 10),
            flow("10.9.0.2", "10.9.0.1", 0, 10, 1),
            flow("10.9.0.2", "10.9.0.1", 8, 10, 1),
        ],
        "{listed:#?}"
    );

    // tshark: the export decodes cleanly, enterprise elements and all...
    assert_cflow_clean(&export);
    // ...and every record of those flows names the tunnel, far end or ours first as the
    // flow came out or went in: the input port, the outer source and destination, the
    // tunnel's `outer` fields, and the packets.
    let mut tunnels: Vec<String> = tshark_records(&export)
        .iter()
        .filter(|r| value_of(r, "SrcAddr").starts_with("10.9.0."))
        .map(|r| {
            let mut fields = vec![value_of(r, "InputInt")];
            fields.extend([893, 894, 895, 897, 891, 892].map(|id| vmware_element(r, id)));
            fields.push(value_of(r, "Packets"));
            fields.join(" | ")
        })
        .collect();
    tunnels.sort();
    let (far, ours) = ("c0 a8 4d 02", "c0 a8 4d 01");
    let tunnel =
        |input: &str, src: &str, dst: &str| format!("{input} | {src} | {dst} | {outer} | 5");
    assert_eq!(
        tunnels,
        [
            tunnel("1", ours, far),
            tunnel("1", ours, far),
            tunnel("10", far, ours),
            tunnel("10", far, ours),
        ],
    );
}

/// A flow that comes back after its record went idle starts again when its packets do: its
/// megaflow, made the first time, is no clock for the second record.
/// A burst of reports over a link slower than the host (loopback held to 4 Mbit/s by tbf,
/// as a 1 Gb/s NIC is slower than the CPU that fills it): the messages the socket has no
/// room for wait, in order, and go as the link takes them. (They were lost: the socket is
/// non-blocking, and a full send buffer refused each one.)
#[test]
fn a_burst_of_reports_over_a_slow_link_waits_for_room() {
    let collector = format!("127.0.0.1:{PORT}");
    let (mut s, collector) =
        Switched::prepared("ib", Setup::default(), &["--ipfix", &collector], |c| {
            must(&[
                "ip", "netns", "exec", &c.ns_m, "tc", "qdisc", "add", "dev", "lo", "root", "tbf",
                "rate", "4mbit", "burst", "16k", "limit", "8mb",
            ]);
            Collector::start(&c.ns_m)
        });
    with_rules(&s);
    // 3,000 flows reported at once when the switch stops: about 190 messages, 270 KB.
    send(&s, 3000, 1, 10000);
    let (j, _) = s.stop();
    let listed = test_flows(&collector.stop());
    assert_eq!(listed.len(), 3000, "{j}");
    let ipfix = &j["ipfix"];
    assert_eq!(
        (
            ipfix["lost_records"].as_u64(),
            ipfix["send_errors"].as_u64()
        ),
        (Some(0), Some(0)),
        "{j}"
    );
}

#[test]
fn a_flow_back_after_going_idle_starts_when_its_packets_do() {
    let (mut s, collector) = exporting("ib", Setup::default(), &["--ipfix-idle-timeout", "1"]);
    let first = unix_now();
    send(&s, 1, 10, 5100);
    // Reported at the idle timeout and forgotten (a share of the megaflows is read every
    // second).
    std::thread::sleep(Duration::from_millis(3500));
    let again = unix_now();
    send(&s, 1, 10, 5100);
    let _ = s.stop();
    let ended = unix_now();
    let listed = test_flows(&collector.stop());
    assert_eq!(listed.len(), 2, "{listed:#?}");
    assert_flows(&listed[..1], &[5100], 10, (first, again));
    // The second starts after the last read of the counts before its packets: housekeeping
    // reads them about once a second (assert_flows allows a second more).
    assert_flows(&listed[1..], &[5100], 10, (again - 1.0, ended));
}

/// The templates go out at start and every --ipfix-template-interval: a collector that
/// starts after the switch (or lost them) decodes the records sent after the next ones.
#[test]
fn a_collector_started_later_decodes_records_once_the_templates_come_again() {
    let collector = format!("127.0.0.1:{PORT}");
    let mut s = Switched::new(
        "il",
        &["--ipfix", &collector, "--ipfix-template-interval", "1"],
    );
    with_rules(&s);
    // No collector: these flows' records have nowhere to go yet.
    send(&s, 2, 50, 6000);
    let late = Collector::start(&s.c.ns_m);
    // The next templates come within a second; records sent after them decode.
    std::thread::sleep(Duration::from_millis(1500));
    let begun = unix_now();
    send(&s, 2, 70, 5000);
    let (j, _) = s.stop();
    let listed = late.stop();
    // The flows sent before the collector started are reported at the stop too: the
    // switch stops before their idle timeout.
    let ours = test_flows(&listed);
    assert_eq!(ours.len(), 4, "{listed:#?}");
    assert_flows(
        &ours
            .iter()
            .filter(|f| f.src_port < 6000)
            .cloned()
            .collect::<Vec<_>>(),
        &[5000, 5001],
        70,
        (begun, unix_now()),
    );
    for f in ours.iter().filter(|f| f.src_port >= 6000) {
        assert_eq!((f.packets, f.bytes), (50, 50 * IP_BYTES), "{f:?}");
    }
    assert!(j["ipfix"]["templates"].as_u64().unwrap() >= 2, "{j}");
}

/// With --offload the kernel's fast path forwards a flow after its first packet; its
/// records add the fast path's counts to the megaflow's, every packet once.
#[test]
fn flows_the_kernel_forwards_are_reported_from_its_counters() {
    let (mut s, collector) = exporting("io", Setup::default(), &["--offload"]);
    for (ns, dev) in [(&s.c.ns_a, &s.c.a), (&s.c.ns_b, &s.c.b)] {
        must(&["ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on"]);
    }
    let begun = unix_now();
    send(&s, 3, 200, 5000);
    let (j, _) = s.stop();
    let listed = collector.stop();
    let fast = j["ports"][0]["fast_path"]["rx_packets"]
        .as_u64()
        .unwrap_or(0);
    assert!(fast >= 500, "the kernel forwarded {fast} of 600: {j}");
    assert_flows(&listed, &[5000, 5001, 5002], 200, (begun, unix_now()));
}

/// A TCP connection's two flows carry the flags their packets had (tcpControlBits): the
/// client's SYN, ACK, PSH (its data) and FIN, the server's SYN, ACK and FIN.
#[test]
fn tcp_flows_carry_their_packets_flags() {
    let (s, collector) = exporting("it", Setup::default(), &[]);
    assert_tcp_flags(s, collector);
}

/// The same with `--offload`, the hosts' checksums complete (the kernel leaves partial ones
/// to user space): after each direction's first packet the kernel forwards the connection,
/// and its flags come from the kernel's entries.
#[test]
fn tcp_flows_the_kernel_forwards_carry_their_packets_flags() {
    let (s, collector) = exporting("ik", Setup::default(), &["--offload"]);
    for (ns, dev) in [(&s.c.ns_a, &s.c.a), (&s.c.ns_b, &s.c.b)] {
        must(&[
            "ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on", "tx", "off",
        ]);
    }
    let kernel = assert_tcp_flags(s, collector);
    assert!(kernel >= 20, "the kernel forwarded {kernel} packets");
}

/// One TCP connection from A to B port 5001 (200,000 bytes), then the flags nfdump lists
/// for each direction; the packets the kernel's fast path forwarded.
fn assert_tcp_flags(mut s: Switched, collector: Collector) -> u64 {
    s.tcp_transfer_is_intact(200_000);
    let (j, _) = s.stop();
    let mut tcp: Vec<(String, String, u16, u16, String)> = collector
        .stop()
        .into_iter()
        .filter(|f| f.protocol == "6")
        .map(|f| (f.src, f.dst, f.src_port, f.dst_port, f.flags))
        .collect();
    tcp.sort();
    let client_port = tcp.iter().find(|f| f.3 == 5001).map_or(0, |f| f.2);
    let ends = |src: &str, dst: &str, sp: u16, dp: u16, flags: &str| {
        (src.to_string(), dst.to_string(), sp, dp, flags.to_string())
    };
    assert_eq!(
        tcp,
        [
            ends("10.9.0.1", "10.9.0.2", client_port, 5001, "...AP.SF"),
            ends("10.9.0.2", "10.9.0.1", 5001, client_port, "...A..SF"),
        ],
        "nfdump's TCP flows"
    );
    (0..2)
        .map(|p| {
            j["ports"][p]["fast_path"]["rx_packets"]
                .as_u64()
                .unwrap_or(0)
        })
        .sum()
}

/// A tagged flow's record has its VLAN id, and IP bytes are its frames less Ethernet and
/// the tag.
#[test]
fn tagged_flows_carry_their_vlan_id() {
    let (mut s, collector) = exporting("iv", Setup::default(), &[]);
    send_with(&s, 2, 40, 5000, &["--vlan", "10"]);
    s.stop();
    let ours = test_flows(&collector.stop());
    assert_eq!(ours.len(), 2, "{ours:#?}");
    for f in &ours {
        assert_eq!((f.vlan, f.input, f.output), (10, 1, 2), "{f:?}");
        assert_eq!((f.packets, f.bytes), (40, 40 * (FRAME_BYTES - 18)), "{f:?}");
    }
}

/// Under `normal` (the default rule) the output port is where the destination was
/// learned, looked up when the record is made.
#[test]
fn normal_flows_go_out_of_the_port_their_destination_was_learned_on() {
    let collector_address = format!("127.0.0.1:{PORT}");
    let (mut s, collector) = Switched::prepared(
        "in",
        Setup::default(),
        &["--ipfix", &collector_address],
        |c| Collector::start(&c.ns_m),
    );
    // B's address is learned behind port 2 (and A's behind port 1).
    assert_eq!(s.ping(&s.c.ns_b, "10.9.0.1", 1), 1);
    let begun = unix_now();
    send(&s, 2, 30, 5000);
    s.stop();
    assert_flows(&collector.stop(), &[5000, 5001], 30, (begun, unix_now()));
}

/// --ipfix-sampling N: whole flows, about 1 in N, each with every packet; the others are
/// counted as sampled out.
#[test]
fn sampling_reports_whole_flows() {
    let (mut s, collector) = exporting("is", Setup::default(), &["--ipfix-sampling", "2"]);
    send(&s, 16, 10, 5000);
    let (j, _) = s.stop();
    let listed = collector.stop();
    let ours = test_flows(&listed);
    assert!(
        (2..=14).contains(&ours.len()),
        "{} of 16 flows reported: {listed:#?}",
        ours.len()
    );
    for f in &ours {
        assert_eq!((f.packets, f.bytes), (10, 10 * IP_BYTES), "{f:?}");
    }
    let left_out = (16 - ours.len() as u64) * 10;
    assert_eq!(j["ipfix"]["sampled_out_packets"], left_out, "{j}");
    assert_eq!(j["ipfix"]["sampling"], 2, "{j}");
}

#[test]
fn bad_ipfix_flags_are_refused_before_any_port_opens() {
    let c = NetChain::new("ib");
    let port = format!("1=xdp:{}", c.ma);
    for (flags, says) in [
        (
            &["--ipfix", "127.0.0.1"][..],
            "--ipfix 127.0.0.1: give the collector as HOST:PORT",
        ),
        (
            &["--ipfix", "no-such-host.invalid:4739"],
            "--ipfix no-such-host.invalid:4739: cannot resolve",
        ),
        (&["--ipfix", "127.0.0.1:0"], "a port from 1 to 65535"),
        (
            &["--ipfix", "127.0.0.1:4739", "--ipfix-active-timeout", "0"],
            "--ipfix-active-timeout",
        ),
        (
            &["--ipfix", "127.0.0.1:4739", "--ipfix-idle-timeout", "soon"],
            "--ipfix-idle-timeout",
        ),
        (
            &["--ipfix", "127.0.0.1:4739", "--ipfix-sampling", "0"],
            "--ipfix-sampling",
        ),
        (
            &[
                "--ipfix",
                "127.0.0.1:4739",
                "--ipfix-template-interval",
                "0",
            ],
            "--ipfix-template-interval",
        ),
        (&["--ipfix-sampling", "4"], "--ipfix <HOST:PORT>"),
    ] {
        let mut argv = vec!["switch", "--port", &port];
        argv.extend_from_slice(flags);
        let out = run_in(&c.ns_m, &argv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} was taken: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
        c.assert_no_xdp_left();
    }
}
