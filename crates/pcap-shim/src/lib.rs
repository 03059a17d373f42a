//! libwirespeed_pcap.so: libpcap's C API over wirespeed's AF_XDP ports, for programs nobody
//! rebuilt (tcpdump, dumpcap under tshark and Wireshark). `wirespeed pcap-run PROGRAM`
//! preloads it (netmap's libpcap glue, §4.6 of its paper, done from outside libpcap).
//!
//! Devices named `xdp:IFACE` (every queue), `xdp:IFACE@Q` and `xdp:IFACE@all` open a
//! wirespeed port; every other device, every offline file and every call we do not take
//! over go to the real libpcap, found with `dlsym(RTLD_NEXT, ...)`. Our `pcap_t` is a real
//! libpcap dead handle, so the calls we leave to libpcap (pcap_compile, pcap_geterr,
//! pcap_freecode...) still get a valid one.
//!
//! - `exports/`: the entry points, by what they do; each passes foreign handles on.
//! - `registry`: which `pcap_t`s are ours (lock-free: pcap_breakloop runs in signal
//!   handlers).
//! - `handle`: settings before activation; `live`: the port after it (everything
//!   privileged happens in pcap_activate, since tcpdump drops root right after).
//! - `receive`, `send`: the packet paths. `options`: what pcap-run passes in the
//!   environment. `real`: the real libpcap. `ffi`: pcap.h's types.
//!
//! unsafe is confined to this boundary: C pointers in, libc calls, dlsym.

mod broker;
mod exports;
mod ffi;
mod handle;
mod live;
mod options;
mod real;
mod receive;
mod registry;
mod send;

/// Runs when the library is loaded (before the program's main): see
/// `real::resolve_for_signal_handlers`.
extern "C" fn resolve_at_load() {
    real::resolve_for_signal_handlers();
}

// SAFETY: .init_array holds pointers to functions the loader calls once, with no
// arguments, at load; `resolve_at_load` is such a function and touches only atomics and
// dlsym.
#[used]
#[unsafe(link_section = ".init_array")]
static RESOLVE_AT_LOAD: extern "C" fn() = resolve_at_load;
