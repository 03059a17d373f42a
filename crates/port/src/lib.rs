//! Ports: every backend looks the same to an application, a `Port` that fills and drains a
//! `Batch` (netmap's device-independent rings; AF_PACKET V4's packet arrays).
//!
//! Where things are:
//! - the trait, [`Port`], and [`open`] from a spec, here; the spec strings (`xdp:eth0@3`,
//!   `packet:eth0`, ...) in `spec.rs`; the burst, [`Batch`], in `batch.rs`; counters and
//!   drop reasons in `stats.rs`; errors in `error.rs`.
//! - one folder a backend: [`xdp`] (AF_XDP: set-up in `xdp/open.rs`, the burst path of
//!   sockets sharing a UMEM in `xdp/group.rs`, the `Port` in `xdp/port.rs`, the spill
//!   ring in `xdp/spill.rs`), [`packet`] (AF_PACKET TPACKET_V3), [`pcap`] (capture files),
//!   [`pipe`] (shared memory with another process), [`tap`] (the host's own stack).
//! - what the tools share around a port: the idle policy of a receive loop (`idle.rs`),
//!   frame sizes for an MTU (`frame_size.rs`, with [`interface_mtu`]), a thread's busy
//!   share (`thread_clock.rs`), frames in a buffer of our own for backends that copy
//!   (`heap_frames.rs`), link changes from rtnetlink (`link_events.rs`), the addresses an
//!   interface has for the host's stack (`stack_addresses.rs`).
//!
//! The socket itself (rings, UMEM registration, system calls) is `wirespeed_xsk`'s; the
//! XDP programs are `wirespeed_xdp`'s.

mod batch;
mod error;
mod frame_size;
mod heap_frames;
mod idle;
mod link_events;
pub mod packet;
pub mod pcap;
pub mod pipe;
mod sock_filter;
mod spec;
mod stack_addresses;
mod stats;
pub mod tap;
mod thread_clock;
mod waker;
pub mod xdp;

use std::time::Duration;

pub use batch::{Batch, DEFAULT_BURST, RxMeta};
pub use error::PortError;
pub use frame_size::{frame_size_for, frame_size_for_mtu, interface_mtu};
pub use idle::{IDLE_SLEEP, Idle, Step};
pub use link_events::LinkEvents;
pub use sock_filter::SockFilter;
pub use spec::{Backend, PortSpec, SpecError};
pub use stack_addresses::stack_addresses;
pub use stats::{DropCounters, FrameAudit, PortStats};
pub use thread_clock::ThreadClock;
pub use waker::Waker;
pub use wirespeed_xsk::{LinkState, link_mtu, link_state};

/// The most segments (frames) one packet may span in a `Batch`: the kernel's receive bound
/// (`wirespeed_xsk::RX_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = wirespeed_xsk::RX_MAX_SEGMENTS;

