//! The ports one poll-mode thread serves: its AF_XDP ports on one UMEM (an [`XdpGroup`], so
//! forwarding between them moves descriptors) and ports of other backends, each with buffers
//! of its own (forwarding to or from them copies, and the copies are counted).
//!
//! A port whose interface is down or gone is not used: nothing is received from it, and what
//! is meant for it (queued, or output later) is counted as `link_down`, so the other ports
//! go on forwarding ([`crate::dpif::port_links`]). A send or receive that fails because the
//! interface went down or away marks the port so at once, and tells the bridge. An AF_XDP or
//! AF_PACKET port whose interface was deleted binds again, when the bridge asks, to the
//! interface made since under its name ([`PortSet::rejoin`]).

use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use wirespeed_port::packet::PacketPort;
use wirespeed_port::xdp::XdpGroup;
use wirespeed_port::{
    Backend, Batch, FrameAudit, LinkState, Port, PortError, PortInfo, PortOptions, PortSpec,
    PortStats, Waker,
};

use crate::dpif::port_links::PortLinks;

/// The longest packet there is: the longest IP packet with Ethernet and VLAN headers (and
/// room to spare), what a gathered chain's buffer holds without growing.
pub const LONGEST_PACKET: usize = u16::MAX as usize + 64;

/// A port of another backend than AF_XDP, and what the thread keeps for it.
pub struct OtherPort {
    pub port: Box<dyn Port + Send>,
    /// This thread receives on it (one thread per receive queue; the others only send).
    pub receives: bool,
    copies: u64,
    /// How an AF_PACKET port opens again on an interface made anew under its name.
    reopen: Option<(PortSpec, PortOptions)>,
    /// The counts of the ports it was before it opened again.
    retired: PortStats,
}

impl OtherPort {
    /// `port`, opened from `spec` with `opts`.
    pub fn new(
        port: Box<dyn Port + Send>,
        receives: bool,
        spec: &PortSpec,
        opts: &PortOptions,
    ) -> OtherPort {
        OtherPort {
            port,
            receives,
            copies: 0,
            reopen: (spec.backend == Backend::Packet).then(|| (spec.clone(), opts.clone())),
            retired: PortStats::default(),
        }
    }

    /// Opens an AF_PACKET port again, on interface `ifindex`, which has its name now (each
    /// time asked: nothing is shared with the old one); its counts go on.
    fn rejoin(&mut self, ifindex: u32) -> Result<(), PortError> {
        let Some((spec, opts)) = &self.reopen else {
            return Err(PortError::Unsupported(format!(
                "{}: only AF_XDP and AF_PACKET ports are bound again to an interface made \
                 anew",
                self.port.info().spec
            )));
        };
        let port = PacketPort::open(spec, opts)?;
        if port.ifindex() != ifindex {
            return Err(PortError::Unsupported(format!(
                "{spec}: {} was made again meanwhile (index {}, not {ifindex})",
                spec.iface,
                port.ifindex()
            )));
        }
        let mut old = std::mem::replace(&mut self.port, Box::new(port));
        self.retired.add(&old.stats());
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// Member index in the group.
    Group(usize),
    /// Index in `others`.
    Other(usize),
}

/// Where a received packet's bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// In the shared UMEM: it can move to another group member by descriptor.
    Umem,
    /// In another backend's buffer: it is copied wherever it goes.
    Own,
}

pub struct PortSet {
    group: Option<XdpGroup>,
    others: Vec<OtherPort>,
    /// OpenFlow number and place of each member, in the bridge's port order.
    members: Vec<(u32, Place)>,
    /// Frames queued for sending, per member (addresses in that member's buffers).
    tx: Vec<Batch>,
    /// Group frames to give back to the pool.
    free: Batch,
    /// The bridge's view of each member's link, and this thread's (read between rounds).
    links: Arc<PortLinks>,
    link: Vec<LinkState>,
    /// The interface index `link` was read with: gone again under another index is a
    /// change too (a port bound anew whose new interface went before this thread saw it up).
    link_index: Vec<u32>,
    /// Per member: packets meant for it while its link was not up.
    link_down: Vec<u64>,
    /// Per member: packets longer than it could take (it sends single frames shorter than
    /// the packet, or fewer frames than its chain): dropped whole, never cut.
    bad_chain: Vec<u64>,
    /// Per member: the longest frame its interface sends (as the bridge last read its MTU),
    /// and the packets longer than that, dropped whole: the kernel would take them and drop
    /// them unseen (a veth does), or send them on where the next hop would.
    longest: Vec<u32>,
    too_big: Vec<u64>,
    /// Per group member: packets copied into chains of its frames (`alloc_copy` counts the
    /// single-frame copies itself).
    chain_copies: Vec<u64>,
    /// A packet of several frames gathered for a port that takes contiguous bytes.
    gather: Vec<u8>,
    /// Where a copy longer than a frame is built, as a chain, before it is queued.
    chain: Batch,
}

