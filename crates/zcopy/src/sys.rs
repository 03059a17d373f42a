//! The raw system calls of the zero-copy socket features: the socket options std has no
//! safe form of, sends with flags, the error queue's notices, and the receive window that
//! the kernel fills with received pages. All of this crate's unsafe code is here.

use std::io;
use std::os::fd::{AsFd, RawFd};

/// `SO_ZEROCOPY` (asm-generic/socket.h); libc has it only for some architectures.
const SO_ZEROCOPY: libc::c_int = 60;
/// `SO_EE_ORIGIN_ZEROCOPY` and `SO_EE_CODE_ZEROCOPY_COPIED` (linux/errqueue.h).
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

pub(crate) fn set_zerocopy(fd: RawFd) -> io::Result<()> {
    set_int_opt(fd, libc::SOL_SOCKET, SO_ZEROCOPY, 1)
}

pub(crate) fn set_int_opt(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: i32,
) -> io::Result<()> {
    // SAFETY: the option value is a c_int that lives across the call, with its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

pub(crate) fn get_int_opt(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: value and len live across the call; the kernel writes at most len bytes.
    let r = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut i32).cast(), &mut len) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(value)
    }
}

/// One `send(2)` of `buf` with `flags` (MSG_NOSIGNAL added: a closed peer is an error, not
/// a signal). Returns the bytes the kernel took.
pub(crate) fn send(fd: RawFd, buf: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: buf is valid for reads of buf.len() bytes during the call. With MSG_ZEROCOPY
    // the kernel keeps the pages pinned after it returns; the caller does not write them until
    // their completion notice (Sender's account), which is the contract of MSG_ZEROCOPY.
    let r = unsafe {
        libc::send(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            flags | libc::MSG_NOSIGNAL,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// One `recv(2)` into `buf`; 0 is the end of the stream.
pub(crate) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of buf.len() bytes during the call.
    let r = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// `poll(2)` on one descriptor (nix's safe form); returns the events that happened, 0 on
/// timeout or a signal.
pub(crate) fn poll_one(fd: &impl AsFd, events: i16, timeout_ms: u16) -> io::Result<i16> {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::from_bits_retain(events))];
    match poll(&mut fds, PollTimeout::from(timeout_ms)) {
        Ok(0) | Err(nix::errno::Errno::EINTR) => Ok(0),
        Ok(_) => Ok(fds[0].revents().map_or(0, |r| r.bits())),
        Err(e) => Err(io::Error::from(e)),
    }
}

/// What one message of the error queue said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Notice {
    /// Sends `lo..=hi` completed; `copied` when the kernel copied them after all.
    Zerocopy { lo: u32, hi: u32, copied: bool },
    /// An error report that is not a completion (ee_errno, origin).
    Error { errno: u32, origin: u8 },
}

/// Reads one message of the error queue without waiting; `None` when it is empty.
pub(crate) fn read_notice(fd: RawFd) -> io::Result<Option<Notice>> {
    // Room for one cmsg with a sock_extended_err and the offender's address, u64-aligned.
    let mut control = [0u64; 16];
    // SAFETY: msghdr is plain-old-data; all-zero is valid (no name, no iovec).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    // SAFETY: msg points at `control`, which lives across the call, with its length.
    let r = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::WouldBlock {
            Ok(None)
        } else {
            Err(e)
        };
    }
    // SAFETY: msg's control fields describe `control` as the kernel filled it; the CMSG
    // macros stay within msg_controllen.
    let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
    while !cmsg.is_null() {
        // SAFETY: cmsg is non-null and points at a header within `control`.
        let hdr = unsafe { &*cmsg };
        let recverr = (hdr.cmsg_level == libc::SOL_IP && hdr.cmsg_type == libc::IP_RECVERR)
            || (hdr.cmsg_level == libc::SOL_IPV6 && hdr.cmsg_type == libc::IPV6_RECVERR);
        let need = std::mem::size_of::<libc::sock_extended_err>();
        // SAFETY: CMSG_LEN is arithmetic on a length.
        if recverr && hdr.cmsg_len as usize >= unsafe { libc::CMSG_LEN(need as u32) } as usize {
            // SAFETY: the cmsg's length covers a sock_extended_err after its header;
            // read_unaligned makes no claim on alignment.
            let ee: libc::sock_extended_err =
                unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
            return Ok(Some(
                if ee.ee_errno == 0 && ee.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                    Notice::Zerocopy {
                        lo: ee.ee_info,
                        hi: ee.ee_data,
                        copied: ee.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0,
                    }
                } else {
                    Notice::Error {
                        errno: ee.ee_errno,
                        origin: ee.ee_origin,
                    }
                },
            ));
        }
        // SAFETY: as for CMSG_FIRSTHDR: stays within msg_controllen, null at the end.
        cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "error-queue message without an extended error",
    ))
}

