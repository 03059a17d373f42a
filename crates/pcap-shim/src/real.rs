//! The real libpcap's functions, found behind ours with `dlsym(RTLD_NEXT, ...)`: every
//! device that is not `xdp:`, every offline call, and the dead handles ours are built on.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::ffi::{BpfProgram, PcapHandler, PcapIf, PcapPkthdr, PcapStat, PcapT};

/// The address of the next definition of `name` after this library, cached in `cache`.
/// Without one (a program that calls libpcap's API must have libpcap loaded) there is
/// nothing sensible to do but say so and stop.
fn lookup(cache: &AtomicPtr<c_void>, name: &'static [u8]) -> *mut c_void {
    let cached = cache.load(Ordering::Relaxed);
    if !cached.is_null() {
        return cached;
    }
    // SAFETY: `name` is a NUL-terminated symbol name (the macro below appends the NUL);
    // RTLD_NEXT is a valid pseudo-handle for a shared library calling dlsym.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
    if found.is_null() {
        let name = String::from_utf8_lossy(&name[..name.len() - 1]);
        eprintln!("wirespeed pcap shim: the real libpcap's {name} is not loaded; stopping");
        std::process::abort();
    }
    cache.store(found, Ordering::Relaxed);
    found
}

/// One function per libpcap entry point we pass on, each declared with pcap.h's signature,
/// and beside it a module of the same name holding its address once found.
macro_rules! real_functions {
    ($(fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty;)*) => {$(
        pub mod $name {
            pub static ADDR: super::AtomicPtr<super::c_void> =
                super::AtomicPtr::new(std::ptr::null_mut());
        }

        /// The real libpcap's function of this name.
        ///
        /// # Safety
        /// The arguments must be what libpcap's function expects (pcap.h).
        pub unsafe fn $name($($arg: $ty),*) -> $ret {
            let addr = lookup(&$name::ADDR, concat!(stringify!($name), "\0").as_bytes());
            // SAFETY: `addr` is libpcap's own definition of this symbol, whose C signature
            // is the one declared here.
            let f = unsafe {
                std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($ty),*) -> $ret>(addr)
            };
            // SAFETY: the caller passes what the function expects.
            unsafe { f($($arg),*) }
        }
    )*};
}

/// Finds, when the library is loaded, the functions a signal handler may reach through us
/// (tcpdump's calls pcap_breakloop, and pcap_stats for SIGUSR1): dlsym takes the loader's
/// lock and may allocate, which a signal handler must not. A program without libpcap
/// loaded (pcap-run's broker is one) finds none, and never calls them.
pub fn resolve_for_signal_handlers() {
    for (cache, name) in [
        (&pcap_breakloop::ADDR, &b"pcap_breakloop\0"[..]),
        (&pcap_stats::ADDR, &b"pcap_stats\0"[..]),
    ] {
        // SAFETY: as in `lookup`.
        let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr().cast()) };
        if !found.is_null() {
            cache.store(found, Ordering::Relaxed);
        }
    }
}

real_functions! {
    fn pcap_create(source: *const c_char, errbuf: *mut c_char) -> *mut PcapT;
    fn pcap_open_live(device: *const c_char, snaplen: c_int, promisc: c_int, to_ms: c_int, errbuf: *mut c_char) -> *mut PcapT;
    fn pcap_open_dead_with_tstamp_precision(linktype: c_int, snaplen: c_int, precision: u32) -> *mut PcapT;
    fn pcap_activate(p: *mut PcapT) -> c_int;
    fn pcap_close(p: *mut PcapT) -> ();
    fn pcap_set_snaplen(p: *mut PcapT, snaplen: c_int) -> c_int;
    fn pcap_set_promisc(p: *mut PcapT, promisc: c_int) -> c_int;
    fn pcap_set_timeout(p: *mut PcapT, ms: c_int) -> c_int;
    fn pcap_set_buffer_size(p: *mut PcapT, size: c_int) -> c_int;
    fn pcap_set_immediate_mode(p: *mut PcapT, on: c_int) -> c_int;
    fn pcap_set_tstamp_type(p: *mut PcapT, kind: c_int) -> c_int;
    fn pcap_set_tstamp_precision(p: *mut PcapT, precision: c_int) -> c_int;
    fn pcap_get_tstamp_precision(p: *mut PcapT) -> c_int;
    fn pcap_list_tstamp_types(p: *mut PcapT, types: *mut *mut c_int) -> c_int;
    fn pcap_set_rfmon(p: *mut PcapT, on: c_int) -> c_int;
    fn pcap_can_set_rfmon(p: *mut PcapT) -> c_int;
    fn pcap_loop(p: *mut PcapT, cnt: c_int, callback: PcapHandler, user: *mut u8) -> c_int;
    fn pcap_dispatch(p: *mut PcapT, cnt: c_int, callback: PcapHandler, user: *mut u8) -> c_int;
    fn pcap_next(p: *mut PcapT, h: *mut PcapPkthdr) -> *const u8;
    fn pcap_next_ex(p: *mut PcapT, h: *mut *mut PcapPkthdr, data: *mut *const u8) -> c_int;
    fn pcap_breakloop(p: *mut PcapT) -> ();
    fn pcap_get_selectable_fd(p: *mut PcapT) -> c_int;
    fn pcap_fileno(p: *mut PcapT) -> c_int;
    fn pcap_setnonblock(p: *mut PcapT, nonblock: c_int, errbuf: *mut c_char) -> c_int;
    fn pcap_getnonblock(p: *mut PcapT, errbuf: *mut c_char) -> c_int;
    fn pcap_setfilter(p: *mut PcapT, fp: *mut BpfProgram) -> c_int;
    fn pcap_compile(p: *mut PcapT, fp: *mut BpfProgram, text: *const c_char, optimize: c_int, netmask: u32) -> c_int;
    fn pcap_setdirection(p: *mut PcapT, d: c_int) -> c_int;
    fn pcap_stats(p: *mut PcapT, ps: *mut PcapStat) -> c_int;
    fn pcap_inject(p: *mut PcapT, buf: *const c_void, size: usize) -> c_int;
    fn pcap_sendpacket(p: *mut PcapT, buf: *const u8, size: c_int) -> c_int;
    fn pcap_datalink(p: *mut PcapT) -> c_int;
    fn pcap_list_datalinks(p: *mut PcapT, dlts: *mut *mut c_int) -> c_int;
    fn pcap_set_datalink(p: *mut PcapT, dlt: c_int) -> c_int;
    fn pcap_snapshot(p: *mut PcapT) -> c_int;
    fn pcap_geterr(p: *mut PcapT) -> *mut c_char;
    fn pcap_findalldevs(alldevs: *mut *mut PcapIf, errbuf: *mut c_char) -> c_int;
    fn pcap_lookupnet(device: *const c_char, net: *mut u32, mask: *mut u32, errbuf: *mut c_char) -> c_int;
    fn pcap_dump_open(p: *mut PcapT, fname: *const c_char) -> *mut c_void;
    fn pcap_dump_fopen(p: *mut PcapT, fp: *mut libc::FILE) -> *mut c_void;
}
