//! The redirect program: packets of a queue go to the AF_XDP socket registered for it.

use std::os::fd::RawFd;

use crate::{AttachMode, XdpError, error_chain, load_attached};
use aya::maps::XskMap;

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xsk_redirect.o"));
const PROGRAM: &str = "xsk_redirect";

/// The redirect program, attached to one interface; detached when dropped.
pub struct XskProgram {
    ebpf: aya::Ebpf,
    iface: String,
    mode: AttachMode,
}

impl XskProgram {
    /// Loads the program and attaches it to `iface`.
    pub fn attach(iface: &str, mode: AttachMode, force: bool) -> Result<XskProgram, XdpError> {
        Ok(XskProgram {
            ebpf: load_attached(OBJECT, PROGRAM, iface, mode, force)?,
            iface: iface.to_string(),
            mode,
        })
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }

    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Sends the packets of `queue` to the socket `fd`.
    pub fn register(&mut self, queue: u32, fd: RawFd) -> Result<(), XdpError> {
        let map = self.ebpf.map_mut("xsks").ok_or(XdpError::Map {
            map: "xsks",
            reason: "not in the object".to_string(),
        })?;
        let mut xsks: XskMap<_> = XskMap::try_from(map).map_err(|e| XdpError::Map {
            map: "xsks",
            reason: error_chain(&e),
        })?;
        xsks.set(queue, fd, 0).map_err(|e| XdpError::Map {
            map: "xsks",
            reason: format!("register queue {queue}: {}", error_chain(&e)),
        })
    }
}
