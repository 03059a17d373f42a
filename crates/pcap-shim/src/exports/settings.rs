//! The pcap_set_* calls, and the other knobs: non-blocking mode, direction, link type, time
//! stamps, monitor mode. Settings that only make sense before activation are refused after
//! it, as libpcap refuses them.

use std::ffi::{c_char, c_int};

use super::refuse_activated;
use crate::ffi::{
    DLT_EN10MB, PCAP_D_IN, PCAP_ERROR, PCAP_ERROR_TSTAMP_PRECISION_NOTSUP, PCAP_TSTAMP_HOST,
    PCAP_TSTAMP_PRECISION_MICRO, PCAP_TSTAMP_PRECISION_NANO, PCAP_WARNING_TSTAMP_TYPE_NOTSUP,
    PcapT,
};
use crate::handle::{Handle, Settings};
use crate::{real, registry};

/// For a setting made before activation: stores it, or refuses it after activation.
fn before_activation(h: &Handle, change: impl FnOnce(&mut Settings)) -> c_int {
    if h.activated() {
        return refuse_activated(h);
    }
    h.update(change);
    0
}

/// Defines a pcap_set_* call that stores an int setting of ours, or passes the call on.
macro_rules! setting {
    ($name:ident, |$s:ident, $v:ident| $store:expr) => {
        #[unsafe(no_mangle)]
        unsafe extern "C" fn $name(p: *mut PcapT, $v: c_int) -> c_int {
            match registry::find(p) {
                Some(h) => before_activation(h, |$s| $store),
                // SAFETY: the caller's arguments, passed on.
                None => unsafe { real::$name(p, $v) },
            }
        }
    };
}

setting!(pcap_set_snaplen, |s, v| s.snaplen = v);
setting!(pcap_set_promisc, |s, v| s.promisc = v != 0);
setting!(pcap_set_timeout, |s, v| s.timeout_ms = v);
setting!(pcap_set_buffer_size, |s, v| s.buffer_size = v);
// Accepted, and nothing to store: every burst is handed over as soon as it is read.
setting!(pcap_set_immediate_mode, |_s, _on| ());
// Stored so that pcap_activate says PCAP_ERROR_RFMON_NOTSUP, as libpcap does.
setting!(pcap_set_rfmon, |s, v| s.rfmon = v != 0);

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_can_set_rfmon(p: *mut PcapT) -> c_int {
    match registry::find(p) {
        Some(_) => 0,
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_can_set_rfmon(p) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_set_tstamp_precision(p: *mut PcapT, precision: c_int) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_set_tstamp_precision(p, precision) };
    };
    if h.activated() {
        return refuse_activated(h);
    }
    match precision {
        PCAP_TSTAMP_PRECISION_MICRO | PCAP_TSTAMP_PRECISION_NANO => {
            h.update(|s| s.precision = precision);
            0
        }
        _ => PCAP_ERROR_TSTAMP_PRECISION_NOTSUP,
    }
}

/// Time stamps come from the host's clock when a burst arrives: "host" is the only type.
#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_set_tstamp_type(p: *mut PcapT, kind: c_int) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_set_tstamp_type(p, kind) };
    };
    match (h.activated(), kind) {
        (true, _) => refuse_activated(h),
        (false, PCAP_TSTAMP_HOST) => 0,
        (false, _) => PCAP_WARNING_TSTAMP_TYPE_NOTSUP,
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_setnonblock(
    p: *mut PcapT,
    nonblock: c_int,
    errbuf: *mut c_char,
) -> c_int {
    match registry::find(p) {
        Some(h) => {
            h.update(|s| s.nonblock = nonblock != 0);
            0
        }
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_setnonblock(p, nonblock, errbuf) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_getnonblock(p: *mut PcapT, errbuf: *mut c_char) -> c_int {
    match registry::find(p) {
        Some(h) => h.settings().nonblock as c_int,
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_getnonblock(p, errbuf) },
    }
}

/// AF_XDP sees what the interface receives, never what it sends.
#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_setdirection(p: *mut PcapT, direction: c_int) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_setdirection(p, direction) };
    };
    if direction == PCAP_D_IN {
        return 0;
    }
    let asked = if direction == 0 { "in and out" } else { "out" };
    h.set_error(&format!(
        "{}: AF_XDP captures received packets only: direction {asked} is not supported (use -Q in)",
        h.device
    ));
    PCAP_ERROR
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_set_datalink(p: *mut PcapT, dlt: c_int) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_set_datalink(p, dlt) };
    };
    if dlt == DLT_EN10MB {
        return 0;
    }
    h.set_error(&format!(
        "{}: data link type {dlt} is not supported (only EN10MB, Ethernet)",
        h.device
    ));
    PCAP_ERROR
}
