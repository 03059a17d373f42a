//! `wirespeed zcopy recv`: accepts one TCP connection, receives the way asked, reports.

use std::fs::File;
use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use wirespeed_zcopy::{Chunk, PAGE_MSS, Receiver, ZcopyError};

use super::live_line::{Live, cpu_ms_per_gb, gbps};

/// Options of `wirespeed zcopy recv`.
#[derive(Debug, Args)]
pub struct RecvArgs {
    /// Where to listen: PORT (every IPv4 address), HOST:PORT or [IPV6]:PORT.
    #[arg(long, value_name = "[HOST:]PORT")]
    pub listen: String,
    /// Ordinary copying reads instead of TCP zero-copy receive (the baseline).
    #[arg(long)]
    pub copy: bool,
    /// The zero-copy window: how much one call may map (K, M suffixes: KiB, MiB; whole pages).
    #[arg(long, default_value = "2M", value_parser = super::parse_bytes)]
    pub window: u64,
    /// The segment size to ask the peer for (TCP_MAXSEG on the listener); 0 leaves the
    /// kernel's. Default: 4108 (one page a segment) with zero-copy receive, else 0.
    #[arg(long)]
    pub mss: Option<u32>,
    /// Write what arrives to this file (made or truncated; removed if the transfer fails or is
    /// interrupted).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<String>,
    /// Give up if no connection comes within this many seconds (default: wait until Ctrl-C).
    #[arg(long, value_name = "SECS")]
    pub accept_timeout: Option<f64>,
    /// Print one JSON object with the results on stdout at the end.
    #[arg(long)]
    pub json: bool,
    /// No live line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Serialize)]
struct RecvSummary {
    mode: &'static str,
    zerocopy: bool,
    listen: String,
    peer: String,
    /// TCP_MAXSEG of the connection: payload bytes a segment carries (what the listener
    /// asked its peer for, less the timestamp option, when the path allows it).
    mss: u32,
    bytes: u64,
    seconds: f64,
    gbps: f64,
    /// Bytes that came as mapped pages, and bytes copied.
    mapped_bytes: u64,
    copied_bytes: u64,
    mapped_share: f64,
    zc_calls: u64,
    recv_calls: u64,
    cpu_user_s: f64,
    cpu_system_s: f64,
    cpu_ms_per_gb: f64,
    interrupted: bool,
    /// What ended the run, when a failure did (the peer reset the connection, a write
    /// failed): the figures above are what was received until then.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Removes the output file unless the transfer got to its end.
struct Output {
    file: File,
    path: String,
    keep: bool,
}

impl Output {
    /// Makes (or truncates) the file at `path`.
    fn create(path: &str) -> anyhow::Result<Output> {
        Ok(Output {
            file: File::create(path).with_context(|| format!("-o {path}"))?,
            path: path.to_string(),
            keep: false,
        })
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

pub fn run(args: RecvArgs) -> anyhow::Result<()> {
    let zerocopy = !args.copy;
    let (addr, mss) = check(&args, zerocopy)?;
    let stop = crate::run::signals::stop_flag()?;
    let listener = TcpListener::bind(addr).with_context(|| format!("listen on {addr}"))?;
    if mss != 0 {
        wirespeed_zcopy::set_mss(&listener, mss).context("set the listener's segment size")?;
    }
    let mut output = args.output.as_deref().map(Output::create).transpose()?;
    listener.set_nonblocking(true).context("listener")?;
    let bound = listener.local_addr().context("listener address")?;
    announce_ready(bound, zerocopy, mss);
    let (stream, peer) = accept(&listener, bound, args.accept_timeout, &stop)?;
    stream.set_nonblocking(false).context("connection")?;
    let peer_mss = wirespeed_zcopy::mss(&stream)?;
    let window = zerocopy.then_some(args.window as usize);
    let mut rx = Receiver::new(stream, window, 256 << 10, stop).context("set up the receiver")?;
    let mut live = Live::new("recv", args.quiet);
    let (interrupted, failed) = match receive(&mut rx, output.as_mut(), &mut live, zerocopy, peer) {
        Ok(interrupted) => (interrupted, None),
        Err(e) => (false, Some(e)),
    };
    let failed = match (failed, output.as_mut()) {
        (None, Some(out)) => out
            .file
            .flush()
            .with_context(|| format!("write {}", out.path))
            .err(),
        (failed, _) => failed,
    };
    if let Some(out) = output.as_mut() {
        // An interrupted or failed transfer is not the whole stream: the file goes with it.
        out.keep = !interrupted && failed.is_none();
    }
    let seconds = live.elapsed().as_secs_f64();
    let (user, system) = live.cpu_seconds();
    let st = rx.stats();
    let s = RecvSummary {
        mode: "recv",
        zerocopy,
        listen: bound.to_string(),
        peer: peer.to_string(),
        mss: peer_mss,
        bytes: st.bytes,
        seconds,
        gbps: gbps(st.bytes, seconds),
        mapped_bytes: st.mapped,
        copied_bytes: st.copied,
        mapped_share: share(st.mapped, st.bytes),
        zc_calls: st.zc_calls,
        recv_calls: st.recv_calls,
        cpu_user_s: user,
        cpu_system_s: system,
        cpu_ms_per_gb: cpu_ms_per_gb(user + system, st.bytes),
        interrupted,
        error: failed.as_ref().map(crate::run::error_text::error_text),
    };
    // A run a failure ended still says what it received, then the failure.
    print(&s, args.json)?;
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The flags' values in range: the address to listen on and the segment size to ask for.
fn check(args: &RecvArgs, zerocopy: bool) -> anyhow::Result<(SocketAddr, u32)> {
    if zerocopy && (args.window < 4096 || args.window > 1 << 30) {
        bail!("--window {}: must be 4K to 1G", args.window);
    }
    crate::run::meter::check_seconds("--accept-timeout", args.accept_timeout)?;
    let addr = super::resolve("--listen", &args.listen, true)?;
    let mss = args.mss.unwrap_or(if zerocopy { PAGE_MSS } else { 0 });
    if mss != 0 && !(88..=32767).contains(&mss) {
        bail!("--mss {mss}: must be 88 to 32767, or 0 for the kernel's");
    }
    Ok((addr, mss))
}

/// Says set-up is done (scripts and tests wait for the word "ready").
fn announce_ready(bound: SocketAddr, zerocopy: bool, mss: u32) {
    eprintln!(
        "zcopy recv ready on {bound} ({}{})",
        if zerocopy {
            "TCP zero-copy receive"
        } else {
            "copying reads"
        },
        if mss != 0 {
            format!(", asks for mss {mss}")
        } else {
            String::new()
        }
    );
}

/// Waits for one connection, until a stop request or `--accept-timeout`.
fn accept(
    listener: &TcpListener,
    bound: SocketAddr,
    timeout: Option<f64>,
    stop: &AtomicBool,
) -> anyhow::Result<(TcpStream, SocketAddr)> {
    let waited = Instant::now();
    loop {
        match listener.accept() {
            Ok(conn) => return Ok(conn),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e).context("accept"),
        }
        if stop.load(Ordering::Relaxed) {
            bail!("stopped before a connection came");
        }
        if timeout.is_some_and(|t| waited.elapsed() > Duration::from_secs_f64(t)) {
            bail!(
                "no connection on {bound} within {} s",
                timeout.unwrap_or_default()
            );
        }
        wait_readable(listener);
    }
}

/// Receives until the peer ends the stream (false) or a stop request (true: interrupted),
/// writing what arrives to `output` and showing the live line.
fn receive(
    rx: &mut Receiver,
    mut output: Option<&mut Output>,
    live: &mut Live,
    zerocopy: bool,
    peer: SocketAddr,
) -> anyhow::Result<bool> {
    loop {
        match rx.next_chunk() {
            Ok(None) => return Ok(false),
            Ok(Some(Chunk::Idle)) => {}
            Ok(Some(Chunk::Mapped(bytes) | Chunk::Copied(bytes))) => {
                if let Some(out) = output.as_deref_mut() {
                    out.file
                        .write_all(bytes)
                        .with_context(|| format!("write {}", out.path))?;
                }
            }
            Err(ZcopyError::Stopped) => return Ok(true),
            Err(e) => return Err(e).with_context(|| format!("receive from {peer}")),
        }
        let st = rx.stats();
        live.tick(st.bytes, || {
            if zerocopy {
                format!("mapped {:.1}%", share(st.mapped, st.bytes) * 100.0)
            } else {
                String::new()
            }
        });
    }
}

/// The summary: one line for people, or one JSON object with `--json`.
fn print(s: &RecvSummary, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(s)?);
    } else {
        println!(
            "zcopy recv from {}: {} bytes in {:.2}s = {:.2} Gbit/s; {} mapped ({:.1}%), {} copied; CPU {:.2}s user {:.2}s system = {:.0} ms/GB",
            s.peer,
            s.bytes,
            s.seconds,
            s.gbps,
            s.mapped_bytes,
            s.mapped_share * 100.0,
            s.copied_bytes,
            s.cpu_user_s,
            s.cpu_system_s,
            s.cpu_ms_per_gb
        );
    }
    Ok(())
}

fn share(part: u64, whole: u64) -> f64 {
    if whole > 0 {
        part as f64 / whole as f64
    } else {
        0.0
    }
}

/// Waits up to 100 ms for a connection (so a stop request is seen soon).
fn wait_readable(listener: &TcpListener) {
    use std::os::fd::AsFd;
    let mut fds = [nix::poll::PollFd::new(
        listener.as_fd(),
        nix::poll::PollFlags::POLLIN,
    )];
    let _ = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(100u16));
}
