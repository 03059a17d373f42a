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