/// Options shared by the backends; each has an automatic default.
#[derive(Debug, Clone)]
pub struct PortOptions {
    /// AF_XDP bind / attach mode.
    pub xdp_mode: xdp::XdpMode,
    /// Frames in the buffer area (UMEM, or packet ring slots per direction).
    pub frame_count: u32,
    /// 2048 or 4096.
    pub frame_size: u32,
    /// Bytes reserved in front of each packet in its frame.
    pub headroom: u32,
    /// Entries in each ring (power of two).
    pub ring_size: u32,
    /// Back the buffer area with hugepages.
    pub hugepages: bool,
    /// Ask the kernel to busy-poll the socket (SO_PREFER_BUSY_POLL / SO_BUSY_POLL).
    pub busy_poll: bool,
    /// Batch size the application uses (for busy-poll budget).
    pub batch: u32,
    /// Replace an XDP program someone else attached to the interface.
    pub force: bool,
    /// Open the port for receiving (attach the XDP program, fill the fill ring).
    pub rx: bool,
    /// Open the port for transmitting.
    pub tx: bool,
    /// AF_PACKET: receive what the interface sends as well (tcpdump -Q inout). AF_XDP sees
    /// received packets only.
    pub outgoing: bool,
    /// AF_XDP: the caller has attached its own XDP program to the interfaces, in this mode,
    /// and registers the sockets with it (`XdpGroup::socket_fd`); the port attaches none.
    pub program_attached: Option<wirespeed_xdp::AttachMode>,
    /// AF_XDP, receiving on one interface: bytes of spill ring (a power of two; 0 for
    /// none). While the receiver falls behind, our program puts packets there instead of
    /// dropping them, and the port hands them back in order (bpf/xsk_spill.c).
    pub spill_bytes: u32,
    /// AF_XDP with a spill ring, a port of several receiving threads
    /// (`XdpPort::open_threads`): the spill rings the program has (one per thread), and
    /// which of them this port's queues spill to (its thread's). 1 and 0 otherwise.
    pub spill_rings: u32,
    pub spill_ring: u32,
    /// AF_XDP: `frame_count` is for each receive queue the port serves (a tool's default,
    /// so that a port on eight queues has eight times the frames of a port on one), not the
    /// whole UMEM shared out between them (a count the user gave).
    pub frames_per_queue: bool,
    /// AF_XDP: take packets larger than a frame, as chains of frames (multi-buffer,
    /// XDP_USE_SG), where the kernel can. Only for an application that reads
    /// `Batch::packet_len` and `segments`: one that reads the head segment alone would see
    /// part of a packet. Off, such packets are dropped by the kernel and counted.
    pub multi_buffer: bool,
    /// Set by the caller to give up opening (a signal asked the tool to stop): opening a
    /// port with a large buffer area takes seconds, and then ends with
    /// [`PortError::Cancelled`] soon after this is set.
    pub cancel: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl PortOptions {
    /// True once the caller asked to give up opening.
    pub fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl Default for PortOptions {
    fn default() -> Self {
        PortOptions {
            xdp_mode: xdp::XdpMode::Auto,
            frame_count: 4096,
            frame_size: 4096,
            headroom: 0,
            ring_size: 1024,
            hugepages: false,
            busy_poll: false,
            batch: DEFAULT_BURST as u32,
            force: false,
            rx: true,
            tx: true,
            outgoing: false,
            program_attached: None,
            spill_bytes: 0,
            spill_rings: 1,
            spill_ring: 0,
            frames_per_queue: false,
            multi_buffer: false,
            cancel: None,
        }
    }
}

/// What a port turned out to be once opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    pub spec: String,
    pub backend: Backend,
    /// The mode the kernel granted: `zerocopy`, `copy`, `skb` (AF_XDP) or `tpacket_v3`.
    pub mode: String,
    /// Notes for the user about fallbacks taken (hugepages unavailable, mode downgraded...).
    pub notes: Vec<String>,
    /// The kernel busy-polls the port's sockets (asked for, and possible in this mode): its
    /// syscalls run the driver's receive, so the application need not sleep in poll().
    pub busy_poll: bool,
    /// Packets may span several frames (AF_XDP multi-buffer): at most this many when sent.
    /// None: every packet fits one frame (`Port::max_packet_len`).
    pub multi_buffer: Option<u32>,
}

/// A packet port. One owner (one thread) per port: no method takes a lock.
pub trait Port {
    fn info(&self) -> &PortInfo;

    /// Appends up to `batch.room()` received packets to `batch`; returns how many.
    fn rx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError>;

    /// Queues every packet of `batch` for sending and empties it. Packets the port cannot
    /// queue are freed and counted (`tx_ring_full`); returns how many were queued.
    /// Frames may come from this port's `rx_burst` or `alloc_tx`.
    fn tx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError>;

    /// Gives the frames of `batch` back to the port unsent (the application is done with
    /// them) and empties it.
    fn release(&mut self, batch: &mut Batch);

    /// Appends up to `n` empty frames, each set to `len` bytes, for the application to fill
    /// and pass to `tx_burst`. Returns fewer when the port has no room to send more now.
    fn alloc_tx(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize;

    /// The bytes of a packet in `batch`.
    fn packet(&self, addr: u64, len: u32) -> &[u8];

    /// The bytes of a packet in `batch`, writable.
    fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8];

    /// The whole packet of slot `i` of `batch`: its frame's bytes in place when it is one
    /// frame, else its segments gathered into `scratch` (a copy; only for an application
    /// that needs the bytes contiguous, such as a filter or a file writer).
    fn packet_bytes<'a>(&'a self, batch: &Batch, i: usize, scratch: &'a mut Vec<u8>) -> &'a [u8] {
        if batch.more(i) == 0 {
            return self.packet(batch.addr(i), batch.frame_len(i));
        }
        scratch.clear();
        for (addr, len) in batch.segments(i) {
            scratch.extend_from_slice(self.packet(addr, len));
        }
        scratch
    }

