//! `wirespeed capture`: tcpdump-class capture on the fast path. Packets from a port (or a file
//! with `-r`) pass a tcpdump filter run by our BPF interpreter, then go to pcap / pcapng files
//! through the writer thread, or are printed one line each like `tcpdump -n`.

mod counts;
pub mod filter_child;
mod from_port;
mod info;
mod line;
mod metrics;
mod offline;
mod take;
mod threads;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::bail;
use clap::Args;
use wirespeed_capture::LINKTYPE_ETHERNET;
use wirespeed_capture::filter::{FILTER_SNAPLEN, Filter};
use wirespeed_capture::output::{FileOutput, StdoutOutput};
use wirespeed_capture::print::PrintOptions;
use wirespeed_capture::recorder::{CHUNK_SIZE, RecorderConfig};
use wirespeed_capture::rotate::{Rotation, parse_size};
use wirespeed_capture::spool::Output;
use wirespeed_capture::write::{Format, Interface};
use wirespeed_port::xdp::XdpMode;
use wirespeed_port::{Backend, PortOptions, PortSpec};

use filter_child::{CompileError, Target};
use wirespeed_port::frame_size_for;

/// Exit status for an invalid filter expression: tcpdump's (4.99 exits 1 on "can't parse
/// filter expression"), so scripts that test it need no change.
const EXIT_BAD_FILTER: i32 = 1;

/// Memory for frames when `--frames` is not given and no spill ring takes the stalls: 160
/// MiB, whatever the frame size.
const DEFAULT_FRAME_BYTES: u32 = 160 << 20;

/// MiB of spill ring when `--spill-mib` is not given.
const DEFAULT_SPILL_MIB: u32 = 64;

/// Ring entries when `--ring-size` is not given: deep without a spill ring (the fill ring is
/// then all a stall has), a quarter of that with one (the spill ring takes what outlasts the
/// fill ring, and the kernel's copy lands in frames it touched more recently).
const DEEP_RING: u32 = 65536;
const SPILLING_RING: u32 = 16384;

