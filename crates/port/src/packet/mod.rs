//! The AF_PACKET backend over TPACKET_V3 rings: the seeds' V3 baseline, and the fallback where
//! XDP is unavailable.
//!
//! One mapping holds the receive ring (blocks the kernel fills with many packets each) and then
//! the transmit ring (fixed frames). A frame handle is the byte offset of packet data in that
//! mapping. Receive is zero-copy: a packet stays in its block, and the block goes back to the
//! kernel once every packet of it has been released or sent. Sending a received packet copies
//! it into a transmit frame (counted in `copies`, as are the rare moves that close a hole in the
//! transmit ring); frames from `alloc_tx` are sent in place.
//!
//! Drops, by reason: `rx_ring_full` (the kernel's PACKET_STATISTICS tp_drops),
//! `rx_invalid_desc` (a block or packet header that points outside its block),
//! `tx_ring_full` (no free transmit frame for a received packet), `tx_invalid_desc` (a bad
//! handle, or a length outside 14..=max_packet_len), `tx_error` (TP_STATUS_WRONG_FORMAT).
//!
//! The backend in files: this one opens the port and implements `Port`; `rx_ring` walks the
//! receive blocks, `tx_ring` keeps the transmit frames in ring order, and `mmap` holds every
//! `unsafe` of the backend (the socket calls and the shared mapping).

mod mmap;
mod rx_ring;
mod tx_ring;

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;

use self::mmap::{RingMap, TX_DATA_OFFSET};
use self::rx_ring::RxRing;
use self::tx_ring::TxRing;
use crate::{
    Backend, Batch, FrameAudit, LinkState, Port, PortError, PortInfo, PortOptions, PortSpec,
    PortStats,
};

/// Largest receive block. A 1 MiB block holds thousands of small packets, so each block the
/// kernel retires is a big batch for us, and it is a power-of-two number of pages as the
/// kernel's page-vector allocator wants.
const RX_BLOCK_MAX: usize = 1 << 20;
/// Smallest receive block: still holds a 64 KiB GRO packet whole.
const RX_BLOCK_MIN: usize = 64 << 10;
/// Blocks are shrunk until the ring has this many, so the kernel has blocks to fill while the
/// application still holds packets of a few others.
const RX_BLOCKS_WANTED: usize = 8;
/// Retire a partly filled block after 1 ms (the kernel rounds up to a jiffy): bounds receive
/// latency at low rates; the kernel's default, derived from link speed, is up to 8 ms.
const RX_RETIRE_MS: u32 = 1;
/// An Ethernet header: the kernel rejects shorter frames (dev_validate_header).
const ETH_HLEN: u32 = 14;
/// Rounds of kick -> skip a rejected frame -> kick per flush (each skips one bad frame).
const KICK_ROUNDS: usize = 8;

/// A port on an AF_PACKET socket with TPACKET_V3 receive and transmit rings.
pub struct PacketPort {
    info: PortInfo,
    iface: String,
    /// The interface's index when bound: what `link` asks about.
    ifindex: u32,
    // Fields drop in order: unmap the rings, then close the socket.
    map: RingMap,
    socket: OwnedFd,
    rx: Option<RxRing>,
    tx: Option<TxRing>,
    /// Bytes of the mapping that are the receive ring (transmit frames follow).
    rx_len: usize,
    max_packet_len: u32,
    stats: PortStats,
}

/// What a frame handle refers to.
enum Handle {
    Rx,
    Tx(usize),
    Bad,
}

