//! `wirespeed switch`: one bridge over AF_XDP ports, driven by `wirespeed ctl`.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;
use wirespeed_port::{Backend, PortOptions, PortSpec};
use wirespeed_switch::{Bridge, DEFAULT_CTL};

/// Options of `wirespeed switch`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  wirespeed switch --port 1=xdp:veth1 --port 2=xdp:veth2\n  \
wirespeed ctl add-flow 'priority=100,in_port=1,actions=output:2'\n\n\
With no flows the bridge is a learning switch (priority=0,actions=normal). Hosts whose veth \
hands the switch TCP or UDP packets with partial checksums (checksum offload) must turn it \
off on their side: ethtool -K IFACE tx off."
)]
pub struct SwitchArgs {
    /// A port: [NUMBER=]SPEC, e.g. 1=xdp:veth1 (numbers default to 1, 2, ... in order).
    /// All ports share one UMEM, so forwarding moves descriptors.
    #[arg(long = "port", required = true)]
    pub ports: Vec<String>,
    /// Flows to install at start, one a line, in ovs-ofctl's syntax (add-flows).
    #[arg(long)]
    pub flows: Option<PathBuf>,
    /// The control socket `wirespeed ctl` talks to.
    #[arg(long, default_value = DEFAULT_CTL)]
    pub ctl: PathBuf,
    /// CPUs for the poll-mode thread (the first one is used), e.g. 1 or 2-3.
    #[arg(long)]
    pub pmd_cpus: Option<String>,
    /// Stop after this many seconds (default: until SIGINT or SIGTERM).
    #[arg(long)]
    pub duration: Option<f64>,
    /// AF_XDP mode for every port (see bench --help).
    #[arg(long, default_value = "auto", value_parser = |s: &str| s.parse::<wirespeed_port::xdp::XdpMode>())]
    pub xdp_mode: wirespeed_port::xdp::XdpMode,
    /// Replace XDP programs someone else attached to the ports' interfaces.
    #[arg(long)]
    pub force: bool,
    /// Print the port and bridge counters as one JSON object at exit.
    #[arg(long)]
    pub json: bool,
}

/// `N=SPEC` or `SPEC`, numbered from `default`.
fn parse_port(text: &str, default: u32) -> anyhow::Result<(u32, PortSpec)> {
    let (number, spec) = match text.split_once('=') {
        Some((n, spec)) => {
            let n: u32 = n
                .parse()
                .ok()
                .filter(|n| (1..0xff00).contains(n))
                .with_context(|| {
                    format!("--port {text}: port number '{n}' is not between 1 and 65279")
                })?;
            (n, spec)
        }
        None => (default, text),
    };
    let spec: PortSpec = spec.parse().with_context(|| format!("--port {text}"))?;
    if spec.backend != Backend::Xdp {
        bail!("--port {text}: the switch runs on AF_XDP ports only for now (xdp:IFACE)");
    }
    Ok((number, spec))
}

/// The first CPU of a list like "1", "2-3" or "1,3".
fn first_cpu(list: &str) -> anyhow::Result<usize> {
    list.split([',', '-'])
        .next()
        .and_then(|c| c.trim().parse().ok())
        .with_context(|| format!("--pmd-cpus {list}: expected a CPU list like 1 or 2-3"))
}

pub fn run(args: SwitchArgs) -> anyhow::Result<()> {
    let mut ports = Vec::new();
    for (i, text) in args.ports.iter().enumerate() {
        let port = parse_port(text, i as u32 + 1)?;
        if ports.iter().any(|(n, _): &(u32, PortSpec)| *n == port.0) {
            bail!("--port {text}: port number {} is used twice", port.0);
        }
        ports.push(port);
    }
    let flows = match &args.flows {
        Some(path) => Some(
            std::fs::read_to_string(path).with_context(|| format!("--flows {}", path.display()))?,
        ),
        None => None,
    };
    crate::caps::require("switch", true)?;
    let stop = crate::bench::stop_flag()?;
    if let Some(list) = &args.pmd_cpus {
        let cpu = first_cpu(list)?;
        let mut set = nix::sched::CpuSet::new();
        set.set(cpu)
            .with_context(|| format!("--pmd-cpus {list}: no CPU {cpu}"))?;
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
            .with_context(|| format!("--pmd-cpus {list}: pin to CPU {cpu}"))?;
    }
    let opts = PortOptions {
        xdp_mode: args.xdp_mode,
        force: args.force,
        ..PortOptions::default()
    };
    let mut bridge = Bridge::open(&ports, &opts).context("open the ports")?;
    if let Some(text) = flows {
        let answer = bridge.handle(&wirespeed_switch::Request {
            command: "add-flows".to_string(),
            args: vec![text],
        });
        if !answer.ok {
            bail!(
                "--flows {}: {}",
                args.flows
                    .as_ref()
                    .map_or(String::new(), |p| p.display().to_string()),
                answer.output
            );
        }
    }
    let (jobs_tx, jobs) = mpsc::channel();
    let _server = wirespeed_switch::control::listen(&args.ctl, jobs_tx)?;
    for (member, (n, _)) in ports.iter().enumerate() {
        let info = bridge.group().info(member);
        eprintln!(
            "wirespeed switch: port {n} = {} ({} mode)",
            info.spec, info.mode
        );
    }
    eprintln!(
        "wirespeed switch: ready (control socket {})",
        args.ctl.display()
    );
    let deadline = args
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    bridge.run(&jobs, || {
        !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d)
    })?;
    let answer = bridge.handle(&wirespeed_switch::Request {
        command: "dump-ports".to_string(),
        args: vec![],
    });
    if args.json {
        let c = bridge.counters;
        let mut ports_json = Vec::new();
        for (member, n) in bridge.numbers().to_vec().into_iter().enumerate() {
            let s = bridge.port_stats(member);
            ports_json.push(serde_json::json!({
                "port": n, "spec": bridge.group().info(member).spec, "rx_packets": s.rx_packets,
                "tx_packets": s.tx_packets, "copies": s.copies,
                "drops": s.drops.by_reason().iter().map(|(k, v)| (k.to_string(), *v)).collect::<std::collections::BTreeMap<_, _>>(),
            }));
        }
        let audit = bridge.group().audit();
        println!(
            "{}",
            serde_json::json!({
                "ports": ports_json,
                "unknown_port": c.unknown_port, "no_frame": c.no_frame, "to_controller": c.to_controller,
                "bridge_drops": wirespeed_switch::execute::DropReason::ALL.iter()
                    .map(|r| (r.name().to_string(), c.drops.get(*r))).collect::<std::collections::BTreeMap<_, _>>(),
                "frames": {"total": audit.total, "balanced": audit.balanced()},
            })
        );
    } else {
        eprintln!("{}", answer.output);
    }
    Ok(())
}
