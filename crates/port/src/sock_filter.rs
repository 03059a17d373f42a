//! A classic BPF instruction as the kernel takes it (`struct sock_filter`), for
//! `Port::attach_filter`; applications compile them (tcpdump expressions via libpcap).

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SockFilter {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}
