//! The mmap'd area and the address <-> bytes mapping.

use std::any::Any;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::{FramePool, UmemError};

/// How to lay out a UMEM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UmemConfig {
    pub frame_count: u32,
    /// 2048 or 4096 (the AF_XDP aligned-chunk sizes that work everywhere).
    pub frame_size: u32,
    /// Bytes the kernel leaves free in front of each received packet.
    pub headroom: u32,
    /// Back the area with 2 MiB hugepages; falls back to normal pages with a note.
    pub hugepages: bool,
}

impl Default for UmemConfig {
    fn default() -> Self {
        UmemConfig {
            frame_count: 4096,
            frame_size: 4096,
            headroom: 0,
            hugepages: false,
        }
    }
}

/// The raw mapping. Unmapped when the last holder (the UMEM, a socket) goes away.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; who may touch which frame is decided by the rings.
unsafe impl Send for Mapping {}
// SAFETY: as above; Mapping itself exposes no access, only its address.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are exactly what mmap returned; nobody holds the mapping any more.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// A packet buffer area of `frame_count` frames of `frame_size` bytes. Frames are named by
/// their byte offset ("address"), never by pointer.
pub struct Umem {
    map: Arc<Mapping>,
    config: UmemConfig,
    /// Set when a fallback was taken (hugepages unavailable).
    note: Option<String>,
}

/// How much of the area is filled in between looks at the cancel flag: about 30 ms of the
/// kernel zeroing pages here.
const POPULATE_CHUNK: usize = 64 << 20;

impl Umem {
    pub fn new(config: UmemConfig) -> Result<Umem, UmemError> {
        Umem::new_cancellable(config, None)
    }

    /// `new`, giving up with [`UmemError::Cancelled`] soon after `cancel` is set: filling in
    /// the pages of a large area takes seconds (4 GiB: about 4 s), and a tool asked to stop
    /// must stop.
    pub fn new_cancellable(
        config: UmemConfig,
        cancel: Option<&AtomicBool>,
    ) -> Result<Umem, UmemError> {
        if config.frame_size != 2048 && config.frame_size != 4096 {
            return Err(UmemError::FrameSize(config.frame_size));
        }
        // The kernel wants at least a minimal Ethernet frame after the headroom.
        if config.headroom + 256 + 64 > config.frame_size {
            return Err(UmemError::Headroom {
                headroom: config.headroom,
                frame_size: config.frame_size,
            });
        }
        if config.frame_count == 0 || config.frame_count > 1 << 24 {
            return Err(UmemError::FrameCount(config.frame_count));
        }
        let len = config.frame_count as usize * config.frame_size as usize;
        let mut note = None;
        let ptr = if config.hugepages {
            let huge_len = len.next_multiple_of(2 << 20);
            match map_anonymous(huge_len, libc::MAP_HUGETLB) {
                Ok(p) => {
                    let map = Arc::new(Mapping {
                        ptr: p,
                        len: huge_len,
                    });
                    populate(&map, cancel)?;
                    return Ok(Umem { map, config, note });
                }
                Err(e) => {
                    note = Some(format!(
                        "hugepages unavailable ({e}); using normal pages (reserve some with \
                         'echo 64 > /proc/sys/vm/nr_hugepages')"
                    ));
                    map_anonymous(len, 0).map_err(|source| UmemError::Map { bytes: len, source })?
                }
            }
        } else {
            map_anonymous(len, 0).map_err(|source| UmemError::Map { bytes: len, source })?
        };
        let map = Arc::new(Mapping { ptr, len });
        populate(&map, cancel)?;
        Ok(Umem { map, config, note })
    }

    pub fn config(&self) -> &UmemConfig {
        &self.config
    }

    /// A note about a fallback taken while creating the area, for the user.
    pub fn note(&self) -> Option<&str> {
        self.note.as_deref()
    }

    pub fn frame_size(&self) -> u32 {
        self.config.frame_size
    }

    pub fn frame_count(&self) -> u32 {
        self.config.frame_count
    }

