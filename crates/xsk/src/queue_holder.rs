//! Who holds a queue: when bind says EBUSY, another AF_XDP socket is bound to that queue of
//! that interface, and the user wants to know whose it is.
//!
//! The kernel says which socket (its inode) through the AF_XDP sock_diag interface (netlink,
//! per network namespace, so it sees this namespace's sockets: the ones that can be bound
//! to this namespace's interfaces). Kernels built without it (CONFIG_XDP_SOCKETS_DIAG) say
//! nothing; then the processes of this namespace that hold AF_XDP sockets are the candidates,
//! narrowed to those whose command line names the queue (`IFACE@Q`, as wirespeed's port
//! specs do). A socket's process is the one whose /proc/PID/fd links to `socket:[INODE]`.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// A process, by pid and name (/proc/PID/comm).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Process {
    pub pid: u32,
    pub name: String,
}

/// The processes that hold `queue` of the interface with index `ifindex`, as far as can be
/// told: one when the kernel says (or only one can be it), several when it may be any of
/// them, none when nothing was found. `own_inode`, the socket that failed to bind, is not
/// a candidate (nor, where the kernel cannot say, any socket of this process).
pub fn queue_holders(iface: &str, ifindex: u32, queue: u32, own_inode: u64) -> Vec<Process> {
    match bound_sockets() {
        Ok(sockets) => {
            let inodes: Vec<u64> = sockets
                .iter()
                .filter(|s| s.ifindex == ifindex && s.queue == queue)
                .map(|s| s.inode)
                .filter(|&i| i != own_inode)
                .collect();
            let mut holders = Vec::new();
            for inode in inodes {
                for p in processes_with(|_, ino| ino == inode) {
                    if !holders.contains(&p) {
                        holders.push(p);
                    }
                }
            }
            holders
        }
        Err(_) => guess_holders(iface, queue),
    }
}

