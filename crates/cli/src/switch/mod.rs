//! `wirespeed switch`: one bridge, its poll-mode threads, driven by `wirespeed ctl`.

mod ipfix;
mod openflow;
mod packet_in_pcap;
mod start_tables;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Args;

use wirespeed_port::PortSpec;
use wirespeed_switch::ofctl::port_names::PortNames;
use wirespeed_switch::tunnel::TunnelConfig;
use wirespeed_switch::{Bridge, DEFAULT_CTL, Work};

/// Options of `wirespeed switch`.
#[derive(Debug, Args)]
#[command(
    after_help = "Example:\n  wirespeed switch --port 1=xdp:veth1 --port 2=xdp:veth2\n  \
wirespeed ctl add-flow 'priority=100,in_port=1,actions=output:2'\n\n\
AF_XDP ports of one poll-mode thread share a UMEM, so forwarding between them moves \
descriptors; packet:, tap:, pipe: and pcap: ports are copied to and from (dump-ports counts \
the copies); a pipe: or pcap: port takes one poll-mode thread. With \
--pmd-cpus listing N CPUs there are N poll-mode threads and thread i serves receive queue i of \
every AF_XDP port, so those interfaces need N queues (veth: numrxqueues N numtxqueues N).\n\n\
The bridge starts as a learning switch: one rule, priority=0,actions=normal. --flows and \
add-flow add to it, as ovs-ofctl add-flows does, so what no rule of theirs takes is still \
switched; a rule of the same match and priority replaces it (priority=0,actions=drop: drop \
what no other rule takes). TCP and UDP \
checksums a host left partial (transmit checksum offload, veth's default) are completed \
before the packet goes on, so hosts need no ethtool setting.\n\n\
--offload forwards in the kernel: the first packet of a flow comes to the switch, and when \
its decision is exactly output:N to another AF_XDP port, or normal with the destination \
learned behind another AF_XDP port (no rewrite, no flood, rules without timeouts) and it is Ethernet (at most one 802.1Q tag) / IPv4 without options, \
not fragmented / TCP or UDP with a complete checksum, or ICMP, the flow is installed in the XDP program's table and its \
next packets never reach user space. Rule counters and dump-ports include them; a rule \
change takes out the entries it could decide otherwise (as it does cached flows), so does \
the destination of a normal entry moving or ageing out, and a flow \
idle for 10 s leaves it. Only the queues the \
switch has sockets on are its port: other queues' packets go to the stack as before. The \
kernel sends these packets with XDP redirect, so a veth port's peer must be able to receive \
XDP frames: on the peer, an XDP program or GRO on (ethtool -K PEER gro on). Where the kernel \
cannot send them, it drops at most one batch: the port is then blocked (dump-ports: failed=N, \
blocked), its flows go through user space, a line on stderr says why, and the kernel tries \
the port again after 1 s, then less and less often (at most every 64 s).\n\n\
OpenFlow 1.3: --openflow ptcp: takes clients such as ovs-ofctl -O OpenFlow13 ... \
tcp:127.0.0.1:6653, and --controller tcp:HOST:PORT dials a controller (faucet, an os-ken \
application), over the same rules ctl changes. A bridge with a controller to dial starts \
without the normal rule; while none is connected, --fail-mode standalone switches as a \
learning switch and secure forwards by the flows installed only. pssl: and ssl: are the \
same over TLS, with --private-key, --certificate and --ca-cert as ovs-vswitchd takes them \
(each side checks the other's certificate against the CA; the controller's host name is not \
checked, as in Open vSwitch). Meters (METER_MOD, and meter=controller, which limits \
packet-ins) and groups (all, select, indirect, fast_failover) come from a controller or from \
ctl (add-meter, add-group). Bundles (ovs-ofctl --bundle) commit their flow and group changes \
as one, all or none.\n\n\
--ipfix HOST:PORT exports flow records over IPFIX (RFC 7011, UDP) as Open vSwitch does, from \
counters the datapath keeps anyway: with it on, each megaflow is exact on a record's fields \
(addresses, protocol, ports or ICMP type and code, VLAN, input port, destination MAC, a \
tunnel's VNI and outer addresses), so \
it counts one flow, and the fast path's entries (--offload) are flows already; the only \
work added per packet is TCP's flags ORed into the flow's megaflow (or its kernel entry, \
when a flag is new). A record per IPv4 or IPv6 flow (not ARP and other non-IP traffic): addresses, \
ports (ICMP: type * 256 + code as the destination port), protocol, VLAN id, \
ingressInterface and egressInterface (OpenFlow port numbers; egress 0 when the decision is \
not one port: several outputs, a flood, a drop, or normal to an address not learned), \
packetDeltaCount, octetDeltaCount (IP bytes: each frame less its Ethernet and VLAN header, \
so a short frame's padding counts), layer2OctetDeltaCount (frame bytes, no FCS), \
flowStartNanoseconds and flowEndNanoseconds (and milliseconds), flowEndReason, \
tcpControlBits (TCP's flags since the last report; a flow the kernel forwards: since its \
entry was made); a flow that \
went out through a tunnel port, or else came in by one, also the tunnel in Open vSwitch's \
enterprise elements (VMware, 6876): outer source and destination address, protocol, \
destination port (0 for GRE, protocol 47), tunnelType (1 VXLAN, 2 GRE, 7 Geneve), tunnelKey \
(the VNI in three bytes, GRE's key in four, under templates of their own). The counters \
are read once a second (beyond 8192 megaflows a thread, a share a second, each twice per idle \
timeout): a flow is reported --ipfix-active-timeout after its report \
began, once more when idle for --ipfix-idle-timeout, and every flow when the switch stops; \
times are to about that second. Templates go at start and every \
--ipfix-template-interval. The counters see every packet, so --ipfix-sampling N samples \
flows: the flows whose key hashes to a multiple of N (about 1 in N, the same every run) are \
reported with all their packets, the others not at all; the options record says so \
(selectorAlgorithm 3, samplingSize 1, samplingPopulation N). dump-cache and --json count \
records, messages and send errors.\n\nTunnels: --port 10=vxlan:remote_ip=IP|flow[,local_ip=IP][,key=VNI|flow][,dst_port=4789][,df_default=true][,csum=false][,ttl=64] (geneve: likewise, dst_port 6081; gre: Ethernet over GRE, IP protocol 47, no dst_port, key=N of 32 bits sent in the GRE header or no key by default, csum=true adds GRE's checksum), as Open vSwitch's options: for a port of type vxlan, geneve or gre. The tunnel is carried over the bridge's xdp: port whose interface has local_ip, or by default the one the host routes remote_ip through (its first IPv4 address is local_ip): the underlay. What the underlay receives as UDP to local_ip on the tunnel's port (GRE: IP protocol 47 to local_ip) from remote_ip (and the key's VNI; key=flow takes any) enters the bridge on the tunnel port without its outer headers, its flow carrying tun_id (the VNI), tun_src, tun_dst and, for Geneve, tun_opts (the first option's eight bytes, raw: class, type, length, data); everything else the underlay receives is the bridge's, as before, but for packets to local_ip (below). An output to the tunnel port pushes Ethernet/IPv4/UDP/VXLAN or Geneve, or Ethernet/IPv4/GRE (the VNI is the key, or the flow's tun_id with key=flow: set_field:5->tun_id), the UDP source port from the inner flow, DF as df_default says, and queues it on the underlay. The next hop's address comes from the host's neighbour table, else from ARP the switch sends; the switch answers ARP and ping for local_ip itself (the underlay's packets do not reach the host's stack), and takes any other packet to local_ip as the tunnel endpoint's, never the bridge's. dump-ports counts each tunnel port's encapsulated and decapsulated packets and the drops: no_route, no_neighbour (an ARP request went out; the packets before its answer are dropped) and too_big (longer than the underlay's MTU once encapsulated: dropped, never cut; with DF set, or IPv6, answered with ICMP fragmentation needed or packet too big from the packet's destination, so the sender learns the MTU that fits). remote_ip=flow makes one port for many far ends (as Antrea uses Open vSwitch): it takes what comes from any far end no other port names (tun_src says which) and sends each packet to its flow's tun_dst (set_field:IP->tun_dst; a flow that set none is counted no_route); without local_ip its underlay is the bridge's one xdp: port with an IPv4 address. --offload leaves tunnel ports' flows to user space."
)]
pub struct SwitchArgs {
    /// A port: [NUMBER=]SPEC, e.g. 1=xdp:veth1, 3=packet:eth0, 4=tap:ws0 (the host's own
    /// stack through tap device ws0, made if missing), 5=pipe:gen0 (another process, at the
    /// other end of pipe gen0) or 6=pcap:rx=in.pcap,tx=out.pcapng (in.pcap replayed into
    /// the bridge once, what the port sends recorded in out.pcapng; ,pace=1 replays at the
    /// recorded pace; - is standard input or output), or a tunnel port:
    /// 10=vxlan:remote_ip=IP|flow, 10=geneve:... or 10=gre:... (see below) (numbers default
    /// to 1, 2, ... in order).
    #[arg(long = "port", required = true)]
    pub ports: Vec<String>,
    /// A file of flows to install at start, one a line, in ovs-ofctl's syntax (as
    /// `ctl add-flows FILE` takes them); they may name the groups and meters of --groups
    /// and --meters.
    #[arg(long, value_name = "FILE")]
    pub flows: Option<PathBuf>,
    /// A file of groups to install at start, one a line, as `ctl add-group` takes them
    /// (group_id=1,type=select,bucket=output:2,bucket=output:3).
    #[arg(long, value_name = "FILE")]
    pub groups: Option<PathBuf>,
    /// A file of meters to install at start, one a line, as `ctl add-meter` takes them
    /// (meter=1,pktps,bands=type=drop,rate=1000).
    #[arg(long, value_name = "FILE")]
    pub meters: Option<PathBuf>,
    /// The control socket `wirespeed ctl` talks to.
    #[arg(long, default_value = DEFAULT_CTL)]
    pub ctl: PathBuf,
    /// CPUs for the poll-mode threads, one thread pinned to each, e.g. 1 or 0,1 or 2-3
    /// (default: one thread, not pinned). Thread i receives on queue i of every AF_XDP port.
    #[arg(long)]
    pub pmd_cpus: Option<String>,
    /// Write packets sent to the controller (actions=controller) to this pcap file, `-` for
    /// standard output (default: one line each on stderr).
    #[arg(long, value_name = "FILE")]
    pub controller_pcap: Option<PathBuf>,
    /// Stop after this many seconds (default: until SIGINT, SIGTERM or SIGHUP).
    #[arg(long)]
    pub duration: Option<f64>,
    /// Ring, frame and batch sizes, XDP mode: the same for every port (frames per port).
    #[command(flatten)]
    pub port: crate::args::port_flags::PortFlags,
    /// Forward flows the kernel can carry out exactly in the XDP program, without user
    /// space (see below).
    #[arg(long)]
    pub offload: bool,
    /// Print the port and bridge counters as one JSON object at exit.
    #[arg(long)]
    pub json: bool,
    #[arg(long, value_name = "ADDR", help = crate::run::metrics::HELP)]
    pub metrics: Option<String>,
    #[command(flatten)]
    pub openflow: openflow::OpenFlowArgs,
    #[command(flatten)]
    pub ipfix: ipfix::IpfixArgs,
}

