//! Per-port counters. Every packet is delivered, sent, or counted under a named drop reason
//! (DESIGN rule 7).

/// Why packets were lost, one counter a reason. Kernel-side reasons are read from the kernel
/// (XDP_STATISTICS, PACKET_STATISTICS); the others are counted by the backend itself.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DropCounters {
    /// The kernel had a packet for us but the fill ring was empty (AF_XDP).
    pub fill_ring_empty: u64,
    /// The kernel had a packet for us but the receive ring was full.
    pub rx_ring_full: u64,
    /// Dropped by the kernel for other reasons (AF_XDP `rx_dropped`).
    pub kernel_dropped: u64,
    /// A receive descriptor failed validation (address or length out of range).
    pub rx_invalid_desc: u64,
    /// The transmit ring had no room for a packet handed to `tx_burst`.
    pub tx_ring_full: u64,
    /// The kernel rejected a transmit descriptor.
    pub tx_invalid_desc: u64,
    /// The kernel failed to send a queued packet.
    pub tx_error: u64,
    /// Our program had to set a packet aside while we were behind, and its spill ring was
    /// full (AF_XDP with a spill ring).
    pub spill_full: u64,
    /// Meant for the port while its interface was down or gone (a switch's output).
    pub link_down: u64,
    /// A received packet of several frames was malformed: longer than any packet the kernel
    /// makes, or with an empty segment (AF_XDP multi-buffer, a `pipe:` peer); or it came
    /// through a pipe to an application that takes packets of one frame.
    pub rx_bad_chain: u64,
    /// A packet of several frames could not be sent: longer than the port sends, with a bad
    /// segment, or on a port that sends single frames only.
    pub tx_bad_chain: u64,
    /// A packet longer than the interface's MTU (and an Ethernet header with one VLAN tag)
    /// allows, which the kernel would drop unseen after taking it (a switch's output).
    pub tx_too_big: u64,
}

impl DropCounters {
    /// Each reason with its name, in a fixed order (for `--json` and the live line).
    pub fn by_reason(&self) -> [(&'static str, u64); 12] {
        [
            ("fill_ring_empty", self.fill_ring_empty),
            ("rx_ring_full", self.rx_ring_full),
            ("kernel_dropped", self.kernel_dropped),
            ("rx_invalid_desc", self.rx_invalid_desc),
            ("tx_ring_full", self.tx_ring_full),
            ("tx_invalid_desc", self.tx_invalid_desc),
            ("tx_error", self.tx_error),
            ("spill_full", self.spill_full),
            ("link_down", self.link_down),
            ("rx_bad_chain", self.rx_bad_chain),
            ("tx_bad_chain", self.tx_bad_chain),
            ("tx_too_big", self.tx_too_big),
        ]
    }

    pub fn total(&self) -> u64 {
        self.by_reason().iter().map(|(_, v)| v).sum()
    }

    /// Adds another port's drops, reason by reason.
    pub fn add(&mut self, o: &DropCounters) {
        self.fill_ring_empty += o.fill_ring_empty;
        self.rx_ring_full += o.rx_ring_full;
        self.kernel_dropped += o.kernel_dropped;
        self.rx_invalid_desc += o.rx_invalid_desc;
        self.tx_ring_full += o.tx_ring_full;
        self.tx_invalid_desc += o.tx_invalid_desc;
        self.tx_error += o.tx_error;
        self.spill_full += o.spill_full;
        self.link_down += o.link_down;
        self.rx_bad_chain += o.rx_bad_chain;
        self.tx_bad_chain += o.tx_bad_chain;
        self.tx_too_big += o.tx_too_big;
    }
}

/// Packet and byte counts of a port, plus its drops.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PortStats {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Packets copied between buffer areas (DESIGN rule 5: count the copies).
    pub copies: u64,
    /// Packets received through the spill ring (each copied into a frame on the way).
    pub spilled: u64,
    /// Of `tx_packets`, those the kernel held when the interface went away: handed over,
    /// never sent. (Kept apart so that tx_packets never goes down.) AF_XDP counts these by
    /// the frames not completed, so a packet of several frames counts once for each: the
    /// completion ring names frames, not the packets they belonged to.
    pub tx_stranded: u64,
    pub drops: DropCounters,
}

impl PortStats {
    /// Adds another port's counters (for a total over several ports).
    pub fn add(&mut self, o: &PortStats) {
        self.rx_packets += o.rx_packets;
        self.rx_bytes += o.rx_bytes;
        self.tx_packets += o.tx_packets;
        self.tx_bytes += o.tx_bytes;
        self.copies += o.copies;
        self.spilled += o.spilled;
        self.tx_stranded += o.tx_stranded;
        self.drops.add(&o.drops);
    }
}

/// Where every frame of a port's buffer area is (the UMEM conservation law): pool + fill +
/// kernel + rx + application + tx + completion + lost = total.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FrameAudit {
    pub total: u64,
    pub pool: u64,
    pub fill: u64,
    pub kernel: u64,
    pub rx: u64,
    pub application: u64,
    pub tx: u64,
    pub completion: u64,
    /// Frames the kernel had taken and never gave back when a port's interface was deleted
    /// and its socket closed (the port bound again to the interface made under its name).
    pub lost: u64,
}

impl FrameAudit {
    pub fn accounted(&self) -> u64 {
        self.pool
            + self.fill
            + self.kernel
            + self.rx
            + self.application
            + self.tx
            + self.completion
            + self.lost
    }

    /// True when every frame is somewhere, exactly once.
    pub fn balanced(&self) -> bool {
        self.accounted() == self.total
    }
}
