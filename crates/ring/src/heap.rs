//! Rings in ordinary memory: for tests, and for rings between threads of one process.

use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use crate::{Consumer, Producer, RawRing};

/// The memory of a heap ring. Indices sit on their own cache lines, as in the kernel's rings.
struct HeapRingMem<T> {
    producer: CacheLine,
    consumer: CacheLine,
    flags: CacheLine,
    entries: Box<[std::cell::UnsafeCell<T>]>,
}

#[repr(align(64))]
struct CacheLine(AtomicU32);

// SAFETY: entries are handed between the two sides by the ring protocol (acquire/release on
// the indices); no entry is accessed by both sides at once.
unsafe impl<T: Send> Sync for HeapRingMem<T> {}

/// A new ring of `size` entries (a power of two) in heap memory, split into its two ends.
pub fn heap_ring<T: Copy + Default + Send + 'static>(size: u32) -> (Producer<T>, Consumer<T>) {
    assert!(
        size.is_power_of_two(),
        "ring size {size} is not a power of two"
    );
    let mem = Arc::new(HeapRingMem {
        producer: CacheLine(AtomicU32::new(0)),
        consumer: CacheLine(AtomicU32::new(0)),
        flags: CacheLine(AtomicU32::new(0)),
        entries: (0..size)
            .map(|_| std::cell::UnsafeCell::new(T::default()))
            .collect(),
    });
    let make = |mem: &Arc<HeapRingMem<T>>| {
        // SAFETY: the pointers come from `mem`, which the ring keeps alive through `owner`;
        // AtomicU32 has the layout of u32 and UnsafeCell<T> that of T.
        unsafe {
            RawRing::from_raw_parts(
                mem.producer.0.as_ptr(),
                mem.consumer.0.as_ptr(),
                Some(mem.flags.0.as_ptr()),
                mem.entries.as_ptr() as *mut T,
                size,
                mem.clone(),
            )
        }
    };
    (Producer::new(make(&mem)), Consumer::new(make(&mem)))
}
