//! Single-producer single-consumer rings over shared memory, in the protocol of the AF_XDP
//! rings: a free-running 32-bit producer and consumer index, a power-of-two array of entries,
//! acquire/release ordering between the index and the entries it publishes.
//!
//! The producer side and the consumer side each keep a cached copy of the other side's index
//! and refresh it only when the cache says the ring is full (or empty), so a burst costs one
//! shared-cache-line read at most (the libxdp / netmap way of amortising).

mod heap;
mod raw;

pub use heap::heap_ring;
pub use raw::RawRing;

use std::sync::atomic::Ordering;

/// The producer end of a ring: reserves slots, writes entries, submits them.
pub struct Producer<T: Copy> {
    ring: RawRing<T>,
    /// Our own index: the next slot to publish.
    cached_prod: u32,
    /// The consumer index plus the ring size: the producer may write up to here.
    cached_cons: u32,
}

/// The consumer end of a ring: peeks entries, reads them, releases them.
pub struct Consumer<T: Copy> {
    ring: RawRing<T>,
    /// The producer index as last read.
    cached_prod: u32,
    /// Our own index: the next entry to read.
    cached_cons: u32,
}

impl<T: Copy> Producer<T> {
    /// Takes the producer role over `ring`. The ring's indices are read once, here.
    pub fn new(ring: RawRing<T>) -> Producer<T> {
        let cached_prod = ring.producer().load(Ordering::Relaxed);
        let cached_cons = ring
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(ring.size());
        Producer {
            ring,
            cached_prod,
            cached_cons,
        }
    }

    pub fn size(&self) -> u32 {
        self.ring.size()
    }

    /// Slots free for writing, refreshing the consumer index only when fewer than `wanted`
    /// are known to be free.
    #[inline]
    pub fn free(&mut self, wanted: u32) -> u32 {
        let free = self.cached_cons.wrapping_sub(self.cached_prod);
        if free >= wanted {
            return free;
        }
        // Acquire: the consumer has finished reading the entries it released.
        self.cached_cons = self
            .ring
            .consumer()
            .load(Ordering::Acquire)
            .wrapping_add(self.ring.size());
        self.cached_cons.wrapping_sub(self.cached_prod)
    }

    /// Reserves up to `n` slots; returns how many. Write them with `write(i, ..)` for
    /// `i in 0..reserved`, then `submit(reserved)`.
    #[inline]
    pub fn reserve(&mut self, n: u32) -> u32 {
        n.min(self.free(n))
    }

    /// Writes the `i`-th reserved slot (counted from the first unsubmitted one).
    #[inline]
    pub fn write(&mut self, i: u32, value: T) {
        self.ring.write(self.cached_prod.wrapping_add(i), value);
    }

    /// Publishes `n` written slots to the consumer.
    #[inline]
    pub fn submit(&mut self, n: u32) {
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // Release: the entries are written before the consumer can see the new index.
        self.ring
            .producer()
            .store(self.cached_prod, Ordering::Release);
    }

    /// Our producer index (free-running).
    pub fn producer_index(&self) -> u32 {
        self.cached_prod
    }

    /// The consumer index as the other side has published it now.
    pub fn consumer_index(&self) -> u32 {
        self.ring.consumer().load(Ordering::Acquire)
    }

    /// Entries submitted but not yet consumed by the other side.
    pub fn pending(&self) -> u32 {
        self.cached_prod.wrapping_sub(self.consumer_index())
    }

    /// The `i`-th entry submitted and not yet consumed, counted from the consumer index:
    /// what a producer takes back from a consumer that has gone away (an AF_XDP socket
    /// whose interface was deleted), for `i in 0..pending()` (at most the ring's size).
    pub fn read_pending(&self, i: u32) -> T {
        self.ring.read(self.consumer_index().wrapping_add(i))
    }

    /// True when the other side asked to be woken (the AF_XDP need_wakeup flag).
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }

    /// `needs_wakeup` for a ring whose consumer sets the flag (`Consumer::set_needs_wakeup`):
    /// orders the flag's read after the last `submit`'s index store.
    #[inline]
    pub fn needs_wakeup_after_submit(&self) -> bool {
        std::sync::atomic::fence(Ordering::SeqCst);
        self.ring.needs_wakeup()
    }
}

impl<T: Copy> Consumer<T> {
    /// Takes the consumer role over `ring`.
    pub fn new(ring: RawRing<T>) -> Consumer<T> {
        let cached_cons = ring.consumer().load(Ordering::Relaxed);
        let cached_prod = ring.producer().load(Ordering::Acquire);
        Consumer {
            ring,
            cached_prod,
            cached_cons,
        }
    }

    pub fn size(&self) -> u32 {
        self.ring.size()
    }

    /// Entries ready to read, up to `n`, refreshing the producer index only when fewer than
    /// `n` are known to be ready.
    #[inline]
    pub fn peek(&mut self, n: u32) -> u32 {
        let mut ready = self.cached_prod.wrapping_sub(self.cached_cons);
        if ready < n {
            // Acquire: entries the producer published are visible after this load.
            self.cached_prod = self.ring.producer().load(Ordering::Acquire);
            ready = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        // A lying producer index (more entries than the ring holds) is capped.
        ready.min(n).min(self.ring.size())
    }

    /// Reads the `i`-th peeked entry.
    #[inline]
    pub fn read(&self, i: u32) -> T {
        self.ring.read(self.cached_cons.wrapping_add(i))
    }

    /// Gives `n` read entries back to the producer.
    #[inline]
    pub fn release(&mut self, n: u32) {
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // Release: our reads of the entries happen before the producer may overwrite them.
        self.ring
            .consumer()
            .store(self.cached_cons, Ordering::Release);
    }

    /// Our consumer index (free-running).
    pub fn consumer_index(&self) -> u32 {
        self.cached_cons
    }

    /// The producer index as the other side has published it now.
    pub fn producer_index(&self) -> u32 {
        self.ring.producer().load(Ordering::Acquire)
    }

    /// True when the other side asked to be woken.
    #[inline]
    pub fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }

    /// Asks the producer to wake us after its next submit (or stops asking). After asking,
    /// `peek` again before sleeping: an entry submitted before the producer could see the
    /// flag is already in the ring.
    #[inline]
    pub fn set_needs_wakeup(&self, on: bool) {
        self.ring.set_needs_wakeup(on)
    }
}
