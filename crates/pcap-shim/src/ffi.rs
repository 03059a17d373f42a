//! libpcap's C types and constants (pcap/pcap.h, pcap/bpf.h of libpcap 1.10), as the
//! programs we are loaded into see them.

use std::ffi::{c_char, c_int, c_long, c_uint, c_void};

/// `pcap_t`: opaque to us as to every program. Our handles are real libpcap "dead" handles
/// (see `registry`), so the calls we do not take over still get a valid one.
pub type PcapT = c_void;

/// `struct pcap_pkthdr`: the header each packet comes with.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PcapPkthdr {
    pub tv_sec: c_long,
    /// Microseconds, or nanoseconds when the handle asked for nanosecond precision.
    pub tv_frac: c_long,
    pub caplen: u32,
    pub len: u32,
}

/// `struct pcap_stat`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PcapStat {
    pub ps_recv: c_uint,
    pub ps_drop: c_uint,
    pub ps_ifdrop: c_uint,
}

/// `struct bpf_insn`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct BpfInsn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

/// `struct bpf_program`.
#[repr(C)]
#[derive(Debug)]
pub struct BpfProgram {
    pub bf_len: c_uint,
    pub bf_insns: *const BpfInsn,
}

/// `struct pcap_if` (pcap_if_t), one entry of `pcap_findalldevs`' list.
#[repr(C)]
#[derive(Debug)]
pub struct PcapIf {
    pub next: *mut PcapIf,
    pub name: *mut c_char,
    pub description: *mut c_char,
    pub addresses: *mut c_void,
    pub flags: u32,
}

/// `pcap_handler`.
pub type PcapHandler = Option<unsafe extern "C" fn(*mut u8, *const PcapPkthdr, *const u8)>;

pub const PCAP_ERRBUF_SIZE: usize = 256;

pub const PCAP_ERROR: c_int = -1;
pub const PCAP_ERROR_BREAK: c_int = -2;
pub const PCAP_ERROR_NOT_ACTIVATED: c_int = -3;
pub const PCAP_ERROR_ACTIVATED: c_int = -4;
pub const PCAP_ERROR_NO_SUCH_DEVICE: c_int = -5;
pub const PCAP_ERROR_RFMON_NOTSUP: c_int = -6;
pub const PCAP_ERROR_PERM_DENIED: c_int = -8;
pub const PCAP_ERROR_IFACE_NOT_UP: c_int = -9;
pub const PCAP_ERROR_TSTAMP_PRECISION_NOTSUP: c_int = -12;
pub const PCAP_WARNING_PROMISC_NOTSUP: c_int = 2;
pub const PCAP_WARNING_TSTAMP_TYPE_NOTSUP: c_int = 3;

pub const DLT_EN10MB: c_int = 1;
pub const PCAP_TSTAMP_HOST: c_int = 0;
pub const PCAP_TSTAMP_PRECISION_MICRO: c_int = 0;
pub const PCAP_TSTAMP_PRECISION_NANO: c_int = 1;

/// `pcap_direction_t`.
pub const PCAP_D_IN: c_int = 1;

/// libpcap's largest snapshot length; 0 or less asks for it (as libpcap's pcap_activate).
pub const MAXIMUM_SNAPLEN: c_int = 262_144;