/// Options of `wirespeed capture`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  wirespeed capture -i veth1 -w out.pcapng\n  \
wirespeed capture --port packet:veth1 -c 10 'udp port 53'\n  \
wirespeed capture --port xdp:veth1 -w 'cap-%Y%m%d-%H%M%S.pcap' -G 60 -W 10\n  \
wirespeed capture --port xdp:veth1 -w ring.pcap -C 100 -W 5\n  \
wirespeed capture -i eth0 --cpus 2-5 -w out.pcapng\n  \
wirespeed capture -r in.pcapng -w out.pcap 'tcp and not port 22'"
)]
pub struct CaptureArgs {
    /// The port: xdp:IFACE or just IFACE (AF_XDP, every receive queue), xdp:IFACE@QUEUE
    /// (that queue only: the others' packets go on to the kernel's stack uncaptured), or
    /// packet:IFACE (AF_PACKET TPACKET_V3). Both capture the packets the interface receives,
    /// not those it sends (XDP runs on receive only; tcpdump -Q in), unless -Q inout.
    /// pipe:NAME captures what the process at the pipe's other end sends; tap:NAME what the
    /// kernel sends out of tap device NAME (made for the capture if there is none).
    #[arg(
        long,
        short = 'i',
        value_name = "PORT",
        required_unless_present = "read",
        conflicts_with = "read"
    )]
    pub port: Option<String>,
    /// Direction, as tcpdump's -Q: `in` (the default: what the interface receives) or
    /// `inout` (what it sends too; packet: ports only, since XDP runs on receive).
    #[arg(short = 'Q', value_name = "DIRECTION", default_value = "in", value_parser = ["in", "inout"], conflicts_with = "read")]
    pub direction: String,
    /// Capture on xdp: even though the interface has addresses. An xdp: capture takes the
    /// packets it captures (all of them, whatever the filter) from the kernel's stack, so the
    /// host stops receiving on that interface while it runs; packet: only watches.
    #[arg(long, conflicts_with = "read")]
    pub take: bool,
    /// Accepted for tcpdump's sake (-n, -nn): addresses and ports are never turned into
    /// names.
    #[arg(short = 'n', action = clap::ArgAction::Count)]
    pub numeric: u8,
    /// Print each packet's link-level header too (addresses, EtherType, VLAN tags), as
    /// tcpdump -e does.
    #[arg(short = 'e')]
    pub link_header: bool,
    /// Print TCP sequence and acknowledgement numbers as they are, as tcpdump -S does;
    /// by default they count from the first ones seen in each connection.
    #[arg(short = 'S')]
    pub absolute_seq: bool,
    /// Read packets from a pcap or pcapng file instead of a port (`-` for standard input).
    #[arg(short = 'r', value_name = "FILE")]
    pub read: Option<PathBuf>,
    /// Write packets to FILE (`-` for standard output) instead of printing a line each.
    #[arg(short = 'w', value_name = "FILE")]
    pub write: Option<String>,
    /// Stop after COUNT packets have been written (or printed).
    #[arg(short = 'c', value_name = "COUNT")]
    pub count: Option<u64>,
    /// Keep at most SNAPLEN bytes of each packet (0: 262144, the default).
    #[arg(short = 's', value_name = "SNAPLEN", default_value_t = FILTER_SNAPLEN)]
    pub snaplen: u32,
    /// File format: pcap or pcapng. Without it, a -w name ending in .pcap gets pcap, and
    /// any other name (or standard output) pcapng.
    #[arg(long, value_parser = parse_format)]
    pub format: Option<Format>,
    /// Start a new file every SECONDS; the -w name is a strftime pattern (local time, TZ):
    /// the date and time conversions (%Y %m %d %H %M %S %j %s %F %T %a %b ...); one it does
    /// not make (%Z, the week numbers...) is refused, and the error lists those it makes.
    #[arg(short = 'G', value_name = "SECONDS")]
    pub rotate_seconds: Option<u64>,
    /// Start a new file before one grows past SIZE: a plain number is millions of bytes (as
    /// tcpdump's -C), and a k, m or g suffix means KiB, MiB or GiB.
    #[arg(short = 'C', value_name = "SIZE", value_parser = parse_size)]
    pub rotate_size: Option<u64>,
    /// With -C: a ring of FILES files. With only -G: stop after FILES files.
    #[arg(short = 'W', value_name = "FILES")]
    pub files: Option<u32>,
    /// Stop after this many seconds.
    #[arg(long, conflicts_with = "read")]
    pub duration: Option<f64>,
    /// Print the counts as one JSON object at the end (on standard output, or on standard
    /// error when the capture itself goes to standard output).
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "ADDR", help = crate::run::metrics::HELP)]
    pub metrics: Option<String>,
    /// MiB of memory between the receive loop and the disk; packets that find it full are
    /// dropped and counted.
    #[arg(long = "buffer", value_name = "MIB", default_value_t = 64)]
    pub buffer_mib: usize,
    /// The same in KiB, as tcpdump's -B counts (tcpdump -B 262144: 256 MiB), rounded up to
    /// whole MiB.
    #[arg(short = 'B', value_name = "KIB", conflicts_with = "buffer_mib")]
    pub buffer_kib: Option<usize>,
    /// Do not also attach the filter in the kernel (packet: ports).
    #[arg(long, conflicts_with = "read")]
    pub no_kernel_filter: bool,
    /// AF_XDP mode: auto tries zc, then copy (native XDP), then skb (generic XDP); zc only
    /// (the driver's zero-copy: not veth's), copy, native (native XDP, the kernel picks zc or
    /// copy) or skb.
    #[arg(long, default_value = "auto", value_parser = parse_xdp_mode, conflicts_with = "read")]
    pub xdp_mode: XdpMode,
    /// Packets per burst.
    #[arg(long, default_value_t = 64, conflicts_with = "read")]
    pub batch: u32,
    /// Frame size, 2048 or 4096. Default: 2048 when the interface's MTU fits in it (the
    /// kernel copies into frames it has not touched for a while, and two to a page take
    /// fewer page walks: about 10% more packets under full load here), else 4096.
    #[arg(long, conflicts_with = "read")]
    pub frame_size: Option<u32>,
    /// UMEM frames (AF_XDP) or ring frames (AF_PACKET). AF_XDP keeps up to three quarters in
    /// the fill ring (at most its size): the packets the kernel can deliver while the
    /// capture is not running. Default: with a spill ring (AF_XDP), twice the ring size;
    /// else 160 MiB of frames (81920 of 2048 bytes, 40960 of 4096). Shared out evenly when
    /// the capture is on several queues.
    #[arg(long, conflicts_with = "read")]
    pub frames: Option<u32>,
    /// Entries per ring (a power of two). Default: 16384 with a spill ring, which takes
    /// what the fill ring cannot ride out; 65536 without one (61440 frames in the fill ring
    /// last 18 ms at 3.3 Mpps). On veth the kernel's copy runs faster into the shallower
    /// ring's frames: 4.1-4.4 Mpps written against 3.6-4.1 (bench/README.md).
    #[arg(long, conflicts_with = "read")]
    pub ring_size: Option<u32>,
    /// MiB of spill ring (AF_XDP; a power of two, 0 for none). While the capture falls
    /// behind (its CPU taken by the writer thread, the hypervisor or anything else), the
    /// XDP program writes packets there instead of dropping them, and the capture reads
    /// them back in order; the rings can then stay small, which the kernel's copy into
    /// them runs faster for. Default: 64; none where another process's redirect program
    /// is on the interface (sharing it by queue: a spill ring needs the program to itself).
    /// With --cpus, each thread has a spill ring of this size (at most 16 threads).
    #[arg(long, value_name = "MIB", conflicts_with = "read")]
    pub spill_mib: Option<u32>,
    /// Ask the kernel to busy-poll the socket instead of sleeping in poll(). Zero-copy
    /// sockets only (Linux 6.13+): a copy-mode one (veth) says so and polls as without it.
    #[arg(long, conflicts_with = "read")]
    pub busy_poll: bool,
    /// Replace an XDP program someone else attached to the interface.
    #[arg(long, conflicts_with = "read")]
    pub force: bool,
    /// Receive with a thread pinned to each CPU of LIST (like 0,1 or 2-5), on a port of
    /// several queues (-i IFACE, xdp:IFACE@all, xdp:IFACE@FIRST-LAST): the queues are
    /// shared out in turn (thread t gets queues t, t+N, ...), each thread with its own
    /// sockets, rings, frames and spill ring, all writing the one output. Each queue's
    /// packets keep their order there; packets of different queues interleave as they are
    /// handed over (the kernel orders no queue against another either). At most one thread
    /// a queue. --json gives each thread's counts and busy share in `threads`.
    #[arg(long, value_name = "LIST", conflicts_with = "read")]
    pub cpus: Option<String>,
    /// The filter, in tcpdump syntax (several words are joined with spaces). Options may
    /// come after its words, as in tcpdump (`-r F tcp -c 3`); put `--` before a filter with
    /// a word that starts with `-`.
    #[arg(value_name = "FILTER")]
    pub filter: Vec<String>,
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse()
}

