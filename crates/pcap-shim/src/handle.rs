//! One `xdp:` handle: the settings a program makes before `pcap_activate`, and the open port
//! after it.

use std::ffi::c_char;
use std::ops::{Deref, DerefMut};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, TryLockError};

use wirespeed_port::PortSpec;

use crate::ffi::{MAXIMUM_SNAPLEN, PCAP_ERRBUF_SIZE, PCAP_TSTAMP_PRECISION_MICRO, PcapT};
use crate::live::Live;
use crate::real;
use crate::registry::Slot;

/// What `pcap_set_*` asked for.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    pub snaplen: i32,
    pub promisc: bool,
    pub timeout_ms: i32,
    pub buffer_size: i32,
    pub precision: i32,
    pub rfmon: bool,
    pub nonblock: bool,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            snaplen: MAXIMUM_SNAPLEN,
            promisc: false,
            timeout_ms: 0,
            buffer_size: 0,
            precision: PCAP_TSTAMP_PRECISION_MICRO,
            rfmon: false,
            nonblock: false,
        }
    }
}

impl Settings {
    /// The snapshot length in effect: libpcap takes 0, a negative or a too large one as its
    /// largest.
    pub fn snapshot(&self) -> u32 {
        if self.snaplen <= 0 || self.snaplen > MAXIMUM_SNAPLEN {
            MAXIMUM_SNAPLEN as u32
        } else {
            self.snaplen as u32
        }
    }
}

/// What pcap_stats reads, kept where any thread may read it while another reads packets
/// (tcpdump asks from its SIGUSR1 handler, other programs from a thread of their own): the
/// packets that passed the filter, and the port's sockets, whose kernel counters it asks.
#[derive(Debug, Default)]
pub struct Counts {
    matched: AtomicU64,
    pub sockets: OnceLock<Vec<RawFd>>,
}

impl Counts {
    pub fn count_match(&self) {
        self.matched.fetch_add(1, Ordering::Relaxed);
    }

    pub fn matched(&self) -> u64 {
        self.matched.load(Ordering::Relaxed)
    }
}

/// The libpcap handle under ours (see [`Handle`]).
pub struct DeadHandle(pub *mut PcapT);

// SAFETY: a dead libpcap handle holds no state of a capture; we only read its errbuf's
// address (pcap_geterr) and close it, once, in pcap_close. Two threads whose calls on one
// handle fail at once (a reader's poll and a sender's full ring) write its error at once,
// as two threads' calls on one of libpcap's own handles do: the text may be mixed, never
// longer than the buffer or unterminated (each write ends within it with a NUL).
unsafe impl Send for DeadHandle {}
// SAFETY: as for Send.
unsafe impl Sync for DeadHandle {}

/// An `xdp:` handle. Its `pcap_t` is a dead handle of the real libpcap, so that calls we
/// leave to libpcap (pcap_compile, pcap_freecode, ...) see a valid one: Ethernet, and
/// libpcap's largest snapshot.
///
/// Any thread may call in at once, as with libpcap (a reader in `pcap_loop`, a sender in
/// `pcap_inject`, a signal handler's `pcap_breakloop`, `pcap_stats` or `pcap_close`), so
/// the handle is `Sync` and the port is behind a lock that no read holds while it waits.
pub struct Handle {
    pub dead: DeadHandle,
    /// As the program named it (`xdp:veth1@all`).
    pub device: String,
    pub spec: PortSpec,
    settings: Mutex<Settings>,
    live: Mutex<Option<Live>>,
    /// The thread holding `live` ([`thread_mark`]; 0: none), so that a call from a signal
    /// handler that interrupted it is refused where it would wait for ever.
    holder: AtomicUsize,
    /// Set once pcap_activate succeeded (read without taking `live`).
    pub activated: AtomicBool,
    /// A read (pcap_loop, pcap_dispatch, pcap_next, pcap_next_ex) is running, from its
    /// start to its end: a read from inside its callback is refused, and a close (from a
    /// signal handler, or another thread) only breaks it.
    pub reading: AtomicBool,
    /// pcap_inject and pcap_sendpacket calls running (on any threads): a close meanwhile is
    /// put off.
    pub sending: AtomicUsize,
    /// Filters set so far: a read hands over what it picked under the filter in force.
    pub filters_set: AtomicU64,
    pub counts: Counts,
    /// pcap_get_selectable_fd's answer (-1 before activation), kept outside `live` so a
    /// callback can ask too.
    pub selectable: AtomicI32,
    pub slot: &'static Slot,
}

/// The compiler checks what the registry's raw pointers hide: a handle may be shared.
const _: fn() = || {
    fn shared<T: Sync + Send>() {}
    shared::<Handle>();
};

/// Why the port could not be had.
pub enum Busy {
    /// pcap_activate has not succeeded.
    NotActivated,
    /// This very thread holds it: a signal handler called in while it was in use.
    ThisThread,
}

/// The port, held: [`Handle::live`].
pub struct LiveGuard<'a> {
    guard: Option<MutexGuard<'a, Option<Live>>>,
    holder: &'a AtomicUsize,
}

