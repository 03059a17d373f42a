//! Several AF_XDP ports sharing one UMEM and one frame pool (XDP_SHARED_UMEM), owned by one
//! thread: a frame received on one member can be sent out of any other by moving its
//! descriptor (netmap §4.5: swap buffer indexes instead of copying).

use std::time::Duration;

use wirespeed_umem::{FramePool, Umem, UmemConfig, UmemError};
use wirespeed_xdp::{AttachMode, XskProgram};
use wirespeed_xsk::{Socket, SpillLevels};

use super::spill::Spill;
use super::{
    MAX_QUEUES, Placement, XDP_PACKET_HEADROOM, bind_member, check_place, mode_name, socket_config,
};
use crate::{
    Backend, Batch, FrameAudit, LinkState, PortError, PortInfo, PortOptions, PortSpec, PortStats,
};

/// Whose redirect program serves a member: its own, an earlier member's on the same
/// interface, or another group's (or the caller's).
#[derive(Clone, Copy)]
enum Server {
    Own,
    Member(usize),
    Other,
}

/// The spill ring of the first member's program, for members all on its interface.
fn open_spill(specs: &[PortSpec], members: &mut [Member], umem: &Umem) -> Result<Spill, PortError> {
    let first = &specs[0];
    if specs.iter().any(|s| s.iface != first.iface) {
        return Err(PortError::Unsupported(format!(
            "{first}: a spill ring serves the queues of one interface, not a group of several"
        )));
    }
    let program = members[0]._program.as_mut().ok_or_else(|| {
        PortError::Unsupported(format!(
            "{first}: a spill ring needs wirespeed's own XDP program on the interface"
        ))
    })?;
    let (ring, levels_fd) = program.take_spill()?;
    let levels = SpillLevels::map(levels_fd, MAX_QUEUES).map_err(|source| PortError::Io {
        iface: first.to_string(),
        what: "map the spill levels",
        source,
    })?;
    let queues: Vec<u32> = specs.iter().map(|s| s.queue).collect();
    if let Some(q) = queues.iter().find(|&&q| q >= MAX_QUEUES) {
        return Err(PortError::Unsupported(format!(
            "{first}: queue {q}: a spill ring serves queues below {MAX_QUEUES}"
        )));
    }
    Ok(Spill::new(ring, levels, &queues, umem))
}

/// One port of a group: its socket, its program, its counters.
struct Member {
    // Field order is drop order: detach the program before the socket closes.
    _program: Option<XskProgram>,
    socket: Socket,
    info: PortInfo,
    stats: PortStats,
    /// Frames queued for sending and not yet reclaimed from the completion ring.
    tx_in_flight: u64,
    /// The interface's index when the socket was bound: what `link` asks about.
    ifindex: u32,
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
    members: Vec<Member>,
    umem: Umem,
    pool: FramePool,
    /// Frames the application holds (received or allocated, not yet sent or released).
    app_held: u64,
    burst: u32,
    /// How the members' interfaces run XDP (what groups joining this one bind with).
    attach_mode: AttachMode,
    /// Free frames receiving leaves in the pool.
    tx_reserve: usize,
    /// Packets our program set aside while we were behind (`PortOptions::spill_bytes`).
    spill: Option<Spill>,
}

impl XdpGroup {
    /// Opens one port per spec on a UMEM of `opts.frame_count` frames per port. The first
    /// spec picks the mode (see `XdpMode`); the others share it.
    pub fn open(specs: &[PortSpec], opts: &PortOptions) -> Result<XdpGroup, PortError> {
        XdpGroup::open_on(specs, opts, None)
    }

    /// One group per queue `0..queues` of the interfaces of `specs` (whose own queue numbers
    /// are ignored): group `q` has a socket on queue `q` of every interface, on a UMEM of its
    /// own, so each group can be owned by a different thread (a poll-mode thread per
    /// receive queue). The redirect programs are attached once, by group 0, and send each
    /// queue's packets to its group's socket; the mode is group 0's.
    pub fn open_queues(
        specs: &[PortSpec],
        queues: u32,
        opts: &PortOptions,
    ) -> Result<Vec<XdpGroup>, PortError> {
        let on_queue = |q: u32| -> Vec<PortSpec> {
            specs
                .iter()
                .map(|s| PortSpec {
                    queue: q,
                    ..s.clone()
                })
                .collect()
        };
        let mut first = XdpGroup::open_on(&on_queue(0), opts, None)?;
        let mut rest = Vec::new();
        for q in 1..queues.max(1) {
            rest.push(XdpGroup::open_on(&on_queue(q), opts, Some(&mut first))?);
        }
        rest.insert(0, first);
        Ok(rest)
    }

