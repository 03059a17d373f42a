//! pcap-run's broker: a small process that keeps pcap-run's privileges after the program
//! replaced it, to attach our redirect program for the program's `xdp:` devices and hand
//! it over (wirespeed_xdp::handover). dumpcap needs it: it gives up CAP_BPF before it opens
//! a device. The broker answers the program and its descendants only, and ends with the
//! program: PR_SET_PDEATHSIG, and a look at its parent ten times a second, since a program
//! that gave up root (tcpdump) may not signal a root process, so the kernel drops that
//! signal.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};
use clap::Args;
use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
use wirespeed_xdp::handover::{Request, prepare, send_answer};

/// How often the broker looks whether the program is still there.
const PARENT_CHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// Options of the hidden `wirespeed pcap-broker`.
#[derive(Debug, Args)]
pub struct BrokerArgs {
    /// The process whose descendants (itself included) may ask.
    #[arg(long)]
    for_pid: u32,
    /// The abstract socket name to listen on.
    #[arg(long)]
    name: String,
}

/// Starts a broker for this process (about to become the program), and returns the name
/// it listens on once it does.
pub fn start() -> anyhow::Result<String> {
    let pid = std::process::id();
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let name = format!("wirespeed-pcap-{pid}-{nanos}");
    let exe = std::env::current_exe().context("find this executable")?;
    let mut child = Command::new(exe)
        .args([
            "pcap-broker",
            "--for-pid",
            &pid.to_string(),
            "--name",
            &name,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .context("start the broker")?;
    let mut said = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut said);
    }
    if said.trim() != "ready" {
        let _ = child.kill();
        let _ = child.wait();
        bail!("the broker did not start");
    }
    Ok(name)
}

pub fn run(args: BrokerArgs) -> anyhow::Result<()> {
    // Gone with the program, however it ends.
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGTERM)
        .context("PR_SET_PDEATHSIG")?;
    let orphaned = move || nix::unistd::getppid().as_raw() as u32 != args.for_pid;
    if orphaned() {
        return Ok(());
    }
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(PARENT_CHECK);
            if orphaned() {
                std::process::exit(0);
            }
        }
    });
    let addr = SocketAddr::from_abstract_name(args.name.as_bytes()).context("socket name")?;
    let listener =
        UnixListener::bind_addr(&addr).with_context(|| format!("listen on {}", args.name))?;
    println!("ready");
    std::io::stdout().flush()?;
    for stream in listener.incoming().flatten() {
        // A refusal goes back to the asker, whose program reports it.
        let _ = send_answer(&stream, answer(&stream, args.for_pid));
    }
    Ok(())
}

/// Reads one request and prepares the handover, for a process of the program's.
fn answer(stream: &UnixStream, for_pid: u32) -> Result<wirespeed_xdp::handover::Handover, String> {
    let peer = getsockopt(stream, PeerCredentials).map_err(|e| format!("SO_PEERCRED: {e}"))?;
    // Anyone in the namespace can connect to an abstract socket. The user must be the
    // broker's own (root: a program asks while it still is, or keeps root's id, as
    // dumpcap does), so another user cannot borrow our privileges, even through a pid
    // reused after the check below.
    // Someone else's asking is said here too: that asker's program is not the user's.
    let stranger = |text: String| {
        eprintln!("wirespeed pcap-run: {text}");
        Err(text)
    };
    if peer.uid() != nix::unistd::geteuid().as_raw() {
        return stranger(format!(
            "process {} of user {} is not pcap-run's user",
            peer.pid(),
            peer.uid()
        ));
    }
    if !descends_from(peer.pid() as u32, for_pid) {
        return stranger(format!(
            "process {} is not the program pcap-run ran ({for_pid}) or its descendant",
            peer.pid()
        ));
    }
    // One stalled asker must not hold up the others.
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(2)))
        .map_err(|e| format!("read timeout: {e}"))?;
    let mut line = String::new();
    BufReader::new(stream.take(256))
        .read_line(&mut line)
        .map_err(|e| format!("read a request: {e}"))?;
    let request = Request::parse(&line)?;
    prepare(&request.iface, request.mode).map_err(|e| e.to_string())
}

/// True when `pid` is `ancestor` or one of its descendants (by /proc's parent links).
fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..64 {
        if pid == ancestor {
            return true;
        }
        match parent_of(pid) {
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}

/// The parent's pid from /proc/PID/stat (its fourth field, after the name in parentheses).
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_descends_from_its_parent_and_not_from_a_child() {
        let me = std::process::id();
        let parent = nix::unistd::getppid().as_raw() as u32;
        assert!(descends_from(me, me));
        assert!(descends_from(me, parent));
        assert!(!descends_from(parent, me));
        assert_eq!(parent_of(me), Some(parent));
    }
}
