//! The AF_XDP backend: sockets on interface queues, their UMEM and frame pool, and our
//! redirect program on each interface. Frames move between the rings and the application by
//! descriptor only; the bytes never move (AF_PACKET V4's design).
//!
//! `XdpGroup` is several ports sharing one UMEM and one frame pool, owned by one thread, so
//! forwarding between them moves descriptors (netmap's buffer swap); `XdpPort` is a group of
//! one queue, or of every receive queue of an interface, behind the `Port` trait. `open.rs`
//! sets them up (attach, bind, size, fill, register); `group.rs` is the per-burst path;
//! `rejoin.rs` binds a member again to an interface made anew under its name.

mod group;
mod open;
mod port;
mod rejoin;
mod spill;

pub use group::XdpGroup;
pub use port::XdpPort;
pub use wirespeed_xdp::{SharedProgram, shared_program};
pub use wirespeed_xsk::{if_index, netns_cookie, queue_count, rx_queue_count};

use std::str::FromStr;

use wirespeed_xdp::AttachMode;
use wirespeed_xsk::BindMode;

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
    /// As `--xdp-mode` names it.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Auto => "auto",
            XdpMode::ZeroCopy => "zc",
            XdpMode::Copy => "copy",
            XdpMode::Native => "native",
            XdpMode::Skb => "skb",
        }
    }

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