impl PacketPort {
    /// The index of the interface the socket was bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Opens `spec.iface` with an AF_PACKET socket and maps its rings.
    pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<PacketPort, PortError> {
        if opts.frame_size != 2048 && opts.frame_size != 4096 {
            return Err(PortError::FrameSize(opts.frame_size));
        }
        let iface = spec.iface.as_str();
        let ifindex = mmap::interface_index(iface)
            .ok_or_else(|| PortError::NoInterface(iface.to_string()))?;
        let socket = open_socket(iface)?;
        let fd = socket.as_fd();
        set_socket_options(fd, iface, opts)?;
        let rings = size_rings(fd, iface, opts)?;
        let map = RingMap::map(fd, rings.rx_len + rings.tx_len)
            .map_err(io_err(iface, "mmap of the packet rings"))?;
        // Protocol 0 on a send-only port: the kernel delivers it nothing to drop.
        let protocol = if opts.rx { libc::ETH_P_ALL as u16 } else { 0 };
        mmap::bind_interface(fd, ifindex, protocol).map_err(io_err(iface, "bind"))?;

        Ok(PacketPort {
            info: PortInfo {
                spec: spec.to_string(),
                backend: Backend::Packet,
                mode: "tpacket_v3".to_string(),
                notes: option_notes(opts),
                busy_poll: false,
                multi_buffer: None,
            },
            iface: iface.to_string(),
            ifindex,
            map,
            socket,
            rx: rings.rx,
            tx: rings.tx,
            rx_len: rings.rx_len,
            max_packet_len: (opts.frame_size as usize - TX_DATA_OFFSET) as u32,
            stats: PortStats::default(),
        })
    }

    fn handle(&self, addr: u64) -> Handle {
        let Ok(addr) = usize::try_from(addr) else {
            return Handle::Bad;
        };
        if addr < self.rx_len {
            return Handle::Rx;
        }
        match &self.tx {
            Some(tx) => tx.slot_of(addr).map_or(Handle::Bad, Handle::Tx),
            None => Handle::Bad,
        }
    }

    /// True when `addr..addr+len` is packet memory the application owns now.
    fn owns(&self, addr: u64, len: u32) -> bool {
        match (self.handle(addr), &self.rx, &self.tx) {
            (Handle::Rx, Some(rx), _) => rx.owns(addr as usize, len as usize),
            (Handle::Tx(slot), _, Some(tx)) => tx.app_holds(slot) && len <= self.max_packet_len,
            _ => false,
        }
    }

    fn release_rx(&mut self, addr: u64) -> bool {
        match self.rx.as_mut() {
            Some(rx) => rx.release(&self.map, addr as usize),
            None => false,
        }
    }

    /// Queues one packet of a `tx_burst`; true when it was queued.
    fn queue_packet(&mut self, addr: u64, len: u32) -> bool {
        let len_ok = (ETH_HLEN..=self.max_packet_len).contains(&len);
        match self.handle(addr) {
            Handle::Tx(slot) => {
                let Some(tx) = self.tx.as_mut().filter(|tx| tx.app_holds(slot)) else {
                    self.stats.drops.tx_invalid_desc += 1;
                    return false;
                };
                if !len_ok {
                    self.stats.drops.tx_invalid_desc += 1;
                    tx.give_back(slot);
                    return false;
                }
                tx.submit(&self.map, slot, len)
            }
            Handle::Rx => {
                let valid = len_ok && self.owns(addr, len);
                if !valid {
                    self.stats.drops.tx_invalid_desc += 1;
                }
                let queued = valid && self.copy_to_tx(addr, len);
                // Sent or not, the application is done with the received packet.
                self.release_rx(addr);
                queued
            }
            Handle::Bad => {
                self.stats.drops.tx_invalid_desc += 1;
                false
            }
        }
    }

    /// Copies a received packet into a free transmit frame and queues it.
    fn copy_to_tx(&mut self, addr: u64, len: u32) -> bool {
        let Some(tx) = self.tx.as_mut() else {
            self.stats.drops.tx_ring_full += 1;
            return false;
        };
        let Some(slot) = tx.take_free() else {
            self.stats.drops.tx_ring_full += 1;
            return false;
        };
        if !self
            .map
            .copy_within(addr as usize, tx.data_offset(slot), len as usize)
        {
            self.stats.drops.tx_invalid_desc += 1;
            tx.give_back(slot);
            return false;
        }
        self.stats.copies += 1;
        tx.submit(&self.map, slot, len)
    }

