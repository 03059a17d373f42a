//! One AF_XDP port behind the `Port` trait: a group of one.

use std::time::Duration;

use super::XdpGroup;
use crate::{Batch, FrameAudit, Port, PortError, PortInfo, PortOptions, PortSpec, PortStats};

/// An AF_XDP port with a UMEM and frame pool of its own.
pub struct XdpPort {
    group: XdpGroup,
    info: PortInfo,
}

impl XdpPort {
    pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<XdpPort, PortError> {
        let group = XdpGroup::open(std::slice::from_ref(spec), opts)?;
        let mut info = group.info(0).clone();
        let queues = wirespeed_xsk::rx_queue_count(&spec.iface);
        if opts.rx && queues > 1 {
            // Our program passes a queue without a socket to the stack: say what is missed.
            info.notes.push(format!(
                "{} has {queues} receive queues and this port receives on queue {} only: the \
                 others' packets go on to the kernel's stack (xdp:{}@all takes them all)",
                spec.iface, spec.queue, spec.iface
            ));
        }
        Ok(XdpPort { group, info })
    }
}

impl Port for XdpPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    #[inline]
    fn rx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        self.group.rx_burst(0, batch)
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
        self.group.wait_rx(0, timeout)
    }

    fn tx_pending(&self) -> bool {
        self.group.tx_pending(0)
    }

    fn stats(&mut self) -> PortStats {
        self.group.stats(0)
    }

    fn audit(&self) -> Option<FrameAudit> {
        Some(self.group.audit())
    }
}