impl Deref for LiveGuard<'_> {
    type Target = Live;
    fn deref(&self) -> &Live {
        self.guard
            .as_ref()
            .and_then(|g| g.as_ref())
            .expect("held only when activated")
    }
}

impl DerefMut for LiveGuard<'_> {
    fn deref_mut(&mut self) -> &mut Live {
        self.guard
            .as_mut()
            .and_then(|g| g.as_mut())
            .expect("held only when activated")
    }
}

impl Drop for LiveGuard<'_> {
    /// Lets go first, then takes the note of its holder back if it is still this thread's:
    /// a signal handler landing between the two finds the lock free.
    fn drop(&mut self) {
        drop(self.guard.take());
        let mark = thread_mark();
        let _ = self
            .holder
            .compare_exchange(mark, 0, Ordering::SeqCst, Ordering::SeqCst);
    }
}

/// An address that names the calling thread while it lives: no system call, nothing to
/// set up, safe to ask from a signal handler.
fn thread_mark() -> usize {
    thread_local! {
        static MARK: u8 = const { 0 };
    }
    MARK.with(|m| std::ptr::from_ref(m) as usize)
}

impl Handle {
    pub fn new(dead: *mut PcapT, device: String, spec: PortSpec, slot: &'static Slot) -> Handle {
        Handle {
            dead: DeadHandle(dead),
            device,
            spec,
            settings: Mutex::new(Settings::default()),
            live: Mutex::new(None),
            holder: AtomicUsize::new(0),
            activated: AtomicBool::new(false),
            reading: AtomicBool::new(false),
            sending: AtomicUsize::new(0),
            filters_set: AtomicU64::new(0),
            counts: Counts::default(),
            selectable: AtomicI32::new(-1),
            slot,
        }
    }

    pub fn activated(&self) -> bool {
        self.activated.load(Ordering::Acquire)
    }

    /// The port, once activated: waits while another thread uses it (between its
    /// packets, never across a wait for more), refused when this thread holds it already
    /// (a signal handler's call). A handler's call that lands in the instant between the
    /// lock and the note of its holder would wait for ever, as would one that reads the
    /// settings while its thread does: of the calls a handler makes, pcap_close never waits
    /// ([`Handle::live_now`]), and pcap_breakloop and pcap_stats take neither.
    pub fn live(&self) -> Result<LiveGuard<'_>, Busy> {
        let guard = match self.live.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::WouldBlock)
                if self.holder.load(Ordering::SeqCst) == thread_mark() =>
            {
                return Err(Busy::ThisThread);
            }
            Err(TryLockError::WouldBlock) => self.live.lock().unwrap_or_else(|p| p.into_inner()),
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
        };
        self.held(guard)
    }

    /// The port if no call holds it now (pcap_close, which must not wait: it may run in a
    /// signal handler that interrupted the holder).
    pub fn live_now(&self) -> Option<Result<LiveGuard<'_>, Busy>> {
        match self.live.try_lock() {
            Ok(guard) => Some(self.held(guard)),
            Err(TryLockError::Poisoned(p)) => Some(self.held(p.into_inner())),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    fn held<'a>(&'a self, guard: MutexGuard<'a, Option<Live>>) -> Result<LiveGuard<'a>, Busy> {
        if guard.is_none() {
            return Err(Busy::NotActivated);
        }
        self.holder.store(thread_mark(), Ordering::SeqCst);
        Ok(LiveGuard {
            guard: Some(guard),
            holder: &self.holder,
        })
    }

    /// Puts the port of a successful pcap_activate in.
    pub fn set_live(&self, live: Live) {
        *self.live.lock().unwrap_or_else(|p| p.into_inner()) = Some(live);
    }

    /// The settings now.
    pub fn settings(&self) -> Settings {
        *self.settings.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Puts `message` where `pcap_geterr` finds it (the dead handle's own errbuf).
    pub fn set_error(&self, message: &str) {
        // SAFETY: `dead` is a live libpcap handle; pcap_geterr returns its errbuf.
        let errbuf = unsafe { real::pcap_geterr(self.dead.0) };
        write_errbuf(errbuf, message);
    }

    /// `settings`, changed by `change`: for the `pcap_set_*` calls.
    pub fn update(&self, change: impl FnOnce(&mut Settings)) {
        change(&mut self.settings.lock().unwrap_or_else(|p| p.into_inner()));
    }
}

/// Writes `message` into a caller's PCAP_ERRBUF_SIZE buffer, cut to fit, NUL-terminated.
pub fn write_errbuf(errbuf: *mut c_char, message: &str) {
    if errbuf.is_null() {
        return;
    }
    let bytes = message.as_bytes();
    let n = bytes.len().min(PCAP_ERRBUF_SIZE - 1);
    // SAFETY: libpcap's API gives every errbuf PCAP_ERRBUF_SIZE bytes; n + 1 fit.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), errbuf.cast::<u8>(), n);
        *errbuf.add(n) = 0;
    }
}