    /// Fills holes, asks the kernel to send, and accounts what it took or rejected.
    fn kick(&mut self) -> Result<(), PortError> {
        let Some(tx) = self.tx.as_mut() else {
            return Ok(());
        };
        for _ in 0..KICK_ROUNDS {
            if tx.holes {
                tx.fill_holes(&mut self.map, &mut self.stats);
            }
            if !tx.kernel_can_take() {
                return Ok(());
            }
            let sent = mmap::kick_tx(self.socket.as_fd());
            let rejected = tx.account_kick(&self.map, &mut self.stats);
            if rejected {
                // TP_STATUS_WRONG_FORMAT: the kernel stopped at that frame; skip it, go on.
                continue;
            }
            return match sent {
                Ok(()) => Ok(()),
                // Socket buffer full or the device refused: the frames stay queued and the
                // next flush kicks again.
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR)
                    ) =>
                {
                    Ok(())
                }
                Err(source) => Err(PortError::of_link(
                    &self.info.spec,
                    self.ifindex,
                    "send (tx ring kick)",
                    source,
                )),
            };
        }
        Ok(())
    }
}

impl Port for PacketPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        let Some(rx) = self.rx.as_mut() else {
            return Ok(0);
        };
        let mut count = 0;
        while batch.room() > 0 {
            let Some((addr, len, meta)) = rx.next_packet(&mut self.map, &mut self.stats.drops)
            else {
                break;
            };
            batch.push_with_meta(addr as u64, len, meta);
            self.stats.rx_bytes += u64::from(len);
            count += 1;
        }
        self.stats.rx_packets += count as u64;
        Ok(count)
    }

    fn tx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        if let Some(tx) = self.tx.as_mut() {
            tx.reclaim(&self.map);
        }
        let mut queued = 0;
        for i in 0..batch.len() {
            if self.queue_packet(batch.addr(i), batch.frame_len(i)) {
                queued += 1;
            }
        }
        batch.clear();
        if let Some(tx) = self.tx.as_mut() {
            tx.trim_head();
        }
        if self.tx.as_ref().is_some_and(|tx| tx.queued > 0) {
            self.kick()?;
        }
        Ok(queued)
    }

    fn release(&mut self, batch: &mut Batch) {
        for i in 0..batch.len() {
            let addr = batch.addr(i);
            match self.handle(addr) {
                Handle::Rx => {
                    self.release_rx(addr);
                }
                Handle::Tx(slot) => {
                    if let Some(tx) = self.tx.as_mut().filter(|tx| tx.app_holds(slot)) {
                        tx.give_back(slot);
                    }
                }
                Handle::Bad => {}
            }
        }
        batch.clear();
        if let Some(tx) = self.tx.as_mut() {
            tx.trim_head();
        }
    }

    fn alloc_tx(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize {
        let Some(tx) = self.tx.as_mut() else { return 0 };
        if len > self.max_packet_len {
            return 0;
        }
        tx.reclaim(&self.map);
        let mut count = 0;
        while count < n && batch.room() > 0 {
            let Some(slot) = tx.take_free() else { break };
            batch.push(tx.data_offset(slot) as u64, len);
            count += 1;
        }
        count
    }

    fn packet(&self, addr: u64, len: u32) -> &[u8] {
        if !self.owns(addr, len) {
            return &[];
        }
        self.map.bytes(addr as usize, len as usize).unwrap_or(&[])
    }

    fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        if !self.owns(addr, len) {
            return &mut [];
        }
        self.map
            .bytes_mut(addr as usize, len as usize)
            .unwrap_or(&mut [])
    }

    fn max_packet_len(&self) -> u32 {
        self.max_packet_len
    }

    fn flush(&mut self) -> Result<(), PortError> {
        let Some(tx) = self.tx.as_mut() else {
            return Ok(());
        };
        tx.reclaim(&self.map);
        if tx.queued > 0 {
            self.kick()?;
        }
        if let Some(tx) = self.tx.as_mut() {
            tx.reclaim(&self.map);
        }
        Ok(())
    }

    fn poll_fds(&self) -> Vec<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.rx.iter().map(|_| self.socket.as_raw_fd()).collect()
    }

    fn wait_rx(&mut self, timeout: Duration) -> Result<(), PortError> {
        if let Some(rx) = &self.rx
            && rx.packets_ready(&self.map)
        {
            return Ok(());
        }
        // The kernel reports POLLIN while the block before its current one is ours, so an
        // application holding packets across this call may wake early (the contract allows it).
        mmap::poll_readable(self.socket.as_fd(), timeout).map_err(|source| PortError::Io {
            iface: self.iface.clone(),
            what: "poll",
            source,
        })
    }

    fn tx_pending(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.pending(&self.map))
    }

    fn attach_filter(&mut self, program: &[crate::SockFilter]) -> Result<bool, PortError> {
        mmap::attach_filter(self.socket.as_fd(), program).map_err(|source| PortError::Io {
            iface: self.iface.clone(),
            what: "SO_ATTACH_FILTER",
            source,
        })?;
        Ok(true)
    }

    fn stats(&mut self) -> PortStats {
        if self.rx.is_some() {
            // The kernel zeroes its counters on each read: accumulate.
            if let Ok(kernel) = mmap::read_statistics(self.socket.as_fd()) {
                self.stats.drops.rx_ring_full += u64::from(kernel.tp_drops);
            }
        }
        self.stats
    }

    fn audit(&self) -> Option<FrameAudit> {
        None
    }

    fn link(&self) -> LinkState {
        wirespeed_xsk::link_state(self.ifindex)
    }

    /// Frames count as sent when the kernel takes them: those still queued are given up.
    fn abandon_tx(&mut self) -> u64 {
        match self.tx.as_mut() {
            Some(tx) => tx.abandon(&self.map),
            None => 0,
        }
    }
}

