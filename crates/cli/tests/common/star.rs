//! Hosts around a switch: each host a namespace of its own, joined by a veth to the middle
//! namespace, where the switch runs.

use super::*;

/// Host `i` (namespace and interface `hosts[i]`, address 10.9.0.`i+1`/24) is joined to
/// `ports[i]` in `ns_m`. Removed (namespaces, and with them the veths) when dropped.
pub struct NetStar {
    pub ns_m: String,
    pub hosts: Vec<String>,
    pub ports: Vec<String>,
}

impl NetStar {
    pub fn new(tag: &str, hosts: usize) -> NetStar {
        let id = unique_id(tag);
        let star = NetStar {
            ns_m: format!("wss{id}m"),
            hosts: (0..hosts).map(|i| format!("wss{id}h{i}")).collect(),
            ports: (0..hosts).map(|i| format!("wss{id}p{i}")).collect(),
        };
        add_namespace(&star.ns_m);
        for (i, (host, port)) in star.hosts.iter().zip(&star.ports).enumerate() {
            add_namespace(host);
            must(&[
                "ip", "link", "add", host, "netns", host, "type", "veth", "peer", "name", port,
                "netns", &star.ns_m,
            ]);
            must(&["ip", "-n", host, "link", "set", host, "up"]);
            must(&["ip", "-n", &star.ns_m, "link", "set", port, "up"]);
            must(&[
                "ip",
                "-n",
                host,
                "addr",
                "add",
                &format!("{}/24", star.ip(i)),
                "dev",
                host,
            ]);
        }
        star
    }

    /// Host `i`'s address.
    pub fn ip(&self, i: usize) -> String {
        format!("10.9.0.{}", i + 1)
    }

    /// `ip link set PORT_i up|down` on the switch's side of host `i`'s link.
    pub fn set_port(&self, i: usize, state: &str) {
        must(&["ip", "-n", &self.ns_m, "link", "set", &self.ports[i], state]);
    }

    /// `switch --port 1=xdp:P0 --port 2=xdp:P1 ...` with `extra`, in the middle, ready.
    pub fn switch(&self, ctl: &str, extra: &[&str]) -> Running {
        let backends = vec!["xdp"; self.ports.len()];
        self.switch_with(ctl, &backends, extra)
    }

    /// `switch` with port i on backend `backends[i]` (xdp, packet).
    pub fn switch_with(&self, ctl: &str, backends: &[&str], extra: &[&str]) -> Running {
        let ports: Vec<String> = self
            .ports
            .iter()
            .zip(backends)
            .enumerate()
            .map(|(i, (p, b))| format!("{}={b}:{p}", i + 1))
            .collect();
        let mut args = vec!["switch", "--ctl", ctl, "--json"];
        for p in &ports {
            args.extend(["--port", p.as_str()]);
        }
        args.extend_from_slice(extra);
        let mut switch = spawn_in(&self.ns_m, &args);
        switch.wait_ready();
        switch
    }
}

impl Drop for NetStar {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain([&self.ns_m]) {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}
