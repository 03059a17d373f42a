//! Run machinery that several commands share: opening a port, the ready line, the meter
//! and run limits, idle back-off and link watching, taking what arrived before a stop,
//! signals, the clock, capability checks, the kernel engine's runner, threads serving a
//! port's queues, error text and where the report goes.

pub mod caps;
pub mod clock;
pub mod error_text;
pub mod frame_audit;
pub mod idle;
pub mod interface_drops;
pub mod link_watch;
pub mod live_frames;
pub mod meter;
pub mod metrics;
pub mod open_port;
pub mod port_mac;
pub mod ready;
pub mod report_to;
pub mod rx_drain;
pub mod signals;
pub mod threads;