    /// `open`, or with `programs_of` a group whose redirect programs (one per member, same
    /// interfaces in the same order) already run: bind in its mode and register there.
    fn open_on(
        specs: &[PortSpec],
        opts: &PortOptions,
        mut programs_of: Option<&mut XdpGroup>,
    ) -> Result<XdpGroup, PortError> {
        if opts.frame_size != 2048 && opts.frame_size != 4096 {
            return Err(PortError::FrameSize(opts.frame_size));
        }
        if !opts.ring_size.is_power_of_two() || !(64..=65536).contains(&opts.ring_size) {
            return Err(PortError::RingSize(opts.ring_size));
        }
        for spec in specs {
            check_place(spec)?;
        }
        let first = specs.first().map_or("", |s| s.iface.as_str());
        let config = UmemConfig {
            frame_count: opts.frame_count * specs.len().max(1) as u32,
            frame_size: opts.frame_size,
            headroom: opts.headroom,
            hugepages: opts.hugepages,
        };
        let umem =
            Umem::new_cancellable(config, opts.cancel.as_deref()).map_err(
                |source| match source {
                    UmemError::Cancelled => PortError::Cancelled(first.to_string()),
                    source => PortError::Umem {
                        what: format!("{first}: UMEM"),
                        source,
                    },
                },
            )?;
        let note = umem.note().map(str::to_string);
        let mut members: Vec<Member> = Vec::with_capacity(specs.len());
        // Whose program sends each member its packets.
        let mut serving: Vec<Server> = Vec::with_capacity(specs.len());
        let mut attach_mode = programs_of.as_ref().map(|g| g.attach_mode);
        for spec in specs {
            if opts.cancelled() {
                return Err(PortError::Cancelled(spec.to_string()));
            }
            let mut notes: Vec<String> = note.iter().cloned().collect();
            // Another queue of an interface an earlier member attached to: its program serves
            // this queue too (one program per interface).
            let earlier = members
                .iter()
                .position(|m| m._program.as_ref().is_some_and(|p| p.iface() == spec.iface));
            let owner = members.first().map(|m| &m.socket);
            let place = Placement {
                owner,
                attach: attach_mode,
                attach_program: programs_of.is_none()
                    && opts.program_attached.is_none()
                    && earlier.is_none(),
            };
            let (program, socket, attach) = bind_member(spec, opts, &umem, place, &mut notes)?;
            if opts.busy_poll && !socket.busy_polls() {
                notes.push(format!(
                    "busy poll: the kernel busy-polls zero-copy sockets only (Linux 6.13 and \
                     later), and this one is in {} mode: polling as without it",
                    mode_name(&socket, attach)
                ));
            }
            attach_mode = Some(attach);
            serving.push(match (&program, earlier) {
                (Some(_), _) => Server::Own,
                (None, Some(j)) => Server::Member(j),
                (None, None) => Server::Other,
            });
            members.push(Member {
                info: PortInfo {
                    spec: spec.to_string(),
                    backend: Backend::Xdp,
                    mode: mode_name(&socket, attach).to_string(),
                    notes,
                    busy_poll: socket.busy_polls(),
                },
                _program: program,
                socket,
                stats: PortStats::default(),
                tx_in_flight: 0,
                ifindex: wirespeed_xsk::if_index(&spec.iface).unwrap_or(0),
            });
        }
        let spill = match opts.spill_bytes > 0 && opts.rx {
            true => Some(open_spill(specs, &mut members, &umem)?),
            false => None,
        };
        let mut group = XdpGroup {
            pool: umem.frame_pool(),
            umem,
            members,
            app_held: 0,
            burst: opts.batch.max(1),
            attach_mode: attach_mode.unwrap_or(AttachMode::Native),
            tx_reserve: (opts.frame_count / 4) as usize,
            spill,
        };
        if opts.rx {
            // Half of each port's frames wait in its fill ring, the rest serve transmit. A
            // port that only receives starts with all but the reserve there, where rx_burst's
            // refills would take it anyway: the frames waiting in the fill ring are how long
            // the kernel can go on delivering while we are not looking, from the first
            // packet on. The reserve stays even then, since fewer frames in flight stay in
            // the caches (rxdrop with every frame in flight: 3% slower in 3 interleaved runs).
            let share = if opts.tx {
                opts.frame_count / 2
            } else {
                opts.frame_count - opts.frame_count / 4
            };
            let n = share.min(socket_config(opts).fill_size);
            for (i, m) in group.members.iter_mut().enumerate() {
                let given = m.socket.refill(&mut group.pool, n);
                if let Some(spill) = group.spill.as_mut() {
                    spill.enable(i, &m.socket, opts.ring_size, given as u64);
                }
            }
        }
        // Only now does a program send packets to the sockets: their fill rings are full
        // and the spill program's counts start from here.
        for (i, spec) in specs.iter().enumerate() {
            let fd = group.members[i].socket.raw_fd();
            let program = match serving[i] {
                Server::Own => group.members[i]._program.as_mut(),
                Server::Member(j) => group.members[j]._program.as_mut(),
                Server::Other => programs_of
                    .as_mut()
                    .and_then(|g| g.members.get_mut(i))
                    .and_then(|m| m._program.as_mut()),
            };
            if let Some(p) = program {
                p.register(spec.queue, fd)?;
            }
        }
        Ok(group)
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

    pub fn info(&self, port: usize) -> &PortInfo {
        &self.members[port].info
    }

    /// Appends up to `batch.room()` packets received on `port`.
    #[inline]
    pub fn rx_burst(&mut self, port: usize, batch: &mut Batch) -> Result<usize, PortError> {
        let m = &mut self.members[port];
        let room = batch.room() as u32;
        // Keep a reserve in the pool for frames the application allocates (copies, sends):
        // left alone, the fill rings would soak up every free frame.
        let spare = self.pool.len().saturating_sub(self.tx_reserve) as u32;
        let filled = m
            .socket
            .refill(&mut self.pool, room.max(self.burst).min(spare));
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
        let mut bytes = 0u64;
        let out = m
            .socket
            .recv(&self.umem, &mut self.pool, room, |addr, len| {
                batch.push(addr, len);
                bytes += len as u64;
            });
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

    /// Queues every packet of `batch` on `port` and empties the batch; frames may come from
    /// any member. Those the TX ring has no room for are freed and counted.
    #[inline]
    pub fn tx_burst(&mut self, port: usize, batch: &mut Batch) -> Result<usize, PortError> {
        if batch.is_empty() {
            return Ok(0);
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

    /// Gives the frames of `batch` back unsent and empties it.
    pub fn release(&mut self, batch: &mut Batch) {
        for (addr, _) in batch.iter() {
            self.pool.free(self.umem.frame_base(addr));
        }
        self.app_held -= batch.len() as u64;
        batch.clear();
    }

    /// Appends up to `n` empty frames of `len` bytes to send on `port`.
    pub fn alloc_tx(&mut self, port: usize, batch: &mut Batch, n: usize, len: u32) -> usize {
        self.reclaim(port);
        let len = len.min(self.umem.frame_size());
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

    #[inline]
    pub fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        self.umem.packet_mut(addr, len).unwrap_or(&mut [])
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
        if let Ok(k) = m.socket.statistics() {
            // In copy mode a packet that finds the fill ring empty is counted both as
            // rx_dropped and as a fill-ring-empty event: count it once, under the latter.
            let fill_empty = k.rx_fill_ring_empty_descs.min(k.rx_dropped);
            s.drops.fill_ring_empty = fill_empty;
            s.drops.kernel_dropped = k.rx_dropped - fill_empty;
            s.drops.rx_ring_full = k.rx_ring_full;
            s.drops.rx_invalid_desc += k.rx_invalid_descs;
            s.drops.tx_invalid_desc += k.tx_invalid_descs;
        }
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

    fn reclaim(&mut self, port: usize) {
        let m = &mut self.members[port];
        let (done, invalid) = m.socket.complete(&self.umem, &mut self.pool, u32::MAX);
        // Saturating: a stranded member's late completions were already counted.
        m.tx_in_flight = m.tx_in_flight.saturating_sub((done + invalid) as u64);
        m.stats.drops.tx_invalid_desc += invalid as u64;
    }
}
