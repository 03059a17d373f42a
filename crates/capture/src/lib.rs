//! The `capture` layer: capture files (pcap and pcapng: read, write, rotate), tcpdump filters
//! (compiled by libpcap, run by our classic BPF interpreter), the writer thread that keeps
//! the disk off the receive loop (`recorder` -> `spool` -> `output`; `merge` for several
//! receiving threads), and `print`, the room of
//! the tcpdump-style line printer: one protocol a file, as tcpdump's `print-*.c`, each turning
//! the bytes after the previous layer into its part of the line.
#![forbid(unsafe_code)]

mod error;
pub mod filter;
pub mod localtime;
pub mod merge;
pub mod output;
pub mod print;
pub mod read;
pub mod recorder;
pub mod rotate;
pub mod spool;
pub mod write;

pub use error::{CaptureError, ErrorKind};
pub use read::{CaptureReader, FileFormat, Record};

/// LINKTYPE_ETHERNET, the only link type wirespeed's ports carry.
pub const LINKTYPE_ETHERNET: u16 = 1;
