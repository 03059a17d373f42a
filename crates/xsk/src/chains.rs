//! Packets that span several frames (AF_XDP multi-buffer): a received packet is a chain of
//! RX descriptors, each but the last flagged XDP_PKT_CONTD. The kernel publishes whole
//! packets, but a burst read by the application may end inside one; a chain that never ends,
//! or one with a descriptor we cannot follow, must be dropped without reading past its frames
//! (Documentation/networking/af_xdp.rst, "Multi-Buffer Support").

use wirespeed_umem::{FramePool, Umem};

use crate::Desc;

/// The most descriptors one received packet may span. The kernel's own limit is
/// MAX_SKB_FRAGS + 1 (18 by default, at most 46 when the kernel is built with more frags);
/// a chain longer than this is not a packet the kernel made, and is dropped.
pub const RX_MAX_SEGMENTS: usize = 64;

/// The most descriptors one sent packet may span in copy mode: MAX_SKB_FRAGS + 1, which the
/// kernel documentation asks portable programs to take as 18. Past it the kernel drops the
/// descriptors and never completes their frames.
pub const TX_MAX_SEGMENTS: usize = 18;

/// The descriptor continues in the next one (XDP_PKT_CONTD).
pub const CONTINUES: u32 = libc::XDP_PKT_CONTD;

/// What one pass over the RX ring took.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ChainOutcome {
    /// Packets delivered to the caller.
    pub packets: u32,
    /// Their bytes, every segment counted.
    pub bytes: u64,
    /// Descriptors taken off the ring: delivered, dropped, or skipped.
    pub descs: u32,
    /// Packets dropped because a descriptor lay outside the UMEM (its frame, if real, went
    /// back to the pool).
    pub invalid: u32,
    /// Packets dropped as malformed chains: longer than `RX_MAX_SEGMENTS`, or with an empty
    /// segment.
    pub bad_chains: u32,
}

