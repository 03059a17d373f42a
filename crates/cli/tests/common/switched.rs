//! A switch between two host namespaces, for the switch tests.

use super::*;

/// A `dump-flows` line (ovs-ofctl's or ctl's) without its duration, which moves.
pub fn flow_without_duration(line: &str) -> String {
    line.split(", ")
        .filter(|f| !f.starts_with("duration="))
        .collect::<Vec<_>>()
        .join(", ")
        .trim()
        .to_string()
}

/// Hosts A (10.9.0.1) and B (10.9.0.2) joined through a `wirespeed switch` in the middle
/// namespace (port 1 towards A, port 2 towards B), with a control socket of its own.
pub struct Switched {
    pub c: NetChain,
    pub ctl: ScratchFile,
    switch: Option<Running>,
}

/// How the switch in the middle is set up.
pub struct Setup<'a> {
    /// Backends of ports 1 and 2 (`xdp` or `packet`).
    pub backends: [&'a str; 2],
    /// Queues of every veth.
    pub queues: u32,
}

impl Default for Setup<'_> {
    fn default() -> Self {
        Setup {
            backends: ["xdp", "xdp"],
            queues: 1,
        }
    }
}

impl Switched {
    pub fn new(tag: &str, extra: &[&str]) -> Switched {
        Switched::with(tag, Setup::default(), extra)
    }

    pub fn with(tag: &str, setup: Setup<'_>, extra: &[&str]) -> Switched {
        Switched::prepared(tag, setup, extra, |_| ()).0
    }

    /// [`Switched::with`], running `prepare` on the namespaces before the switch starts
    /// (a collector on the middle namespace's loopback); what it returned.
    pub fn prepared<T>(
        tag: &str,
        setup: Setup<'_>,
        extra: &[&str],
        prepare: impl FnOnce(&NetChain) -> T,
    ) -> (Switched, T) {
        let c = NetChain::with_queues(tag, setup.queues);
        must(&[
            "ip",
            "-n",
            &c.ns_a,
            "addr",
            "add",
            "10.9.0.1/24",
            "dev",
            &c.a,
        ]);
        must(&[
            "ip",
            "-n",
            &c.ns_b,
            "addr",
            "add",
            "10.9.0.2/24",
            "dev",
            &c.b,
        ]);
        // OpenFlow listens on the middle namespace's loopback.
        must(&["ip", "-n", &c.ns_m, "link", "set", "lo", "up"]);
        let prepared = prepare(&c);
        let ctl = ScratchFile::new(&format!("{tag}.sock"));
        let [b1, b2] = setup.backends;
        let (p1, p2) = (format!("1={b1}:{}", c.ma), format!("2={b2}:{}", c.mb));
        let mut args = vec![
            "switch", "--port", &p1, "--port", &p2, "--ctl", &ctl, "--json",
        ];
        args.extend_from_slice(extra);
        let mut switch = spawn_in(&c.ns_m, &args);
        switch.wait_ready();
        let switched = Switched {
            c,
            ctl,
            switch: Some(switch),
        };
        (switched, prepared)
    }

    /// Runs `ovs-ofctl -O OpenFlow13 --no-names ARGS` in the switch's namespace against its
    /// `--openflow ptcp:` (127.0.0.1:6653): its output, and whether it succeeded.
    pub fn ofctl(&self, args: &[&str]) -> (bool, String) {
        self.ofctl_via("tcp:127.0.0.1:6653", &[], args)
    }

