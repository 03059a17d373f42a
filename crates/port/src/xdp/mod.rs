//! The AF_XDP backend: sockets on interface queues, their UMEM and frame pool, and our
//! redirect program on each interface. Frames move between the rings and the application by
//! descriptor only; the bytes never move (AF_PACKET V4's design).
//!
//! `XdpGroup` is several ports sharing one UMEM and one frame pool, owned by one thread, so
//! forwarding between them moves descriptors (netmap's buffer swap); `XdpPort` is a group of
//! one queue, or of every receive queue of an interface, behind the `Port` trait.

mod group;
mod port;
mod spill;

pub use group::XdpGroup;
pub use port::XdpPort;
pub use wirespeed_xsk::{if_index, netns_cookie, rx_queue_count};

use std::str::FromStr;

use wirespeed_umem::Umem;
use wirespeed_xdp::{AttachMode, XskProgram};
use wirespeed_xsk::{BindMode, Socket, SocketConfig};

use crate::{PortError, PortOptions, PortSpec};

/// Queues our redirect programs can serve (their XSKMAP's size).
const MAX_QUEUES: u32 = 256;

/// The kernel's headroom in front of every received packet in copy mode (XDP_PACKET_HEADROOM).
const XDP_PACKET_HEADROOM: u32 = 256;

/// How to attach and bind. `Auto` tries zero-copy, then native copy mode, then skb mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    Auto,
    /// Native XDP, zero-copy bind (fails where the driver has no zero-copy, e.g. veth).
    ZeroCopy,
    /// Native XDP, copy-mode bind.
    Copy,
    /// Native XDP, the kernel picks zero-copy or copy.
    Native,
    /// Generic (skb) XDP, copy-mode bind.
    Skb,
}

impl FromStr for XdpMode {
    type Err = String;

    fn from_str(s: &str) -> Result<XdpMode, String> {
        Ok(match s {
            "auto" => XdpMode::Auto,
            "zc" | "zerocopy" | "zero-copy" => XdpMode::ZeroCopy,
            "copy" => XdpMode::Copy,
            "native" | "driver" | "drv" => XdpMode::Native,
            "skb" | "generic" => XdpMode::Skb,
            _ => {
                return Err(format!(
                    "unknown XDP mode '{s}' (use auto, zc, copy, native or skb)"
                ));
            }
        })
    }
}

impl XdpMode {
    /// The (attach, bind) pairs to try, in order.
    fn attempts(self) -> &'static [(AttachMode, BindMode)] {
        match self {
            XdpMode::Auto => &[
                (AttachMode::Native, BindMode::ZeroCopy),
                (AttachMode::Native, BindMode::Copy),
                (AttachMode::Skb, BindMode::Copy),
            ],
            XdpMode::ZeroCopy => &[(AttachMode::Native, BindMode::ZeroCopy)],
            XdpMode::Copy => &[(AttachMode::Native, BindMode::Copy)],
            XdpMode::Native => &[(AttachMode::Native, BindMode::Any)],
            XdpMode::Skb => &[(AttachMode::Skb, BindMode::Copy)],
        }
    }
}

/// Checks that the interface and queue of `spec` exist, before anything is created.
fn check_place(spec: &PortSpec) -> Result<(), PortError> {
    if wirespeed_xsk::if_index(&spec.iface).is_none() {
        return Err(PortError::NoInterface(spec.iface.clone()));
    }
    let count = wirespeed_xsk::queue_count(&spec.iface);
    if spec.queue >= count {
        return Err(PortError::NoQueue {
            iface: spec.iface.clone(),
            queue: spec.queue,
            count,
        });
    }
    Ok(())
}

/// The largest ring of any kind (entries).
const MAX_RING: u32 = 65536;

/// The ring sizes and options of a member socket.
fn socket_config(opts: &PortOptions) -> SocketConfig {
    SocketConfig {
        rx_size: if opts.rx { opts.ring_size } else { 0 },
        tx_size: if opts.tx { opts.ring_size } else { 0 },
        // Twice the RX ring (frames wait there while the RX ring holds a backlog), up to the
        // largest ring we map.
        fill_size: if opts.rx {
            (opts.ring_size * 2).min(MAX_RING)
        } else {
            64
        },
        completion_size: opts.ring_size,
        mode: BindMode::Any,
        need_wakeup: true,
        busy_poll_budget: opts.busy_poll.then_some(opts.batch),
    }
}

