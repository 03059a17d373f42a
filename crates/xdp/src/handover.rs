//! Handing our redirect program to a process that may not load one. dumpcap (under tshark
//! and Wireshark) gives up every capability but CAP_NET_RAW and CAP_NET_ADMIN before it
//! opens a device, and loading a BPF program or map needs CAP_BPF. A privileged broker
//! (`wirespeed pcap-run`'s) attaches the program, or joins the one already there, and
//! passes two descriptors over a Unix socket: the XSKMAP, where the process registers its
//! own AF_XDP sockets (updating a map through a descriptor needs no privilege), and the BPF
//! link, which keeps the program attached for as long as the process holds it, and no
//! longer. Nothing is pinned: this works under `ip netns exec`, which hides bpffs.
//!
//! The exchange, one request a connection: the process sends `attach IFACE MODE\n` (MODE:
//! native, skb, or auto for native then skb); the broker answers `ok MODE\n` with the two
//! descriptors (map, link) attached, or `error TEXT\n`.

use std::io::IoSlice;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use aya::maps::{Map, MapData, XskMap};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

use crate::{AttachMode, XdpError, XskProgram, error_chain};

/// The environment variable naming the broker's abstract socket.
pub const BROKER_VAR: &str = "WIRESPEED_XDP_BROKER";

/// What the broker hands over.
#[derive(Debug)]
pub struct Handover {
    /// Where the program runs: the receiving process binds its sockets for this mode.
    pub mode: AttachMode,
    /// The program's XSKMAP (queue → socket).
    pub xsks: OwnedFd,
    /// The BPF link attaching the program to the interface.
    pub link: OwnedFd,
}

/// A request: the interface, and the attach mode asked for (None: native, else skb).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub iface: String,
    pub mode: Option<AttachMode>,
}

impl Request {
    pub fn to_line(&self) -> String {
        let mode = self.mode.map_or("auto", AttachMode::name);
        format!("attach {} {mode}\n", self.iface)
    }

    pub fn parse(line: &str) -> Result<Request, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let (iface, mode) = match words.as_slice() {
            ["attach", iface, mode] => (*iface, *mode),
            _ => return Err(format!("not a request: {:?}", line.trim_end())),
        };
        Ok(Request {
            iface: iface.to_string(),
            mode: match mode {
                "auto" => None,
                other => Some(mode_named(other)?),
            },
        })
    }
}

fn mode_named(name: &str) -> Result<AttachMode, String> {
    match name {
        "native" => Ok(AttachMode::Native),
        "skb" => Ok(AttachMode::Skb),
        _ => Err(format!("unknown attach mode {name:?}")),
    }
}

/// The mode of an `ok MODE` answer, or the broker's error text.
pub fn parse_answer(line: &str) -> Result<AttachMode, String> {
    let line = line.trim_end();
    match line.split_once(' ') {
        Some(("ok", mode)) => mode_named(mode),
        Some(("error", text)) => Err(text.to_string()),
        _ => Err(format!("the broker answered {line:?}")),
    }
}

/// Sends the answer to a request: the handover's descriptors, or the error.
pub fn send_answer(stream: &UnixStream, answer: Result<Handover, String>) -> std::io::Result<()> {
    match answer {
        Ok(h) => {
            let line = format!("ok {}\n", h.mode.name());
            let fds: [RawFd; 2] = [h.xsks.as_raw_fd(), h.link.as_raw_fd()];
            let cmsg = [ControlMessage::ScmRights(&fds)];
            let iov = [IoSlice::new(line.as_bytes())];
            sendmsg::<()>(stream.as_raw_fd(), &iov, &cmsg, MsgFlags::empty(), None)
                .map_err(std::io::Error::from)?;
            Ok(())
        }
        Err(text) => {
            let line = format!("error {}\n", text.replace('\n', " "));
            std::io::Write::write_all(&mut &*stream, line.as_bytes())
        }
    }
}

/// Attaches our redirect program to `iface` in `mode` (None: native, else skb), or joins
/// the one another process runs there, and takes the descriptors to hand over. The
/// program this process attached detaches when it is dropped here: from then on the
/// link's handed-over descriptor alone holds it.
pub fn prepare(iface: &str, mode: Option<AttachMode>) -> Result<Handover, XdpError> {
    let ifindex =
        wirespeed_xsk::if_index(iface).ok_or_else(|| XdpError::NoInterface(iface.to_string()))?;
    let modes = match mode {
        Some(m) => vec![m],
        None => vec![AttachMode::Native, AttachMode::Skb],
    };
    let mut failed = None;
    for m in modes {
        let program = match XskProgram::attach(iface, m, false) {
            Ok(p) => p,
            Err(e @ (XdpError::ForeignProgram { .. } | XdpError::NoInterface(_))) => return Err(e),
            Err(e) => {
                failed = Some(e);
                continue;
            }
        };
        // Whether attached here or joined, the program is now wirespeed's plain one on
        // the interface: take its map and link by id, as a joining process does.
        let shared = crate::join::shared_program(iface).ok_or_else(|| gone(iface))?;
        let link = crate::join::link_of(shared.id, ifindex).ok_or_else(|| gone(iface))?;
        let map = crate::join::xsk_map_data_of(shared.id)?;
        let xsks = map
            .fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| XdpError::Map {
                map: "xsks",
                reason: e.to_string(),
            })?;
        drop(program);
        return Ok(Handover {
            mode: shared.mode,
            xsks,
            link,
        });
    }
    Err(failed.unwrap_or_else(|| gone(iface)))
}

fn gone(iface: &str) -> XdpError {
    XdpError::Attach {
        iface: iface.to_string(),
        program: crate::join::PROGRAM,
        mode: "any",
        reason: "the program went away as it was attached".to_string(),
    }
}

/// Registers `socket` (an AF_XDP socket) for `queue` in the XSKMAP `xsks` (a handed-over
/// descriptor): from then on the program sends that queue's packets to it.
pub fn register(xsks: &OwnedFd, queue: u32, socket: RawFd) -> Result<(), XdpError> {
    let map_err = |reason: String| XdpError::Map {
        map: "xsks",
        reason,
    };
    let fd = xsks
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| map_err(e.to_string()))?;
    let data = MapData::from_fd(fd).map_err(|e| map_err(error_chain(&e)))?;
    let mut map: XskMap<MapData> =
        XskMap::try_from(Map::XskMap(data)).map_err(|e| map_err(error_chain(&e)))?;
    map.set(queue, socket, 0)
        .map_err(|e| map_err(format!("register queue {queue}: {}", error_chain(&e))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_and_answers_read_back() {
        for mode in [None, Some(AttachMode::Native), Some(AttachMode::Skb)] {
            let r = Request {
                iface: "veth1".to_string(),
                mode,
            };
            assert_eq!(Request::parse(&r.to_line()), Ok(r));
        }
        assert!(Request::parse("attach veth1").is_err());
        assert!(Request::parse("attach veth1 offload\n").is_err());
        assert_eq!(parse_answer("ok skb\n"), Ok(AttachMode::Skb));
        assert_eq!(
            parse_answer("error veth9: no such interface\n"),
            Err("veth9: no such interface".to_string())
        );
        assert!(parse_answer("").is_err());
    }
}
