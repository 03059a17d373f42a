//! A tunnel's own address on its underlay (`local_ip`), as the host's stack would keep it
//! were the underlay not the switch's: an IPv4 packet to it that is no tunnel's is the
//! endpoint's, never the bridge's. An ICMP echo request is answered (an operator pings the
//! tunnel's end); anything else, an ICMP error about a packet the tunnel sent say, stops
//! there. Bridged on, such a packet would cross into the overlay: an error from a far end
//! that does not listen would be flooded back into the tunnel, answered again, and so on.

use std::net::Ipv4Addr;

use wirespeed_packet::{MacAddr, checksum, swap_macs};

const ETHERNET_LEN: usize = 14;
const ICMP: u8 = 1;
const ECHO_REQUEST: u8 = 8;
const ECHO_REPLY: u8 = 0;
/// The answer's time to live.
const TTL: u8 = 64;

/// What a packet to a tunnel endpoint is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToEndpoint {
    /// An ICMP echo request sent to the endpoint's own MAC address: to answer.
    Echo,
    /// Anything else for the endpoint (an echo request to another MAC address, flooded to
    /// us, is not answered: the answer would come from that address).
    Other,
}

/// What a frame is, if it is addressed to one of `locals` (each a tunnel's address and its
/// MAC address). None: not IPv4 to a local address.
pub fn to_endpoint(
    frame: &[u8],
    locals: impl IntoIterator<Item = (Ipv4Addr, MacAddr)>,
) -> Option<ToEndpoint> {
    let ip = frame.get(ETHERNET_LEN..ETHERNET_LEN + 20)?;
    if frame[12..14] != [0x08, 0x00] || ip[0] >> 4 != 4 {
        return None;
    }
    let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
    let (_, mac) = locals.into_iter().find(|&(local, _)| local == dst)?;
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    let whole = ip[6] & 0x3f == 0 && ip[7] == 0;
    let echo = ip[9] == ICMP
        && whole
        && ihl >= 20
        && frame[..6] == mac.0
        && frame.len() >= ETHERNET_LEN + ihl + 8
        && frame[ETHERNET_LEN + ihl] == ECHO_REQUEST;
    Some(match echo {
        true => ToEndpoint::Echo,
        false => ToEndpoint::Other,
    })
}

/// Turns the echo request in `head` (a packet's first frame; a chain's later frames hold
/// only data, which the answer keeps) into its reply, in place: addresses swapped, a fresh
/// time to live, the type and both checksums updated. False if `head` is not one.
pub fn answer_echo_in_place(head: &mut [u8]) -> bool {
    let Some(&first) = head.get(ETHERNET_LEN) else {
        return false;
    };
    let ihl = usize::from(first & 0x0f) * 4;
    let icmp_at = ETHERNET_LEN + ihl;
    if ihl < 20 || head.len() < icmp_at + 8 || head[icmp_at] != ECHO_REQUEST {
        return false;
    }
    swap_macs(head);
    let ip = &mut head[ETHERNET_LEN..icmp_at];
    let (front, addresses) = ip.split_at_mut(12);
    let (src, dst) = addresses.split_at_mut(4);
    src.swap_with_slice(&mut dst[..4]);
    // The header's sum does not change with the addresses swapped; the TTL's word does.
    let old = u16::from_be_bytes([front[8], front[9]]);
    front[8] = TTL;
    let sum = u16::from_be_bytes([front[10], front[11]]);
    let sum = checksum::update(sum, old, u16::from_be_bytes([front[8], front[9]]));
    front[10..12].copy_from_slice(&sum.to_be_bytes());
    let icmp = &mut head[icmp_at..];
    let sum = u16::from_be_bytes([icmp[2], icmp[3]]);
    let sum = checksum::update(
        sum,
        u16::from_be_bytes([ECHO_REQUEST, icmp[1]]),
        u16::from_be_bytes([ECHO_REPLY, icmp[1]]),
    );
    icmp[0] = ECHO_REPLY;
    icmp[2..4].copy_from_slice(&sum.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirespeed_packet::checksum::verify;

    const LOCAL: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const OURS: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const US: [(Ipv4Addr, MacAddr); 1] = [(LOCAL, OURS)];

    /// An IPv4 packet of `protocol` from 192.0.2.2 to `dst`, its first payload byte `first`.
    fn packet(dst: [u8; 4], protocol: u8, first: u8) -> Vec<u8> {
        let mut f = vec![0u8; 98];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&84u16.to_be_bytes());
        f[20] = 0x40;
        f[22] = 61;
        f[23] = protocol;
        f[26..30].copy_from_slice(&[192, 0, 2, 2]);
        f[30..34].copy_from_slice(&dst);
        let sum = checksum::internet_checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f[34] = first;
        for (i, b) in f.iter_mut().enumerate().skip(38) {
            *b = i as u8;
        }
        let sum = checksum::internet_checksum(&f[34..]);
        f[36..38].copy_from_slice(&sum.to_be_bytes());
        f
    }

    #[test]
    fn only_ipv4_to_a_local_address_is_the_endpoints() {
        use ToEndpoint::{Echo, Other};
        let local = [192, 0, 2, 1];
        assert_eq!(to_endpoint(&packet(local, ICMP, 8), US), Some(Echo));
        assert_eq!(to_endpoint(&packet(local, ICMP, 3), US), Some(Other));
        assert_eq!(to_endpoint(&packet(local, 6, 8), US), Some(Other));
        assert_eq!(to_endpoint(&packet([192, 0, 2, 9], ICMP, 8), US), None);
        let mut arp = packet(local, ICMP, 8);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(to_endpoint(&arp, US), None);
        let mut fragment = packet(local, ICMP, 8);
        fragment[20] = 0x20;
        assert_eq!(to_endpoint(&fragment, US), Some(Other));
        // Sent to another MAC address (flooded to us), or broadcast: not answered.
        let mut flooded = packet(local, ICMP, 8);
        flooded[..6].copy_from_slice(&[0xff; 6]);
        assert_eq!(to_endpoint(&flooded, US), Some(Other));
        // Too short for an echo header: not answered.
        let short = &packet(local, ICMP, 8)[..14 + 20 + 4];
        assert_eq!(to_endpoint(short, US), Some(Other));
    }

    #[test]
    fn an_echo_request_becomes_its_reply_with_right_checksums() {
        let request = packet([192, 0, 2, 1], ICMP, 8);
        let mut reply = request.clone();
        assert!(answer_echo_in_place(&mut reply));
        assert_eq!(
            (&reply[0..6], &reply[6..12]),
            (&request[6..12], &request[0..6])
        );
        assert_eq!(
            (&reply[26..30], &reply[30..34]),
            (&request[30..34], &request[26..30])
        );
        assert_eq!((reply[22], reply[34]), (TTL, ECHO_REPLY));
        assert!(verify(&reply[14..34]) && verify(&reply[34..]));
        assert_eq!(&reply[38..], &request[38..], "the data kept");
        let mut other = packet([192, 0, 2, 1], ICMP, 3);
        assert!(!answer_echo_in_place(&mut other));
    }
}
