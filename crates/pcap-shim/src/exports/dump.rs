//! pcap_dump_open and pcap_dump_fopen: the file header carries the handle's snapshot and
//! time stamp precision, which our dead handle does not know (it was made before they were
//! set). A dead handle made with them writes the header; the dumper is the file alone.

use std::ffi::c_char;

use crate::ffi::{DLT_EN10MB, PcapT};
use crate::handle::Handle;
use crate::{real, registry};

/// Calls `open` with a dead handle that has `h`'s snapshot and precision.
fn with_header_handle(
    h: &Handle,
    open: impl FnOnce(*mut PcapT) -> *mut libc::c_void,
) -> *mut libc::c_void {
    let s = h.settings();
    // SAFETY: plain values; the handle is closed below.
    let header = unsafe {
        real::pcap_open_dead_with_tstamp_precision(
            DLT_EN10MB,
            s.snapshot() as i32,
            s.precision as u32,
        )
    };
    if header.is_null() {
        h.set_error(&format!("{}: libpcap could not make a handle", h.device));
        return std::ptr::null_mut();
    }
    let dumper = open(header);
    if dumper.is_null() {
        // SAFETY: `header` is live; its errbuf says why the open failed.
        let why = unsafe { std::ffi::CStr::from_ptr(real::pcap_geterr(header)) };
        h.set_error(&why.to_string_lossy());
    }
    // SAFETY: made above, used only here.
    unsafe { real::pcap_close(header) };
    dumper
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_dump_open(p: *mut PcapT, fname: *const c_char) -> *mut libc::c_void {
    match registry::find(p) {
        // SAFETY: the caller's file name, with a live handle.
        Some(h) => with_header_handle(h, |header| unsafe { real::pcap_dump_open(header, fname) }),
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_dump_open(p, fname) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_dump_fopen(p: *mut PcapT, fp: *mut libc::FILE) -> *mut libc::c_void {
    match registry::find(p) {
        // SAFETY: the caller's stream, with a live handle.
        Some(h) => with_header_handle(h, |header| unsafe { real::pcap_dump_fopen(header, fp) }),
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_dump_fopen(p, fp) },
    }
}