    /// Writes `bytes` over the segments of slot `i` of `batch`, in order (a packet built
    /// elsewhere, put into a chain `alloc_tx` gave); returns how many bytes fit.
    fn write_packet(&mut self, batch: &Batch, i: usize, bytes: &[u8]) -> usize {
        let mut at = 0;
        for (addr, len) in batch.segments(i) {
            let take = (len as usize).min(bytes.len() - at);
            self.packet_mut(addr, take as u32)
                .copy_from_slice(&bytes[at..at + take]);
            at += take;
        }
        at
    }

    /// Largest packet a frame holds.
    fn max_packet_len(&self) -> u32;

    /// Largest packet the port sends: a chain of frames where it has multi-buffer
    /// (`PortInfo::multi_buffer`), else `max_packet_len`.
    fn max_chain_len(&self) -> u32 {
        self.max_packet_len()
    }

    /// Pushes queued transmissions to the kernel and reclaims completed frames.
    fn flush(&mut self) -> Result<(), PortError>;

    /// Sleeps until packets may be ready to receive, or `timeout` passes (poll()).
    fn wait_rx(&mut self, timeout: Duration) -> Result<(), PortError>;

    /// The descriptors `wait_rx` polls, for an application that sleeps on several ports at
    /// once; none for a port that does not receive.
    fn poll_fds(&self) -> Vec<std::os::fd::RawFd>;

    /// True when frames handed to `tx_burst` are still on their way out.
    fn tx_pending(&self) -> bool;

    /// Counters, including the kernel's drop counts (a syscall: call it at most a few times
    /// a second, never per packet).
    fn stats(&mut self) -> PortStats;

    /// Where every frame of the buffer area is, for backends that own one.
    fn audit(&self) -> Option<FrameAudit>;

    /// Attaches a classic BPF program in the kernel, so packets it rejects never reach the
    /// port (SO_ATTACH_FILTER). Returns false for backends that cannot (AF_XDP); the
    /// application filters in user space either way.
    fn attach_filter(&mut self, _program: &[SockFilter]) -> Result<bool, PortError> {
        Ok(false)
    }

    /// True once the port will never receive another packet: the file it replays has
    /// ended (pcap). Ports on interfaces never end.
    fn rx_ended(&self) -> bool {
        false
    }

    /// The state of the port's interface now: up, down (no packets until it is up again) or
    /// gone (deleted: none ever again). System calls: ask at most a few times a second.
    /// Ports without an interface (pipes, files) are always up.
    fn link(&self) -> LinkState {
        LinkState::Up
    }

    /// The port's interface went away: packets handed to `tx_burst` and not yet counted as
    /// sent never will be. The port gives them up and returns how many (the caller counts
    /// them, as `link_down`). Ports that count a packet sent when it is queued have none.
    fn abandon_tx(&mut self) -> u64 {
        0
    }
}

/// Sleeps until any of `fds` (from `Port::poll_fds`, `XdpGroup::poll_fds`) is readable, or
/// `timeout` passes.
pub fn poll_any(fds: &[std::os::fd::RawFd], timeout: Duration) -> std::io::Result<usize> {
    wirespeed_xsk::poll_rx_many(fds, timeout.as_millis().min(i32::MAX as u128) as i32)
}

/// Pins the calling thread to `cpu` (a poll-mode thread next to the queue it serves).
pub fn pin_thread(cpu: usize) -> Result<(), PortError> {
    let mut set = nix::sched::CpuSet::new();
    let pinned = set
        .set(cpu)
        .and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set));
    pinned.map_err(|e| PortError::Io {
        iface: format!("cpu {cpu}"),
        what: "pin a thread to its CPU",
        source: std::io::Error::from(e),
    })
}

/// Opens the port a spec names.
pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<Box<dyn Port + Send>, PortError> {
    match spec.backend {
        Backend::Xdp => Ok(Box::new(xdp::XdpPort::open(spec, opts)?)),
        Backend::Packet => Ok(Box::new(packet::PacketPort::open(spec, opts)?)),
        Backend::Tap => Ok(Box::new(tap::TapPort::open(spec, opts)?)),
        Backend::Pipe => Ok(Box::new(pipe::PipePort::open(spec, opts)?)),
        Backend::Pcap => Ok(Box::new(pcap::PcapPort::open(spec, opts)?)),
    }
}
