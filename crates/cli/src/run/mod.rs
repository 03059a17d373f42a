//! Run machinery that several commands share: opening a port, the meter, idle back-off,
//! signals, CPU pinning, the clock, link watching, capability checks and report output.

pub mod caps;
pub mod clock;
pub mod cpus;
pub mod error_text;
pub mod frame_audit;
pub mod idle;
pub mod link_watch;
pub mod live_frames;
pub mod meter;
pub mod open_port;
pub mod port_mac;
pub mod report_to;
pub mod signals;
