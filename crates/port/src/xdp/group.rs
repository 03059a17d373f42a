//! The per-burst path of several AF_XDP ports sharing one UMEM and one frame pool
//! (XDP_SHARED_UMEM), owned by one thread: a frame received on one member can be sent out of
//! any other by moving its descriptor (netmap §4.5: swap buffer indexes instead of copying).
//! Opening a group (binding, sizing, program attach) is in `open.rs`.

use std::time::Duration;

use wirespeed_umem::{FramePool, Umem};
use wirespeed_xdp::{AttachMode, XskProgram};
use wirespeed_xsk::Socket;

use super::XDP_PACKET_HEADROOM;
use super::spill::Spill;
use crate::{Batch, FrameAudit, LinkState, PortError, PortInfo, PortOptions, PortSpec, PortStats};

/// One port of a group: its socket, its program, its counters.
pub(super) struct Member {
    // Field order is drop order: detach the program before the socket closes.
    pub(super) _program: Option<XskProgram>,
    pub(super) socket: Socket,
    pub(super) info: PortInfo,
    pub(super) stats: PortStats,
    /// Frames queued for sending and not yet reclaimed from the completion ring.
    pub(super) tx_in_flight: u64,
    /// The interface's index when the socket was bound: what `link` asks about.
    pub(super) ifindex: u32,
    /// Frames given to the fill ring and not yet back through the RX ring, and the most
    /// this member may have so: its share of the group's frames. A queue that gets nothing
    /// keeps only its share, so frames never strand there while a busy queue starves.
    pub(super) rx_outstanding: u32,
    pub(super) rx_share: u32,
    pub(super) queue: u32,
    /// What the member was opened as: what `rejoin` binds again.
    pub(super) spec: PortSpec,
    /// The kernel's counts of the sockets the member had before this one (`rejoin`).
    pub(super) retired: wirespeed_xsk::Statistics,
}

impl Member {
    /// The error for a failed system call on this member's socket: its interface gone or
    /// down when that is why (see `PortError::of_link`).
    #[cold]
    fn failed(&self, what: &'static str, source: std::io::Error) -> PortError {
        PortError::of_link(&self.info.spec, self.ifindex, what, source)
    }
}

/// AF_XDP ports on one UMEM. Members are numbered in the order of `open`'s specs.
pub struct XdpGroup {
    // Members close before the UMEM they use is unmapped.
    pub(super) members: Vec<Member>,
    pub(super) umem: Umem,
    pub(super) pool: FramePool,
    /// Frames the application holds (received or allocated, not yet sent or released).
    pub(super) app_held: u64,
    pub(super) burst: u32,
    /// How the members' interfaces run XDP (what groups joining this one bind with).
    pub(super) attach_mode: AttachMode,
    /// Free frames receiving leaves in the pool.
    pub(super) tx_reserve: usize,
    /// Packets our program set aside while we were behind (`PortOptions::spill_bytes`).
    pub(super) spill: Option<Spill>,
    /// The options the group was opened with (what `rejoin` binds a member with).
    pub(super) opts: PortOptions,
    /// Frames lost with the sockets of members whose interface was deleted.
    pub(super) lost: u64,
}

impl XdpGroup {
    /// The redirect program a member of this group attached to `iface`, if any: the one that
    /// serves groups opened with `open_served`.
    pub(super) fn program_on(&mut self, iface: &str) -> Option<&mut XskProgram> {
        self.members
            .iter_mut()
            .find_map(|m| m._program.as_mut().filter(|p| p.iface() == iface))
    }

