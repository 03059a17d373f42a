//! The internet checksum (RFC 1071), pseudo-header sums, and the incremental update (RFC 1624).
//!
//! Sums here are ones' complement sums folded to 16 bits but *not* complemented, so they can be
//! combined; the checksum field holds `!sum`. Every slice passed in must start at an even offset
//! of the checksummed area (headers do), otherwise the byte lanes of `combine` do not line up;
//! `data_chained` sums parts at any offsets after the first.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Folds a 64-bit ones' complement accumulator to 16 bits (2^16 ≡ 1 mod 0xffff, so this is exact):
/// also for sums worked out without reading the bytes (the generator's filler).
pub fn fold(acc: u64) -> u16 {
    let mut sum = (acc >> 32) + (acc & 0xffff_ffff);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Ones' complement sum of `bytes` as big-endian 16-bit words; an odd last byte is padded with 0.
pub fn data(bytes: &[u8]) -> u16 {
    // RFC 1071 §2(B): the sum does not depend on byte order, so 32-bit words are read in the
    // machine's order and swapped once at the end; 2^16 ≡ 1 (mod 0xffff), so they add up in
    // 64-bit lanes with no carry to fold back until the end (no slice is 2^34 bytes long).
    // Four independent lanes, so the compiler can run them side by side (SIMD).
    let mut lanes = [0u64; 4];
    let mut chunks = bytes.chunks_exact(16);
    for chunk in &mut chunks {
        for (lane, word) in lanes.iter_mut().zip(chunk.chunks_exact(4)) {
            *lane += u64::from(u32::from_ne_bytes([word[0], word[1], word[2], word[3]]));
        }
    }
    let mut acc: u64 = lanes.iter().sum();
    let rest = chunks.remainder();
    let mut pairs = rest.chunks_exact(2);
    for pair in &mut pairs {
        acc += u64::from(u16::from_ne_bytes([pair[0], pair[1]]));
    }
    if let [last] = pairs.remainder() {
        // The word [last, 0], in the machine's order.
        acc += u64::from(u16::from_ne_bytes([*last, 0]));
    }
    let sum = fold(acc);
    match cfg!(target_endian = "little") {
        true => sum.swap_bytes(),
        false => sum,
    }
}

/// Ones' complement sum of several partial sums.
pub fn combine(sums: &[u16]) -> u16 {
    let acc = sums.iter().fold(0u64, |acc, &sum| acc + u64::from(sum));
    fold(acc)
}

/// The checksum field value for `bytes`: the complement of their sum.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    !data(bytes)
}

/// Ones' complement sum of `parts` one after another, as if they were one slice (a packet in
/// a chain of frames), the first at an even offset. A part of odd length shifts the byte
/// lanes of the next, whose sum is then byte-swapped (RFC 1071 §2(B)) before it is added.
pub fn data_chained<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u16 {
    let (mut acc, mut odd) = (0u64, false);
    for part in parts {
        let sum = data(part);
        acc += u64::from(if odd { sum.swap_bytes() } else { sum });
        odd ^= part.len() % 2 == 1;
    }
    fold(acc)
}

/// True if `bytes`, checksum field included, sum to 0xffff (RFC 1071 §1: verification).
pub fn verify(bytes: &[u8]) -> bool {
    data(bytes) == 0xffff
}

/// Sum of the IPv4 pseudo-header of UDP and TCP (RFC 768, RFC 793): addresses, protocol, length.
pub fn pseudo_header_v4(src_addr: Ipv4Addr, dst_addr: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let mut header = [0u8; 12];
    header[0..4].copy_from_slice(&src_addr.octets());
    header[4..8].copy_from_slice(&dst_addr.octets());
    header[9] = protocol;
    header[10..12].copy_from_slice(&length.to_be_bytes());
    data(&header)
}

/// Sum of the IPv6 pseudo-header (RFC 8200 §8.1): addresses, upper-layer length, next header.
pub fn pseudo_header_v6(
    src_addr: &Ipv6Addr,
    dst_addr: &Ipv6Addr,
    next_header: u8,
    length: u32,
) -> u16 {
    let mut header = [0u8; 40];
    header[0..16].copy_from_slice(&src_addr.octets());
    header[16..32].copy_from_slice(&dst_addr.octets());
    header[32..36].copy_from_slice(&length.to_be_bytes());
    header[39] = next_header;
    data(&header)
}

/// The checksum after one 16-bit word of the covered data changed from `old_word` to `new_word`.
///
/// RFC 1624 eqn. 3, `HC' = ~(~HC + ~m + m')`, which avoids eqn. 2's -0 result. It differs from a
/// full recompute only when the new data is all zeros (0x0000 instead of 0xffff), which no real
/// header is.
pub fn update(checksum: u16, old_word: u16, new_word: u16) -> u16 {
    !combine(&[!checksum, !old_word, new_word])
}

