//! The fast path's flow key, built in Rust exactly as bpf/switch_fast_path.c builds it, so
//! user space installs entries under the key the kernel will look up.

use wirespeed_packet::{EtherType, IpProtocol};

/// Bytes of `struct fp_key`.
pub const KEY_LEN: usize = 36;

/// `struct fp_key`'s bytes.
pub type FastKey = [u8; KEY_LEN];

const ETH_P_8021Q: [u8; 2] = EtherType::VLAN.0.to_be_bytes();
const ETH_P_IP: [u8; 2] = EtherType::IPV4.0.to_be_bytes();
const VLAN_PRESENT: u8 = 0x10;
const TCP: u8 = IpProtocol::TCP.0;
const UDP: u8 = IpProtocol::UDP.0;
const ICMP: u8 = IpProtocol::ICMP.0;

/// The key of `frame` arriving on `ifindex`, or `None` when the fast path does not take such
/// a packet (see the program's comment for which it takes).
pub fn fast_key(frame: &[u8], ifindex: u32) -> Option<FastKey> {
    let mut key = [0u8; KEY_LEN];
    key[0..4].copy_from_slice(&ifindex.to_ne_bytes());
    key[4..16].copy_from_slice(frame.get(0..12)?);
    let mut l3 = 14;
    let mut ethertype = [*frame.get(12)?, *frame.get(13)?];
    if ethertype == ETH_P_8021Q {
        let tag = frame.get(14..18)?;
        key[16] = tag[0] | VLAN_PRESENT;
        key[17] = tag[1];
        ethertype = [tag[2], tag[3]];
        l3 = 18;
    }
    if ethertype != ETH_P_IP {
        return None;
    }
    key[18..20].copy_from_slice(&ethertype);
    let ip = frame.get(l3..)?;
    let l4 = ip.get(20..28)?;
    if ip[0] != 0x45 || ip[6] & 0x3f != 0 || ip[7] != 0 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    if total > ip.len() {
        return None;
    }
    key[20..28].copy_from_slice(&ip[12..20]);
    key[28] = ip[9];
    key[29] = ip[1]; // DSCP and ECN
    key[30] = ip[8];
    match ip[9] {
        TCP => {
            let tcp = ip.get(20..40)?;
            let header = usize::from(tcp[12] >> 4) * 4;
            if total < 40 || header < 20 || header > total - 20 {
                return None;
            }
            if partial_checksum(ip, [tcp[16], tcp[17]], total) {
                return None;
            }
            key[32..36].copy_from_slice(&tcp[0..4]);
        }
        UDP => {
            let length = usize::from(u16::from_be_bytes([l4[4], l4[5]]));
            if total < 28 || length < 8 || length > total - 20 {
                return None;
            }
            if partial_checksum(ip, [l4[6], l4[7]], total) {
                return None;
            }
            key[32..36].copy_from_slice(&l4[0..4]);
        }
        ICMP => {
            if total < 28 {
                return None;
            }
            key[32..34].copy_from_slice(&l4[0..2]);
        }
        _ => return None,
    }
    Some(key)
}

/// The header fields a flow key holds, read back (for flow records).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct KeyFields {
    /// The 802.1Q tag's VLAN id, if the frame had a tag.
    pub vlan: Option<u16>,
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub protocol: u8,
    /// TCP or UDP: the source and destination ports; ICMP: type and code, then zeros.
    pub l4: [u8; 4],
}

/// The fields of `key` (as [`fast_key`] made it).
pub fn key_fields(key: &FastKey) -> KeyFields {
    let vlan = (key[16] & VLAN_PRESENT != 0)
        .then(|| u16::from_be_bytes([key[16] & !VLAN_PRESENT, key[17]]) & 0x0fff);
    KeyFields {
        vlan,
        src: [key[20], key[21], key[22], key[23]],
        dst: [key[24], key[25], key[26], key[27]],
        protocol: key[28],
        l4: [key[32], key[33], key[34], key[35]],
    }
}

