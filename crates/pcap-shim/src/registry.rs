//! Which `pcap_t`s are ours. A fixed table of slots read with atomics only, because
//! `pcap_breakloop` must work from a signal handler, where a lock could be held by the very
//! code the signal interrupted.

use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicUsize, Ordering};

use crate::ffi::PcapT;
use crate::handle::Handle;

/// Open `xdp:` handles a process may have at once.
pub const SLOTS: usize = 64;

/// One handle's place: its `pcap_t` (the key), the handle, and what `pcap_breakloop` needs.
pub struct Slot {
    key: AtomicUsize,
    handle: AtomicPtr<Handle>,
    breaking: AtomicBool,
    /// An eventfd the receive loop polls beside the port, so a breakloop from another
    /// thread wakes a blocked wait (a signal in the same thread interrupts poll anyway).
    wake: AtomicI32,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            key: AtomicUsize::new(0),
            handle: AtomicPtr::new(std::ptr::null_mut()),
            breaking: AtomicBool::new(false),
            wake: AtomicI32::new(-1),
        }
    }

    /// Asks the loop to stop and wakes it: atomics and write(2), safe in a signal handler.
    pub fn request_break(&self) {
        self.breaking.store(true, Ordering::SeqCst);
        let fd = self.wake.load(Ordering::SeqCst);
        if fd >= 0 {
            let one: u64 = 1;
            // SAFETY: writes 8 bytes from a live u64 to a descriptor; a closed or wrong
            // descriptor makes write fail, nothing worse.
            let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
        }
    }

    /// True once, after a break was asked for (the request is used up, as libpcap's). A
    /// plain load first: this is asked for every packet.
    pub fn take_break(&self) -> bool {
        self.breaking.load(Ordering::Relaxed) && self.breaking.swap(false, Ordering::SeqCst)
    }

    pub fn set_wake(&self, fd: RawFd) {
        self.wake.store(fd, Ordering::SeqCst);
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::new() }; SLOTS];

/// Handles in the table: the calls for other devices skip the search while it is zero.
static IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Puts the handle `make` builds (given its slot) in a free slot under `key`; None when
/// all are taken.
pub fn insert(key: *mut PcapT, make: impl FnOnce(&'static Slot) -> Box<Handle>) -> Option<()> {
    let slot = TABLE.iter().find(|slot| {
        slot.key
            .compare_exchange(0, key as usize, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok()
    })?;
    slot.breaking.store(false, Ordering::SeqCst);
    slot.wake.store(-1, Ordering::SeqCst);
    slot.handle
        .store(Box::into_raw(make(slot)), Ordering::SeqCst);
    IN_USE.fetch_add(1, Ordering::SeqCst);
    Some(())
}

/// The slot of `key`, if it is one of ours.
pub fn slot_of(key: *mut PcapT) -> Option<&'static Slot> {
    if key.is_null() || IN_USE.load(Ordering::SeqCst) == 0 {
        return None;
    }
    TABLE
        .iter()
        .find(|s| s.key.load(Ordering::SeqCst) == key as usize)
}

/// The handle of `key`, if it is one of ours. Valid until `remove(key)`, which only
/// `pcap_close` calls: as with libpcap, a handle is not used after it is closed.
pub fn find(key: *mut PcapT) -> Option<&'static Handle> {
    let ptr = slot_of(key)?.handle.load(Ordering::SeqCst);
    // SAFETY: a non-null pointer here came from Box::into_raw in `insert` and is freed only
    // by `remove`, after it leaves the table.
    unsafe { ptr.as_ref() }
}

/// Takes `key` out of the table and returns its handle to be dropped.
pub fn remove(key: *mut PcapT) -> Option<Box<Handle>> {
    let slot = slot_of(key)?;
    let ptr = slot.handle.swap(std::ptr::null_mut(), Ordering::SeqCst);
    slot.wake.store(-1, Ordering::SeqCst);
    slot.key.store(0, Ordering::SeqCst);
    IN_USE.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: the pointer came from Box::into_raw in `insert` and was in the table until
    // the swap above, so this is its only owner now.
    (!ptr.is_null()).then(|| unsafe { Box::from_raw(ptr) })
}
