//! The parts [`Bridge::open`](super::Bridge::open) puts a bridge together from: the AF_XDP
//! ports on a UMEM per poll-mode thread, the other backends' ports, the link states, the
//! threads' port sets, the shared rule state and the `--offload` fast path.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::time::Instant;

use wirespeed_port::packet::PacketPort;
use wirespeed_port::pcap::PcapPort;
use wirespeed_port::pipe::PipePort;
use wirespeed_port::tap::{TapDevice, TapPort};
use wirespeed_port::xdp::{XdpGroup, XdpMode, if_index, netns_cookie};
use wirespeed_port::{Backend, Port, PortError, PortOptions, PortSpec};
use wirespeed_xdp::AttachMode;
use wirespeed_xdp::ProgramBarrier;
use wirespeed_xdp::fast_path::{FastPath, MAX_PORTS};

use crate::dpif::pmd::Pmd;
use crate::dpif::port_links::PortLinks;
use crate::dpif::port_set::{OtherPort, PortSet};
use crate::offload::Offload;
use crate::ofproto::state::Ofproto;

/// Refuses more than one poll-mode thread when a port can serve only one.
pub(super) fn check_thread_count(
    ports: &[(u32, PortSpec)],
    threads: usize,
) -> Result<(), PortError> {
    let one_thread_only = |b: Backend| matches!(b, Backend::Pipe | Backend::Pcap);
    match ports.iter().find(|(_, s)| one_thread_only(s.backend)) {
        // An end of a pipe has one ring each way, for one thread; a recording is one
        // file, for one writer. Every thread sends.
        Some((n, spec)) if threads > 1 => Err(PortError::Unsupported(format!(
            "port {n} ({spec}): a {} port works with one poll-mode thread \
             (--pmd-cpus with one CPU)",
            spec.backend.name()
        ))),
        _ => Ok(()),
    }
}

/// The AF_XDP ports on one UMEM per poll-mode thread (one queue each when there are
/// several threads), their sockets registered with the fast path if the bridge offloads.
pub(super) fn open_xdp_groups(
    xdp: &[PortSpec],
    opts: &PortOptions,
    threads: usize,
    fast_path: Option<&mut FastPath>,
) -> Result<Vec<Option<XdpGroup>>, PortError> {
    let xdp_opts = PortOptions {
        program_attached: fast_path.as_ref().map(|f| f.mode()),
        // The datapath takes packets larger than a frame as chains: parsed from the head,
        // moved whole between these ports, gathered or counted where they go elsewhere.
        multi_buffer: true,
        ..opts.clone()
    };
    let groups: Vec<Option<XdpGroup>> = if xdp.is_empty() {
        (0..threads).map(|_| None).collect()
    } else if threads == 1 {
        vec![Some(XdpGroup::open(xdp, &xdp_opts)?)]
    } else {
        XdpGroup::open_queues(xdp, threads as u32, &xdp_opts)?
            .into_iter()
            .map(Some)
            .collect()
    };
    if let Some(fast_path) = fast_path {
        for (q, group) in groups.iter().enumerate() {
            let Some(group) = group else { continue };
            for (slot, spec) in xdp.iter().enumerate() {
                // One thread binds the specs' queues; N threads bind queues 0..N.
                let queue = if threads == 1 { spec.queue } else { q as u32 };
                fast_path.register(slot as u32, queue, group.socket_fd(slot))?;
            }
        }
    }
    Ok(groups)
}

/// The tap devices of the tap ports, one per interface (made now if there is none).
pub(super) fn open_taps(
    ports: &[(u32, PortSpec)],
) -> Result<HashMap<String, TapDevice>, PortError> {
    let mut taps = HashMap::new();
    for (_, spec) in ports.iter().filter(|(_, s)| s.backend == Backend::Tap) {
        if let Entry::Vacant(e) = taps.entry(spec.iface.clone()) {
            e.insert(TapDevice::open(spec)?);
        }
    }
    Ok(taps)
}

/// Every port's link state, watched by interface index (ports without an interface have none).
pub(super) fn port_links(ports: &[(u32, PortSpec)]) -> PortLinks {
    PortLinks::new(
        ports
            .iter()
            .map(|(_, s)| {
                s.backend
                    .has_interface()
                    .then(|| if_index(&s.iface))
                    .flatten()
            })
            .collect(),
    )
}

