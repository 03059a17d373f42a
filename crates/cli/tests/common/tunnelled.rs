//! Two hosts joined by a tunnel, for the tunnel tests: host A behind a `wirespeed switch`,
//! and on the far side another switch with host B behind it, or the Linux kernel's own
//! vxlan or geneve device. The two sides meet only on the underlay veth.
//!
//! ```text
//! ns_ha: ha (10.9.0.1) -- ns_sa: sa1 [switch A] ua (192.168.77.1)
//!                                                  |  underlay: ma, mb bridged in ns_u
//! ns_hb: hb (10.9.0.2) -- ns_sb: sb1 [switch B] ub (192.168.77.2)
//!                       or ns_sb: tun0 (10.9.0.2), the kernel's device on ub
//! ```
//!
//! The underlay crosses a Linux bridge in a namespace of its own so tcpdump can watch it:
//! on a switch's own interface it would not see what the switch sends (AF_XDP transmits
//! past the packet taps) nor what its XDP program redirects.

use super::*;

pub const A_UNDERLAY: &str = "192.168.77.1";
pub const B_UNDERLAY: &str = "192.168.77.2";
/// The second far end's underlay address ([`Tunnelled::second_kernel_tunnel`]).
pub const C_UNDERLAY: &str = "192.168.77.3";
/// The hosts' MTU: 1450 leaves the 50 bytes the outer headers take on a 1500-byte underlay.
pub const HOST_MTU: &str = "1450";

/// The far side of the tunnel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Far {
    /// Another wirespeed switch, host B behind it.
    Switch,
    /// The kernel's own device (`ip link add tun0 type vxlan|geneve ...`), 10.9.0.2 on it.
    Kernel,
}

pub struct Tunnelled {
    pub ns_ha: String,
    pub ns_sa: String,
    pub ns_sb: String,
    pub ns_hb: String,
    /// The underlay's middle: ma (towards ua) and mb (towards ub) in bridge br0.
    pub ns_u: String,
    pub ma: String,
    pub mb: String,
    pub ha: String,
    pub sa1: String,
    pub ua: String,
    pub ub: String,
    pub sb1: String,
    pub hb: String,
    /// The second far end's underlay veth ([`Tunnelled::second_kernel_tunnel`]): uc in
    /// ns_hb, mc in br0.
    pub uc: String,
    pub mc: String,
    /// Where 10.9.0.2 lives: host B's namespace and device, or the kernel's tunnel device.
    pub ns_b: String,
    pub b: String,
    pub ctl_a: ScratchFile,
    pub ctl_b: ScratchFile,
    switch_a: Option<Running>,
    switch_b: Option<Running>,
}

