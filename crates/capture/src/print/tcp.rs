//! A TCP segment as tcpdump -n prints it: flags, sequence and acknowledgement numbers
//! relative to the first ones seen in the conversation (unless -S), window, urgent pointer,
//! options, and the payload's length.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::IpAddr;

use super::ip::Addresses;

/// Conversations remembered at most; past this the table starts over, so a long capture of
/// many short connections does not grow without end (tcpdump's table never shrinks).
const MAX_CONVERSATIONS: usize = 1 << 20;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;
const URG: u8 = 0x20;

/// One end of a conversation.
type End = (IpAddr, u16);

/// The sequence numbers each end started from, keyed by the two ends, lower one first.
#[derive(Default)]
pub struct TcpLines {
    absolute: bool,
    starts: HashMap<(End, End), (u32, u32)>,
}

/// Where a TCP header ended early in the capture: tcpdump's ` [|tcp]`.
struct Truncated;

impl TcpLines {
    /// `absolute`: print the numbers as they are, as tcpdump -S does.
    pub fn new(absolute: bool) -> TcpLines {
        TcpLines {
            absolute,
            starts: HashMap::new(),
        }
    }

    /// `segment`: the captured bytes from the TCP header on; `length`: the header and
    /// payload as the IP header gives them (more than captured under a snap length).
    pub fn print(
        &mut self,
        segment: &[u8],
        length: usize,
        addresses: Addresses,
        line: &mut String,
    ) {
        if segment.len() < 4 {
            addresses.write_hosts(line);
            line.push_str("[|tcp]");
            return;
        }
        let (sport, dport) = (be16(segment, 0), be16(segment, 2));
        addresses.write_ports(sport, dport, line);
        let (src, dst) = addresses.pair();
        if self
            .format_header(segment, length, (src, sport), (dst, dport), line)
            .is_err()
        {
            line.push_str(" [|tcp]");
        }
    }

    fn format_header(
        &mut self,
        segment: &[u8],
        length: usize,
        from: End,
        to: End,
        line: &mut String,
    ) -> Result<(), Truncated> {
        if segment.len() < 20 {
            return Err(Truncated);
        }
        let header_len = usize::from(segment[12] >> 4) * 4;
        if header_len < 20 {
            let _ = write!(
                line,
                " tcp {} [bad hdr length {header_len} - too short, < 20]",
                length.wrapping_sub(header_len) as u32
            );
            return Ok(());
        }
        let (mut seq, mut ack) = (be32(segment, 4), be32(segment, 8));
        let (flags, window, urgent) = (segment[13], be16(segment, 14), be16(segment, 18));
        write_flags(flags, line);
        // The start of the peer's sequence space, for the SACK blocks.
        let mut peer_start = 0;
        if !self.absolute && flags & ACK != 0 {
            (seq, ack, peer_start) = self.relative((from, to), flags, seq, ack);
        }
        if header_len > length {
            let _ = write!(
                line,
                " [bad hdr length {header_len} - too long, > {length}]"
            );
            return Ok(());
        }
        let payload = (length - header_len) as u32;
        if payload > 0 || flags & (SYN | FIN | RST) != 0 {
            let _ = write!(line, ", seq {seq}");
            if payload > 0 {
                let _ = write!(line, ":{}", seq.wrapping_add(payload));
            }
        }
        if flags & ACK != 0 {
            let _ = write!(line, ", ack {ack}");
        }
        let _ = write!(line, ", win {window}");
        if flags & URG != 0 {
            let _ = write!(line, ", urg {urgent}");
        }
        if header_len > 20 && !write_options(segment, header_len, peer_start, line) {
            return Ok(());
        }
        let _ = write!(line, ", length {payload}");
        Ok(())
    }

    /// `seq` and `ack` relative to where each end of the conversation started, and where the
    /// peer started; a conversation's first segment with an ACK (or a new handshake) sets the
    /// starts and keeps its numbers as they are.
    fn relative(
        &mut self,
        (from, to): (End, End),
        flags: u8,
        seq: u32,
        ack: u32,
    ) -> (u32, u32, u32) {
        let (key, from_low) = if from <= to {
            ((from, to), true)
        } else {
            ((to, from), false)
        };
        let known = self.starts.get(&key).copied();
        match known {
            Some((low, high)) if flags & SYN == 0 => {
                let (own, peer) = if from_low { (low, high) } else { (high, low) };
                (seq.wrapping_sub(own), ack.wrapping_sub(peer), peer)
            }
            // The first segment with an ACK, or a new handshake: the numbers as they
            // are, and the conversation's starts from them.
            _ => {
                if known.is_none() && self.starts.len() >= MAX_CONVERSATIONS {
                    self.starts.clear();
                }
                let (own, peer) = (seq, ack.wrapping_sub(1));
                let starts = if from_low { (own, peer) } else { (peer, own) };
                self.starts.insert(key, starts);
                (seq, ack, peer)
            }
        }
    }
}

