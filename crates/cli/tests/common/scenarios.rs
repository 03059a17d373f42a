//! Scenarios that run on either backend (the tests name the backend).

use super::*;
use wirespeed_packet::{MacAddr, UdpTemplate, swap_macs};

/// The receive-side drops an AF_XDP socket caused also show in the veth's counters, as
/// failed XDP redirects (`rx_queue_0_drops`): our named drops must equal those exactly, and
/// are then not counted a second time.
fn socket_drops_seen_by_veth(backend: &str, net: &NetPair, socket_rx_drops: u64) -> u64 {
    if backend != "xdp" {
        return 0;
    }
    let redirect_failures = ethtool_stat(&net.ns_b, &net.b, "rx_queue_0_drops");
    assert_eq!(
        socket_rx_drops, redirect_failures,
        "our receive drops must match the kernel's failed redirects into the socket"
    );
    socket_rx_drops
}

/// Sends `count` numbered frames from `tx_port` in A to an rxdrop --verify on `rx_port` in B,
/// and checks that received + counted drops account for every one.
pub fn numbered_packets_arrive_once(tag: &str, backend: &str, count: u64) {
    let net = NetPair::new(tag);
    let rx_port = format!("{backend}:{}", net.b);
    let tx_port = format!("{backend}:{}", net.a);
    let src_mac = "02:00:00:00:00:01";
    let n = count.to_string();
    let mut rx = spawn_in(
        &net.ns_b,
        &[
            "bench",
            "rxdrop",
            "--port",
            &rx_port,
            "--duration",
            "60",
            "--verify",
            "--expect",
            &n,
            "--src-mac",
            src_mac,
            "--json",
            "-q",
        ],
    );
    rx.wait_ready();
    // Paced, not flat out: a receiver asleep in poll() when the burst starts waits for its
    // vCPU, once about 50 ms on a busy host (49,928 of a flat-out 100,000 arrived, the rest
    // rx_ring_full). At 0.5 Mpps such a wake-up costs a quarter of the packets, not half.
    let tx = run_json(
        &net.ns_a,
        &[
            "gen",
            "--port",
            &tx_port,
            "--count",
            &n,
            "--rate",
            "500000",
            "--src-mac",
            src_mac,
            "--src-port",
            "9",
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["tx_packets"].as_u64(), Some(count), "sender: {tx}");
    assert_eq!(tx["drops_total"].as_u64(), Some(0), "sender dropped: {tx}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (rxj, log) = rx.interrupt();
    let v = &rxj["verify"];
    let unique = v["unique"].as_u64().unwrap();
    assert_eq!(v["duplicates"].as_u64(), Some(0), "{rxj}");
    assert_eq!(v["corrupt"].as_u64(), Some(0), "{rxj}");
    assert_eq!(v["not_test_frames"].as_u64(), Some(0), "{rxj}");
    assert_eq!(v["out_of_range"].as_u64(), Some(0), "{rxj}");
    assert_eq!(v["received"].as_u64(), Some(unique), "{rxj}");
    assert_eq!(rxj["packets"].as_u64(), Some(unique), "{rxj}");
    let receiver_drops = rxj["drops_total"].as_u64().unwrap();
    let veth_drops = net.veth_drops() - socket_drops_seen_by_veth(backend, &net, receiver_drops);
    assert_eq!(
        unique + receiver_drops + veth_drops,
        count,
        "received {unique} + receiver drops {receiver_drops} ({}) + veth drops {veth_drops} != sent; log: {log}",
        rxj["drops"]
    );
    assert_eq!(v["missing"].as_u64(), Some(count - unique), "{rxj}");
    // Drops are allowed (a vCPU can wake late) and counted above, but most must arrive:
    // a receiver that takes nothing would otherwise pass on its drop counts alone.
    assert!(
        unique * 2 >= count,
        "only {unique} of {count} arrived: {rxj}"
    );
    let rss = rxj["peak_rss_bytes"].as_u64().unwrap();
    assert!(
        rss > 0 && rss < 64 << 20,
        "rxdrop with defaults must stay under 64 MB resident: {rss}"
    );
    // The receiver ran the whole time it measured: its CPU time is there, per packet too.
    let cpu = &rxj["cpu"];
    let (user, system) = (
        cpu["user_seconds"].as_f64().unwrap(),
        cpu["system_seconds"].as_f64().unwrap(),
    );
    assert!(
        user + system > 0.0 && user + system <= rxj["seconds"].as_f64().unwrap() * 1.1,
        "{cpu}"
    );
    let per_packet = cpu["user_ns_per_packet"].as_f64().unwrap();
    assert!(
        (per_packet - user * 1e9 / unique as f64).abs() < 1e-3 * per_packet.max(1.0),
        "{cpu}"
    );
    // A rate for each whole second of the run (the live line's), each over a second or
    // more, so together they count no more packets than arrived.
    let seconds = rxj["seconds"].as_f64().unwrap();
    let rates: Vec<f64> = rxj["per_second_mpps"]
        .as_array()
        .unwrap_or_else(|| panic!("no per_second_mpps: {rxj}"))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(
        rates.len() as f64 <= seconds && rates.len() as f64 >= seconds.floor() - 1.0,
        "{} rates in {seconds} s: {rxj}",
        rates.len()
    );
    assert!(
        rates.iter().all(|&r| r >= 0.0) && rates.iter().sum::<f64>() * 1e6 <= unique as f64 + 1.0,
        "{rxj}"
    );
    if backend == "xdp" {
        assert_frames_balanced(&tx);
        assert_frames_balanced(&rxj);
    }
    net.assert_no_xdp();
}

fn expected_frame(seq: u64, ts: u64) -> Vec<u8> {
    let t = UdpTemplate {
        src_mac: "02:00:00:00:00:01".parse::<MacAddr>().unwrap(),
        dst_mac: "02:00:00:00:00:02".parse::<MacAddr>().unwrap(),
        src_ip: "10.0.0.1".parse().unwrap(),
        dst_ip: "10.0.0.2".parse().unwrap(),
        src_port: 9,
        dst_port: 9,
        frame_len: 60,
        generator: 1,
    };
    let mut f = vec![0u8; 60];
    t.write(&mut f, seq, ts).unwrap();
    swap_macs(&mut f);
    f
}

pub fn frames_come_back_swapped(tag: &str, backend: &str) {
    const COUNT: u64 = 10_000;
    let net = NetPair::new(tag);
    let file = format!("/tmp/wirespeed-l2fwd-{}-{tag}.pcap", std::process::id());
    let cap = Capture::tcpdump_inbound(&net.ns_a, &net.a, &file);
    let fwd_port = format!("{backend}:{}", net.b);
    let mut args = vec![
        "bench",
        "l2fwd",
        "--port",
        &fwd_port,
        "--duration",
        "60",
        "--json",
        "-q",
    ];
    // Rings that hold the whole burst: the sender's 10,000 arrive in a few milliseconds,
    // and a forwarder not scheduled in them (a busy machine) filled its default ring and
    // lost over half (AF_PACKET: 4517 came back, rx_ring_full 5483; AF_XDP's 1024-entry
    // ring: 4224 came back, rx_ring_full 5776). The MAC swap and the payload are what this
    // test judges.
    if backend == "packet" {
        args.extend(["--frames", "16384"]);
    } else {
        args.extend(["--ring-size", "16384", "--frames", "32768"]);
    }
    let mut fwd = spawn_in(&net.ns_b, &args);
    fwd.wait_ready();
    // The sender uses AF_XDP transmit only: no XDP program on A, so what comes back reaches
    // the stack and tcpdump.
    let n = COUNT.to_string();
    let tx = run_json(
        &net.ns_a,
        &[
            "bench",
            "txpush",
            "--port",
            &format!("xdp:{}", net.a),
            "--count",
            &n,
            "--src-mac",
            "02:00:00:00:00:01",
            "--json",
            "-q",
        ],
    );
    assert_eq!(tx["tx_packets"].as_u64(), Some(COUNT), "{tx}");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (fj, log) = fwd.interrupt();
    let captured = cap.stop(false);
    let frames = captured.frames;
    let mut seen = vec![false; COUNT as usize];
    for f in &frames {
        let p = wirespeed_packet::read_test_payload(f)
            .unwrap_or_else(|| panic!("not a test frame: {f:02x?}"));
        assert_eq!(
            f,
            &expected_frame(p.seq, p.timestamp_ns),
            "frame {} changed on the way",
            p.seq
        );
        assert!(!seen[p.seq as usize], "frame {} came back twice", p.seq);
        seen[p.seq as usize] = true;
    }
    let forwarded = fj["packets"].as_u64().unwrap();
    let fwd_drops = fj["drops_total"].as_u64().unwrap();
    let d = &fj["drops"];
    let fwd_rx_drops = ["fill_ring_empty", "rx_ring_full", "kernel_dropped"]
        .iter()
        .map(|k| d[k].as_u64().unwrap())
        .sum();
    let veth_drops = net.veth_drops() - socket_drops_seen_by_veth(backend, &net, fwd_rx_drops);
    assert_eq!(
        fj["rx_packets"].as_u64(),
        Some(forwarded + fj["drops"]["tx_ring_full"].as_u64().unwrap()),
        "{fj}"
    );
    assert_eq!(
        frames.len() as u64 + captured.dropped_by_tcpdump + fwd_drops + veth_drops,
        COUNT,
        "captured {} + tcpdump drops {} + forwarder drops {fwd_drops} ({}) + veth drops {veth_drops} != sent; log: {log}",
        frames.len(),
        captured.dropped_by_tcpdump,
        fj["drops"]
    );
    // As in the receive test: drops are counted, but most must come back.
    assert!(
        frames.len() as u64 * 2 >= COUNT,
        "only {} of {COUNT} came back: {fj}",
        frames.len()
    );
    if backend == "xdp" {
        assert_eq!(
            fj["copies"].as_u64(),
            Some(0),
            "AF_XDP l2fwd must move descriptors: {fj}"
        );
        assert_frames_balanced(&fj);
    }
    net.assert_no_xdp();
}