    /// Start and length of the area, for registering it with the kernel.
    pub fn area(&self) -> (*mut u8, usize) {
        (
            self.map.ptr,
            self.config.frame_count as usize * self.config.frame_size as usize,
        )
    }

    /// A handle that keeps the area mapped (held by sockets and rings using it).
    pub fn keepalive(&self) -> Arc<dyn Any + Send + Sync> {
        self.map.clone()
    }

    /// The address of every frame: a full pool.
    pub fn frame_pool(&self) -> FramePool {
        let size = self.config.frame_size as u64;
        FramePool::new((0..self.config.frame_count as u64).rev().map(|i| i * size))
    }

    /// The frame that holds `addr`.
    #[inline]
    pub fn frame_base(&self, addr: u64) -> u64 {
        addr & !(self.config.frame_size as u64 - 1)
    }

    /// True when `len` bytes at `addr` lie inside one frame of the area (DESIGN rule 6: a
    /// descriptor from the kernel or a peer is checked before use).
    #[inline]
    pub fn is_valid(&self, addr: u64, len: u32) -> bool {
        let fs = self.config.frame_size as u64;
        let total = self.config.frame_count as u64 * fs;
        addr < total && (addr & (fs - 1)) + len as u64 <= fs
    }

    /// The bytes of a packet, or None if the descriptor is out of range.
    #[inline]
    pub fn packet(&self, addr: u64, len: u32) -> Option<&[u8]> {
        if !self.is_valid(addr, len) {
            return None;
        }
        // SAFETY: the range lies inside the mapping (checked above), which lives as long as
        // self. The frame belongs to the application while it holds the descriptor.
        Some(unsafe { std::slice::from_raw_parts(self.map.ptr.add(addr as usize), len as usize) })
    }

    /// Asks the CPU to bring the cache line at `addr` in, ahead of a read (nothing when the
    /// address is outside the area, or on another architecture than x86-64).
    #[inline]
    pub fn prefetch(&self, addr: u64) {
        #[cfg(target_arch = "x86_64")]
        if self.is_valid(addr, 1) {
            use core::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            // SAFETY: the byte lies inside the mapping (checked above), which lives as long
            // as self; a prefetch reads nothing the program sees and SSE is in every
            // x86-64 CPU.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(self.map.ptr.add(addr as usize).cast()) };
        }
    }

    /// The bytes of a packet, writable, or None if the descriptor is out of range.
    #[inline]
    pub fn packet_mut(&mut self, addr: u64, len: u32) -> Option<&mut [u8]> {
        if !self.is_valid(addr, len) {
            return None;
        }
        // SAFETY: as in `packet`; `&mut self` makes this the only reference we hand out.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.map.ptr.add(addr as usize), len as usize)
        })
    }
}

impl Umem {
    /// Copies `len` bytes at `src` to `dst` (another frame); false when either range is out
    /// of the area or they overlap.
    pub fn copy_packet(&mut self, src: u64, len: u32, dst: u64) -> bool {
        let overlap = src < dst + len as u64 && dst < src + len as u64;
        if overlap || !self.is_valid(src, len) || !self.is_valid(dst, len) {
            return false;
        }
        // SAFETY: both ranges lie inside the mapping (checked above) and do not overlap;
        // `&mut self` means no slice of the area is borrowed meanwhile.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.map.ptr.add(src as usize),
                self.map.ptr.add(dst as usize),
                len as usize,
            )
        };
        true
    }
}

