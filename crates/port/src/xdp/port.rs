//! AF_XDP behind the `Port` trait: a group of one queue (`xdp:IFACE[@QUEUE]`), or of every
//! receive queue of an interface (`xdp:IFACE@all`). A NIC spreads its traffic over its queues
//! (RSS), and our program passes a queue without a socket to the kernel's stack: a receiver
//! on one queue misses the rest, so it says so, and `@all` takes them all.

use std::time::Duration;

use super::{MAX_QUEUES, XdpGroup};
use crate::{
    Batch, FrameAudit, LinkState, Port, PortError, PortInfo, PortOptions, PortSpec, PortStats,
};

/// AF_XDP sockets on one or every receive queue of an interface, on a UMEM and frame pool of
/// their own. Receives from the queues in turn; sends on the first.
pub struct XdpPort {
    group: XdpGroup,
    info: PortInfo,
    /// The queue the next `rx_burst` starts at, so no queue waits behind a busy one.
    next: usize,
}

impl XdpPort {
    pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<XdpPort, PortError> {
        if spec.many_queues() {
            let queues = XdpPort::queues_of(spec, opts)?;
            return XdpPort::open_queues(spec, &queues, opts, None);
        }
        let group = XdpGroup::open(std::slice::from_ref(spec), opts)?;
        let mut info = group.info(0).clone();
        let queues = wirespeed_xsk::rx_queue_count(&spec.iface);
        if opts.rx && queues > 1 {
            info.notes.push(format!(
                "{} has {queues} receive queues and this port receives on queue {} only: the \
                 others' packets go on to the kernel's stack (xdp:{}@all takes them all)",
                spec.iface, spec.queue, spec.iface
            ));
        }
        Ok(XdpPort {
            group,
            info,
            next: 0,
        })
    }

    /// The queues of a multi-queue `spec` (`@all`, `@FIRST-LAST`) split between `threads`
    /// ports, one for each thread to own: port `t` serves every `threads`-th queue from the
    /// `t`-th, on a UMEM and frame pool of its own. One redirect program serves them all.
    pub fn open_threads(
        spec: &PortSpec,
        threads: usize,
        opts: &PortOptions,
    ) -> Result<Vec<XdpPort>, PortError> {
        let queues = XdpPort::queues_of(spec, opts)?;
        if threads == 0 || threads > queues.len() {
            return Err(PortError::Unsupported(format!(
                "{spec}: {threads} threads for {} receive queue{}: give at most one thread a \
                 queue",
                queues.len(),
                if queues.len() == 1 { "" } else { "s" }
            )));
        }
        if opts.spill_bytes > 0 && threads > wirespeed_xdp::SPILL_RINGS as usize {
            return Err(PortError::Unsupported(format!(
                "{spec}: {threads} threads with a spill ring each: the program has {} spill \
                 rings (give fewer threads, or no spill ring)",
                wirespeed_xdp::SPILL_RINGS
            )));
        }
        let share =
            |t: usize| -> Vec<u32> { queues.iter().copied().skip(t).step_by(threads).collect() };
        // Each thread's queues spill to a ring of their own: a ring buffer has one consumer.
        let opts_of = |t: usize| PortOptions {
            spill_rings: threads as u32,
            spill_ring: t as u32,
            ..opts.clone()
        };
        let mut first = XdpPort::open_queues(spec, &share(0), &opts_of(0), None)?;
        let mut rest = Vec::with_capacity(threads - 1);
        for t in 1..threads {
            rest.push(XdpPort::open_queues(
                spec,
                &share(t),
                &opts_of(t),
                Some(&mut first.group),
            )?);
        }
        rest.insert(0, first);
        Ok(rest)
    }

    /// The receive queues a multi-queue spec names, checked.
    fn queues_of(spec: &PortSpec, opts: &PortOptions) -> Result<Vec<u32>, PortError> {
        if !opts.rx {
            return Err(PortError::Unsupported(format!(
                "{spec}: a port on several queues receives on each; a port that only sends \
                 uses one (xdp:{}@N)",
                spec.iface
            )));
        }
        if wirespeed_xsk::if_index(&spec.iface).is_none() {
            return Err(PortError::NoInterface(spec.iface.clone()));
        }
        let count = wirespeed_xsk::rx_queue_count(&spec.iface);
        let queues = spec.queues(count);
        if let Some(&q) = queues.iter().find(|&&q| q >= count) {
            return Err(PortError::NoQueue {
                iface: spec.iface.clone(),
                queue: q,
                count,
            });
        }
        if queues.len() > MAX_QUEUES as usize {
            return Err(PortError::Unsupported(format!(
                "{spec}: {} receive queues; a port serves at most {MAX_QUEUES}",
                queues.len()
            )));
        }
        Ok(queues)
    }