/// A `--port`: a port on a device or file, or a tunnel port.
enum AnyPort {
    Device(u32, PortSpec),
    Tunnel(u32, TunnelConfig),
}

impl AnyPort {
    fn number(&self) -> u32 {
        match self {
            AnyPort::Device(n, _) | AnyPort::Tunnel(n, _) => *n,
        }
    }
}

/// `N=SPEC` or `SPEC`, a tunnel's or any other's.
fn parse_any_port(text: &str, default: u32) -> anyhow::Result<AnyPort> {
    let (number, spec) = split_number(text, default)?;
    if TunnelConfig::is_tunnel(spec) {
        let config: TunnelConfig = spec.parse().with_context(|| format!("--port {text}"))?;
        return Ok(AnyPort::Tunnel(number, config));
    }
    let (number, spec) = parse_port(text, default)?;
    Ok(AnyPort::Device(number, spec))
}

/// `N=SPEC` or `SPEC`: the number (`default` when none) and the spec. A spec holds '=' only
/// after its ':' (`pcap:rx=IN`), so an '=' before the first ':' ends a number.
fn split_number(text: &str, default: u32) -> anyhow::Result<(u32, &str)> {
    let numbered = text.split_once('=').filter(|(n, _)| !n.contains(':'));
    match numbered {
        Some((n, spec)) => {
            let n: u32 = n
                .parse()
                .ok()
                .filter(|n| (1..0xff00).contains(n))
                .with_context(|| {
                    format!("--port {text}: port number '{n}' is not between 1 and 65279")
                })?;
            Ok((n, spec))
        }
        None => Ok((default, text)),
    }
}

