//! One `xdp:` handle: the settings a program makes before `pcap_activate`, and the open port
//! after it.

use std::cell::{Cell, RefCell};
use std::ffi::c_char;
use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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

/// An `xdp:` handle. Its `pcap_t` is a dead handle of the real libpcap, so that calls we
/// leave to libpcap (pcap_compile, pcap_freecode, ...) see a valid one: Ethernet, and
/// libpcap's largest snapshot.
pub struct Handle {
    pub dead: *mut PcapT,
    /// As the program named it (`xdp:veth1@all`).
    pub device: String,
    pub spec: PortSpec,
    pub settings: Cell<Settings>,
    pub live: RefCell<Option<Live>>,
    /// Set once pcap_activate succeeded (read without borrowing `live`).
    pub activated: AtomicBool,
    /// A read is running: a read from inside its callback is refused, and a close (from a
    /// signal handler, or another thread) only breaks it. Atomic, as that close may come
    /// from another thread.
    pub reading: AtomicBool,
    pub counts: Counts,
    /// pcap_get_selectable_fd's answer (-1 before activation), kept outside `live` so a
    /// callback can ask too.
    pub selectable: Cell<i32>,
    pub slot: &'static Slot,
}

impl Handle {
    pub fn activated(&self) -> bool {
        self.activated.load(Ordering::Acquire)
    }

    /// Puts `message` where `pcap_geterr` finds it (the dead handle's own errbuf).
    pub fn set_error(&self, message: &str) {
        // SAFETY: `dead` is a live libpcap handle; pcap_geterr returns its errbuf.
        let errbuf = unsafe { real::pcap_geterr(self.dead) };
        write_errbuf(errbuf, message);
    }

    /// `settings`, changed by `change`: for the `pcap_set_*` calls.
    pub fn update(&self, change: impl FnOnce(&mut Settings)) {
        let mut s = self.settings.get();
        change(&mut s);
        self.settings.set(s);
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