/// [`update`] for a 32-bit field such as an IPv4 address or a TCP sequence number.
pub fn update_u32(checksum: u16, old_field: u32, new_field: u32) -> u16 {
    let checksum = update(checksum, (old_field >> 16) as u16, (new_field >> 16) as u16);
    update(checksum, old_field as u16, new_field as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The RFC 1071 definition, word by word, as a reference for the fast loop.
    fn naive_sum(bytes: &[u8]) -> u16 {
        let mut sum: u64 = 0;
        for (i, byte) in bytes.iter().enumerate() {
            sum += if i % 2 == 0 {
                u64::from(*byte) << 8
            } else {
                u64::from(*byte)
            };
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        sum as u16
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        let bytes = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(data(&bytes), 0xddf2);
        assert_eq!(internet_checksum(&bytes), 0x220d);
    }

    #[test]
    fn ipv4_header_known_checksum() {
        // The classic example header (Wikipedia "IPv4 header checksum"): checksum b861.
        let mut header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&header), 0xb861);
        header[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert!(verify(&header));
        header[15] ^= 1;
        assert!(!verify(&header));
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(data(&[0x12]), 0x1200);
        assert_eq!(data(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(data(&[]), 0);
    }

    #[test]
    fn all_ones_never_folds_to_zero() {
        assert_eq!(data(&[0xff; 64]), 0xffff);
        assert_eq!(combine(&[0xffff, 0x0001]), 0x0001);
    }

    #[test]
    fn pseudo_header_v4_literal() {
        // 10.0.0.1 -> 10.0.0.2, UDP, length 26: 0a00+0001+0a00+0002+0011+001a = 0x142e.
        let sum = pseudo_header_v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            26,
        );
        assert_eq!(sum, 0x142e);
    }

    #[test]
    fn pseudo_header_v6_literal() {
        let src: Ipv6Addr = "fe80::1".parse().unwrap();
        let dst: Ipv6Addr = "fe80::2".parse().unwrap();
        // fe80 + 0001 + fe80 + 0002 + 0010 (length 16) + 0011 (UDP) = 0x1fd24 -> 0xfd25.
        assert_eq!(pseudo_header_v6(&src, &dst, 17, 16), 0xfd25);
    }

    #[test]
    fn update_u32_matches_recompute() {
        let mut header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        header[12..16].copy_from_slice(&[10, 1, 2, 3]);
        let updated = update_u32(0xb861, 0xc0a8_0001, 0x0a01_0203);
        header[10..12].fill(0);
        assert_eq!(updated, internet_checksum(&header));
    }

    proptest! {
        #[test]
        fn fast_sum_equals_naive(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
            prop_assert_eq!(data(&bytes), naive_sum(&bytes));
        }

        #[test]
        fn a_chain_sums_as_one_slice_wherever_it_is_cut(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            cuts in proptest::collection::vec(0usize..300, 0..4),
        ) {
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(bytes.len())).collect();
            cuts.sort_unstable();
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut from = 0;
            for cut in cuts.into_iter().chain([bytes.len()]) {
                parts.push(&bytes[from..cut]);
                from = cut;
            }
            prop_assert_eq!(data_chained(parts), naive_sum(&bytes));
        }

        #[test]
        fn sums_of_even_splits_combine(bytes in proptest::collection::vec(any::<u8>(), 0..300),
                                       split in 0usize..150) {
            let split = (split * 2).min(bytes.len() & !1);
            let (head, tail) = bytes.split_at(split);
            prop_assert_eq!(combine(&[data(head), data(tail)]), naive_sum(&bytes));
        }

        #[test]
        fn incremental_update_equals_recompute(
            mut words in proptest::collection::vec(any::<u16>(), 1..64),
            index in any::<prop::sample::Index>(),
            new_word in any::<u16>(),
        ) {
            let bytes = |words: &[u16]| words.iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
            let index = index.index(words.len());
            let before = internet_checksum(&bytes(&words));
            let old_word = words[index];
            words[index] = new_word;
            // The documented exception: all-zero data, where only the sign of zero differs.
            prop_assume!(words.iter().any(|&w| w != 0));
            prop_assert_eq!(update(before, old_word, new_word), internet_checksum(&bytes(&words)));
        }

        #[test]
        fn verify_accepts_filled_checksum(mut bytes in proptest::collection::vec(any::<u8>(), 2..200)) {
            bytes[0] = 0;
            bytes[1] = 0;
            let checksum = internet_checksum(&bytes);
            bytes[0..2].copy_from_slice(&checksum.to_be_bytes());
            prop_assert!(verify(&bytes));
        }
    }
}