fn parse_xdp_mode(s: &str) -> Result<XdpMode, String> {
    s.parse()
}

impl CaptureArgs {
    fn validate(&mut self) -> anyhow::Result<Rotation> {
        let rotation = Rotation {
            seconds: self.rotate_seconds,
            bytes: self.rotate_size,
            files: self.files,
        };
        rotation.validate().map_err(anyhow::Error::msg)?;
        if !rotation.is_none() && matches!(self.write.as_deref(), None | Some("-")) {
            bail!("-G and -C rotate files: give a file name with -w");
        }
        if rotation.seconds.is_some()
            && let Some(name) = &self.write
            && let Some(unknown) = wirespeed_capture::rotate::unknown_conversion(name)
        {
            bail!(
                "-w {name}: {unknown} is not a conversion -G names take (they take %{})",
                wirespeed_capture::rotate::STRFTIME_CONVERSIONS
                    .chars()
                    .map(String::from)
                    .collect::<Vec<_>>()
                    .join(" %")
            );
        }
        if rotation.seconds.is_some()
            && let Some(name) = &self.write
            && !wirespeed_capture::rotate::names_a_time(name)
        {
            eprintln!(
                "wirespeed capture: note: -w {name} has no time conversion, so each -G file \
                 overwrites the last, as tcpdump's do (a name like cap-%Y%m%d-%H%M%S.pcap keeps \
                 them all)"
            );
        }
        if let (Some(read), Some(write)) = (&self.read, &self.write)
            && wirespeed_port::pcap::same_file(read, std::path::Path::new(write))
        {
            bail!(
                "-r {} and -w {write} are one file: writing would destroy what is being read",
                read.display()
            );
        }
        if self.count == Some(0) {
            bail!("-c 0: the count must be at least 1");
        }
        if let Some(d) = self.duration
            && !(d > 0.0 && d <= 86400.0)
        {
            bail!("--duration {d}: must be more than 0 and at most 86400 seconds");
        }
        if let Some(kib) = self.buffer_kib {
            if kib == 0 || kib > 1 << 26 {
                bail!("-B {kib}: the buffer is 1 to 67108864 KiB (64 GiB)");
            }
            self.buffer_mib = kib.div_ceil(1024);
        }
        if self.buffer_mib == 0 || self.buffer_mib > 1 << 16 {
            bail!("--buffer {}: the buffer is 1 to 65536 MiB", self.buffer_mib);
        }
        if let Some(f) = self.frame_size
            && f != 2048
            && f != 4096
        {
            bail!("--frame-size {f}: frame size must be 2048 or 4096");
        }
        let spill = self.spill_mib();
        if spill != 0 && (!spill.is_power_of_two() || spill > 1024) {
            bail!(
                "--spill-mib {spill}: the spill ring is a power of two of MiB, at most 1024 (0 for none)"
            );
        }
        if let Some(list) = &self.cpus {
            crate::args::cpus::parse("--cpus", list)?;
        }
        let ring = self.ring_size();
        if self.batch == 0 || self.batch > ring || !ring.is_power_of_two() {
            bail!(
                "--batch {} --ring-size {ring}: the ring size is a power of two, the batch 1 to it",
                self.batch,
            );
        }
        Ok(rotation)
    }