impl PortSet {
    /// `numbered` lists every port in the bridge's order: its number, and whether it is the
    /// next member of `group` (true) or the next of `others` (false).
    pub fn new(
        numbered: &[(u32, bool)],
        group: Option<XdpGroup>,
        others: Vec<OtherPort>,
        burst: usize,
        links: Arc<PortLinks>,
    ) -> PortSet {
        let (mut g, mut o) = (0, 0);
        let members = numbered
            .iter()
            .map(|&(n, in_group)| {
                let place = if in_group {
                    g += 1;
                    Place::Group(g - 1)
                } else {
                    o += 1;
                    Place::Other(o - 1)
                };
                (n, place)
            })
            .collect();
        PortSet {
            tx: numbered
                .iter()
                .map(|_| Batch::with_capacity(burst * 4))
                .collect(),
            free: Batch::with_capacity(burst),
            group,
            others,
            link: vec![LinkState::Up; numbered.len()],
            link_index: (0..numbered.len())
                .map(|m| links.get_with_index(m).1)
                .collect(),
            link_down: vec![0; numbered.len()],
            bad_chain: vec![0; numbered.len()],
            longest: (0..numbered.len()).map(|m| links.longest(m)).collect(),
            too_big: vec![0; numbered.len()],
            chain_copies: vec![0; numbered.len()],
            // The longest packet there is, so gathering never allocates.
            gather: Vec::with_capacity(LONGEST_PACKET),
            chain: Batch::with_capacity(1),
            links,
            members,
        }
    }

    /// True while `member`'s interface is up (as this thread last read it).
    #[inline]
    pub fn is_up(&self, member: usize) -> bool {
        self.link[member] == LinkState::Up
    }

    /// Takes the bridge's view of every member's link and MTU (between rounds).
    pub fn sync_links(&mut self) {
        for member in 0..self.members.len() {
            self.longest[member] = self.links.longest(member);
            let (state, index) = self.links.get_with_index(member);
            if state != self.link[member] {
                self.set_link(member, state);
            } else if state == LinkState::Gone && index != self.link_index[member] {
                // Bound anew (`rejoin`) to an interface gone already: what the binding took
                // on (our program, say, on an interface moved away at once) goes too.
                self.let_go(member);
            }
            self.link_index[member] = index;
        }
    }

    /// `member`'s link is now `state`. A port that stops being up has what was queued for it
    /// counted as `link_down`; one that went away gives up what its kernel ring held too
    /// (`tx_stranded` where it was counted as sent already, else `link_down`), and our
    /// program on its interface (which may live on in another namespace).
    fn set_link(&mut self, member: usize, state: LinkState) {
        let was = std::mem::replace(&mut self.link[member], state);
        if state == LinkState::Up {
            return;
        }
        self.discard_queued(member);
        if state == LinkState::Gone && was != LinkState::Gone {
            self.let_go(member);
        }
    }

    /// `member`'s interface is gone: what its kernel ring held, and our program there.
    fn let_go(&mut self, member: usize) {
        match self.members[member].1 {
            Place::Group(g) => {
                self.group_mut().strand(g);
                self.group_mut().let_go_of_program(g);
            }
            Place::Other(o) => self.link_down[member] += self.others[o].port.abandon_tx(),
        }
    }

    /// Binds `member`, whose interface is gone, to the interface made since under its
    /// name (index `ifindex`). This thread uses it again once the bridge says it is up
    /// (`sync_links`).
    pub fn rejoin(&mut self, member: usize, ifindex: u32) -> Result<(), PortError> {
        // Gone here too, if this thread has not seen it yet: what was queued for the old
        // socket is given up, not sent on the new one.
        if self.link[member] != LinkState::Gone {
            self.set_link(member, LinkState::Gone);
        }
        match self.members[member].1 {
            Place::Group(g) => self.group_mut().rejoin(g, ifindex),
            Place::Other(o) => self.others[o].rejoin(ifindex),
        }
    }

