//! pcap_create, pcap_open_live, pcap_activate, pcap_close.

use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;

use wirespeed_port::PortSpec;

use super::xdp_device;
use crate::ffi::{
    DLT_EN10MB, MAXIMUM_SNAPLEN, PCAP_ERROR_ACTIVATED, PCAP_TSTAMP_PRECISION_MICRO, PcapT,
};
use crate::handle::{Handle, write_errbuf};
use crate::live::Live;
use crate::{real, registry};

/// A new, not yet activated handle for `device`, or why not.
fn create(device: &str) -> Result<*mut PcapT, String> {
    let mut spec: PortSpec = device.parse().map_err(|e| format!("{e}"))?;
    // As in `wirespeed capture` and as tcpdump -i eth0: a device without a queue is the
    // whole interface.
    spec.all_queues |= !PortSpec::names_queue(device);
    // SAFETY: plain values; a dead handle is libpcap's own, freed by pcap_close.
    let dead = unsafe {
        real::pcap_open_dead_with_tstamp_precision(
            DLT_EN10MB,
            MAXIMUM_SNAPLEN,
            PCAP_TSTAMP_PRECISION_MICRO as u32,
        )
    };
    if dead.is_null() {
        return Err(format!("{device}: libpcap could not make a handle"));
    }
    let inserted = registry::insert(dead, |slot| {
        Box::new(Handle::new(dead, device.to_string(), spec, slot))
    });
    if inserted.is_none() {
        // SAFETY: `dead` is the handle made above, not handed out.
        unsafe { real::pcap_close(dead) };
        return Err(format!(
            "{device}: {} xdp: handles are open already",
            registry::SLOTS
        ));
    }
    Ok(dead)
}

/// Activates `p` (one of ours): returns libpcap's status, the text in pcap_geterr.
fn activate(h: &Handle) -> c_int {
    if h.activated() {
        h.set_error("can't perform operation on activated capture");
        return PCAP_ERROR_ACTIVATED;
    }
    match Live::activate(h) {
        Ok(a) => {
            h.selectable.store(a.live.selectable, Ordering::SeqCst);
            let _ = h.counts.sockets.set(a.live.port.poll_fds());
            h.set_live(a.live);
            h.activated.store(true, Ordering::Release);
            match a.warning {
                Some((code, text)) => {
                    h.set_error(&text);
                    code
                }
                None => 0,
            }
        }
        Err(refused) => {
            h.set_error(&refused.message);
            refused.code
        }
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_create(source: *const c_char, errbuf: *mut c_char) -> *mut PcapT {
    let Some(device) = xdp_device(source) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_create(source, errbuf) };
    };
    create(&device).unwrap_or_else(|message| {
        write_errbuf(errbuf, &message);
        std::ptr::null_mut()
    })
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_open_live(
    device: *const c_char,
    snaplen: c_int,
    promisc: c_int,
    to_ms: c_int,
    errbuf: *mut c_char,
) -> *mut PcapT {
    let Some(name) = xdp_device(device) else {
        // SAFETY: the caller's arguments, passed on.
        return unsafe { real::pcap_open_live(device, snaplen, promisc, to_ms, errbuf) };
    };
    let p = match create(&name) {
        Ok(p) => p,
        Err(message) => {
            write_errbuf(errbuf, &message);
            return std::ptr::null_mut();
        }
    };
    let Some(h) = registry::find(p) else {
        return std::ptr::null_mut();
    };
    h.update(|s| {
        s.snaplen = snaplen;
        s.promisc = promisc != 0;
        s.timeout_ms = to_ms;
    });
    let status = activate(h);
    if status != 0 {
        // SAFETY: `p` is the live dead handle; its errbuf holds the text just set.
        let text = unsafe { std::ffi::CStr::from_ptr(real::pcap_geterr(p)) };
        write_errbuf(errbuf, &text.to_string_lossy());
    }
    if status < 0 {
        // SAFETY: `p` is ours, made above and not handed out.
        unsafe { pcap_close(p) };
        return std::ptr::null_mut();
    }
    p
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_activate(p: *mut PcapT) -> c_int {
    match registry::find(p) {
        Some(h) => activate(h),
        // SAFETY: the caller's handle, passed on.
        None => unsafe { real::pcap_activate(p) },
    }
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_close(p: *mut PcapT) {
    // A close while one of our calls on this handle is under way (a read, or a send)
    // comes from a signal handler that interrupted it (ngrep's and others' Ctrl-C handler
    // closes, then exits) or from another thread: a read is asked to stop and the handle
    // stays open, since the call still uses it. Closed under it, the port's state would be
    // freed, or waited for by the very thread that holds it. It is not closed later either:
    // a program that goes on may close it again (closing it for the program would make
    // that a double close); one that exits leaves it to the kernel.
    if let Some(h) = registry::find(p) {
        let in_use = h.reading.load(Ordering::SeqCst) || h.sending.load(Ordering::SeqCst) > 0;
        match h.live_now() {
            None => {
                h.slot.request_break();
                return;
            }
            Some(_) if in_use => {
                h.slot.request_break();
                return;
            }
            // Ours: what was injected goes out, then the port closes (sockets, UMEM, our
            // hold on the XDP program) before the dead handle under it goes.
            Some(Ok(mut live)) => crate::send::drain(&mut live),
            Some(Err(_)) => {}
        }
    }
    drop(registry::remove(p));
    // SAFETY: the caller's handle (ours is a dead libpcap handle), closed once.
    unsafe { real::pcap_close(p) }
}