impl Tunnelled {
    /// The namespaces and links, addressed and up; no switch yet.
    pub fn new(tag: &str, far: Far) -> Tunnelled {
        let id = super::unique_id(tag);
        let name = |part: &str| format!("wsu{id}{part}");
        let mut t = Tunnelled {
            ns_ha: name("h"),
            ns_sa: name("s"),
            ns_sb: name("t"),
            ns_hb: name("k"),
            ns_u: name("m"),
            ma: name("m"),
            mb: name("n"),
            ha: name("h"),
            sa1: name("a"),
            ua: name("u"),
            ub: name("v"),
            sb1: name("b"),
            hb: name("k"),
            uc: name("w"),
            mc: name("x"),
            ns_b: String::new(),
            b: String::new(),
            ctl_a: ScratchFile::new(&format!("{tag}a.sock")),
            ctl_b: ScratchFile::new(&format!("{tag}b.sock")),
            switch_a: None,
            switch_b: None,
        };
        assert!(t.sa1.len() <= 15, "interface name {} too long", t.sa1);
        for ns in [&t.ns_ha, &t.ns_sa, &t.ns_sb, &t.ns_hb, &t.ns_u] {
            super::add_namespace(ns);
        }
        for (one, one_ns, other, other_ns) in [
            (&t.ha, &t.ns_ha, &t.sa1, &t.ns_sa),
            (&t.ua, &t.ns_sa, &t.ma, &t.ns_u),
            (&t.mb, &t.ns_u, &t.ub, &t.ns_sb),
            (&t.sb1, &t.ns_sb, &t.hb, &t.ns_hb),
        ] {
            must(&[
                "ip", "link", "add", one, "netns", one_ns, "type", "veth", "peer", "name", other,
                "netns", other_ns,
            ]);
        }
        for (ns, dev) in [
            (&t.ns_ha, &t.ha),
            (&t.ns_sa, &t.sa1),
            (&t.ns_sa, &t.ua),
            (&t.ns_sb, &t.ub),
            (&t.ns_sb, &t.sb1),
            (&t.ns_hb, &t.hb),
            (&t.ns_u, &t.ma),
            (&t.ns_u, &t.mb),
        ] {
            must(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        must(&["ip", "-n", &t.ns_u, "link", "add", "br0", "type", "bridge"]);
        for dev in [&t.ma, &t.mb] {
            must(&["ip", "-n", &t.ns_u, "link", "set", dev, "master", "br0"]);
        }
        must(&["ip", "-n", &t.ns_u, "link", "set", "br0", "up"]);
        must(&[
            "ip",
            "-n",
            &t.ns_sa,
            "addr",
            "add",
            &format!("{A_UNDERLAY}/24"),
            "dev",
            &t.ua,
        ]);
        must(&[
            "ip",
            "-n",
            &t.ns_sb,
            "addr",
            "add",
            &format!("{B_UNDERLAY}/24"),
            "dev",
            &t.ub,
        ]);
        address(&t.ns_ha, &t.ha, "10.9.0.1/24");
        (t.ns_b, t.b) = match far {
            Far::Switch => (t.ns_hb.clone(), t.hb.clone()),
            Far::Kernel => (t.ns_sb.clone(), "tun0".to_string()),
        };
        if far == Far::Switch {
            address(&t.ns_hb, &t.hb, "10.9.0.2/24");
        }
        t
    }

    /// Makes the kernel's tunnel device on the far side (`kind`: vxlan, or geneve where the
    /// kernel has it) with `vni`, 10.9.0.2 on it.
    pub fn kernel_tunnel(&self, kind: &str, vni: u32) {
        let vni = vni.to_string();
        let mut args = vec![
            "ip",
            "-n",
            &self.ns_sb,
            "link",
            "add",
            "tun0",
            "type",
            kind,
            "id",
            &vni,
            "remote",
            A_UNDERLAY,
        ];
        if kind == "vxlan" {
            // With UDP checksums, which the switch checks before it pops.
            args.extend([
                "local", B_UNDERLAY, "dstport", "4789", "dev", &self.ub, "udpcsum",
            ]);
        }
        must(&args);
        address(&self.ns_sb, "tun0", "10.9.0.2/24");
        must(&["ip", "-n", &self.ns_sb, "link", "set", "tun0", "up"]);
    }

    /// A second far end, for a `remote_ip=flow` port: in ns_hb (otherwise unused with the
    /// kernel as the far side) a veth onto the underlay bridge with [`C_UNDERLAY`], and the
    /// kernel's vxlan device with `vni` on it, 10.9.0.3. It and host A know each other's
    /// MAC addresses, and so do its underlay and switch A's.
    pub fn second_kernel_tunnel(&self, vni: u32) {
        let (w, x) = (&self.uc, &self.mc);
        must(&[
            "ip",
            "link",
            "add",
            w,
            "netns",
            &self.ns_hb,
            "type",
            "veth",
            "peer",
            "name",
            x,
            "netns",
            &self.ns_u,
        ]);
        must(&["ip", "-n", &self.ns_u, "link", "set", x, "master", "br0"]);
        must(&["ip", "-n", &self.ns_u, "link", "set", x, "up"]);
        must(&["ip", "-n", &self.ns_hb, "link", "set", w, "up"]);
        let underlay = format!("{C_UNDERLAY}/24");
        must(&["ip", "-n", &self.ns_hb, "addr", "add", &underlay, "dev", w]);
        let vni = vni.to_string();
        must(&[
            "ip",
            "-n",
            &self.ns_hb,
            "link",
            "add",
            "tun0",
            "type",
            "vxlan",
            "id",
            &vni,
            "remote",
            A_UNDERLAY,
            "local",
            C_UNDERLAY,
            "dstport",
            "4789",
            "dev",
            w,
        ]);
        address(&self.ns_hb, "tun0", "10.9.0.3/24");
        must(&["ip", "-n", &self.ns_hb, "link", "set", "tun0", "up"]);
        know_each_other(
            (&self.ns_ha, &self.ha, "10.9.0.1"),
            (&self.ns_hb, "tun0", "10.9.0.3"),
        );
        know_each_other(
            (&self.ns_sa, &self.ua, A_UNDERLAY),
            (&self.ns_hb, w, C_UNDERLAY),
        );
    }

    /// Each host knows the other's MAC address for good: no ARP inside the tunnel, so the
    /// counts are the test's packets alone.
    pub fn hosts_know_each_other(&self) {
        know_each_other(
            (&self.ns_ha, &self.ha, "10.9.0.1"),
            (&self.ns_b, &self.b, "10.9.0.2"),
        );
    }

    /// Switch A's host knows switch B's underlay address (and B's A's): the switches take
    /// their next hop from the host's neighbour table, no ARP on the underlay.
    pub fn underlays_know_each_other(&self) {
        know_each_other(
            (&self.ns_sa, &self.ua, A_UNDERLAY),
            (&self.ns_sb, &self.ub, B_UNDERLAY),
        );
    }

    /// Starts switch A: port 1 towards host A, port 2 the underlay, port 10 `tunnel` (a
    /// tunnel port's spec, `vxlan:remote_ip=...`), with `flows`.
    pub fn start_a(&mut self, tunnel: &str, flows: &str) {
        self.start_a_with(tunnel, flows, &[]);
    }

    /// [`Tunnelled::start_a`] with `extra` options (`--offload`).
    pub fn start_a_with(&mut self, tunnel: &str, flows: &str, extra: &[&str]) {
        let s = start(
            &self.ns_sa,
            &self.sa1,
            &self.ua,
            tunnel,
            flows,
            &self.ctl_a,
            extra,
        );
        self.switch_a = Some(s);
    }

    /// Starts switch B, the mirror of A.
    pub fn start_b(&mut self, tunnel: &str, flows: &str) {
        self.start_b_with(tunnel, flows, &[]);
    }

    pub fn start_b_with(&mut self, tunnel: &str, flows: &str, extra: &[&str]) {
        let s = start(
            &self.ns_sb,
            &self.sb1,
            &self.ub,
            tunnel,
            flows,
            &self.ctl_b,
            extra,
        );
        self.switch_b = Some(s);
    }

    /// Stops switch A: its JSON summary, checked for a clean exit and balanced frames.
    pub fn stop_a(&mut self) -> serde_json::Value {
        stop(self.switch_a.take().expect("switch A runs"))
    }

    pub fn stop_b(&mut self) -> serde_json::Value {
        stop(self.switch_b.take().expect("switch B runs"))
    }

    pub fn ctl_a(&self, args: &[&str]) -> String {
        let mut argv = vec![wirespeed(), "ctl", "--ctl", &self.ctl_a];
        argv.extend_from_slice(args);
        must(&argv)
    }

    /// Jumbo frames: every link at MTU 9000, the hosts at 8950 (room for the outer
    /// headers), so a host's packet arrives at a switch as a chain of frames.
    pub fn jumbo(&self) {
        for (ns, dev) in [
            (&self.ns_sa, &self.sa1),
            (&self.ns_sa, &self.ua),
            (&self.ns_u, &self.ma),
            (&self.ns_u, &self.mb),
            (&self.ns_sb, &self.ub),
            (&self.ns_sb, &self.sb1),
        ] {
            must(&["ip", "-n", ns, "link", "set", dev, "mtu", "9000"]);
        }
        must(&["ip", "-n", &self.ns_u, "link", "set", "br0", "mtu", "9000"]);
        for (ns, dev) in [(&self.ns_ha, &self.ha), (&self.ns_hb, &self.hb)] {
            must(&["ip", "-n", ns, "link", "set", dev, "mtu", "8950"]);
        }
    }

    /// tcpdump on the underlay (both ways), writing `file`.
    pub fn capture_underlay(&self, file: &str) -> Capture {
        Capture::tcpdump(&self.ns_u, &self.ma, "inout", file)
    }

    /// Panics if switch A's interfaces still have an XDP program.
    pub fn assert_no_xdp_left(&self) {
        for dev in [&self.sa1, &self.ua] {
            let out = must(&["ip", "-n", &self.ns_sa, "-d", "link", "show", "dev", dev]);
            assert!(!out.contains("prog/xdp"), "{dev} still has XDP: {out}");
        }
    }
}

/// Two ends, each (namespace, device, its address), each knowing the other's MAC for good.
fn know_each_other(one: (&str, &str, &str), other: (&str, &str, &str)) {
    let (mac_one, mac_other) = (mac_of(one.0, one.1), mac_of(other.0, other.1));
    permanent_neighbour(one.0, one.1, other.2, &mac_other);
    permanent_neighbour(other.0, other.1, one.2, &mac_one);
}

fn address(ns: &str, dev: &str, ip: &str) {
    must(&["ip", "-n", ns, "addr", "add", ip, "dev", dev]);
    must(&["ip", "-n", ns, "link", "set", dev, "mtu", HOST_MTU]);
}

/// The flows of a switch that joins port 1 and tunnel port 10, and nothing else: what else
/// the underlay carries is dropped, so the counts are the test's.
pub const JOIN: &str =
    "in_port=1,actions=output:10\nin_port=10,actions=output:1\npriority=0,actions=drop\n";

/// [`JOIN`] for a `key=flow` tunnel port towards the kernel's device (VNI 42, far end
/// 192.168.77.2): the flows set the VNI going in and match it, and the outer addresses,
/// coming out.
pub const JOIN_VNI_42: &str = "in_port=1,actions=set_field:42->tun_id,output:10\n\
     in_port=10,tun_id=42,tun_src=192.168.77.2,tun_dst=192.168.77.1,actions=output:1\n\
     priority=0,actions=drop\n";

fn start(
    ns: &str,
    host: &str,
    underlay: &str,
    tunnel: &str,
    flows: &str,
    ctl: &str,
    extra: &[&str],
) -> Running {
    let file = format!("{ctl}.flows");
    std::fs::write(&file, flows).unwrap();
    let (p1, p2, p10) = (
        format!("1=xdp:{host}"),
        format!("2=xdp:{underlay}"),
        format!("10={tunnel}"),
    );
    let mut args = vec![
        "switch", "--port", &p1, "--port", &p2, "--port", &p10, "--flows", &file, "--ctl", ctl,
        "--json",
    ];
    args.extend_from_slice(extra);
    let mut switch = spawn_in(ns, &args);
    switch.wait_ready();
    let _ = std::fs::remove_file(&file);
    switch
}

fn stop(switch: Running) -> serde_json::Value {
    let (j, log) = switch.interrupt();
    assert!(!log.contains("panicked"), "{log}");
    assert_eq!(j["frames"]["balanced"], true, "{j}");
    j
}

impl Drop for Tunnelled {
    fn drop(&mut self) {
        for switch in [self.switch_a.take(), self.switch_b.take()]
            .into_iter()
            .flatten()
        {
            let _ = switch.interrupt();
        }
        for ns in [
            &self.ns_ha,
            &self.ns_sa,
            &self.ns_sb,
            &self.ns_hb,
            &self.ns_u,
        ] {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}