    /// [`Switched::ofctl`] to `target` (`ssl:127.0.0.1:6653`), with `options` before `args`'
    /// own (the TLS files).
    pub fn ofctl_via(&self, target: &str, options: &[String], args: &[&str]) -> (bool, String) {
        let mut argv = self.ofctl_command().to_vec();
        argv.push("--no-names");
        argv.extend(options.iter().map(String::as_str));
        let own = args.iter().take_while(|a| a.starts_with("--")).count();
        argv.extend_from_slice(&args[..own]);
        let (command, rest) = args[own..].split_first().expect("a command");
        argv.push(command);
        argv.push(target);
        argv.extend_from_slice(rest);
        let out = sh(&argv);
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    /// `ovs-ofctl -O OpenFlow13` in the switch's namespace, for options and a command to
    /// follow.
    fn ofctl_command(&self) -> [&str; 7] {
        [
            "ip",
            "netns",
            "exec",
            &self.c.ns_m,
            "ovs-ofctl",
            "-O",
            "OpenFlow13",
        ]
    }

    /// [`Switched::ofctl`], which must succeed.
    pub fn ofctl_ok(&self, args: &[&str]) -> String {
        let (ok, text) = self.ofctl(args);
        assert!(ok, "ovs-ofctl {args:?}: {text}");
        text
    }

    /// The switch's process id.
    pub fn pid(&self) -> u32 {
        self.switch.as_ref().expect("the switch runs").pid()
    }

    pub fn ctl(&self, args: &[&str]) -> std::process::Output {
        let mut argv = vec![wirespeed(), "ctl", "--ctl", &self.ctl];
        argv.extend_from_slice(args);
        sh(&argv)
    }

    /// `ctl ARGS` with `input` on its standard input (`add-flows -`, `add-groups -`).
    pub fn ctl_with_input(&self, args: &[&str], input: &[u8]) -> std::process::Output {
        let mut ctl = std::process::Command::new(wirespeed())
            .args(["ctl", "--ctl", &self.ctl])
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut ctl.stdin.take().unwrap(), input).unwrap();
        ctl.wait_with_output().unwrap()
    }

    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(
            out.status.success(),
            "ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Hosts A (fd09::1) and B (fd09::2) on IPv6 as well, knowing each other for good.
    pub fn ipv6_on(&self) {
        let c = &self.c;
        let (mac_a, mac_b) = (mac_of(&c.ns_a, &c.a), mac_of(&c.ns_b, &c.b));
        for (ns, dev, me, peer, peer_mac) in [
            (&c.ns_a, &c.a, "fd09::1/64", "fd09::2", &mac_b),
            (&c.ns_b, &c.b, "fd09::2/64", "fd09::1", &mac_a),
        ] {
            for knob in ["all", "default", dev.as_str()] {
                let knob = format!("net.ipv6.conf.{knob}.disable_ipv6=0");
                must(&["ip", "netns", "exec", ns, "sysctl", "-qw", &knob]);
            }
            must(&["ip", "-n", ns, "addr", "add", me, "dev", dev, "nodad"]);
            permanent_neighbour(ns, dev, peer, peer_mac);
        }
    }

    /// `ovs-ofctl monitor` connected to the switch's `--openflow ptcp:`, printing what the
    /// switch tells a controller; stopped when dropped.
    pub fn monitor(&self) -> Monitor {
        monitor_in(&self.c.ns_m)
    }

    /// Pings from `ns` to `to`: how many of `count` replies came back.
    pub fn ping(&self, ns: &str, to: &str, count: u32) -> u32 {
        super::ping(ns, to, count)
    }

    /// Sends `bytes` random bytes over one TCP connection from host A to host B (10.9.0.1 ->
    /// 10.9.0.2:5001) and asserts B received exactly them (count and SHA-256).
    pub fn tcp_transfer_is_intact(&self, bytes: usize) {
        tcp_transfer_is_intact(&self.c.ns_a, &self.c.ns_b, "10.9.0.2", bytes);
    }
}

/// `ovs-ofctl monitor` in namespace `ns`, connected to a switch's `--openflow ptcp:6653`
/// there, printing what the switch tells a controller; stopped when dropped.
pub fn monitor_in(ns: &str) -> Monitor {
    // Its unixctl socket in a scratch file: it makes one, and /var/run/openvswitch may not
    // exist.
    let unixctl = ScratchFile::new("monitor.ctl");
    let told = ScratchFile::new("monitor.out");
    let child = std::process::Command::new("ip")
        .args(["netns", "exec", ns, "ovs-ofctl", "-O", "OpenFlow13"])
        .arg(format!("--unixctl={}", &*unixctl))
        .args(["monitor", "tcp:127.0.0.1:6653"])
        .stdout(std::process::Stdio::null())
        // It prints the messages on stderr.
        .stderr(std::fs::File::create(&*told).unwrap())
        .spawn()
        .unwrap();
    Monitor {
        child,
        told,
        _unixctl: unixctl,
    }
}

/// A running `ovs-ofctl monitor` ([`monitor_in`]).
pub struct Monitor {
    child: std::process::Child,
    told: ScratchFile,
    _unixctl: ScratchFile,
}

impl Monitor {
    /// What it printed so far.
    pub fn told(&self) -> String {
        std::fs::read_to_string(&*self.told).unwrap_or_default()
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `bytes` random bytes over one TCP connection from namespace `client` to `server_ip`
/// (IPv4 or IPv6) port 5001 in namespace `server`, and asserts the server received exactly
/// them (count and SHA-256).
pub fn tcp_transfer_is_intact(client: &str, server: &str, server_ip: &str, bytes: usize) {
    let mut server = std::process::Command::new("ip")
        .args(["netns", "exec", server, "python3", "-c"])
        .arg(format!(
            "import socket,hashlib\n\
             l=socket.socket(socket.AF_INET6 if ':' in '{server_ip}' else socket.AF_INET)\n\
             l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
             l.settimeout(30); l.bind(('{server_ip}', 5001)); l.listen(1); print('listening', flush=True)\n\
             c,_=l.accept(); c.settimeout(30); h=hashlib.sha256(); n=0\n\
             while True:\n  b=c.recv(65536)\n  if not b: break\n  h.update(b); n+=len(b)\n\
             print(n, h.hexdigest(), flush=True)",
        ))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(server.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    if line.trim() != "listening" {
        let _ = server.kill();
        let _ = server.wait();
        panic!("the TCP server did not start: {line}");
    }
    let script = format!(
        "import socket,hashlib,os\n\
         data=os.urandom({bytes}); c=socket.create_connection(('{server_ip}', 5001), timeout=20)\n\
         c.sendall(data); c.close(); print(len(data), hashlib.sha256(data).hexdigest())"
    );
    let client = sh(&["ip", "netns", "exec", client, "python3", "-c", &script]);
    line.clear();
    let _ = std::io::BufRead::read_line(&mut out, &mut line);
    let server_ok = server.wait().is_ok_and(|st| st.success());
    let sent = String::from_utf8_lossy(&client.stdout);
    assert!(
        client.status.success(),
        "client: {}",
        String::from_utf8_lossy(&client.stderr)
    );
    assert!(server_ok, "the TCP server failed");
    assert_eq!(
        line.trim(),
        sent.trim(),
        "bytes and SHA-256 received must equal those sent"
    );
    assert!(sent.starts_with(&format!("{bytes} ")), "{sent}");
}

impl Switched {
    /// Stops the switch (SIGINT): its JSON summary and its stderr, checked for a clean exit
    /// and every frame accounted for.
    pub fn stop(&mut self) -> (serde_json::Value, String) {
        let s = self.switch.take().expect("the switch runs");
        let (j, log) = s.interrupt();
        assert!(!log.contains("panicked"), "{log}");
        assert_eq!(j["frames"]["balanced"], true, "{j}");
        (j, log)
    }

    /// Waits for a line of the switch's stderr containing `needle`.
    pub fn wait_for(&mut self, needle: &str) {
        self.switch
            .as_mut()
            .expect("the switch runs")
            .wait_for(needle);
    }

    /// Stops the switch (SIGINT) where it may fail: its exit code, its stdout (the JSON
    /// summary) and its stderr.
    pub fn stop_as_it_ends(&mut self) -> (Option<i32>, String, String) {
        let s = self.switch.take().expect("the switch runs");
        must(&["kill", "-INT", &s.pid().to_string()]);
        s.exit()
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        if self.switch.is_some() && !std::thread::panicking() {
            self.stop();
        }
    }
}

/// Sends `count` numbered UDP frames from `ns` out of `dev`, on CPU `cpu`: AF_PACKET sends
/// with qdisc bypass, which picks the transmit queue by CPU, so the peer receives them on
/// queue `cpu`. `extra` goes on gen's command line.
pub fn send_on_cpu(ns: &str, dev: &str, cpu: u32, count: u32, dst_mac: &str, extra: &[&str]) {
    let port = format!("packet:{dev}");
    let (cpu_text, count_text, id_text) =
        (cpu.to_string(), count.to_string(), (cpu + 1).to_string());
    let mut argv = vec![
        "ip",
        "netns",
        "exec",
        ns,
        "taskset",
        "-c",
        &cpu_text,
        wirespeed(),
        "gen",
        "--port",
        &port,
        "--count",
        &count_text,
        "--flows",
        "16",
        "--rate",
        "50000",
        "--dst-mac",
        dst_mac,
        "--dst-ip",
        "10.9.0.2",
        "--generator-id",
        &id_text,
        "--json",
    ];
    argv.extend_from_slice(extra);
    let out = sh(&argv);
    assert!(
        out.status.success(),
        "gen: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The number after `name=` in `text`'s line that contains `within` (ctl's output).
pub fn field(text: &str, within: &str, name: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.contains(within))
        .unwrap_or_else(|| panic!("no line with {within}: {text}"));
    line.split([',', ' '])
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name}= in {line}"))
}
