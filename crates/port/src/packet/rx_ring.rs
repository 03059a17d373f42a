//! The receive ring of the packet backend: the blocks the kernel hands over, walked packet by
//! packet with every header checked against its block, and given back once the application has
//! released every packet of them; 802.1Q tags are put back in front of the packets.

use super::mmap::{self, BLOCK_DESC_LEN, FRAME_HDR_LEN, RingMap};
use crate::{DropCounters, RxMeta};

/// The 802.1Q tag the kernel strips into the packet header (TP_STATUS_VLAN_VALID).
const VLAN_HLEN: usize = 4;
const ETH_ALEN2: usize = 12;

/// Receive ring state: which blocks user space holds, and the walk through the current one.
pub(super) struct RxRing {
    block_size: usize,
    blocks: Vec<RxBlock>,
    current: usize,
    walk: Option<BlockWalk>,
}

#[derive(Debug, Clone, Copy, Default)]
struct RxBlock {
    /// Handed to us by the kernel and not yet given back.
    held: bool,
    /// Every packet of it has been handed to the application.
    walked: bool,
    /// Packets of it the application still holds.
    outstanding: u32,
}

#[derive(Debug, Clone, Copy)]
struct BlockWalk {
    remaining: u32,
    /// Offset of the next packet header from the block start.
    next: usize,
}

impl RxRing {
    pub(super) fn new(block_size: usize, block_nr: usize) -> RxRing {
        RxRing {
            block_size,
            blocks: vec![RxBlock::default(); block_nr],
            current: 0,
            walk: None,
        }
    }

    /// True when a packet may be ready: a block is being walked, or the next one is handed over.
    pub(super) fn packets_ready(&self, map: &RingMap) -> bool {
        self.walk.is_some() || self.block_ready(map)
    }

    /// True when the kernel has handed over the current block and we have not walked it yet.
    fn block_ready(&self, map: &RingMap) -> bool {
        !self.blocks[self.current].held && map.user_block(self.current * self.block_size).is_some()
    }

    pub(super) fn owns(&self, addr: usize, len: usize) -> bool {
        let block = addr / self.block_size;
        let start = block * self.block_size;
        self.blocks.get(block).is_some_and(|b| b.held)
            && addr >= start + BLOCK_DESC_LEN
            && addr + len <= start + self.block_size
    }

    /// The next received packet (handle, length, timestamp and wire length), walking into the
    /// next block when the kernel has handed it over. Headers that point outside their block
    /// are counted and skipped.
    pub(super) fn next_packet(
        &mut self,
        map: &mut RingMap,
        drops: &mut DropCounters,
    ) -> Option<(usize, u32, RxMeta)> {
        loop {
            if self.walk.is_none() && !self.open_block(map) {
                return None;
            }
            let walk = self.walk.as_mut()?;
            if walk.remaining == 0 {
                self.finish_block(map);
                continue;
            }
            let block = self.current * self.block_size;
            let at = walk.next;
            let in_block = at >= BLOCK_DESC_LEN
                && at
                    .checked_add(FRAME_HDR_LEN)
                    .is_some_and(|end| end <= self.block_size);
            let header = in_block.then(|| map.rx_frame(block + at)).flatten();
            let Some(header) = header else {
                drops.rx_invalid_desc += u64::from(walk.remaining);
                self.finish_block(map);
                continue;
            };
            walk.remaining -= 1;
            if walk.remaining > 0 {
                if (header.next_offset as usize) < FRAME_HDR_LEN {
                    // Later packets cannot be found: count them, end the block.
                    drops.rx_invalid_desc += u64::from(walk.remaining);
                    walk.remaining = 0;
                } else {
                    walk.next = at.saturating_add(header.next_offset as usize);
                }
            }
            let mac = usize::from(header.mac);
            let snaplen = header.snaplen as usize;
            let end = at.checked_add(mac).and_then(|d| d.checked_add(snaplen));
            if mac < FRAME_HDR_LEN || end.is_none_or(|end| end > self.block_size) {
                drops.rx_invalid_desc += 1;
                continue;
            }
            // Read before a restored tag moves the MAC header towards the sockaddr_ll.
            let outgoing = map.rx_outgoing(block + at).unwrap_or(false);
            let (data, len) = restore_vlan_tag(map, block + at, &header);
            let meta = RxMeta {
                ts_ns: u64::from(header.sec) * 1_000_000_000 + u64::from(header.nsec),
                // A restored tag lengthens the packet on the wire too (libpcap does the same).
                wire_len: header.len.max(header.snaplen) + (len - header.snaplen),
                outgoing,
                vlan_restored: len > header.snaplen,
            };
            self.blocks[self.current].outstanding += 1;
            if self.walk.is_some_and(|w| w.remaining == 0) {
                self.finish_block(map);
            }
            return Some((data, len, meta));
        }
    }

    fn open_block(&mut self, map: &RingMap) -> bool {
        let index = self.current;
        if self.blocks[index].held {
            // Still ours from the last lap (the application holds some of its packets).
            return false;
        }
        let Some(header) = map.user_block(index * self.block_size) else {
            return false;
        };
        self.blocks[index] = RxBlock {
            held: true,
            walked: false,
            outstanding: 0,
        };
        self.walk = Some(BlockWalk {
            remaining: header.num_pkts,
            next: header.first_pkt as usize,
        });
        true
    }