/// The error for a failed set-up step of the port on `iface`.
fn io_err<'a>(iface: &'a str, what: &'static str) -> impl FnOnce(io::Error) -> PortError + 'a {
    move |source| PortError::Io {
        iface: iface.to_string(),
        what,
        source,
    }
}

/// An AF_PACKET socket for `iface`; says when the missing capability is why it failed.
fn open_socket(iface: &str) -> Result<OwnedFd, PortError> {
    mmap::packet_socket().map_err(|source| {
        let what = match source.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => "socket(AF_PACKET) needs CAP_NET_RAW",
            _ => "socket(AF_PACKET)",
        };
        PortError::Io {
            iface: iface.to_string(),
            what,
            source,
        }
    })
}

/// TPACKET_V3, and what the port sees and how it sends.
fn set_socket_options(
    fd: BorrowedFd<'_>,
    iface: &str,
    opts: &PortOptions,
) -> Result<(), PortError> {
    mmap::set_option(fd, libc::PACKET_VERSION, mmap::TPACKET_V3)
        .map_err(io_err(iface, "PACKET_VERSION"))?;
    // A receiver sees what is sent on its interface (its own or the host's sends) only
    // when asked (a capture's -Q inout).
    if !opts.outgoing {
        mmap::set_option(fd, libc::PACKET_IGNORE_OUTGOING, 1)
            .map_err(io_err(iface, "PACKET_IGNORE_OUTGOING"))?;
    }
    if opts.tx {
        mmap::set_option(fd, libc::PACKET_QDISC_BYPASS, 1)
            .map_err(io_err(iface, "PACKET_QDISC_BYPASS"))?;
    }
    Ok(())
}

/// The rings a port asked for, sized in the kernel: the receive ring first in the mapping,
/// the transmit ring after it.
struct Rings {
    rx: Option<RxRing>,
    rx_len: usize,
    tx: Option<TxRing>,
    tx_len: usize,
}

/// Asks the kernel for the receive and transmit rings `opts` wants.
fn size_rings(fd: BorrowedFd<'_>, iface: &str, opts: &PortOptions) -> Result<Rings, PortError> {
    let page = mmap::page_size();
    let frame_size = opts.frame_size as usize;
    let frame_count = opts.frame_count.max(1) as usize;
    let mut rings = Rings {
        rx: None,
        rx_len: 0,
        tx: None,
        tx_len: 0,
    };
    if opts.rx {
        let req = rx_ring_request(frame_count, frame_size, page);
        mmap::set_ring(fd, libc::PACKET_RX_RING, &req).map_err(io_err(iface, "PACKET_RX_RING"))?;
        rings.rx_len = req.tp_block_size as usize * req.tp_block_nr as usize;
        rings.rx = Some(RxRing::new(
            req.tp_block_size as usize,
            req.tp_block_nr as usize,
        ));
    }
    if opts.tx {
        let req = tx_ring_request(frame_count, frame_size, page);
        mmap::set_ring(fd, libc::PACKET_TX_RING, &req).map_err(io_err(iface, "PACKET_TX_RING"))?;
        rings.tx_len = req.tp_block_size as usize * req.tp_block_nr as usize;
        rings.tx = Some(TxRing::new(
            rings.rx_len,
            frame_size,
            req.tp_frame_nr as usize,
        ));
    }
    Ok(rings)
}