    /// Gives back the frames queued for `member` unsent, counted as `link_down`.
    fn discard_queued(&mut self, member: usize) {
        let queued = self.tx[member].len() as u64;
        if queued == 0 {
            return;
        }
        match self.members[member].1 {
            Place::Group(_) => {
                let group = self.group.as_mut().expect("group member");
                group.release(&mut self.tx[member]);
            }
            Place::Other(o) => self.others[o].port.release(&mut self.tx[member]),
        }
        self.link_down[member] += queued;
    }

    /// A copy queued on another backend (`queued`), or counted as `link_down` when that
    /// failed because its interface went down or away.
    fn queued_or_down(
        &mut self,
        member: usize,
        queued: Result<bool, PortError>,
    ) -> Result<bool, PortError> {
        if let Some(queued) = self.absorb(member, queued)? {
            return Ok(queued);
        }
        self.link_down[member] += 1;
        Ok(true)
    }

    /// What a member's send or receive came to: an interface down or gone marks the member
    /// so (and tells the bridge) and is no error of the thread's; any other error is.
    fn absorb<T>(
        &mut self,
        member: usize,
        result: Result<T, PortError>,
    ) -> Result<Option<T>, PortError> {
        let state = match result {
            Ok(value) => return Ok(Some(value)),
            Err(PortError::InterfaceGone(_)) => LinkState::Gone,
            Err(PortError::InterfaceDown(_)) => LinkState::Down,
            Err(e) => return Err(e),
        };
        self.links.report(member, state);
        if self.link[member] != LinkState::Gone {
            self.set_link(member, state);
        }
        Ok(None)
    }

