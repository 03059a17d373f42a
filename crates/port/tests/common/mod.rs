//! A network namespace with a veth pair for the port tests, entered by the test's thread.

use std::fs::File;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub const MAC_A: [u8; 6] = [0x02, 0x57, 0x53, 0, 0, 0x0a];
pub const MAC_B: [u8; 6] = [0x02, 0x57, 0x53, 0, 0, 0x0b];

static NEXT_NETNS: AtomicU32 = AtomicU32::new(0);

/// A network namespace with a veth pair (`a`, `b`), entered by the current thread; leaving and
/// deleting it happens in Drop, so a failing test cleans up too.
pub struct Netns {
    name: String,
    home: File,
    pub a: String,
    pub b: String,
}

impl Netns {
    /// Makes and enters the namespace; panics with the reason when it cannot, so a test run
    /// without root fails loudly rather than passing empty (as the CLI's `require_root` does).
    pub fn enter(test: &str) -> Netns {
        assert!(
            is_root(),
            "{test}: needs root (CAP_NET_ADMIN and CAP_NET_RAW) to make a namespace and veths"
        );
        let n = NEXT_NETNS.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let ns = Netns {
            name: format!("wspk{pid}n{n}"),
            home: File::open("/proc/thread-self/ns/net").expect("own network namespace"),
            a: format!("wspk{pid}{n}a"),
            b: format!("wspk{pid}{n}b"),
        };
        assert!(
            ip(&["netns", "add", &ns.name]),
            "{test}: cannot create network namespace {}",
            ns.name
        );
        // No IPv6 autoconfiguration chatter on the test link.
        let _ = Command::new("ip")
            .args(["netns", "exec", &ns.name, "sysctl", "-qw"])
            .args([
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ])
            .status();
        let mac = |m: [u8; 6]| m.map(|b| format!("{b:02x}")).join(":");
        let (mac_a, mac_b) = (mac(MAC_A), mac(MAC_B));
        let n = ns.name.as_str();
        assert!(ip(&[
            "-n", n, "link", "add", &ns.a, "address", &mac_a, "type", "veth", "peer", "name",
            &ns.b, "address", &mac_b
        ]));
        assert!(ip(&["-n", n, "link", "set", &ns.a, "up"]));
        assert!(ip(&["-n", n, "link", "set", &ns.b, "up"]));
        let target = File::open(format!("/run/netns/{}", ns.name)).expect("netns handle");
        set_netns(&target);
        ns
    }
}

// Each test binary uses its part.
#[allow(dead_code)]
impl Netns {
    /// Sets the MTU of both ends of the pair.
    pub fn set_mtu(&self, mtu: u32) {
        for dev in [&self.a, &self.b] {
            assert!(
                ip(&["link", "set", dev, "mtu", &mtu.to_string()]),
                "{dev}: mtu {mtu}"
            );
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        set_netns(&self.home);
        ip(&["netns", "del", &self.name]);
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

fn set_netns(ns: &File) {
    // Changes only this thread's namespace.
    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).expect("setns");
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1).map(|euid| euid == "0"))
            .unwrap_or(false)
    })
}
