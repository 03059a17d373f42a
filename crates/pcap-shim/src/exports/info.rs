//! What a handle is: link type, snapshot, time stamp precision and types, and pcap_stats.
//! (pcap_geterr needs no taking over: our messages are in the dead handle's own errbuf.)

use std::ffi::c_int;

use super::one_int_list;
use crate::ffi::{DLT_EN10MB, PCAP_ERROR_NOT_ACTIVATED, PCAP_TSTAMP_HOST, PcapStat, PcapT};
use crate::handle::Handle;
use crate::{real, registry};

/// `value` once activated; libpcap's "not activated" before.
fn once_activated(h: &Handle, value: c_int) -> c_int {
    if h.activated() {
        value
    } else {
        h.set_error(&format!("{}: the handle is not activated", h.device));
        PCAP_ERROR_NOT_ACTIVATED
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_datalink(p: *mut PcapT) -> c_int {
    match registry::find(p) {
        Some(h) => once_activated(h, DLT_EN10MB),
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_datalink(p) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_list_datalinks(p: *mut PcapT, dlts: *mut *mut c_int) -> c_int {
    match registry::find(p) {
        Some(h) => match once_activated(h, 0) {
            0 => one_int_list(dlts, DLT_EN10MB),
            code => code,
        },
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_list_datalinks(p, dlts) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_snapshot(p: *mut PcapT) -> c_int {
    match registry::find(p) {
        Some(h) => once_activated(h, h.settings().snapshot() as c_int),
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_snapshot(p) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_get_tstamp_precision(p: *mut PcapT) -> c_int {
    match registry::find(p) {
        Some(h) => h.settings().precision,
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_get_tstamp_precision(p) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_list_tstamp_types(p: *mut PcapT, types: *mut *mut c_int) -> c_int {
    match registry::find(p) {
        Some(_) => one_int_list(types, PCAP_TSTAMP_HOST),
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_list_tstamp_types(p, types) },
    }
}

/// ps_drop: the packets the kernel had for us and could not give (XDP statistics: no
/// frame in the fill ring, receive ring full, other); ps_recv: those that passed the filter
/// plus those dropped, as on Linux, where the kernel counts its drops among the packets
/// received; ps_ifdrop: fill-ring descriptors the kernel refused. The filter runs in user
/// space, so a dropped packet counts whether it would have matched or not. Read from the
/// kernel each time, without the port: any thread may ask while another reads.
#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_stats(p: *mut PcapT, ps: *mut PcapStat) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_stats(p, ps) };
    };
    if once_activated(h, 0) != 0 {
        return PCAP_ERROR_NOT_ACTIVATED;
    }
    let (mut dropped, mut refused) = (0u64, 0u64);
    for &fd in h.counts.sockets.get().map_or(&[][..], Vec::as_slice) {
        if let Some(k) = kernel_statistics(fd) {
            // rx_dropped includes the drops for want of a fill-ring frame.
            dropped += k.rx_dropped + k.rx_ring_full;
            refused += k.rx_invalid_descs;
        }
    }
    let stat = PcapStat {
        // libpcap's counters are 32 bits and wrap.
        ps_recv: (h.counts.matched() + dropped) as u32,
        ps_drop: dropped as u32,
        ps_ifdrop: refused as u32,
    };
    if !ps.is_null() {
        // SAFETY: the caller's pcap_stat to fill.
        unsafe { *ps = stat };
    }
    0
}

/// The kernel's counters of an AF_XDP socket (XDP_STATISTICS).
fn kernel_statistics(fd: std::os::fd::RawFd) -> Option<libc::xdp_statistics> {
    // SAFETY: all-zero is a valid xdp_statistics (plain counters).
    let mut stats: libc::xdp_statistics = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `stats`, which has that many.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            (&raw mut stats).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(stats)
}