/// `Flags [...]`, in tcpdump's order: F S R P . U E W; `none` for none.
fn write_flags(flags: u8, line: &mut String) {
    line.push_str("Flags [");
    for (bit, c) in [
        (FIN, 'F'),
        (SYN, 'S'),
        (RST, 'R'),
        (0x08, 'P'),
        (ACK, '.'),
        (URG, 'U'),
        (0x40, 'E'),
        (0x80, 'W'),
    ] {
        if flags & bit != 0 {
            line.push(c);
        }
    }
    if flags == 0 {
        line.push_str("none");
    }
    line.push(']');
}

/// `, options [...]` of a header of `header_len` bytes (over 20). False when the options
/// end the line (a bad option, or the capture ended inside them).
fn write_options(segment: &[u8], header_len: usize, peer_start: u32, line: &mut String) -> bool {
    line.push_str(", options [");
    let options = &segment[20..header_len.min(segment.len())];
    match format_options(options, header_len - 20, peer_start, line) {
        Options::Done => {
            line.push(']');
            true
        }
        Options::Bad { any } => {
            line.push_str("[bad opt]");
            if any {
                line.push(']');
            }
            false
        }
        Options::Truncated { mark } => {
            line.push_str(" [|tcp]");
            if mark {
                line.push('>');
            }
            false
        }
    }
}

enum Options {
    Done,
    /// An option whose length does not fit; `any`: one was printed before it.
    Bad {
        any: bool,
    },
    /// The capture ended inside the options; `mark`: tcpdump's `>` after its ` [|tcp]`,
    /// which it prints when a value (not a kind or length byte) was cut after an option.
    Truncated {
        mark: bool,
    },
}

/// The options as tcpdump prints them. `captured` may be shorter than `len`, the options'
/// length by the header. SACK blocks are shown relative to `peer_start`.
fn format_options(captured: &[u8], len: usize, peer_start: u32, line: &mut String) -> Options {
    let (mut at, mut left, mut any) = (0, len, false);
    while left > 0 {
        if any {
            line.push(',');
        }
        let Some(&kind) = captured.get(at) else {
            return Options::Truncated { mark: false };
        };
        at += 1;
        // EOL and NOP are one byte; every other option has a length byte (kind and length
        // included in it).
        let declared = if kind <= 1 {
            1
        } else {
            let Some(&l) = captured.get(at) else {
                return Options::Truncated { mark: false };
            };
            at += 1;
            if l < 2 || usize::from(l) > left {
                return Options::Bad { any };
            }
            left -= 1;
            usize::from(l)
        };
        left -= 1;
        let name = option_name(kind);
        match name {
            Some(n) => line.push_str(n),
            None => {
                let _ = write!(line, "unknown-{kind}");
            }
        }
        // The bytes this option's value takes, which tcpdump then skips (whatever the
        // length byte said).
        let value_len = match kind {
            0 | 1 | 4 => 0,
            2 => 2,
            3 => 1,
            6 | 7 | 11..=13 => 4,
            8 => 8,
            _ => declared - 2,
        };
        if value_len > left {
            return Options::Bad { any };
        }
        let Some(value) = captured.get(at..at + value_len) else {
            return Options::Truncated { mark: any };
        };
        write_option_value(kind, value, peer_start, line);
        at += value_len;
        left -= value_len;
        let printed = value_len + if kind <= 1 { 1 } else { 2 };
        if printed != declared {
            let _ = write!(line, "[len {declared}]");
        }
        any = true;
        if kind == 0 {
            break;
        }
    }
    Options::Done
}

/// An option's value as tcpdump prints it: numbers, SACK blocks relative to `peer_start`,
/// timestamps; the value of an option it does not know in hex.
fn write_option_value(kind: u8, value: &[u8], peer_start: u32, line: &mut String) {
    match kind {
        2 => {
            let _ = write!(line, " {}", be16(value, 0));
        }
        3 => {
            let _ = write!(line, " {}", value[0]);
        }
        5 if !value.len().is_multiple_of(8) => line.push_str(" invalid sack"),
        5 => {
            let _ = write!(line, " {} ", value.len() / 8);
            for block in value.chunks_exact(8) {
                let (s, e) = (be32(block, 0), be32(block, 4));
                let _ = write!(
                    line,
                    "{{{}:{}}}",
                    s.wrapping_sub(peer_start),
                    e.wrapping_sub(peer_start)
                );
            }
        }
        6 | 7 | 11..=13 => {
            let _ = write!(line, " {}", be32(value, 0));
        }
        8 => {
            let _ = write!(line, " val {} ecr {}", be32(value, 0), be32(value, 4));
        }
        0 | 1 | 4 => {}
        _ if !value.is_empty() => {
            line.push_str(" 0x");
            for b in value {
                let _ = write!(line, "{b:02x}");
            }
        }
        _ => {}
    }
}

