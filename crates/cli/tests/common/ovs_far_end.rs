//! Open vSwitch as a tunnel's far end, for the tunnel tests where the kernel lacks the
//! encapsulation (GRE): its userspace datapath with native tunnelling (Open vSwitch's
//! Documentation/howto/userspace-tunneling.rst), in switch B's namespace of
//! [`Tunnelled`], with a database and run directory of its own.
//!
//! ```text
//! ns_sb: br-int [sb1 (1), tun0 (10)]   br-phy [ub (2), LOCAL 192.168.77.2]
//! ```
//!
//! br-int carries host B's port and the tunnel port; the tunnel's packets leave and enter
//! through br-phy, whose LOCAL port holds the underlay address (moved there from ub) and
//! ub's MAC address.

use super::pcaps::TempDir;
use super::tunnelled::{A_UNDERLAY, B_UNDERLAY, Tunnelled};
use super::*;

pub struct OvsFarEnd {
    ns: String,
    dir: TempDir,
}

impl OvsFarEnd {
    /// Starts Open vSwitch in `t`'s switch B namespace with tunnel port 10 of `kind` towards
    /// switch A (`options`: `key=42,csum=true`, as `ovs-vsctl` takes them, comma-separated)
    /// and flows joining it to host B's port. Switch A's underlay MAC address is given to
    /// its tunnel neighbour table, so no ARP crosses the underlay.
    pub fn start(t: &Tunnelled, kind: &str, options: &str) -> OvsFarEnd {
        let far = OvsFarEnd {
            ns: t.ns_sb.clone(),
            dir: TempDir::new("ovs"),
        };
        let (db, schema) = (
            far.dir.path("conf.db"),
            "/usr/share/openvswitch/vswitch.ovsschema",
        );
        must(&["ovsdb-tool", "create", &db, schema]);
        far.run(&[
            "ovsdb-server",
            &db,
            &format!("--remote=punix:{}", far.dir.path("db.sock")),
            &format!("--pidfile={}", far.dir.path("ovsdb-server.pid")),
            &format!("--log-file={}", far.dir.path("ovsdb-server.log")),
            "--detach",
            "--no-chdir",
        ]);
        far.vsctl(&["--no-wait", "init"]);
        far.run(&[
            "ovs-vswitchd",
            &format!("unix:{}", far.dir.path("db.sock")),
            &format!("--pidfile={}", far.dir.path("ovs-vswitchd.pid")),
            &format!("--log-file={}", far.dir.path("ovs-vswitchd.log")),
            "--detach",
            "--no-chdir",
        ]);
        let mut tunnel = vec![
            "--".to_string(),
            "set".to_string(),
            "interface".to_string(),
            "tun0".to_string(),
            format!("type={kind}"),
            format!("options:remote_ip={A_UNDERLAY}"),
            "ofport_request=10".to_string(),
        ];
        tunnel.extend(options.split(',').map(|o| format!("options:{o}")));
        let mut add = vec![
            "add-br",
            "br-int",
            "--",
            "set",
            "bridge",
            "br-int",
            "datapath_type=netdev",
            "--",
            "add-port",
            "br-int",
            &t.sb1,
            "--",
            "set",
            "interface",
            &t.sb1,
            "ofport_request=1",
            "--",
            "add-port",
            "br-int",
            "tun0",
        ];
        add.extend(tunnel.iter().map(String::as_str));
        far.vsctl(&add);
        let hwaddr = format!("other_config:hwaddr={}", mac_of(&t.ns_sb, &t.ub));
        far.vsctl(&[
            "add-br",
            "br-phy",
            "--",
            "set",
            "bridge",
            "br-phy",
            "datapath_type=netdev",
            &hwaddr,
            "--",
            "add-port",
            "br-phy",
            &t.ub,
            "--",
            "set",
            "interface",
            &t.ub,
            "ofport_request=2",
        ]);
        let underlay = format!("{B_UNDERLAY}/24");
        must(&["ip", "-n", &far.ns, "addr", "del", &underlay, "dev", &t.ub]);
        // The host's stack drops what ub receives (Open vSwitch's packet socket still sees
        // it): strict reverse-path filtering, the route back being through br-phy. Else it
        // would take the tunnel's packets to its address and answer each with ICMP
        // "protocol unreachable" (it has no GRE).
        let strict = format!("net.ipv4.conf.{}.rp_filter=1", t.ub);
        for knob in ["net.ipv4.conf.all.rp_filter=1", &strict] {
            must(&["ip", "netns", "exec", &far.ns, "sysctl", "-qw", knob]);
        }
        must(&[
            "ip", "-n", &far.ns, "addr", "add", &underlay, "dev", "br-phy",
        ]);
        must(&["ip", "-n", &far.ns, "link", "set", "br-phy", "up"]);
        for (bridge, flows) in [
            (
                "br-int",
                ["in_port=1,actions=output:10", "in_port=10,actions=output:1"],
            ),
            (
                "br-phy",
                ["in_port=2,actions=LOCAL", "in_port=LOCAL,actions=output:2"],
            ),
        ] {
            far.ofctl(&["del-flows", bridge]);
            for flow in flows {
                far.ofctl(&["add-flow", bridge, flow]);
            }
        }
        // Open vSwitch reads the host's routes: the one to switch A appears once br-phy has
        // its address.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while !far
            .appctl(&["ovs/route/lookup", A_UNDERLAY])
            .contains("br-phy")
        {
            assert!(
                std::time::Instant::now() < deadline,
                "Open vSwitch has no route to {A_UNDERLAY} through br-phy"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let a_mac = mac_of(&t.ns_sa, &t.ua);
        far.appctl(&["tnl/arp/set", "br-phy", A_UNDERLAY, &a_mac]);
        far
    }

    /// `argv` in the namespace with the run directory as Open vSwitch's.
    fn run(&self, argv: &[&str]) -> String {
        let rundir = format!("OVS_RUNDIR={}", self.dir.0.display());
        let mut full = vec!["ip", "netns", "exec", &self.ns, "env", &rundir];
        full.extend_from_slice(argv);
        must(&full)
    }

    pub fn vsctl(&self, args: &[&str]) -> String {
        let db = format!("--db=unix:{}", self.dir.path("db.sock"));
        let mut argv = vec!["ovs-vsctl", &db];
        argv.extend_from_slice(args);
        self.run(&argv)
    }

    pub fn ofctl(&self, args: &[&str]) -> String {
        let mut argv = vec!["ovs-ofctl"];
        argv.extend_from_slice(args);
        self.run(&argv)
    }

    /// ovs-appctl to this ovs-vswitchd: its default target, found from the pid file in
    /// the run directory `run` names.
    pub fn appctl(&self, args: &[&str]) -> String {
        let mut argv = vec!["ovs-appctl"];
        argv.extend_from_slice(args);
        self.run(&argv)
    }
}

impl Drop for OvsFarEnd {
    /// Stops both daemons (by their pid files); the namespace's end takes the bridges'
    /// devices, the directory's removal the database.
    fn drop(&mut self) {
        for daemon in ["ovs-vswitchd", "ovsdb-server"] {
            let file = self.dir.path(&format!("{daemon}.pid"));
            let Ok(pid) = std::fs::read_to_string(&file) else {
                continue;
            };
            let pid = pid.trim();
            let _ = sh(&["kill", "-TERM", pid]);
            for _ in 0..50 {
                if !Path::new(&format!("/proc/{pid}")).exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}