    /// The socket of member `port`, for a program the caller attached
    /// (`PortOptions::program_attached`).
    pub fn socket_fd(&self, port: usize) -> std::os::fd::RawFd {
        self.members[port].socket.raw_fd()
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The queue member `port` is bound to.
    pub fn queue(&self, port: usize) -> u32 {
        self.members[port].queue
    }

    pub fn info(&self, port: usize) -> &PortInfo {
        &self.members[port].info
    }

    /// Appends up to `batch.room()` packets received on `port`.
    #[inline]
    pub fn rx_burst(&mut self, port: usize, batch: &mut Batch) -> Result<usize, PortError> {
        let m = &mut self.members[port];
        let room = batch.room() as u32;
        // A multi-buffer socket may take a frame for every segment of the burst.
        let frames = match m.socket.multi_buffer() {
            true => room + batch.tail_room() as u32,
            false => room,
        };
        // Keep a reserve in the pool for frames the application allocates (copies, sends):
        // left alone, the fill rings would soak up every free frame.
        let spare = self.pool.len().saturating_sub(self.tx_reserve) as u32;
        let wanted = frames
            .max(self.burst)
            .min(spare)
            .min(m.rx_share.saturating_sub(m.rx_outstanding));
        let filled = m.socket.refill(&mut self.pool, wanted);
        m.rx_outstanding += filled;
        if let Some(spill) = self.spill.as_mut() {
            spill.gave_fill(port, filled);
            // Spilled packets wait in frames of the reserve, never its last half.
            self.app_held += spill.drain(
                &mut self.umem,
                &mut self.pool,
                self.tx_reserve / 2,
                room as usize,
            );
            let out = spill.receive(port, &mut m.socket, &self.umem, &mut self.pool, batch);
            m.rx_outstanding = m.rx_outstanding.saturating_sub(out.received + out.invalid);
            let got = out.received + out.spilled;
            m.stats.rx_packets += got as u64;
            m.stats.rx_bytes += out.bytes;
            m.stats.spilled += out.spilled as u64;
            m.stats.drops.rx_invalid_desc += out.invalid as u64;
            // Pending spilled packets were counted held when drained.
            self.app_held += out.received as u64;
            // Woken only when nothing came: an error here would lose the batch's packets.
            if got + out.invalid == 0 {
                m.socket
                    .wake_rx()
                    .map_err(|source| m.failed("wake receive", source))?;
            }
            return Ok(got as usize);
        }
        if m.socket.multi_buffer() {
            return self.rx_chains(port, batch);
        }
        let mut bytes = 0u64;
        let out = m
            .socket
            .recv(&self.umem, &mut self.pool, room, |addr, len| {
                batch.push(addr, len);
                bytes += len as u64;
            });
        m.rx_outstanding = m.rx_outstanding.saturating_sub(out.received + out.invalid);
        m.stats.rx_packets += out.received as u64;
        m.stats.rx_bytes += bytes;
        m.stats.drops.rx_invalid_desc += out.invalid as u64;
        self.app_held += out.received as u64;
        if out.received == 0 {
            m.socket
                .wake_rx()
                .map_err(|source| m.failed("wake receive", source))?;
        }
        Ok(out.received as usize)
    }

    /// `rx_burst` on a multi-buffer socket: a packet is a chain of descriptors, taken whole
    /// (the fill ring was topped up by the caller).
    fn rx_chains(&mut self, port: usize, batch: &mut Batch) -> Result<usize, PortError> {
        let m = &mut self.members[port];
        let frames_before = batch.frames();
        // Enough descriptors to get past the longest chain even into an empty batch.
        let window = (batch.room() + batch.tail_room()) as u32;
        let out = m
            .socket
            .recv_chains(&self.umem, &mut self.pool, window, |segs| match segs {
                [(addr, len)] => batch.push(*addr, *len),
                _ => batch.push_chain(segs),
            });
        m.rx_outstanding = m.rx_outstanding.saturating_sub(out.descs);
        m.stats.rx_packets += out.packets as u64;
        m.stats.rx_bytes += out.bytes;
        m.stats.drops.rx_invalid_desc += out.invalid as u64;
        m.stats.drops.rx_bad_chain += out.bad_chains as u64;
        self.app_held += (batch.frames() - frames_before) as u64;
        if out.descs == 0 {
            m.socket
                .wake_rx()
                .map_err(|source| m.failed("wake receive", source))?;
        }
        Ok(out.packets as usize)
    }

    /// Queues every packet of `batch` on `port` and empties the batch; frames may come from
    /// any member. Those the TX ring has no room for are freed and counted.
    #[inline]
    pub fn tx_burst(&mut self, port: usize, batch: &mut Batch) -> Result<usize, PortError> {
        if batch.is_empty() {
            return Ok(0);
        }
        if batch.has_chains() {
            return self.tx_chains(port, batch);
        }
        self.reclaim(port);
        let m = &mut self.members[port];
        let b: &Batch = batch;
        let sent = m.socket.send(b.len() as u32, |i| {
            (b.addr(i as usize), b.frame_len(i as usize))
        }) as usize;
        let mut bytes = 0u64;
        for i in 0..sent {
            bytes += batch.frame_len(i) as u64;
        }
        for i in sent..batch.len() {
            self.pool.free(self.umem.frame_base(batch.addr(i)));
        }
        m.stats.tx_packets += sent as u64;
        m.stats.tx_bytes += bytes;
        m.stats.drops.tx_ring_full += (batch.len() - sent) as u64;
        m.tx_in_flight += sent as u64;
        self.app_held -= batch.len() as u64;
        batch.clear();
        m.socket
            .kick_tx()
            .map_err(|source| m.failed("kick transmit", source))?;
        Ok(sent)
    }

    /// `tx_burst` of a batch holding chains. A chain goes into the TX ring whole or not at
    /// all, and only once checked: in copy mode the kernel drops a chain longer than it
    /// allows, or one with a bad segment, without ever completing its frames. A port
    /// without multi-buffer sends no chain; it counts each as `tx_bad_chain`.
    fn tx_chains(&mut self, port: usize, batch: &mut Batch) -> Result<usize, PortError> {
        self.reclaim(port);
        let m = &mut self.members[port];
        let limit = m.info.multi_buffer.unwrap_or(1) as usize;
        let room = m.socket.tx_reserve(batch.frames() as u32) as usize;
        let (mut used, mut sent, mut bytes, mut bad, mut full) = (0, 0, 0u64, 0u64, 0u64);
        // Once a packet did not fit, later ones wait behind it, as in `tx_burst`.
        let mut ring_full = false;
        for i in 0..batch.len() {
            let segments = batch.more(i) + 1;
            let sound = segments <= limit
                && batch
                    .segments(i)
                    .all(|(addr, len)| len > 0 && self.umem.is_valid(addr, len));
            ring_full |= sound && used + segments > room;
            if !sound || ring_full {
                for (addr, _) in batch.segments(i) {
                    if self.umem.is_valid(addr, 0) {
                        self.pool.free(self.umem.frame_base(addr));
                    }
                }
                match sound {
                    true => full += 1,
                    false => bad += 1,
                }
                continue;
            }
            for (j, (addr, len)) in batch.segments(i).enumerate() {
                m.socket
                    .tx_write((used + j) as u32, addr, len, j + 1 < segments);
            }
            used += segments;
            sent += 1;
            bytes += batch.packet_len(i) as u64;
        }
        m.socket.tx_submit(used as u32);
        m.stats.tx_packets += sent as u64;
        m.stats.tx_bytes += bytes;
        m.stats.drops.tx_ring_full += full;
        m.stats.drops.tx_bad_chain += bad;
        // One completion comes back for each descriptor.
        m.tx_in_flight += used as u64;
        self.app_held -= batch.frames() as u64;
        batch.clear();
        m.socket
            .kick_tx()
            .map_err(|source| m.failed("kick transmit", source))?;
        Ok(sent)
    }

    /// Gives the frames of `batch` back unsent and empties it.
    pub fn release(&mut self, batch: &mut Batch) {
        for addr in batch.all_frames() {
            self.pool.free(self.umem.frame_base(addr));
        }
        self.app_held -= batch.frames() as u64;
        batch.clear();
    }

    /// Appends up to `n` empty frames of `len` bytes to send on `port`: on a multi-buffer
    /// port, a packet longer than a frame is a chain of whole frames. None (0) when the port
    /// cannot send `len` bytes whole: a packet is never cut to fit.
    pub fn alloc_tx(&mut self, port: usize, batch: &mut Batch, n: usize, len: u32) -> usize {
        let frame = self.umem.frame_size();
        if len > frame {
            return self.alloc_chains(port, batch, n, len);
        }
        self.reclaim(port);
        let n = n
            .min(batch.room())
            .min(self.pool.len())
            .min(self.members[port].socket.tx_free(n as u32) as usize);
        for _ in 0..n {
            let addr = self.pool.alloc().unwrap_or_default();
            batch.push(addr, len);
        }
        self.app_held += n as u64;
        n
    }

    /// `alloc_tx` of packets longer than a frame: chains of at most as many segments as the
    /// port sends (none on a port without multi-buffer).
    fn alloc_chains(&mut self, port: usize, batch: &mut Batch, n: usize, len: u32) -> usize {
        let frame = self.umem.frame_size();
        let limit = self.members[port].info.multi_buffer.unwrap_or(1);
        let segments = len.div_ceil(frame) as usize;
        if segments > limit as usize {
            return 0;
        }
        self.reclaim(port);
        let n = n
            .min(batch.room())
            .min(batch.tail_room() / (segments - 1))
            .min(self.pool.len() / segments)
            .min(self.members[port].socket.tx_free((n * segments) as u32) as usize / segments);
        let mut segs = [(0u64, 0u32); crate::MAX_SEGMENTS];
        for _ in 0..n {
            for (j, seg) in segs[..segments].iter_mut().enumerate() {
                let this = (len - j as u32 * frame).min(frame);
                *seg = (self.pool.alloc().unwrap_or_default(), this);
            }
            batch.push_chain(&segs[..segments]);
        }
        self.app_held += (n * segments) as u64;
        n
    }

    /// A copy of a held packet in a fresh frame (for sending one packet out of several
    /// ports); None when the pool is empty. The copy is counted against `port`.
    pub fn duplicate(&mut self, port: usize, addr: u64, len: u32) -> Option<u64> {
        let copy = self.pool.alloc()?;
        if !self.umem.copy_packet(addr, len, copy) {
            self.pool.free(copy);
            return None;
        }
        self.members[port].stats.copies += 1;
        self.app_held += 1;
        Some(copy)
    }

    /// A copy of a held chain (`segments`, head first) in fresh frames, segment by segment,
    /// for sending on `port`: the copy's segments go into `copy`, and their number is
    /// returned. None when the pool has too few frames, or `port` sends fewer segments (the
    /// caller counts it). One copy is counted against `port`, as for a one-frame packet.
    pub fn duplicate_chain(
        &mut self,
        port: usize,
        segments: &[(u64, u32)],
        copy: &mut [(u64, u32)],
    ) -> Option<usize> {
        let k = segments.len();
        let limit = self.members[port].info.multi_buffer.unwrap_or(1) as usize;
        if k > limit || k > copy.len() || self.pool.len() < k {
            return None;
        }
        for (j, &(addr, len)) in segments.iter().enumerate() {
            let frame = self.pool.alloc().unwrap_or_default();
            if !self.umem.copy_packet(addr, len, frame) {
                self.pool.free(frame);
                for &(done, _) in &copy[..j] {
                    self.pool.free(done);
                }
                return None;
            }
            copy[j] = (frame, len);
        }
        self.members[port].stats.copies += 1;
        self.app_held += k as u64;
        Some(k)
    }

    /// The whole frame that holds `addr`, writable, and where `addr` is in it (the room in
    /// front is headroom a VLAN push can use).
    #[inline]
    pub fn frame_mut(&mut self, addr: u64) -> (&mut [u8], usize) {
        let base = self.umem.frame_base(addr);
        let size = self.umem.frame_size();
        let frame = self.umem.packet_mut(base, size).unwrap_or(&mut []);
        (frame, (addr - base) as usize)
    }

    /// The frame that holds `addr` (its first byte's address).
    #[inline]
    pub fn frame_base(&self, addr: u64) -> u64 {
        self.umem.frame_base(addr)
    }

    /// A fresh frame holding a copy of `bytes`, for sending on `port`; None when the pool is
    /// empty or the bytes do not fit. The copy is counted against `port`.
    pub fn alloc_copy(&mut self, port: usize, bytes: &[u8]) -> Option<u64> {
        let addr = self.pool.alloc()?;
        match self.umem.packet_mut(addr, bytes.len() as u32) {
            Some(dst) => dst.copy_from_slice(bytes),
            None => {
                self.pool.free(addr);
                return None;
            }
        }
        self.members[port].stats.copies += 1;
        self.app_held += 1;
        Some(addr)
    }

    /// The members' sockets, for poll().
    pub fn poll_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.members.iter().map(|m| m.socket.raw_fd()).collect()
    }

