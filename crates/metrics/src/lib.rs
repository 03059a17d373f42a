//! What Prometheus scrapes: the figures a running tool publishes, written in Prometheus'
//! text exposition format (version 0.0.4) and served on `GET /metrics`.
//!
//! The format is written here rather than with the `prometheus-client` crate: that crate
//! writes only OpenMetrics, whose counters are named without `_total` in their `# TYPE`
//! line, and `promtool check metrics`, which reads the classic text format only
//! (prometheus/prometheus#8932), rejects every such counter for want of help text.
//!
//! The listener runs on a thread of its own and reads figures a tool's threads publish
//! into slots ([`Published`]) that the publishing thread fills with `try_lock`: a scrape
//! never holds up a poll-mode thread.

pub mod exposition;
pub mod figures;
pub mod process;
pub mod published;
pub mod server;

pub use exposition::Exposition;
pub use figures::{ThreadFigures, device_and_queue, frame_figures, port_figures, thread_figures};
pub use published::Published;
pub use server::{MetricsError, MetricsListener, MetricsServer, listen_address};
