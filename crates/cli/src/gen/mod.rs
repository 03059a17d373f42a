//! `wirespeed gen`: a traffic generator (netmap's pkt-gen, DPDK's pktgen, xdp-trafficgen).
//! Every frame carries the test payload (generator id, sequence number, send time), so
//! `wirespeed recv` can count what was lost, duplicated or reordered, and the latency.

mod frames;
mod kernel_engine;
pub mod pacing;
pub mod rate;
mod replay;
pub mod report;
pub mod socket;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};
use wirespeed_packet::{FrameSpec, IpPair, L4Kind, MacAddr};
use wirespeed_port::{Backend, PortSpec};

use crate::args::engine::Engine;
use crate::args::port_flags::PortFlags;
use crate::run::port_mac::port_mac;
use frames::{FlowPlan, IMIX_PATTERN, SizePlan};
use rate::Rate;

/// Most flows: enough for any flow-table test, and the plan stays a counter.
pub const MAX_FLOWS: u32 = 1 << 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Proto {
    /// UDP datagrams (the default).
    Udp,
    /// TCP segments with only SYN set (the test payload rides in the SYN).
    TcpSyn,
    /// ICMP echo requests (ICMPv6 with --ipv6); flows vary the echo identifier.
    Icmp,
}

/// Options of `wirespeed gen`.
#[derive(Debug, Args)]
#[command(
    mut_arg("cpus", |a| a.help("Kernel engine: send from each CPU of this list (like 0,1 or \
0-3), with threads pinned to it, each under a generator id of its own (--generator-id, +1, \
...); default: the one CPU the command starts on. On veth give the peer as many receive \
queues as CPUs (numrxqueues N), so each CPU's frames land on a queue of their own")),
    after_help = "Frames: Ethernet [802.1Q] IPv4|IPv6 UDP|TCP-SYN|ICMP-echo, then the \
18-byte test payload (\"WS\", generator id, sequence number, send time) and filler; every \
checksum is filled.\n\n\
Engines: socket sends from user space through the port, building each frame with its own \
sequence number and timestamp. kernel (xdp: ports only) has the kernel repeat prebuilt frames \
with BPF_PROG_RUN live frames, the fastest load this host makes: one frame per size (and per \
flow, see below), sent in turn in calls of 0.1-0.5 s each, each size in proportion (IMIX \
stays 7:4:1). Its XDP program stamps every frame with the next sequence number and the send \
time, so a receiver tracks loss and latency as for the socket engine (with --cpus, each CPU \
sends its own series under generator ids --generator-id, +1, ...; --no-stamp sends the \
frames as built, about 10 % faster). With IPv4 UDP or TCP it also gives every frame its \
flow's source port and address (checksums updated), so --flows has no limit; other flows \
(IPv6, ICMP) are prebuilt, at most 64 frames in all. With --rate, the kernel sends each \
call's frames back to back: calls of 2 ms of the rate, longer where the calls' own cost \
(a few ms each) needs it, so the bursts are a few hundred frames at 20 kpps. On a \
veth, its frames reach the peer only if the peer runs an XDP program or has GRO on \
(ethtool -K PEER gro on).\n\n\
Verify at the other end with wirespeed recv: per --generator-id, packets received, lost \
(named by sequence number), duplicated, reordered, and one-way latency.\n\n\
Examples:\n  wirespeed gen --port xdp:veth0 --rate 100000 --duration 5\n  \
wirespeed gen --port xdp:veth0 --rate 500Mbit --imix --flows 1000\n  \
wirespeed gen --port packet:veth0 --proto tcp-syn --ipv6 --vlan 10 --count 1000\n  \
wirespeed gen --port xdp:veth0 --engine kernel --size 64 --duration 10\n  \
wirespeed gen --port xdp:veth0 --pcap trace.pcapng --loop 3"
)]
pub struct GenArgs {
    /// The port: xdp:IFACE[@QUEUE] (AF_XDP), packet:IFACE (AF_PACKET TPACKET_V3),
    /// tap:NAME (into the host's own stack through an existing tap device), pipe:NAME (to
    /// the process at the pipe's other end) or pcap:FILE (into a capture file: pcap when
    /// FILE ends in .pcap, else pcapng; pcap:- is pcapng on standard output, and the
    /// summary goes to standard error). Without an interface, the source MAC is
    /// 02:77:73:.. from NAME or FILE.
    #[arg(long)]
    pub port: String,
    /// Transmit engine (kernel: xdp ports, see below).
    #[arg(long, value_enum, default_value_t = Engine::Socket)]
    pub engine: Engine,
    /// Kernel engine: send the frames as built, without per-frame sequence numbers and send
    /// times (the highest rate).
    #[arg(long)]
    pub no_stamp: bool,
    /// Packets per second (100000, 2.5M, 1Mpps) or bits per second on the wire, FCS
    /// included (500Mbit, 10Gbit). Default: as fast as the port takes them. Packets go in
    /// bursts of what 1 ms of the rate holds (at most --batch), back to back: 10 kpps is
    /// 10 packets every millisecond, not one every 100 µs.
    #[arg(long, value_parser = rate::parse_rate)]
    pub rate: Option<Rate>,
    /// Send exactly N packets, then exit.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this many seconds (default: run until --count or Ctrl-C).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Frame size on the wire in bytes, FCS and VLAN tag included: 64, or a range 64-1500
    /// (uniformly random sizes, the same every run). Default: 64, or the smallest frame
    /// that holds the headers and the test payload (84 for IPv6/UDP). Up to 9000 (jumbo
    /// frames, sent as chains of frames) with the socket engine, where the interface's MTU
    /// allows; 1518 with the kernel engine.
    #[arg(long, conflicts_with = "imix")]
    pub size: Option<String>,
    /// IMIX sizes: 7 x 64, 4 x 594, 1 x 1518 bytes on the wire (the simple IMIX of IP
    /// packets of 40, 576 and 1500 bytes, as TRex sends it), interleaved. Or a mix of your own,
    /// sizes sent in turn (name one twice to send it twice as often):
    /// --imix=64,64,64,1500,9000.
    #[arg(
        long,
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "standard",
        value_name = "SIZES"
    )]
    pub imix: Option<String>,
    /// Distinct 5-tuples, round robin: the source port counts up from --src-port to 65535,
    /// then the source address goes up by one (stepping over the destination's).
    #[arg(long, default_value_t = 1)]
    pub flows: u32,
    /// IPv6 (default addresses fd00::1 -> fd00::2).
    #[arg(long)]
    pub ipv6: bool,
    /// What the frames carry above IP.
    #[arg(long, value_enum, default_value_t = Proto::Udp)]
    pub proto: Proto,
    /// Tag every frame with this 802.1Q VLAN id (1-4094).
    #[arg(long)]
    pub vlan: Option<u16>,
    /// Source MAC (default: the interface's own).
    #[arg(long)]
    pub src_mac: Option<MacAddr>,
    /// Destination MAC.
    #[arg(long, default_value = "02:00:00:00:00:02")]
    pub dst_mac: MacAddr,
    /// Source address of the first flow (default 10.0.0.1, or fd00::1 with --ipv6).
    #[arg(long)]
    pub src_ip: Option<IpAddr>,
    /// Destination address (default 10.0.0.2, or fd00::2 with --ipv6).
    #[arg(long)]
    pub dst_ip: Option<IpAddr>,
    /// Source port of the first flow (the ICMP echo identifier with --proto icmp).
    #[arg(long, default_value_t = 1024)]
    pub src_port: u16,
    /// Destination port (UDP or TCP; unused with --proto icmp).
    #[arg(long, default_value_t = 9)]
    pub dst_port: u16,
    /// Generator id carried in every frame (receivers report per id).
    #[arg(long, default_value_t = wirespeed_packet::DEFAULT_GENERATOR_ID)]
    pub generator_id: u16,
    /// Leave out every K-th sequence number (K-1, 2K-1, ...): a known loss pattern for
    /// testing receivers. --count still counts frames sent.
    #[arg(long)]
    pub skip_every: Option<u64>,
    /// Replay the frames of a pcap or pcapng file (Ethernet) instead of generating them
    /// (the kernel engine, with --fast, repeats each of at most 64 frames --loop times).
    #[arg(long, conflicts_with_all = ["size", "imix", "flows", "ipv6", "proto", "vlan",
        "src_mac", "dst_mac", "src_ip", "dst_ip", "src_port", "dst_port", "generator_id",
        "skip_every", "no_stamp"])]
    pub pcap: Option<PathBuf>,
    /// Replay as fast as the port takes the frames (or at --rate) instead of at the
    /// recorded timing.
    #[arg(long, requires = "pcap")]
    pub fast: bool,
    /// Replay the file N times (0: until --count, --duration or Ctrl-C).
    #[arg(long = "loop", requires = "pcap", default_value_t = 1)]
    pub loops: u64,
    /// Print one JSON object with the results on stdout at the end.
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "ADDR", help = crate::run::metrics::HELP)]
    pub metrics: Option<String>,
    /// No live line on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    #[command(flatten)]
    pub port_flags: PortFlags,
    #[command(flatten)]
    pub live: crate::args::cpus::LiveFlags,
}

