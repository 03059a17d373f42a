//! AF_XDP receive: 100,000 numbered packets from one namespace; on the other side every
//! number arrives exactly once with identical bytes, or is counted under a named drop; and
//! a signal still counts what had arrived.

mod common;
use common::scenarios::numbered_packets_arrive_once;
use common::*;

#[test]
fn xdp_hundred_thousand_numbered_packets_arrive_once() {
    numbered_packets_arrive_once("xr", "xdp", 100_000);
}

/// rxdrop held still (SIGSTOP) while 1,000 packets arrive (its RX ring holds 1024), then
/// stopped with SIGINT the moment it runs again: it still counts every packet waiting in its
/// RX ring, none dropped.
#[test]
fn a_signal_while_packets_wait_in_the_ring_still_counts_them() {
    let net = NetPair::new("xs");
    let port = format!("xdp:{}", net.b);
    let argv = [
        "bench",
        "rxdrop",
        "--port",
        &port,
        "--duration",
        "60",
        "--json",
        "-q",
    ];
    let mut rx = spawn_in(&net.ns_b, &argv);
    rx.wait_ready();
    let pid = rx.pid().to_string();
    must(&["kill", "-STOP", &pid]);
    let g = traffic::gen_in_a(&net, &["--count", "1000", "--rate", "100000"]);
    assert_eq!(g["packets"].as_u64(), Some(1000), "{g}");
    // The SIGINT waits while the process is stopped, and is handled first when it goes on.
    must(&["kill", "-INT", &pid]);
    must(&["kill", "-CONT", &pid]);
    let (j, log) = rx.finish();
    assert_eq!(j["packets"].as_u64(), Some(1000), "{j}\n{log}");
    assert_eq!(j["drops_total"].as_u64(), Some(0), "{j}");
    net.assert_no_xdp();
}

/// `--count N` takes exactly N packets, as `tcpdump -c` does, even when the ring holds more
/// and the last burst would overshoot (it took whole bursts: 1016 or 1024 for 1000); also
/// when a signal stops it and it takes what had arrived.
#[test]
fn count_takes_exactly_that_many_from_a_full_ring() {
    let net = NetPair::new("xc");
    let port = format!("xdp:{}", net.b);
    for tool in [&["bench", "rxdrop"][..], &["recv"]] {
        for signalled in [false, true] {
            let mut argv = tool.to_vec();
            argv.extend(["--port", &port, "--count", "100", "--json", "-q"]);
            let mut rx = spawn_in(&net.ns_b, &argv);
            rx.wait_ready();
            let pid = rx.pid().to_string();
            must(&["kill", "-STOP", &pid]);
            let g = traffic::gen_in_a(&net, &["--count", "1000", "--rate", "100000"]);
            assert_eq!(g["packets"].as_u64(), Some(1000), "{g}");
            // Handled first when it runs again: the stop, then what had arrived.
            if signalled {
                must(&["kill", "-INT", &pid]);
            }
            must(&["kill", "-CONT", &pid]);
            let (j, log) = rx.finish();
            let counted = j["packets"].as_u64().or(j["rx_packets"].as_u64());
            assert_eq!(counted, Some(100), "{tool:?} {signalled}: {j}\n{log}");
        }
    }
}
