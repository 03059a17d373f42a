//! Tunnel ports (VXLAN, Geneve, GRE): ports of the bridge with no device of their own, carried
//! over an `xdp:` port of the bridge (the underlay) that has an IPv4 address of the host.
//!
//! - receive: a poll-mode thread hands what an underlay receives to its [`TunnelPlane`]
//!   first: UDP to a tunnel's local address and port, or GRE to it, is popped in place and
//!   enters the pipeline on the tunnel port with `tun_id`, `tun_src`, `tun_dst` and
//!   `tun_opts` in its flow ([`crate::field::TunnelMeta`]); ARP for a tunnel's local
//!   address is answered or learned from; everything else is the underlay port's, as
//!   before.
//! - send: an output to a tunnel port pushes the outer headers ([`header::OuterTemplate`],
//!   made when the next hop's address is known, [`neighbours`]) and queues the packet on
//!   the underlay: in place in the frame's headroom when the packet is the frame's last
//!   output, else as a copy.
//! - The caches key on the tunnel metadata (it is part of the flow); the kernel fast path
//!   (`--offload`) never takes a tunnel's flows, whose input or output is not an AF_XDP
//!   port: they stay in user space.

pub mod config;
pub mod endpoint;
pub mod header;
pub mod neighbours;
pub mod plane;
pub mod pmtu;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use wirespeed_packet::MacAddr;
use wirespeed_port::{Backend, PortSpec};

pub use config::{Remote, TunnelConfig, TunnelConfigError, TunnelKey, TunnelKind};
pub use neighbours::Neighbours;
pub use plane::{Landing, TooBigAnswers, TunnelCounters, TunnelFigures, TunnelPlane};

/// A tunnel port as the bridge opened it: its options and the underlay it is carried over.
#[derive(Clone, Debug)]
pub struct TunnelPort {
    pub number: u32,
    pub config: TunnelConfig,
    /// The bridge port it is carried over, and that port's interface.
    pub underlay: u32,
    pub iface: String,
    pub local_ip: Ipv4Addr,
    pub local_mac: MacAddr,
    /// The underlay's MTU: the longest outer IPv4 packet. Read again as the threads look
    /// at the route (every few seconds), so an MTU changed under a running switch is
    /// followed.
    pub mtu: Mtu,
}

/// An MTU the threads share and any of them may update.
#[derive(Clone, Debug)]
pub struct Mtu(Arc<AtomicU32>);

impl Mtu {
    pub fn new(mtu: u32) -> Mtu {
        Mtu(Arc::new(AtomicU32::new(mtu)))
    }

    #[inline]
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    pub fn set(&self, mtu: u32) {
        self.0.store(mtu, Ordering::Relaxed);
    }
}

/// A tunnel port's name: its kind and number (`vxlan10`).
pub fn port_name(kind: TunnelKind, number: u32) -> String {
    format!("{}{number}", kind.name())
}

impl TunnelPort {
    /// The port's name where a device port shows its interface's (`vxlan10`), as Open
    /// vSwitch names a tunnel port by its interface.
    pub fn name(&self) -> String {
        port_name(self.config.kind, self.number)
    }

    /// What the outer IPv4 packet adds to an inner frame, against [`TunnelPort::mtu`].
    #[inline]
    pub fn outer_ip_overhead(&self) -> usize {
        header::outer_ip_overhead(&self.config)
    }
}

/// Every tunnel port of a bridge, and the next hops' addresses its threads share.
#[derive(Debug, Default)]
pub struct Tunnels {
    pub ports: Vec<TunnelPort>,
    pub neighbours: Neighbours,
}

/// Why a tunnel port could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum TunnelError {
    #[error(
        "port {number}: local_ip {local} is not an address of any port of the bridge (the \
         underlay must be one of its xdp: ports)"
    )]
    LocalNotOnBridge { number: u32, local: Ipv4Addr },
    #[error(
        "port {number}: the host's route to remote_ip {remote} goes through {iface}, which is \
         not a port of the bridge (add --port N=xdp:{iface}, or give local_ip=)"
    )]
    RouteNotOnBridge {
        number: u32,
        remote: Ipv4Addr,
        iface: String,
    },
    #[error("port {number}: the host has no route to remote_ip {remote}")]
    NoRoute { number: u32, remote: Ipv4Addr },
    #[error(
        "port {number}: remote_ip=flow needs local_ip= where the bridge has not exactly one \
         xdp: port with an IPv4 address (it has {found})"
    )]
    FlowNeedsLocal { number: u32, found: usize },
    #[error(
        "port {number}: the underlay {spec} is not an xdp: port (tunnels are carried over \
         AF_XDP ports only)"
    )]
    UnderlayNotXdp { number: u32, spec: String },
    #[error(
        "port {number}: the underlay {iface} has no IPv4 address (ip addr add ... dev {iface})"
    )]
    NoAddress { number: u32, iface: String },
    #[error("port {number}: cannot read {iface}'s {what} from /sys/class/net")]
    Sysfs {
        number: u32,
        iface: String,
        what: &'static str,
    },
    #[error(
        "port {number} and port {other} both listen on UDP {port} at {local}: give them other \
         dst_port=, or (same encapsulation) another remote_ip or key"
    )]
    Clash {
        number: u32,
        other: u32,
        port: u16,
        local: Ipv4Addr,
    },
    #[error(
        "port {number} and port {other} both take GRE at {local} from the same remote_ip with \
         the same key: give one another remote_ip or key"
    )]
    GreClash {
        number: u32,
        other: u32,
        local: Ipv4Addr,
    },
}

