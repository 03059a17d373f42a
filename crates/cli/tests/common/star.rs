//! Hosts around a switch: each host a namespace of its own, joined by a veth to the middle
//! namespace, where the switch runs.

use super::*;

/// Host `i` (namespace and interface `hosts[i]`, address 10.9.0.`i+1`/24) is joined to
/// `ports[i]` in `ns_m`. Removed (namespaces, and with them the veths) when dropped.
pub struct NetStar {
    pub ns_m: String,
    pub hosts: Vec<String>,
    pub ports: Vec<String>,
    /// Receive and transmit queues of each veth (both ends).
    pub queues: u32,
}

impl NetStar {
    pub fn new(tag: &str, hosts: usize) -> NetStar {
        NetStar::with_queues(tag, hosts, 1)
    }

    /// `new`, each veth with `queues` queues each way.
    pub fn with_queues(tag: &str, hosts: usize, queues: u32) -> NetStar {
        let id = unique_id(tag);
        let star = NetStar {
            ns_m: format!("wss{id}m"),
            hosts: (0..hosts).map(|i| format!("wss{id}h{i}")).collect(),
            ports: (0..hosts).map(|i| format!("wss{id}p{i}")).collect(),
            queues,
        };
        add_namespace(&star.ns_m);
        for (i, host) in star.hosts.iter().enumerate() {
            add_namespace(host);
            star.link_host(i);
        }
        star
    }

    /// Joins host `i` to the middle: the veth, both ends up, the host's address (again
    /// after `ip link del` of either end, as a container restarted makes its veth anew).
    pub fn link_host(&self, i: usize) {
        let (host, port) = (&self.hosts[i], &self.ports[i]);
        let q = self.queues.to_string();
        let queues = ["numtxqueues", q.as_str(), "numrxqueues", q.as_str()];
        let mut add = vec!["ip", "link", "add", host, "netns", host];
        add.extend(queues);
        add.extend(["type", "veth", "peer", "name", port, "netns", &self.ns_m]);
        add.extend(queues);
        must(&add);
        must(&["ip", "-n", host, "link", "set", host, "up"]);
        must(&["ip", "-n", &self.ns_m, "link", "set", port, "up"]);
        let address = format!("{}/24", self.ip(i));
        must(&["ip", "-n", host, "addr", "add", &address, "dev", host]);
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
