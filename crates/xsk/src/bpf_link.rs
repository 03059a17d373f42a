//! A reference to the BPF link that holds an XDP program on an interface, taken by the link's
//! global id: no bpffs, no pinning. While any process holds a descriptor of a link the kernel
//! keeps its program attached, and detaches it when the last one closes (on any exit, a crash
//! included). That is how processes share one redirect program, one queue each.
//!
//! aya finds links by id but hands out no descriptor of one it did not create, so the two
//! system calls are here, with the socket's other unsafe code.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// bpf(2) commands (enum bpf_cmd, linux/bpf.h).
const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
const BPF_LINK_GET_FD_BY_ID: libc::c_long = 30;
/// enum bpf_link_type's BPF_LINK_TYPE_XDP.
const BPF_LINK_TYPE_XDP: u32 = 6;

/// What the kernel says of an XDP link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct XdpLinkInfo {
    /// The attached program's id.
    pub prog_id: u32,
    /// The interface the link attaches it to; 0 once that interface is gone.
    pub ifindex: u32,
}

/// A descriptor of the BPF link with id `link_id` and what it attaches, when it is an XDP
/// link. None for a link of another type; ENOENT when no link has the id (any more).
pub fn xdp_link_by_id(link_id: u32) -> io::Result<Option<(OwnedFd, XdpLinkInfo)>> {
    let fd = link_fd_by_id(link_id)?;
    let info = link_info(&fd)?;
    let xdp = XdpLinkInfo {
        prog_id: info.prog_id,
        ifindex: info.xdp_ifindex,
    };
    Ok((info.type_ == BPF_LINK_TYPE_XDP).then_some((fd, xdp)))
}

/// The `link_id` member of union bpf_attr for BPF_LINK_GET_FD_BY_ID (with next_id and
/// open_flags, which must be zero).
#[repr(C)]
struct GetFdById {
    link_id: u32,
    next_id: u32,
    open_flags: u32,
}

/// The `info` member of union bpf_attr for BPF_OBJ_GET_INFO_BY_FD.
#[repr(C)]
struct GetInfoByFd {
    bpf_fd: u32,
    info_len: u32,
    info: u64,
}

/// The head of struct bpf_link_info: type, ids, then the per-type union (8-byte aligned),
/// whose XDP member is the ifindex. Room after it for the union's larger members, zeroed as
/// the kernel requires of what it does not know; it writes back no more than this.
#[repr(C, align(8))]
struct LinkInfo {
    type_: u32,
    id: u32,
    prog_id: u32,
    _pad: u32,
    xdp_ifindex: u32,
    _rest: [u32; 11],
}

fn link_fd_by_id(link_id: u32) -> io::Result<OwnedFd> {
    let attr = GetFdById {
        link_id,
        next_id: 0,
        open_flags: 0,
    };
    // SAFETY: attr is a valid prefix of union bpf_attr for this command, of the size passed,
    // alive through the call; the kernel only reads it.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_LINK_GET_FD_BY_ID,
            &attr as *const GetFdById,
            size_of::<GetFdById>() as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn link_info(fd: &OwnedFd) -> io::Result<LinkInfo> {
    let mut info = LinkInfo {
        type_: 0,
        id: 0,
        prog_id: 0,
        _pad: 0,
        xdp_ifindex: 0,
        _rest: [0; 11],
    };
    let attr = GetInfoByFd {
        bpf_fd: fd.as_raw_fd() as u32,
        info_len: size_of::<LinkInfo>() as u32,
        info: &mut info as *mut LinkInfo as u64,
    };
    // SAFETY: attr is a valid prefix of union bpf_attr for this command, of the size passed;
    // it points at `info`, which has info_len writable bytes and outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            &attr as *const GetInfoByFd,
            size_of::<GetInfoByFd>() as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layouts_are_the_kernel_s() {
        // union bpf_attr's members as the kernel reads them; bpf_link_info's union at 16.
        assert_eq!(size_of::<GetFdById>(), 12);
        assert_eq!(size_of::<GetInfoByFd>(), 16);
        assert_eq!(std::mem::offset_of!(LinkInfo, xdp_ifindex), 16);
        assert_eq!(size_of::<LinkInfo>() % 8, 0);
    }

    #[test]
    fn no_link_has_id_zero() {
        // Ids start at 1; as root ENOENT, otherwise EPERM: an error either way, no panic.
        assert!(xdp_link_by_id(0).is_err());
    }
}
