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

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use crate::packet_mmap::{self as mmap, BLOCK_DESC_LEN, FRAME_HDR_LEN, RingMap, TX_DATA_OFFSET};
use crate::{
    Backend, Batch, DropCounters, FrameAudit, Port, PortError, PortInfo, PortOptions, PortSpec,
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
/// The 802.1Q tag the kernel strips into the packet header (TP_STATUS_VLAN_VALID).
const VLAN_HLEN: usize = 4;
const ETH_ALEN2: usize = 12;
/// Rounds of kick -> skip a rejected frame -> kick per flush (each skips one bad frame).
const KICK_ROUNDS: usize = 8;

/// A port on an AF_PACKET socket with TPACKET_V3 receive and transmit rings.
pub struct PacketPort {
    info: PortInfo,
    iface: String,
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

/// Receive ring state: which blocks user space holds, and the walk through the current one.
struct RxRing {
    block_size: usize,
    blocks: Vec<RxBlock>,
    current: usize,
    walk: Option<BlockWalk>,
}

#[derive(Debug, Clone, Copy, Default)]
struct RxBlock {
    /// Handed to us by the kernel and not yet given back.
    held: bool,
    /// Every packet of it has been handed to the application.
    walked: bool,
    /// Packets of it the application still holds.
    outstanding: u32,
}

#[derive(Debug, Clone, Copy)]
struct BlockWalk {
    remaining: u32,
    /// Offset of the next packet header from the block start.
    next: usize,
}

/// Transmit ring state. The kernel sends frames strictly in ring order from its own head, so
/// frames are handed out in ring order and holes (frames given back unsent) are filled before
/// each kick. Positions are free-running counters: tail <= kernel_head <= head <= tail + n.
struct TxRing {
    /// Offset of the first frame in the mapping.
    start: usize,
    frame_size: usize,
    frames: Vec<TxFrame>,
    /// Oldest frame the kernel may still be sending.
    tail: u64,
    /// The kernel's `tx_ring.head`: the next frame it looks at for TP_STATUS_SEND_REQUEST.
    kernel_head: u64,
    /// Next frame to hand out.
    head: u64,
    /// Frames in `Queued`.
    queued: usize,
    /// Some frame in kernel_head..head may be `Free` (a hole the kernel would stop at).
    holes: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxFrame {
    Free,
    /// Handed out by `alloc_tx`; the application fills it.
    App,
    /// TP_STATUS_SEND_REQUEST, not yet taken by the kernel.
    Queued,
    /// Taken by the kernel, waiting for TP_STATUS_AVAILABLE.
    InFlight,
}

/// What a frame handle refers to.
enum Handle {
    Rx,
    Tx(usize),
    Bad,
}

impl PacketPort {
    /// Opens `spec.iface` with an AF_PACKET socket and maps its rings.
    pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<PacketPort, PortError> {
        if opts.frame_size != 2048 && opts.frame_size != 4096 {
            return Err(PortError::FrameSize(opts.frame_size));
        }
        let iface = spec.iface.as_str();
        let io_err = |what: &'static str| {
            move |source: io::Error| PortError::Io {
                iface: iface.to_string(),
                what,
                source,
            }
        };
        let ifindex = mmap::interface_index(iface)
            .ok_or_else(|| PortError::NoInterface(iface.to_string()))?;
        let socket = mmap::packet_socket().map_err(|source| {
            let what = match source.raw_os_error() {
                Some(libc::EPERM | libc::EACCES) => "socket(AF_PACKET) needs CAP_NET_RAW",
                _ => "socket(AF_PACKET)",
            };
            PortError::Io {
                iface: iface.to_string(),
                what,
                source,
            }
        })?;
        let fd = socket.as_fd();
        mmap::set_option(fd, libc::PACKET_VERSION, mmap::TPACKET_V3)
            .map_err(io_err("PACKET_VERSION"))?;
        // A receiver never sees what is sent on its interface (its own or the host's sends).
        mmap::set_option(fd, libc::PACKET_IGNORE_OUTGOING, 1)
            .map_err(io_err("PACKET_IGNORE_OUTGOING"))?;
        if opts.tx {
            mmap::set_option(fd, libc::PACKET_QDISC_BYPASS, 1)
                .map_err(io_err("PACKET_QDISC_BYPASS"))?;
        }

        let page = mmap::page_size();
        let frame_size = opts.frame_size as usize;
        let frame_count = opts.frame_count.max(1) as usize;
        let mut rx_len = 0;
        let mut rx = None;
        if opts.rx {
            let req = rx_ring_request(frame_count, frame_size, page);
            mmap::set_ring(fd, libc::PACKET_RX_RING, &req).map_err(io_err("PACKET_RX_RING"))?;
            rx_len = req.tp_block_size as usize * req.tp_block_nr as usize;
            rx = Some(RxRing::new(
                req.tp_block_size as usize,
                req.tp_block_nr as usize,
            ));
        }
        let mut tx_len = 0;
        let mut tx = None;
        if opts.tx {
            let req = tx_ring_request(frame_count, frame_size, page);
            mmap::set_ring(fd, libc::PACKET_TX_RING, &req).map_err(io_err("PACKET_TX_RING"))?;
            tx_len = req.tp_block_size as usize * req.tp_block_nr as usize;
            tx = Some(TxRing::new(rx_len, frame_size, req.tp_frame_nr as usize));
        }
        let map = RingMap::map(fd, rx_len + tx_len).map_err(io_err("mmap of the packet rings"))?;
        // Protocol 0 on a send-only port: the kernel delivers it nothing to drop.
        let protocol = if opts.rx { libc::ETH_P_ALL as u16 } else { 0 };
        mmap::bind_interface(fd, ifindex, protocol).map_err(io_err("bind"))?;

        Ok(PacketPort {
            info: PortInfo {
                spec: spec.to_string(),
                backend: Backend::Packet,
                mode: "tpacket_v3".to_string(),
                notes: option_notes(opts),
            },
            iface: iface.to_string(),
            map,
            socket,
            rx,
            tx,
            rx_len,
            max_packet_len: (frame_size - TX_DATA_OFFSET) as u32,
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
            (Handle::Tx(slot), _, Some(tx)) => {
                tx.frames[slot] == TxFrame::App && len <= self.max_packet_len
            }
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
                let Some(tx) = self
                    .tx
                    .as_mut()
                    .filter(|tx| tx.frames[slot] == TxFrame::App)
                else {
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
                Err(source) => Err(PortError::Io {
                    iface: self.iface.clone(),
                    what: "send (tx ring kick)",
                    source,
                }),
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
            let Some((addr, len)) = rx.next_packet(&mut self.map, &mut self.stats.drops) else {
                break;
            };
            batch.push(addr as u64, len);
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
                    if let Some(tx) = self
                        .tx
                        .as_mut()
                        .filter(|tx| tx.frames[slot] == TxFrame::App)
                    {
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

    fn wait_rx(&mut self, timeout: Duration) -> Result<(), PortError> {
        if let Some(rx) = &self.rx
            && (rx.walk.is_some() || rx.block_ready(&self.map))
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
}

impl RxRing {
    fn new(block_size: usize, block_nr: usize) -> RxRing {
        RxRing {
            block_size,
            blocks: vec![RxBlock::default(); block_nr],
            current: 0,
            walk: None,
        }
    }

    /// True when the kernel has handed over the current block and we have not walked it yet.
    fn block_ready(&self, map: &RingMap) -> bool {
        !self.blocks[self.current].held && map.user_block(self.current * self.block_size).is_some()
    }

    fn owns(&self, addr: usize, len: usize) -> bool {
        let block = addr / self.block_size;
        let start = block * self.block_size;
        self.blocks.get(block).is_some_and(|b| b.held)
            && addr >= start + BLOCK_DESC_LEN
            && addr + len <= start + self.block_size
    }

    /// The next received packet (handle, length), walking into the next block when the kernel
    /// has handed it over. Headers that point outside their block are counted and skipped.
    fn next_packet(&mut self, map: &mut RingMap, drops: &mut DropCounters) -> Option<(usize, u32)> {
        loop {
            if self.walk.is_none() && !self.open_block(map) {
                return None;
            }
            let walk = self.walk.as_mut()?;
            if walk.remaining == 0 {
                self.finish_block(map);
                continue;
            }
            let block = self.current * self.block_size;
            let at = walk.next;
            let in_block = at >= BLOCK_DESC_LEN
                && at
                    .checked_add(FRAME_HDR_LEN)
                    .is_some_and(|end| end <= self.block_size);
            let header = in_block.then(|| map.rx_frame(block + at)).flatten();
            let Some(header) = header else {
                drops.rx_invalid_desc += u64::from(walk.remaining);
                self.finish_block(map);
                continue;
            };
            walk.remaining -= 1;
            if walk.remaining > 0 {
                if (header.next_offset as usize) < FRAME_HDR_LEN {
                    // Later packets cannot be found: count them, end the block.
                    drops.rx_invalid_desc += u64::from(walk.remaining);
                    walk.remaining = 0;
                } else {
                    walk.next = at.saturating_add(header.next_offset as usize);
                }
            }
            let mac = usize::from(header.mac);
            let snaplen = header.snaplen as usize;
            let end = at.checked_add(mac).and_then(|d| d.checked_add(snaplen));
            if mac < FRAME_HDR_LEN || end.is_none_or(|end| end > self.block_size) {
                drops.rx_invalid_desc += 1;
                continue;
            }
            let (data, len) = restore_vlan_tag(map, block + at, &header);
            self.blocks[self.current].outstanding += 1;
            if self.walk.is_some_and(|w| w.remaining == 0) {
                self.finish_block(map);
            }
            return Some((data, len));
        }
    }

    fn open_block(&mut self, map: &RingMap) -> bool {
        let index = self.current;
        if self.blocks[index].held {
            // Still ours from the last lap (the application holds some of its packets).
            return false;
        }
        let Some(header) = map.user_block(index * self.block_size) else {
            return false;
        };
        self.blocks[index] = RxBlock {
            held: true,
            walked: false,
            outstanding: 0,
        };
        self.walk = Some(BlockWalk {
            remaining: header.num_pkts,
            next: header.first_pkt as usize,
        });
        true
    }

    fn finish_block(&mut self, map: &RingMap) {
        let index = self.current;
        self.walk = None;
        self.blocks[index].walked = true;
        self.current = (index + 1) % self.blocks.len();
        if self.blocks[index].outstanding == 0 {
            self.give_to_kernel(map, index);
        }
    }

    fn give_to_kernel(&mut self, map: &RingMap, index: usize) {
        self.blocks[index] = RxBlock::default();
        map.give_block_to_kernel(index * self.block_size);
    }

    /// The application is done with the packet at `addr`; false for a handle we did not give.
    fn release(&mut self, map: &RingMap, addr: usize) -> bool {
        let index = addr / self.block_size;
        let Some(block) = self.blocks.get_mut(index) else {
            return false;
        };
        if !block.held || block.outstanding == 0 {
            return false;
        }
        block.outstanding -= 1;
        if block.outstanding == 0 && block.walked {
            self.give_to_kernel(map, index);
        }
        true
    }
}

/// Puts back the 802.1Q tag the kernel moved into the packet header, so the application sees
/// the bytes that were on the wire (libpcap does the same): the MAC addresses move 4 bytes
/// towards the header, into the gap the kernel leaves in front of the packet.
fn restore_vlan_tag(map: &mut RingMap, frame: usize, header: &mmap::RxFrameHeader) -> (usize, u32) {
    let data = frame + usize::from(header.mac);
    let (mac, snaplen) = (usize::from(header.mac), header.snaplen);
    if header.status & libc::TP_STATUS_VLAN_VALID == 0
        || mac < FRAME_HDR_LEN + VLAN_HLEN
        || (snaplen as usize) < ETH_ALEN2
    {
        return (data, snaplen);
    }
    let tpid = if header.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
        header.vlan_tpid
    } else {
        0x8100
    };
    let tci = header.vlan_tci as u16;
    let start = data - VLAN_HLEN;
    if !map.copy_within(data, start, ETH_ALEN2) {
        return (data, snaplen);
    }
    if let Some(tag) = map.bytes_mut(start + ETH_ALEN2, VLAN_HLEN) {
        tag[..2].copy_from_slice(&tpid.to_be_bytes());
        tag[2..].copy_from_slice(&tci.to_be_bytes());
    }
    (start, snaplen + VLAN_HLEN as u32)
}

impl TxRing {
    fn new(start: usize, frame_size: usize, frame_nr: usize) -> TxRing {
        TxRing {
            start,
            frame_size,
            frames: vec![TxFrame::Free; frame_nr],
            tail: 0,
            kernel_head: 0,
            head: 0,
            queued: 0,
            holes: false,
        }
    }

    fn slot(&self, position: u64) -> usize {
        (position % self.frames.len() as u64) as usize
    }

    fn frame_offset(&self, slot: usize) -> usize {
        self.start + slot * self.frame_size
    }

    fn data_offset(&self, slot: usize) -> usize {
        self.frame_offset(slot) + TX_DATA_OFFSET
    }

    /// The frame whose data starts at `addr`, if any.
    fn slot_of(&self, addr: usize) -> Option<usize> {
        let rel = addr.checked_sub(self.start + TX_DATA_OFFSET)?;
        let slot = rel / self.frame_size;
        (rel % self.frame_size == 0 && slot < self.frames.len()).then_some(slot)
    }

    /// Hands out the next frame in ring order, if the ring has room.
    fn take_free(&mut self) -> Option<usize> {
        if self.head - self.tail >= self.frames.len() as u64 {
            return None;
        }
        let slot = self.slot(self.head);
        debug_assert_eq!(self.frames[slot], TxFrame::Free);
        self.frames[slot] = TxFrame::App;
        self.head += 1;
        Some(slot)
    }

    /// A handed-out frame comes back unsent: it becomes a hole until filled or trimmed.
    fn give_back(&mut self, slot: usize) {
        self.frames[slot] = TxFrame::Free;
        self.holes = true;
    }

    fn submit(&mut self, map: &RingMap, slot: usize, len: u32) -> bool {
        if !map.tx_submit(self.frame_offset(slot), len) {
            self.give_back(slot);
            return false;
        }
        self.frames[slot] = TxFrame::Queued;
        self.queued += 1;
        true
    }

    /// Pulls `head` back over trailing holes, so the next frames handed out close them.
    fn trim_head(&mut self) {
        while self.head > self.kernel_head && self.frames[self.slot(self.head - 1)] == TxFrame::Free
        {
            self.head -= 1;
        }
    }

    /// True when the frame at the kernel's head is waiting to be sent.
    fn kernel_can_take(&self) -> bool {
        self.kernel_head < self.head && self.frames[self.slot(self.kernel_head)] == TxFrame::Queued
    }

    /// Moves queued frames down into holes, keeping their order, so the kernel (which stops
    /// at the first frame not requesting send) finds them contiguous from its head. A frame
    /// the application still holds stops the kernel until it is sent or released.
    fn fill_holes(&mut self, map: &mut RingMap, stats: &mut PortStats) {
        let mut lo = self.kernel_head;
        let mut hi = lo;
        while lo < self.head {
            match self.frames[self.slot(lo)] {
                TxFrame::Queued => lo += 1,
                TxFrame::Free => {
                    hi = hi.max(lo + 1);
                    while hi < self.head && self.frames[self.slot(hi)] != TxFrame::Queued {
                        hi += 1;
                    }
                    if hi == self.head {
                        break;
                    }
                    let (to, from) = (self.slot(lo), self.slot(hi));
                    if !self.move_frame(map, from, to) {
                        break;
                    }
                    stats.copies += 1;
                    lo += 1;
                    hi += 1;
                }
                TxFrame::App | TxFrame::InFlight => break,
            }
        }
        self.trim_head();
        self.holes = (lo..self.head).any(|p| self.frames[self.slot(p)] == TxFrame::Free);
    }

    fn move_frame(&mut self, map: &mut RingMap, from: usize, to: usize) -> bool {
        let Some(len) = map.tx_len(self.frame_offset(from)) else {
            return false;
        };
        let len = len.min((self.frame_size - TX_DATA_OFFSET) as u32);
        if !map.copy_within(self.data_offset(from), self.data_offset(to), len as usize)
            || !map.tx_submit(self.frame_offset(to), len)
        {
            return false;
        }
        map.tx_make_available(self.frame_offset(from));
        self.frames[to] = TxFrame::Queued;
        self.frames[from] = TxFrame::Free;
        true
    }

    /// After a kick: frames the kernel took move to `InFlight` (counted as sent). Returns true
    /// when the kernel rejected the frame at its head (counted in `tx_error`, now a hole).
    fn account_kick(&mut self, map: &RingMap, stats: &mut PortStats) -> bool {
        while self.kernel_can_take() {
            let slot = self.slot(self.kernel_head);
            let frame = self.frame_offset(slot);
            let status = map.tx_status(frame).unwrap_or(libc::TP_STATUS_SEND_REQUEST);
            if status & libc::TP_STATUS_WRONG_FORMAT != 0 {
                stats.drops.tx_error += 1;
                map.tx_make_available(frame);
                self.frames[slot] = TxFrame::Free;
                self.queued -= 1;
                self.holes = true;
                return true;
            }
            if status & libc::TP_STATUS_SEND_REQUEST != 0 {
                break;
            }
            // SENDING, or AVAILABLE again: the kernel took it and moved its head on.
            self.frames[slot] = TxFrame::InFlight;
            self.queued -= 1;
            self.kernel_head += 1;
            stats.tx_packets += 1;
            stats.tx_bytes += u64::from(map.tx_len(frame).unwrap_or(0));
        }
        false
    }

    /// Frames the kernel has finished with become free again, in ring order.
    fn reclaim(&mut self, map: &RingMap) {
        while self.tail < self.kernel_head {
            let slot = self.slot(self.tail);
            if busy(map.tx_status(self.frame_offset(slot))) {
                break;
            }
            self.frames[slot] = TxFrame::Free;
            self.tail += 1;
        }
    }

    fn pending(&self, map: &RingMap) -> bool {
        self.queued > 0
            || (self.tail..self.kernel_head)
                .any(|p| busy(map.tx_status(self.frame_offset(self.slot(p)))))
    }
}

/// True while the kernel still owns a transmit frame.
fn busy(status: Option<u32>) -> bool {
    let owned =
        libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING | libc::TP_STATUS_WRONG_FORMAT;
    status.is_none_or(|s| s & owned != 0)
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

    #[test]
    fn tx_handles_name_frame_data_only() {
        let tx = TxRing::new(1 << 20, 2048, 4);
        assert_eq!(tx.slot_of((1 << 20) + 48), Some(0));
        assert_eq!(tx.slot_of((1 << 20) + 3 * 2048 + 48), Some(3));
        assert_eq!(tx.slot_of((1 << 20) + 4 * 2048 + 48), None);
        assert_eq!(tx.slot_of((1 << 20) + 49), None);
        assert_eq!(tx.slot_of(1 << 20), None);
    }

    /// A receive ring in a file mapping, so the test can play the kernel.
    fn fake_rx_ring(block_size: usize, blocks: usize) -> (RingMap, RxRing) {
        let path = std::env::temp_dir().join(format!("wspk-ring-{}", std::process::id()));
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file.set_len((block_size * blocks) as u64).unwrap();
        let map = RingMap::map(file.as_fd(), block_size * blocks).unwrap();
        (map, RxRing::new(block_size, blocks))
    }

    fn put(map: &mut RingMap, off: usize, value: u32) {
        map.bytes_mut(off, 4)
            .unwrap()
            .copy_from_slice(&value.to_ne_bytes());
    }

    /// Writes a block header and packet headers: (offset in block, next, tp_mac, snaplen).
    fn put_block(map: &mut RingMap, block: usize, packets: &[(usize, u32, u16, u32)]) {
        put(map, block + 12, packets.len() as u32);
        put(map, block + 16, packets.first().map_or(48, |p| p.0 as u32));
        for &(at, next, mac, snaplen) in packets {
            put(map, block + at, next);
            put(map, block + at + 12, snaplen);
            put(map, block + at + 20, libc::TP_STATUS_USER);
            map.bytes_mut(block + at + 24, 2)
                .unwrap()
                .copy_from_slice(&mac.to_ne_bytes());
        }
        put(map, block + 8, libc::TP_STATUS_USER);
    }

    #[test]
    fn lying_receive_headers_are_counted_and_never_followed() {
        let block = 64 << 10;
        let (mut map, mut rx) = fake_rx_ring(block, 3);
        let mut drops = DropCounters::default();
        // Block 0: good, data running off the block end, good with a next offset of 0
        // although one more packet is announced.
        put_block(
            &mut map,
            0,
            &[
                (48, 256, 82, 60),
                (304, 256, 82, block as u32),
                (560, 0, 82, 64),
            ],
        );
        put(&mut map, 12, 4);
        // Block 1: two packets announced, the first said to lie past the block end.
        put(&mut map, block + 12, 2);
        put(&mut map, block + 16, block as u32 + 8);
        put(&mut map, block + 8, libc::TP_STATUS_USER);
        let first = rx.next_packet(&mut map, &mut drops);
        assert_eq!(first, Some((48 + 82, 60)));
        let second = rx.next_packet(&mut map, &mut drops);
        assert_eq!(second, Some((560 + 82, 64)));
        assert_eq!(rx.next_packet(&mut map, &mut drops), None);
        assert_eq!(drops.rx_invalid_desc, 1 + 1 + 2);
        // Block 1 held nothing valid and went straight back to the kernel.
        assert!(map.user_block(block).is_none());
        // Block 0 goes back once both packets are released, not before.
        assert!(rx.release(&map, 48 + 82));
        assert!(map.user_block(0).is_some());
        assert!(!rx.release(&map, 7 * block), "a handle outside the ring");
        assert!(rx.release(&map, 560 + 82));
        assert!(!rx.release(&map, 560 + 82), "released twice");
        assert!(map.user_block(0).is_none());
        assert!(!rx.owns(48 + 82, 60));
    }

    #[test]
    fn trimming_closes_trailing_holes_only() {
        let mut tx = TxRing::new(0, 2048, 8);
        let slots: Vec<usize> = (0..4).filter_map(|_| tx.take_free()).collect();
        assert_eq!(slots, vec![0, 1, 2, 3]);
        tx.give_back(3);
        tx.give_back(1);
        tx.trim_head();
        assert_eq!(tx.head, 3);
        assert_eq!(tx.take_free(), Some(3));
    }
}
