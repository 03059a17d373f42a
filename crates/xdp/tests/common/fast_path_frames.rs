//! Frames of every shape the switch's fast path takes, for its property tests.

/// A frame the fast path takes: optional 802.1Q tag, IPv4 without options, TCP/UDP/ICMP
/// (protocol 47, GRE, it refuses).
pub fn frame(tagged: bool, proto: u8, fields: &[u8; 16], payload: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, fields[0], 2, 0, 0, 0, 0, fields[1]];
    if tagged {
        f.extend_from_slice(&[0x81, 0x00, fields[2], fields[3]]);
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let l4_len = if proto == 6 { 20 } else { 8 };
    let total = (20 + l4_len + payload) as u16;
    f.extend_from_slice(&[0x45, fields[4]]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[fields[5], fields[6], 0x40, 0, fields[7], proto, 0xaa, 0xbb]);
    f.extend_from_slice(&[10, 0, fields[8], fields[9], 10, 0, fields[10], fields[11]]);
    let ports = [fields[12], fields[13], fields[14], fields[15]];
    match proto {
        6 => {
            f.extend_from_slice(&ports);
            f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
        }
        17 => {
            f.extend_from_slice(&ports);
            f.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
            f.extend_from_slice(&[0, 0]);
        }
        _ => f.extend_from_slice(&[ports[0], ports[1], 0x12, 0x34, 0, 1, 0, 1]),
    }
    f.extend((0..payload).map(|i| i as u8));
    f
}

/// Puts the pseudo-header sum in a TCP or UDP frame's checksum field, as a sender that left
/// its checksum to offload does (the fast path refuses such frames: user space completes
/// them).
#[allow(dead_code)] // not every test that shares these frames uses it
pub fn make_partial(f: &mut [u8], tagged: bool) {
    let l3 = if tagged { 18 } else { 14 };
    let word = |at: usize| u32::from(u16::from_be_bytes([f[l3 + at], f[l3 + at + 1]]));
    let total = word(2);
    let mut sum = word(12) + word(14) + word(16) + word(18) + u32::from(f[l3 + 9]) + total - 20;
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    let at = l3 + 20 + if f[l3 + 9] == 6 { 16 } else { 6 };
    f[at..at + 2].copy_from_slice(&(sum as u16).to_be_bytes());
}