    fn snaplen(&self) -> u32 {
        match self.snaplen {
            0 => FILTER_SNAPLEN,
            s => s.min(FILTER_SNAPLEN),
        }
    }

    /// The port to capture on. Like tcpdump's -i, an interface means all of it: a bare name
    /// is an xdp: port, and an xdp: port is every receive queue unless the spec names one.
    fn port_spec(&self) -> anyhow::Result<PortSpec> {
        let text = self.port.as_deref().unwrap_or_default();
        let mut spec: PortSpec = if text.contains(':') {
            text.parse()?
        } else {
            format!("xdp:{text}").parse()?
        };
        spec.all_queues |= spec.backend == Backend::Xdp && !PortSpec::names_queue(text);
        if spec.backend == Backend::Pcap {
            // A port drops what the writer cannot keep up with; -r waits for it instead.
            bail!("--port {text}: to capture from a file, use -r FILE (it never drops)");
        }
        Ok(spec)
    }

    fn expression(&self) -> Option<String> {
        let e = self.filter.join(" ");
        (!e.trim().is_empty()).then_some(e)
    }

    /// --spill-mib, or its default.
    fn spill_mib(&self) -> u32 {
        self.spill_mib.unwrap_or(DEFAULT_SPILL_MIB)
    }

    /// Without --spill-mib, no spill ring where another process's redirect program is on
    /// the interface: the capture shares it by queue (a spill ring would be refused).
    fn spill_for_shared(&mut self, spec: &PortSpec) {
        if self.spill_mib.is_none()
            && spec.backend == Backend::Xdp
            && let Some(shared) = wirespeed_port::xdp::shared_program(&spec.iface)
        {
            eprintln!(
                "wirespeed capture: note: {} shares {}'s XDP program with {}: no spill ring",
                spec.with_queue(),
                spec.iface,
                shared.holder_text()
            );
            self.spill_mib = Some(0);
        }
    }

