//! The shared memory of one ring: where its indices, flags and entries live.

use std::any::Any;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// The AF_XDP ring flag asking the other side for a wakeup (XDP_RING_NEED_WAKEUP).
const NEED_WAKEUP: u32 = 1;

/// Pointers into a ring's shared memory, plus a handle that keeps that memory mapped.
pub struct RawRing<T: Copy> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: Option<NonNull<AtomicU32>>,
    entries: NonNull<T>,
    mask: u32,
    _owner: Arc<dyn Any + Send + Sync>,
}

// SAFETY: the ring is used by one producer and one consumer; each side's handle is moved to
// its thread, and all shared state is reached through atomics or the entries the protocol
// hands over. `T` is plain data (Copy) that must itself be Send.
unsafe impl<T: Copy + Send> Send for RawRing<T> {}

impl<T: Copy> RawRing<T> {
    /// A ring over memory someone else laid out (an mmap of a kernel ring, a shared segment).
    ///
    /// # Safety
    /// `producer`, `consumer` and `flags` (if any) must point to aligned u32s, and `entries` to
    /// `size` properly aligned `T`s, all valid for reads and writes for as long as `owner` lives.
    /// `size` must be a power of two.
    pub unsafe fn from_raw_parts(
        producer: *mut u32,
        consumer: *mut u32,
        flags: Option<*mut u32>,
        entries: *mut T,
        size: u32,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> RawRing<T> {
        assert!(
            size.is_power_of_two(),
            "ring size {size} is not a power of two"
        );
        RawRing {
            producer: NonNull::new(producer.cast()).expect("null producer index"),
            consumer: NonNull::new(consumer.cast()).expect("null consumer index"),
            flags: flags.map(|f| NonNull::new(f.cast()).expect("null ring flags")),
            entries: NonNull::new(entries).expect("null ring entries"),
            mask: size - 1,
            _owner: owner,
        }
    }

    #[inline]
    pub fn size(&self) -> u32 {
        self.mask + 1
    }

    #[inline]
    pub(crate) fn producer(&self) -> &AtomicU32 {
        // SAFETY: valid and aligned for the owner's lifetime (from_raw_parts contract).
        unsafe { self.producer.as_ref() }
    }

    #[inline]
    pub(crate) fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    #[inline]
    pub(crate) fn needs_wakeup(&self) -> bool {
        match self.flags {
            // SAFETY: as for `producer`.
            Some(f) => unsafe { f.as_ref() }.load(Ordering::Relaxed) & NEED_WAKEUP != 0,
            None => false,
        }
    }

    /// Sets or clears the need-wakeup flag, where the consumer is the side that sleeps (a
    /// ring between two processes; the kernel sets its own rings' flags). Sequentially
    /// consistent, so that the producer index read after it is not read before it (the
    /// producer stores its index, then reads the flag).
    #[inline]
    pub(crate) fn set_needs_wakeup(&self, on: bool) {
        if let Some(f) = self.flags {
            // SAFETY: as for `producer`.
            let flags = unsafe { f.as_ref() };
            match on {
                true => flags.fetch_or(NEED_WAKEUP, Ordering::SeqCst),
                false => flags.fetch_and(!NEED_WAKEUP, Ordering::SeqCst),
            };
            std::sync::atomic::fence(Ordering::SeqCst);
        }
    }

    #[inline]
    pub(crate) fn write(&mut self, index: u32, value: T) {
        let slot = (index & self.mask) as usize;
        // SAFETY: slot < size, so the pointer is inside the entry array; the protocol gives
        // this slot to the producer alone until it is submitted.
        unsafe { self.entries.as_ptr().add(slot).write_volatile(value) }
    }

    #[inline]
    pub(crate) fn read(&self, index: u32) -> T {
        let slot = (index & self.mask) as usize;
        // SAFETY: slot < size; the producer published this entry (acquire on its index) and
        // will not write it again until we release it.
        unsafe { self.entries.as_ptr().add(slot).read_volatile() }
    }
}
