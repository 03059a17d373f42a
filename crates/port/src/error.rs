//! What can go wrong opening or running a port. Each variant names the thing that is wrong.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error("{0}: no such interface")]
    NoInterface(String),
    #[error("{iface}: interface has no queue {queue} (it has {count})")]
    NoQueue {
        iface: String,
        queue: u32,
        count: u32,
    },
    #[error("frame size {0} is not supported (use 2048 or 4096)")]
    FrameSize(u32),
    #[error("ring size {0} is not a power of two between 64 and 65536")]
    RingSize(u32),
    #[error("{what}: {source}")]
    Umem {
        what: String,
        source: wirespeed_umem::UmemError,
    },
    #[error(transparent)]
    Xsk(#[from] wirespeed_xsk::XskError),
    #[error(transparent)]
    Xdp(#[from] wirespeed_xdp::XdpError),
    /// A capture file a pcap port replays cannot be read.
    #[error(transparent)]
    Capture(#[from] wirespeed_capture::CaptureError),
    /// A set-up the port layer cannot provide, with why.
    #[error("{0}")]
    Unsupported(String),
    /// The caller asked to give up while the port was opening (`PortOptions::cancel`).
    #[error("{0}: stopped while it was being set up")]
    Cancelled(String),
    /// The port's interface was deleted (or moved to another namespace) while it ran.
    #[error("{0}: the interface went away (deleted)")]
    InterfaceGone(String),
    /// The port's interface is down: sending fails until it is up again.
    #[error("{0}: the interface is down")]
    InterfaceDown(String),
    #[error("{iface}: {what}: {source}")]
    Io {
        iface: String,
        what: &'static str,
        source: io::Error,
    },
}

impl PortError {
    /// The error for a failed system call on a port's socket or device: its interface down
    /// or gone when the error number says so (ENETDOWN, ENODEV, EBADFD), gone when no
    /// interface has its index any more (a deleted interface is first taken down), else the
    /// call's own. ENXIO is gone whatever has the index: the socket lost its device (an
    /// interface moved to another namespace and back keeps its index, not its sockets).
    pub(crate) fn of_link(
        spec: &str,
        ifindex: u32,
        what: &'static str,
        source: io::Error,
    ) -> PortError {
        match source.raw_os_error() {
            Some(libc::ENXIO) => PortError::InterfaceGone(spec.to_string()),
            Some(libc::ENETDOWN | libc::ENODEV | libc::EBADFD) => {
                match wirespeed_xsk::link_state(ifindex) {
                    wirespeed_xsk::LinkState::Gone => PortError::InterfaceGone(spec.to_string()),
                    _ => PortError::InterfaceDown(spec.to_string()),
                }
            }
            _ => PortError::Io {
                iface: spec.to_string(),
                what,
                source,
            },
        }
    }
}