/// `struct tcp_zerocopy_receive` (linux/tcp.h, as of Linux 5.11).
#[repr(C)]
#[derive(Default)]
struct TcpZerocopyReceive {
    address: u64,
    length: u32,
    recv_skip_hint: u32,
    inq: u32,
    err: i32,
    copybuf_address: u64,
    copybuf_len: i32,
    flags: u32,
    msg_control: u64,
    msg_controllen: u64,
    msg_flags: u32,
    reserved: u32,
}

/// What one `TCP_ZEROCOPY_RECEIVE` did.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Received {
    /// Bytes mapped at the start of the window (whole pages).
    pub mapped: usize,
    /// Bytes the kernel copied into the copy buffer (the small tail after the pages).
    pub copied: usize,
    /// Bytes the next reader must take with recv(): not page-aligned.
    pub skip: usize,
    /// The stream has ended and everything before its end was read.
    pub eof: bool,
}

/// A window of address space reserved by `mmap` on a TCP socket, into which
/// `TCP_ZEROCOPY_RECEIVE` maps the pages of received payload, read-only.
pub(crate) struct Window {
    ptr: *mut u8,
    len: usize,
    /// Bytes the last `receive` mapped at `ptr`.
    valid: usize,
}

impl Window {
    /// Reserves `len` bytes (a multiple of the page size) on socket `fd`.
    pub(crate) fn reserve(fd: RawFd, len: usize) -> io::Result<Window> {
        // SAFETY: a fresh shared read-only mapping chosen by the kernel; nothing else refers
        // to that range. mmap on a TCP socket only reserves it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Window {
            ptr: ptr.cast(),
            len,
            valid: 0,
        })
    }

    /// Asks the kernel to map received pages into the window (dropping what it mapped
    /// before) and to copy a short unaligned tail into `copybuf`.
    pub(crate) fn receive(&mut self, fd: RawFd, copybuf: &mut [u8]) -> io::Result<Received> {
        let mut zc = TcpZerocopyReceive {
            address: self.ptr as u64,
            length: self.len.min(u32::MAX as usize & !4095) as u32,
            copybuf_address: copybuf.as_mut_ptr() as u64,
            copybuf_len: copybuf.len().min(i32::MAX as usize) as i32,
            ..Default::default()
        };
        let mut len = std::mem::size_of::<TcpZerocopyReceive>() as libc::socklen_t;
        self.valid = 0;
        // SAFETY: zc and len live across the call. The kernel maps pages only into our
        // window (which it zaps first: no slice of it is alive, `&mut self`), and copies at
        // most copybuf_len bytes into copybuf, which is borrowed mutably for the call.
        let r = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_ZEROCOPY_RECEIVE,
                (&mut zc as *mut TcpZerocopyReceive).cast(),
                &mut len,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            // EIO: nothing left to read and the peer's FIN has come.
            return if e.raw_os_error() == Some(libc::EIO) {
                Ok(Received {
                    eof: true,
                    ..Default::default()
                })
            } else {
                Err(e)
            };
        }
        if zc.err != 0 {
            return Err(io::Error::from_raw_os_error(zc.err));
        }
        if zc.copybuf_len < 0 {
            return Err(io::Error::from_raw_os_error(-zc.copybuf_len));
        }
        self.valid = (zc.length as usize).min(self.len);
        Ok(Received {
            mapped: self.valid,
            copied: (zc.copybuf_len as usize).min(copybuf.len()),
            skip: zc.recv_skip_hint as usize,
            eof: false,
        })
    }

    /// The bytes the last `receive` mapped.
    pub(crate) fn mapped(&self) -> &[u8] {
        // SAFETY: the last receive mapped `valid` readable bytes at ptr; they stay mapped
        // until the next receive or drop, both of which need the borrow to have ended.
        unsafe { std::slice::from_raw_parts(self.ptr, self.valid) }
    }
}

impl Drop for Window {
    fn drop(&mut self) {
        // SAFETY: ptr/len are the mapping made in reserve; no slice of it outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Page-aligned memory for the sender's buffers (anonymous, private). MSG_ZEROCOPY hands the
/// kernel the buffer's pages as they are: aligned buffers of whole pages become whole-page
/// fragments, which a receiver on this host can map without copying again.
pub(crate) struct Area {
    ptr: *mut u8,
    len: usize,
}

impl Area {
    pub(crate) fn new(len: usize) -> io::Result<Area> {
        let len = len.max(1).div_ceil(4096) * 4096;
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Area {
            ptr: ptr.cast(),
            len,
        })
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: ptr..ptr+len is our readable, writable mapping (zero-filled at first); the
        // borrow of self keeps it alive and unaliased by &mut.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as for bytes, borrowed mutably through &mut self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for Area {
    fn drop(&mut self) {
        // SAFETY: ptr/len are the mapping made in new; no slice of it outlives self.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}
