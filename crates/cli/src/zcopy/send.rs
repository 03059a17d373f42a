//! `wirespeed zcopy send`: connects, sends over TCP the way asked (copying or zero-copy), reports.

use std::fs::File;
use std::io::Read;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde::Serialize;
use wirespeed_zcopy::{SendApi, Sender, ZcopyError};

use super::live_line::{Live, cpu_ms_per_gb, gbps};

/// How long `--connect` waits for the connection (its help says so).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Options of `wirespeed zcopy send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Where to send: HOST:PORT or [IPV6]:PORT. A connection not made within 5 seconds
    /// (nobody answers there) ends the run with an error.
    #[arg(long, value_name = "HOST:PORT")]
    pub connect: String,
    /// Ordinary copying sends instead of zero-copy ones (the baseline).
    #[arg(long)]
    pub copy: bool,
    /// Send through io_uring: IORING_OP_SEND_ZC from buffers registered with the ring once
    /// (IORING_OP_SEND with --copy), instead of send() with MSG_ZEROCOPY.
    #[arg(long)]
    pub io_uring: bool,
    /// Bytes per send() call (K, M suffixes: KiB, MiB).
    #[arg(long, default_value = "64K", value_parser = super::parse_bytes)]
    pub size: u64,
    /// Buffers the sender cycles through: with MSG_ZEROCOPY a buffer is written again only
    /// after the kernel has completed every send of it.
    #[arg(long, default_value_t = 16)]
    pub buffers: usize,
    /// Send the contents of this file once, then end.
    #[arg(long, conflicts_with_all = ["bytes", "duration"])]
    pub file: Option<String>,
    /// Send this many bytes of a generated pattern, then end (K, M, G suffixes: KiB, MiB, GiB).
    #[arg(long, value_parser = super::parse_bytes, conflicts_with = "duration")]
    pub bytes: Option<u64>,
    /// Send for this many seconds (the default, 10, when neither --bytes nor --file is given).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Print one JSON object with the results on stdout at the end.
    #[arg(long)]
    pub json: bool,
    /// No live line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Serialize)]