    /// Without --spill-mib, no spill ring where the interface's MTU carries packets larger
    /// than a frame: those are taken as chains of frames (multi-buffer), which the spill
    /// ring does not take yet.
    fn spill_for_jumbo(&mut self, spec: &PortSpec) {
        if self.spill_mib.is_some() || spec.backend != Backend::Xdp {
            return;
        }
        let Some(mtu) = wirespeed_port::interface_mtu(&spec.iface) else {
            return;
        };
        let frame_size = self
            .frame_size
            .unwrap_or_else(|| frame_size_for(&spec.iface, 0));
        // Ethernet and a VLAN tag on top of the MTU; the kernel's 256 bytes in front.
        if mtu + 18 > frame_size - 256 {
            eprintln!(
                "wirespeed capture: note: {} has MTU {mtu}, larger than a frame: packets \
                 larger than a frame are taken as chains of frames, without a spill ring",
                spec.iface
            );
            self.spill_mib = Some(0);
        }
    }

    /// The rings' entries: as asked, else deep or not by whether a spill ring takes the
    /// stalls (only AF_XDP has rings of this size).
    fn ring_size(&self) -> u32 {
        match (self.ring_size, self.spill_mib()) {
            (Some(n), _) => n,
            (None, 0) => DEEP_RING,
            (None, _) => SPILLING_RING,
        }
    }

    fn port_options(&self, spec: &PortSpec) -> PortOptions {
        let frame_size = self
            .frame_size
            .unwrap_or_else(|| frame_size_for(&spec.iface, 0));
        let spilling = spec.backend == Backend::Xdp && self.spill_mib() > 0;
        let frame_count = match self.frames {
            Some(n) => n,
            None if spilling => 2 * self.ring_size(),
            None => DEFAULT_FRAME_BYTES / frame_size,
        };
        PortOptions {
            xdp_mode: self.xdp_mode,
            frame_count,
            frame_size,
            ring_size: self.ring_size(),
            busy_poll: self.busy_poll,
            batch: self.batch,
            force: self.force,
            rx: true,
            tx: false,
            outgoing: self.direction == "inout",
            spill_bytes: self.spill_mib() << 20,
            // Packets larger than a frame are written whole; not through a spill ring yet
            // (`spill_for_jumbo` leaves it out where the MTU needs chains).
            multi_buffer: self.spill_mib() == 0,
            ..PortOptions::default()
        }
    }

    /// Each thread's port options with `--cpus` over `threads` threads: the frames (the
    /// count given, or the default) shared out between the threads as between queues; the
    /// spill ring is each thread's (`XdpPort::open_threads` gives each its own).
    fn thread_port_options(&self, spec: &PortSpec, threads: usize) -> PortOptions {
        let mut opts = self.port_options(spec);
        opts.frame_count = (opts.frame_count / threads.max(1) as u32).max(1);
        opts
    }

    /// Where packets go and how: files, standard output, or printed lines.
    fn recorder(&self, rotation: Rotation, interface: Interface, offline: bool) -> Sink {
        let (format, pattern, output): (Format, String, Box<dyn Output>) =
            match self.write.as_deref() {
                None => (
                    Format::Pcap,
                    "-".to_string(),
                    Box::new(line::LineOutput::new(
                        interface.link_type,
                        PrintOptions {
                            link: self.link_header,
                            absolute_seq: self.absolute_seq,
                        },
                    )),
                ),
                Some("-") => (
                    self.format.unwrap_or(Format::Pcapng),
                    "-".to_string(),
                    Box::new(StdoutOutput::new()),
                ),
                Some(path) => (
                    self.format
                        .unwrap_or_else(|| Format::for_path(std::path::Path::new(path))),
                    path.to_string(),
                    Box::new(FileOutput::new()),
                ),
            };
        let config = RecorderConfig {
            format,
            interface,
            rotation,
            pattern,
            buffer_bytes: self.buffer_mib << 20,
            chunk_size: CHUNK_SIZE,
            wait_for_writer: offline,
        };
        Sink { config, output }
    }
}

/// A recorder not yet started: the file is created only once everything else is ready.
pub struct Sink {
    config: RecorderConfig,
    output: Box<dyn Output>,
}

