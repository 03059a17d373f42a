//! A port's counts as OpenFlow's port statistics and `ctl dump-ports` give them: what went
//! through its socket, plus what the kernel's fast path took in and sent for it.

use wirespeed_port::PortStats;

use crate::bridge::Bridge;
use crate::offload::FastPortCounts;

/// Port counters: received and sent packets and bytes, drops and errors each way.
#[derive(Clone, Copy, Default, Debug)]
pub struct PortCounts {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
}

/// What the kernel's fast path did for each device port (in `bridge.numbers()`'s order),
/// harvested now; None without `--offload`. A failed harvest gives the counts of the last
/// one that worked.
pub fn fast_port_counts(bridge: &mut Bridge) -> Option<Vec<FastPortCounts>> {
    let numbers = bridge.numbers().to_vec();
    let now = bridge.now();
    let mut dp = bridge.ofproto();
    let _ = dp.harvest_offload(now);
    dp.offload
        .as_ref()
        .map(|o| numbers.iter().map(|&n| o.port_counts(n)).collect())
}

/// A device port's counts as OpenFlow's port statistics give them: what went through its
/// socket, and what the kernel's fast path took in and sent for it. (A redirect the kernel
/// then failed to send is a transmit drop; its bytes stay in `tx_bytes`, as the kernel's
/// tracepoint tells frames only.)
pub fn port_counts(s: &PortStats, fast: Option<&FastPortCounts>) -> PortCounts {
    let d = &s.drops;
    let mut counts = PortCounts {
        rx_packets: s.rx_packets,
        tx_packets: s.tx_packets,
        rx_bytes: s.rx_bytes,
        tx_bytes: s.tx_bytes,
        rx_dropped: d.fill_ring_empty + d.rx_ring_full + d.kernel_dropped,
        tx_dropped: d.tx_ring_full + d.tx_error + d.link_down + d.tx_too_big,
        rx_errors: d.rx_invalid_desc,
        tx_errors: d.tx_invalid_desc,
    };
    if let Some(f) = fast {
        counts.rx_packets += f.rx_packets;
        counts.rx_bytes += f.rx_bytes;
        // The two come from different reads (the entries' counts, the transmit tracepoint's),
        // so the failures may be ahead of the redirects credited.
        let failed = f.tx_failed.min(f.tx_packets);
        counts.tx_packets += f.tx_packets - failed;
        counts.tx_bytes += f.tx_bytes;
        counts.tx_dropped += failed;
    }
    counts
}
