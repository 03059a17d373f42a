//! Tunnel ports (VXLAN, Geneve, GRE): host A behind a `wirespeed switch`, host B behind
//! another or the kernel's own tunnel device, the two sides joined only by the underlay
//! veth. ping and TCP judge the path; the kernel's vxlan device judges our headers (it takes
//! what we push and we pop what it pushes); tshark decodes what crossed the underlay. This
//! kernel has neither Geneve nor GRE: two switches and tshark judge those.

mod common;
use common::ovs_far_end::OvsFarEnd;
use common::prometheus::{assert_promtool_accepts, sample, scrape_until};
use common::tshark::{tshark_fields, tshark_problems_where};
use common::tunnelled::{A_UNDERLAY, B_UNDERLAY, C_UNDERLAY, Far, JOIN, JOIN_VNI_42, Tunnelled};
use common::*;

/// An ICMP echo of ping's default 56 bytes on the wire.
const ECHO: u64 = 98;

/// The outer headers a tunnel port of `kind` with `options` pushes: Ethernet, IPv4, then
/// UDP and VXLAN or Geneve, or GRE's four bytes and its key and checksum if asked for.
fn outer_len(kind: &str, options: &str) -> u64 {
    match kind {
        "gre" => {
            let has = |option: &str| u64::from(options.contains(option));
            38 + 4 * has("key=") + 4 * has("csum=true")
        }
        _ => 50,
    }
}

