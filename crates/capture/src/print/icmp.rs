//! ICMP messages as tcpdump -n prints them (its print-icmp.c): the message and what it is
//! about (the address and port an unreachable names, a redirect's gateway), then the length.
//! The field readers, total over a short capture, serve ICMPv6 too.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Where the capture ended before a field the line needs: tcpdump's ` [|icmp]`.
pub(super) struct Cut;

/// `icmp`: the captured bytes from the ICMP header on; `length`: the message's length by
/// the IP header. Appends to the `src > dst: ` already on the line.
pub fn print(icmp: &[u8], length: usize, line: &mut String) {
    let start = line.len();
    line.push_str("ICMP ");
    if describe_v4(icmp, line).is_err() {
        line.truncate(start);
        line.push_str(" [|icmp]");
        return;
    }
    let _ = write!(line, ", length {length}");
}

fn describe_v4(m: &[u8], line: &mut String) -> Result<(), Cut> {
    let (kind, code) = (byte(m, 0)?, byte(m, 1)?);
    match kind {
        0 | 8 => {
            let what = if kind == 8 { "request" } else { "reply" };
            let (id, seq) = (be16(m, 4)?, be16(m, 6)?);
            let _ = write!(line, "echo {what}, id {id}, seq {seq}");
        }
        3 => unreachable_v4(m, code, line)?,
        5 => {
            let (dst, gateway) = (inner_dst_v4(m)?, v4_at(m, 4)?);
            let _ = match code {
                0 => write!(line, "redirect {dst} to net {gateway}"),
                1 => write!(line, "redirect {dst} to host {gateway}"),
                2 => write!(line, "redirect-tos {dst} to net {gateway}"),
                3 => write!(line, "redirect-tos {dst} to host {gateway}"),
                c => write!(line, "redirect-#{c} {dst} to {gateway}"),
            };
        }
        9 => router_advertisement(m, line)?,
        11 => {
            inner_dst_v4(m)?;
            let _ = match code {
                0 => write!(line, "time exceeded in-transit"),
                1 => write!(line, "ip reassembly time exceeded"),
                c => write!(line, "time exceeded-#{c}"),
            };
        }
        12 if code == 0 => {
            let _ = write!(line, "parameter problem - octet {}", byte(m, 4)?);
        }
        12 => {
            let _ = write!(line, "parameter problem - code {code}");
        }
        13 => {
            let (id, seq) = (be16(m, 4)?, be16(m, 6)?);
            let _ = write!(line, "time stamp query id {id} seq {seq}");
        }
        14 => {
            let (id, seq) = (be16(m, 4)?, be16(m, 6)?);
            let (org, recv, xmit) = (be32(m, 8)?, be32(m, 12)?, be32(m, 16)?);
            let _ = write!(
                line,
                "time stamp reply id {id} seq {seq}: org {}, recv {}, xmit {}",
                Millis(org),
                Millis(recv),
                Millis(xmit)
            );
        }
        18 => {
            let _ = write!(line, "address mask is 0x{:08x}", be32(m, 8)?);
        }
        4 => line.push_str("source quench"),
        10 => line.push_str("router solicitation"),
        15 => line.push_str("information request"),
        16 => line.push_str("information reply"),
        17 => line.push_str("address mask request"),
        t => {
            let _ = write!(line, "type-#{t}");
        }
    }
    Ok(())
}

fn unreachable_v4(m: &[u8], code: u8, line: &mut String) -> Result<(), Cut> {
    let dst = inner_dst_v4(m)?;
    let _ = match code {
        0 => write!(line, "net {dst} unreachable"),
        1 => write!(line, "host {dst} unreachable"),
        2 => write!(line, "{dst} protocol {} unreachable", byte(m, 8 + 9)?),
        3 => {
            let proto = byte(m, 8 + 9)?;
            let inner_len = usize::from(byte(m, 8)? & 0x0f) * 4;
            let port = be16(m, 8 + inner_len + 2)?;
            match proto {
                6 => write!(line, "{dst} tcp port {port} unreachable"),
                17 => write!(line, "{dst} udp port {port} unreachable"),
                p => write!(line, "{dst} protocol {p} port {port} unreachable"),
            }
        }
        4 => match be16(m, 6)? {
            0 => write!(line, "{dst} unreachable - need to frag"),
            mtu => write!(line, "{dst} unreachable - need to frag (mtu {mtu})"),
        },
        5 => write!(line, "{dst} unreachable - source route failed"),
        6 => write!(line, "net {dst} unreachable - unknown"),
        7 => write!(line, "host {dst} unreachable - unknown"),
        8 => write!(line, "{dst} unreachable - source host isolated"),
        9 => write!(line, "net {dst} unreachable - admin prohibited"),
        10 => write!(line, "host {dst} unreachable - admin prohibited"),
        11 => write!(line, "net {dst} unreachable - tos prohibited"),
        12 => write!(line, "host {dst} unreachable - tos prohibited"),
        13 => write!(line, "host {dst} unreachable - admin prohibited filter"),
        14 => write!(line, "host {dst} unreachable - host precedence violation"),
        15 => write!(line, "host {dst} unreachable - precedence cutoff"),
        c => write!(line, "{dst} unreachable - #{c}"),
    };
    Ok(())
}