/// Fills in every page of `map` now (as MAP_POPULATE would), a chunk at a time, looking at
/// `cancel` between chunks: the packet path never takes a page fault, and a stop is not kept
/// waiting. On an error the mapping is dropped (unmapped) by the caller.
fn populate(map: &Mapping, cancel: Option<&AtomicBool>) -> Result<(), UmemError> {
    let mut done = 0;
    while done < map.len {
        if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(UmemError::Cancelled);
        }
        let chunk = POPULATE_CHUNK.min(map.len - done);
        // SAFETY: [done, done + chunk) lies inside the mapping, which is ours alone here.
        let start = unsafe { map.ptr.add(done) };
        // SAFETY: MADV_POPULATE_WRITE only faults in pages of our own writable mapping.
        let r = unsafe { libc::madvise(start.cast(), chunk, libc::MADV_POPULATE_WRITE) };
        if r != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINVAL) {
                // Out of memory (or hugepages): an error now, not a fault later.
                return Err(UmemError::Map {
                    bytes: map.len,
                    source: e,
                });
            }
            // Before Linux 5.14: write a byte of each page instead.
            let page = page_size();
            let mut at = 0;
            while at < chunk {
                // SAFETY: start + at is inside the mapping (at < chunk), writable, and no one
                // else has it yet.
                unsafe { start.add(at).write_volatile(0) };
                at += page;
            }
        }
        done += chunk;
    }
    Ok(())
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096).max(1)
}

fn map_anonymous(len: usize, extra_flags: i32) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping at an address of the kernel's choosing touches no
    // existing memory.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | extra_flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(p.cast())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small() -> Umem {
        Umem::new(UmemConfig {
            frame_count: 8,
            frame_size: 2048,
            headroom: 0,
            hugepages: false,
        })
        .unwrap()
    }

    #[test]
    fn rejects_bad_frame_sizes_and_counts() {
        for fs in [0, 1000, 1024, 8192] {
            let c = UmemConfig {
                frame_size: fs,
                ..UmemConfig::default()
            };
            assert!(matches!(Umem::new(c), Err(UmemError::FrameSize(f)) if f == fs));
        }
        let c = UmemConfig {
            frame_count: 0,
            ..UmemConfig::default()
        };
        assert!(matches!(Umem::new(c), Err(UmemError::FrameCount(0))));
        let c = UmemConfig {
            headroom: 4000,
            ..UmemConfig::default()
        };
        assert!(matches!(Umem::new(c), Err(UmemError::Headroom { .. })));
    }

    #[test]
    fn descriptors_are_checked_against_frames() {
        let u = small();
        assert!(u.is_valid(0, 2048));
        assert!(u.is_valid(7 * 2048 + 100, 1948));
        assert!(
            !u.is_valid(7 * 2048 + 100, 1949),
            "crosses the end of a frame"
        );
        assert!(!u.is_valid(8 * 2048, 1), "past the area");
        assert!(!u.is_valid(u64::MAX, 10));
        assert!(u.packet(2048 + 10, 2040).is_none());
        assert_eq!(u.frame_base(3 * 2048 + 77), 3 * 2048);
    }

    #[test]
    fn bytes_written_are_read_back() {
        let mut u = small();
        u.packet_mut(4096 + 8, 4)
            .unwrap()
            .copy_from_slice(&[1, 2, 3, 4]);
        assert_eq!(u.packet(4096 + 8, 4).unwrap(), &[1, 2, 3, 4]);
        let pool = u.frame_pool();
        assert_eq!(pool.len(), 8);
    }

    #[test]
    fn copies_between_frames_and_refuses_bad_ranges() {
        let mut u = small();
        u.packet_mut(100, 3).unwrap().copy_from_slice(&[7, 8, 9]);
        assert!(u.copy_packet(100, 3, 2048 + 10));
        assert_eq!(u.packet(2048 + 10, 3).unwrap(), &[7, 8, 9]);
        assert!(!u.copy_packet(100, 3, 101), "overlapping ranges");
        assert!(!u.copy_packet(100, 3, 8 * 2048), "outside the area");
        assert!(!u.copy_packet(2000, 100, 4096), "crosses a frame end");
    }

    #[test]
    fn hugepages_fall_back_with_a_note_or_work() {
        let u = Umem::new(UmemConfig {
            hugepages: true,
            ..UmemConfig::default()
        })
        .unwrap();
        if let Some(n) = u.note() {
            assert!(n.contains("hugepages unavailable"), "{n}");
        }
        assert!(u.packet(0, 64).is_some());
    }
}
