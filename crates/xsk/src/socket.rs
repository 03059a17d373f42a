//! Set-up and teardown of an AF_XDP socket: UMEM registration, ring sizing and mapping,
//! bind, options and statistics. Nothing here runs per packet.

use std::any::Any;
use std::mem::size_of;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use wirespeed_ring::{Consumer, Producer, RawRing};
use wirespeed_umem::Umem;

use crate::sys::{self, RingMap};
use crate::{Desc, XskError};

// asm-generic/socket.h (not exported by libc for every architecture).
const SO_BUSY_POLL: i32 = 46;
const SO_PREFER_BUSY_POLL: i32 = 69;
const SO_BUSY_POLL_BUDGET: i32 = 70;
const SO_INCOMING_NAPI_ID: i32 = 56;

/// How to bind: force zero-copy, force copy, or let the kernel pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindMode {
    ZeroCopy,
    Copy,
    /// No flag: zero-copy where the driver has it, else copy.
    Any,
}

impl BindMode {
    fn flag(self) -> u16 {
        match self {
            BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
            BindMode::Copy => libc::XDP_COPY,
            BindMode::Any => 0,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            BindMode::ZeroCopy => "zero-copy",
            BindMode::Copy => "copy",
            BindMode::Any => "driver-chosen",
        }
    }
}

/// Ring sizes (0 = no such ring) and bind options.
#[derive(Debug, Clone, Copy)]
pub struct SocketConfig {
    pub rx_size: u32,
    pub tx_size: u32,
    pub fill_size: u32,
    pub completion_size: u32,
    pub mode: BindMode,
    /// Ask the kernel to flag when it needs a syscall (XDP_USE_NEED_WAKEUP).
    pub need_wakeup: bool,
    /// Busy-poll with this budget (SO_PREFER_BUSY_POLL), where the kernel can: see
    /// `Socket::busy_polls`.
    pub busy_poll_budget: Option<u32>,
    /// Let a packet span several frames (XDP_USE_SG): the kernel chains its descriptors with
    /// XDP_PKT_CONTD. Only a UMEM's owner asks; sockets sharing it inherit the owner's
    /// answer. A kernel without multi-buffer gets a plain bind instead: see
    /// `Socket::multi_buffer`.
    pub multi_buffer: bool,
}

impl Default for SocketConfig {
    fn default() -> Self {
        SocketConfig {
            rx_size: 2048,
            tx_size: 2048,
            fill_size: 4096,
            completion_size: 2048,
            mode: BindMode::Any,
            need_wakeup: true,
            busy_poll_budget: None,
            multi_buffer: false,
        }
    }
}

/// The kernel's counters for a socket (XDP_STATISTICS).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Statistics {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

impl Statistics {
    /// Both counts together: a port's across the sockets it had.
    pub fn plus(self, o: Statistics) -> Statistics {
        Statistics {
            rx_dropped: self.rx_dropped + o.rx_dropped,
            rx_invalid_descs: self.rx_invalid_descs + o.rx_invalid_descs,
            tx_invalid_descs: self.tx_invalid_descs + o.tx_invalid_descs,
            rx_ring_full: self.rx_ring_full + o.rx_ring_full,
            rx_fill_ring_empty_descs: self.rx_fill_ring_empty_descs + o.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: self.tx_ring_empty_descs + o.tx_ring_empty_descs,
        }
    }
}

/// An AF_XDP socket bound to one queue of one interface.
pub struct Socket {
    pub(crate) fd: OwnedFd,
    pub(crate) fill: Option<Producer<u64>>,
    pub(crate) completion: Option<Consumer<u64>>,
    pub(crate) rx: Option<Consumer<Desc>>,
    pub(crate) tx: Option<Producer<Desc>>,
    pub(crate) need_wakeup: bool,
    pub(crate) busy_poll: bool,
    pub(crate) multi_buffer: bool,
    /// A received chain was too long: its remaining descriptors are dropped up to the one
    /// that ends the packet (see `recv_chains`).
    pub(crate) rx_resync: bool,
    ifindex: u32,
    queue: u32,
    zerocopy: bool,
    _umem: Arc<dyn Any + Send + Sync>,
}

