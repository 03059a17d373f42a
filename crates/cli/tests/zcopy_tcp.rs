//! `wirespeed zcopy` between two namespaces over a veth pair: TCP with MSG_ZEROCOPY and
//! zero-copy receive moves files intact (SHA-256 compared), against a peer that is not ours
//! (Python's sockets, the kernel's ordinary TCP) in each direction; the counts add up; bad
//! input fails before anything connects.

mod common;
use common::pcaps::TempDir;
use common::*;

const PORT: &str = "5301";

/// A veth pair with addresses 10.77.0.1 (a) and 10.77.0.2 (b), and an MTU that lets a
/// segment carry a whole page (4096 + 52 bytes of IPv4, TCP and timestamp headers).
fn link(tag: &str) -> NetPair {
    let p = NetPair::new(tag);
    for (ns, dev, ip) in [
        (&p.ns_a, &p.a, "10.77.0.1/24"),
        (&p.ns_b, &p.b, "10.77.0.2/24"),
    ] {
        must(&["ip", "-n", ns, "link", "set", dev, "mtu", "9000"]);
        must(&["ip", "-n", ns, "addr", "add", ip, "dev", dev]);
    }
    p
}

/// A file of `len` pseudo-random bytes, and its SHA-256.
fn random_file(dir: &TempDir, name: &str, len: usize) -> (String, String) {
    let path = dir.path(name);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let data: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&path, data).unwrap();
    (path.clone(), sha256(&path))
}