/// One poll-mode thread per AF_XDP group, each with the other backends' ports: every thread
/// sends on all of them, and each receives on its share.
pub(super) fn poll_mode_threads(
    ports: &[(u32, PortSpec)],
    opts: &PortOptions,
    groups: Vec<Option<XdpGroup>>,
    taps: &mut HashMap<String, TapDevice>,
    pmd_cpus: &[usize],
    links: &Arc<PortLinks>,
    clock: Instant,
) -> Result<Vec<Pmd>, PortError> {
    let threads = groups.len();
    let burst = opts.batch.max(1) as usize;
    let numbered: Vec<(u32, bool)> = ports
        .iter()
        .map(|(n, s)| (*n, s.backend == Backend::Xdp))
        .collect();
    let mut pmds = Vec::with_capacity(threads);
    for (i, group) in groups.into_iter().enumerate() {
        let mut others = Vec::new();
        let other_specs = ports.iter().filter(|(_, s)| s.backend != Backend::Xdp);
        for (k, (_, spec)) in other_specs.enumerate() {
            let receives = k % threads == i;
            let port_opts = PortOptions {
                rx: receives,
                ..opts.clone()
            };
            let port = open_other(spec, &port_opts, taps)?;
            others.push(OtherPort::new(port, receives, spec, &port_opts));
        }
        let set = PortSet::new(&numbered, group, others, burst, links.clone());
        let idle = wirespeed_port::Idle::new(opts.ring_size);
        pmds.push(Pmd::new(set, pmd_cpus.get(i).copied(), clock, burst, idle));
    }
    Ok(pmds)
}

/// The bridge's OpenFlow state: its ports, the default rule, and the offload with the
/// fast path's barrier when there is one.
pub(super) fn ofproto_for(
    ports: &[(u32, PortSpec)],
    fast_path: Option<FastPath>,
) -> Result<(Ofproto, Option<ProgramBarrier>), PortError> {
    let mut ofproto = Ofproto::new();
    for (n, _) in ports {
        ofproto.add_port(*n);
    }
    let Some(fast_path) = fast_path else {
        return Ok((ofproto, None));
    };
    let barrier = fast_path.barrier()?;
    // Slots as attach_fast_path gave them: the AF_XDP ports in order.
    let numbered: Vec<(u32, u32, u32)> = ports
        .iter()
        .filter(|(_, s)| s.backend == Backend::Xdp)
        .enumerate()
        .filter_map(|(slot, (n, s))| Some((*n, if_index(&s.iface)?, slot as u32)))
        .collect();
    ofproto.offload = Some(Offload::new(fast_path, &numbered));
    Ok((ofproto, Some(barrier)))
}

/// Loads the fast path and attaches it to every interface of `xdp` (in the mode `opts` asks
/// for; `auto` falls back to skb mode), each interface becoming the slot of its index.
pub(super) fn attach_fast_path(
    xdp: &[PortSpec],
    opts: &PortOptions,
) -> Result<FastPath, PortError> {
    let mut ifaces: Vec<&str> = Vec::new();
    for spec in xdp {
        if ifaces.contains(&spec.iface.as_str()) {
            return Err(PortError::Unsupported(format!(
                "--offload: {} is named by two ports; the fast path tells ports apart by \
                 interface",
                spec.iface
            )));
        }
        ifaces.push(&spec.iface);
    }
    if ifaces.is_empty() || ifaces.len() > MAX_PORTS as usize {
        return Err(PortError::Unsupported(format!(
            "--offload: needs 1 to {MAX_PORTS} AF_XDP ports, not {}",
            ifaces.len()
        )));
    }
    let (mode, fall_back) = match opts.xdp_mode {
        XdpMode::Skb => (AttachMode::Skb, false),
        XdpMode::Auto => (AttachMode::Native, true),
        _ => (AttachMode::Native, false),
    };
    let mut fast_path = FastPath::attach(&ifaces, mode, fall_back, opts.force)?;
    for (slot, iface) in ifaces.iter().enumerate() {
        let ifindex = if_index(iface).ok_or_else(|| PortError::NoInterface(iface.to_string()))?;
        fast_path.add_port(slot as u32, ifindex)?;
    }
    // Without the kernel's tracepoints the fast path still forwards; what the kernel then
    // fails to send is lost uncounted.
    let watched = netns_cookie()
        .map_err(|e| e.to_string())
        .and_then(|cookie| fast_path.watch_transmits(cookie).map_err(|e| e.to_string()));
    if let Err(e) = watched {
        eprintln!(
            "wirespeed switch: note: --offload cannot watch the kernel's transmits ({e}): \
             packets it fails to send after a redirect are neither counted nor sent another way"
        );
    }
    Ok(fast_path)
}

/// Opens a port of another backend than AF_XDP. Each thread has a port of its own on a tap
/// device, all on the descriptor in `taps` (a device takes one open).
pub(super) fn open_other(
    spec: &PortSpec,
    opts: &PortOptions,
    taps: &mut HashMap<String, TapDevice>,
) -> Result<Box<dyn Port + Send>, PortError> {
    match spec.backend {
        Backend::Packet => Ok(Box::new(PacketPort::open(spec, opts)?)),
        Backend::Tap => {
            let device = match taps.entry(spec.iface.clone()) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => e.insert(TapDevice::open(spec)?),
            };
            Ok(Box::new(TapPort::on(device, opts)?))
        }
        Backend::Pipe => Ok(Box::new(PipePort::open(spec, opts)?)),
        Backend::Pcap => Ok(Box::new(PcapPort::open(spec, opts)?)),
        Backend::Xdp => unreachable!("AF_XDP ports go in the group"),
    }
}
