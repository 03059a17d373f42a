//! The AF_XDP socket (the AF_PACKET V4 design as mainline Linux has it), written against the
//! kernel UAPI in `linux/if_xdp.h`. Set-up lives in `socket.rs`, the per-burst path in
//! `datapath.rs` (packets larger than a frame, multi-buffer chains, in `chains.rs`), the raw
//! system calls and the interface's facts (link state, queues, index) in `sys.rs`; `spill_levels.rs` shares the rings'
//! positions with the spill program. `bpf_link.rs` holds another process's XDP link (a
//! queue-shared redirect program), `queue_holder.rs` finds who holds a queue bind found taken.

mod bpf_link;
mod chains;
mod datapath;
mod queue_holder;
mod socket;
mod spill_levels;
mod sys;

pub use bpf_link::{XdpLinkInfo, xdp_link_by_id};
pub use queue_holder::{Process, queue_holders};

pub use chains::{CONTINUES, ChainOutcome, RX_MAX_SEGMENTS, TX_MAX_SEGMENTS};
pub use datapath::{RecvOutcome, RingCounts};
pub use socket::{BindMode, Socket, SocketConfig, Statistics};
pub use spill_levels::{SpillCounts, SpillLevels};
pub use sys::{
    LinkState, if_index, link_mtu, link_state, netns_cookie, poll_rx_many, queue_count,
    rx_queue_count,
};

/// A descriptor of the RX and TX rings: a packet at `addr` (UMEM offset) of `len` bytes.
pub type Desc = libc::xdp_desc;

use std::io;

/// What can go wrong with an AF_XDP socket. Each names the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum XskError {
    #[error("socket(AF_XDP): {0}")]
    Socket(#[source] io::Error),
    #[error("{0}: no such interface")]
    NoInterface(String),
    #[error("{iface}: interface has no queue {queue} (it has {count})")]
    NoQueue {
        iface: String,
        queue: u32,
        count: u32,
    },
    #[error("{step}: {source}")]
    Setup {
        step: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("{iface} queue {queue}: bind in {mode} mode: {source}{}", bind_hint(.mode, .source))]
    Bind {
        iface: String,
        queue: u32,
        mode: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("ring size {0} is not a power of two between 64 and 65536")]
    RingSize(u32),
    /// Bind found the queue taken (EBUSY): another AF_XDP socket is bound there.
    #[error("{iface} queue {queue}: {}", queue_holder::holders_text(.holders))]
    QueueTaken {
        iface: String,
        queue: u32,
        /// Whose socket it is, as far as can be told (see `queue_holders`).
        holders: Vec<Process>,
    },
}

/// What a refused bind most likely means, where it is clear: a zero-copy bind the driver
/// does not support (veth has none).
fn bind_hint(mode: &str, source: &io::Error) -> &'static str {
    match (mode, source.raw_os_error()) {
        ("zero-copy", Some(libc::EOPNOTSUPP)) => {
            " (the driver has no AF_XDP zero-copy, as veth: --xdp-mode copy)"
        }
        _ => "",
    }
}

impl XskError {
    /// The OS error behind this failure, if any.
    pub fn os_error(&self) -> Option<i32> {
        match self {
            XskError::Socket(e) | XskError::Setup { source: e, .. } => e.raw_os_error(),
            XskError::Bind { source, .. } => source.raw_os_error(),
            XskError::QueueTaken { .. } => Some(libc::EBUSY),
            _ => None,
        }
    }
}