/// How `XskError::QueueTaken` names the holders.
pub(crate) fn holders_text(holders: &[Process]) -> String {
    let named = |p: &Process| format!("process {} ({})", p.pid, p.name);
    match holders {
        [] => "another AF_XDP socket is bound there".to_string(),
        [one] => format!("{} has an AF_XDP socket there", named(one)),
        many => format!(
            "another AF_XDP socket is bound there, of one of: {}",
            many.iter().map(named).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// Without sock_diag: the other processes of this namespace with an AF_XDP socket, and of
/// those the ones whose command line names the queue when there are any. This process is
/// left out: its own unbound socket and its other ones (a group's other queues) would make
/// every guess a tie, and it knows what it holds itself.
fn guess_holders(iface: &str, queue: u32) -> Vec<Process> {
    let me = std::process::id();
    let ours = std::fs::read_link("/proc/self/ns/net").ok();
    let here: Vec<Process> = processes_with(|fd, _| protocol_name(fd).as_deref() == Some("XDP"))
        .into_iter()
        .filter(|p| p.pid != me)
        .filter(|p| std::fs::read_link(format!("/proc/{}/ns/net", p.pid)).ok() == ours)
        .collect();
    let named: Vec<Process> = here
        .iter()
        .filter(|p| names_queue(&command_line(p.pid), iface, queue))
        .cloned()
        .collect();
    if named.is_empty() { here } else { named }
}

/// Whether one of the arguments is a port spec of this queue: ends with `IFACE@Q` or
/// `IFACE@all` (the queue 0 of a bare `xdp:IFACE` is too loose to count).
fn names_queue(args: &[String], iface: &str, queue: u32) -> bool {
    let one = format!("{iface}@{queue}");
    let all = format!("{iface}@all");
    args.iter().any(|a| {
        [&one, &all].iter().any(|s| {
            a.strip_suffix(s.as_str())
                .is_some_and(|head| head.is_empty() || head.ends_with([':', '=']))
        })
    })
}

fn command_line(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The socket inode of an fd link's target, `socket:[INODE]`.
fn socket_inode(target: &Path) -> Option<u64> {
    target
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

/// The processes with an open socket that `wanted` accepts (given the /proc fd link to it
/// and its inode), in pid order.
fn processes_with(mut wanted: impl FnMut(&Path, u64) -> bool) -> Vec<Process> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    pids.sort_unstable();
    let mut found = Vec::new();
    for pid in pids {
        let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            let path = fd.path();
            std::fs::read_link(&path)
                .ok()
                .and_then(|t| socket_inode(&t))
                .is_some_and(|ino| wanted(&path, ino))
        });
        if holds {
            let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .map_or_else(|_| "?".to_string(), |c| c.trim().to_string());
            found.push(Process { pid, name });
        }
    }
    found
}

/// A socket's `system.sockprotoname` attribute ("XDP" for AF_XDP), through a /proc fd link
/// to it.
fn protocol_name(path: &Path) -> Option<String> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut buf = [0u8; 32];
    // SAFETY: c is NUL-terminated and buf has buf.len() writable bytes, both alive through
    // the call; getxattr writes at most that many.
    let n = unsafe {
        libc::getxattr(
            c.as_ptr(),
            c"system.sockprotoname".as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    };
    let n = usize::try_from(n).ok()?;
    let name = buf.get(..n)?;
    let name = name.split(|&b| b == 0).next()?;
    Some(String::from_utf8_lossy(name).into_owned())
}

/// An AF_XDP socket bound to a queue, as sock_diag reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct BoundSocket {
    inode: u64,
    ifindex: u32,
    queue: u32,
}

// linux/sock_diag.h, linux/xdp_diag.h, linux/netlink.h.
const NETLINK_SOCK_DIAG: i32 = 4;
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_DUMP: u16 = 0x300;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const XDP_SHOW_INFO: u32 = 1;
const XDP_DIAG_INFO: u16 = 1;
/// struct nlmsghdr.
const NLMSG_HDR: usize = 16;
/// struct xdp_diag_msg: family, type, pad, inode, cookie[2].
const XDP_DIAG_MSG: usize = 16;

/// struct nlmsghdr followed by struct xdp_diag_req.
#[repr(C)]
struct DiagRequest {
    len: u32,
    kind: u16,
    flags: u16,
    seq: u32,
    pid: u32,
    family: u8,
    protocol: u8,
    pad: u16,
    ino: u32,
    show: u32,
    cookie: [u32; 2],
}

/// Every bound AF_XDP socket of this network namespace, from sock_diag. Err where the kernel
/// has no AF_XDP sock_diag (ENOENT) or it fails otherwise.
fn bound_sockets() -> io::Result<Vec<BoundSocket>> {
    // SAFETY: plain system call; the descriptor is owned from here on.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let req = DiagRequest {
        len: size_of::<DiagRequest>() as u32,
        kind: SOCK_DIAG_BY_FAMILY,
        flags: NLM_F_REQUEST | NLM_F_DUMP,
        seq: 1,
        pid: 0,
        family: libc::AF_XDP as u8,
        protocol: 0,
        pad: 0,
        ino: 0,
        show: XDP_SHOW_INFO,
        // Any socket (INET_DIAG_NOCOOKIE).
        cookie: [u32::MAX; 2],
    };
    // SAFETY: req is a valid buffer of the length passed, alive through the call.
    let sent = unsafe {
        libc::send(
            sock.as_raw_fd(),
            (&req as *const DiagRequest).cast(),
            size_of::<DiagRequest>(),
            0,
        )
    };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sockets = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    loop {
        // SAFETY: buf has buf.len() writable bytes, alive through the call.
        let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        match parse_dump(&buf[..n as usize], &mut sockets)? {
            true => return Ok(sockets),
            false if n == 0 => return Ok(sockets),
            false => {}
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Netlink aligns messages and attributes to 4 bytes.
fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Reads one datagram of the dump into `out`; true once it holds the end (NLMSG_DONE). An
/// error message (ENOENT: no AF_XDP sock_diag in this kernel) is the error.
fn parse_dump(mut b: &[u8], out: &mut Vec<BoundSocket>) -> io::Result<bool> {
    let bad = || io::Error::new(io::ErrorKind::InvalidData, "malformed sock_diag reply");
    while b.len() >= NLMSG_HDR {
        let len = u32_at(b, 0).ok_or_else(bad)? as usize;
        let kind = u16_at(b, 4).ok_or_else(bad)?;
        if len < NLMSG_HDR || len > b.len() {
            return Err(bad());
        }
        let body = &b[NLMSG_HDR..len];
        match kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let errno = u32_at(body, 0).ok_or_else(bad)? as i32;
                return Err(io::Error::from_raw_os_error(-errno));
            }
            SOCK_DIAG_BY_FAMILY => {
                if let Some(s) = parse_socket(body) {
                    out.push(s);
                }
            }
            _ => {}
        }
        b = b.get(align4(len)..).unwrap_or_default();
    }
    Ok(false)
}

/// One struct xdp_diag_msg and its attributes: the socket, if its XDP_DIAG_INFO is there
/// (the kernel leaves it out of an unbound socket).
fn parse_socket(body: &[u8]) -> Option<BoundSocket> {
    let inode = u32_at(body, 4)? as u64;
    let mut attrs = body.get(XDP_DIAG_MSG..)?;
    while attrs.len() >= 4 {
        let len = u16_at(attrs, 0)? as usize;
        let kind = u16_at(attrs, 2)?;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if kind == XDP_DIAG_INFO {
            return Some(BoundSocket {
                inode,
                ifindex: u32_at(attrs, 4)?,
                queue: u32_at(attrs, 8)?,
            });
        }
        attrs = attrs.get(align4(len)..).unwrap_or_default();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nlmsg(kind: u16, body: &[u8]) -> Vec<u8> {
        let len = (NLMSG_HDR + body.len()) as u32;
        let mut m = Vec::new();
        m.extend_from_slice(&len.to_ne_bytes());
        m.extend_from_slice(&kind.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(body);
        while m.len() % 4 != 0 {
            m.push(0);
        }
        m
    }

    fn diag_msg(inode: u32, info: Option<(u32, u32)>) -> Vec<u8> {
        let mut b = vec![libc::AF_XDP as u8, 3, 0, 0];
        b.extend_from_slice(&inode.to_ne_bytes());
        b.extend_from_slice(&[0; 8]);
        // A UID attribute first, then the info.
        b.extend_from_slice(&8u16.to_ne_bytes());
        b.extend_from_slice(&2u16.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        if let Some((ifindex, queue)) = info {
            b.extend_from_slice(&12u16.to_ne_bytes());
            b.extend_from_slice(&XDP_DIAG_INFO.to_ne_bytes());
            b.extend_from_slice(&ifindex.to_ne_bytes());
            b.extend_from_slice(&queue.to_ne_bytes());
        }
        b
    }

    #[test]
    fn a_dump_gives_each_bound_socket_its_queue() {
        let mut d = nlmsg(SOCK_DIAG_BY_FAMILY, &diag_msg(77, Some((5, 1))));
        d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, &diag_msg(78, None)));
        d.extend(nlmsg(SOCK_DIAG_BY_FAMILY, &diag_msg(79, Some((5, 0)))));
        let mut out = Vec::new();
        assert!(!parse_dump(&d, &mut out).unwrap());
        let done = nlmsg(NLMSG_DONE, &0u32.to_ne_bytes());
        assert!(parse_dump(&done, &mut out).unwrap());
        let at = |inode, ifindex, queue| BoundSocket {
            inode,
            ifindex,
            queue,
        };
        assert_eq!(out, [at(77, 5, 1), at(79, 5, 0)]);
    }

    #[test]
    fn an_error_reply_and_a_lying_length_are_errors_not_panics() {
        let e = nlmsg(NLMSG_ERROR, &(-libc::ENOENT).to_ne_bytes());
        let err = parse_dump(&e, &mut Vec::new()).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
        let mut lying = nlmsg(SOCK_DIAG_BY_FAMILY, &diag_msg(1, Some((1, 1))));
        lying[0] = 200;
        assert!(parse_dump(&lying, &mut Vec::new()).is_err());
        // Truncated attribute: no socket, no panic.
        let mut short = diag_msg(1, Some((1, 1)));
        short.truncate(short.len() - 6);
        assert_eq!(parse_socket(&short), None);
    }

    #[test]
    fn a_command_line_names_a_queue_by_its_port_spec() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let run = args(&["wirespeed", "bench", "rxdrop", "--port", "xdp:veth1@1"]);
        assert!(names_queue(&run, "veth1", 1));
        assert!(!names_queue(&run, "veth1", 0));
        assert!(
            !names_queue(&run, "eth1", 1),
            "another interface's name ends so"
        );
        let switch = args(&["wirespeed", "switch", "--port", "2=xdp:veth1@all"]);
        assert!(names_queue(&switch, "veth1", 3));
        assert!(names_queue(&args(&["veth1@0"]), "veth1", 0));
        assert!(!names_queue(&args(&["xdpsock", "-i", "veth1"]), "veth1", 0));
    }

    #[test]
    fn the_holders_are_named() {
        let p = |pid, name: &str| Process {
            pid,
            name: name.to_string(),
        };
        assert_eq!(
            holders_text(&[p(12, "tcpdump")]),
            "process 12 (tcpdump) has an AF_XDP socket there"
        );
        assert_eq!(holders_text(&[]), "another AF_XDP socket is bound there");
        assert_eq!(
            holders_text(&[p(1, "a"), p(2, "b")]),
            "another AF_XDP socket is bound there, of one of: process 1 (a), process 2 (b)"
        );
    }

    #[test]
    fn an_af_xdp_socket_is_told_from_others_and_found_in_its_process() {
        // An AF_XDP socket needs CAP_NET_RAW: the tests run as root.
        let xsk = crate::sys::xdp_socket().unwrap();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let link = |fd: i32| std::path::PathBuf::from(format!("/proc/self/fd/{fd}"));
        let (xsk_link, udp_link) = (link(xsk.as_raw_fd()), link(udp.as_raw_fd()));
        assert_eq!(protocol_name(&xsk_link).as_deref(), Some("XDP"));
        assert_eq!(protocol_name(&udp_link).as_deref(), Some("UDP"));
        let inode = socket_inode(&std::fs::read_link(&xsk_link).unwrap()).unwrap();
        let me = std::process::id();
        let found = processes_with(|_, i| i == inode);
        assert!(found.iter().any(|p| p.pid == me), "{found:?}");
    }
}
