//! The `capture` layer: capture files (pcap and pcapng) and, later, filters and writers.
#![forbid(unsafe_code)]

mod error;
pub mod filter;
pub mod read;

pub use error::{CaptureError, ErrorKind};
pub use read::{CaptureReader, FileFormat, Record};

/// LINKTYPE_ETHERNET, the only link type wirespeed's ports carry.
pub const LINKTYPE_ETHERNET: u16 = 1;
