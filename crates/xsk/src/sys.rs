//! Thin wrappers over the system calls an AF_XDP socket needs. Every unsafe block of the
//! socket is here, each with its reason.

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The index of a network interface, or None if there is no such interface here.
pub fn if_index(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: c is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (idx != 0).then_some(idx)
}

/// What the kernel says of an interface now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkState {
    /// Administratively up, with a carrier (IFF_UP and IFF_RUNNING; SIOCGIFFLAGS gives the
    /// low 16 flags only, so not IFF_LOWER_UP: IFF_RUNNING follows the carrier once the
    /// kernel's link watch has run, for a veth moments later).
    Up,
    /// There, but down or without a carrier (a veth whose peer is down).
    Down,
    /// No interface has this index any more: it was deleted (or moved to another
    /// namespace).
    Gone,
}

/// The state of the interface with index `ifindex` (six system calls: a few times a second
/// at most). Found by index, so a renamed interface is still itself and a new one of the
/// same name is not. Gone only when the kernel says no interface has the index (ENXIO);
/// when it cannot tell (out of descriptors, say) the link is taken to be up.
pub fn link_state(ifindex: u32) -> LinkState {
    // Twice: renamed between finding its name and asking by it, it is asked again.
    for _ in 0..2 {
        let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
        // SAFETY: name has IF_NAMESIZE bytes, as if_indextoname requires.
        let found = unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) };
        if found.is_null() {
            return match io::Error::last_os_error().raw_os_error() {
                Some(libc::ENXIO) => LinkState::Gone,
                _ => LinkState::Up,
            };
        }
        match interface_flags(&name) {
            Ok(flags) => {
                let up = libc::IFF_UP | libc::IFF_RUNNING;
                return match flags & up == up {
                    true => LinkState::Up,
                    false => LinkState::Down,
                };
            }
            Err(e) if e.raw_os_error() == Some(libc::ENODEV) => continue,
            Err(_) => return LinkState::Up,
        }
    }
    LinkState::Up
}

/// SIOCGIFFLAGS of the interface named `name` (NUL-terminated).
fn interface_flags(name: &[libc::c_char; libc::IF_NAMESIZE]) -> io::Result<i32> {
    let req = interface_request(name, libc::SIOCGIFFLAGS)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member of the union.
    Ok(i32::from(unsafe { req.ifr_ifru.ifru_flags }))
}

/// The MTU of the interface with index `ifindex` now; None when it is gone or cannot be
/// asked (six system calls, as for `link_state`: a few times a second at most).
pub fn link_mtu(ifindex: u32) -> Option<u32> {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: name has IF_NAMESIZE bytes, as if_indextoname requires.
    if unsafe { libc::if_indextoname(ifindex, name.as_mut_ptr()) }.is_null() {
        return None;
    }
    let req = interface_request(&name, libc::SIOCGIFMTU).ok()?;
    // SAFETY: SIOCGIFMTU filled the MTU member of the union.
    u32::try_from(unsafe { req.ifr_ifru.ifru_mtu }).ok()
}

