//! Reading: pcap_loop, pcap_dispatch, pcap_next, pcap_next_ex, pcap_breakloop, the
//! selectable descriptor, and the filter.

use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;

use wirespeed_capture::filter::{Insn, Program};

use super::live_of;
use crate::ffi::{BpfProgram, PCAP_ERROR, PcapHandler, PcapPkthdr, PcapT};
use crate::handle::Handle;
use crate::receive::Deliver;
use crate::{real, receive, registry};

/// Runs `read` with a deliverer that calls the program's callback.
fn with_callback(
    h: &Handle,
    callback: PcapHandler,
    user: *mut u8,
    read: impl FnOnce(&Handle, &mut Deliver<'_>) -> c_int,
) -> c_int {
    let Some(callback) = callback else {
        h.set_error(&format!("{}: no callback given", h.device));
        return PCAP_ERROR;
    };
    let mut deliver = |hdr: &PcapPkthdr, bytes: *const u8| {
        // SAFETY: the program's own callback, with its user pointer, a header that lives
        // for the call and the packet's bytes (caplen of them) in their frame.
        unsafe { callback(user, hdr, bytes) }
    };
    read(h, &mut deliver)
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_loop(
    p: *mut PcapT,
    cnt: c_int,
    callback: PcapHandler,
    user: *mut u8,
) -> c_int {
    match registry::find(p) {
        Some(h) => with_callback(h, callback, user, |h, deliver| {
            receive::run_loop(h, cnt, deliver)
        }),
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_loop(p, cnt, callback, user) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_dispatch(
    p: *mut PcapT,
    cnt: c_int,
    callback: PcapHandler,
    user: *mut u8,
) -> c_int {
    match registry::find(p) {
        Some(h) => with_callback(h, callback, user, |h, deliver| {
            receive::dispatch(h, cnt, deliver)
        }),
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_dispatch(p, cnt, callback, user) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_next_ex(
    p: *mut PcapT,
    header: *mut *mut PcapPkthdr,
    data: *mut *const u8,
) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_next_ex(p, header, data) };
    };
    let (n, packet) = receive::next_one(h);
    if let Some((hdr, bytes)) = packet
        && !header.is_null()
        && !data.is_null()
    {
        // SAFETY: the caller's out pointers; what they get points into the handle's boxed
        // state, where it stays until the next read (libpcap's promise, too).
        unsafe {
            *header = hdr;
            *data = bytes;
        }
    }
    n
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_next(p: *mut PcapT, header: *mut PcapPkthdr) -> *const u8 {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_next(p, header) };
    };
    let (1, Some((hdr, bytes))) = receive::next_one(h) else {
        return std::ptr::null();
    };
    if !header.is_null() {
        // SAFETY: the caller's header to fill; `hdr` is the handle's copy of the packet's,
        // written by the read that just returned.
        unsafe { *header = *hdr };
    }
    bytes
}

/// Safe in a signal handler: atomics and a write(2) to the loop's eventfd.
#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_breakloop(p: *mut PcapT) {
    match registry::slot_of(p) {
        Some(slot) => slot.request_break(),
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_breakloop(p) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_get_selectable_fd(p: *mut PcapT) -> c_int {
    match registry::find(p) {
        Some(h) => h.selectable.load(Ordering::SeqCst),
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_get_selectable_fd(p) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_fileno(p: *mut PcapT) -> c_int {
    match registry::find(p) {
        Some(h) => h.selectable.load(Ordering::SeqCst),
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_fileno(p) },
    }
}

/// As libpcap, a filter compiles for an activated handle only (its link type and snapshot
/// are known then); the real libpcap would compile one for our dead handle at any time.
#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_compile(
    p: *mut PcapT,
    fp: *mut BpfProgram,
    text: *const c_char,
    optimize: c_int,
    netmask: u32,
) -> c_int {
    if let Some(h) = registry::find(p)
        && !h.activated()
    {
        h.set_error("not-yet-activated pcap_t passed to pcap_compile");
        return PCAP_ERROR;
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { real::pcap_compile(p, fp, text, optimize, netmask) }
}

/// A filter compiled by the real libpcap (pcap_compile on our dead Ethernet handle), run
/// over each packet in user space: AF_XDP has no socket filter.
#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_setfilter(p: *mut PcapT, fp: *mut BpfProgram) -> c_int {
    let Some(h) = registry::find(p) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_setfilter(p, fp) };
    };
    // SAFETY: a program from pcap_compile: bf_len instructions at bf_insns.
    let insns: Vec<Insn> = match unsafe { fp.as_ref() } {
        Some(prog) if !prog.bf_insns.is_null() => {
            // SAFETY: as above.
            let raw = unsafe { std::slice::from_raw_parts(prog.bf_insns, prog.bf_len as usize) };
            raw.iter()
                .map(|i| Insn::new(i.code, i.jt, i.jf, i.k))
                .collect()
        }
        _ => {
            h.set_error(&format!("{}: no filter program given", h.device));
            return PCAP_ERROR;
        }
    };
    let program = match Program::new(&insns) {
        Ok(p) => p,
        Err(e) => {
            h.set_error(&format!("{}: filter refused: {e}", h.device));
            return PCAP_ERROR;
        }
    };
    match live_of(h) {
        Ok(mut live) => {
            // tcpdump without an expression sets "accept everything": not worth a run a
            // packet.
            let whole = h.settings().snapshot();
            live.filter = (!accepts_all(&insns, whole)).then_some(program);
            h.filters_set.fetch_add(1, Ordering::SeqCst);
            0
        }
        Err(code) => code,
    }
}

/// A program of one `ret #K` that keeps every packet as the snapshot cuts it (K at least
/// the snapshot: pcap_compile asks the handle for it, so `-s 96` compiles `ret #96`).
fn accepts_all(insns: &[Insn], snapshot: u32) -> bool {
    const BPF_RET_K: u16 = 0x06;
    matches!(insns, [only] if only.code == BPF_RET_K && only.k >= snapshot)
}