/// Compiles the filter (in a child process: see `filter_child`); an invalid expression ends
/// the program with libpcap's message and exit status 1 (tcpdump's), before any file is
/// created. So does one libpcap cannot compile within its time, and one that tests what
/// only a live capture knows (`inbound`, `outbound`, `ifindex`) when reading a file, as in
/// tcpdump. A signal while it compiles is an error.
fn compile_or_exit(
    expression: Option<&str>,
    link_type: u16,
    live: bool,
    stop: &AtomicBool,
) -> anyhow::Result<Option<Filter>> {
    let Some(expression) = expression else {
        return Ok(None);
    };
    match filter_child::compile(expression, &Target::File { link_type }, stop) {
        Ok(f) if f.reads_metadata() && !live => {
            eprintln!(
                "wirespeed capture: {expression}: inbound, outbound and ifindex test a packet's \
                 direction and interface, which a capture file of this link type ({link_type}) \
                 does not record"
            );
            std::process::exit(EXIT_BAD_FILTER);
        }
        Ok(f) => Ok(Some(f)),
        // Not the filter's fault: stopped, or the child could not run.
        Err(e @ (CompileError::Stopped(_) | CompileError::Child(_))) => Err(e.into()),
        Err(e) => {
            eprintln!("wirespeed capture: {e}");
            std::process::exit(EXIT_BAD_FILTER);
        }
    }
}

pub fn run(mut args: CaptureArgs) -> anyhow::Result<()> {
    if args.read.is_none() {
        let spec = args.port_spec()?;
        args.spill_for_shared(&spec);
        args.spill_for_jumbo(&spec);
    }
    let rotation = args.validate()?;
    let stop = crate::run::signals::stop_flag()?;
    let _metrics = crate::run::metrics::start_for_meters("capture", args.metrics.as_deref())?;
    let counts = match &args.read {
        Some(path) => offline::run(&args, path, rotation, &stop)?,
        None => {
            let spec = args.port_spec()?;
            // A bad expression is exit 1 whoever runs it, before the capabilities are asked.
            let expression = args.expression();
            let filter = compile_or_exit(expression.as_deref(), LINKTYPE_ETHERNET, true, &stop)?;
            info::answer_sigusr1(filter.is_some(), true)?;
            let needs_bpf = spec.backend == Backend::Xdp;
            if needs_bpf {
                if args.direction == "inout" {
                    bail!(
                        "-Q inout: {spec} sees received packets only (XDP runs on receive); \
                         packet:{} captures both directions",
                        spec.iface
                    );
                }
                take::check(&spec.iface, args.take)?;
            }
            crate::run::caps::require_for(&format!("capture on {spec}"), &[spec.backend])?;
            match &args.cpus {
                Some(list) => {
                    let cpus = crate::args::cpus::parse("--cpus", list)?;
                    threads::run(&args, &spec, &cpus, filter, rotation, &stop)?
                }
                None => from_port::run(&args, &spec, filter, rotation, &stop)?,
            }
        }
    };
    let to_stderr = args.write.as_deref() == Some("-") || args.write.is_none();
    counts.print(args.json, to_stderr);
    if let Some(e) = &counts.error {
        bail!("{e}");
    }
    Ok(())
}

/// How often the loop passes a partly filled chunk to the writer, so packets reach the file
/// within this long even at low rates.
const FLUSH_EVERY: Duration = Duration::from_millis(100);

fn describe_output(args: &CaptureArgs) -> String {
    match args.write.as_deref() {
        None => "printing".to_string(),
        Some("-") => "writing to standard output".to_string(),
        Some(p) => format!("writing {p}"),
    }
}