/// Where a member socket goes: on whose UMEM, in which attach mode, with a program of its own.
struct Placement<'a> {
    /// The UMEM's first socket, for later members (XDP_SHARED_UMEM).
    owner: Option<&'a Socket>,
    /// The attach mode already chosen (by an earlier member or another group).
    attach: Option<AttachMode>,
    /// Attach our redirect program (false: another group's program serves this queue).
    attach_program: bool,
}

/// Attaches the program (for receiving) and binds a socket for `spec`, not yet registered
/// with the program (the caller does that once the socket is ready). The first member of
/// a UMEM tries the attach/bind pairs of the mode in order and returns the first that works;
/// later members share the owner's UMEM, attach mode and bind mode. A foreign program or a
/// missing interface ends the search at once.
fn bind_member(
    spec: &PortSpec,
    opts: &PortOptions,
    umem: &Umem,
    place: Placement<'_>,
    notes: &mut Vec<String>,
) -> Result<(Option<XskProgram>, Socket, AttachMode), PortError> {
    let config = socket_config(opts);
    let owner = place.owner;
    let attempts: Vec<(AttachMode, BindMode)> = match (place.attach, opts.program_attached) {
        (Some(attach), _) => vec![(attach, BindMode::Any)],
        // The caller's program runs in `attach` mode: the binds the XDP mode asks for there.
        (None, Some(attach)) => {
            let asked: Vec<_> = opts
                .xdp_mode
                .attempts()
                .iter()
                .copied()
                .filter(|&(a, _)| a == attach)
                .collect();
            if asked.is_empty() {
                vec![(attach, BindMode::Any)]
            } else {
                asked
            }
        }
        (None, None) => opts.xdp_mode.attempts().to_vec(),
    };
    let mut last_err = None;
    let mut tried: Vec<String> = Vec::new();
    for &(attach, bind) in &attempts {
        let program = if opts.rx && place.attach_program {
            let attached = if opts.spill_bytes > 0 {
                XskProgram::attach_spilling(&spec.iface, attach, opts.force, opts.spill_bytes)
            } else {
                XskProgram::attach(&spec.iface, attach, opts.force)
            };
            match attached {
                Ok(p) => Some(p),
                Err(
                    e @ (wirespeed_xdp::XdpError::ForeignProgram { .. }
                    | wirespeed_xdp::XdpError::ForceFailed { .. }
                    | wirespeed_xdp::XdpError::NoInterface(_)),
                ) => return Err(e.into()),
                Err(e) => {
                    // zc and copy both attach in native mode: say a failure once.
                    let failure = format!("{} XDP: {e}", attach.name());
                    if !tried.contains(&failure) {
                        tried.push(failure);
                    }
                    last_err = Some(PortError::from(e));
                    continue;
                }
            }
        } else {
            None
        };
        let cfg = SocketConfig {
            mode: bind,
            ..config
        };
        let socket = match owner {
            Some(o) => Socket::new_shared(umem, o, &spec.iface, spec.queue, &cfg),
            None => Socket::new(umem, &spec.iface, spec.queue, &cfg),
        };
        match socket {
            Ok(socket) => {
                if !tried.is_empty() {
                    notes.push(format!("fell back after: {}", tried.join("; ")));
                }
                return Ok((program, socket, attach));
            }
            Err(e) => {
                tried.push(format!("{} bind: {}", bind.name(), e));
                last_err = Some(e.into());
                // `program` drops here: detached before the next attempt.
            }
        }
    }
    Err(last_err.expect("every mode has at least one attempt"))
}

/// The name of the mode a socket got.
fn mode_name(socket: &Socket, attach: AttachMode) -> &'static str {
    if socket.is_zerocopy() {
        "zerocopy"
    } else if attach == AttachMode::Skb {
        "skb"
    } else {
        "copy"
    }
}
