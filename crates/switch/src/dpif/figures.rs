//! What a poll-mode thread publishes for a scrape, a few times a second: its ports'
//! counters, its frames, its own counters and its cache's, its tunnels', and how it spent
//! its time.

use wirespeed_metrics::ThreadFigures;
use wirespeed_port::{FrameAudit, PortStats};

use crate::dpif::flow_cache::CacheStats;
use crate::dpif::pmd::BridgeCounters;
use crate::tunnel::TunnelFigures;

#[derive(Debug, Clone, Default)]
pub struct PmdFigures {
    pub cpu: Option<usize>,
    pub time: ThreadFigures,
    /// Each port's counters on this thread, in the bridge's order.
    pub ports: Vec<PortStats>,
    pub audit: Option<FrameAudit>,
    pub counters: BridgeCounters,
    pub cache: CacheStats,
    /// Megaflows in the thread's cache now.
    pub megaflows: usize,
    /// The tunnel ports' counts on this thread (none without tunnel ports).
    pub tunnels: TunnelFigures,
}