    /// A socket on each of `queues` of `spec`'s interface, on one UMEM. `opts.frame_count` is
    /// each queue's (`frames_per_queue`) or the whole UMEM's, shared out evenly between them.
    /// With `programs_of`, another port's redirect program serves the queues.
    fn open_queues(
        spec: &PortSpec,
        queues: &[u32],
        opts: &PortOptions,
        programs_of: Option<&mut XdpGroup>,
    ) -> Result<XdpPort, PortError> {
        let n = queues.len() as u32;
        let per_queue = match opts.frames_per_queue {
            true => opts.frame_count,
            false => opts.frame_count / n,
        };
        if per_queue < 2 * opts.batch.max(1) {
            return Err(PortError::Unsupported(format!(
                "{spec}: {} frames give each of the {n} receive queues {per_queue}, fewer \
                 than twice the batch ({}): give more frames",
                opts.frame_count, opts.batch
            )));
        }
        let specs: Vec<PortSpec> = queues.iter().map(|&q| spec.on_queue(q)).collect();
        let opts = PortOptions {
            frame_count: per_queue,
            ..opts.clone()
        };
        let group = match programs_of {
            None => XdpGroup::open(&specs, &opts)?,
            Some(serving) => XdpGroup::open_served(&specs, &opts, serving)?,
        };
        let first = group.info(0);
        let mut notes = first.notes.clone();
        if n > 1 {
            let which = match spec.all_queues && n == wirespeed_xsk::rx_queue_count(&spec.iface) {
                true => format!("all {n} queues"),
                false => format!("queues {}", list(queues)),
            };
            notes.push(format!(
                "receiving on {which} of {} (a socket on each, one UMEM)",
                spec.iface
            ));
        }
        let info = PortInfo {
            spec: match n {
                1 => spec.on_queue(queues[0]).to_string(),
                _ => spec.to_string(),
            },
            backend: first.backend,
            mode: first.mode.clone(),
            notes,
            busy_poll: first.busy_poll,
            multi_buffer: first.multi_buffer,
        };
        Ok(XdpPort {
            group,
            info,
            next: 0,
        })
    }

    /// The queues this port receives on.
    pub fn queues(&self) -> Vec<u32> {
        (0..self.group.len()).map(|m| self.group.queue(m)).collect()
    }
}

/// Queues as people write them: 0,2,4.
fn list(queues: &[u32]) -> String {
    let names: Vec<String> = queues.iter().map(u32::to_string).collect();
    names.join(",")
}

impl Port for XdpPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    #[inline]
    fn rx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        let n = self.group.len();
        if n == 1 {
            return self.group.rx_burst(0, batch);
        }
        let mut got = 0;
        for k in 0..n {
            if batch.room() == 0 {
                break;
            }
            match self.group.rx_burst((self.next + k) % n, batch) {
                Ok(m) => got += m,
                // Deliver what the other queues gave; the error comes back on a later call.
                Err(_) if got > 0 => break,
                Err(e) => return Err(e),
            }
        }
        self.next = (self.next + 1) % n;
        Ok(got)
    }

    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        self.group.tx_burst(0, batch)
    }

    fn release(&mut self, batch: &mut Batch) {
        self.group.release(batch)
    }

    fn alloc_tx(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize {
        self.group.alloc_tx(0, batch, n, len)
    }

    #[inline]
    fn packet(&self, addr: u64, len: u32) -> &[u8] {
        self.group.packet(addr, len)
    }

    #[inline]
    fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        self.group.packet_mut(addr, len)
    }

    fn max_packet_len(&self) -> u32 {
        self.group.max_packet_len()
    }

    fn max_chain_len(&self) -> u32 {
        match self.info.multi_buffer {
            Some(segments) => segments * self.group.frame_size(),
            None => self.group.max_packet_len(),
        }
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.group.flush(0)
    }

    fn poll_fds(&self) -> Vec<std::os::fd::RawFd> {
        self.group.poll_fds()
    }

    fn wait_rx(&mut self, timeout: Duration) -> Result<(), PortError> {
        self.group.wait_rx_any(timeout)
    }

    fn tx_pending(&self) -> bool {
        self.group.tx_pending(0)
    }

    /// The queues' counters added up.
    fn stats(&mut self) -> PortStats {
        let mut total = PortStats::default();
        for q in 0..self.group.len() {
            total.add(&self.group.stats(q));
        }
        total
    }

    fn audit(&self) -> Option<FrameAudit> {
        Some(self.group.audit())
    }

    /// Every member is on the one interface.
    fn link(&self) -> LinkState {
        self.group.link(0)
    }
}
