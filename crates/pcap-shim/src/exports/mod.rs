//! The libpcap entry points we take over. Each one asks whether its `pcap_t` (or device
//! name) is ours; when it is not, the real libpcap's function gets the call unchanged.
//!
//! The functions are not `pub`: `#[unsafe(no_mangle)]` exports them from the library all
//! the same, and they are only ever called from C, with pcap.h's contract.

mod devices;
mod dump;
mod info;
mod lifecycle;
mod reading;
mod sending;
mod settings;

use std::ffi::{CStr, c_char};

use crate::ffi::{PCAP_ERROR, PCAP_ERROR_NOT_ACTIVATED};
use crate::handle::{Busy, Handle, LiveGuard};

/// The device name if it is one of ours (`xdp:...`).
fn xdp_device(name: *const c_char) -> Option<String> {
    if name.is_null() {
        return None;
    }
    // SAFETY: libpcap's API passes device names as NUL-terminated strings that live for
    // the call.
    let name = unsafe { CStr::from_ptr(name) }.to_str().ok()?;
    name.starts_with("xdp:").then(|| name.to_string())
}

/// The handle's port, for a call that needs it (waiting while another thread uses it):
/// PCAP_ERROR_NOT_ACTIVATED before pcap_activate, PCAP_ERROR when a signal handler calls
/// in while its thread uses it.
pub(crate) fn live_of(h: &Handle) -> Result<LiveGuard<'_>, i32> {
    h.live().map_err(|busy| match busy {
        Busy::NotActivated => {
            h.set_error(&format!("{}: the handle is not activated", h.device));
            PCAP_ERROR_NOT_ACTIVATED
        }
        Busy::ThisThread => {
            h.set_error(&format!(
                "{}: the handle is in use by the call this signal handler interrupted",
                h.device
            ));
            PCAP_ERROR
        }
    })
}

/// The libpcap answer to a setting changed after activation.
fn refuse_activated(h: &Handle) -> i32 {
    h.set_error("can't perform operation on activated capture");
    crate::ffi::PCAP_ERROR_ACTIVATED
}

/// An array of one int, allocated as libpcap allocates the lists it returns (the program
/// frees it with pcap_free_datalinks / pcap_free_tstamp_types, which call free()).
fn one_int_list(out: *mut *mut libc::c_int, value: libc::c_int) -> libc::c_int {
    if out.is_null() {
        return PCAP_ERROR;
    }
    // SAFETY: malloc of one int; checked for NULL below.
    let list = unsafe { libc::malloc(std::mem::size_of::<libc::c_int>()) }.cast::<libc::c_int>();
    if list.is_null() {
        return PCAP_ERROR;
    }
    // SAFETY: `list` holds one int; `out` is the caller's pointer to fill.
    unsafe {
        *list = value;
        *out = list;
    }
    1
}