#[cfg(test)]
mod tests {
    use super::CaptureArgs;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        capture: CaptureArgs,
    }

    /// Frame size, frames and ring size for a capture on `port` with `flags`.
    fn options_on(port: &str, flags: &[&str]) -> (u32, u32, u32) {
        let argv = ["capture", "--port", port]
            .into_iter()
            .chain(flags.iter().copied());
        let args = Cli::parse_from(argv).capture;
        let o = args.port_options(&args.port_spec().unwrap());
        (o.frame_size, o.frame_count, o.ring_size)
    }

    fn options(flags: &[&str]) -> (u32, u32) {
        let (size, frames, _) = options_on("xdp:wsnosuch0", flags);
        (size, frames)
    }

    #[test]
    fn the_spill_ring_is_on_by_default_and_sized_in_powers_of_two() {
        let args = |flags: &[&str]| {
            let argv = ["capture", "--port", "xdp:wsnosuch0"].iter().chain(flags);
            Cli::parse_from(argv).capture
        };
        let spill = |flags: &[&str]| {
            let a = args(flags);
            a.port_options(&a.port_spec().unwrap()).spill_bytes
        };
        assert_eq!(spill(&[]), 64 << 20);
        assert_eq!(spill(&["--spill-mib", "0"]), 0);
        for bad in ["3", "2048"] {
            let e = args(&["--spill-mib", bad])
                .validate()
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!(
                "--spill-mib {bad}: the spill ring is a power of two"
            )));
        }
        assert!(args(&["--spill-mib", "1024"]).validate().is_ok());
    }

    #[test]
    fn dash_b_counts_kib_as_tcpdumps_does() {
        let mib = |flags: &[&str]| {
            let argv = ["capture", "--port", "xdp:wsnosuch0"].iter().chain(flags);
            let mut args = Cli::parse_from(argv).capture;
            args.validate()
                .map(|_| args.buffer_mib)
                .map_err(|e| e.to_string())
        };
        assert_eq!(mib(&[]), Ok(64));
        assert_eq!(mib(&["-B", "262144"]), Ok(256));
        assert_eq!(mib(&["-B", "1"]), Ok(1));
        assert_eq!(mib(&["--buffer", "8"]), Ok(8));
        assert!(
            mib(&["-B", "0"])
                .unwrap_err()
                .contains("-B 0: the buffer is 1 to")
        );
        let both = ["capture", "--port", "x", "-B", "1024", "--buffer", "1"];
        assert!(Cli::try_parse_from(both).is_err());
    }

    #[test]
    fn rings_are_shallower_with_a_spill_ring_than_without() {
        // No MTU to read: 4096-byte frames. A spill ring (the default): 16384 entries and
        // twice as many frames.
        assert_eq!(options_on("xdp:wsnosuch0", &[]), (4096, 32768, 16384));
        let ring_4096 = ["--ring-size", "4096"];
        assert_eq!(options_on("xdp:wsnosuch0", &ring_4096), (4096, 8192, 4096));
        // No spill ring: 65536 entries and 160 MiB of frames.
        let no_spill = ["--spill-mib", "0"];
        assert_eq!(options_on("xdp:wsnosuch0", &no_spill), (4096, 40960, 65536));
        // AF_PACKET has no spill ring: 160 MiB of frames.
        assert_eq!(options_on("packet:wsnosuch0", &[]).1, 40960);
        let frames = ["--frame-size", "2048", "--spill-mib", "0"];
        assert_eq!(options(&frames), (2048, 81920));
        assert_eq!(options(&["--frames", "1000"]), (4096, 1000));
    }

    #[test]
    fn an_interface_means_every_queue_unless_one_is_named() {
        let spec = |argv: &[&str]| {
            let argv = ["capture"].iter().chain(argv);
            Cli::parse_from(argv)
                .capture
                .port_spec()
                .map(|s| s.with_queue())
        };
        for (argv, want) in [
            (&["-i", "eth0", "-n"][..], "xdp:eth0@all"),
            (&["--port", "xdp:eth0"], "xdp:eth0@all"),
            (&["--port", "xdp:eth0@all"], "xdp:eth0@all"),
            (&["-i", "xdp:eth0@0"], "xdp:eth0@0"),
            (&["-i", "xdp:eth0@3"], "xdp:eth0@3"),
            (&["-i", "packet:eth0"], "packet:eth0"),
        ] {
            assert_eq!(spec(argv).unwrap(), want, "{argv:?}");
        }
        let e = spec(&["-i", "eth0@x"]).unwrap_err().to_string();
        assert!(
            e.contains("queue 'x' is not a number, a range FIRST-LAST or 'all'"),
            "{e}"
        );
    }
}