/// Everything `gen` will send, checked before the port is opened.
pub struct GenPlan {
    pub spec: PortSpec,
    pub flows: FlowPlan,
    pub sizes: SizePlan,
    pub notes: Vec<String>,
}

impl GenArgs {
    pub fn duration(&self) -> Option<Duration> {
        self.duration.map(Duration::from_secs_f64)
    }

    fn ips(&self) -> anyhow::Result<IpPair> {
        let v6 = self.ipv6
            || matches!(self.src_ip, Some(IpAddr::V6(_)))
            || matches!(self.dst_ip, Some(IpAddr::V6(_)));
        let src = self.src_ip.unwrap_or(match v6 {
            false => IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            true => IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
        });
        let dst = self.dst_ip.unwrap_or(match v6 {
            false => IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            true => IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        });
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Ok(IpPair::V4(s, d)),
            (IpAddr::V6(s), IpAddr::V6(d)) => Ok(IpPair::V6(s, d)),
            _ => {
                bail!("--src-ip {src} and --dst-ip {dst}: both must be IPv4, or both IPv6 (--ipv6)")
            }
        }
    }

    fn base_frame(&self, spec: &PortSpec) -> anyhow::Result<FrameSpec> {
        let src_mac = match self.src_mac {
            Some(m) => m,
            None => port_mac(spec)?,
        };
        Ok(FrameSpec {
            src_mac,
            dst_mac: self.dst_mac,
            vlan: self.vlan,
            ip: self.ips()?,
            l4: match self.proto {
                Proto::Udp => L4Kind::Udp,
                Proto::TcpSyn => L4Kind::TcpSyn,
                Proto::Icmp => L4Kind::IcmpEcho,
            },
            src_port: self.src_port,
            dst_port: self.dst_port,
            generator: self.generator_id,
        })
    }

    /// The checks generation and replay share: port flags, duration, count.
    pub fn check_run(&self) -> anyhow::Result<()> {
        self.port_flags.validate()?;
        crate::run::meter::check_seconds("--duration", self.duration)?;
        if self.count == Some(0) {
            bail!("--count 0: must be at least 1");
        }
        Ok(())
    }

    fn check_limits(&self) -> anyhow::Result<()> {
        self.check_run()?;
        if self.flows == 0 || self.flows > MAX_FLOWS {
            bail!("--flows {}: must be from 1 to {MAX_FLOWS}", self.flows);
        }
        if let Some(v) = self.vlan
            && !(1..=4094).contains(&v)
        {
            bail!("--vlan {v}: a VLAN id is from 1 to 4094");
        }
        if let Some(k) = self.skip_every
            && k < 2
        {
            bail!("--skip-every {k}: must be at least 2 (1 would send nothing)");
        }
        if self.engine == Engine::Kernel && self.skip_every.is_some() {
            bail!("--skip-every needs --engine socket: the kernel engine repeats fixed frames");
        }
        if self.no_stamp && self.engine != Engine::Kernel {
            bail!("--no-stamp is for --engine kernel: the socket engine always stamps");
        }
        Ok(())
    }

    /// The sizes, checked against the smallest frame the protocol needs and the largest
    /// Ethernet frame.
    fn sizes(&self, base: &FrameSpec, notes: &mut Vec<String>) -> anyhow::Result<SizePlan> {
        let min = base.min_frame_len() as u32 + 4;
        let max = match self.engine {
            // Its frames are built once, each in one page.
            Engine::Kernel if self.vlan.is_some() => 1522,
            Engine::Kernel => 1518,
            Engine::Socket => FrameSpec::MAX_FRAME_LEN as u32,
        };
        let what = frame_kind(base);
        match self.imix.as_deref() {
            Some("standard") => {
                let pattern = IMIX_PATTERN.map(|s| s.max(min));
                if pattern != IMIX_PATTERN {
                    notes.push(format!(
                        "imix: 64-byte frames raised to {min} bytes, the smallest {what} frame"
                    ));
                }
                return Ok(SizePlan::Imix(pattern.to_vec()));
            }
            Some(list) => {
                let plan = SizePlan::Mix(frames::parse_imix(list).map_err(anyhow::Error::msg)?);
                if plan.min() < min || plan.max() > max {
                    bail!(
                        "--imix={list}: out of range: {what} frames with the 18-byte test payload are {min} to {max} bytes on the wire"
                    );
                }
                return Ok(plan);
            }
            None => {}
        }
        let Some(size) = &self.size else {
            return Ok(SizePlan::Fixed(min.max(64)));
        };
        let plan = frames::parse_size(size).map_err(anyhow::Error::msg)?;
        if plan.min() < min || plan.max() > max {
            bail!(
                "--size {}: out of range: {what} frames with the 18-byte test payload are {min} to {max} bytes on the wire",
                size
            );
        }
        Ok(plan)
    }

    /// Checks everything, opens nothing.
    pub fn plan(&self) -> anyhow::Result<GenPlan> {
        self.check_limits()?;
        let spec: PortSpec = self.port.parse()?;
        if self.engine == Engine::Kernel && spec.backend != Backend::Xdp {
            bail!("--engine kernel sends through XDP: use an xdp: port, not {spec}");
        }
        let base = self.base_frame(&spec)?;
        let mut notes = Vec::new();
        let sizes = self.sizes(&base, &mut notes)?;
        check_mtu(&spec, &sizes, self.vlan.is_some())?;
        let flows = FlowPlan::new(base, self.flows);
        if flows.addresses() > 1 {
            notes.push(format!(
                "{} flows: source ports {}-65535, source addresses {} to {} (stepping over \
                 the destination's)",
                self.flows,
                self.src_port,
                frames::src_addr(&flows.flow(0)),
                frames::src_addr(&flows.flow(self.flows - 1))
            ));
        }
        Ok(GenPlan {
            spec,
            flows,
            sizes,
            notes,
        })
    }
}

