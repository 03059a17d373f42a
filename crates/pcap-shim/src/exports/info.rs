//! What a handle is: link type, snapshot, time stamp precision and types, and pcap_stats.
//! (pcap_geterr needs no taking over: our messages are in the dead handle's own errbuf.)

use std::ffi::c_int;

use super::one_int_list;
use crate::ffi::{DLT_EN10MB, PCAP_ERROR_NOT_ACTIVATED, PCAP_TSTAMP_HOST, PcapStat, PcapT};
use crate::handle::Handle;
use crate::{real, receive, registry};

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
        Some(h) => once_activated(h, h.settings.get().snapshot() as c_int),
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_snapshot(p) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_get_tstamp_precision(p: *mut PcapT) -> c_int {
    match registry::find(p) {
        Some(h) => h.settings.get().precision,
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

/// ps_drop: the packets the kernel had for us and could not give (XDP statistics: fill
/// ring empty, receive ring full, other); ps_recv: those that passed the filter plus those
/// dropped, as on Linux, where the kernel counts its drops among the packets received;
/// ps_ifdrop: descriptors wirespeed refused. The filter runs in user space, so a dropped
/// packet counts whether it would have matched or not.
#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_stats(p: *mut PcapT, ps: *mut PcapStat) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_stats(p, ps) };
    };
    if once_activated(h, 0) != 0 {
        return PCAP_ERROR_NOT_ACTIVATED;
    }
    // From inside a callback (tcpdump's SIGUSR1 report) the port is busy: the counts as
    // last read then.
    if let Ok(mut guard) = h.live.try_borrow_mut()
        && let Some(live) = guard.as_mut()
    {
        receive::refresh_drops(h, live);
    }
    let c = &h.counts;
    let stat = PcapStat {
        // libpcap's counters are 32 bits and wrap.
        ps_recv: (c.matched.get() + c.kernel_drops.get()) as u32,
        ps_drop: c.kernel_drops.get() as u32,
        ps_ifdrop: c.invalid.get() as u32,
    };
    if !ps.is_null() {
        // SAFETY: the caller's pcap_stat to fill.
        unsafe { *ps = stat };
    }
    0
}
