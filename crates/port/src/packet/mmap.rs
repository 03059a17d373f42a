//! The packet backend's contact with the kernel: the AF_PACKET socket calls and the one mapping
//! of its TPACKET_V3 rings. Every `unsafe` of the backend lives in this file; the rest of
//! `packet` sees only bounds-checked, panic-free accessors.
//!
//! Headers in the mapping are shared with the kernel, so every header field is read and written
//! as an atomic: the status words with acquire / release ordering (the kernel's
//! `__packet_get_status` / `__packet_set_status` pair them with smp_rmb / smp_wmb), the other
//! fields relaxed, ordered by the status word that hands the header over.

use std::ffi::CString;
use std::io;
use std::mem::{offset_of, size_of};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};
use std::time::Duration;

/// `enum tpacket_versions`: TPACKET_V1 = 0, V2 = 1, V3 = 2.
pub(crate) const TPACKET_V3: libc::c_int = 2;

/// BLK_HDR_LEN: `struct tpacket_block_desc` aligned to 8; the first packet of a block follows.
pub(crate) const BLOCK_DESC_LEN: usize = size_of::<libc::tpacket_block_desc>();

/// `struct tpacket3_hdr`, the header in front of every packet (rx) and in every frame (tx).
pub(crate) const FRAME_HDR_LEN: usize = size_of::<libc::tpacket3_hdr>();

/// Where packet data starts in a transmit frame. The kernel's `tpacket_parse_header` (without
/// PACKET_TX_HAS_OFF) takes the data at `frame + po->tp_hdrlen - sizeof(struct sockaddr_ll)`,
/// and `tp_hdrlen` is TPACKET3_HDRLEN for V3: 68 - 20 = 48. `tpacket_fill_skb` then copies
/// `tp_len` bytes from there, and `size_max` is `frame_size - 48` (capped at MTU + 14 + 4).
pub(crate) const TX_DATA_OFFSET: usize = libc::TPACKET3_HDRLEN - size_of::<libc::sockaddr_ll>();

const BLOCK_HDR: usize = offset_of!(libc::tpacket_block_desc, hdr);
const BLOCK_STATUS: usize = BLOCK_HDR + offset_of!(libc::tpacket_hdr_v1, block_status);
const BLOCK_NUM_PKTS: usize = BLOCK_HDR + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const BLOCK_FIRST_PKT: usize = BLOCK_HDR + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);

const FRAME_NEXT_OFFSET: usize = offset_of!(libc::tpacket3_hdr, tp_next_offset);
const FRAME_SNAPLEN: usize = offset_of!(libc::tpacket3_hdr, tp_snaplen);
const FRAME_LEN: usize = offset_of!(libc::tpacket3_hdr, tp_len);
const FRAME_STATUS: usize = offset_of!(libc::tpacket3_hdr, tp_status);
const FRAME_SEC: usize = offset_of!(libc::tpacket3_hdr, tp_sec);
const FRAME_NSEC: usize = offset_of!(libc::tpacket3_hdr, tp_nsec);
const FRAME_MAC: usize = offset_of!(libc::tpacket3_hdr, tp_mac);
const FRAME_HV1: usize = offset_of!(libc::tpacket3_hdr, hv1);
const FRAME_VLAN_TCI: usize = FRAME_HV1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tci);
const FRAME_VLAN_TPID: usize = FRAME_HV1 + offset_of!(libc::tpacket_hdr_variant1, tp_vlan_tpid);
/// The `sockaddr_ll` follows the header at TPACKET_ALIGN(sizeof(tpacket3_hdr)) (48).
const FRAME_PKTTYPE: usize = FRAME_HDR_LEN + offset_of!(libc::sockaddr_ll, sll_pkttype);

// The UAPI layout this file is written against (linux/if_packet.h).
const _: () = assert!(BLOCK_DESC_LEN == 48 && FRAME_HDR_LEN == 48 && TX_DATA_OFFSET == 48);
const _: () = assert!(BLOCK_STATUS == 8 && BLOCK_NUM_PKTS == 12 && BLOCK_FIRST_PKT == 16);
const _: () = assert!(FRAME_STATUS == 20 && FRAME_MAC == 24 && FRAME_VLAN_TPID == 36);

