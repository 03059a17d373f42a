//! pcap_findalldevs lists an `xdp:` device for each network interface, after libpcap's own;
//! pcap_lookupnet answers for an `xdp:` device as for its interface.

use std::ffi::{CStr, CString, c_char, c_int};

use super::xdp_device;
use crate::ffi::PcapIf;
use crate::real;

/// A list entry allocated as libpcap allocates its own (malloc, strdup), so that
/// pcap_freealldevs frees it like the rest.
fn new_entry(name: &str, description: &str, flags: u32) -> Option<*mut PcapIf> {
    let name = CString::new(name).ok()?;
    let description = CString::new(description).ok()?;
    // SAFETY: malloc of one pcap_if, checked for NULL; strdup of valid C strings.
    unsafe {
        let entry = libc::malloc(std::mem::size_of::<PcapIf>()).cast::<PcapIf>();
        if entry.is_null() {
            return None;
        }
        entry.write(PcapIf {
            next: std::ptr::null_mut(),
            name: libc::strdup(name.as_ptr()),
            description: libc::strdup(description.as_ptr()),
            addresses: std::ptr::null_mut(),
            flags,
        });
        Some(entry)
    }
}

/// The interfaces of libpcap's list that are network interfaces (not "any", not the USB,
/// D-Bus or netfilter pseudo-devices): their names and flags.
fn interfaces(list: *mut PcapIf) -> Vec<(String, u32)> {
    let mut found = Vec::new();
    let mut at = list;
    // SAFETY: libpcap's list, NULL-terminated, each name a C string.
    while let Some(entry) = unsafe { at.as_ref() } {
        if !entry.name.is_null() {
            // SAFETY: as above.
            let name = unsafe { CStr::from_ptr(entry.name) }
                .to_string_lossy()
                .into_owned();
            if name != "any" && wirespeed_xsk::if_index(&name).is_some() {
                found.push((name, entry.flags));
            }
        }
        at = entry.next;
    }
    found
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_findalldevs(alldevs: *mut *mut PcapIf, errbuf: *mut c_char) -> c_int {
    // SAFETY: the caller's arguments, passed on.
    let status = unsafe { real::pcap_findalldevs(alldevs, errbuf) };
    if status != 0 || alldevs.is_null() {
        return status;
    }
    // SAFETY: libpcap filled *alldevs (NULL for an empty list).
    let head = unsafe { *alldevs };
    let mut tail: *mut *mut PcapIf = alldevs;
    // SAFETY: walks the list libpcap built to its last `next` field.
    while let Some(entry) = unsafe { (*tail).as_mut() } {
        tail = &raw mut entry.next;
    }
    for (name, flags) in interfaces(head) {
        let description = format!("{name} through AF_XDP (wirespeed), every queue");
        let Some(entry) = new_entry(&format!("xdp:{name}"), &description, flags) else {
            break;
        };
        // SAFETY: `tail` points at the list's last `next` field (or at *alldevs).
        unsafe {
            *tail = entry;
            tail = &raw mut (*entry).next;
        }
    }
    0
}

#[unsafe(no_mangle)]
unsafe extern "C" fn pcap_lookupnet(
    device: *const c_char,
    net: *mut u32,
    mask: *mut u32,
    errbuf: *mut c_char,
) -> c_int {
    let iface = xdp_device(device).and_then(|d| {
        let place = d.trim_start_matches("xdp:");
        CString::new(place.split('@').next().unwrap_or(place)).ok()
    });
    match iface {
        // SAFETY: the interface's name as a C string, and the caller's out pointers.
        Some(iface) => unsafe { real::pcap_lookupnet(iface.as_ptr(), net, mask, errbuf) },
        // SAFETY: the caller's arguments, passed on.
        None => unsafe { real::pcap_lookupnet(device, net, mask, errbuf) },
    }
}