fn setup<T>(step: &'static str, r: std::io::Result<T>) -> Result<T, XskError> {
    r.map_err(|source| XskError::Setup { step, source })
}

fn check_size(size: u32) -> Result<(), XskError> {
    if size != 0 && (!size.is_power_of_two() || !(64..=65536).contains(&size)) {
        return Err(XskError::RingSize(size));
    }
    Ok(())
}

impl Socket {
    /// A socket that registers `umem` and owns its fill and completion rings.
    pub fn new(
        umem: &Umem,
        iface: &str,
        queue: u32,
        config: &SocketConfig,
    ) -> Result<Socket, XskError> {
        Socket::create(umem, None, iface, queue, config)
    }

    /// A socket that uses the UMEM `owner` registered (XDP_SHARED_UMEM). On another interface
    /// or queue than the owner it gets fill and completion rings of its own; on the owner's
    /// queue it shares the owner's.
    pub fn new_shared(
        umem: &Umem,
        owner: &Socket,
        iface: &str,
        queue: u32,
        config: &SocketConfig,
    ) -> Result<Socket, XskError> {
        Socket::create(umem, Some(owner), iface, queue, config)
    }

    /// Set-up, with multi-buffer where the kernel and driver allow it: each way to bind in
    /// turn (`bind_variants`), each on a fresh socket, since a refused XDP_USE_SG bind leaves
    /// its mark on the socket's UMEM registration.
    fn create(
        umem: &Umem,
        owner: Option<&Socket>,
        iface: &str,
        queue: u32,
        config: &SocketConfig,
    ) -> Result<Socket, XskError> {
        let ifindex = check_place(iface, queue, config)?;
        let variants = bind_variants(owner.is_some(), config);
        let mut last = None;
        for variant in &variants {
            match Socket::create_bound(umem, owner, iface, ifindex, queue, variant) {
                // Refused for the mode or XDP_USE_SG: the next way may bind.
                Err(e @ XskError::Bind { .. })
                    if matches!(e.os_error(), Some(libc::EINVAL | libc::EOPNOTSUPP)) =>
                {
                    last = Some(e);
                }
                done => return done,
            }
        }
        Err(last.expect("at least one way to bind"))
    }

    /// The steps of set-up, in the order the kernel needs them: register the UMEM, size the
    /// rings, map them, set busy polling, bind.
    fn create_bound(
        umem: &Umem,
        owner: Option<&Socket>,
        iface: &str,
        ifindex: u32,
        queue: u32,
        config: &SocketConfig,
    ) -> Result<Socket, XskError> {
        let fd = sys::xdp_socket().map_err(XskError::Socket)?;
        if owner.is_none() {
            register_umem(&fd, umem)?;
        }
        // On the owner's queue the fill and completion rings are the owner's.
        let own_fill = !owner.is_some_and(|o| o.ifindex == ifindex && o.queue == queue);
        size_rings(&fd, config, own_fill)?;
        let rings = map_rings(&fd, config, own_fill)?;
        if let Some(budget) = config.busy_poll_budget {
            set_busy_poll(&fd, budget)?;
        }
        let (need_wakeup, multi_buffer) = bind(&fd, owner, iface, ifindex, queue, config)?;
        let (opts, _): (libc::xdp_options, usize) = setup(
            "XDP_OPTIONS",
            sys::get_option(fd.as_raw_fd(), libc::SOL_XDP, libc::XDP_OPTIONS),
        )?;
        let busy_poll = config.busy_poll_budget.is_some() && has_napi_id(&fd);
        Ok(Socket {
            fd,
            fill: rings.fill,
            completion: rings.completion,
            rx: rings.rx,
            tx: rings.tx,
            need_wakeup,
            busy_poll,
            multi_buffer,
            rx_resync: false,
            ifindex,
            queue,
            zerocopy: opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0,
            _umem: umem.keepalive(),
        })
    }

    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    pub fn queue(&self) -> u32 {
        self.queue
    }

    /// True when busy polling was asked for and the kernel can do it for this socket (it
    /// has a NAPI instance to poll): the socket's syscalls then run the driver's receive.
    pub fn busy_polls(&self) -> bool {
        self.busy_poll
    }

    /// True when the kernel bound in zero-copy mode.
    pub fn is_zerocopy(&self) -> bool {
        self.zerocopy
    }