/// `N=SPEC` or `SPEC`, numbered from `default`, for a port on a device or file.
fn parse_port(text: &str, default: u32) -> anyhow::Result<(u32, PortSpec)> {
    let (number, spec) = split_number(text, default)?;
    let spec: PortSpec = spec.parse().with_context(|| format!("--port {text}"))?;
    if spec.many_queues() {
        bail!(
            "--port {text}: the switch serves queues with its poll-mode threads: name one queue \
             (xdp:{}@N), or give xdp:{} with --pmd-cpus, one CPU per queue",
            spec.iface,
            spec.iface
        );
    }
    Ok((number, spec))
}

/// What the ports said when they opened (fallbacks taken, options they do not use, a tap
/// device that is down), once a port.
fn port_notes(bridge: &mut Bridge) -> Vec<String> {
    let numbers = bridge.numbers().to_vec();
    let mut notes: Vec<String> = Vec::new();
    for snapshot in bridge.snapshots() {
        for (n, (info, _, _)) in numbers.iter().zip(&snapshot.ports) {
            for note in &info.notes {
                let line = format!("port {n} ({}): {note}", info.spec);
                if !notes.contains(&line) {
                    notes.push(line);
                }
            }
        }
    }
    notes
}

pub fn run(args: SwitchArgs) -> anyhow::Result<()> {
    args.port.validate()?;
    crate::run::meter::check_seconds("--duration", args.duration)?;
    let (ports, tunnels) = numbered_ports(&args.ports)?;
    let specs: Vec<(u32, String)> = ports.iter().map(|(n, s)| (*n, s.to_string())).collect();
    let names = PortNames::of_bridge(
        specs.iter().map(|(n, s)| (*n, s.as_str())),
        tunnels.iter().map(|(n, config)| (*n, config.kind)),
    );
    let start_tables = start_tables::read(&args, &names)?;
    let cpus = pmd_cpus(&args)?;
    let to_stderr = report_to_stderr(&args, &ports)?;
    let backends: Vec<_> = ports.iter().map(|(_, spec)| spec.backend).collect();
    crate::run::caps::require_for("switch", &backends)?;
    let stop = crate::run::signals::stop_flag()?;
    // Everything that can refuse the start comes before a port or a file is opened: a
    // refused start must not empty a capture file (perhaps one a running switch writes).
    let numbers: Vec<u32> = ports
        .iter()
        .map(|(n, _)| *n)
        .chain(tunnels.iter().map(|(n, _)| *n))
        .collect();
    start_tables::check(&args, &start_tables, &numbers)?;
    let targets = args.openflow.targets()?;
    let ipfix = args.ipfix.config()?;
    if args.openflow.enabled() && args.controller_pcap.is_some() {
        bail!(
            "--controller-pcap: with --openflow or --controller, packets for the controller go \
             to the OpenFlow controllers as PACKET_IN"
        );
    }
    let metrics = crate::run::metrics::bind(args.metrics.as_deref())?;
    let (jobs_tx, jobs) = mpsc::channel::<Work>();
    let _server = wirespeed_switch::bridge::control::listen(&args.ctl, jobs_tx.clone())?;
    let (sessions, controller) = match args.openflow.enabled() {
        true => {
            let (sessions, controller) = openflow::sessions();
            (Some(sessions), controller)
        }
        false => (None, open_controller(&args)?),
    };
    let ifaces: Vec<&str> = ports.iter().map(|(_, spec)| spec.iface.as_str()).collect();
    let opts = args.port.options(&ifaces, true, true);
    let mut bridge = open_bridge(&ports, &tunnels, &opts, &cpus, controller, args.offload)?;
    if let Some(config) = ipfix {
        bridge
            .export_flows(config)
            .with_context(|| format!("--ipfix {}", config.collector))?;
    }
    if let Some(sessions) = sessions.clone() {
        let datapath_id = openflow::start(
            &args.openflow,
            &targets,
            &mut bridge,
            sessions,
            jobs_tx.clone(),
        )?;
        let mut doors: Vec<String> = args.openflow.listen.clone();
        doors.extend(args.openflow.controllers.iter().cloned());
        eprintln!(
            "wirespeed switch: OpenFlow 1.3: datapath id {datapath_id:016x}, {} ({} fail mode)",
            doors.join(", "),
            args.openflow.fail_mode.name()
        );
    }
    start_tables::load(&args, &start_tables, &mut bridge)?;
    if let Some(s) = sessions.clone() {
        bridge.set_metrics_extra(std::sync::Arc::new(move |e| openflow::metrics(e, &s)));
    }
    let scrape = bridge.metrics();
    let _metrics = crate::run::metrics::serve("switch", metrics, move || scrape.render())?;
    announce_ready(&mut bridge, &ports, cpus.len(), &args.ctl);
    let deadline = args
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let ran = bridge.run(&jobs, || {
        !stop.load(Ordering::Relaxed) && deadline.is_none_or(|d| Instant::now() < d)
    });
    let closed = bridge.close_controller();
    ran.context("the poll-mode threads")?;
    // The summary comes whatever became of the controller's file.
    let openflow = sessions.as_deref().map(openflow::summary);
    report(&mut bridge, args.json, to_stderr, openflow);
    let summary = closed.map_err(anyhow::Error::msg)?;
    if !summary.is_empty() {
        eprintln!("wirespeed switch: {summary}");
    }
    Ok(())
}

