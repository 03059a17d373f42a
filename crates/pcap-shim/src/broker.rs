//! Asking `wirespeed pcap-run`'s broker for our redirect program on an interface, for a
//! process that may not load one itself (dumpcap keeps only CAP_NET_RAW and CAP_NET_ADMIN).
//! The exchange is `wirespeed_xdp::handover`'s; this side receives the descriptors.

use std::io::{IoSliceMut, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
use wirespeed_xdp::AttachMode;
use wirespeed_xdp::handover::{Handover, Request, parse_answer};

/// The broker's abstract socket name, when a broker runs for this process.
pub fn broker() -> Option<String> {
    std::env::var(wirespeed_xdp::handover::BROKER_VAR)
        .ok()
        .filter(|b| !b.is_empty())
}

/// Asks the broker `name` to attach (or join) the program on `iface` in `mode` (None:
/// native, else skb) and hand it over.
pub fn ask(name: &str, iface: &str, mode: Option<AttachMode>) -> Result<Handover, String> {
    let failed =
        |what: &str, e: &dyn std::fmt::Display| format!("pcap-run's broker {name}: {what}: {e}");
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).map_err(|e| failed("name", &e))?;
    let mut stream = UnixStream::connect_addr(&addr).map_err(|e| failed("connect", &e))?;
    let request = Request {
        iface: iface.to_string(),
        mode,
    };
    stream
        .write_all(request.to_line().as_bytes())
        .map_err(|e| failed("send", &e))?;
    let (line, fds) = receive(&stream).map_err(|e| failed("receive", &e))?;
    let mode = parse_answer(&line)?;
    let mut fds = fds.into_iter();
    match (fds.next(), fds.next()) {
        (Some(xsks), Some(link)) => Ok(Handover { mode, xsks, link }),
        _ => Err(failed("answer", &"no descriptors came with it")),
    }
}

/// One message: its text and the descriptors that came with it.
fn receive(stream: &UnixStream) -> std::io::Result<(String, Vec<OwnedFd>)> {
    let mut buf = [0u8; 1024];
    let mut space = nix::cmsg_space!([RawFd; 2]);
    let mut fds = Vec::new();
    let n = {
        let mut iov = [IoSliceMut::new(&mut buf)];
        let msg = recvmsg::<()>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .map_err(std::io::Error::from)?;
        for cmsg in msg.cmsgs().map_err(std::io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                // SAFETY: SCM_RIGHTS descriptors are new in this process, each ours alone.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        msg.bytes
    };
    Ok((String::from_utf8_lossy(&buf[..n]).into_owned(), fds))
}
