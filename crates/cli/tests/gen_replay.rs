//! gen --pcap replays a capture file: the very bytes, in order, --loop times, at the
//! recorded timing or as fast as the port takes them; pcap and pcapng alike.

mod common;
use common::*;
use wirespeed_packet::{FrameSpec, IpPair, L4Kind, MacAddr};

const FRAMES: usize = 50;
/// Gap between records in the file.
const GAP_US: u32 = 10_000;

/// Frames of several sizes and protocols, each different.
fn frames() -> Vec<Vec<u8>> {
    (0..FRAMES)
        .map(|i| {
            let spec = FrameSpec {
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                vlan: (i % 5 == 0).then_some(42),
                ip: IpPair::V4("10.1.0.1".parse().unwrap(), "10.1.0.2".parse().unwrap()),
                l4: [L4Kind::Udp, L4Kind::TcpSyn, L4Kind::IcmpEcho][i % 3],
                src_port: 2000 + i as u16,
                dst_port: 9,
                generator: 3,
            };
            let len = 100 + i * 20;
            let mut f = vec![0u8; len];
            spec.write(&mut f, len, i as u64, 1 + i as u64).unwrap();
            f
        })
        .collect()
}

/// A classic microsecond pcap of `frames`, GAP_US apart.
fn write_pcap(path: &str, frames: &[Vec<u8>]) {
    let mut out = Vec::new();
    out.extend_from_slice(&0xa1b2c3d4u32.to_le_bytes());
    out.extend_from_slice(&2u16.to_le_bytes());
    out.extend_from_slice(&4u16.to_le_bytes());
    for v in [0u32, 0, 65535, 1] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for (i, f) in frames.iter().enumerate() {
        let t = 1_700_000_000u64 * 1_000_000 + (i as u64) * u64::from(GAP_US);
        for v in [
            (t / 1_000_000) as u32,
            (t % 1_000_000) as u32,
            f.len() as u32,
            f.len() as u32,
        ] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(f);
    }
    std::fs::write(path, out).unwrap();
}

/// What a replay sent (gen's JSON), and what tcpdump saw arrive: the frames, and when (ns).
fn replay(
    net: &NetPair,
    tag: &str,
    file: &str,
    extra: &[&str],
) -> (serde_json::Value, Vec<Vec<u8>>, Vec<u64>) {
    let cap_file = ScratchFile::new(&format!("replay-{tag}.pcap"));
    let cap = Capture::tcpdump_inbound(&net.ns_b, &net.b, &cap_file);
    let port = format!("xdp:{}", net.a);
    let mut args = vec!["gen", "--port", &port, "--pcap", file, "--json", "-q"];
    args.extend_from_slice(extra);
    let tx = run_json(&net.ns_a, &args);
    let seen = cap.stop(true);
    assert_eq!(seen.dropped_by_tcpdump, 0);
    let mut times = Vec::new();
    let mut reader = wirespeed_capture::CaptureReader::open(&*cap_file).unwrap();
    while let Some(r) = reader.next_record().unwrap() {
        times.push(r.ts_ns);
    }
    (tx, seen.frames, times)
}

#[test]
fn replay_pcap_at_recorded_timing_and_pcapng_as_fast_as_possible() {
    let net = NetPair::new("gp");
    let sent = frames();
    let pcap = ScratchFile::new("replay-in.pcap");
    let pcapng = ScratchFile::new("replay-in.pcapng");
    write_pcap(&pcap, &sent);
    must(&["editcap", "-F", "pcapng", &pcap, &pcapng]);

    // Recorded timing, twice: the file spans 0.49 s, so two loops take about a second.
    let (tx, got, times) = replay(&net, "timed", &pcap, &["--loop", "2"]);
    assert_eq!(tx["packets"].as_u64(), Some(2 * FRAMES as u64), "{tx}");
    assert_eq!(tx["loops_done"].as_u64(), Some(2), "{tx}");
    let seconds = tx["seconds"].as_f64().unwrap();
    assert!(
        (0.95..1.5).contains(&seconds),
        "two loops of a 0.49 s file took {seconds} s"
    );
    // Each frame arrives at its place in the schedule (one gap apart, the second loop one
    // gap after the first ends): never early, and no more than 50 ms late.
    let gap = u64::from(GAP_US) * 1000;
    for (i, &t) in times.iter().enumerate() {
        let due = i as u64 * gap;
        let at = t - times[0];
        assert!(
            at + 500_000 >= due && at <= due + 50_000_000,
            "frame {i} arrived {} ms in, due at {} ms",
            at / 1_000_000,
            due / 1_000_000
        );
    }
    let twice: Vec<Vec<u8>> = sent.iter().chain(sent.iter()).cloned().collect();
    assert_eq!(got.len(), twice.len());
    assert!(got == twice, "the frames came out changed or out of order");

    // pcapng, as fast as possible, three times.
    let (tx, got, _) = replay(&net, "fast", &pcapng, &["--fast", "--loop", "3"]);
    assert_eq!(tx["packets"].as_u64(), Some(3 * FRAMES as u64), "{tx}");
    let seconds = tx["seconds"].as_f64().unwrap();
    assert!(
        seconds < 0.4,
        "--fast took {seconds} s: it waited for the recorded gaps"
    );
    let thrice: Vec<Vec<u8>> = (0..3).flat_map(|_| sent.iter().cloned()).collect();
    assert!(got == thrice, "the frames came out changed or out of order");

    // --count stops in the middle of a loop.
    let (tx, got, _) = replay(
        &net,
        "count",
        &pcapng,
        &["--fast", "--loop", "0", "--count", "120"],
    );
    assert_eq!(tx["packets"].as_u64(), Some(120), "{tx}");
    assert_eq!(got.len(), 120);
    assert_eq!(got[119], sent[119 % FRAMES]);

    // The kernel engine repeats each frame --loop times in a burst of its own. XDP frames
    // cross a veth only into a peer in NAPI mode (an XDP program or GRO).
    must(&[
        "ip", "netns", "exec", &net.ns_b, "ethtool", "-K", &net.b, "gro", "on",
    ]);
    let (tx, got, _) = replay(
        &net,
        "kernel",
        &pcap,
        &["--engine", "kernel", "--fast", "--loop", "2"],
    );
    assert_eq!(tx["packets"].as_u64(), Some(2 * FRAMES as u64), "{tx}");
    assert_eq!(tx["engine"], "kernel");
    let mut got_sorted = got.clone();
    got_sorted.sort();
    let mut want = twice.clone();
    want.sort();
    assert!(
        got_sorted == want,
        "the kernel engine did not send each frame twice"
    );

    let out = run_in(
        &net.ns_a,
        &[
            "gen",
            "--port",
            &format!("xdp:{}", net.a),
            "--pcap",
            &pcap,
            "--engine",
            "kernel",
        ],
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("add --fast"));

    net.assert_no_xdp();
}
