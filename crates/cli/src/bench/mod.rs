//! `wirespeed bench`: the seeds' rxdrop / txpush / l2fwd benchmarks and the in-kernel
//! xdpdrop ceiling (the AF_PACKET V4 paper's tpbench, the kernel's xdpsock).

mod l2fwd;
mod l2fwd_two_ports;
mod report;
mod rxdrop;
mod threaded;
mod txpush;
mod verify;
mod xdpdrop;

use std::net::Ipv4Addr;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};
use wirespeed_packet::{MacAddr, UdpTemplate};
use wirespeed_port::{Backend, PortOptions, PortSpec};

pub use crate::args::engine::Engine;
use crate::args::port_flags::PortFlags;
use crate::run::port_mac::port_mac;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Receive and drop every packet (counts what arrives).
    Rxdrop,
    /// Send packets as fast as the port takes them.
    Txpush,
    /// Swap the MAC addresses and send each packet back out the port it came in on.
    L2fwd,
    /// Drop every packet in the kernel with our XDP program: the ceiling for a receiver.
    Xdpdrop,
}

/// Options of `wirespeed bench`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  wirespeed bench rxdrop --port xdp:veth1 --duration 10\n  \
wirespeed bench rxdrop --port xdp:eth0@all --cpus 2-5 --json\n  \
wirespeed bench txpush --port xdp:veth0 --count 100000 --size 64\n  \
wirespeed bench txpush --port xdp:veth0 --engine kernel --duration 5\n  \
wirespeed bench l2fwd --port packet:veth1 --json\n  \
wirespeed bench xdpdrop --port xdp:veth1 --duration 10"
)]
pub struct BenchArgs {
    /// What to measure.
    #[arg(value_enum)]
    pub mode: Mode,
    /// The port: xdp:IFACE[@QUEUE] (AF_XDP on one queue, default 0), xdp:IFACE@all (every
    /// receive queue), xdp:IFACE@FIRST-LAST (those queues), packet:IFACE (AF_PACKET TPACKET_V3), tap:NAME (a tap device: the
    /// host's own stack), pipe:NAME (shared memory with the process at its other end) or
    /// pcap:FILE (a capture file, replayed to its end as fast as taken, or at its recorded
    /// pace with pcap:FILE,pace=1 (2: twice as fast); - is standard input or output;
    /// l2fwd: pcap:rx=IN,tx=OUT).
    #[arg(long)]
    pub port: String,
    /// l2fwd: forward between --port and this port, both ways, frames unchanged (on two
    /// xdp: ports one UMEM is shared, so a packet moves by descriptor, never copied).
    #[arg(long, value_name = "SPEC")]
    pub peer_port: Option<String>,
    /// Stop after this many seconds (default 10, or until --count is reached).
    #[arg(long)]
    pub duration: Option<f64>,
    /// txpush: send exactly N packets, then exit. rxdrop/l2fwd: stop after N packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// txpush: frame size on the wire in bytes, FCS included (64 to 1518).
    #[arg(long, default_value_t = 64)]
    pub size: u32,
    /// txpush engine.
    #[arg(long, value_enum, default_value_t = Engine::Socket)]
    pub engine: Engine,
    /// Print one JSON object with the results on stdout at the end.
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "ADDR", help = crate::run::metrics::HELP)]
    pub metrics: Option<String>,
    /// No live line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// Batch, ring and frame sizes, XDP mode (the same flags as gen, recv and switch).
    #[command(flatten)]
    pub port_flags: PortFlags,
    #[command(flatten)]
    pub live: crate::args::cpus::LiveFlags,
    /// rxdrop: check every packet against the txpush frame of its sequence number (same
    /// --size and address flags as the sender; the source MAC is checked only if --src-mac
    /// is given) and report lost, duplicate and corrupt ones; exit status 1 when any was
    /// corrupt (lost ones are a benchmark's drops, counted by reason).
    #[arg(long)]
    pub verify: bool,
    /// rxdrop --verify: the number of packets the sender sent (to count the missing ones).
    #[arg(long)]
    pub expect: Option<u64>,
    /// txpush: source MAC (default: the interface's own).
    #[arg(long)]
    pub src_mac: Option<MacAddr>,
    /// txpush: destination MAC.
    #[arg(long, default_value = "02:00:00:00:00:02")]
    pub dst_mac: MacAddr,
    /// txpush: source IPv4 address.
    #[arg(long, default_value = "10.0.0.1")]
    pub src_ip: Ipv4Addr,
    /// txpush: destination IPv4 address.
    #[arg(long, default_value = "10.0.0.2")]
    pub dst_ip: Ipv4Addr,
    /// txpush: UDP source port.
    #[arg(long, default_value_t = 9)]
    pub src_port: u16,
    /// txpush: UDP destination port.
    #[arg(long, default_value_t = 9)]
    pub dst_port: u16,
}