/// `count` pings from `ns` to `to`, waiting up to `wait` seconds for the last: how many were
/// answered.
fn ping_waiting(ns: &str, to: &str, count: u32, wait: u32, size: &str) -> u32 {
    let (count, wait) = (count.to_string(), wait.to_string());
    let out = sh(&[
        "ip", "netns", "exec", ns, "ping", "-n", "-c", &count, "-i", "0.2", "-W", &wait, "-s",
        size, "-M", "do", to,
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(", ")
        .find_map(|part| part.strip_suffix(" received"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no ping summary: {text}"))
}

/// The tunnel port's counters in a switch's summary.
fn tunnel(j: &serde_json::Value) -> &serde_json::Value {
    &j["tunnels"][0]
}

/// Five pings each way between hosts behind two switches, every count exact; then a TCP
/// transfer arrives intact.
fn two_switches(kind: &str) {
    two_switches_with(kind, ",key=42", ",key=42");
}

/// [`two_switches`] with switch A's tunnel port given `a_options` and switch B's
/// `b_options`; tshark finds `file`'s frames from A as A's options say.
fn two_switches_with(kind: &str, a_options: &str, b_options: &str) -> ScratchFile {
    let mut t = Tunnelled::new("tn", Far::Switch);
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    let (to_b, to_a) = (
        format!("{kind}:remote_ip={B_UNDERLAY}{a_options}"),
        format!("{kind}:remote_ip={A_UNDERLAY}{b_options}"),
    );
    t.start_a(&to_b, JOIN);
    t.start_b(&to_a, JOIN);
    let file = ScratchFile::new("tunnel.pcap");
    let capture = t.capture_underlay(&file);
    assert_eq!(ping(&t.ns_ha, "10.9.0.2", 5), 5, "A to B");
    assert_eq!(ping(&t.ns_hb, "10.9.0.1", 5), 5, "B to A");
    capture.stop(true);
    assert_decoded(&file, kind, 20);
    let pushed = [
        ECHO + outer_len(kind, a_options),
        ECHO + outer_len(kind, b_options),
    ];
    for (j, pushed) in [t.stop_a(), t.stop_b()].into_iter().zip(pushed) {
        let tun = tunnel(&j);
        assert_eq!(tun["kind"], kind, "{j}");
        // Five requests and five replies each way, each side.
        assert_eq!(tun["encap_packets"], 10, "{j}");
        assert_eq!(tun["decap_packets"], 10, "{j}");
        assert_eq!(tun["encap_bytes"], 10 * ECHO, "{j}");
        assert_eq!(tun["decap_bytes"], 10 * ECHO, "{j}");
        assert_eq!(tun["drops"]["no_neighbour"], 0, "{j}");
        assert_eq!(tun["drops"]["too_big"], 0, "{j}");
        let (host, underlay) = (&j["ports"][0], &j["ports"][1]);
        assert_eq!(host["rx_packets"], 10, "{j}");
        assert_eq!(host["tx_packets"], 10, "{j}");
        assert_eq!(underlay["tx_packets"], 10, "{j}");
        assert_eq!(underlay["tx_bytes"], 10 * pushed, "{j}");
        // Anything else the underlay brought (a 54-byte frame, now and then) went to the
        // pipeline as the underlay's own, and the flows dropped it.
        let other = j["bridge_drops"]["no_output"].as_u64().unwrap();
        assert_eq!(underlay["rx_packets"].as_u64(), Some(10 + other), "{j}");
        assert_eq!(j["tunnel_malformed"], 0, "{j}");
        assert_eq!(j["tunnel_unmatched"], 0, "{j}");
    }
    t.start_a(&to_b, JOIN);
    t.start_b(&to_a, JOIN);
    common::switched::tcp_transfer_is_intact(&t.ns_ha, &t.ns_hb, "10.9.0.2", 2_000_000);
    for j in [t.stop_a(), t.stop_b()] {
        let tun = tunnel(&j);
        assert!(tun["encap_packets"].as_u64().unwrap() > 100, "{j}");
        assert!(tun["decap_packets"].as_u64().unwrap() > 100, "{j}");
        assert_eq!(tun["drops"]["too_big"], 0, "{j}");
    }
    t.assert_no_xdp_left();
    file
}

#[test]
fn ping_and_tcp_cross_two_switches_through_vxlan() {
    two_switches("vxlan");
}

#[test]
fn ping_and_tcp_cross_two_switches_through_geneve() {
    two_switches("geneve");
}

/// GRE with key 42 both ways, switch A adding GRE's checksum and switch B none (the
/// receiver checks one where it comes): tshark finds every checksum A sent right.
#[test]
fn ping_and_tcp_cross_two_switches_through_gre() {
    let file = two_switches_with("gre", ",key=42,csum=true", ",key=42");
    let frames = tshark_fields(
        &file,
        &["gre.flags.checksum", "gre.checksum.status", "ip.src"],
    );
    let from_a: Vec<&Vec<String>> = frames
        .iter()
        .filter(|f| f[2] == format!("{A_UNDERLAY},10.9.0.1"))
        .collect();
    assert_eq!(from_a.len(), 10, "{frames:?}");
    for f in from_a {
        assert_eq!((f[0].as_str(), f[1].as_str()), ("1", "1"), "{f:?}");
    }
}

/// Open vSwitch's userspace datapath as the far end of GRE, key 42 and checksums both ways
/// (this kernel has no GRE device to judge): it takes what switch A pushes (it drops a
/// wrong checksum or key) and switch A pops what it pushes. Five pings each way, every count
/// exact on both switches; tshark decodes every frame as GRE with key 42 and finds every
/// checksum right; then a TCP transfer arrives intact.
#[test]
fn open_vswitch_takes_our_gre_and_we_take_its() {
    let mut t = Tunnelled::new("to", Far::Switch);
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    let ovs = OvsFarEnd::start(&t, "gre", "key=42,csum=true");
    let to_b = format!("gre:remote_ip={B_UNDERLAY},key=42,csum=true");
    t.start_a(&to_b, JOIN);
    let file = ScratchFile::new("gre.pcap");
    let capture = t.capture_underlay(&file);
    assert_eq!(ping(&t.ns_ha, "10.9.0.2", 5), 5, "A to B");
    assert_eq!(ping(&t.ns_hb, "10.9.0.1", 5), 5, "B to A");
    capture.stop(true);
    assert_decoded(&file, "gre", 20);
    let frames = tshark_fields(&file, &["gre.proto", "gre.checksum.status"]);
    let sums: Vec<&str> = frames
        .iter()
        .filter(|f| f[0] == "0x6558")
        .map(|f| f[1].as_str())
        .collect();
    assert_eq!(sums, ["1"; 20], "{frames:?}");
    let flows = ovs.ofctl(&["dump-flows", "br-int"]);
    assert_eq!(flows.matches("n_packets=10,").count(), 2, "{flows}");
    let j = t.stop_a();
    let tun = tunnel(&j);
    assert_eq!(tun["kind"], "gre", "{j}");
    assert_eq!(tun["encap_packets"], 10, "{j}");
    assert_eq!(tun["decap_packets"], 10, "{j}");
    assert_eq!(tun["encap_bytes"], 10 * ECHO, "{j}");
    assert_eq!(tun["decap_bytes"], 10 * ECHO, "{j}");
    assert_eq!(j["ports"][1]["tx_bytes"], 10 * (ECHO + 46), "{j}");
    assert_eq!(j["tunnel_malformed"], 0, "{j}");
    assert_eq!(j["tunnel_unmatched"], 0, "{j}");
    t.start_a(&to_b, JOIN);
    common::switched::tcp_transfer_is_intact(&t.ns_ha, &t.ns_hb, "10.9.0.2", 2_000_000);
    let j = t.stop_a();
    assert!(tunnel(&j)["decap_packets"].as_u64().unwrap() > 100, "{j}");
    assert_eq!(j["tunnel_malformed"], 0, "{j}");
    assert_eq!(j["tunnel_unmatched"], 0, "{j}");
    t.assert_no_xdp_left();
}

/// Switch A (key=flow: the flows set and match tun_id) against the kernel's own `kind`
/// device with VNI 42: five pings each way, every count exact, and tshark decodes each
/// frame on the underlay as the encapsulation with VNI 42, every checksum right. (This
/// kernel is built without Geneve, so only its vxlan device judges; two switches judge
/// Geneve, with tshark.)
fn against_the_kernel(kind: &str) {
    let mut t = Tunnelled::new("tk", Far::Kernel);
    t.kernel_tunnel(kind, 42);
    t.hosts_know_each_other();
    // An OpenFlow listener and a Prometheus endpoint too: controllers and monitoring see
    // the tunnel port (below).
    must(&["ip", "-n", &t.ns_sa, "link", "set", "lo", "up"]);
    t.start_a_with(
        &format!("{kind}:remote_ip={B_UNDERLAY},key=flow"),
        JOIN_VNI_42,
        &["--openflow", "ptcp:", "--metrics", "9464"],
    );
    let file = ScratchFile::new("tunnel.pcap");
    let capture = t.capture_underlay(&file);
    // The kernel's side first: its ARP for switch A's address is answered by the switch,
    // which learns the kernel's address from it (no packet of A's waits for a neighbour).
    assert_eq!(ping(&t.ns_b, "10.9.0.1", 5), 5, "kernel to A");
    assert_eq!(ping(&t.ns_ha, "10.9.0.2", 5), 5, "A to kernel");
    let flows = t.ctl_a(&["dump-flows"]);
    assert!(
        flows.contains(
            "n_bytes=980, tun_id=0x2a,tun_src=192.168.77.2,tun_dst=192.168.77.1,in_port=10 \
             actions=output:1"
        ),
        "{flows}"
    );
    assert!(
        flows.contains("set_field:0x2a->tun_id,output:10"),
        "{flows}"
    );
    let show = t.ctl_a(&["show"]);
    assert!(
        show.contains(" 10(vxlan10): addr:00:00:00:00:00:00")
            && show.contains(&format!(
                " port 10: vxlan:remote_ip={B_UNDERLAY},key=flow,dst_port=4789,\
                 df_default=true,csum=false,ttl=64 over port 2 ({}, {A_UNDERLAY}, MTU 1500)",
                t.ua
            )),
        "{show}"
    );
    let ports = t.ctl_a(&["dump-ports", "10"]);
    assert!(
        ports.contains("port 10: rx pkts=10, bytes=980,")
            && ports.contains("tx pkts=10, bytes=980, drop=0")
            && ports.contains(
                "tunnel: decapsulated=10, encapsulated=10, no_route=0, no_neighbour=0, too_big=0"
            ),
        "{ports}"
    );
    controllers_and_prometheus_see_the_tunnel_port(&t.ns_sa, kind);
    // The tunnel's own address answers ping, as a host's would (no host stack is behind an
    // XDP underlay: the switch answers).
    assert_eq!(
        ping(&t.ns_sb, A_UNDERLAY, 3),
        3,
        "the far end pings local_ip"
    );
    let j = t.stop_a();
    capture.stop(true);
    assert_eq!(j["tunnel_endpoint"]["echoes_answered"], 3, "{j}");
    let tun = tunnel(&j);
    assert_eq!(tun["encap_packets"], 10, "{j}");
    assert_eq!(tun["decap_packets"], 10, "{j}");
    assert_eq!(tun["drops"]["no_neighbour"], 0, "{j}");
    assert_eq!(j["tunnel_unmatched"], 0, "{j}");
    assert_decoded(&file, kind, 20);
    t.assert_no_xdp_left();
}

/// After five pings each way through tunnel port 10 of the switch in `ns`: ovs-ofctl finds
/// the port in PORT_DESC and its ten packets each way in the port statistics, a Prometheus
/// scrape (which promtool accepts) counts them, with no drop, and `wirespeed top` has a row
/// for it.
fn controllers_and_prometheus_see_the_tunnel_port(ns: &str, kind: &str) {
    let ofctl = |args: &[&str]| ovs_ofctl13(ns, args);
    let desc = ofctl(&["dump-ports-desc"]);
    // Host port, underlay, tunnel.
    assert_eq!(desc.matches("): addr:").count(), 3, "{desc}");
    assert!(
        desc.contains(&format!(" 10({kind}10): addr:00:00:00:00:00:00")),
        "{desc}"
    );
    let ports = ofctl(&["dump-ports", "10"]);
    assert!(
        ports.contains("port 10: rx pkts=10, bytes=980, drop=0, errs=0")
            && ports.contains("tx pkts=10, bytes=980, drop=0, errs=0"),
        "{ports}"
    );
    let all = ofctl(&["dump-ports"]);
    assert!(all.contains("3 ports"), "{all}");
    // A tunnel port has no link to set down: refused, as the specification's error.
    let down = sh(&[
        "ip",
        "netns",
        "exec",
        ns,
        "ovs-ofctl",
        "-O",
        "OpenFlow13",
        "mod-port",
        "tcp:127.0.0.1:6653",
        "10",
        "down",
    ]);
    let err = String::from_utf8_lossy(&down.stderr);
    assert!(
        !down.status.success() && err.contains("OFPPMFC_BAD_CONFIG"),
        "{err}"
    );
    let name = format!("{kind}10");
    let labels = [("port", "10"), ("name", name.as_str())];
    let text = scrape_until(
        ns,
        "127.0.0.1:9464",
        "wirespeed_switch_tunnel_encapsulated_packets_total",
        &labels,
        10.0,
    );
    assert_promtool_accepts(&text);
    for (name, want) in [
        ("wirespeed_switch_tunnel_decapsulated_packets_total", 10.0),
        ("wirespeed_switch_tunnel_decapsulated_bytes_total", 980.0),
        ("wirespeed_switch_tunnel_encapsulated_bytes_total", 980.0),
    ] {
        assert_eq!(sample(&text, name, &labels), want, "{name}\n{text}");
    }
    for reason in ["no_route", "no_neighbour", "too_big"] {
        let with_reason = [("port", "10"), ("reason", reason)];
        let n = sample(&text, "wirespeed_switch_tunnel_drops_total", &with_reason);
        assert_eq!(n, 0.0, "{reason}\n{text}");
    }
    for reason in ["tunnel_malformed", "tunnel_unmatched"] {
        let n = sample(&text, "wirespeed_switch_drops_total", &[("reason", reason)]);
        assert_eq!(n, 0.0, "{reason}\n{text}");
    }
    // `wirespeed top` shows the tunnel port as a row of its own (no traffic now: no rate).
    let out = must(&[
        "ip",
        "netns",
        "exec",
        ns,
        wirespeed(),
        "top",
        "--metrics",
        "127.0.0.1:9464",
        "--count",
        "1",
        "--interval",
        "0.2",
        "--json",
    ]);
    let j: serde_json::Value = serde_json::from_str(out.trim()).expect("one JSON line");
    let rows = j["ports"].as_array().expect("ports");
    assert_eq!(rows.len(), 3, "{j}");
    assert!(
        rows.iter()
            .any(|r| r["port"] == "10" && r["device"] == name && r["receive_packets"] == 0.0),
        "{j}"
    );
}

/// tshark decodes `count` frames of the capture `file` as `kind` (vxlan or geneve on its
/// port, or gre carrying Ethernet) with VNI (key) 42, half of them from switch A, half echo
/// requests and half replies, and finds no problem (bad checksums, malformed headers) in
/// any frame switch A sent.
fn assert_decoded(file: &str, kind: &str, count: usize) {
    let (field, value, vni_field) = match kind {
        "vxlan" => ("udp.dstport", "4789", "vxlan.vni"),
        "geneve" => ("udp.dstport", "6081", "geneve.vni"),
        _ => ("gre.proto", "0x6558", "gre.key"),
    };
    let frames = tshark_fields(file, &[field, vni_field, "icmp.type", "ip.src"]);
    let tunnelled: Vec<&Vec<String>> = frames.iter().filter(|f| f[0] == value).collect();
    assert_eq!(tunnelled.len(), count, "{frames:?}");
    // tshark writes a VXLAN VNI in decimal, a Geneve one and a GRE key in hex.
    let vni = |text: &str| match text.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => text.parse().ok(),
    };
    for f in &tunnelled {
        assert_eq!(vni(&f[1]), Some(42), "{f:?}");
    }
    let from_a = tunnelled
        .iter()
        .filter(|f| f[3] == format!("{A_UNDERLAY},10.9.0.1"))
        .count();
    assert_eq!(from_a, count / 2, "{frames:?}");
    let echoes: Vec<&str> = tunnelled.iter().map(|f| f[2].as_str()).collect();
    assert_eq!(
        echoes.iter().filter(|&&t| t == "8").count(),
        count / 2,
        "{echoes:?}"
    );
    assert_eq!(
        echoes.iter().filter(|&&t| t == "0").count(),
        count / 2,
        "{echoes:?}"
    );
    // Switch A's frames: the kernel's leave veth with the outer UDP checksum partial
    // (transmit offload), which a capture shows as bad.
    let problems = tshark_problems_where(file, &format!("ip.src == {A_UNDERLAY}"));
    assert!(problems.is_empty(), "{problems}");
}

#[test]
fn the_kernels_vxlan_device_pings_a_switch_both_ways_and_tshark_sees_vni_42() {
    against_the_kernel("vxlan");
}

/// Hosts at MTU 8950: each 8900-byte ping arrives at a switch as a chain of frames, is
/// pushed whole (gathered into one copy, sent as a chain on the 9000-byte underlay) and
/// popped whole on the far side; a TCP transfer in such segments arrives intact.
#[test]
fn jumbo_frames_cross_the_tunnel_whole() {
    jumbo_frames_cross("tj", "geneve", ",key=9");
}

/// As above through GRE with checksums both ways: each side verifies the checksum of every
/// chain it pops over all its frames, and takes every one the other pushed (a chain found
/// wrong would be counted malformed and its ping lost).
#[test]
fn jumbo_frames_cross_gre_with_checksums_whole() {
    jumbo_frames_cross("tg", "gre", ",key=9,csum=true");
}

/// Two switches with hosts at MTU 8950 and `kind` tunnels with `options`: three 8900-byte
/// pings cross whole, each counted exactly on both sides; then a TCP transfer in such
/// segments arrives intact, and nothing was too big, cut, malformed or unmatched.
fn jumbo_frames_cross(tag: &str, kind: &str, options: &str) {
    let mut t = Tunnelled::new(tag, Far::Switch);
    t.jumbo();
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    let to_b = format!("{kind}:remote_ip={B_UNDERLAY}{options}");
    let to_a = format!("{kind}:remote_ip={A_UNDERLAY}{options}");
    t.start_a(&to_b, JOIN);
    t.start_b(&to_a, JOIN);
    assert_eq!(ping_waiting(&t.ns_ha, "10.9.0.2", 3, 2, "8900"), 3);
    const PING_FRAME: u64 = 8942;
    for j in [t.stop_a(), t.stop_b()] {
        // Each side pushed its three ping frames (requests or replies), copied whole into
        // chains on the underlay, and popped the other's three.
        let tun = tunnel(&j);
        assert_eq!(tun["encap_packets"], 3, "{j}");
        assert_eq!(tun["decap_packets"], 3, "{j}");
        assert_eq!(tun["encap_bytes"], 3 * PING_FRAME, "{j}");
        assert_eq!(tun["decap_bytes"], 3 * PING_FRAME, "{j}");
        assert!(j["ports"][1]["copies"].as_u64().unwrap() >= 3, "{j}");
        assert_eq!(j["tunnel_malformed"], 0, "{j}");
        assert_eq!(j["tunnel_unmatched"], 0, "{j}");
    }
    t.start_a(&to_b, JOIN);
    t.start_b(&to_a, JOIN);
    common::switched::tcp_transfer_is_intact(&t.ns_ha, &t.ns_hb, "10.9.0.2", 1_000_000);
    for j in [t.stop_a(), t.stop_b()] {
        assert_eq!(tunnel(&j)["drops"]["too_big"], 0, "{j}");
        assert_eq!(j["ports"][1]["drops"]["tx_bad_chain"], 0, "{j}");
        assert_eq!(j["tunnel_malformed"], 0, "{j}");
        assert_eq!(j["tunnel_unmatched"], 0, "{j}");
    }
}

/// An underlay MTU raised under running switches is followed: 8900-byte pings that would
/// not have fitted cross at once, none counted too big, and `show` gives the new MTU.
#[test]
fn an_underlay_mtu_raised_under_running_switches_is_followed() {
    let mut t = Tunnelled::new("tu", Far::Switch);
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    t.start_a(&format!("vxlan:remote_ip={B_UNDERLAY}"), JOIN);
    t.start_b(&format!("vxlan:remote_ip={A_UNDERLAY}"), JOIN);
    assert_eq!(ping(&t.ns_ha, "10.9.0.2", 2), 2);
    t.jumbo();
    assert_eq!(ping_waiting(&t.ns_ha, "10.9.0.2", 3, 2, "8900"), 3);
    let show = t.ctl_a(&["show"]);
    assert!(show.contains("MTU 9000)"), "{show}");
    for j in [t.stop_a(), t.stop_b()] {
        let tun = tunnel(&j);
        assert_eq!(tun["drops"]["too_big"], 0, "{j}");
        assert_eq!(tun["encap_packets"], 5, "{j}");
        assert_eq!(tun["mtu"], 9000, "{j}");
    }
    t.assert_no_xdp_left();
}

/// With --offload the kernel's fast path takes no tunnel flow (their input or output is no
/// AF_XDP port): every packet is pushed and popped in user space, as without it.
#[test]
fn offloading_switches_leave_tunnel_flows_to_user_space() {
    let mut t = Tunnelled::new("to", Far::Switch);
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    t.start_a_with(
        &format!("vxlan:remote_ip={B_UNDERLAY},key=7"),
        JOIN,
        &["--offload"],
    );
    t.start_b_with(
        &format!("vxlan:remote_ip={A_UNDERLAY},key=7"),
        JOIN,
        &["--offload"],
    );
    assert_eq!(ping(&t.ns_ha, "10.9.0.2", 5), 5, "A to B");
    for j in [t.stop_a(), t.stop_b()] {
        assert_eq!(j["fast_path"]["installed"], 0, "{j}");
        assert_eq!(tunnel(&j)["encap_packets"], 5, "{j}");
        assert_eq!(tunnel(&j)["decap_packets"], 5, "{j}");
    }
    t.assert_no_xdp_left();
}

/// The far end's underlay changes its MAC address and says so (a gratuitous ARP, which the
/// kernel sends on a change with arp_notify): switch A takes the new address from it, so
/// its packets keep arriving. The kernel drops frames for another MAC, so a switch that
/// kept the old one would lose every packet from then on.
#[test]
fn a_far_end_that_changes_its_address_is_followed_from_its_gratuitous_arp() {
    let mut t = Tunnelled::new("tg", Far::Kernel);
    t.kernel_tunnel("vxlan", 42);
    t.hosts_know_each_other();
    let flows =
        "in_port=1,actions=output:10\nin_port=10,actions=output:1\npriority=0,actions=drop\n";
    t.start_a(&format!("vxlan:remote_ip={B_UNDERLAY},key=42"), flows);
    // The kernel asks for switch A's address first: A learns the kernel's from that.
    assert_eq!(ping(&t.ns_b, "10.9.0.1", 3), 3, "kernel to A");
    must(&[
        "ip",
        "netns",
        "exec",
        &t.ns_sb,
        "sysctl",
        "-qw",
        &format!("net.ipv4.conf.{}.arp_notify=1", t.ub),
    ]);
    must(&[
        "ip",
        "-n",
        &t.ns_sb,
        "link",
        "set",
        &t.ub,
        "address",
        "02:00:5e:00:b0:0b",
    ]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        ping(&t.ns_ha, "10.9.0.2", 5),
        5,
        "A to the kernel, after the change"
    );
    let j = t.stop_a();
    let tun = tunnel(&j);
    // Three requests and replies one way, five the other.
    assert_eq!(tun["encap_packets"], 8, "{j}");
    assert_eq!(tun["decap_packets"], 8, "{j}");
    assert_eq!(tun["drops"]["no_neighbour"], 0, "{j}");
    t.assert_no_xdp_left();
}

/// Neither host's table knows the far underlay address: switch A's first output (host A's
/// ARP request) is dropped and counted while switch A asks by ARP, which switch B answers
/// for its own address; host A's retry then crosses, and every ping is answered.
#[test]
fn a_next_hop_not_known_is_asked_for_by_arp_and_answered_by_the_far_switch() {
    let mut t = Tunnelled::new("ta", Far::Switch);
    t.start_a(&format!("vxlan:remote_ip={B_UNDERLAY}"), JOIN);
    t.start_b(&format!("vxlan:remote_ip={A_UNDERLAY}"), JOIN);
    assert_eq!(ping_waiting(&t.ns_ha, "10.9.0.2", 3, 4, "56"), 3);
    let (a, b) = (t.stop_a(), t.stop_b());
    assert_eq!(tunnel(&a)["drops"]["no_neighbour"], 1, "{a}");
    // B learned A's address from A's request: nothing of B's waited.
    assert_eq!(tunnel(&b)["drops"]["no_neighbour"], 0, "{b}");
    // Neither host's stack saw the underlay's ARP: the switches answered it.
    let neighbours = must(&["ip", "-n", &t.ns_sa, "neigh", "show", "dev", &t.ua]);
    assert!(!neighbours.contains(B_UNDERLAY), "{neighbours}");
}

/// The host's table has the far underlay address with a MAC address that is no longer
/// its (an entry the kernel keeps as STALE, which /proc/net/arp calls complete): switch A
/// uses it, but asks by ARP at once, and switch B's answer puts the right one in. (The
/// entry was taken as fresh for 30 s: every packet to the far end went to a MAC no one has.)
#[test]
fn a_stale_entry_in_the_host_s_table_is_checked_by_arp() {
    // The kernel's vxlan device: its host drops frames to a MAC address not its own.
    let mut t = Tunnelled::new("tk", Far::Kernel);
    t.kernel_tunnel("vxlan", 42);
    t.hosts_know_each_other();
    let stale = ["lladdr", "02:de:ad:00:be:ef", "dev", &t.ua, "nud", "stale"];
    must(
        &[
            &["ip", "-n", &t.ns_sa, "neigh", "replace", B_UNDERLAY][..],
            &stale,
        ]
        .concat(),
    );
    t.start_a(&format!("vxlan:remote_ip={B_UNDERLAY},key=42"), JOIN);
    let answered = ping_waiting(&t.ns_ha, "10.9.0.2", 5, 4, "56");
    assert!(answered >= 4, "{answered} of 5 answered");
    t.stop_a();
}

/// A frame that would be longer than the underlay's MTU once pushed is never sent, whole or
/// cut: it is counted as too_big and, with DF set, answered with ICMP "fragmentation needed"
/// naming the MTU that fits, as the kernel answers for a tunnel device on a bridge. So hosts
/// left at MTU 1500 find the path's: ping is told, and TCP lowers its segments and gets
/// through.
#[test]
fn a_packet_too_big_for_the_underlay_is_answered_and_tcp_finds_the_path_mtu() {
    let mut t = Tunnelled::new("tb", Far::Switch);
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    for (ns, dev) in [(&t.ns_ha, &t.ha), (&t.ns_hb, &t.hb)] {
        must(&["ip", "-n", ns, "link", "set", dev, "mtu", "1500"]);
    }
    t.start_a(&format!("vxlan:remote_ip={B_UNDERLAY}"), JOIN);
    t.start_b(&format!("vxlan:remote_ip={A_UNDERLAY}"), JOIN);
    // 1460 bytes of ICMP data: a 1488-byte IPv4 packet, 1538 once pushed.
    let out = sh(&[
        "ip", "netns", "exec", &t.ns_ha, "ping", "-n", "-c", "1", "-W", "2", "-s", "1460", "-M",
        "do", "10.9.0.2",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("From 10.9.0.2 icmp_seq=1 Frag needed and DF set (mtu = 1450)"),
        "{text}"
    );
    let route = must(&["ip", "-n", &t.ns_ha, "route", "get", "10.9.0.2"]);
    assert!(route.contains("mtu 1450"), "{route}");
    assert_eq!(ping_waiting(&t.ns_ha, "10.9.0.2", 2, 2, "1400"), 2);
    // B's host has not been told, and A's forgets (else it would offer B a segment size
    // that fits): B's TCP segments of 1500 bytes meet switch B's answer.
    must(&["ip", "-n", &t.ns_ha, "route", "flush", "cache"]);
    common::switched::tcp_transfer_is_intact(&t.ns_hb, &t.ns_ha, "10.9.0.1", 1_000_000);
    let route = must(&["ip", "-n", &t.ns_hb, "route", "get", "10.9.0.1"]);
    assert!(route.contains("mtu 1450"), "{route}");
    let (a, b) = (t.stop_a(), t.stop_b());
    let tun = tunnel(&a);
    assert_eq!(tun["drops"]["too_big"], 1, "{a}");
    assert_eq!(tun["too_big_answered"], 1, "{a}");
    // The two that fit went, and their replies came back; then the TCP connection's
    // acknowledgements.
    let acks = tun["encap_packets"].as_u64().unwrap() - 2;
    assert!(acks > 0, "{a}");
    assert_eq!(a["ports"][1]["tx_packets"].as_u64(), Some(2 + acks), "{a}");
    // Every segment too big had DF (Linux's TCP sets it), so every one was answered.
    let tun = tunnel(&b);
    let too_big = tun["drops"]["too_big"].as_u64().unwrap();
    assert!(too_big >= 1, "{b}");
    assert_eq!(tun["too_big_answered"].as_u64(), Some(too_big), "{b}");
    t.assert_no_xdp_left();
}

/// The drops a working tunnel can meet, each by its name and count: pushes while the host
/// has no route to the far end (no_route), and packets of a VNI the far side's port does not
/// take (tunnel_unmatched there, never popped).
#[test]
fn no_route_and_another_vni_are_counted_by_name() {
    let mut t = Tunnelled::new("tr", Far::Switch);
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    t.start_a(&format!("vxlan:remote_ip={B_UNDERLAY},key=42"), JOIN);
    t.start_b(&format!("vxlan:remote_ip={A_UNDERLAY},key=43"), JOIN);
    // The route goes after switch A opened (it needs one to find its underlay).
    let route = "192.168.77.0/24";
    must(&["ip", "-n", &t.ns_sa, "route", "del", route, "dev", &t.ua]);
    assert_eq!(ping_waiting(&t.ns_ha, "10.9.0.2", 2, 1, "56"), 0);
    must(&["ip", "-n", &t.ns_sa, "route", "add", route, "dev", &t.ua]);
    // Past the second that a failed tunnel waits before it looks at the host's tables again.
    std::thread::sleep(std::time::Duration::from_millis(1200));
    assert_eq!(ping_waiting(&t.ns_ha, "10.9.0.2", 3, 1, "56"), 0);
    let (a, b) = (t.stop_a(), t.stop_b());
    let tun = tunnel(&a);
    assert_eq!(tun["drops"]["no_route"], 2, "{a}");
    assert_eq!(tun["drops"]["no_neighbour"], 0, "{a}");
    assert_eq!(tun["encap_packets"], 3, "{a}");
    assert_eq!(a["ports"][1]["tx_packets"], 3, "{a}");
    assert_eq!(b["tunnel_unmatched"], 3, "{b}");
    assert_eq!(b["tunnel_malformed"], 0, "{b}");
    assert_eq!(tunnel(&b)["decap_packets"], 0, "{b}");
    assert_eq!(b["ports"][0]["tx_packets"], 0, "{b}");
}

/// One `remote_ip=flow` port (one tunnel port, the far end chosen per flow, as Antrea runs
/// Open vSwitch) reaches two of the kernel's vxlan devices, each by the `tun_dst` its flows
/// set: the first far end's flows from the flow file, the second's from ovs-ofctl over
/// OpenFlow 1.3 (tun_src and tun_dst as Nicira's fields), which it then lists as given.
/// Five pings each way with each far end, the port's counts exact, and tshark finds ten
/// frames each way between our address and each far end, every one VNI 42.
#[test]
fn one_flow_port_reaches_two_far_ends_by_the_tun_dst_its_flows_set() {
    let mut t = Tunnelled::new("tf", Far::Kernel);
    t.kernel_tunnel("vxlan", 42);
    t.second_kernel_tunnel(42);
    t.hosts_know_each_other();
    t.underlays_know_each_other();
    let flows = format!(
        "in_port=1,ip,nw_dst=10.9.0.2,actions=set_field:42->tun_id,\
         set_field:{B_UNDERLAY}->tun_dst,output:10\n\
         in_port=10,tun_id=42,tun_src={B_UNDERLAY},actions=output:1\n\
         priority=0,actions=drop\n"
    );
    must(&["ip", "-n", &t.ns_sa, "link", "set", "lo", "up"]);
    // No local_ip: the underlay is the bridge's one port with an address.
    t.start_a_with(
        "vxlan:remote_ip=flow,key=flow",
        &flows,
        &["--openflow", "ptcp:"],
    );
    let (to_c, from_c) = (
        format!(
            "in_port=1,ip,nw_dst=10.9.0.3,actions=set_field:42->tun_id,\
             set_field:{C_UNDERLAY}->tun_dst,output:10"
        ),
        format!("in_port=10,tun_id=42,tun_src={C_UNDERLAY},actions=output:1"),
    );
    ovs_ofctl13(&t.ns_sa, &["add-flow", &to_c]);
    ovs_ofctl13(&t.ns_sa, &["add-flow", &from_c]);
    let listed = ovs_ofctl13(&t.ns_sa, &["dump-flows"]);
    assert!(
        listed.contains(&format!(
            "ip,in_port=1,nw_dst=10.9.0.3 actions=set_field:0x2a->tun_id,\
             set_field:{C_UNDERLAY}->tun_dst,output:10"
        )) && listed.contains(&format!("tun_id=0x2a,tun_src={C_UNDERLAY},in_port=10 ")),
        "{listed}"
    );
    let file = ScratchFile::new("tunnel.pcap");
    let capture = t.capture_underlay(&file);
    assert_eq!(ping(&t.ns_ha, "10.9.0.2", 5), 5, "A to B");
    assert_eq!(ping(&t.ns_ha, "10.9.0.3", 5), 5, "A to C");
    assert_eq!(ping(&t.ns_sb, "10.9.0.1", 5), 5, "B to A");
    assert_eq!(ping(&t.ns_hb, "10.9.0.1", 5), 5, "C to A");
    let show = t.ctl_a(&["show"]);
    assert!(
        show.contains(&format!(
            " port 10: vxlan:remote_ip=flow,key=flow,dst_port=4789,df_default=true,csum=false,\
             ttl=64 over port 2 ({}, {A_UNDERLAY}, MTU 1500)",
            t.ua
        )),
        "{show}"
    );
    let j = t.stop_a();
    capture.stop(true);
    let tun = tunnel(&j);
    assert_eq!(tun["encap_packets"], 20, "{j}");
    assert_eq!(tun["decap_packets"], 20, "{j}");
    assert_eq!(tun["encap_bytes"], 20 * ECHO, "{j}");
    assert_eq!(tun["decap_bytes"], 20 * ECHO, "{j}");
    for reason in ["no_route", "no_neighbour", "too_big"] {
        assert_eq!(tun["drops"][reason], 0, "{reason}: {j}");
    }
    assert_eq!(j["tunnel_unmatched"], 0, "{j}");
    assert_eq!(j["tunnel_malformed"], 0, "{j}");
    // Each VXLAN frame's outer addresses (tshark lists the inner ones after them).
    let frames = tshark_fields(&file, &["udp.dstport", "vxlan.vni", "ip.src", "ip.dst"]);
    let outer = |both: &str| both.split(',').next().unwrap_or("").to_string();
    let crossed: Vec<(String, String)> = frames
        .iter()
        .filter(|f| f[0] == "4789")
        .inspect(|f| assert_eq!(f[1], "42", "{f:?}"))
        .map(|f| (outer(&f[2]), outer(&f[3])))
        .collect();
    assert_eq!(crossed.len(), 40, "{frames:?}");
    for (src, dst) in [
        (A_UNDERLAY, B_UNDERLAY),
        (A_UNDERLAY, C_UNDERLAY),
        (B_UNDERLAY, A_UNDERLAY),
        (C_UNDERLAY, A_UNDERLAY),
    ] {
        let between = crossed.iter().filter(|(s, d)| s == src && d == dst).count();
        assert_eq!(between, 10, "{src} > {dst}: {crossed:?}");
    }
    let problems = tshark_problems_where(&file, &format!("ip.src == {A_UNDERLAY}"));
    assert!(problems.is_empty(), "{problems}");
    t.assert_no_xdp_left();
}

/// Each refused start names the problem, exits non-zero, and leaves no program attached.
#[test]
fn bad_tunnel_ports_are_refused_with_the_reason() {
    let t = Tunnelled::new("te", Far::Switch);
    let (host, underlay) = (format!("1=xdp:{}", t.sa1), format!("2=xdp:{}", t.ua));
    let packet_underlay = format!("2=packet:{}", t.ua);
    let cases: [(&str, &str, &str); 6] = [
        (
            &underlay,
            "10=vxlan:key=5",
            "a vxlan port needs remote_ip=IP",
        ),
        (
            &underlay,
            "10=vxlan:remote_ip=192.168.77.2,key=16777216",
            "key=16777216: a VNI is at most 16777215",
        ),
        (
            &packet_underlay,
            "10=geneve:remote_ip=192.168.77.2",
            "is not an xdp: port (tunnels are carried over AF_XDP ports only)",
        ),
        (
            &underlay,
            "10=vxlan:remote_ip=198.51.100.7",
            "the host has no route to remote_ip 198.51.100.7",
        ),
        (
            &underlay,
            "10=vxlan:remote_ip=192.168.77.2,local_ip=10.1.1.1",
            "local_ip 10.1.1.1 is not an address of any port of the bridge",
        ),
        (
            &packet_underlay,
            "10=vxlan:remote_ip=flow",
            "remote_ip=flow needs local_ip= where the bridge has not exactly one xdp: port \
             with an IPv4 address (it has 0)",
        ),
    ];
    // The switch started with `ports` must refuse, naming `reason`, and leave nothing on.
    let refused = |ports: &[&str], reason: &str| {
        let mut args = vec!["switch"];
        for port in ports {
            args.extend(["--port", port]);
        }
        args.extend(["--duration", "1"]);
        let out = run_in(&t.ns_sa, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{ports:?}: started: {err}");
        assert!(err.contains(reason), "{ports:?}: {err}");
        t.assert_no_xdp_left();
    };
    for (underlay, tunnel, reason) in cases {
        refused(&[&host, underlay, tunnel], reason);
    }
    // Two encapsulations on one UDP port: neither could tell its packets.
    refused(
        &[
            &host,
            &underlay,
            "10=vxlan:remote_ip=192.168.77.2",
            "11=geneve:remote_ip=192.168.77.3,dst_port=4789",
        ],
        "port 11 and port 10 both listen on UDP 4789 at 192.168.77.1",
    );
    // Two GRE ports for one far end, one with no key and one with key 0: the same packets.
    refused(
        &[
            &host,
            &underlay,
            "10=gre:remote_ip=192.168.77.2",
            "11=gre:remote_ip=192.168.77.2,key=0",
        ],
        "port 11 and port 10 both take GRE at 192.168.77.1 from the same remote_ip with the \
         same key",
    );
    // GRE has no UDP port to give.
    refused(
        &[
            &host,
            &underlay,
            "10=gre:remote_ip=192.168.77.2,dst_port=4789",
        ],
        "dst_port=4789: GRE is not carried in UDP: it has no port",
    );
}
