//! `wirespeed pcap-run`: runs a libpcap program with libwirespeed_pcap.so preloaded, so that
//! its `xdp:` devices are wirespeed ports (crates/pcap-shim). The program is exec'd: its
//! exit status, signals and terminal are its own. A broker (`broker.rs`) keeps our
//! privileges beside it, for programs that drop theirs before they open a device.

pub mod broker;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use wirespeed_port::xdp::XdpMode;

/// The library's file name, as cargo builds it.
const LIBRARY: &str = "libwirespeed_pcap.so";

/// Where a different library can be named (a packaged install, a test of another build).
const LIBRARY_VAR: &str = "WIRESPEED_PCAP_LIB";

/// Options of `wirespeed pcap-run`.
#[derive(Debug, Args)]
#[command(after_help = "\
Inside PROGRAM, a device named xdp:IFACE (every receive queue of IFACE), xdp:IFACE@Q (queue Q) \
or xdp:IFACE@all opens an AF_XDP port, which takes the packets of its queues from the kernel's \
stack (all of them, whatever the filter): on an interface with addresses that needs --take. \
Every other device (tcpdump -i lo), every file \
(tcpdump -r) and every call the library does not take over go to the real libpcap. \
pcap_findalldevs (tcpdump -D) lists an xdp: device for each interface.\n\n\
Everything privileged happens when the program activates the device, so programs that give \
up root after opening it (tcpdump -Z, Debian's default user tcpdump) keep working. AF_XDP sees \
what the interface receives: -Q out and -Q inout are refused. Filters are compiled by the \
real libpcap and run in user space. Several processes can share an interface, one queue \
each (xdp:eth0@0 for one, xdp:eth0@1 for another).\n\n\
Where AppArmor enforces a profile on the program (Ubuntu's tcpdump), the profile must allow \
AF_XDP sockets and the library: see README.md, \"libpcap programs\".\n\n\
Examples:\n  wirespeed pcap-run tcpdump -i xdp:veth1 -w out.pcap 'udp port 53'\n  \
wirespeed pcap-run tcpdump -i xdp:eth0@1 -n -c 100\n  \
wirespeed pcap-run tshark -i xdp:veth1 -c 1000 -w out.pcapng\n  \
wirespeed pcap-run --xdp-mode skb -- my-pcap-tool --iface xdp:eth0")]
pub struct PcapRunArgs {
    /// AF_XDP mode: auto (zero-copy, then native copy, then skb), zc, copy, native, skb.
    #[arg(long, default_value = "auto")]
    pub xdp_mode: XdpMode,
    /// Frames in each port's buffer area (default: 160 MiB of frames, or the program's
    /// buffer size when larger).
    #[arg(long)]
    pub frames: Option<u32>,
    /// Entries in each ring (a power of two from 64 to 65536).
    #[arg(long, default_value_t = 65536)]
    pub ring_size: u32,
    /// Say on standard error what each xdp: device opened as (mode, frames, notes).
    #[arg(short, long)]
    pub verbose: bool,
    /// Open xdp: devices on interfaces with addresses too. An xdp: device takes the packets
    /// it captures (all of its queues', whatever the filter) from the kernel's stack, so
    /// the host stops receiving there while it runs; without --take that is refused.
    #[arg(long)]
    pub take: bool,
    /// The program and its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "PROGRAM [ARGS]"
    )]
    pub command: Vec<OsString>,
}

pub fn run(args: PcapRunArgs) -> anyhow::Result<()> {
    if !args.ring_size.is_power_of_two() || !(64..=65536).contains(&args.ring_size) {
        bail!(
            "--ring-size {}: must be a power of two from 64 to 65536",
            args.ring_size
        );
    }
    if args.frames.is_some_and(|f| f < 2 * 64) {
        bail!(
            "--frames {}: must be at least 128",
            args.frames.unwrap_or(0)
        );
    }
    let library = library()?;
    let (program, rest) = args.command.split_first().context("no program to run")?;
    // The UMEM is locked memory: a program without CAP_IPC_LOCK (dumpcap) needs the limit.
    // Without CAP_SYS_RESOURCE this fails, and the library sizes its ports to the limit.
    let _ = nix::sys::resource::setrlimit(
        nix::sys::resource::Resource::RLIMIT_MEMLOCK,
        nix::sys::resource::RLIM_INFINITY,
        nix::sys::resource::RLIM_INFINITY,
    );
    let broker = broker::start()?;
    let mut command = std::process::Command::new(program);
    command
        .args(rest)
        .env("LD_PRELOAD", preload(&library))
        .env(wirespeed_xdp::handover::BROKER_VAR, broker)
        .env("WIRESPEED_PCAP_XDP_MODE", args.xdp_mode.name())
        .env("WIRESPEED_PCAP_RING_SIZE", args.ring_size.to_string())
        .env(
            "WIRESPEED_PCAP_VERBOSE",
            if args.verbose { "1" } else { "0" },
        )
        .env("WIRESPEED_PCAP_TAKE", if args.take { "1" } else { "0" });
    if let Some(frames) = args.frames {
        command.env("WIRESPEED_PCAP_FRAMES", frames.to_string());
    }
    // exec returns only when it failed: exit as a shell (env, nohup, timeout) does, 127 for
    // no such program and 126 for one that cannot be run, so scripts tell it from the
    // program's own failure.
    let e = command.exec();
    eprintln!(
        "wirespeed: error: run {}: {e}",
        Path::new(program).display()
    );
    std::process::exit(match e.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    })
}

/// The library: $WIRESPEED_PCAP_LIB, or next to this executable (where cargo builds both),
/// or in ../lib/wirespeed/ from it (an install under a prefix).
fn library() -> anyhow::Result<PathBuf> {
    if let Some(named) = std::env::var_os(LIBRARY_VAR) {
        let path = PathBuf::from(named);
        if !path.is_file() {
            bail!("{LIBRARY_VAR}={}: no such file", path.display());
        }
        return absolute(path);
    }
    let exe = std::env::current_exe().context("find this executable")?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    let places = [
        dir.join(LIBRARY),
        dir.join("../lib/wirespeed").join(LIBRARY),
    ];
    match places.iter().find(|p| p.is_file()) {
        Some(p) => absolute(p.clone()),
        None => bail!(
            "{LIBRARY} is not next to {} (build it: cargo build --release -p wirespeed-pcap-shim; \
             or name it in {LIBRARY_VAR})",
            exe.display()
        ),
    }
}

fn absolute(path: PathBuf) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(&path).with_context(|| format!("{}", path.display()))
}

/// LD_PRELOAD with the library first and what the environment preloads already after it.
fn preload(library: &Path) -> OsString {
    let mut value = library.as_os_str().to_os_string();
    if let Some(existing) = std::env::var_os("LD_PRELOAD").filter(|v| !v.is_empty()) {
        value.push(" ");
        value.push(existing);
    }
    value
}