/// The counts of a receive block the kernel has handed to user space.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BlockHeader {
    pub num_pkts: u32,
    /// Offset of the first packet header from the block start.
    pub first_pkt: u32,
}

/// The fields of a received packet's `tpacket3_hdr`, unvalidated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RxFrameHeader {
    pub next_offset: u32,
    pub snaplen: u32,
    /// Length on the wire (more than `snaplen` when the frame cut the packet).
    pub len: u32,
    /// The kernel's receive timestamp (TPACKET_V3 gives nanoseconds).
    pub sec: u32,
    pub nsec: u32,
    pub status: u32,
    /// Offset of the packet data from the header.
    pub mac: u16,
    pub vlan_tci: u32,
    pub vlan_tpid: u16,
}

/// The shared mapping of the receive ring (blocks) followed by the transmit ring (frames).
/// Every offset is checked against the mapping; nothing here can read or write outside it.
pub(crate) struct RingMap {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is owned by one RingMap and moves with it; the port that holds it has
// one owner thread at a time (the Port contract), so moving it to another thread is sound.
unsafe impl Send for RingMap {}

impl RingMap {
    /// Maps `len` bytes of the socket's rings (rx ring first, then tx ring, as the kernel's
    /// `packet_mmap` lays them out). A zero length maps nothing.
    pub(crate) fn map(fd: BorrowedFd<'_>, len: usize) -> io::Result<RingMap> {
        if len == 0 {
            return Ok(RingMap {
                base: NonNull::dangling(),
                len: 0,
            });
        }
        // SAFETY: a fresh shared mapping chosen by the kernel (addr NULL); no Rust object
        // aliases it. The result is checked for MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base =
            NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned NULL"))?;
        Ok(RingMap { base, len })
    }

    fn in_bounds(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    fn atomic_u32(&self, off: usize) -> Option<&AtomicU32> {
        if !off.is_multiple_of(4) || !self.in_bounds(off, 4) {
            return None;
        }
        // SAFETY: in bounds and 4-aligned (the mapping is page-aligned); AtomicU32 has the
        // layout of u32; the mapping outlives &self; the kernel writes it concurrently, which
        // atomic access permits.
        Some(unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU32>() })
    }

    fn atomic_u16(&self, off: usize) -> Option<&AtomicU16> {
        if !off.is_multiple_of(2) || !self.in_bounds(off, 2) {
            return None;
        }
        // SAFETY: as in atomic_u32, for a 2-aligned u16.
        Some(unsafe { &*self.base.as_ptr().add(off).cast::<AtomicU16>() })
    }

    fn load(&self, off: usize, order: Ordering) -> Option<u32> {
        self.atomic_u32(off).map(|a| a.load(order))
    }

    fn store(&self, off: usize, value: u32, order: Ordering) -> bool {
        self.atomic_u32(off)
            .map(|a| a.store(value, order))
            .is_some()
    }

    /// The header of the receive block at `block` if the kernel has handed it to user space
    /// (TP_STATUS_USER). The acquire load makes the block's packets visible.
    pub(crate) fn user_block(&self, block: usize) -> Option<BlockHeader> {
        let status = self.load(block + BLOCK_STATUS, Ordering::Acquire)?;
        if status & libc::TP_STATUS_USER == 0 {
            return None;
        }
        Some(BlockHeader {
            num_pkts: self.load(block + BLOCK_NUM_PKTS, Ordering::Relaxed)?,
            first_pkt: self.load(block + BLOCK_FIRST_PKT, Ordering::Relaxed)?,
        })
    }

    /// Hands the receive block at `block` back to the kernel. Release: every read of the
    /// block's packets happens before the kernel may refill it.
    pub(crate) fn give_block_to_kernel(&self, block: usize) {
        self.store(
            block + BLOCK_STATUS,
            libc::TP_STATUS_KERNEL,
            Ordering::Release,
        );
    }