/// Words for messages: "IPv4/UDP", "VLAN-tagged IPv6/TCP SYN"...
fn frame_kind(f: &FrameSpec) -> String {
    let ip = match f.ip {
        IpPair::V4(..) => "IPv4",
        IpPair::V6(..) => "IPv6",
    };
    let l4 = match f.l4 {
        L4Kind::Udp => "UDP",
        L4Kind::TcpSyn => "TCP SYN",
        L4Kind::IcmpEcho => "ICMP echo",
    };
    let vlan = if f.vlan.is_some() { "VLAN-tagged " } else { "" };
    format!("{vlan}{ip}/{l4}")
}

pub fn run(args: GenArgs) -> anyhow::Result<()> {
    args.live.cpus(args.engine == Engine::Kernel)?;
    // A malformed spec is reported by the plan, with the rest of what is wrong.
    let to_stderr = match args.port.parse::<PortSpec>() {
        Ok(spec) => crate::run::report_to::check_std_streams(&[&spec], false, true)?,
        Err(_) => false,
    };
    let _metrics = crate::run::metrics::start_for_meters("gen", args.metrics.as_deref())?;
    let summary = if let Some(path) = &args.pcap {
        replay::run(&args, path)?
    } else {
        let plan = args.plan()?;
        let what = format!("gen on {}", plan.spec);
        crate::run::caps::require_for(&what, &[plan.spec.backend])?;
        for n in &plan.notes {
            eprintln!("wirespeed: note: {n}");
        }
        let stop = crate::run::signals::stop_flag()?;
        let size = plan.sizes.label();
        let mut summary = match args.engine {
            Engine::Socket => socket::run(&args, plan, &stop)?,
            Engine::Kernel => kernel_engine::run(&args, plan, &stop)?,
        };
        summary.size = Some(size);
        summary
    };
    summary.print(args.json, to_stderr);
    if let Some(e) = &summary.error {
        bail!("{e}");
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

/// Checks that the largest frame fits the interface's MTU (the kernel drops a larger one
/// on the way, counted nowhere we can see). Ports without an interface have none.
fn check_mtu(spec: &PortSpec, sizes: &SizePlan, vlan: bool) -> anyhow::Result<()> {
    if !matches!(spec.backend, Backend::Xdp | Backend::Packet) {
        return Ok(());
    }
    let Some(mtu) = wirespeed_port::interface_mtu(&spec.iface) else {
        return Ok(());
    };
    // Ethernet header and FCS, and the tag.
    let largest = mtu + 18 + if vlan { 4 } else { 0 };
    if sizes.max() > largest {
        bail!(
            "--size {}: {} has MTU {mtu}, which carries frames of at most {largest} bytes on \
             the wire (raise its MTU: ip link set {} mtu N)",
            sizes.label(),
            spec.iface,
            spec.iface
        );
    }
    Ok(())
}
