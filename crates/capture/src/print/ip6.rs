//! IPv6 as tcpdump -n prints it (its print-ip6.c): hop-by-hop and destination options a word
//! each, then the transport.

use std::fmt::Write as _;
use std::net::IpAddr;

use wirespeed_packet::{IpProtocol, Ipv6Packet};

use super::ip::{Addresses, print_transport, transport};
use super::tcp::TcpLines;

pub(super) const HEADER_LEN: usize = 40;

/// An IPv6 packet of at least [`HEADER_LEN`] bytes.
pub(super) fn print(packet: &[u8], tcp: &mut TcpLines, line: &mut String) {
    let ip = Ipv6Packet::new_unchecked(packet);
    let (src, dst) = (IpAddr::V6(ip.src_addr()), IpAddr::V6(ip.dst_addr()));
    let (mut l4, mut length) = transport(packet, HEADER_LEN, usize::from(ip.payload_len()));
    let mut next = ip.next_header();
    // Hop-by-hop and destination options (an MLD report's router alert): a word each,
    // then the transport, whose line then starts with its ports alone, as tcpdump's does.
    let mut words = String::new();
    while let Some((word, cut)) = match next.0 {
        0 => Some(("HBH ", "hbhopt")),
        60 => Some(("DSTOPT ", "dstopt")),
        _ => None,
    } {
        let header_len = l4.get(1).map(|&n| (usize::from(n) + 1) * 8);
        let Some(header_len) = header_len.filter(|&n| n <= l4.len()) else {
            let _ = write!(line, "{src} > {dst}: {words} [|{cut}]");
            return;
        };
        words.push_str(word);
        next = IpProtocol(l4[0]);
        l4 = &l4[header_len..];
        length = length.saturating_sub(header_len);
    }
    let addresses = if words.is_empty() {
        Addresses::Shown(src, dst)
    } else {
        let _ = write!(line, "{src} > {dst}: {words}");
        Addresses::Printed(src, dst)
    };
    print_transport(next, addresses, (l4, length), tcp, line);
}