    /// True when the socket was bound with XDP_USE_SG (or shares a UMEM whose owner was): a
    /// packet may arrive, and may be sent, as a chain of descriptors.
    pub fn multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// True while the socket is bound to its interface; false once the kernel unbound it:
    /// its interface was deleted, or moved to another network namespace (which may bring
    /// it back under the same index, the socket still unbound). A send of nothing asks (it
    /// sends what the TX ring holds): the send path has answered ENXIO before any other
    /// check since Linux 5.4, the receive path only since 6.3.
    pub fn is_bound(&self) -> bool {
        !matches!(sys::kick_tx(self.raw_fd()), Err(e) if e.raw_os_error() == Some(libc::ENXIO))
    }

    /// True when this socket has its own fill and completion rings.
    pub fn owns_fill_ring(&self) -> bool {
        self.fill.is_some()
    }

    /// The kernel's counters for this socket.
    pub fn statistics(&self) -> Result<Statistics, XskError> {
        let (s, _): (libc::xdp_statistics, usize) = setup(
            "XDP_STATISTICS",
            sys::get_option(self.fd.as_raw_fd(), libc::SOL_XDP, libc::XDP_STATISTICS),
        )?;
        Ok(Statistics {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }
}

/// Checks the ring sizes and that `iface` has queue `queue`; returns its index.
fn check_place(iface: &str, queue: u32, config: &SocketConfig) -> Result<u32, XskError> {
    for s in [
        config.rx_size,
        config.tx_size,
        config.fill_size,
        config.completion_size,
    ] {
        check_size(s)?;
    }
    let ifindex = sys::if_index(iface).ok_or_else(|| XskError::NoInterface(iface.to_string()))?;
    let count = sys::queue_count(iface);
    if queue >= count {
        return Err(XskError::NoQueue {
            iface: iface.to_string(),
            queue,
            count,
        });
    }
    Ok(ifindex)
}

/// Registers `umem`'s area with the socket (XDP_UMEM_REG): the socket becomes its owner.
fn register_umem(fd: &OwnedFd, umem: &Umem) -> Result<(), XskError> {
    let (area, len) = umem.area();
    let reg = libc::xdp_umem_reg {
        addr: area as u64,
        len: len as u64,
        chunk_size: umem.frame_size(),
        headroom: umem.config().headroom,
        flags: 0,
        tx_metadata_len: 0,
    };
    setup(
        "XDP_UMEM_REG",
        sys::set_option(fd, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg),
    )
}

/// Tells the kernel the size of each ring the socket has (fill and completion only when
/// `own_fill`; rx and tx when their size is not 0).
fn size_rings(fd: &OwnedFd, config: &SocketConfig, own_fill: bool) -> Result<(), XskError> {
    let rings = [
        (
            "XDP_UMEM_FILL_RING",
            libc::XDP_UMEM_FILL_RING,
            config.fill_size,
            own_fill,
        ),
        (
            "XDP_UMEM_COMPLETION_RING",
            libc::XDP_UMEM_COMPLETION_RING,
            config.completion_size,
            own_fill,
        ),
        (
            "XDP_RX_RING",
            libc::XDP_RX_RING,
            config.rx_size,
            config.rx_size > 0,
        ),
        (
            "XDP_TX_RING",
            libc::XDP_TX_RING,
            config.tx_size,
            config.tx_size > 0,
        ),
    ];
    for (step, option, size, wanted) in rings {
        if wanted {
            setup(step, sys::set_option(fd, libc::SOL_XDP, option, &size))?;
        }
    }
    if config.tx_size > 0 {
        // Copy mode sends at most 32 frames a kick unless told otherwise (Linux 6.17+):
        // the whole ring a kick saves a system call every 32 frames. Older kernels refuse
        // the option, and keep 32.
        let _ = sys::set_option(fd, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, &config.tx_size);
    }
    Ok(())
}

/// How many frames one kick may send in copy mode (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17).
const XDP_MAX_TX_SKB_BUDGET: i32 = 9;

/// The rings of a socket, mapped; None where the socket has no such ring.
struct Rings {
    fill: Option<Producer<u64>>,
    completion: Option<Consumer<u64>>,
    rx: Option<Consumer<Desc>>,
    tx: Option<Producer<Desc>>,
}

/// Maps the rings `size_rings` sized, at the offsets the kernel gives.
fn map_rings(fd: &OwnedFd, config: &SocketConfig, own_fill: bool) -> Result<Rings, XskError> {
    let (off, off_len): (libc::xdp_mmap_offsets, usize) = setup(
        "XDP_MMAP_OFFSETS",
        sys::get_option(fd.as_raw_fd(), libc::SOL_XDP, libc::XDP_MMAP_OFFSETS),
    )?;
    if off_len != size_of::<libc::xdp_mmap_offsets>() {
        return Err(XskError::Setup {
            step: "XDP_MMAP_OFFSETS",
            source: std::io::Error::other(
                "kernel too old: ring offsets without flags (need Linux 5.4+)",
            ),
        });
    }
    let (fill, completion) = if own_fill {
        (
            Some(Producer::new(map::<u64>(
                fd,
                &off.fr,
                config.fill_size,
                libc::XDP_UMEM_PGOFF_FILL_RING,
                "fill ring",
            )?)),
            Some(Consumer::new(map::<u64>(
                fd,
                &off.cr,
                config.completion_size,
                libc::XDP_UMEM_PGOFF_COMPLETION_RING,
                "completion ring",
            )?)),
        )
    } else {
        (None, None)
    };
    let rx = match config.rx_size {
        0 => None,
        n => Some(Consumer::new(map::<Desc>(
            fd,
            &off.rx,
            n,
            libc::XDP_PGOFF_RX_RING as u64,
            "rx ring",
        )?)),
    };
    let tx = match config.tx_size {
        0 => None,
        n => Some(Producer::new(map::<Desc>(
            fd,
            &off.tx,
            n,
            libc::XDP_PGOFF_TX_RING as u64,
            "tx ring",
        )?)),
    };
    Ok(Rings {
        fill,
        completion,
        rx,
        tx,
    })
}

/// Asks the kernel to busy-poll the socket's NAPI instance, `budget` packets a poll.
fn set_busy_poll(fd: &OwnedFd, budget: u32) -> Result<(), XskError> {
    setup(
        "SO_PREFER_BUSY_POLL",
        sys::set_option(fd, libc::SOL_SOCKET, SO_PREFER_BUSY_POLL, &1i32),
    )?;
    setup(
        "SO_BUSY_POLL",
        sys::set_option(fd, libc::SOL_SOCKET, SO_BUSY_POLL, &20i32),
    )?;
    setup(
        "SO_BUSY_POLL_BUDGET",
        sys::set_option(fd, libc::SOL_SOCKET, SO_BUSY_POLL_BUDGET, &(budget as i32)),
    )
}

/// The ways to bind a socket, in order: as asked, and for multi-buffer first with it, then
/// without (a kernel before 6.6 answers EINVAL to XDP_USE_SG; a zero-copy driver without
/// multi-buffer, EOPNOTSUPP). Zero-copy wins over multi-buffer: with no mode named, the kernel
/// would pick copy mode for XDP_USE_SG on a driver whose zero-copy has no multi-buffer, so
/// zero-copy is tried by name first, with it and then without. Sockets sharing a UMEM inherit
/// its owner's mode and multi-buffer: one way.
fn bind_variants(shared: bool, config: &SocketConfig) -> Vec<SocketConfig> {
    let with = |mode: BindMode, multi_buffer: bool| SocketConfig {
        mode,
        multi_buffer,
        ..*config
    };
    if shared || !config.multi_buffer {
        return vec![*config];
    }
    match config.mode {
        BindMode::Any => vec![
            with(BindMode::ZeroCopy, true),
            with(BindMode::ZeroCopy, false),
            with(BindMode::Any, true),
            with(BindMode::Any, false),
        ],
        mode => vec![with(mode, true), with(mode, false)],
    }
}

/// Binds the socket to `queue` of `ifindex`, on its own UMEM or `owner`'s; returns whether
/// it uses need_wakeup and whether it is multi-buffer.
fn bind(
    fd: &OwnedFd,
    owner: Option<&Socket>,
    iface: &str,
    ifindex: u32,
    queue: u32,
    config: &SocketConfig,
) -> Result<(bool, bool), XskError> {
    // A socket sharing a UMEM may name no mode flags: it inherits the owner's copy or
    // zero-copy mode, need_wakeup and multi-buffer setting (the kernel refuses them with
    // EINVAL).
    let (flags, need_wakeup) = match owner {
        Some(o) => (libc::XDP_SHARED_UMEM, o.need_wakeup),
        None if config.need_wakeup => (config.mode.flag() | libc::XDP_USE_NEED_WAKEUP, true),
        None => (config.mode.flag(), false),
    };
    let sg = owner.is_none() && config.multi_buffer;
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags | if sg { libc::XDP_USE_SG } else { 0 },
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue,
        sxdp_shared_umem_fd: owner.map_or(0, |o| o.fd.as_raw_fd() as u32),
    };
    sys::bind_xdp(fd, &addr).map_err(|source| match source.raw_os_error() {
        // The queue has another socket (bind_xdp waited out one closing a moment ago).
        Some(libc::EBUSY) => XskError::QueueTaken {
            iface: iface.to_string(),
            queue,
            holders: crate::queue_holders(iface, ifindex, queue, sys::socket_inode(fd)),
        },
        _ => XskError::Bind {
            iface: iface.to_string(),
            queue,
            mode: config.mode.name(),
            source,
        },
    })?;
    Ok((need_wakeup, owner.map_or(sg, |o| o.multi_buffer)))
}

/// Whether the kernel recorded a NAPI instance for the bound socket, which busy polling runs.
/// Since Linux 6.13 it records one at bind, and only for a zero-copy socket: a copy-mode
/// socket (veth, skb mode) has none, and the syscalls meant to busy-poll would do nothing.
/// (Kernels before 6.13 recorded it at the first packet: there this turns busy polling off.)
fn has_napi_id(fd: &OwnedFd) -> bool {
    sys::get_option::<u32>(fd.as_raw_fd(), libc::SOL_SOCKET, SO_INCOMING_NAPI_ID)
        .is_ok_and(|(id, _)| id != 0)
}

/// Maps one ring and wraps it; the mapping lives as long as the ring.
fn map<T: Copy>(
    fd: &OwnedFd,
    off: &libc::xdp_ring_offset,
    size: u32,
    pgoff: u64,
    what: &'static str,
) -> Result<RawRing<T>, XskError> {
    let len = off.desc as usize + size as usize * size_of::<T>();
    let m =
        sys::map_ring(fd, len, pgoff).map_err(|source| XskError::Setup { step: what, source })?;
    let base = m.ptr;
    let owner: Arc<RingMap> = Arc::new(m);
    // SAFETY: the kernel laid the ring out at these offsets inside the mapping, which `owner`
    // keeps alive; size is the power of two we asked for.
    Ok(unsafe {
        RawRing::from_raw_parts(
            base.add(off.producer as usize).cast(),
            base.add(off.consumer as usize).cast(),
            Some(base.add(off.flags as usize).cast()),
            base.add(off.desc as usize).cast(),
            size,
            owner,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ways(shared: bool, mode: BindMode, multi_buffer: bool) -> Vec<(BindMode, bool)> {
        let config = SocketConfig {
            mode,
            multi_buffer,
            ..SocketConfig::default()
        };
        bind_variants(shared, &config)
            .iter()
            .map(|c| (c.mode, c.multi_buffer))
            .collect()
    }

    #[test]
    fn multi_buffer_is_tried_first_and_never_costs_zero_copy() {
        use BindMode::*;
        assert_eq!(ways(false, Copy, false), vec![(Copy, false)]);
        assert_eq!(ways(false, Copy, true), vec![(Copy, true), (Copy, false)]);
        assert_eq!(
            ways(false, ZeroCopy, true),
            vec![(ZeroCopy, true), (ZeroCopy, false)]
        );
        assert_eq!(
            ways(false, Any, true),
            vec![
                (ZeroCopy, true),
                (ZeroCopy, false),
                (Any, true),
                (Any, false)
            ]
        );
        // A socket sharing a UMEM names neither: it inherits the owner's.
        assert_eq!(ways(true, Any, true), vec![(Any, true)]);
    }
}
