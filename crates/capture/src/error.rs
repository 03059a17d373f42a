//! Why a capture file cannot be read (or written): always names the file and the problem.

use std::path::{Path, PathBuf};

/// A capture file error: the file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct CaptureError {
    pub path: PathBuf,
    pub kind: ErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum ErrorKind {
    #[error("cannot open: {0}")]
    Open(#[source] std::io::Error),
    #[error("read error at byte {offset}: {source}")]
    Read {
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("truncated at byte {offset}: {what} needs {need} bytes, the file has {have} more")]
    Truncated {
        offset: u64,
        what: &'static str,
        need: u64,
        have: u64,
    },
    #[error("not a pcap or pcapng capture file ({})", first_bytes(.magic))]
    NotCapture { magic: Vec<u8> },
    #[error("malformed at byte {offset}: {reason}")]
    Malformed { offset: u64, reason: String },
    #[error("the capture file has no interface description block")]
    NoInterface,
    /// Every record is read as the first interface's link type, so a file that mixes link
    /// types is refused, as libpcap does.
    #[error(
        "interface description block at byte {offset} has link type {link_type}, the first \
         interface {first}: files that mix link types are not supported"
    )]
    MixedLinkTypes {
        offset: u64,
        link_type: u16,
        first: u16,
    },
    #[error("link type {0} is not supported (wirespeed handles Ethernet, link type 1)")]
    UnsupportedLinkType(u16),
}

impl CaptureError {
    pub fn new(path: impl AsRef<Path>, kind: ErrorKind) -> CaptureError {
        CaptureError {
            path: path.as_ref().to_path_buf(),
            kind,
        }
    }

    /// For callers that accept only some link types (replay needs Ethernet).
    pub fn unsupported_link_type(path: impl AsRef<Path>, link_type: u16) -> CaptureError {
        CaptureError::new(path, ErrorKind::UnsupportedLinkType(link_type))
    }
}

/// How a file that is not a capture starts: as text when it is text ("root" for
/// /etc/passwd), else its bytes in hex.
fn first_bytes(magic: &[u8]) -> String {
    match magic {
        [] => "it is empty".to_string(),
        _ if magic.iter().all(|b| b.is_ascii_graphic() || *b == b' ') => {
            format!("it starts with {:?}", String::from_utf8_lossy(magic))
        }
        _ => {
            let hex: Vec<String> = magic.iter().map(|b| format!("{b:02x}")).collect();
            format!("it starts with bytes {}", hex.join(" "))
        }
    }
}
