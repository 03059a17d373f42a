//! The pipe's shared memory: one file under /dev/shm with a header, four rings and the
//! frames, mapped by both ends. A process's end is a lock on one byte of that file (so it
//! ends with the process, however that ends), and each end has a doorbell: a FIFO the
//! other end writes a byte to when the sleeping end asked for it.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wirespeed_ring::RawRing;

use crate::PortError;

/// Where pipes live: a tmpfs every process of the machine sees (network namespaces too).
const DIR: &str = "/dev/shm";
// 02: a descriptor's flags say a packet continues in the next one (multi-frame packets).
const MAGIC: u64 = u64::from_le_bytes(*b"wspipe02");
const PAGE: usize = 4096;
/// A ring's producer index, consumer index and flags, a cache line each, before its entries.
const RING_HEAD: usize = 192;
/// The byte locked while a process takes its end or leaves it; bytes 0 and 1 are the ends.
const SETUP_BYTE: i64 = 2;
/// How long a process taking the place of an end that was in use waits for the other end
/// to empty the rings.
const JOIN_WAIT: Duration = Duration::from_secs(2);

/// A packet handed from one end to the other: where it is in the frames, and its length.
/// A packet larger than a frame is a chain of descriptors, each but the last flagged
/// `CONTINUES`, as AF_XDP's multi-buffer descriptors are.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipeDesc {
    pub addr: u64,
    pub len: u32,
    pub flags: u32,
}

/// `PipeDesc::flags`: the packet continues in the next descriptor.
pub const CONTINUES: u32 = 1;

/// What both ends must agree on; the end that makes the pipe chooses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    pub frame_size: u32,
    /// All frames; each end owns half.
    pub frame_count: u32,
    /// Entries of each direction's ring of packets.
    pub data_ring: u32,
}

impl Config {
    /// Entries of each ring of frames going home: room for every frame of its owner.
    fn return_ring(&self) -> u32 {
        (self.frame_count / 2).next_power_of_two()
    }

    fn valid(&self) -> bool {
        matches!(self.frame_size, 2048 | 4096)
            && self.frame_count.is_multiple_of(2)
            && (128..=1 << 20).contains(&self.frame_count)
            && self.data_ring.is_power_of_two()
            && (64..=65536).contains(&self.data_ring)
    }
}

/// Byte offsets of the parts of the file.
#[derive(Debug, Clone, Copy)]
struct Layout {
    /// data[0], data[1] (packets each end sends), home[0], home[1] (frames going back to
    /// each end).
    rings: [usize; 4],
    frames: usize,
    len: usize,
}

impl Layout {
    fn of(c: &Config) -> Layout {
        let span = |entries: u32, size: usize| {
            (RING_HEAD + entries as usize * size).next_multiple_of(PAGE)
        };
        let data = span(c.data_ring, size_of::<PipeDesc>());
        let home = span(c.return_ring(), size_of::<u64>());
        let rings = [PAGE, PAGE + data, PAGE + 2 * data, PAGE + 2 * data + home];
        let frames = PAGE + 2 * data + 2 * home;
        Layout {
            rings,
            frames,
            len: frames + c.frame_count as usize * c.frame_size as usize,
        }
    }
}

/// The header at the start of the file.
#[repr(C)]
struct Header {
    /// Written last when the pipe is made: a file without it is not ready.
    magic: AtomicU64,
    frame_size: AtomicU32,
    frame_count: AtomicU32,
    data_ring: AtomicU32,
    /// 1: a process took the place of an end that had been in use, and asks the other end to
    /// empty the rings and take its frames back; the other end answers 0.
    join: AtomicU32,
    /// 1 once an end's place has been taken since the pipe was made.
    used: [AtomicU32; 2],
    /// The process at each end (for messages).
    pid: [AtomicU32; 2],
}

/// The mapping; unmapped when the last ring over it is gone.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; what is in it is reached through atomics and
// the ring protocol.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len are the mapping made in `map`, unmapped only here.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// One end of a pipe, attached.
pub struct Shared {
    name: String,
    /// 0 or 1.
    end: usize,
    config: Config,
    layout: Layout,
    map: Option<Arc<Mapping>>,
    /// Holds our end's lock.
    file: File,
    /// Our doorbell (we read it), and the other end's (we write it).
    bell: File,
    peer_bell: File,
}

