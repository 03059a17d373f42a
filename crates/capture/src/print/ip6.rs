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

#[cfg(test)]
mod tests {
    use crate::LINKTYPE_ETHERNET;
    use crate::print::line_of;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const IP6_HBH_UDP: [u8; 72] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd, 0x60,
        0x00, 0x00, 0x00, 0x00, 0x12, 0x00, 0x40, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x11, 0x00, 0x05, 0x02, 0x00, 0x00,
        0x01, 0x00, 0x03, 0xe8, 0x07, 0xd0, 0x00, 0x0a, 0x00, 0x00, 0x00, 0x00,
    ];
    const IP6_CUT: [u8; 34] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd, 0x60,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn hop_by_hop_options_then_ports_alone() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &IP6_HBH_UDP),
            "IP6 fe80::1 > fe80::2: HBH 1000 > 2000: UDP, length 2"
        );
    }

    #[test]
    fn a_cut_header_is_marked() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, true, &IP6_CUT),
            "02:00:00:00:00:01 > 02:00:00:00:00:02, ethertype IPv6 (0x86dd), length 34:  [|ip6]"
        );
    }
}