/// RFC 1256: the lifetime, then each address with its preference.
fn router_advertisement(m: &[u8], line: &mut String) -> Result<(), Cut> {
    let (count, size, lifetime) = (byte(m, 4)?, byte(m, 5)?, be16(m, 6)?);
    line.push_str("router advertisement lifetime ");
    let _ = match lifetime {
        0..60 => write!(line, "{lifetime}"),
        60..3600 => write!(line, "{}:{:02}", lifetime / 60, lifetime % 60),
        _ => write!(
            line,
            "{}:{:02}:{:02}",
            lifetime / 3600,
            lifetime % 3600 / 60,
            lifetime % 60
        ),
    };
    let _ = write!(line, " {count}:");
    if size != 2 {
        let _ = write!(line, " [size {size}]");
        return Ok(());
    }
    for i in 0..usize::from(count) {
        let at = 8 + i * 8;
        let _ = write!(line, " {{{} {}}}", v4_at(m, at)?, be32(m, at + 4)?);
    }
    Ok(())
}

/// Milliseconds since midnight UT (ICMP timestamps) as H:MM:SS.mmm.
struct Millis(u32);

impl std::fmt::Display for Millis {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = self.0;
        write!(
            f,
            "{:02}:{:02}:{:02}.{:03}",
            ms / 3_600_000,
            ms / 60_000 % 60,
            ms / 1000 % 60,
            ms % 1000
        )
    }
}

/// The destination of the packet an ICMP error quotes.
fn inner_dst_v4(m: &[u8]) -> Result<Ipv4Addr, Cut> {
    v4_at(m, 8 + 16)
}

pub(super) fn byte(b: &[u8], at: usize) -> Result<u8, Cut> {
    b.get(at).copied().ok_or(Cut)
}

pub(super) fn be16(b: &[u8], at: usize) -> Result<u16, Cut> {
    let s = b.get(at..at + 2).ok_or(Cut)?;
    Ok(u16::from_be_bytes([s[0], s[1]]))
}

pub(super) fn be32(b: &[u8], at: usize) -> Result<u32, Cut> {
    let s = b.get(at..at + 4).ok_or(Cut)?;
    Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

pub(super) fn v4_at(b: &[u8], at: usize) -> Result<Ipv4Addr, Cut> {
    be32(b, at).map(Ipv4Addr::from)
}

pub(super) fn v6_at(b: &[u8], at: usize) -> Result<Ipv6Addr, Cut> {
    let s: [u8; 16] = b.get(at..at + 16).ok_or(Cut)?.try_into().map_err(|_| Cut)?;
    Ok(Ipv6Addr::from(s))
}

#[cfg(test)]
mod tests {
    use crate::LINKTYPE_ETHERNET;
    use crate::print::line_of;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const ICMP_ECHO: [u8; 50] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x24, 0x00, 0x01, 0x00, 0x00, 0x40, 0x01, 0x66, 0xd6, 0x0a, 0x00, 0x00, 0x01,
        0x0a, 0x00, 0x00, 0x02, 0x08, 0x00, 0x00, 0x00, 0x00, 0x07, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    const ICMP_PORT_UNREACHABLE: [u8; 70] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x38, 0x00, 0x01, 0x00, 0x00, 0x40, 0x01, 0x66, 0xbb, 0x0a, 0x00, 0x00, 0x09,
        0x0a, 0x00, 0x00, 0x01, 0x03, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00,
        0x20, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x66, 0xc3, 0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00,
        0x00, 0x09, 0x13, 0x88, 0x82, 0x9a, 0x00, 0x0c, 0x00, 0x00,
    ];
    const ICMP_CUT: [u8; 35] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x15, 0x00, 0x01, 0x00, 0x00, 0x40, 0x01, 0x66, 0xe5, 0x0a, 0x00, 0x00, 0x01,
        0x0a, 0x00, 0x00, 0x02, 0x08,
    ];

    #[test]
    fn echo_request() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ICMP_ECHO),
            "IP 10.0.0.1 > 10.0.0.2: ICMP echo request, id 7, seq 1, length 16"
        );
    }

    #[test]
    fn port_unreachable_names_the_quoted_port() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ICMP_PORT_UNREACHABLE),
            "IP 10.0.0.9 > 10.0.0.1: ICMP 10.0.0.9 udp port 33434 unreachable, length 36"
        );
    }

    #[test]
    fn a_cut_message_is_marked() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ICMP_CUT),
            "IP 10.0.0.1 > 10.0.0.2:  [|icmp]"
        );
    }
}