/// Whether a TCP or UDP checksum `field` holds just the pseudo-header sum of the IPv4 header
/// `ip` (`total` bytes long): a sender left it to checksum offload, and user space completes
/// it (wirespeed_packet::partial_checksum), so the program does not take the packet.
fn partial_checksum(ip: &[u8], field: [u8; 2], total: usize) -> bool {
    let word = |at: usize| u32::from(u16::from_be_bytes([ip[at], ip[at + 1]]));
    let mut sum = word(12) + word(14) + word(16) + word(18);
    sum += u32::from(ip[9]) + (total as u32 - 20);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    u16::from_be_bytes(field) == sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ethernet / 802.1Q (PCP 5, DEI set, VID 100) / IPv4 (tos 0xb9, ttl 64) / UDP 1234 -> 53.
    const TAGGED_UDP: [u8; 46] = [
        2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0xb0, 0x64, 0x08, 0x00, // L2
        0x45, 0xb9, 0x00, 0x1c, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0xab, 0xcd, // IPv4
        10, 0, 0, 1, 10, 0, 0, 2, // addresses
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x08, 0x55, 0x66, // UDP
    ];

    #[test]
    fn key_fields_read_back() {
        let key = fast_key(&TAGGED_UDP, 7).unwrap();
        assert_eq!(
            key_fields(&key),
            KeyFields {
                vlan: Some(100),
                src: [10, 0, 0, 1],
                dst: [10, 0, 0, 2],
                protocol: 17,
                l4: [0x04, 0xd2, 0x00, 0x35],
            }
        );
        let untagged: Vec<u8> = TAGGED_UDP[..12]
            .iter()
            .chain(&TAGGED_UDP[16..])
            .copied()
            .collect();
        assert_eq!(key_fields(&fast_key(&untagged, 7).unwrap()).vlan, None);
    }

    #[test]
    fn tagged_udp_key_bytes() {
        let key = fast_key(&TAGGED_UDP, 7).unwrap();
        let mut want = vec![];
        want.extend_from_slice(&7u32.to_ne_bytes());
        want.extend_from_slice(&TAGGED_UDP[0..12]);
        want.extend_from_slice(&[0xb0, 0x64, 0x08, 0x00]); // DEI bit is the present bit
        want.extend_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2, 17, 0xb9, 0x40, 0]); // ToS whole
        want.extend_from_slice(&[0x04, 0xd2, 0x00, 0x35]);
        assert_eq!(key.as_slice(), want.as_slice());
    }

    #[test]
    fn untagged_icmp_keeps_type_and_code_only() {
        let mut frame = TAGGED_UDP.to_vec();
        frame.drain(12..16);
        frame[23] = ICMP;
        let key = fast_key(&frame, 1).unwrap();
        assert_eq!(&key[16..20], &[0, 0, 0x08, 0x00]);
        assert_eq!(&key[32..36], &[0x04, 0xd2, 0, 0]);
    }

    #[test]
    fn refuses_what_the_program_refuses() {
        let refuse = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut frame = TAGGED_UDP.to_vec();
            edit(&mut frame);
            fast_key(&frame, 1)
        };
        assert!(refuse(&|_| {}).is_some());
        assert!(refuse(&|f| f[12] = 0x88).is_none()); // 802.1ad outer tag
        assert!(refuse(&|f| f[18] = 0x46).is_none()); // IPv4 options
        assert!(refuse(&|f| f[24] = 0x20).is_none()); // more fragments
        assert!(refuse(&|f| f[25] = 1).is_none()); // fragment offset
        assert!(refuse(&|f| f[21] = 0x1d).is_none()); // total length past the frame
        assert!(refuse(&|f| f[43] = 7).is_none()); // UDP length below its header
        assert!(refuse(&|f| f[43] = 9).is_none()); // UDP length past the IPv4 payload
        assert!(refuse(&|f| f[27] = 47).is_none()); // GRE
        assert!(refuse(&|f| f[27] = TCP).is_none()); // TCP header cut short
        assert!(refuse(&|f| f.truncate(45)).is_none());
        // A partial checksum: 10.0.0.1 + 10.0.0.2 + protocol 17 + UDP length 8.
        let pseudo = (0x0a00u32 + 1 + 0x0a00 + 2 + 17 + 8).to_be_bytes();
        assert!(refuse(&|f| f[44..46].copy_from_slice(&pseudo[2..])).is_none());
    }
}