/// `--pmd-cpus`: the CPUs of the poll-mode threads (none: one thread, not pinned). With
/// several, thread i serves queue i of every AF_XDP port, so no port names a queue.
fn pmd_cpus(args: &SwitchArgs) -> anyhow::Result<Vec<usize>> {
    let cpus = match &args.pmd_cpus {
        Some(list) => crate::args::cpus::parse("--pmd-cpus", list)?,
        None => Vec::new(),
    };
    if cpus.len() > 1
        && let Some(text) = args
            .ports
            .iter()
            .find(|t| t.contains("xdp:") && t.contains('@'))
    {
        bail!(
            "--port {text}: with {} poll-mode threads thread i serves queue i of every AF_XDP \
             port; leave out @QUEUE",
            cpus.len()
        );
    }
    Ok(cpus)
}

/// Whether the report goes to standard error: when a port or `--controller-pcap` writes
/// packets to standard output (at most one may).
fn report_to_stderr(args: &SwitchArgs, ports: &[(u32, PortSpec)]) -> anyhow::Result<bool> {
    let specs: Vec<&PortSpec> = ports.iter().map(|(_, spec)| spec).collect();
    let controller_to_stdout = args.controller_pcap.as_deref() == Some(Path::new("-"));
    let port_to_stdout = crate::run::report_to::check_std_streams(&specs, true, true)?;
    if port_to_stdout && controller_to_stdout {
        bail!("a port and --controller-pcap both write standard output ('-'); one at most can");
    }
    Ok(port_to_stdout || controller_to_stdout)
}

