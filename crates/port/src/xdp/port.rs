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
        if spec.all_queues {
            return XdpPort::open_all_queues(spec, opts);
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

    /// A socket on each receive queue of `spec`'s interface. `opts.frame_count` is each
    /// queue's (`frames_per_queue`) or the whole UMEM's, shared out evenly between them.
    fn open_all_queues(spec: &PortSpec, opts: &PortOptions) -> Result<XdpPort, PortError> {
        if !opts.rx {
            return Err(PortError::Unsupported(format!(
                "{spec}: '@all' receives on every queue; a port that only sends uses one \
                 (xdp:{}@N)",
                spec.iface
            )));
        }
        if wirespeed_xsk::if_index(&spec.iface).is_none() {
            return Err(PortError::NoInterface(spec.iface.clone()));
        }
        let queues = wirespeed_xsk::rx_queue_count(&spec.iface);
        if queues > MAX_QUEUES {
            return Err(PortError::Unsupported(format!(
                "{spec}: {} has {queues} receive queues; '@all' serves at most {MAX_QUEUES}",
                spec.iface
            )));
        }
        let per_queue = match opts.frames_per_queue {
            true => opts.frame_count,
            false => opts.frame_count / queues,
        };
        if per_queue < 2 * opts.batch.max(1) {
            return Err(PortError::Unsupported(format!(
                "{spec}: {} frames give each of the {queues} receive queues {per_queue}, fewer \
                 than twice the batch ({}): give more frames",
                opts.frame_count, opts.batch
            )));
        }
        let specs: Vec<PortSpec> = (0..queues)
            .map(|queue| PortSpec {
                queue,
                all_queues: false,
                ..spec.clone()
            })
            .collect();
        let group = XdpGroup::open(
            &specs,
            &PortOptions {
                frame_count: per_queue,
                ..opts.clone()
            },
        )?;
        let first = group.info(0);
        let mut notes = first.notes.clone();
        if queues > 1 {
            notes.push(format!(
                "receiving on all {queues} queues of {} (a socket on each, one UMEM)",
                spec.iface
            ));
        }
        let info = PortInfo {
            spec: spec.to_string(),
            backend: first.backend,
            mode: first.mode.clone(),
            notes,
            busy_poll: first.busy_poll,
        };
        Ok(XdpPort {
            group,
            info,
            next: 0,
        })
    }
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
