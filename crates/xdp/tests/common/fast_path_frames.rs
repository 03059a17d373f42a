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