impl Shared {
    /// Takes a free end of pipe `name`, making the pipe (with `wanted`) when no other process
    /// is at its other end; otherwise the pipe keeps the sizes it was made with (`config`).
    pub fn open(name: &str, wanted: Config) -> Result<Shared, PortError> {
        if !wanted.valid() {
            return Err(PortError::Unsupported(format!(
                "pipe:{name}: {} frames of {} bytes and {}-entry rings: a pipe takes an even \
                 number of frames from 128 to 1048576, of 2048 or 4096 bytes, and rings of 64 \
                 to 65536 entries (a power of two)",
                wanted.frame_count, wanted.frame_size, wanted.data_ring
            )));
        }
        let path = file_path(name, "");
        for _ in 0..3 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .map_err(|e| io_error(name, "open its file under /dev/shm", e))?;
            lock(&file, SETUP_BYTE, true).map_err(|e| io_error(name, "lock its file", e))?;
            // A leaving end may have removed the file between our open and our lock.
            let same = std::fs::metadata(&path)
                .ok()
                .zip(file.metadata().ok())
                .is_some_and(|(a, b)| a.ino() == b.ino() && a.dev() == b.dev());
            if !same {
                continue;
            }
            let attached = Shared::attach(name, file, wanted)?;
            unlock(&attached.file, SETUP_BYTE);
            attached.wait_for_join()?;
            return Ok(attached);
        }
        Err(PortError::Unsupported(format!(
            "pipe:{name}: its file kept being removed while we opened it"
        )))
    }

    /// With the set-up lock held: take an end, make or check the pipe.
    fn attach(name: &str, file: File, wanted: Config) -> Result<Shared, PortError> {
        let end = if lock(&file, 0, false).is_ok() {
            0
        } else if lock(&file, 1, false).is_ok() {
            1
        } else {
            return Err(PortError::Unsupported(format!(
                "pipe:{name}: the pipe already has its two ends (another process at each)"
            )));
        };
        let fresh = !locked_by_other(&file, 1 - end as i64)
            .map_err(|e| io_error(name, "read its lock", e))?;
        let config = if fresh {
            wanted
        } else {
            read_config(name, &file)?
        };
        let layout = Layout::of(&config);
        if fresh {
            // Nobody else is here: start from zeros (a file left by processes gone).
            file.set_len(0)
                .and_then(|()| file.set_len(layout.len as u64))
                .map_err(|e| io_error(name, "size its file", e))?;
        }
        let map = map(&file, layout.len).map_err(|e| io_error(name, "map its file", e))?;
        let (bell, peer_bell) = open_bells(name, end)?;
        let shared = Shared {
            name: name.to_string(),
            end,
            config,
            layout,
            map: Some(Arc::new(map)),
            file,
            bell,
            peer_bell,
        };
        let h = shared.header();
        if fresh {
            h.frame_size.store(config.frame_size, Ordering::Relaxed);
            h.frame_count.store(config.frame_count, Ordering::Relaxed);
            h.data_ring.store(config.data_ring, Ordering::Relaxed);
            shared.drain_bell();
        }
        h.pid[end].store(std::process::id(), Ordering::Relaxed);
        // Our place was in use before: the other end still has that process's packets and
        // frames. It empties the rings when it sees the request (`Shared::join_requested`).
        if h.used[end].swap(1, Ordering::AcqRel) == 1 {
            h.join.store(1, Ordering::Release);
            shared.ring_peer();
        }
        h.magic.store(MAGIC, Ordering::Release);
        Ok(shared)
    }

    /// Waits, without the set-up lock, for the other end to answer our join request.
    fn wait_for_join(&self) -> Result<(), PortError> {
        let until = Instant::now() + JOIN_WAIT;
        while self.header().join.load(Ordering::Acquire) != 0 {
            if Instant::now() >= until {
                return Err(PortError::Unsupported(format!(
                    "pipe:{}: the process at its other end (pid {}) did not take a new peer \
                     within {} s (it empties the pipe when it next receives, sends or \
                     waits)",
                    self.name,
                    self.peer_pid(),
                    JOIN_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    fn mapping(&self) -> &Arc<Mapping> {
        self.map.as_ref().expect("mapped until dropped")
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping starts with a page for the header, which is atomics only, and
        // lives as long as `self`.
        unsafe { &*self.mapping().ptr.cast::<Header>() }
    }

    pub fn end(&self) -> usize {
        self.end
    }

    pub fn config(&self) -> Config {
        self.config
    }

    /// The process at the other end, when one has been there (0 otherwise).
    pub fn peer_pid(&self) -> u32 {
        self.header().pid[1 - self.end].load(Ordering::Relaxed)
    }

    /// True when a process holds the other end now (a system call).
    pub fn peer_present(&self) -> bool {
        locked_by_other(&self.file, 1 - self.end as i64).unwrap_or(false)
    }

    /// True when a new process at the other end waits for us to empty the rings.
    #[inline]
    pub fn join_requested(&self) -> bool {
        self.header().join.load(Ordering::Acquire) != 0
    }

    /// Empties the four rings (their indices and flags back to zero). Only while the other
    /// end waits for `answer_join`; make new ring ends afterwards.
    pub fn reset_rings(&self) {
        for offset in self.layout.rings {
            for word in 0..3 {
                // SAFETY: each ring's head is three u32s on their own cache lines inside the
                // mapping (`Layout`).
                let w = unsafe {
                    &*self
                        .mapping()
                        .ptr
                        .add(offset + 64 * word)
                        .cast::<AtomicU32>()
                };
                w.store(0, Ordering::Release);
            }
        }
    }

    /// Tells the waiting process that the rings are empty.
    pub fn answer_join(&self) {
        self.header().join.store(0, Ordering::Release);
    }

    /// The ring of packets `end` sends.
    pub fn data_ring(&self, end: usize) -> RawRing<PipeDesc> {
        self.ring(self.layout.rings[end], self.config.data_ring)
    }

    /// The ring of `end`'s frames going back to it.
    pub fn home_ring(&self, end: usize) -> RawRing<u64> {
        self.ring(self.layout.rings[2 + end], self.config.return_ring())
    }

    fn ring<T: Copy>(&self, offset: usize, size: u32) -> RawRing<T> {
        let map = self.mapping();
        // SAFETY: `Layout` puts this ring's three indices (a cache line each) and `size`
        // entries of T (8-byte aligned, at 192 bytes into a page) inside the mapping; the
        // ring keeps the mapping alive.
        unsafe {
            let base = map.ptr.add(offset);
            RawRing::from_raw_parts(
                base.cast(),
                base.add(64).cast(),
                Some(base.add(128).cast()),
                base.add(RING_HEAD).cast(),
                size,
                map.clone(),
            )
        }
    }

    /// `len` bytes of the frame area from `offset`; empty when that is not inside it.
    #[inline]
    pub fn bytes(&self, offset: u64, len: u32) -> &[u8] {
        match self.frame_range(offset, len) {
            // SAFETY: the range is inside the frame area of the mapping, which lives as long
            // as `self`. The other process may write these bytes only if it breaks the
            // protocol (they are ours until we hand the frame back), and bytes have no
            // invalid values.
            Some(start) => unsafe {
                std::slice::from_raw_parts(self.mapping().ptr.add(start), len as usize)
            },
            None => &[],
        }
    }

    /// `bytes`, writable.
    #[inline]
    pub fn bytes_mut(&mut self, offset: u64, len: u32) -> &mut [u8] {
        match self.frame_range(offset, len) {
            // SAFETY: as for `bytes`; `&mut self` keeps this process from making a second
            // reference through this end.
            Some(start) => unsafe {
                std::slice::from_raw_parts_mut(self.mapping().ptr.add(start), len as usize)
            },
            None => &mut [],
        }
    }

    fn frame_range(&self, offset: u64, len: u32) -> Option<usize> {
        let area = self.layout.len - self.layout.frames;
        let end = offset.checked_add(u64::from(len))?;
        (end <= area as u64).then_some(self.layout.frames + offset as usize)
    }

    /// Our doorbell, for poll().
    pub fn bell_fd(&self) -> RawFd {
        self.bell.as_raw_fd()
    }

    /// Empties our doorbell after a wakeup.
    pub fn drain_bell(&self) {
        let mut buf = [0u8; 64];
        while matches!((&self.bell).read(&mut buf), Ok(n) if n > 0) {}
    }

    /// Wakes the other end. A full doorbell already has its wakeup waiting.
    pub fn ring_peer(&self) {
        let _ = (&self.peer_bell).write(&[1]);
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        // Under the set-up lock, so a process taking an end meanwhile sees the file either
        // still in use or gone. The last end out removes the files.
        let _ = lock(&self.file, SETUP_BYTE, true);
        self.map = None;
        if !self.peer_present() {
            for suffix in ["", ".bell0", ".bell1"] {
                let _ = std::fs::remove_file(file_path(&self.name, suffix));
            }
        }
    }
}

fn file_path(name: &str, suffix: &str) -> String {
    format!("{DIR}/wirespeed-pipe-{name}{suffix}")
}

fn io_error(name: &str, what: &'static str, source: std::io::Error) -> PortError {
    PortError::Io {
        iface: format!("pipe:{name}"),
        what,
        source,
    }
}

/// The other end's choice of sizes, checked against the file.
fn read_config(name: &str, file: &File) -> Result<Config, PortError> {
    let mut head = [0u8; 20];
    let read = std::os::unix::fs::FileExt::read_at(file, &mut head, 0)
        .map_err(|e| io_error(name, "read its header", e))?;
    let word = |i: usize| u32::from_ne_bytes(head[i..i + 4].try_into().expect("4 bytes"));
    let config = Config {
        frame_size: word(8),
        frame_count: word(12),
        data_ring: word(16),
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let magic = u64::from_ne_bytes(head[..8].try_into().expect("8 bytes"));
    if read != head.len()
        || magic != MAGIC
        || !config.valid()
        || len != Layout::of(&config).len as u64
    {
        return Err(PortError::Unsupported(format!(
            "pipe:{name}: {} is not a pipe of this version of wirespeed, and a process holds \
             its other end",
            file_path(name, "")
        )));
    }
    Ok(config)
}

fn map(file: &File, len: usize) -> std::io::Result<Mapping> {
    // SAFETY: a new shared mapping of our own file at an address of the kernel's choosing
    // touches no existing memory; the file is `len` bytes long.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    Ok(Mapping { ptr: p.cast(), len })
}

/// Both ends' doorbells, made when missing: ours to read, the other end's to write.
fn open_bells(name: &str, end: usize) -> Result<(File, File), PortError> {
    let open = |i: usize| {
        let path = file_path(name, &format!(".bell{i}"));
        let c = CString::new(path.clone()).expect("a pipe name has no NUL");
        // SAFETY: `c` is a valid NUL-terminated path.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() != ErrorKind::AlreadyExists {
                return Err(io_error(name, "make its doorbell (a FIFO)", e));
            }
        }
        let is_fifo = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_fifo());
        if !is_fifo {
            return Err(PortError::Unsupported(format!(
                "pipe:{name}: {path} is in the way (not a FIFO)"
            )));
        }
        // Read and write: opening a FIFO so never waits for the other side.
        OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| io_error(name, "open its doorbell", e))
    };
    Ok((open(end)?, open(1 - end)?))
}

fn flock_on(byte: i64, kind: i32) -> libc::flock {
    // SAFETY: flock is plain data; all zeros is a valid value, then set below.
    let mut fl: libc::flock = unsafe { std::mem::zeroed() };
    fl.l_type = kind as i16;
    fl.l_whence = libc::SEEK_SET as i16;
    fl.l_start = byte;
    fl.l_len = 1;
    fl
}

/// Takes a write lock on one byte of `file` for this open file (OFD lock: it goes with the
/// descriptor, so with the process however it ends). `wait`: until it is free.
fn lock(file: &File, byte: i64, wait: bool) -> std::io::Result<()> {
    let fl = flock_on(byte, libc::F_WRLCK);
    let cmd = if wait {
        libc::F_OFD_SETLKW
    } else {
        libc::F_OFD_SETLK
    };
    loop {
        // SAFETY: fcntl with a valid descriptor and a pointer to a live flock.
        if unsafe { libc::fcntl(file.as_raw_fd(), cmd, &fl) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

fn unlock(file: &File, byte: i64) {
    let fl = flock_on(byte, libc::F_UNLCK);
    // SAFETY: fcntl with a valid descriptor and a pointer to a live flock.
    unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &fl) };
}

/// True when another open file holds a lock on `byte`.
fn locked_by_other(file: &File, byte: i64) -> std::io::Result<bool> {
    let mut fl = flock_on(byte, libc::F_WRLCK);
    // SAFETY: fcntl with a valid descriptor and a pointer to a live flock it fills in.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut fl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fl.l_type != libc::F_UNLCK as i16)
}