/// Where packets sent to the controller go: `--controller-pcap`, or the log.
fn open_controller(args: &SwitchArgs) -> anyhow::Result<Box<dyn wirespeed_switch::PacketInSink>> {
    Ok(match &args.controller_pcap {
        Some(path) => Box::new(
            packet_in_pcap::PacketInPcap::create(&path.to_string_lossy())
                .with_context(|| format!("--controller-pcap {}", path.display()))?,
        ),
        None => Box::new(wirespeed_switch::PacketInLog::default()),
    })
}

/// The bridge's ports on devices or files, and its tunnel ports.
type Ports = (Vec<(u32, PortSpec)>, Vec<(u32, TunnelConfig)>);

/// The `--port` arguments numbered from 1 (or as written), each interface once.
fn numbered_ports(texts: &[String]) -> anyhow::Result<Ports> {
    let (mut ports, mut tunnels): Ports = (Vec::new(), Vec::new());
    for (i, text) in texts.iter().enumerate() {
        let port = parse_any_port(text, i as u32 + 1)?;
        let number = port.number();
        let used =
            ports.iter().any(|(n, _)| *n == number) || tunnels.iter().any(|(n, _)| *n == number);
        if used {
            bail!("--port {text}: port number {number} is used twice");
        }
        let port = match port {
            AnyPort::Tunnel(n, config) => {
                tunnels.push((n, config));
                continue;
            }
            AnyPort::Device(n, spec) => (n, spec),
        };
        if let Some((n, spec)) = ports.iter().find(|(_, s)| s.same_place(&port.1)) {
            bail!(
                "--port {text}: {} is already port {n} ({spec}); a bridge takes each interface \
                 once (its floods would come back to the hosts that sent them)",
                port.1.iface
            );
        }
        ports.push(port);
    }
    if ports.is_empty() {
        bail!(
            "--port: a bridge of tunnel ports only has no underlay; add the xdp: port they are carried over"
        );
    }
    Ok((ports, tunnels))
}

