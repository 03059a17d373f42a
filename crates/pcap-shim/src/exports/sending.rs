//! pcap_inject and pcap_sendpacket: into the port's transmit ring.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use super::live_of;
use crate::ffi::{PCAP_ERROR, PcapT};
use crate::handle::Handle;
use crate::{real, registry, send};

/// Sends `size` bytes at `buf`: the byte count, or PCAP_ERROR with the reason. A close
/// meanwhile (a signal handler's, another thread's) is put off: the call still uses the
/// handle.
fn inject(h: &Handle, buf: *const u8, size: usize) -> c_int {
    h.sending.fetch_add(1, Ordering::SeqCst);
    let sent = inject_marked(h, buf, size);
    h.sending.fetch_sub(1, Ordering::SeqCst);
    sent
}

fn inject_marked(h: &Handle, buf: *const u8, size: usize) -> c_int {
    if buf.is_null() {
        h.set_error(&format!("{}: no packet given", h.device));
        return PCAP_ERROR;
    }
    // As libpcap: an empty frame is the program's mistake, not a frame.
    if size == 0 {
        h.set_error(&format!("{}: a packet of 0 bytes cannot be sent", h.device));
        return PCAP_ERROR;
    }
    // SAFETY: the caller's packet: `size` bytes at `buf`.
    let frame = unsafe { std::slice::from_raw_parts(buf, size) };
    match live_of(h) {
        Ok(mut live) => match send::inject(h, &mut live, frame) {
            Ok(n) => n as c_int,
            Err(message) => {
                h.set_error(&message);
                PCAP_ERROR
            }
        },
        Err(code) => code,
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_inject(p: *mut PcapT, buf: *const c_void, size: usize) -> c_int {
    match registry::find(p) {
        Some(h) => inject(h, buf.cast(), size),
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_inject(p, buf, size) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_sendpacket(p: *mut PcapT, buf: *const u8, size: c_int) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_sendpacket(p, buf, size) };
    };
    if size < 0 {
        h.set_error(&format!("{}: a negative packet size ({size})", h.device));
        return PCAP_ERROR;
    }
    match inject(h, buf, size as usize) {
        n if n >= 0 => 0,
        code => code,
    }
}
