//! The packet buffer area: one mmap'd region cut into equal frames, named by their byte
//! offset (netmap's buffer indexes: position independent, shareable with the kernel and with
//! other processes), and the per-queue frame pool.

mod area;
mod pool;

pub use area::{Umem, UmemConfig};
pub use pool::FramePool;

use std::io;

/// What can go wrong creating a UMEM.
#[derive(Debug, thiserror::Error)]
pub enum UmemError {
    #[error("frame size {0} is not supported (use 2048 or 4096)")]
    FrameSize(u32),
    #[error("headroom {headroom} leaves no room for a packet in a {frame_size}-byte frame")]
    Headroom { headroom: u32, frame_size: u32 },
    #[error("frame count must be between 1 and 16777216, got {0}")]
    FrameCount(u32),
    #[error("mmap of {bytes} bytes failed: {source}")]
    Map { bytes: usize, source: io::Error },
    /// The caller's cancel flag was set while the area was being filled in.
    #[error("stopped while its memory was being set up")]
    Cancelled,
}