    /// The header of a received packet at `frame` (inside a block user space owns).
    pub(crate) fn rx_frame(&self, frame: usize) -> Option<RxFrameHeader> {
        if !self.in_bounds(frame, FRAME_HDR_LEN) {
            return None;
        }
        let relaxed = Ordering::Relaxed;
        Some(RxFrameHeader {
            next_offset: self.load(frame + FRAME_NEXT_OFFSET, relaxed)?,
            snaplen: self.load(frame + FRAME_SNAPLEN, relaxed)?,
            len: self.load(frame + FRAME_LEN, relaxed)?,
            sec: self.load(frame + FRAME_SEC, relaxed)?,
            nsec: self.load(frame + FRAME_NSEC, relaxed)?,
            status: self.load(frame + FRAME_STATUS, relaxed)?,
            mac: self.atomic_u16(frame + FRAME_MAC)?.load(relaxed),
            vlan_tci: self.load(frame + FRAME_VLAN_TCI, relaxed)?,
            vlan_tpid: self.atomic_u16(frame + FRAME_VLAN_TPID)?.load(relaxed),
        })
    }

    /// True when the received packet at `frame` is one the interface sent (the packet type
    /// in the `sockaddr_ll` after the header is PACKET_OUTGOING).
    pub(crate) fn rx_outgoing(&self, frame: usize) -> Option<bool> {
        // sll_pkttype and sll_halen share a 2-aligned u16; the type is the first byte.
        let both = self
            .atomic_u16(frame + FRAME_PKTTYPE)?
            .load(Ordering::Relaxed);
        Some(both.to_ne_bytes()[0] == libc::PACKET_OUTGOING)
    }

    /// The status of the transmit frame at `frame`; acquire, so a frame seen available again
    /// is no longer read by the kernel.
    pub(crate) fn tx_status(&self, frame: usize) -> Option<u32> {
        self.load(frame + FRAME_STATUS, Ordering::Acquire)
    }

    /// The length written into the transmit frame at `frame`.
    pub(crate) fn tx_len(&self, frame: usize) -> Option<u32> {
        self.load(frame + FRAME_LEN, Ordering::Relaxed)
    }

    /// Queues the transmit frame at `frame` with `len` bytes of data. Release: the data and
    /// the length are visible before the kernel sees TP_STATUS_SEND_REQUEST.
    pub(crate) fn tx_submit(&self, frame: usize, len: u32) -> bool {
        // A V3 tx frame with tp_next_offset != 0 is rejected ("variable sized slot").
        self.store(frame + FRAME_NEXT_OFFSET, 0, Ordering::Relaxed)
            && self.store(frame + FRAME_LEN, len, Ordering::Relaxed)
            && self.store(
                frame + FRAME_STATUS,
                libc::TP_STATUS_SEND_REQUEST,
                Ordering::Release,
            )
    }

    /// Marks the transmit frame at `frame` available (not to be sent).
    pub(crate) fn tx_make_available(&self, frame: usize) {
        self.store(
            frame + FRAME_STATUS,
            libc::TP_STATUS_AVAILABLE,
            Ordering::Release,
        );
    }

    /// `len` bytes at `off`, or None when the range leaves the mapping. The caller hands out
    /// only ranges the ring protocol gives to user space (a block in TP_STATUS_USER, a frame
    /// not queued for sending), so the kernel does not write them while the slice lives.
    pub(crate) fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        if !self.in_bounds(off, len) {
            return None;
        }
        // SAFETY: in bounds of a live mapping borrowed for the slice's lifetime; u8 has no
        // alignment or validity requirement; the kernel leaves user-owned ranges alone.
        Some(unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(off), len) })
    }

    /// As `bytes`, writable.
    pub(crate) fn bytes_mut(&mut self, off: usize, len: usize) -> Option<&mut [u8]> {
        if !self.in_bounds(off, len) {
            return None;
        }
        // SAFETY: as in `bytes`; &mut self makes this the only slice of the mapping.
        Some(unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(off), len) })
    }

    /// Copies `len` bytes from `src` to `dst` inside the mapping (ranges may overlap).
    pub(crate) fn copy_within(&mut self, src: usize, dst: usize, len: usize) -> bool {
        if !self.in_bounds(src, len) || !self.in_bounds(dst, len) {
            return false;
        }
        // SAFETY: both ranges are in bounds of the live mapping; ptr::copy allows overlap;
        // &mut self excludes any other slice of the mapping.
        unsafe {
            let base = self.base.as_ptr();
            std::ptr::copy(base.add(src), base.add(dst), len);
        }
        true
    }
}