impl Tunnels {
    /// Opens `tunnels` (number, options) over the bridge's `ports`: finds each one's
    /// underlay (the port with `local_ip`, else the one the host routes `remote_ip`
    /// through), which must be an `xdp:` port.
    pub fn open(
        tunnels: &[(u32, TunnelConfig)],
        ports: &[(u32, PortSpec)],
    ) -> Result<Tunnels, TunnelError> {
        let mut opened: Vec<TunnelPort> = Vec::new();
        for (number, config) in tunnels {
            let port = open_one(*number, config, ports)?;
            // Two ports take the same packets: one UDP port read as two encapsulations, or
            // the same far end and key.
            let clash = opened.iter().find(|o| {
                let same_port = o.underlay == port.underlay
                    && o.local_ip == port.local_ip
                    && o.config.dst_port == port.config.dst_port;
                let same_packets = o.config.remote_ip == port.config.remote_ip
                    && (o.config.vni(0) == port.config.vni(0)
                        || o.config.key == TunnelKey::Flow
                        || port.config.key == TunnelKey::Flow);
                same_port && (o.config.kind != port.config.kind || same_packets)
            });
            if let Some(other) = clash {
                return Err(match port.config.kind {
                    TunnelKind::Gre => TunnelError::GreClash {
                        number: *number,
                        other: other.number,
                        local: port.local_ip,
                    },
                    _ => TunnelError::Clash {
                        number: *number,
                        other: other.number,
                        port: port.config.dst_port,
                        local: port.local_ip,
                    },
                });
            }
            opened.push(port);
        }
        Ok(Tunnels {
            ports: opened,
            neighbours: Neighbours::default(),
        })
    }

    /// The index of tunnel port `number`.
    #[inline]
    pub fn index_of(&self, number: u32) -> Option<usize> {
        self.ports.iter().position(|p| p.number == number)
    }
}

fn ipv4_addresses(iface: &str) -> Vec<Ipv4Addr> {
    wirespeed_port::stack_addresses(iface)
        .into_iter()
        .filter_map(|a| match a {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
        .collect()
}

fn open_one(
    number: u32,
    config: &TunnelConfig,
    ports: &[(u32, PortSpec)],
) -> Result<TunnelPort, TunnelError> {
    let (underlay, spec, local_ip) = match (config.local_ip, config.remote_ip) {
        (Some(local), _) => {
            let (n, spec) = ports
                .iter()
                .find(|(_, spec)| ipv4_addresses(&spec.iface).contains(&local))
                .ok_or(TunnelError::LocalNotOnBridge { number, local })?;
            (*n, spec, local)
        }
        // A far end per packet: the underlay is the one port with an address of the host.
        (None, Remote::Flow) => {
            let addressed: Vec<(u32, &PortSpec, Ipv4Addr)> = ports
                .iter()
                .filter(|(_, spec)| spec.backend == Backend::Xdp)
                .filter_map(|(n, spec)| Some((*n, spec, *ipv4_addresses(&spec.iface).first()?)))
                .collect();
            match addressed.as_slice() {
                [one] => *one,
                _ => {
                    return Err(TunnelError::FlowNeedsLocal {
                        number,
                        found: addressed.len(),
                    });
                }
            }
        }
        (None, Remote::Ip(remote)) => {
            let route =
                neighbours::route_to(remote).ok_or(TunnelError::NoRoute { number, remote })?;
            let (n, spec) = ports
                .iter()
                .find(|(_, spec)| spec.iface == route.iface)
                .ok_or_else(|| TunnelError::RouteNotOnBridge {
                    number,
                    remote,
                    iface: route.iface.clone(),
                })?;
            let local =
                *ipv4_addresses(&spec.iface)
                    .first()
                    .ok_or_else(|| TunnelError::NoAddress {
                        number,
                        iface: spec.iface.clone(),
                    })?;
            (*n, spec, local)
        }
    };
    if spec.backend != Backend::Xdp {
        return Err(TunnelError::UnderlayNotXdp {
            number,
            spec: spec.to_string(),
        });
    }
    let sysfs = |what: &'static str| {
        std::fs::read_to_string(format!("/sys/class/net/{}/{what}", spec.iface)).map_err(|_| {
            TunnelError::Sysfs {
                number,
                iface: spec.iface.clone(),
                what,
            }
        })
    };
    let local_mac = sysfs("address")?
        .trim()
        .parse()
        .map_err(|_| TunnelError::Sysfs {
            number,
            iface: spec.iface.clone(),
            what: "address",
        })?;
    let mtu = sysfs("mtu")?
        .trim()
        .parse()
        .map_err(|_| TunnelError::Sysfs {
            number,
            iface: spec.iface.clone(),
            what: "mtu",
        })?;
    Ok(TunnelPort {
        number,
        config: config.clone(),
        underlay,
        iface: spec.iface.clone(),
        local_ip,
        local_mac,
        mtu: Mtu::new(mtu),
    })
}