/// tcpdump's names for the options it prints as above; the others are `unknown-KIND` with
/// their value in hex.
fn option_name(kind: u8) -> Option<&'static str> {
    Some(match kind {
        0 => "eol",
        1 => "nop",
        2 => "mss",
        3 => "wscale",
        4 => "sackOK",
        5 => "sack",
        6 => "echo",
        7 => "echoreply",
        8 => "TS",
        11 => "cc",
        12 => "ccnew",
        13 => "",
        _ => return None,
    })
}

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

#[cfg(test)]
mod tests {
    use crate::LINKTYPE_ETHERNET;
    use crate::print::{PrintOptions, line_of, lines_of};

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const TCP_SYN: [u8; 62] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x30, 0x00, 0x01, 0x00, 0x00, 0x40, 0x06, 0x66, 0xc5, 0x0a, 0x00, 0x00, 0x01,
        0x0a, 0x00, 0x00, 0x02, 0x9c, 0x40, 0x0f, 0xa0, 0x00, 0x00, 0x03, 0xe8, 0x00, 0x00, 0x00,
        0x00, 0x70, 0x02, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x01, 0x01,
        0x04, 0x02,
    ];
    const TCP_SYNACK: [u8; 62] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x30, 0x00, 0x01, 0x00, 0x00, 0x40, 0x06, 0x66, 0xc5, 0x0a, 0x00, 0x00, 0x02,
        0x0a, 0x00, 0x00, 0x01, 0x0f, 0xa0, 0x9c, 0x40, 0x00, 0x00, 0x13, 0x88, 0x00, 0x00, 0x03,
        0xe9, 0x70, 0x12, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x02, 0x04, 0x05, 0xb4, 0x01, 0x01,
        0x04, 0x02,
    ];
    const TCP_ACK: [u8; 59] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x2d, 0x00, 0x01, 0x00, 0x00, 0x40, 0x06, 0x66, 0xc8, 0x0a, 0x00, 0x00, 0x01,
        0x0a, 0x00, 0x00, 0x02, 0x9c, 0x40, 0x0f, 0xa0, 0x00, 0x00, 0x03, 0xe9, 0x00, 0x00, 0x13,
        0x89, 0x50, 0x18, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, 0x47, 0x45, 0x54, 0x20, 0x2f,
    ];
    const TCP_CUT: [u8; 36] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x16, 0x00, 0x01, 0x00, 0x00, 0x40, 0x06, 0x66, 0xdf, 0x0a, 0x00, 0x00, 0x01,
        0x0a, 0x00, 0x00, 0x02, 0x9c, 0x40,
    ];

    #[test]
    fn a_syn_with_options() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &TCP_SYN),
            "IP 10.0.0.1.40000 > 10.0.0.2.4000: Flags [S], seq 1000, win 64240, options [mss 1460,nop,nop,sackOK], length 0"
        );
    }

    #[test]
    fn a_cut_header_shows_the_hosts() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &TCP_CUT),
            "IP 10.0.0.1 > 10.0.0.2: [|tcp]"
        );
    }

    /// The handshake, then data: relative to each end's first sequence number, as tcpdump
    /// prints a conversation; with -S, as they are.
    #[test]
    fn a_conversation_in_relative_and_absolute_numbers() {
        let packets: [&[u8]; 3] = [&TCP_SYN, &TCP_SYNACK, &TCP_ACK];
        let syn_ack = "IP 10.0.0.2.4000 > 10.0.0.1.40000: Flags [S.], seq 5000, ack 1001, win 64240, options [mss 1460,nop,nop,sackOK], length 0";
        let relative = lines_of(LINKTYPE_ETHERNET, PrintOptions::default(), &packets);
        assert_eq!(relative[1], syn_ack);
        assert_eq!(
            relative[2],
            "IP 10.0.0.1.40000 > 10.0.0.2.4000: Flags [P.], seq 1:6, ack 1, win 64240, length 5"
        );
        let options = PrintOptions {
            link: false,
            absolute_seq: true,
        };
        let absolute = lines_of(LINKTYPE_ETHERNET, options, &packets);
        assert_eq!(absolute[1], syn_ack);
        assert_eq!(
            absolute[2],
            "IP 10.0.0.1.40000 > 10.0.0.2.4000: Flags [P.], seq 1001:1006, ack 5001, win 64240, length 5"
        );
    }
}