/// Assembles chains from the `n` descriptors `desc_at(0..n)`, calling `deliver(segments)`
/// with each whole packet's segments, head first. `deliver` returns false when it has no
/// room: that packet and the rest stay in the ring. A chain still open at `n` stays too
/// (it is taken whole on a later pass), so `descs` counts only descriptors of packets ended.
/// `resync` carries across passes: set, descriptors are dropped until one ends a packet.
pub(crate) fn assemble(
    n: u32,
    desc_at: impl Fn(u32) -> Desc,
    resync: &mut bool,
    umem: &Umem,
    pool: &mut FramePool,
    mut deliver: impl FnMut(&[(u64, u32)]) -> bool,
) -> ChainOutcome {
    let mut out = ChainOutcome::default();
    let mut segs = [(0u64, 0u32); RX_MAX_SEGMENTS];
    let mut k = 0;
    // Why the open chain will be dropped, once it ends.
    let mut outside = false;
    let mut empty = false;
    let free = |pool: &mut FramePool, addr: u64| {
        if umem.is_valid(addr, 0) {
            pool.free(umem.frame_base(addr));
        }
    };
    for i in 0..n {
        let d = desc_at(i);
        let ends = d.options & CONTINUES == 0;
        if *resync {
            free(pool, d.addr);
            *resync = !ends;
            out.descs = i + 1;
            continue;
        }
        if k == RX_MAX_SEGMENTS {
            // Too long: drop what we hold and skip to the packet's end.
            for &(addr, _) in &segs[..k] {
                free(pool, addr);
            }
            free(pool, d.addr);
            out.bad_chains += 1;
            (k, outside, empty) = (0, false, false);
            *resync = !ends;
            out.descs = i + 1;
            continue;
        }
        if umem.is_valid(d.addr, d.len) {
            segs[k] = (d.addr, d.len);
            k += 1;
            empty |= d.len == 0 && !(ends && k == 1);
        } else {
            free(pool, d.addr);
            outside = true;
        }
        if !ends {
            continue;
        }
        if outside || empty {
            for &(addr, _) in &segs[..k] {
                free(pool, addr);
            }
            match outside {
                true => out.invalid += 1,
                false => out.bad_chains += 1,
            }
        } else if deliver(&segs[..k]) {
            out.packets += 1;
            out.bytes += segs[..k].iter().map(|&(_, len)| len as u64).sum::<u64>();
        } else {
            break;
        }
        (k, outside, empty) = (0, false, false);
        out.descs = i + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use wirespeed_umem::UmemConfig;

    use super::*;

    const FRAME: u64 = 4096;

    fn umem() -> (Umem, FramePool) {
        let umem = Umem::new(UmemConfig {
            frame_count: 16,
            ..UmemConfig::default()
        })
        .expect("umem");
        (umem, FramePool::with_capacity(16))
    }

    fn desc(frame: u64, len: u32, more: bool) -> Desc {
        Desc {
            addr: frame * FRAME + 256,
            len,
            options: if more { CONTINUES } else { 0 },
        }
    }

    /// The segments of each packet delivered.
    type Delivered = Vec<Vec<(u64, u32)>>;

    /// Runs `assemble` over `descs`, collecting what it delivers (at most `room` packets)
    /// and the frames it gave back (by number).
    fn run(descs: &[Desc], resync: &mut bool, room: usize) -> (ChainOutcome, Delivered, Vec<u64>) {
        let (umem, mut pool) = umem();
        let mut got = Vec::new();
        let out = assemble(
            descs.len() as u32,
            |i| descs[i as usize],
            resync,
            &umem,
            &mut pool,
            |segs| {
                if got.len() == room {
                    return false;
                }
                got.push(segs.to_vec());
                true
            },
        );
        let mut freed = Vec::new();
        while let Some(f) = pool.alloc() {
            freed.push(f / FRAME);
        }
        freed.sort();
        (out, got, freed)
    }

    #[test]
    fn chains_are_delivered_whole_head_first() {
        let descs = [
            desc(0, 60, false),
            desc(1, 3840, true),
            desc(2, 3840, true),
            desc(3, 1334, false),
        ];
        let (out, got, freed) = run(&descs, &mut false, 10);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0], vec![(256, 60)]);
        assert_eq!(
            got[1],
            vec![(4096 + 256, 3840), (8192 + 256, 3840), (12288 + 256, 1334)]
        );
        assert_eq!(
            (out.packets, out.descs, out.bytes),
            (2, 4, 60 + 3840 * 2 + 1334)
        );
        assert!(freed.is_empty());
    }

    #[test]
    fn a_chain_cut_by_the_window_stays_in_the_ring() {
        let descs = [desc(0, 60, false), desc(1, 3840, true), desc(2, 3840, true)];
        let (out, got, freed) = run(&descs, &mut false, 10);
        assert_eq!((out.packets, out.descs), (1, 1), "only the whole packet");
        assert_eq!(got.len(), 1);
        assert!(
            freed.is_empty(),
            "nothing dropped: the chain comes whole later"
        );
    }

    #[test]
    fn no_room_leaves_the_packet_and_the_rest() {
        let descs = [desc(0, 60, false), desc(1, 100, true), desc(2, 5, false)];
        let (out, got, _) = run(&descs, &mut false, 1);
        assert_eq!((out.packets, out.descs, got.len()), (1, 1, 1));
    }

    #[test]
    fn a_chain_that_never_ends_is_dropped_and_skipped_to_its_end() {
        // 70 continuing descriptors over 14 frames (the frames repeat: only counts matter
        // here), then one that ends the packet, then a good packet.
        let mut descs: Vec<Desc> = (0..70).map(|i| desc(i % 14, 100, true)).collect();
        descs.push(desc(14, 100, false));
        descs.push(desc(15, 42, false));
        let mut resync = false;
        let (umem, mut pool) = umem();
        let mut got = Vec::new();
        let out = assemble(
            descs.len() as u32,
            |i| descs[i as usize],
            &mut resync,
            &umem,
            &mut pool,
            |segs| {
                got.push(segs.to_vec());
                true
            },
        );
        assert_eq!(
            (out.bad_chains, out.packets, out.descs),
            (1, 1, descs.len() as u32)
        );
        assert_eq!(got, vec![vec![(15 * 4096 + 256, 42)]]);
        assert!(!resync);
    }

    #[test]
    fn resynchronising_carries_across_passes() {
        let mut resync = true;
        let descs = [desc(0, 100, true), desc(1, 100, false), desc(2, 60, false)];
        let (out, got, freed) = run(&descs, &mut resync, 10);
        assert_eq!((out.packets, out.descs, out.bad_chains), (1, 3, 0));
        assert_eq!(got, vec![vec![(2 * 4096 + 256, 60)]]);
        assert_eq!(freed, vec![0, 1], "the skipped frames went home");
        assert!(!resync);
    }

    #[test]
    fn an_empty_segment_drops_the_chain() {
        let descs = [desc(0, 100, true), desc(1, 0, true), desc(2, 60, false)];
        let (out, got, freed) = run(&descs, &mut false, 10);
        assert_eq!((out.packets, out.bad_chains, out.descs), (0, 1, 3));
        assert!(got.is_empty());
        assert_eq!(freed, vec![0, 1, 2]);
    }

    #[test]
    fn a_segment_outside_its_frame_is_never_read() {
        let descs = [
            desc(0, 100, true),
            Desc {
                addr: 4096 + 4000,
                len: 200,
                options: CONTINUES,
            },
            desc(2, 60, false),
            Desc {
                addr: 1 << 40,
                len: 60,
                options: 0,
            },
        ];
        let (out, got, freed) = run(&descs, &mut false, 10);
        assert_eq!((out.packets, out.invalid, out.descs), (0, 2, 4));
        assert!(got.is_empty());
        assert_eq!(freed, vec![0, 1, 2], "frames inside the UMEM went home");
    }
}
