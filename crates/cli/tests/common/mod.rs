//! Shared by the integration tests: namespaces and veth pairs of their own (unique names,
//! removed on every path by Drop), and running `wirespeed` inside them.

#![allow(dead_code)]

pub mod certs;
pub mod faucet;
pub mod ovs_far_end;
pub mod pcaps;
pub mod prometheus;
pub mod scenarios;
pub mod star;
pub mod switched;
pub mod tmux;
pub mod traffic;
pub mod tshark;
pub mod tunnelled;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub fn wirespeed() -> &'static str {
    env!("CARGO_BIN_EXE_wirespeed")
}

/// Integration tests move real packets: they need root. Fail loudly rather than pass empty.
pub fn require_root() {
    let uid = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("Uid:")
                .map(|v| v.split_whitespace().next().unwrap().to_string())
        })
        .unwrap();
    assert_eq!(
        uid, "0",
        "integration tests need root (they create namespaces and veths)"
    );
}

pub fn sh(args: &[&str]) -> Output {
    Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("run {args:?}: {e}"))
}

pub fn must(args: &[&str]) -> String {
    let out = sh(args);
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// Two namespaces joined by a veth pair: `a` in `ns_a`, `b` in `ns_b`. IPv6 is off so the
/// kernel sends nothing of its own; removed (namespaces and links) when dropped.
/// A name part no other test of this run uses: `tag` (at most 3 characters), this process's
/// id, a counter. Checks that the caller may make namespaces.
fn unique_id(tag: &str) -> String {
    require_root();
    assert!(tag.len() <= 3);
    format!(
        "{}{}{}",
        tag,
        std::process::id() % 100000,
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Makes namespace `ns` with IPv6 off, so nothing but the test's packets is on its links.
fn add_namespace(ns: &str) {
    must(&["ip", "netns", "add", ns]);
    for knob in [
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ] {
        must(&["ip", "netns", "exec", ns, "sysctl", "-qw", knob]);
    }
}

pub struct NetPair {
    pub ns_a: String,
    pub ns_b: String,
    pub a: String,
    pub b: String,
}

impl NetPair {
    pub fn new(tag: &str) -> NetPair {
        NetPair::with_queues(tag, 1)
    }

    /// Gives end a address `a` and end b address `b` (CIDR).
    pub fn address(&self, a: &str, b: &str) {
        for (ns, dev, ip) in [(&self.ns_a, &self.a, a), (&self.ns_b, &self.b, b)] {
            must(&["ip", "-n", ns, "addr", "add", ip, "dev", dev]);
        }
    }

    /// A pair whose ends have `queues` receive and transmit queues each.
    pub fn with_queues(tag: &str, queues: u32) -> NetPair {
        NetPair::with_queue_counts(tag, queues, queues)
    }

    /// A pair whose end a has `qa` receive and transmit queues, and end b `qb`.
    pub fn with_queue_counts(tag: &str, qa: u32, qb: u32) -> NetPair {
        let id = unique_id(tag);
        let p = NetPair {
            ns_a: format!("wst{id}a"),
            ns_b: format!("wst{id}b"),
            a: format!("wst{id}a"),
            b: format!("wst{id}b"),
        };
        assert!(p.a.len() <= 15, "interface name {} too long", p.a);
        for ns in [&p.ns_a, &p.ns_b] {
            add_namespace(ns);
        }
        let (qa, qb) = (qa.to_string(), qb.to_string());
        must(&[
            "ip",
            "link",
            "add",
            &p.a,
            "numrxqueues",
            &qa,
            "numtxqueues",
            &qa,
            "netns",
            &p.ns_a,
            "type",
            "veth",
            "peer",
            "name",
            &p.b,
            "numrxqueues",
            &qb,
            "numtxqueues",
            &qb,
            "netns",
            &p.ns_b,
        ]);
        for (ns, dev) in [(&p.ns_a, &p.a), (&p.ns_b, &p.b)] {
            must(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        p
    }

    /// Frames the veth pair dropped ([`veth_end_drops`] of both ends).
    pub fn veth_drops(&self) -> u64 {
        veth_end_drops(&self.ns_a, &self.a) + veth_end_drops(&self.ns_b, &self.b)
    }

    /// No XDP program is attached to either end.
    pub fn assert_no_xdp(&self) {
        for (ns, dev) in [(&self.ns_a, &self.a), (&self.ns_b, &self.b)] {
            let out = must(&["ip", "-n", ns, "-d", "link", "show", "dev", dev]);
            assert!(
                !out.contains("prog/xdp"),
                "{dev} still has an XDP program: {out}"
            );
        }
    }
}

impl Drop for NetPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end inside it, and with it the pair.
        let _ = sh(&["ip", "netns", "del", &self.ns_a]);
        let _ = sh(&["ip", "netns", "del", &self.ns_b]);
    }
}

/// One counter of `ip -s -j link show`: `dir` is "rx" or "tx", `name` e.g. "dropped".
pub fn link_stat(ns: &str, dev: &str, dir: &str, name: &str) -> u64 {
    let out = must(&["ip", "-n", ns, "-s", "-j", "link", "show", "dev", dev]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["stats64"][dir][name].as_u64().unwrap_or(0)
}

/// A wirespeed process running in a namespace, its stderr collected.
pub struct Running {
    child: Option<Child>,
    stderr: mpsc::Receiver<String>,
    pub log: Vec<String>,
}

impl Running {
    /// Waits for the line that says set-up is done; panics with the log if it never comes.
    pub fn wait_ready(&mut self) {
        self.wait_for(" ready ");
    }

    /// Waits for a line of standard error containing `needle` (another program's own "ready"
    /// line); panics with the log if it never comes.
    pub fn wait_for(&mut self, needle: &str) {
        let until = Instant::now() + Duration::from_secs(20);
        while Instant::now() < until {
            match self.stderr.recv_timeout(Duration::from_millis(100)) {
                Ok(line) => {
                    let ready = line.contains(needle);
                    self.log.push(line);
                    if ready {
                        return;
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                        panic!("exited ({st}) before {needle:?}: {:?}", self.log);
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("never said {needle:?}: {:?}", self.log);
    }

    /// Its standard output, to read as it comes (`finish` and `exit` then find it empty).
    pub fn take_stdout(&mut self) -> std::process::ChildStdout {
        self.child.as_mut().unwrap().stdout.take().unwrap()
    }

    /// The process id (wirespeed's: ip netns exec execs it).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// SIGINT, then the JSON it printed and its stderr.
    pub fn interrupt(self) -> (serde_json::Value, String) {
        let pid = self.child.as_ref().unwrap().id();
        // ip netns exec replaces itself with wirespeed (exec), so this pid is wirespeed's.
        must(&["kill", "-INT", &pid.to_string()]);
        self.finish()
    }

    /// SIGTERM, then the JSON it printed and its stderr.
    pub fn terminate(self) -> (serde_json::Value, String) {
        let pid = self.child.as_ref().unwrap().id();
        must(&["kill", "-TERM", &pid.to_string()]);
        self.finish()
    }

    /// Waits for the exit, then the JSON it printed and its stderr.
    pub fn finish(mut self) -> (serde_json::Value, String) {
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            self.log.push(l);
        }
        let log = self.log.join("\n");
        assert!(
            out.status.success(),
            "wirespeed failed ({}): {log}",
            out.status
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let json = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}"));
        (json, log)
    }

    /// `exit`, killing the process first if it has not ended within `limit` (then panics).
    pub fn exit_within(mut self, limit: Duration) -> (Option<i32>, String, String) {
        let until = Instant::now() + limit;
        while Instant::now() < until {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                return self.exit();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let (_, out, err) = {
            // Its children too (tshark's dumpcap): they hold the output pipes open.
            if let Some(c) = self.child.as_ref() {
                kill_tree(c.id());
            }
            self.exit()
        };
        panic!("still running after {limit:?}; stdout: {out}; stderr: {err}");
    }

    /// Waits for the exit, whatever its status: the exit code, stdout and stderr.
    pub fn exit(mut self) -> (Option<i32>, String, String) {
        let out = self.child.take().unwrap().wait_with_output().unwrap();
        while let Ok(l) = self.stderr.recv_timeout(Duration::from_millis(200)) {
            self.log.push(l);
        }
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code(), stdout, self.log.join("\n"))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// SIGKILL to `pid` and every process descended from it, children first.
pub fn kill_tree(pid: u32) {
    let parent_of = |p: u32| -> Option<u32> {
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).ok()?;
        stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    let children: Vec<u32> = std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter(|&p| parent_of(p) == Some(pid))
                .collect()
        })
        .unwrap_or_default();
    for child in children {
        kill_tree(child);
    }
    let _ = sh(&["kill", "-KILL", &pid.to_string()]);
}

/// Starts `wirespeed ARGS` inside `ns`.
pub fn spawn_in(ns: &str, args: &[&str]) -> Running {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, wirespeed()]).args(args);
    spawn_command(cmd)
}

/// Starts `wirespeed ARGS` in the test's own namespace (for ports that need no interface).
pub fn spawn(args: &[&str]) -> Running {
    let mut cmd = Command::new(wirespeed());
    cmd.args(args);
    spawn_command(cmd)
}

fn spawn_command(mut cmd: Command) -> Running {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    Running {
        child: Some(child),
        stderr: rx,
        log: Vec::new(),
    }
}

/// Runs `wirespeed ARGS` inside `ns` to the end.
pub fn run_in(ns: &str, args: &[&str]) -> Output {
    Command::new("ip")
        .args(["netns", "exec", ns, wirespeed()])
        .args(args)
        .output()
        .unwrap()
}

/// Runs wirespeed to the end and returns its JSON summary, asserting success.
pub fn run_json(ns: &str, args: &[&str]) -> serde_json::Value {
    summary_of(args, run_in(ns, args))
}

/// Runs wirespeed here (no namespace: for ports that need no interface) to the end and
/// returns its JSON summary, asserting success.
pub fn run_json_here(args: &[&str]) -> serde_json::Value {
    summary_of(args, Command::new(wirespeed()).args(args).output().unwrap())
}

fn summary_of(args: &[&str], out: Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "wirespeed {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// `ovs-ofctl -O OpenFlow13 COMMAND tcp:127.0.0.1:6653 ARGS...` in `ns` (`args` is COMMAND
/// then ARGS), names and all (no `--no-names`: ovs-ofctl then reads the table features
/// first): what it prints; it must succeed.
pub fn ovs_ofctl13(ns: &str, args: &[&str]) -> String {
    let mut argv = vec!["ip", "netns", "exec", ns, "ovs-ofctl", "-O", "OpenFlow13"];
    argv.extend([args[0], "tcp:127.0.0.1:6653"]);
    argv.extend_from_slice(&args[1..]);
    must(&argv)
}

/// Pings from `ns` to `to`: how many of `count` replies came back.
pub fn ping(ns: &str, to: &str, count: u32) -> u32 {
    ping_with(ns, to, count, &[])
}

/// [`ping`] with `extra` on ping's command line (`-6 -F LABEL`).
pub fn ping_with(ns: &str, to: &str, count: u32, extra: &[&str]) -> u32 {
    let count = count.to_string();
    let mut argv = vec![
        "ip", "netns", "exec", ns, "ping", "-n", "-c", &count, "-i", "0.2", "-W", "1",
    ];
    argv.extend_from_slice(extra);
    argv.push(to);
    let out = sh(&argv);
    let text = String::from_utf8_lossy(&out.stdout);
    text.split(", ")
        .find_map(|part| part.strip_suffix(" received"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no ping summary: {text}"))
}

pub fn exists(p: &str) -> bool {
    Path::new(p).exists()
}

/// A file name of this test process's own in the temporary directory, removed when dropped,
/// so a failing test leaves nothing behind. Derefs to the path.
pub struct ScratchFile(String);

impl ScratchFile {
    pub fn new(name: &str) -> ScratchFile {
        // Tests of one binary run at once: a number of its own for each file.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("wirespeed-{}-{n}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&p);
        ScratchFile(p.to_string_lossy().into_owned())
    }
}

impl std::ops::Deref for ScratchFile {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<Path> for ScratchFile {
    fn as_ref(&self) -> &Path {
        Path::new(&self.0)
    }
}

impl std::fmt::Display for ScratchFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Drop for ScratchFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Asserts the frame audit in a summary balanced.
pub fn assert_frames_balanced(j: &serde_json::Value) {
    let f = &j["frames"];
    assert!(
        f["balanced"].as_bool().unwrap_or(false),
        "frames not balanced: {f}"
    );
    let total = f["total"].as_u64().unwrap();
    let sum: u64 = [
        "pool",
        "fill",
        "kernel",
        "rx",
        "application",
        "tx",
        "completion",
    ]
    .iter()
    .map(|k| f[k].as_u64().unwrap())
    .sum();
    assert_eq!(sum, total, "frames: {f}");
}

/// A summary's `per_second_mpps`.
pub fn per_second_rates(j: &serde_json::Value) -> Vec<f64> {
    j["per_second_mpps"]
        .as_array()
        .unwrap_or_else(|| panic!("no per_second_mpps: {j}"))
        .iter()
        .map(|r| r.as_f64().unwrap())
        .collect()
}

/// Asserts a summary's `per_second_mpps` holds at least `seconds` whole seconds at `mpps`,
/// each within `within` (a fraction), and none above that (a receiver's idle seconds are 0).
pub fn assert_seconds_at(j: &serde_json::Value, mpps: f64, within: f64, seconds: usize) {
    let rates = per_second_rates(j);
    let at_rate = rates
        .iter()
        .filter(|r| (**r - mpps).abs() <= mpps * within)
        .count();
    assert!(
        at_rate >= seconds,
        "{at_rate} of the seconds {rates:?} at {mpps} Mpps, want {seconds}"
    );
    assert!(
        rates.iter().all(|r| *r <= mpps * (1.0 + within)),
        "a second above {mpps} Mpps: {rates:?}"
    );
}

/// Asserts a summary's `cpu` object: user and system seconds, and per-packet figures when
/// packets were counted.
pub fn assert_cpu_reported(j: &serde_json::Value) {
    let c = &j["cpu"];
    let user = c["user_seconds"].as_f64().unwrap_or(-1.0);
    let system = c["system_seconds"].as_f64().unwrap_or(-1.0);
    assert!(user >= 0.0 && system >= 0.0, "cpu: {j}");
    assert!(user + system > 0.0, "no CPU time at all: {c}");
    if j["packets"].as_u64().unwrap_or(0) > 0 {
        let per =
            c["user_ns_per_packet"].as_f64().unwrap() + c["system_ns_per_packet"].as_f64().unwrap();
        assert!(per > 0.0, "cpu per packet: {c}");
    }
}

/// The frames of a classic pcap file (either byte order, micro- or nanosecond magic).
pub fn read_pcap(path: &str) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap_or_else(|e| panic!("read {path}: {e}"));
    assert!(data.len() >= 24, "{path}: too short for a pcap header");
    let magic = u32::from_le_bytes(data[0..4].try_into().unwrap());
    let le = match magic {
        0xa1b2c3d4 | 0xa1b23c4d => true,
        0xd4c3b2a1 | 0x4d3cb2a1 => false,
        m => panic!("{path}: not a pcap file (magic {m:#x})"),
    };
    let u32_at = |o: usize| {
        let b: [u8; 4] = data[o..o + 4].try_into().unwrap();
        if le {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }
    };
    let mut frames = Vec::new();
    let mut off = 24;
    while off + 16 <= data.len() {
        let caplen = u32_at(off + 8) as usize;
        off += 16;
        assert!(off + caplen <= data.len(), "{path}: truncated record");
        frames.push(data[off..off + caplen].to_vec());
        off += caplen;
    }
    frames
}

/// A capture process (tcpdump) in a namespace, stopped by SIGTERM.
pub struct Capture {
    child: Option<Child>,
    pub file: String,
    stderr: Option<std::thread::JoinHandle<String>>,
}

/// What a capture saw: the frames written and tcpdump's own count of those it lost.
pub struct Captured {
    pub frames: Vec<Vec<u8>>,
    pub dropped_by_tcpdump: u64,
}

impl Capture {
    /// tcpdump on `dev` in `ns`, inbound packets only, written to `file`.
    pub fn tcpdump_inbound(ns: &str, dev: &str, file: &str) -> Capture {
        Capture::tcpdump(ns, dev, "in", file)
    }

    /// tcpdump on `dev` in `ns`, packets of `direction` (its -Q: in, out, inout), written
    /// to `file`.
    pub fn tcpdump(ns: &str, dev: &str, direction: &str, file: &str) -> Capture {
        Capture::tcpdump_filtered(ns, dev, direction, file, None)
    }

    /// [`Capture::tcpdump`] with a filter expression, which tcpdump runs as it does live.
    pub fn tcpdump_filtered(
        ns: &str,
        dev: &str,
        direction: &str,
        file: &str,
        filter: Option<&str>,
    ) -> Capture {
        let mut child = Command::new("ip")
            .args([
                "netns", "exec", ns, "tcpdump", "-n", "-i", dev, "-Q", direction, "-U", "-B",
                "65536", "-s", "0", "-w", file,
            ])
            .args(filter)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("tcpdump (install it: make deps)");
        let mut err = BufReader::new(child.stderr.take().unwrap());
        // `-i any` says its link type first.
        let mut said = String::new();
        while !said.contains("listening on") {
            let mut line = String::new();
            if err.read_line(&mut line).unwrap() == 0 || said.lines().count() > 3 {
                // Not left running (with its namespace gone) by the panic.
                let _ = child.kill();
                let _ = child.wait();
                panic!("tcpdump did not start: {said}{line}");
            }
            said.push_str(&line);
        }
        let stderr = std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut rest);
            rest
        });
        Capture {
            child: Some(child),
            file: file.to_string(),
            stderr: Some(stderr),
        }
    }

    /// Stops tcpdump once the kernel has handed it everything (libpcap's TPACKET_V3 block
    /// is retired after its 1 s timeout); returns the frames and its drop count. The file
    /// stays for the caller when `keep`.
    pub fn stop(mut self, keep: bool) -> Captured {
        std::thread::sleep(Duration::from_millis(1300));
        let mut c = self.child.take().unwrap();
        must(&["kill", "-TERM", &c.id().to_string()]);
        let st = c.wait().unwrap();
        assert!(st.success(), "tcpdump: {st}");
        let log = self.stderr.take().unwrap().join().unwrap();
        let dropped_by_tcpdump = log
            .lines()
            .find_map(|l| l.strip_suffix("dropped by kernel"))
            .and_then(|l| l.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no drop count in tcpdump's output: {log}"));
        let frames = read_pcap(&self.file);
        if keep {
            self.file.clear();
        }
        Captured {
            frames,
            dropped_by_tcpdump,
        }
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if !self.file.is_empty() {
            let _ = std::fs::remove_file(&self.file);
        }
    }
}

/// The MAC address of `dev` in `ns`.
pub fn mac_of(ns: &str, dev: &str) -> String {
    let path = format!("/sys/class/net/{dev}/address");
    must(&["ip", "netns", "exec", ns, "cat", &path])
        .trim()
        .to_string()
}

/// In namespace `ns`, `ip` is at `mac` on `dev` for good (no ARP for it).
pub fn permanent_neighbour(ns: &str, dev: &str, ip: &str, mac: &str) {
    must(&[
        "ip",
        "-n",
        ns,
        "neigh",
        "replace",
        ip,
        "lladdr",
        mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ]);
}

/// One counter of `ethtool -S`.
pub fn ethtool_stat(ns: &str, dev: &str, name: &str) -> u64 {
    let out = must(&["ip", "netns", "exec", ns, "ethtool", "-S", dev]);
    out.lines()
        .find_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            (k == name).then(|| v.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("{dev}: no ethtool counter {name} in {out}"))
}

/// The sum of the `ethtool -S` counters whose names end with `suffix` (every queue's).
pub fn ethtool_sum(ns: &str, dev: &str, suffix: &str) -> u64 {
    let out = must(&["ip", "netns", "exec", ns, "ethtool", "-S", dev]);
    out.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().split_once(':')?;
            k.ends_with(suffix)
                .then(|| v.trim().parse::<u64>().unwrap())
        })
        .sum()
}

/// Three namespaces in a row: `a` (in `ns_a`) is joined to `ma` (in `ns_m`), and `mb` (in
/// `ns_m`) to `b` (in `ns_b`); the middle one forwards. Removed when dropped.
pub struct NetChain {
    pub ns_a: String,
    pub ns_m: String,
    pub ns_b: String,
    pub a: String,
    pub ma: String,
    pub mb: String,
    pub b: String,
}

impl NetChain {
    pub fn new(tag: &str) -> NetChain {
        NetChain::with_queues(tag, 1)
    }

    /// A chain whose veths have `queues` receive and transmit queues each.
    pub fn with_queues(tag: &str, queues: u32) -> NetChain {
        let id = unique_id(tag);
        let c = NetChain {
            ns_a: format!("wsc{id}a"),
            ns_m: format!("wsc{id}m"),
            ns_b: format!("wsc{id}b"),
            a: format!("wsc{id}a"),
            ma: format!("wsc{id}x"),
            mb: format!("wsc{id}y"),
            b: format!("wsc{id}b"),
        };
        for ns in [&c.ns_a, &c.ns_m, &c.ns_b] {
            add_namespace(ns);
        }
        let q = queues.to_string();
        for (one, one_ns, other, other_ns) in [
            (&c.a, &c.ns_a, &c.ma, &c.ns_m),
            (&c.mb, &c.ns_m, &c.b, &c.ns_b),
        ] {
            must(&[
                "ip",
                "link",
                "add",
                one,
                "numrxqueues",
                &q,
                "numtxqueues",
                &q,
                "netns",
                one_ns,
                "type",
                "veth",
                "peer",
                "name",
                other,
                "numrxqueues",
                &q,
                "numtxqueues",
                &q,
                "netns",
                other_ns,
            ]);
        }
        for (ns, dev) in [
            (&c.ns_a, &c.a),
            (&c.ns_m, &c.ma),
            (&c.ns_m, &c.mb),
            (&c.ns_b, &c.b),
        ] {
            must(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        c
    }

    /// Panics if the switch's side of either veth still has an XDP program.
    pub fn assert_no_xdp_left(&self) {
        for dev in [&self.ma, &self.mb] {
            let out = must(&["ip", "-n", &self.ns_m, "-d", "link", "show", "dev", dev]);
            assert!(
                !out.contains("prog/xdp"),
                "{dev} still has an XDP program: {out}"
            );
        }
    }

    /// Frames the chain's veths dropped ([`veth_end_drops`] of every end).
    pub fn veth_drops(&self) -> u64 {
        [
            (&self.ns_a, &self.a),
            (&self.ns_m, &self.ma),
            (&self.ns_m, &self.mb),
            (&self.ns_b, &self.b),
        ]
        .iter()
        .map(|(ns, dev)| veth_end_drops(ns, dev))
        .sum()
    }
}

impl Drop for NetChain {
    fn drop(&mut self) {
        for ns in [&self.ns_a, &self.ns_m, &self.ns_b] {
            let _ = sh(&["ip", "netns", "del", ns]);
        }
    }
}

/// Frames one veth end dropped: its rx_dropped + tx_dropped, less the frames veth counts at
/// both ends (an XDP frame that found the peer's ring full is in the sender's tx_dropped and
/// in the peer's rx_dropped; a failed XDP_TX the other way round), so that summed over both
/// ends of a pair each drop counts once.
pub fn veth_end_drops(ns: &str, dev: &str) -> u64 {
    link_stat(ns, dev, "rx", "dropped") + link_stat(ns, dev, "tx", "dropped")
        - ethtool_sum(ns, dev, "_xdp_xmit_errors")
        - ethtool_sum(ns, dev, "_xdp_tx_errors")
}

/// A tmpfs of `size` (as mount takes it: 256k) mounted at a new directory `path`, unmounted
/// when dropped: a disk that fills up.
pub struct SmallDisk(pub String);

impl SmallDisk {
    pub fn mount(path: &str, size: &str) -> SmallDisk {
        std::fs::create_dir_all(path).unwrap();
        must(&[
            "mount",
            "-t",
            "tmpfs",
            "-o",
            &format!("size={size}"),
            "tmpfs",
            path,
        ]);
        SmallDisk(path.to_string())
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = sh(&["umount", &self.0]);
    }
}

/// The section of [`foreign_object`]'s program (ours load with multi-buffer support).
pub const FOREIGN_SECTION: &str = "xdp.frags";

/// Builds one of our XDP objects for iproute2 to attach as "someone else's" program.
pub fn foreign_object() -> ScratchFile {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bpf/xdp_drop.c");
    let obj = ScratchFile::new("foreign.o");
    must(&[
        "clang",
        "-target",
        "bpf",
        "-O2",
        "-g",
        "-I/usr/include/x86_64-linux-gnu",
        "-c",
        src,
        "-o",
        &obj,
    ]);
    obj
}