impl Drop for RingMap {
    fn drop(&mut self) {
        if self.len != 0 {
            // SAFETY: base/len are exactly the mapping made in `map`, unmapped once, here; no
            // slice of it outlives &mut self.
            unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        }
    }
}

/// The kernel's index of interface `name`, or None when there is no such interface.
pub(crate) fn interface_index(name: &str) -> Option<u32> {
    let name = CString::new(name).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

/// A raw AF_PACKET socket with no protocol yet: it receives nothing until `bind_interface`
/// names the interface and the protocol, so no other interface's packets reach the ring.
pub(crate) fn packet_socket() -> io::Result<OwnedFd> {
    let kind = libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK;
    // SAFETY: plain syscall with integer arguments.
    let fd = unsafe { libc::socket(libc::AF_PACKET, kind, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor this function owns and hands over exactly once.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt_raw<T>(fd: BorrowedFd<'_>, option: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` points at a live T of the size passed; the kernel only reads it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            option,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// setsockopt(SOL_PACKET, `option`, int `value`).
pub(crate) fn set_option(
    fd: BorrowedFd<'_>,
    option: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    setsockopt_raw(fd, option, &value)
}

/// PACKET_RX_RING or PACKET_TX_RING with a V3 request.
pub(crate) fn set_ring(
    fd: BorrowedFd<'_>,
    option: libc::c_int,
    req: &libc::tpacket_req3,
) -> io::Result<()> {
    setsockopt_raw(fd, option, req)
}

/// SO_ATTACH_FILTER: the kernel runs `program` (classic BPF) on every packet for this socket
/// and drops those it rejects before they reach the ring.
pub(crate) fn attach_filter(fd: BorrowedFd<'_>, program: &[crate::SockFilter]) -> io::Result<()> {
    let mut insns: Vec<libc::sock_filter> = program
        .iter()
        .map(|i| libc::sock_filter {
            code: i.code,
            jt: i.jt,
            jf: i.jf,
            k: i.k,
        })
        .collect();
    let len = u16::try_from(insns.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let prog = libc::sock_fprog {
        len,
        filter: insns.as_mut_ptr(),
    };
    // SAFETY: `prog` points at `len` live instructions for the duration of the call; the
    // kernel copies them and keeps no pointer.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&prog as *const libc::sock_fprog).cast(),
            size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Binds the socket to interface `ifindex` for `protocol` (host order; 0 = send only).
pub(crate) fn bind_interface(fd: BorrowedFd<'_>, ifindex: u32, protocol: u16) -> io::Result<()> {
    let addr = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as libc::c_ushort,
        sll_protocol: protocol.to_be(),
        sll_ifindex: ifindex as libc::c_int,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    // SAFETY: `addr` is a valid sockaddr_ll of the length passed; the kernel only reads it.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// PACKET_STATISTICS; the kernel resets its counters on every read.
pub(crate) fn read_statistics(fd: BorrowedFd<'_>) -> io::Result<libc::tpacket_stats_v3> {
    let mut stats = libc::tpacket_stats_v3 {
        tp_packets: 0,
        tp_drops: 0,
        tp_freeze_q_cnt: 0,
    };
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `stats` and `len` are live and writable; the kernel writes at most `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            (&mut stats as *mut libc::tpacket_stats_v3).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(stats)
    }
}

/// Asks the kernel to send the frames queued in the transmit ring, without waiting.
pub(crate) fn kick_tx(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a zero-length send with a NULL buffer: the kernel reads the tx ring, not it.
    let rc = unsafe { libc::send(fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Sleeps in poll(POLLIN) until the socket is readable or `timeout` passes.
pub(crate) fn poll_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // Round up so a sub-millisecond timeout still sleeps instead of spinning.
    let ms = timeout
        .as_micros()
        .div_ceil(1000)
        .min(libc::c_int::MAX as u128) as libc::c_int;
    // SAFETY: one valid pollfd, count 1.
    let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(())
}

/// The system page size (ring blocks are whole pages).
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size)
        .ok()
        .filter(|s| s.is_power_of_two())
        .unwrap_or(4096)
}