    fn finish_block(&mut self, map: &RingMap) {
        let index = self.current;
        self.walk = None;
        self.blocks[index].walked = true;
        self.current = (index + 1) % self.blocks.len();
        if self.blocks[index].outstanding == 0 {
            self.give_to_kernel(map, index);
        }
    }

    fn give_to_kernel(&mut self, map: &RingMap, index: usize) {
        self.blocks[index] = RxBlock::default();
        map.give_block_to_kernel(index * self.block_size);
    }

    /// The application is done with the packet at `addr`; false for a handle we did not give.
    pub(super) fn release(&mut self, map: &RingMap, addr: usize) -> bool {
        let index = addr / self.block_size;
        let Some(block) = self.blocks.get_mut(index) else {
            return false;
        };
        if !block.held || block.outstanding == 0 {
            return false;
        }
        block.outstanding -= 1;
        if block.outstanding == 0 && block.walked {
            self.give_to_kernel(map, index);
        }
        true
    }
}

/// Puts back the 802.1Q tag the kernel moved into the packet header, so the application sees
/// the bytes that were on the wire (libpcap does the same): the MAC addresses move 4 bytes
/// towards the header, into the gap the kernel leaves in front of the packet.
fn restore_vlan_tag(map: &mut RingMap, frame: usize, header: &mmap::RxFrameHeader) -> (usize, u32) {
    let data = frame + usize::from(header.mac);
    let (mac, snaplen) = (usize::from(header.mac), header.snaplen);
    if header.status & libc::TP_STATUS_VLAN_VALID == 0
        || mac < FRAME_HDR_LEN + VLAN_HLEN
        || (snaplen as usize) < ETH_ALEN2
    {
        return (data, snaplen);
    }
    let tpid = if header.status & libc::TP_STATUS_VLAN_TPID_VALID != 0 {
        header.vlan_tpid
    } else {
        wirespeed_packet::EtherType::VLAN.0
    };
    let tci = header.vlan_tci as u16;
    let start = data - VLAN_HLEN;
    if !map.copy_within(data, start, ETH_ALEN2) {
        return (data, snaplen);
    }
    if let Some(tag) = map.bytes_mut(start + ETH_ALEN2, VLAN_HLEN) {
        tag[..2].copy_from_slice(&tpid.to_be_bytes());
        tag[2..].copy_from_slice(&tci.to_be_bytes());
    }
    (start, snaplen + VLAN_HLEN as u32)
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    /// A receive ring in a file mapping, so the test can play the kernel.
    fn fake_rx_ring(block_size: usize, blocks: usize) -> (RingMap, RxRing) {
        let path = std::env::temp_dir().join(format!("wspk-ring-{}", std::process::id()));
        let file = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        file.set_len((block_size * blocks) as u64).unwrap();
        let map = RingMap::map(file.as_fd(), block_size * blocks).unwrap();
        (map, RxRing::new(block_size, blocks))
    }

    fn put(map: &mut RingMap, off: usize, value: u32) {
        map.bytes_mut(off, 4)
            .unwrap()
            .copy_from_slice(&value.to_ne_bytes());
    }

    /// Writes a block header and packet headers: (offset in block, next, tp_mac, snaplen).
    fn put_block(map: &mut RingMap, block: usize, packets: &[(usize, u32, u16, u32)]) {
        put(map, block + 12, packets.len() as u32);
        put(map, block + 16, packets.first().map_or(48, |p| p.0 as u32));
        for &(at, next, mac, snaplen) in packets {
            put(map, block + at, next);
            put(map, block + at + 12, snaplen);
            put(map, block + at + 20, libc::TP_STATUS_USER);
            map.bytes_mut(block + at + 24, 2)
                .unwrap()
                .copy_from_slice(&mac.to_ne_bytes());
        }
        put(map, block + 8, libc::TP_STATUS_USER);
    }

    #[test]
    fn lying_receive_headers_are_counted_and_never_followed() {
        let block = 64 << 10;
        let (mut map, mut rx) = fake_rx_ring(block, 3);
        let mut drops = DropCounters::default();
        // Block 0: good, data running off the block end, good with a next offset of 0
        // although one more packet is announced.
        put_block(
            &mut map,
            0,
            &[
                (48, 256, 82, 60),
                (304, 256, 82, block as u32),
                (560, 0, 82, 64),
            ],
        );
        put(&mut map, 12, 4);
        // Block 1: two packets announced, the first said to lie past the block end.
        put(&mut map, block + 12, 2);
        put(&mut map, block + 16, block as u32 + 8);
        put(&mut map, block + 8, libc::TP_STATUS_USER);
        let first = rx.next_packet(&mut map, &mut drops).map(|(a, l, _)| (a, l));
        assert_eq!(first, Some((48 + 82, 60)));
        let second = rx.next_packet(&mut map, &mut drops).map(|(a, l, _)| (a, l));
        assert_eq!(second, Some((560 + 82, 64)));
        assert_eq!(rx.next_packet(&mut map, &mut drops), None);
        assert_eq!(drops.rx_invalid_desc, 1 + 1 + 2);
        // Block 1 held nothing valid and went straight back to the kernel.
        assert!(map.user_block(block).is_none());
        // Block 0 goes back once both packets are released, not before.
        assert!(rx.release(&map, 48 + 82));
        assert!(map.user_block(0).is_some());
        assert!(!rx.release(&map, 7 * block), "a handle outside the ring");
        assert!(rx.release(&map, 560 + 82));
        assert!(!rx.release(&map, 560 + 82), "released twice");
        assert!(map.user_block(0).is_none());
        assert!(!rx.owns(48 + 82, 60));
    }
}