fn sha256(path: &str) -> String {
    must(&["sha256sum", path])
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

/// Runs a Python program in `ns` and returns its stdout, asserting success.
fn python_in(ns: &str, program: &str) -> String {
    must(&[
        "ip", "netns", "exec", ns, "timeout", "60", "python3", "-c", program,
    ])
}

/// A Python `program` in `ns` that prints "listening" once it listens: it, and the lines it
/// prints after that.
fn python_server(
    ns: &str,
    program: &str,
) -> (
    std::process::Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    let mut server = std::process::Command::new("ip")
        .args([
            "netns", "exec", ns, "timeout", "60", "python3", "-c", program,
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(server.stdout.take().unwrap()));
    assert_eq!(lines.next().unwrap().unwrap(), "listening");
    (server, lines)
}

/// `zcopy recv` (zero-copy) in namespace b on PORT writing to `out`, ready.
fn receiver_into(p: &NetPair, out: &str) -> Running {
    receiver_into_with(p, out, &[])
}

/// [`receiver_into`] with `extra` on its command line (`--copy`: copying reads).
fn receiver_into_with(p: &NetPair, out: &str, extra: &[&str]) -> Running {
    let listen = format!("10.77.0.2:{PORT}");
    let mut args = vec![
        "zcopy",
        "recv",
        "--listen",
        &listen,
        "-o",
        out,
        "--accept-timeout",
        "20",
        "--json",
    ];
    args.extend_from_slice(extra);
    let mut rx = spawn_in(&p.ns_b, &args);
    rx.wait_ready();
    rx
}

#[test]
fn zero_copy_send_into_zero_copy_receive_is_intact_and_maps_pages() {
    zero_copy_both_ends("zcz", &[]);
}

#[test]
fn io_uring_zero_copy_send_into_zero_copy_receive_is_intact_and_maps_pages() {
    zero_copy_both_ends("zcu", &["--io-uring"]);
}

/// A file from a zero-copy `send` (with `extra` options) into a zero-copy `recv`.
fn zero_copy_both_ends(tag: &str, extra: &[&str]) {
    let p = link(tag);
    let dir = TempDir::new(tag);
    let (file, sum) = random_file(&dir, "in.bin", 24 << 20);
    let out = dir.path("out.bin");
    let listen = format!("10.77.0.2:{PORT}");
    let rx = receiver_into(&p, &out);
    let mut args = vec![
        "zcopy",
        "send",
        "--connect",
        &listen,
        "--file",
        &file,
        "--json",
    ];
    args.extend_from_slice(extra);
    let tx = run_json(&p.ns_a, &args);
    let (r, _) = rx.finish();
    let size = 24u64 << 20;
    assert_eq!(sha256(&out), sum, "the file arrived changed");
    assert_eq!(
        (tx["bytes"].as_u64(), r["bytes"].as_u64()),
        (Some(size), Some(size)),
        "{tx}\n{r}"
    );
    assert_eq!(tx["zerocopy"], true);
    let api = if extra.contains(&"--io-uring") {
        "io_uring"
    } else {
        "syscalls"
    };
    assert_eq!(tx["api"], api, "{tx}");
    let calls = tx["calls"].as_u64().unwrap();
    let completed =
        tx["completed_zerocopy"].as_u64().unwrap() + tx["completed_copied"].as_u64().unwrap();
    assert_eq!(completed, calls, "a completion for every send: {tx}");
    assert_eq!(
        r["mss"].as_u64(),
        Some(4096),
        "the receiver asked for one page a segment: {r}"
    );
    let (mapped, copied) = (
        r["mapped_bytes"].as_u64().unwrap(),
        r["copied_bytes"].as_u64().unwrap(),
    );
    assert_eq!(mapped + copied, size, "{r}");
    assert!(mapped > 0 && mapped % 4096 == 0, "whole pages mapped: {r}");
}

#[test]
fn an_ordinary_tcp_sender_into_zero_copy_receive_is_intact() {
    let p = link("zcp");
    let dir = TempDir::new("zcp");
    let (file, sum) = random_file(&dir, "in.bin", 5_000_003);
    let out = dir.path("out.bin");
    let rx = receiver_into(&p, &out);
    python_in(
        &p.ns_a,
        &format!(
            "import socket\nc=socket.create_connection(('10.77.0.2', {PORT}), timeout=20)\n\
             c.sendall(open('{file}','rb').read()); c.close()"
        ),
    );
    let (r, _) = rx.finish();
    assert_eq!(sha256(&out), sum, "the file arrived changed");
    assert_eq!(r["bytes"].as_u64(), Some(5_000_003), "{r}");
    assert_eq!(
        r["mapped_bytes"].as_u64().unwrap() + r["copied_bytes"].as_u64().unwrap(),
        5_000_003,
        "{r}"
    );
}

#[test]
fn zero_copy_send_into_an_ordinary_tcp_receiver_is_intact() {
    let p = link("zcs");
    let dir = TempDir::new("zcs");
    let (file, sum) = random_file(&dir, "in.bin", 7_340_033);
    for extra in [&[][..], &["--io-uring"], &["--io-uring", "--copy"]] {
        send_to_python(&p, &file, &sum, extra);
    }
}

/// A Python receiver in B on PORT that prints "listening", then, at the stream's end, the
/// bytes it got and their SHA-256: it, and its lines.
fn hashing_receiver(
    p: &NetPair,
) -> (
    std::process::Child,
    std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
) {
    python_server(
        &p.ns_b,
        &format!(
            "import socket,hashlib\nl=socket.socket(); l.bind(('10.77.0.2', {PORT})); l.listen(1)\n\
             print('listening', flush=True)\nc,_=l.accept(); h=hashlib.sha256(); n=0\n\
             while True:\n  b=c.recv(1<<20)\n  if not b: break\n  h.update(b); n+=len(b)\n\
             print(n, h.hexdigest(), flush=True)"
        ),
    )
}

/// `file` (SHA-256 `sum`) sent by `zcopy send` with `extra` options, 1 MiB a send, to a
/// Python receiver that counts and hashes what it gets.
fn send_to_python(p: &NetPair, file: &str, sum: &str, extra: &[&str]) {
    let (mut server, mut lines) = hashing_receiver(p);
    let connect = format!("10.77.0.2:{PORT}");
    let mut args = vec![
        "zcopy",
        "send",
        "--connect",
        &connect,
        "--file",
        file,
        "--size",
        "1M",
        "--json",
    ];
    args.extend_from_slice(extra);
    let tx = run_json(&p.ns_a, &args);
    let got = lines.next().unwrap().unwrap();
    assert!(server.wait().unwrap().success());
    assert_eq!(
        got,
        format!("7340033 {sum}"),
        "bytes and SHA-256 at the receiver, {extra:?}"
    );
    assert_eq!(tx["bytes"].as_u64(), Some(7_340_033), "{tx}");
    assert_eq!(tx["size"].as_u64(), Some(1 << 20), "{tx}");
}

#[test]
fn copy_mode_both_ends_counts_no_zero_copy() {
    let p = link("zcc");
    let listen = format!("10.77.0.2:{PORT}");
    let mut rx = spawn_in(
        &p.ns_b,
        &[
            "zcopy",
            "recv",
            "--listen",
            &listen,
            "--copy",
            "--accept-timeout",
            "20",
            "--json",
        ],
    );
    rx.wait_ready();
    let tx = run_json(
        &p.ns_a,
        &[
            "zcopy",
            "send",
            "--connect",
            &listen,
            "--copy",
            "--bytes",
            "3M",
            "--json",
            "-q",
        ],
    );
    let (r, _) = rx.finish();
    assert_eq!(
        (tx["bytes"].as_u64(), tx["notices"].as_u64()),
        (Some(3 << 20), Some(0)),
        "{tx}"
    );
    assert_eq!(
        (
            r["bytes"].as_u64(),
            r["mapped_bytes"].as_u64(),
            r["zc_calls"].as_u64()
        ),
        (Some(3 << 20), Some(0), Some(0)),
        "{r}"
    );
}

/// A peer that takes a megabyte and resets the connection: send says what it sent, in its
/// summary and in --json with the error, then fails with the reason.
#[test]
fn a_reset_connection_still_gets_its_summary() {
    let p = link("zr");
    let (mut server, _) = python_server(
        &p.ns_b,
        &format!(
            "import socket,struct\nl=socket.socket(); l.bind(('10.77.0.2', {PORT})); \
             l.listen(1)\nprint('listening', flush=True)\nc,_=l.accept(); n=0\n\
             while n < 1<<20:\n  n+=len(c.recv(1<<20))\n\
             c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack('ii', 1, 0))\n\
             c.close()"
        ),
    );
    let connect = format!("10.77.0.2:{PORT}");
    let out = run_in(
        &p.ns_a,
        &[
            "zcopy",
            "send",
            "--connect",
            &connect,
            "--duration",
            "20",
            "--json",
        ],
    );
    assert!(server.wait().unwrap().success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let j: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("no summary ({e}): {err}"));
    assert!(j["bytes"].as_u64().unwrap() >= 1 << 20, "{j}");
    let error = j["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("send to 10.77.0.2")
            && (error.contains("reset by peer") || error.contains("Broken pipe")),
        "{j}"
    );
    assert!(err.contains("error: send to 10.77.0.2"), "{err}");
}

/// A sender that pauses (a retransmission takes 200 ms, a slow disk longer) is waited for,
/// with copying reads as with zero-copy receive: copying reads failed "Resource temporarily
/// unavailable" when their 100 ms receive timeout ran out, and removed the file.
#[test]
fn a_sender_that_pauses_is_waited_for() {
    let p = link("zcw");
    let dir = TempDir::new("zcw");
    for extra in [&["--copy"][..], &[]] {
        let out = dir.path("out.bin");
        let rx = receiver_into_with(&p, &out, extra);
        python_in(
            &p.ns_a,
            &format!(
                "import socket,time\nc=socket.create_connection(('10.77.0.2', {PORT}), \
                 timeout=20)\nc.sendall(b'a'*1000); time.sleep(0.5); c.sendall(b'b'*2000)\n\
                 c.close()"
            ),
        );
        let (r, _) = rx.finish();
        assert_eq!(r["bytes"].as_u64(), Some(3000), "{extra:?}: {r}");
        let got = std::fs::read(&out).unwrap();
        assert_eq!(
            got,
            [vec![b'a'; 1000], vec![b'b'; 2000]].concat(),
            "{extra:?}"
        );
    }
}

/// `--file` of a pipe (its length says 0) is sent to its end; it sent nothing, with
/// success.
#[test]
fn a_file_read_from_a_pipe_is_sent_whole() {
    let p = link("zcf");
    let dir = TempDir::new("zcf");
    let (file, sum) = random_file(&dir, "in.bin", 3_000_001);
    let (mut server, mut lines) = hashing_receiver(&p);
    let command = format!(
        "cat {file} | {} zcopy send --connect 10.77.0.2:{PORT} --file /dev/stdin --json -q",
        wirespeed()
    );
    let out = must(&["ip", "netns", "exec", &p.ns_a, "sh", "-c", &command]);
    let tx: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(tx["bytes"].as_u64(), Some(3_000_001), "{tx}");
    assert_eq!(lines.next().unwrap().unwrap(), format!("3000001 {sum}"));
    assert!(server.wait().unwrap().success());
}

/// A process without CAP_IPC_LOCK whose sends are larger than its locked-memory limit: the
/// kernel refuses to pin every one (ENOBUFS) and no notice will ever come. send says so at
/// once; it waited 10 s and said "no progress (0 zero-copy sends not completed)".
#[test]
fn sends_over_the_locked_memory_limit_are_named_at_once() {
    let p = link("zcm");
    let (mut server, _) = python_server(
        &p.ns_b,
        &format!(
            "import socket\nl=socket.socket(); l.bind(('10.77.0.2', {PORT})); l.listen(1)\n\
             print('listening', flush=True)\nc,_=l.accept()\nwhile c.recv(1<<20): pass"
        ),
    );
    let connect = format!("10.77.0.2:{PORT}");
    let started = std::time::Instant::now();
    let out = std::process::Command::new("ip")
        .args(["netns", "exec", &p.ns_a, "prlimit", "--memlock=65536:65536"])
        .args([
            "setpriv",
            "--inh-caps=-ipc_lock",
            "--bounding-set=-ipc_lock",
        ])
        .args([wirespeed(), "zcopy", "send", "--connect", &connect])
        .args(["--size", "1M", "--bytes", "4M", "--json", "-q"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the kernel will not pin a 1048576-byte send (ENOBUFS with none in flight)")
            && err.contains("ulimit -l"),
        "{err}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{err}"
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (j["bytes"].as_u64(), j["enobufs"].as_u64()),
        (Some(0), Some(1)),
        "{j}"
    );
    assert!(server.wait().unwrap().success());
}

#[test]
fn bad_input_fails_before_connecting() {
    let dir = TempDir::new("zcb");
    for (args, says) in [
        (
            vec!["send", "--connect", "127.0.0.1:9", "--size", "0"],
            "--size 0",
        ),
        (
            vec!["send", "--connect", "127.0.0.1:9", "--size", "64Q"],
            "not a byte count",
        ),
        (
            vec!["send", "--connect", "nowhere", "--bytes", "1K"],
            "--connect nowhere",
        ),
        (
            vec![
                "send",
                "--connect",
                "127.0.0.1:9",
                "--file",
                "/nonexistent/x",
            ],
            "--file /nonexistent/x",
        ),
        (
            vec!["send", "--connect", "127.0.0.1:9", "--buffers", "0"],
            "--buffers 0",
        ),
        (
            vec!["send", "--connect", "127.0.0.1:9", "--duration", "0"],
            "--duration 0: must be more than 0 seconds",
        ),
        (
            vec!["recv", "--listen", "9", "--accept-timeout", "0"],
            "--accept-timeout 0: must be more than 0 seconds",
        ),
        (
            vec!["recv", "--listen", "9", "--window", "1K"],
            "--window 1024",
        ),
        (vec!["recv", "--listen", "9", "--mss", "5"], "--mss 5"),
    ] {
        let mut full = vec!["zcopy"];
        full.extend(&args);
        let out = std::process::Command::new(wirespeed())
            .args(&full)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{full:?} succeeded");
        assert!(err.contains(says), "{full:?}: {err}");
    }
    // Nothing listens there: the error names the address.
    let out = std::process::Command::new(wirespeed())
        .args(["zcopy", "send", "--connect", "127.0.0.1:1", "--bytes", "1K"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("connect to 127.0.0.1:1"));
    // A receiver stopped before any connection leaves no output file behind.
    let out_file = dir.path("never.bin");
    let mut rx = spawn(&["zcopy", "recv", "--listen", "127.0.0.1:0", "-o", &out_file]);
    rx.wait_ready();
    must(&["kill", "-INT", &rx.pid().to_string()]);
    let (code, _, log) = rx.exit();
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("stopped before a connection came"), "{log}");
    assert!(!exists(&out_file), "output file left behind");
}