struct SendSummary {
    mode: &'static str,
    zerocopy: bool,
    /// How sends reach the kernel: "syscalls" or "io_uring".
    api: &'static str,
    connect: String,
    mss: u32,
    size: u64,
    buffers: usize,
    bytes: u64,
    seconds: f64,
    gbps: f64,
    calls: u64,
    /// Zero-copy sends the kernel completed without copying, and ones it copied after all.
    completed_zerocopy: u64,
    completed_copied: u64,
    notices: u64,
    buffer_waits: u64,
    enobufs: u64,
    cpu_user_s: f64,
    cpu_system_s: f64,
    cpu_ms_per_gb: f64,
    interrupted: bool,
    /// What ended the run, when a failure did (the peer reset the connection, say): the
    /// figures above are what was sent until then.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// Below this a send, MSG_ZEROCOPY costs more than it saves (the kernel's msg_zerocopy
/// documentation: "around 10 KB"): said at the start.
const ZEROCOPY_WORTH_IT: u64 = 10_000;

pub fn run(args: SendArgs) -> anyhow::Result<()> {
    check(&args)?;
    let addr = super::resolve("--connect", &args.connect, false)?;
    let mut file = match &args.file {
        Some(path) => Some(File::open(path).with_context(|| format!("--file {path}"))?),
        None => None,
    };
    // A file is sent to its end, however long: a pipe, /dev/stdin or a /proc file says
    // length 0 (and nothing was sent, with success).
    let limit = match (&file, args.bytes) {
        (Some(_), _) => u64::MAX,
        (None, Some(b)) => b,
        (None, None) => u64::MAX,
    };
    let duration = match (&file, args.bytes, args.duration) {
        (_, _, Some(d)) => Some(Duration::from_secs_f64(d)),
        (None, None, None) => Some(Duration::from_secs(10)),
        _ => None,
    };
    let stop = crate::run::signals::stop_flag()?;
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .with_context(|| format!("connect to {addr}"))?;
    let mss = wirespeed_zcopy::mss(&stream)?;
    let zerocopy = !args.copy;
    if zerocopy {
        // Small zero-copy sends held back by Nagle wait for an acknowledgement each, and
        // the buffers they pin with them: about 30 ms a buffer, a thousand times slower.
        stream.set_nodelay(true).context("TCP_NODELAY")?;
        if args.size < ZEROCOPY_WORTH_IT {
            eprintln!(
                "wirespeed zcopy send: note: --size {}: zero-copy pays off above about 10 KB \
                 a send (each send pins its pages and waits for the kernel's notice); below \
                 it, --copy is faster",
                args.size
            );
        }
    }
    let api = match args.io_uring {
        true => SendApi::IoUring,
        false => SendApi::Syscalls,
    };
    let mut tx = Sender::new(
        stream,
        zerocopy,
        api,
        args.buffers,
        args.size as usize,
        stop,
    )
    .context("set up the sender")?;
    announce_ready(&args, addr, api, zerocopy, mss);
    let mut live = Live::new("send", args.quiet);
    let (interrupted, failed) =
        match send(&args, &mut tx, file.as_mut(), limit, duration, &mut live) {
            Ok(()) => (false, None),
            Err(e) if matches!(e.downcast_ref::<ZcopyError>(), Some(ZcopyError::Stopped)) => {
                (true, None)
            }
            Err(e) => (false, Some(e.context(format!("send to {addr}")))),
        };
    // Ending the stream can fail too (the peer gone, the last notices lost): said after
    // the summary, as a failure while sending is.
    let failed = match failed {
        None => tx
            .finish()
            .with_context(|| format!("end the stream to {addr}"))
            .err(),
        failed => failed,
    };
    let seconds = live.elapsed().as_secs_f64();
    let (user, system) = live.cpu_seconds();
    let st = tx.stats();
    let s = SendSummary {
        mode: "send",
        zerocopy,
        api: match api {
            SendApi::Syscalls => "syscalls",
            SendApi::IoUring => "io_uring",
        },
        connect: addr.to_string(),
        mss,
        size: args.size,
        buffers: args.buffers,
        bytes: st.bytes,
        seconds,
        gbps: gbps(st.bytes, seconds),
        calls: st.calls,
        completed_zerocopy: st.zerocopied,
        completed_copied: st.copied,
        notices: st.notices,
        buffer_waits: st.buffer_waits,
        enobufs: st.enobufs,
        cpu_user_s: user,
        cpu_system_s: system,
        cpu_ms_per_gb: cpu_ms_per_gb(user + system, st.bytes),
        interrupted,
        error: failed.as_ref().map(crate::run::error_text::error_text),
    };
    // A run a failure ended still says what it sent, then the failure.
    print(&s, args.json)?;
    match failed {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The flags' values in range.
fn check(args: &SendArgs) -> anyhow::Result<()> {
    if args.size == 0 || args.size > 16 << 20 {
        bail!("--size {}: must be 1 byte to 16M", args.size);
    }
    if !(1..=1024).contains(&args.buffers) {
        bail!("--buffers {}: must be 1 to 1024", args.buffers);
    }
    if args.bytes == Some(0) {
        bail!("--bytes 0: must be at least 1");
    }
    crate::run::meter::check_seconds("--duration", args.duration)
}

/// Says set-up is done (scripts and tests wait for the word "ready").
fn announce_ready(args: &SendArgs, addr: SocketAddr, api: SendApi, zerocopy: bool, mss: u32) {
    let how = match (api, zerocopy) {
        (SendApi::Syscalls, true) => "MSG_ZEROCOPY",
        (SendApi::Syscalls, false) => "copying",
        (SendApi::IoUring, true) => "io_uring SEND_ZC, registered buffers",
        (SendApi::IoUring, false) => "io_uring SEND, copying",
    };
    eprintln!(
        "zcopy send ready to {addr} ({how}, {}-byte sends, {} buffers, mss {mss})",
        args.size, args.buffers
    );
}

/// Sends `--file`, or a pattern, in `--size` pieces until `limit` bytes, the duration or a
/// stop request (a `ZcopyError::Stopped`), showing the live line.
fn send(
    args: &SendArgs,
    tx: &mut Sender,
    mut file: Option<&mut File>,
    limit: u64,
    duration: Option<Duration>,
    live: &mut Live,
) -> anyhow::Result<()> {
    let size = args.size as usize;
    let (mut sent, mut filled) = (0u64, 0usize);
    while sent < limit && duration.is_none_or(|d| live.elapsed() < d) {
        let want = (limit - sent).min(size as u64) as usize;
        let buf = tx.buffer()?;
        let len = match file.as_deref_mut() {
            Some(f) => read_full(f, &mut buf[..want]).context("read --file")?,
            None => {
                // The pattern is written once per buffer: later sends reuse it as it is.
                if filled < args.buffers {
                    fill_pattern(buf);
                    filled += 1;
                }
                want
            }
        };
        if len == 0 {
            break;
        }
        tx.send(len)?;
        sent += len as u64;
        live.tick(sent, || status(tx));
    }
    Ok(())
}

/// The summary: a line (two with zero-copy) for people, or one JSON object with `--json`.
fn print(s: &SendSummary, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string(s)?);
    } else {
        println!(
            "zcopy send to {}: {} bytes in {:.2}s = {:.2} Gbit/s, {} sends; CPU {:.2}s user {:.2}s system = {:.0} ms/GB",
            s.connect,
            s.bytes,
            s.seconds,
            s.gbps,
            s.calls,
            s.cpu_user_s,
            s.cpu_system_s,
            s.cpu_ms_per_gb
        );
        if s.zerocopy {
            println!(
                "completions: {} zero-copy, {} copied by the kernel ({} notices); waited for a buffer {} times, ENOBUFS {} times",
                s.completed_zerocopy, s.completed_copied, s.notices, s.buffer_waits, s.enobufs
            );
        }
    }
    Ok(())
}

fn status(tx: &Sender) -> String {
    let st = tx.stats();
    if st.notices == 0 {
        return String::new();
    }
    format!(
        "completed: {} zero-copy, {} copied",
        st.zerocopied, st.copied
    )
}

/// Reads until `buf` is full or the file ends; returns the bytes read.
fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Bytes that are not all alike (a receiver could check them), cheap to make.
fn fill_pattern(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_be_bytes()[0];
    }
}
