//! Word from the kernel that some interface changed (rtnetlink's link group): a switch
//! learns that a port went down, came up or went away when it happens, rather than at its
//! next look. The messages are not read for what they say: any of them is the cue to ask
//! about the interfaces that matter ([`crate::link_state`]).

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::sys::socket::{
    AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, bind, recv, setsockopt,
    socket, sockopt,
};

/// rtnetlink's multicast group of link messages (RTMGRP_LINK).
const RTMGRP_LINK: u32 = 1;

/// A socket the kernel tells of every link change in this network namespace.
pub struct LinkEvents {
    socket: OwnedFd,
    buf: Vec<u8>,
}

impl LinkEvents {
    /// Subscribes; `wait` returns at the latest every `timeout`.
    pub fn open(timeout: Duration) -> io::Result<LinkEvents> {
        let socket = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkRoute,
        )?;
        bind(socket.as_raw_fd(), &NetlinkAddr::new(0, RTMGRP_LINK))?;
        setsockopt(
            &socket,
            sockopt::ReceiveTimeout,
            &nix::sys::time::TimeVal::new(timeout.as_secs() as _, timeout.subsec_micros() as _),
        )?;
        Ok(LinkEvents {
            socket,
            buf: vec![0; 16 * 1024],
        })
    }

    /// The socket, for a caller that waits on it with others (it is readable when word
    /// came); read it with [`LinkEvents::take`].
    pub fn fd(&self) -> std::os::fd::RawFd {
        self.socket.as_raw_fd()
    }

    /// Reads every message waiting, without waiting: true when there was any (or the
    /// kernel had more than the socket could hold).
    pub fn take(&mut self) -> io::Result<bool> {
        let mut came = false;
        loop {
            match recv(
                self.socket.as_raw_fd(),
                &mut self.buf,
                MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(_) | Err(nix::errno::Errno::ENOBUFS) => came = true,
                Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => return Ok(came),
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Waits for word of a change: true when some came (or the kernel had more than the
    /// socket could hold: something changed, then, too), false when the timeout passed.
    pub fn wait(&mut self) -> io::Result<bool> {
        match recv(self.socket.as_raw_fd(), &mut self.buf, MsgFlags::empty()) {
            Ok(_) => Ok(true),
            Err(nix::errno::Errno::ENOBUFS) => Ok(true),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}