    /// Whether a packet of `len` bytes is longer than `member`'s MTU allows; it is counted
    /// as `tx_too_big` then.
    #[inline]
    fn too_big_for(&mut self, member: usize, len: usize) -> bool {
        let over = len > self.longest[member] as usize;
        if over {
            self.too_big[member] += 1;
        }
        over
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn number(&self, member: usize) -> u32 {
        self.members[member].0
    }

    pub fn member_of(&self, number: u32) -> Option<usize> {
        self.members.iter().position(|&(n, _)| n == number)
    }

    pub fn source(&self, member: usize) -> Source {
        match self.members[member].1 {
            Place::Group(_) => Source::Umem,
            Place::Other(_) => Source::Own,
        }
    }

    pub fn is_group_member(&self, member: usize) -> bool {
        self.source(member) == Source::Umem
    }

    pub fn info(&self, member: usize) -> &PortInfo {
        match self.members[member].1 {
            Place::Group(g) => self.group().info(g),
            Place::Other(o) => self.others[o].port.info(),
        }
    }

    /// True when this thread receives on `member`.
    pub fn receives(&self, member: usize) -> bool {
        match self.members[member].1 {
            Place::Group(_) => true,
            Place::Other(o) => self.others[o].receives,
        }
    }

    fn group(&self) -> &XdpGroup {
        self.group.as_ref().expect("a group member implies a group")
    }

    fn group_mut(&mut self) -> &mut XdpGroup {
        self.group.as_mut().expect("a group member implies a group")
    }

    /// Receives a burst on `member` into `batch`.
    #[inline]
    pub fn rx_burst(&mut self, member: usize, batch: &mut Batch) -> Result<usize, PortError> {
        if !self.is_up(member) {
            return Ok(0);
        }
        let got = match self.members[member].1 {
            Place::Group(g) => self.group_mut().rx_burst(g, batch),
            Place::Other(o) => self.others[o].port.rx_burst(batch),
        };
        Ok(self.absorb(member, got)?.unwrap_or(0))
    }

    /// Gives back the received frames of `member` in `batch` that were not queued.
    pub fn release_rx(&mut self, member: usize, batch: &mut Batch) {
        match self.members[member].1 {
            Place::Group(_) => self.group_mut().release(batch),
            Place::Other(o) => self.others[o].port.release(batch),
        }
    }

    /// The bytes of a packet `member` received.
    #[inline]
    pub fn own_packet(&self, member: usize, addr: u64, len: u32) -> &[u8] {
        match self.members[member].1 {
            Place::Group(_) => self.group().packet(addr, len),
            Place::Other(o) => self.others[o].port.packet(addr, len),
        }
    }

    /// The whole UMEM frame holding `addr`, writable, and `addr`'s offset in it.
    #[inline]
    pub fn umem_frame_mut(&mut self, addr: u64) -> (&mut [u8], usize) {
        self.group_mut().frame_mut(addr)
    }

    /// Asks the CPU to fetch the first cache line of the UMEM packet at `addr` ahead of its
    /// parse: on veth the kernel copied it in on the sending CPU, and the first read of a
    /// packet's bytes was nine tenths of the switch's time in its datapath (perf).
    #[inline]
    pub fn prefetch_umem(&self, addr: u64) {
        self.group().prefetch(addr);
    }

    #[inline]
    pub fn umem_frame_base(&self, addr: u64) -> u64 {
        self.group().frame_base(addr)
    }

    #[inline]
    pub fn umem_packet(&self, addr: u64, len: u32) -> &[u8] {
        self.group().packet(addr, len)
    }

    /// Queues a UMEM packet the caller holds on group member `member`: its descriptors move
    /// (`segments`: its frame, or the frames of a chain, head first). Returns false (frames
    /// kept by the caller) when `member` is not in the group.
    #[inline]
    pub fn queue_move(
        &mut self,
        member: usize,
        segments: &[(u64, u32)],
    ) -> Result<bool, PortError> {
        let Place::Group(g) = self.members[member].1 else {
            return Ok(false);
        };
        if !self.is_up(member) {
            self.link_down[member] += 1;
            self.free_umem(segments);
            return Ok(true);
        }
        let len = match segments {
            [(_, len)] => *len as usize,
            _ => segments.iter().map(|&(_, len)| len as usize).sum(),
        };
        if self.too_big_for(member, len) {
            self.free_umem(segments);
            return Ok(true);
        }
        let pushed = |tx: &mut Batch| match segments {
            [(addr, len)] => tx.push(*addr, *len),
            _ => tx.push_chain(segments),
        };
        if !pushed(&mut self.tx[member]) {
            // The batch is full: send it now (it empties) and start another.
            let group = self.group.as_mut().expect("group member");
            let sent = group.tx_burst(g, &mut self.tx[member]);
            self.absorb(member, sent)?;
            if !self.is_up(member) {
                self.link_down[member] += 1;
                self.free_umem(segments);
            } else if !pushed(&mut self.tx[member]) {
                // Longer than any batch holds (no chain received is).
                self.bad_chain[member] += 1;
                self.free_umem(segments);
            }
        }
        Ok(true)
    }

    /// Queues a copy of the UMEM packet in `segments` (its frame, or a chain's, head first)
    /// on `member`: a fresh frame for a group member (a chain of them for a chain), a slot
    /// of its own for another port (a chain gathered into one, if the port takes that
    /// many bytes; else counted as `tx_bad_chain`). False when there was no room.
    pub fn queue_duplicate(
        &mut self,
        member: usize,
        segments: &[(u64, u32)],
    ) -> Result<bool, PortError> {
        if !self.is_up(member) {
            self.link_down[member] += 1;
            return Ok(true);
        }
        // Before any copy is made (and counted).
        let total: u32 = segments.iter().map(|&(_, len)| len).sum();
        if self.too_big_for(member, total as usize) {
            return Ok(true);
        }
        match (self.members[member].1, segments) {
            (Place::Group(g), &[(addr, len)]) => match self.group_mut().duplicate(g, addr, len) {
                Some(copy) => self.queue_move(member, &[(copy, len)]),
                None => Ok(false),
            },
            // A chain: each segment copied into a fresh frame (one copy counted for the
            // packet, as for a packet of one frame); a member that sends fewer segments
            // counts it, never sent cut.
            (Place::Group(g), _) => {
                let group = self.group.as_mut().expect("group member");
                if segments.len() > group.info(g).multi_buffer.unwrap_or(1) as usize {
                    self.bad_chain[member] += 1;
                    return Ok(true);
                }
                let mut copy = [(0u64, 0u32); wirespeed_port::MAX_SEGMENTS];
                match group.duplicate_chain(g, segments, &mut copy) {
                    Some(k) => self.queue_move(member, &copy[..k]),
                    None => Ok(false),
                }
            }
            // Longer than the port's frames: dropped whole and counted, never cut.
            (Place::Other(o), _) => {
                if total > self.others[o].port.max_packet_len() {
                    self.bad_chain[member] += 1;
                    return Ok(true);
                }
                let group = self.group.as_ref().expect("a UMEM frame implies a group");
                let bytes = match segments {
                    &[(addr, len)] => group.packet(addr, len),
                    _ => {
                        self.gather.clear();
                        for &(addr, len) in segments {
                            self.gather.extend_from_slice(group.packet(addr, len));
                        }
                        &self.gather
                    }
                };
                let queued = queue_other(&mut self.others[o], &mut self.tx[member], bytes);
                self.queued_or_down(member, queued)
            }
        }
    }

    /// The bytes of the UMEM packet in `segments`, contiguous: its frame's in place, or a
    /// chain's gathered into a buffer of the set's (a copy, for the controller).
    pub fn umem_packet_bytes(&mut self, segments: &[(u64, u32)]) -> &[u8] {
        let group = self.group.as_ref().expect("a UMEM frame implies a group");
        if let &[(addr, len)] = segments {
            return group.packet(addr, len);
        }
        self.gather.clear();
        for &(addr, len) in segments {
            self.gather.extend_from_slice(group.packet(addr, len));
        }
        &self.gather
    }

    /// Queues a copy of `bytes` on `member`. False when there was no room.
    pub fn queue_copy(&mut self, member: usize, bytes: &[u8]) -> Result<bool, PortError> {
        if !self.is_up(member) {
            self.link_down[member] += 1;
            return Ok(true);
        }
        // Before any copy is made (and counted).
        if self.too_big_for(member, bytes.len()) {
            return Ok(true);
        }
        match self.members[member].1 {
            Place::Group(g) if bytes.len() > self.group().max_packet_len() as usize => {
                self.queue_chain_copy(member, g, bytes)
            }
            Place::Group(g) => match self.group_mut().alloc_copy(g, bytes) {
                Some(copy) => self.queue_move(member, &[(copy, bytes.len() as u32)]),
                None => Ok(false),
            },
            // Longer than the port's frames: dropped whole and counted, never cut.
            Place::Other(o) if bytes.len() > self.others[o].port.max_packet_len() as usize => {
                self.bad_chain[member] += 1;
                Ok(true)
            }
            Place::Other(o) => {
                let queued = queue_other(&mut self.others[o], &mut self.tx[member], bytes);
                self.queued_or_down(member, queued)
            }
        }
    }

    /// Queues `bytes`, longer than a frame holds, on group member `g` (`member`) as a chain
    /// of fresh frames; a member that sends single frames, or fewer than the chain needs,
    /// counts it as `tx_bad_chain`. False when there were no frames for it.
    fn queue_chain_copy(
        &mut self,
        member: usize,
        g: usize,
        bytes: &[u8],
    ) -> Result<bool, PortError> {
        let group = self.group.as_mut().expect("group member");
        // A member that sends fewer frames than the bytes need: never sent cut, counted.
        let longest = group.info(g).multi_buffer.unwrap_or(1) * group.frame_size();
        if bytes.len() as u32 > longest {
            self.bad_chain[member] += 1;
            return Ok(true);
        }
        let chain = &mut self.chain;
        if group.alloc_tx(g, chain, 1, bytes.len() as u32) == 0 {
            return Ok(false);
        }
        let mut segments = [(0u64, 0u32); wirespeed_port::MAX_SEGMENTS];
        let mut at = 0;
        for (j, (addr, len)) in chain.segments(0).enumerate() {
            let take = len as usize;
            group
                .packet_mut(addr, len)
                .copy_from_slice(&bytes[at..at + take]);
            segments[j] = (addr, len);
            at += take;
        }
        let n = chain.more(0) + 1;
        // The frames move on to the member's queue (still held: no release).
        chain.clear();
        self.chain_copies[member] += 1;
        self.queue_move(member, &segments[..n])
    }

    /// Gives a UMEM packet the caller holds back to the pool: its frame, or every frame of
    /// its chain.
    #[inline]
    pub fn free_umem(&mut self, segments: &[(u64, u32)]) {
        let pushed = |free: &mut Batch| match segments {
            [] => true,
            [(addr, len)] => free.push(*addr, *len),
            _ => free.push_chain(segments),
        };
        if !pushed(&mut self.free) {
            let group = self.group.as_mut().expect("a UMEM frame implies a group");
            group.release(&mut self.free);
            pushed(&mut self.free);
        }
    }

    /// Sends what every member has queued and returns freed frames to the pool.
    pub fn send_all(&mut self) -> Result<(), PortError> {
        for member in 0..self.members.len() {
            if self.tx[member].is_empty() {
                continue;
            }
            let sent = match self.members[member].1 {
                Place::Group(g) => {
                    let group = self.group.as_mut().expect("group member");
                    group.tx_burst(g, &mut self.tx[member])
                }
                Place::Other(o) => self.others[o].port.tx_burst(&mut self.tx[member]),
            };
            self.absorb(member, sent)?;
        }
        if !self.free.is_empty() {
            let group = self.group.as_mut().expect("UMEM frames imply a group");
            group.release(&mut self.free);
        }
        Ok(())
    }

    /// Pushes `member`'s queued transmissions and reclaims its completed ones.
    pub fn flush(&mut self, member: usize) -> Result<(), PortError> {
        if !self.is_up(member) {
            return Ok(());
        }
        let flushed = match self.members[member].1 {
            Place::Group(g) => self.group_mut().flush(g),
            Place::Other(o) => self.others[o].port.flush(),
        };
        self.absorb(member, flushed)?;
        Ok(())
    }

    /// Sleeps until a port this thread receives on may have packets, `waker` rings (a request
    /// came), or `timeout` passes. Ports that are not up are left out: a socket whose interface went away may poll as
    /// ready for ever.
    pub fn wait_rx_any(
        &mut self,
        timeout: Duration,
        waker: Option<&Waker>,
    ) -> Result<(), PortError> {
        let mut fds: Vec<RawFd> = waker.map(Waker::fd).into_iter().collect();
        for (member, &(_, place)) in self.members.iter().enumerate() {
            if !self.is_up(member) {
                continue;
            }
            match place {
                Place::Group(g) => fds.push(self.group().socket_fd(g)),
                Place::Other(o) if self.others[o].receives => {
                    fds.extend(self.others[o].port.poll_fds());
                }
                Place::Other(_) => {}
            }
        }
        if fds.is_empty() {
            std::thread::sleep(timeout);
            return Ok(());
        }
        wirespeed_port::poll_any(&fds, timeout).map_err(|source| PortError::Io {
            iface: self.info(0).spec.clone(),
            what: "poll",
            source,
        })?;
        Ok(())
    }

    /// Counters of `member` (a system call); copies into another backend's buffers included.
    pub fn stats(&mut self, member: usize) -> PortStats {
        match self.members[member].1 {
            Place::Group(g) => {
                let mut s = self.group_mut().stats(g);
                s.drops.link_down += self.link_down[member];
                s.drops.tx_bad_chain += self.bad_chain[member];
                s.drops.tx_too_big += self.too_big[member];
                s.copies += self.chain_copies[member];
                s
            }
            Place::Other(o) => {
                let other = &mut self.others[o];
                let mut s = other.port.stats();
                s.add(&other.retired);
                s.copies += other.copies;
                s.drops.link_down += self.link_down[member];
                s.drops.tx_bad_chain += self.bad_chain[member];
                s.drops.tx_too_big += self.too_big[member];
                s
            }
        }
    }

    /// Where the frames of the shared UMEM are (None without AF_XDP ports).
    pub fn audit(&self) -> Option<FrameAudit> {
        self.group.as_ref().map(XdpGroup::audit)
    }
}

/// Copies `bytes` into a transmit slot of `other` queued in `tx`; false when it has none.
fn queue_other(other: &mut OtherPort, tx: &mut Batch, bytes: &[u8]) -> Result<bool, PortError> {
    let len = bytes.len() as u32;
    if len > other.port.max_packet_len() {
        return Ok(false);
    }
    if tx.room() == 0 {
        other.port.tx_burst(tx)?;
    }
    if other.port.alloc_tx(tx, 1, len) == 0 {
        // The ring is full of frames on their way out: push them, then try once more.
        other.port.tx_burst(tx)?;
        other.port.flush()?;
        if other.port.alloc_tx(tx, 1, len) == 0 {
            return Ok(false);
        }
    }
    let addr = tx.addr(tx.len() - 1);
    other.port.packet_mut(addr, len).copy_from_slice(bytes);
    other.copies += 1;
    Ok(true)
}
