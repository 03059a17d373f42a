//! ICMPv6 messages as tcpdump -n prints them (its print-icmp6.c): the message and what it is
//! about (the address an unreachable names, a neighbour discovery's target), then the length.

use std::fmt::Write as _;
use std::net::Ipv6Addr;

use super::icmp::{Cut, be16, be32, byte, v6_at};

/// `icmp`: the captured bytes from the ICMPv6 header on; `length`: the message's length by
/// the IPv6 header.
pub fn print(icmp: &[u8], length: usize, line: &mut String) {
    let start = line.len();
    line.push_str("ICMP6, ");
    match describe_v6(icmp, length, line) {
        Ok(()) => {
            let _ = write!(line, ", length {length}");
        }
        // The type's name was printed, a field it needs was not captured.
        Err(Cut) if line.len() > start + "ICMP6, ".len() => line.push_str(" [|icmp6]"),
        Err(Cut) => {
            line.truncate(start);
            line.push_str(" [|icmp6]");
        }
    }
}

fn describe_v6(m: &[u8], length: usize, line: &mut String) -> Result<(), Cut> {
    let (kind, code) = (byte(m, 0)?, byte(m, 1)?);
    match kind {
        1 => unreachable(m, code, line)?,
        2 => {
            let _ = write!(line, "packet too big, mtu {}", be32(m, 4)?);
        }
        3 => {
            let _ = match code {
                0 => write!(line, "time exceeded in-transit for {}", inner_v6(m, 24)?),
                1 => write!(line, "time exceeded in-transit (reassembly)"),
                c => write!(line, "time exceeded in-transit, unknown code ({c})"),
            };
        }
        4 => parameter_problem(m, code, line)?,
        128 | 129 => {
            let what = if kind == 128 { "request" } else { "reply" };
            let _ = write!(line, "echo {what}");
            let (id, seq) = (be16(m, 4)?, be16(m, 6)?);
            let _ = write!(line, ", id {id}, seq {seq}");
        }
        130..=132 => {
            let what = ["query", "report", "done"][usize::from(kind - 130)];
            let _ = write!(line, "multicast listener {what}");
            // A query of 28 bytes or more is MLDv2's.
            if kind == 130 && length >= 28 {
                let _ = write!(line, " v2 [gaddr {}]", v6_at(m, 8)?);
            } else {
                let (delay, group) = (be16(m, 4)?, v6_at(m, 8)?);
                let _ = write!(line, "max resp delay: {delay} addr: {group}");
            }
        }
        133 => line.push_str("router solicitation"),
        134 => line.push_str("router advertisement"),
        135 => {
            line.push_str("neighbor solicitation");
            let _ = write!(line, ", who has {}", v6_at(m, 8)?);
        }
        136 => {
            line.push_str("neighbor advertisement");
            let _ = write!(line, ", tgt is {}", v6_at(m, 8)?);
        }
        137 => {
            line.push_str("redirect");
            let (target, dst) = (v6_at(m, 8)?, v6_at(m, 24)?);
            let _ = write!(line, ", {dst} to {target}");
        }
        143 => {
            let records = be16(m, 6)?;
            let _ = write!(
                line,
                "multicast listener report v2, {records} group record(s)"
            );
        }
        t => {
            let _ = write!(line, "type-#{t}");
        }
    }
    Ok(())
}

/// Destination unreachable: what, and the address (and port) of the packet it quotes.
fn unreachable(m: &[u8], code: u8, line: &mut String) -> Result<(), Cut> {
    line.push_str("destination unreachable, ");
    let dst = inner_v6(m, 24)?;
    let _ = match code {
        0 => write!(line, "unreachable route {dst}"),
        1 => write!(line, " unreachable prohibited {dst}"),
        2 => write!(
            line,
            "beyond scope {dst}, source address {}",
            inner_v6(m, 8)?
        ),
        3 => write!(line, "unreachable address {dst}"),
        4 => {
            let port = be16(m, 8 + 40 + 2)?;
            match byte(m, 8 + 6)? {
                6 => write!(line, "unreachable port, {dst} tcp port {port}"),
                17 => write!(line, "unreachable port, {dst} udp port {port}"),
                p => write!(line, "unreachable port, {dst} protocol {p} port {port}"),
            }
        }
        c => write!(line, "unknown unreach code ({c})"),
    };
    Ok(())
}

/// Parameter problem: what, and the octet of the quoted packet it points at.
fn parameter_problem(m: &[u8], code: u8, line: &mut String) -> Result<(), Cut> {
    let pointer = be32(m, 4)?;
    let _ = match code {
        0 => write!(line, "parameter problem, erroneous - octet {pointer}"),
        1 => write!(line, "parameter problem, next header - octet {pointer}"),
        2 => write!(line, "parameter problem, option - octet {pointer}"),
        3 => write!(
            line,
            "parameter problem, incomplete header chain - octet {pointer}"
        ),
        c => write!(line, "parameter problem, code {c} - octet {pointer}"),
    };
    Ok(())
}

/// An address of the IPv6 header an ICMPv6 error quotes, `at` bytes into that header.
fn inner_v6(m: &[u8], at: usize) -> Result<Ipv6Addr, Cut> {
    v6_at(m, 8 + at)
}

#[cfg(test)]
mod tests {
    use crate::LINKTYPE_ETHERNET;
    use crate::print::line_of;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const ICMP6_ECHO: [u8; 66] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd, 0x60,
        0x00, 0x00, 0x00, 0x00, 0x0c, 0x3a, 0x40, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x00, 0x00, 0x00, 0x09,
        0x00, 0x03, 0x00, 0x00, 0x00, 0x00,
    ];
    const ICMP6_NEIGHBOR_SOLICIT: [u8; 78] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x86, 0xdd, 0x60,
        0x00, 0x00, 0x00, 0x00, 0x18, 0x3a, 0x40, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x87, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x02,
    ];

    #[test]
    fn echo_request() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ICMP6_ECHO),
            "IP6 fe80::1 > fe80::2: ICMP6, echo request, id 9, seq 3, length 12"
        );
    }

    #[test]
    fn neighbor_solicitation_names_the_target() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &ICMP6_NEIGHBOR_SOLICIT),
            "IP6 fe80::1 > fe80::2: ICMP6, neighbor solicitation, who has fe80::2, length 24"
        );
    }
}
