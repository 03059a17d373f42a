//! The filler after the test payload of every generated frame: byte `i` of the filler of
//! sequence number `seq` is `(seq + i) mod 256`, so a frame that carries another's bytes is
//! seen. Its checksum sum is known without reading it back: its 16-bit words repeat every 256
//! bytes, so a sum over any stretch is the difference of two precomputed prefix sums. A
//! 1500-byte frame's checksum then reads its 42 bytes of headers and payload, not 1500.

use crate::checksum;
use crate::template::PAYLOAD_HEADER_LEN;
use crate::udp::UdpPacket;

/// Writes the filler of `seq` into `out`.
#[inline]
pub fn write(out: &mut [u8], seq: u64) {
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = (seq as u8).wrapping_add(i as u8);
    }
}

/// The big-endian word at filler position `j`: bytes `j` and `j + 1` (mod 256).
const fn word(j: u32) -> u64 {
    (((j & 255) << 8) | ((j + 1) & 255)) as u64
}

/// `PREFIX[p][r]`: the sum of the words at positions p, p + 2, ... p + 2(r - 1). The words at
/// positions of one parity repeat every 128.
const PREFIX: [[u64; 129]; 2] = [prefix(0), prefix(1)];

const fn prefix(parity: u32) -> [u64; 129] {
    let mut sums = [0u64; 129];
    let mut r = 0;
    while r < 128 {
        sums[r + 1] = sums[r] + word(parity + 2 * r as u32);
        r += 1;
    }
    sums
}

/// The sum of the words at positions p + 2r for r < `count`, any count.
fn words_before(parity: usize, count: usize) -> u64 {
    let table = &PREFIX[parity];
    (count / 128) as u64 * table[128] + table[count % 128]
}

/// What `checksum::data` gives for the filler of `seq`, `len` bytes long (it starts at an even
/// offset of the checksummed area, as every generated frame's does).
pub fn sum(seq: u64, len: usize) -> u16 {
    let start = (seq & 255) as usize;
    let (parity, first) = (start & 1, start / 2);
    let words = len / 2;
    let mut acc = words_before(parity, first + words) - words_before(parity, first);
    if len % 2 == 1 {
        acc += u64::from((seq as u8).wrapping_add((len - 1) as u8)) << 8;
    }
    checksum::fold(acc)
}

/// The UDP checksum of a generated datagram (ports, length, test payload and filler written)
/// given its pseudo-header's sum: its first bytes read, the checksum field skipped, the
/// filler's sum worked out.
pub fn udp_checksum(datagram: &[u8], pseudo: u16, seq: u64) -> u16 {
    let filler_at = UdpPacket::<&[u8]>::HEADER_LEN + PAYLOAD_HEADER_LEN;
    // Ports and length, then the test payload: two reads that leave the checksum field out
    // (and read the header just written in the widths it was written in).
    let ports_len = checksum::data(&datagram[..6]);
    let payload = checksum::data(&datagram[8..filler_at]);
    let tail = sum(seq, datagram.len() - filler_at);
    match !checksum::combine(&[pseudo, ports_len, payload, tail]) {
        // RFC 768: a computed 0 is sent as all ones (0 means no checksum).
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn writes_the_pattern() {
        let mut out = [0u8; 4];
        write(&mut out, 254);
        assert_eq!(out, [254, 255, 0, 1]);
    }

    proptest! {
        #[test]
        fn sum_equals_reading_it(seq in any::<u64>(), len in 0usize..9000) {
            let mut filler = vec![0u8; len];
            write(&mut filler, seq);
            prop_assert_eq!(sum(seq, len), checksum::data(&filler));
        }
    }
}