impl BenchArgs {
    fn spec(&self) -> anyhow::Result<PortSpec> {
        Ok(self.port.parse::<PortSpec>()?)
    }

    fn duration(&self) -> Option<Duration> {
        match (self.duration, self.count) {
            (Some(d), _) => Some(Duration::from_secs_f64(d)),
            (None, Some(_)) => None,
            (None, None) => Some(Duration::from_secs(10)),
        }
    }

    fn port_options(&self, ifaces: &[&str], rx: bool, tx: bool) -> PortOptions {
        PortOptions {
            // rxdrop and l2fwd take packets larger than a frame as chains.
            multi_buffer: matches!(self.mode, Mode::Rxdrop | Mode::L2fwd),
            ..self.port_flags.options(ifaces, rx, tx)
        }
    }

    /// The frame txpush sends and rxdrop --verify expects.
    fn template(&self, spec: &PortSpec) -> anyhow::Result<UdpTemplate> {
        let src_mac = match self.src_mac {
            Some(m) => m,
            None => port_mac(spec)?,
        };
        Ok(UdpTemplate {
            src_mac,
            dst_mac: self.dst_mac,
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
            frame_len: (self.size - 4) as usize,
            generator: 1,
        })
    }

    /// Checks what clap cannot, before anything is created.
    fn validate(&self) -> anyhow::Result<()> {
        if let Some(d) = self.duration
            && !(d > 0.0 && d <= 86400.0)
        {
            bail!("--duration {d}: must be more than 0 and at most 86400 seconds");
        }
        if self.count == Some(0) {
            bail!("--count 0: must be at least 1");
        }
        self.port_flags.validate()?;
        // Left to us, the frame size holds a full frame of the MTU: check an explicit one.
        let frame_size = self.port_flags.frame_size.unwrap_or(4096);
        if !(64..=1518).contains(&self.size) || self.size - 4 > frame_size - 256 {
            bail!(
                "--size {}: frame size on the wire must be 64 to {}",
                self.size,
                1518.min(frame_size - 256 + 4)
            );
        }
        if self.peer_port.is_some() && self.mode != Mode::L2fwd {
            bail!("--peer-port goes with l2fwd");
        }
        if self.expect.is_some() && !self.verify {
            bail!("--expect goes with --verify");
        }
        if self.verify && self.mode != Mode::Rxdrop {
            bail!("--verify checks what rxdrop receives: it goes with rxdrop");
        }
        if self.mode == Mode::Xdpdrop {
            if self.port.starts_with("xdp:") && self.port.contains('@') {
                bail!(
                    "--port {}: xdpdrop drops and counts on every queue of the interface: \
                     leave out @QUEUE",
                    self.port
                );
            }
            if let Some(list) = &self.live.cpus {
                bail!(
                    "--cpus {list}: xdpdrop runs in the kernel, on the CPUs the packets come \
                     in on: leave it out"
                );
            }
        }
        match (&self.live.cpus, self.mode) {
            (Some(list), Mode::Rxdrop | Mode::L2fwd) if self.engine != Engine::Kernel => {
                crate::args::cpus::parse("--cpus", list)?;
                if self.count.is_some() {
                    bail!("--count goes with one thread: with --cpus, give --duration");
                }
                if self.verify {
                    bail!("--verify checks one thread's sequence numbers: leave out --cpus");
                }
                if self.peer_port.is_some() {
                    bail!("--peer-port forwards between two ports in one thread: leave out --cpus");
                }
            }
            _ => {
                self.live.cpus(self.engine == Engine::Kernel)?;
            }
        }
        Ok(())
    }
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    args.validate()?;
    let spec = args.spec()?;
    let what = format!("bench {} on {}", mode_name(args.mode), spec);
    crate::run::caps::require_for(&what, &[spec.backend])?;
    if args.mode == Mode::Xdpdrop && spec.backend != Backend::Xdp {
        bail!("bench xdpdrop runs an XDP program: use an xdp: port, not {spec}");
    }
    if args.engine == Engine::Kernel && (args.mode != Mode::Txpush || spec.backend != Backend::Xdp)
    {
        bail!("--engine kernel is for txpush on an xdp: port");
    }
    let _metrics = crate::run::metrics::start_for_meters("bench", args.metrics.as_deref())?;
    let (receives, sends) = match args.mode {
        Mode::Rxdrop => (true, false),
        Mode::Txpush => (false, true),
        Mode::L2fwd => (true, true),
        Mode::Xdpdrop => (false, false),
    };
    // A malformed peer spec is reported when l2fwd opens it.
    let peer: Option<PortSpec> = args.peer_port.as_deref().and_then(|p| p.parse().ok());
    if let Some(peer) = peer.as_ref().filter(|p| p.same_place(&spec)) {
        bail!(
            "--peer-port {peer}: {} is --port's interface too ({spec}); l2fwd between two \
             ports needs two (without --peer-port, l2fwd sends each packet back out the port \
             it came in on)",
            peer.iface
        );
    }
    let specs: Vec<&PortSpec> = std::iter::once(&spec).chain(peer.as_ref()).collect();
    let to_stderr = crate::run::report_to::check_std_streams(&specs, receives, sends)?;
    let stop = crate::run::signals::stop_flag()?;
    let threads = match (&args.live.cpus, args.mode) {
        (Some(list), Mode::Rxdrop | Mode::L2fwd) => Some(crate::args::cpus::parse("--cpus", list)?),
        _ => None,
    };
    let summary = match args.mode {
        Mode::Rxdrop | Mode::L2fwd if let Some(cpus) = &threads => {
            threaded::run(&args, &spec, cpus, &stop)?
        }
        Mode::Rxdrop => rxdrop::run(&args, &spec, &stop)?,
        Mode::Txpush => txpush::run(&args, &spec, &stop)?,
        Mode::L2fwd => l2fwd::run(&args, &spec, &stop)?,
        Mode::Xdpdrop => xdpdrop::run(&args, &spec, &stop)?,
    };
    summary.print(args.json, args.quiet, to_stderr);
    if let Some(e) = &summary.error {
        bail!("{e}");
    }
    if let Some(v) = summary.verify.as_ref().filter(|v| v.corrupt > 0) {
        bail!(
            "--verify: {} of {} packets received were corrupt",
            v.corrupt,
            v.received
        );
    }
    if let Some(audit) = summary.frames
        && !audit.balanced()
    {
        bail!(
            "frame audit failed: {} frames accounted of {}",
            audit.accounted(),
            audit.total
        );
    }
    Ok(())
}

pub fn mode_name(m: Mode) -> &'static str {
    match m {
        Mode::Rxdrop => "rxdrop",
        Mode::Txpush => "txpush",
        Mode::L2fwd => "l2fwd",
        Mode::Xdpdrop => "xdpdrop",
    }
}

/// Announces that set-up is done and the measured loop starts (scripts and tests wait for it).
pub fn announce_ready(mode: Mode, info: &wirespeed_port::PortInfo, batch: u32) {
    let tool = format!("bench {}", mode_name(mode));
    crate::run::ready::announce_ready(&tool, info, batch, None);
}
