//! The tap backend's system calls (its counterpart of packet/mmap.rs): attaching a file
//! descriptor to a tap device with TUNSETIFF, the one call std has no safe form of. Reads
//! and writes go through `std::fs::File`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// Opens tap device `name` (made if there is none: it then lasts as long as the descriptor)
/// as Ethernet frames without the packet-information header, non-blocking.
pub(crate) fn open_tap(name: &str) -> io::Result<File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")?;
    // SAFETY: ifreq is plain-old-data from libc; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    // The name fits with its NUL: PortSpec allows at most 15 bytes.
    for (dst, &src) in req.ifr_name.iter_mut().zip(name.as_bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: req is a valid ifreq that lives across the call; TUNSETIFF reads the name and
    // flags and writes the name back, within the struct.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}
