//! Raw IP captures as tcpdump -n prints them (its print-raw.c): the version says IPv4 or
//! IPv6; -e shows only `ip: `.

use std::fmt::Write as _;

use super::tcp::TcpLines;
use super::{ip, ip6};

pub(super) const LINKTYPE_RAW: u16 = 101;

pub(super) fn print(data: &[u8], link: bool, tcp: &mut TcpLines, line: &mut String) {
    if link {
        line.push_str("ip: ");
    }
    let word = |line: &mut String, w: &str| {
        if !link {
            line.push_str(w);
        }
    };
    match data.first().map(|b| b >> 4) {
        Some(4) => {
            word(line, "IP ");
            if ip::header_captured(data) {
                ip::print(data, tcp, line);
            } else {
                line.push_str(" [|ip]");
            }
        }
        Some(6) if data.len() >= ip6::HEADER_LEN => {
            word(line, "IP6 ");
            ip6::print(data, tcp, line);
        }
        Some(6) => line.push_str(" [|ip6]"),
        Some(version) => {
            let _ = write!(line, "unknown ip {version}");
        }
        None => line.push_str(" [|ip]"),
    }
}

#[cfg(test)]
mod tests {
    use crate::print::line_of;
    use crate::print::raw;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const RAW_UDP: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x66, 0xca, 0x0a, 0x00, 0x00,
        0x01, 0x0a, 0x00, 0x00, 0x02, 0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0c, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00,
    ];
    const RAW_IP6_UDP: [u8; 52] = [
        0x60, 0x00, 0x00, 0x00, 0x00, 0x0c, 0x11, 0x40, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0xe8, 0x07, 0xd0, 0x00,
        0x0c, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn ipv4() {
        assert_eq!(
            line_of(raw::LINKTYPE_RAW, false, &RAW_UDP),
            "IP 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 4"
        );
    }

    #[test]
    fn ipv4_with_e() {
        assert_eq!(
            line_of(raw::LINKTYPE_RAW, true, &RAW_UDP),
            "ip: 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 4"
        );
    }

    #[test]
    fn ipv6() {
        assert_eq!(
            line_of(raw::LINKTYPE_RAW, false, &RAW_IP6_UDP),
            "IP6 fe80::1.1000 > fe80::2.2000: UDP, length 4"
        );
    }
}
