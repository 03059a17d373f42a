//! The redirect program: packets of a queue go to the AF_XDP socket registered for it.

use std::os::fd::RawFd;

use aya::maps::XskMap;
use aya::programs::Xdp;

use crate::{AttachMode, XdpError, attach, error_chain, load_program};

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
        let mut ebpf = load_program(OBJECT, PROGRAM)?;
        let prog: &mut Xdp = ebpf
            .program_mut(PROGRAM)
            .and_then(|p| p.try_into().ok())
            .ok_or(XdpError::Load {
                program: PROGRAM,
                reason: "not an XDP program".to_string(),
            })?;
        attach::attach(prog, PROGRAM, iface, mode, force)?;
        Ok(XskProgram {
            ebpf,
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