/// An interface ioctl (`request`: SIOCGIFFLAGS, SIOCGIFMTU...) on the interface named `name`
/// (NUL-terminated): the request as the kernel filled it.
fn interface_request(
    name: &[libc::c_char; libc::IF_NAMESIZE],
    request: libc::Ioctl,
) -> io::Result<libc::ifreq> {
    // SAFETY: plain system call; the descriptor is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: an all-zero ifreq is valid; the name is copied in below, NUL-terminated.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    req.ifr_name.copy_from_slice(&name[..libc::IFNAMSIZ]);
    // SAFETY: a SIOCGIF* request reads the name and writes one member of req, which lives
    // through the call.
    let r = unsafe { libc::ioctl(socket.as_raw_fd(), request, &mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(req)
}

/// How many queues an interface has (the larger of its RX and TX queue counts), read from
/// sysfs; 1 when sysfs does not say.
pub fn queue_count(name: &str) -> u32 {
    let (rx, tx) = queue_counts(name);
    rx.max(tx).max(1)
}

/// How many receive queues an interface has, read from sysfs; 1 when sysfs does not say.
pub fn rx_queue_count(name: &str) -> u32 {
    queue_counts(name).0.max(1)
}

/// The interface's (RX, TX) queue counts as sysfs lists them; (0, 0) when it does not.
fn queue_counts(name: &str) -> (u32, u32) {
    let Ok(dir) = std::fs::read_dir(format!("/sys/class/net/{name}/queues")) else {
        return (0, 0);
    };
    let (mut rx, mut tx) = (0u32, 0u32);
    for e in dir.flatten() {
        let n = e.file_name();
        let n = n.to_string_lossy();
        if n.starts_with("rx-") {
            rx += 1;
        } else if n.starts_with("tx-") {
            tx += 1;
        }
    }
    (rx, tx)
}

pub(crate) fn xdp_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call; the returned descriptor is owned from here on.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn set_option<T>(fd: &OwnedFd, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: value points to size_of::<T>() readable bytes for the duration of the call.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads a socket option into a zeroed `T`; returns it with the length the kernel wrote.
pub(crate) fn get_option<T: Copy>(fd: RawFd, level: i32, name: i32) -> io::Result<(T, usize)> {
    // SAFETY: T is plain-old-data from libc (all-zero is a valid value).
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: value has room for len bytes; the kernel writes at most that many.
    let r = unsafe { libc::getsockopt(fd, level, name, (&mut value as *mut T).cast(), &mut len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((value, len as usize))
}

/// The cookie of the network namespace this thread is in (SO_NETNS_COOKIE): what BPF
/// programs that see every namespace (tracepoints) tell this one's devices apart by.
pub fn netns_cookie() -> io::Result<u64> {
    const SO_NETNS_COOKIE: i32 = 71;
    let fd = xdp_socket()?;
    let (cookie, _) = get_option::<u64>(fd.as_raw_fd(), libc::SOL_SOCKET, SO_NETNS_COOKIE)?;
    Ok(cookie)
}

/// The inode of a socket (what /proc/PID/fd links name it by); 0 if fstat fails.
pub(crate) fn socket_inode(fd: &OwnedFd) -> u64 {
    // SAFETY: an all-zero stat is a valid value for fstat to overwrite.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is writable and outlives the call; fd is open.
    let r = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    if r < 0 { 0 } else { st.st_ino }
}

/// A shared mapping of one of the socket's rings.
pub(crate) struct RingMap {
    pub ptr: *mut u8,
    pub len: usize,
}

// SAFETY: the mapping is shared memory reached only through the ring protocol's atomics.
unsafe impl Send for RingMap {}
// SAFETY: as above.
unsafe impl Sync for RingMap {}

impl Drop for RingMap {
    fn drop(&mut self) {
        // SAFETY: exactly the region mmap returned; the last ring using it is gone.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

pub(crate) fn map_ring(fd: &OwnedFd, len: usize, pgoff: u64) -> io::Result<RingMap> {
    // SAFETY: maps a ring the kernel allocated for this socket; nothing else is touched.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd.as_raw_fd(),
            pgoff as libc::off_t,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(RingMap { ptr: p.cast(), len })
}

/// A socket closed a moment ago on the same queue lets go of it only when a kernel work item
/// runs (xp_release_deferred), and bind answers EBUSY until then: on a busy host that takes
/// milliseconds, so a program started right after another would fail. Retry for this long.
const BIND_BUSY_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

pub(crate) fn bind_xdp(fd: &OwnedFd, addr: &libc::sockaddr_xdp) -> io::Result<()> {
    let until = std::time::Instant::now() + BIND_BUSY_RETRY;
    loop {
        match bind_xdp_once(fd, addr) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY) && std::time::Instant::now() < until =>
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            result => return result,
        }
    }
}

fn bind_xdp_once(fd: &OwnedFd, addr: &libc::sockaddr_xdp) -> io::Result<()> {
    // SAFETY: addr is a valid sockaddr_xdp of the size passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (addr as *const libc::sockaddr_xdp).cast(),
            size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Asks the kernel to process the TX ring (copy mode and need_wakeup send only on a kick).
pub(crate) fn kick_tx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length send with no buffer; the kernel reads the TX ring instead.
    let r = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Wakes the kernel's receive processing (need_wakeup on the fill ring, busy polling).
pub(crate) fn kick_rx(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length receive with no buffer; the kernel fills the RX ring instead.
    let r = unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// poll() on one descriptor; returns the revents.
pub(crate) fn poll_one(fd: RawFd, events: i16, timeout_ms: i32) -> io::Result<i16> {
    let mut p = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let r = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(p.revents)
}

/// poll() on several sockets for POLLIN; returns how many are ready.
pub fn poll_rx_many(fds: &[RawFd], timeout_ms: i32) -> io::Result<usize> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: p is a valid array of p.len() pollfds.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_up_and_an_unused_index_is_gone() {
        let lo = if_index("lo").expect("lo");
        assert_eq!(link_state(lo), LinkState::Up);
        assert_eq!(link_state(u32::MAX - 7), LinkState::Gone);
    }
}