    /// Sleeps until any member may have packets, or `timeout` passes.
    pub fn wait_rx_any(&mut self, timeout: Duration) -> Result<(), PortError> {
        let fds = self.poll_fds();
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        wirespeed_xsk::poll_rx_many(&fds, ms).map_err(|source| PortError::Io {
            iface: self.members[0].info.spec.clone(),
            what: "poll",
            source,
        })?;
        Ok(())
    }

    #[inline]
    pub fn packet(&self, addr: u64, len: u32) -> &[u8] {
        self.umem.packet(addr, len).unwrap_or(&[])
    }

    /// Starts fetching the packet at `addr` into the CPU's cache (see `Umem::prefetch`).
    #[inline]
    pub fn prefetch(&self, addr: u64) {
        self.umem.prefetch(addr);
    }

    #[inline]
    pub fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        self.umem.packet_mut(addr, len).unwrap_or(&mut [])
    }

    /// The size of every frame of the UMEM (a sent segment may fill it).
    pub fn frame_size(&self) -> u32 {
        self.umem.frame_size()
    }

    pub fn max_packet_len(&self) -> u32 {
        self.umem.frame_size() - XDP_PACKET_HEADROOM - self.umem.config().headroom
    }

    /// Pushes queued transmissions of `port` to the kernel and reclaims its completions.
    pub fn flush(&mut self, port: usize) -> Result<(), PortError> {
        self.reclaim(port);
        let m = &mut self.members[port];
        if m.socket.tx_queued() {
            m.socket
                .kick_tx()
                .map_err(|source| m.failed("kick transmit", source))?;
        }
        Ok(())
    }

    /// Sleeps until `port` may have packets, or `timeout` passes.
    pub fn wait_rx(&mut self, port: usize, timeout: Duration) -> Result<(), PortError> {
        let m = &self.members[port];
        m.socket
            .poll_rx(timeout.as_millis().min(i32::MAX as u128) as i32)
            .map_err(|source| m.failed("poll", source))?;
        Ok(())
    }

    /// `port`'s interface went away: the frames handed to the kernel for sending and not
    /// completed will never be sent. They are counted as `tx_stranded` (any the kernel still
    /// completes go back to the pool); returns how many.
    pub fn strand(&mut self, port: usize) -> u64 {
        self.reclaim(port);
        let m = &mut self.members[port];
        let stranded = m.tx_in_flight;
        m.stats.tx_stranded += stranded;
        m.tx_in_flight = 0;
        stranded
    }

    /// Takes our redirect program off `port`'s interface, if this member attached it: call
    /// once the interface is gone from this network namespace. Deleted, that changes
    /// nothing; moved to another namespace, its new owner could not take the program off
    /// while we held its link, and what it received would go to our unbound socket.
    /// [`XdpGroup::rejoin`] attaches it again.
    pub fn let_go_of_program(&mut self, port: usize) {
        self.members[port]._program = None;
    }

    /// The state of `port`'s interface now (system calls: a few times a second at most).
    pub fn link(&self, port: usize) -> LinkState {
        wirespeed_xsk::link_state(self.members[port].ifindex)
    }

    pub fn tx_pending(&self, port: usize) -> bool {
        self.members[port].tx_in_flight > 0
    }

    /// Counters of `port`, with the kernel's drop counts (a system call).
    pub fn stats(&mut self, port: usize) -> PortStats {
        let m = &self.members[port];
        let mut s = m.stats;
        // The earlier sockets' counts stand even when this one cannot be asked.
        let k = m.socket.statistics().unwrap_or_default().plus(m.retired);
        // In copy mode a packet that finds the fill ring empty is counted both as
        // rx_dropped and as a fill-ring-empty event: count it once, under the latter.
        let fill_empty = k.rx_fill_ring_empty_descs.min(k.rx_dropped);
        s.drops.fill_ring_empty = fill_empty;
        s.drops.kernel_dropped = k.rx_dropped - fill_empty;
        s.drops.rx_ring_full = k.rx_ring_full;
        s.drops.rx_invalid_desc += k.rx_invalid_descs;
        s.drops.tx_invalid_desc += k.tx_invalid_descs;
        if let Some(spill) = &self.spill {
            s.drops.spill_full = spill.counts(port).spill_full;
            // Records no member could take: a queue we do not serve, or too long a packet.
            if port == 0 {
                s.drops.rx_invalid_desc += spill.invalid;
            }
        }
        s
    }

    /// Where every frame of the shared UMEM is.
    pub fn audit(&self) -> FrameAudit {
        let mut a = FrameAudit {
            total: self.umem.frame_count() as u64,
            pool: self.pool.len() as u64,
            application: self.app_held,
            lost: self.lost,
            ..FrameAudit::default()
        };
        for m in &self.members {
            let r = m.socket.ring_counts();
            a.fill += r.fill;
            a.kernel += r.kernel;
            a.rx += r.rx;
            a.tx += r.tx;
            a.completion += r.completion;
        }
        a
    }

    pub(super) fn reclaim(&mut self, port: usize) {
        let m = &mut self.members[port];
        let (done, invalid) = m.socket.complete(&self.umem, &mut self.pool, u32::MAX);
        // Saturating: a stranded member's late completions were already counted.
        m.tx_in_flight = m.tx_in_flight.saturating_sub((done + invalid) as u64);
        m.stats.drops.tx_invalid_desc += invalid as u64;
    }
}