/// The receive ring: room for `frame_count * frame_size` bytes in blocks of at most 1 MiB,
/// smaller blocks (down to 64 KiB) when that gives fewer than 8.
fn rx_ring_request(frame_count: usize, frame_size: usize, page: usize) -> libc::tpacket_req3 {
    let bytes = frame_count.saturating_mul(frame_size);
    let floor = RX_BLOCK_MIN.max(page);
    let mut block = RX_BLOCK_MAX.max(page);
    while block / 2 >= floor && bytes / block < RX_BLOCKS_WANTED {
        block /= 2;
    }
    let block_nr = bytes.div_ceil(block).max(2);
    libc::tpacket_req3 {
        tp_block_size: block as u32,
        tp_block_nr: u32::try_from(block_nr).unwrap_or(u32::MAX),
        // V3 receive places packets back to back; the frame fields only pass the kernel's
        // sanity check (frames per block * blocks == frames).
        tp_frame_size: frame_size as u32,
        tp_frame_nr: u32::try_from(block / frame_size * block_nr).unwrap_or(u32::MAX),
        tp_retire_blk_tov: RX_RETIRE_MS,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    }
}

/// The transmit ring: `frame_count` frames of `frame_size` (rounded up to whole blocks), in
/// blocks of one page or one frame, so frame i is at byte i * frame_size. The kernel takes
/// no block timeout, private area or feature word for a V3 transmit ring.
fn tx_ring_request(frame_count: usize, frame_size: usize, page: usize) -> libc::tpacket_req3 {
    let block = frame_size.max(page);
    let per_block = block / frame_size;
    let block_nr = frame_count.div_ceil(per_block);
    libc::tpacket_req3 {
        tp_block_size: block as u32,
        tp_block_nr: u32::try_from(block_nr).unwrap_or(u32::MAX),
        tp_frame_size: frame_size as u32,
        tp_frame_nr: u32::try_from(block_nr * per_block).unwrap_or(u32::MAX),
        tp_retire_blk_tov: 0,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    }
}

/// Options that mean nothing to this backend, said once rather than ignored silently.
fn option_notes(opts: &PortOptions) -> Vec<String> {
    let mut notes = Vec::new();
    if opts.hugepages {
        notes.push("hugepages: not used, the kernel allocates the packet rings".to_string());
    }
    if opts.headroom != 0 {
        notes.push("headroom: not used, the kernel places received packets".to_string());
    }
    if opts.busy_poll {
        notes.push("busy poll: not set up by the packet backend".to_string());
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_ring_has_room_for_the_frames_in_power_of_two_blocks() {
        let req = rx_ring_request(4096, 4096, 4096);
        assert_eq!((req.tp_block_size, req.tp_block_nr), (1 << 20, 16));
        let req = rx_ring_request(256, 2048, 4096);
        assert_eq!((req.tp_block_size, req.tp_block_nr), (64 << 10, 8));
        let req = rx_ring_request(1, 2048, 4096);
        assert_eq!((req.tp_block_size, req.tp_block_nr), (64 << 10, 2));
        for req in [
            rx_ring_request(1000, 4096, 4096),
            rx_ring_request(3, 2048, 65536),
        ] {
            assert!(req.tp_block_size.is_power_of_two());
            assert_eq!(
                req.tp_frame_nr,
                req.tp_block_size / req.tp_frame_size * req.tp_block_nr
            );
        }
    }

    #[test]
    fn tx_ring_frames_are_contiguous() {
        let req = tx_ring_request(4096, 2048, 4096);
        assert_eq!(
            (req.tp_block_size, req.tp_block_nr, req.tp_frame_nr),
            (4096, 2048, 4096)
        );
        let req = tx_ring_request(5, 2048, 4096);
        assert_eq!(req.tp_frame_nr, 6);
        let req = tx_ring_request(5, 4096, 16384);
        assert_eq!((req.tp_block_size, req.tp_frame_nr), (16384, 8));
    }
}