/// Opens the bridge's ports, saying what to change when a port has too few queues.
fn open_bridge(
    ports: &[(u32, PortSpec)],
    tunnels: &[(u32, TunnelConfig)],
    opts: &wirespeed_port::PortOptions,
    cpus: &[usize],
    controller: Box<dyn wirespeed_switch::PacketInSink>,
    offload: bool,
) -> anyhow::Result<Bridge> {
    match Bridge::open(ports, tunnels, opts, cpus, controller, offload) {
        Ok(bridge) => Ok(bridge),
        Err(e @ wirespeed_port::PortError::NoQueue { .. }) if cpus.len() > 1 => {
            Err(e).context(format!(
                "open the ports: --pmd-cpus gives {} poll-mode threads, one per receive queue, \
                 so every AF_XDP port needs {} queues (veth: ip link add ... numrxqueues {} \
                 numtxqueues {}; a NIC: ethtool -L IFACE combined {})",
                cpus.len(),
                cpus.len(),
                cpus.len(),
                cpus.len(),
                cpus.len()
            ))
        }
        Err(e) => Err(e).context("open the ports"),
    }
}

/// The start-up lines: the bridge as `show` prints it, notes on its ports, then "ready".
fn announce_ready(bridge: &mut Bridge, ports: &[(u32, PortSpec)], threads: usize, ctl: &Path) {
    for line in bridge.handle(&show_request()).output.lines() {
        match line.strip_prefix("wirespeed switch: ") {
            Some(ours) => eprintln!("wirespeed switch: {ours}"),
            None if line.starts_with(' ') => eprintln!("wirespeed switch:{line}"),
            None => eprintln!("wirespeed switch: {line}"),
        }
    }
    for note in port_notes(bridge) {
        eprintln!("wirespeed switch: note: {note}");
    }
    for note in unserved_queues(ports, threads.max(1)) {
        eprintln!("wirespeed switch: note: {note}");
    }
    eprintln!("wirespeed switch: ready (control socket {})", ctl.display());
}

/// The closing report: JSON for scripts, or the port table as `dump-ports` prints it.
fn report(bridge: &mut Bridge, json: bool, to_stderr: bool, openflow: Option<serde_json::Value>) {
    let snapshots = bridge.snapshots();
    if json {
        let mut json = wirespeed_switch::bridge::summary::summary_json(bridge, &snapshots);
        if let Some(openflow) = openflow {
            json["openflow"] = openflow;
        }
        if let Some((config, stats)) = bridge.flow_export() {
            json["ipfix"] = ipfix::summary(&config, &stats);
        }
        crate::run::report_to::report(&format!("{json}\n"), to_stderr);
    } else {
        let answer = bridge.handle(&wirespeed_switch::Request {
            command: "dump-ports".to_string(),
            args: vec![],
        });
        eprintln!("{}", answer.output);
    }
}

/// The AF_XDP ports with receive queues no poll-mode thread serves: our program passes
/// those queues' packets to the kernel's stack, so the switch never sees them.
fn unserved_queues(ports: &[(u32, PortSpec)], threads: usize) -> Vec<String> {
    ports
        .iter()
        .filter(|(_, spec)| spec.backend == wirespeed_port::Backend::Xdp)
        .filter_map(|(n, spec)| {
            let queues = wirespeed_port::xdp::rx_queue_count(&spec.iface) as usize;
            (queues > threads).then(|| {
                format!(
                    "port {n} ({spec}): {} has {queues} receive queues and the switch serves \
                     {threads}; the others' packets go to the kernel's stack (--pmd-cpus with \
                     {queues} CPUs serves them all)",
                    spec.iface
                )
            })
        })
        .collect()
}

fn show_request() -> wirespeed_switch::Request {
    wirespeed_switch::Request {
        command: "show".to_string(),
        args: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::parse_port;

    #[test]
    fn ports_are_numbered_and_name_one_queue() {
        let (n, spec) = parse_port("7=xdp:eth0@2", 1).unwrap();
        assert_eq!((n, spec.queue), (7, 2));
        assert_eq!(parse_port("xdp:eth0", 3).unwrap().0, 3);
        let (n, spec) = parse_port("pcap:rx=a.pcap,tx=b.pcap", 2).unwrap();
        assert_eq!((n, spec.iface.as_str()), (2, "rx=a.pcap,tx=b.pcap"));
        assert_eq!(parse_port("4=pcap:tx=b.pcap", 1).unwrap().0, 4);
        let e = format!("{:#}", parse_port("1=xdp:eth0@all", 1).unwrap_err());
        assert!(
            e.contains("--port 1=xdp:eth0@all: the switch serves queues"),
            "{e}"
        );
        let e = format!("{:#}", parse_port("0=xdp:eth0", 1).unwrap_err());
        assert!(
            e.contains("port number '0' is not between 1 and 65279"),
            "{e}"
        );
    }
}
