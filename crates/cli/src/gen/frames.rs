//! What each packet is: its flow (varying the source port, then the source address), its
//! size (fixed, a range, or IMIX) and its sequence number (with `--skip-every`, some numbers
//! are never sent, so a receiver must report exactly those as lost).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wirespeed_packet::{FrameSpec, IpPair};

/// The simple IMIX: IP packets of 40, 576 and 1500 bytes, 7:4:1, in Ethernet frames of
/// 64 (the least), 594 and 1518 bytes on the wire (FCS included), as TRex sends it;
/// interleaved so that every stretch of traffic has the mix.
pub const IMIX_PATTERN: [u32; 12] = [64, 594, 64, 64, 594, 64, 1518, 64, 594, 64, 594, 64];

/// Frame sizes on the wire (FCS included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizePlan {
    Fixed(u32),
    /// Uniformly random in `lo..=hi` (a fixed seed: every run sends the same sizes).
    Range(u32, u32),
    /// [`IMIX_PATTERN`], with sizes below the smallest frame of the protocol raised to it.
    Imix(Vec<u32>),
    /// The user's own mix (`--imix=64,1500,9000`), sizes in turn.
    Mix(Vec<u32>),
}

impl SizePlan {
    pub fn min(&self) -> u32 {
        match self {
            SizePlan::Fixed(s) => *s,
            SizePlan::Range(lo, _) => *lo,
            SizePlan::Imix(p) | SizePlan::Mix(p) => *p.iter().min().unwrap_or(&64),
        }
    }

    pub fn max(&self) -> u32 {
        match self {
            SizePlan::Fixed(s) => *s,
            SizePlan::Range(_, hi) => *hi,
            SizePlan::Imix(p) | SizePlan::Mix(p) => *p.iter().max().unwrap_or(&1500),
        }
    }

    pub fn mean(&self) -> f64 {
        match self {
            SizePlan::Fixed(s) => *s as f64,
            SizePlan::Range(lo, hi) => (*lo as f64 + *hi as f64) / 2.0,
            SizePlan::Imix(p) | SizePlan::Mix(p) => {
                p.iter().map(|&s| s as f64).sum::<f64>() / p.len() as f64
            }
        }
    }

    /// The plan as `--size` spells it: `64`, `64-1500`, or `imix`.
    pub fn label(&self) -> String {
        match self {
            SizePlan::Fixed(s) => s.to_string(),
            SizePlan::Range(lo, hi) => format!("{lo}-{hi}"),
            SizePlan::Imix(_) => "imix".to_string(),
            SizePlan::Mix(p) => {
                let sizes: Vec<String> = p.iter().map(u32::to_string).collect();
                format!("imix={}", sizes.join(","))
            }
        }
    }

    /// A few sizes that stand for the plan, with their weights (for the kernel engine,
    /// which sends prebuilt frames): up to `most` evenly spaced sizes for a range.
    pub fn representatives(&self, most: usize) -> Vec<(u32, u32)> {
        match self {
            SizePlan::Fixed(s) => vec![(*s, 1)],
            SizePlan::Range(lo, hi) => {
                let n = ((hi - lo + 1) as usize).min(most.max(1));
                (0..n)
                    .map(|i| {
                        let span = (hi - lo) as u64;
                        let step = if n > 1 {
                            span * i as u64 / (n as u64 - 1)
                        } else {
                            0
                        };
                        (lo + step as u32, 1)
                    })
                    .collect()
            }
            SizePlan::Imix(p) | SizePlan::Mix(p) => {
                let mut out: Vec<(u32, u32)> = Vec::new();
                for &s in p {
                    match out.iter_mut().find(|(size, _)| *size == s) {
                        Some((_, w)) => *w += 1,
                        None => out.push((s, 1)),
                    }
                }
                out
            }
        }
    }
}

/// Parses `--imix=SIZES`: sizes in bytes, comma-separated, sent in turn (a size named
/// twice is sent twice as often).
pub fn parse_imix(text: &str) -> Result<Vec<u32>, String> {
    let sizes: Result<Vec<u32>, _> = text.split(',').map(|s| s.trim().parse::<u32>()).collect();
    match sizes {
        Ok(s) if !s.is_empty() && s.len() <= 1024 => Ok(s),
        _ => Err(format!(
            "--imix={text}: expected up to 1024 sizes in bytes, comma-separated (64,576,1500)"
        )),
    }
}

/// Parses `--size`: `64` or `64-1500`.
pub fn parse_size(text: &str) -> Result<SizePlan, String> {
    let num = |s: &str| {
        s.trim().parse::<u32>().map_err(|_| {
            format!("--size {text}: expected a size in bytes (64) or a range (64-1500)")
        })
    };
    match text.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (num(lo)?, num(hi)?);
            if lo > hi {
                return Err(format!("--size {text}: the range is empty ({lo} > {hi})"));
            }
            Ok(if lo == hi {
                SizePlan::Fixed(lo)
            } else {
                SizePlan::Range(lo, hi)
            })
        }
        None => Ok(SizePlan::Fixed(num(text)?)),
    }
}

/// The flows: flow `k` has source port `base + k % span` and source address
/// `base + k / span`, where `span` is the number of ports from the base port up to 65535;
/// the source addresses step over the destination's (a flow from the address it goes to
/// would be a different thing).
#[derive(Debug, Clone)]
pub struct FlowPlan {
    pub base: FrameSpec,
    pub flows: u32,
    span: u32,
}

impl FlowPlan {
    pub fn new(base: FrameSpec, flows: u32) -> FlowPlan {
        let span = 65536 - u32::from(base.src_port);
        FlowPlan { base, flows, span }
    }

    /// How many source addresses the flows use.
    pub fn addresses(&self) -> u32 {
        self.flows.div_ceil(self.span)
    }

    /// The frame of flow `k`.
    pub fn flow(&self, k: u32) -> FrameSpec {
        let mut spec = self.base.clone();
        spec.src_port = self.base.src_port + (k % self.span) as u16;
        let offset = k / self.span;
        spec.ip = match spec.ip {
            IpPair::V4(src, dst) => {
                let step = past_destination(
                    u128::from(u32::from(src)),
                    u128::from(u32::from(dst)),
                    offset,
                    u128::from(u32::MAX),
                );
                IpPair::V4(
                    Ipv4Addr::from(u32::from(src).wrapping_add(step as u32)),
                    dst,
                )
            }
            IpPair::V6(src, dst) => {
                let step = past_destination(u128::from(src), u128::from(dst), offset, u128::MAX);
                IpPair::V6(Ipv6Addr::from(u128::from(src).wrapping_add(step)), dst)
            }
        };
        spec
    }
}

/// How far past the base source address flow address number `offset` is: `offset`, or one
/// more once the addresses reach the destination's (`dst`, as far past `src` as it is
/// within an address space whose highest address is `max`).
fn past_destination(src: u128, dst: u128, offset: u32, max: u128) -> u128 {
    let offset = u128::from(offset);
    let to_dst = dst.wrapping_sub(src) & max;
    match to_dst {
        // Asked for as the source itself: kept.
        0 => offset,
        d if d <= offset => offset + 1,
        _ => offset,
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    match b {
        0 => a,
        b => gcd(b, a % b),
    }
}

/// The source address of a frame (for messages).
pub fn src_addr(spec: &FrameSpec) -> IpAddr {
    match spec.ip {
        IpPair::V4(src, _) => IpAddr::V4(src),
        IpPair::V6(src, _) => IpAddr::V6(src),
    }
}

/// The packets to send, one after another: flows round robin, sizes by plan, sequence
/// numbers counting up (skipping every `skip_every`-th one when asked).
pub struct PacketPlan {
    flows: FlowPlan,
    sizes: SizePlan,
    skip_every: u64,
    /// The frame of the current flow, kept so that only the fields that change are rewritten.
    current: FrameSpec,
    flow: u32,
    size_index: usize,
    /// Patterned sizes and flows that share a factor would tie each flow to some sizes
    /// (4 flows, IMIX's 12: flow 1 never 1518 bytes): every `shift_every` packets (their
    /// least common multiple) the pattern steps once more, so each flow meets every size.
    /// None where they share none.
    shift_every: Option<u64>,
    since_shift: u64,
    rng: u64,
    /// The next packet's size, drawn early by `peek_frame_len`.
    drawn: Option<u32>,
    pub next_seq: u64,
    pub skipped: u64,
}

/// One planned packet.
pub struct Planned<'a> {
    pub spec: &'a FrameSpec,
    /// Frame length without FCS.
    pub frame_len: usize,
    pub seq: u64,
}

impl PacketPlan {
    pub fn new(flows: FlowPlan, sizes: SizePlan, skip_every: Option<u64>) -> PacketPlan {
        let pattern = match &sizes {
            SizePlan::Imix(p) | SizePlan::Mix(p) => p.len() as u64,
            _ => 1,
        };
        let (f, l) = (u64::from(flows.flows.max(1)), pattern.max(1));
        let shared = gcd(f, l);
        PacketPlan {
            shift_every: (shared > 1).then(|| f / shared * l),
            since_shift: 0,
            current: flows.flow(0),
            flows,
            sizes,
            skip_every: skip_every.unwrap_or(0),
            flow: 0,
            size_index: 0,
            rng: 0x9e37_79b9_7f4a_7c15,
            drawn: None,
            next_seq: 0,
            skipped: 0,
        }
    }

    pub fn sizes(&self) -> &SizePlan {
        &self.sizes
    }

    fn next_size(&mut self) -> u32 {
        match &self.sizes {
            SizePlan::Fixed(s) => *s,
            SizePlan::Range(lo, hi) => {
                // xorshift64: cheap, and the same sizes every run.
                self.rng ^= self.rng << 13;
                self.rng ^= self.rng >> 7;
                self.rng ^= self.rng << 17;
                lo + (self.rng % u64::from(hi - lo + 1)) as u32
            }
            SizePlan::Imix(p) | SizePlan::Mix(p) => {
                let s = p[self.size_index];
                self.size_index = (self.size_index + 1) % p.len();
                if let Some(every) = self.shift_every {
                    self.since_shift += 1;
                    if self.since_shift == every {
                        self.since_shift = 0;
                        self.size_index = (self.size_index + 1) % p.len();
                    }
                }
                s
            }
        }
    }

    /// The length (without FCS) the next packet will have: a sender that needs a buffer of
    /// the right size first (a chain of frames) asks before taking the packet.
    pub fn peek_frame_len(&mut self) -> usize {
        let size = match self.drawn {
            Some(s) => s,
            None => self.next_size(),
        };
        self.drawn = Some(size);
        size as usize - 4
    }

    /// The next packet to send.
    #[inline]
    pub fn next_packet(&mut self) -> Planned<'_> {
        if self.skip_every > 0 && (self.next_seq + 1).is_multiple_of(self.skip_every) {
            self.next_seq += 1;
            self.skipped += 1;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let size = match self.drawn.take() {
            Some(s) => s,
            None => self.next_size(),
        };
        if self.flows.flows > 1 {
            self.current = self.flows.flow(self.flow);
            self.flow = (self.flow + 1) % self.flows.flows;
        }
        Planned {
            spec: &self.current,
            frame_len: size as usize - 4,
            seq,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirespeed_packet::{L4Kind, MacAddr};

    fn base(src_port: u16, ip: IpPair) -> FrameSpec {
        FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            vlan: None,
            ip,
            l4: L4Kind::Udp,
            src_port,
            dst_port: 9,
            generator: 1,
        }
    }

    fn v4() -> IpPair {
        IpPair::V4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2))
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64"), Ok(SizePlan::Fixed(64)));
        assert_eq!(parse_size("64-1500"), Ok(SizePlan::Range(64, 1500)));
        assert_eq!(parse_size("100-100"), Ok(SizePlan::Fixed(100)));
        assert!(parse_size("1500-64").is_err());
        assert!(parse_size("big").is_err());
        assert!(parse_size("-5").is_err());
    }

    #[test]
    fn imix_is_seven_four_one() {
        let count = |s| IMIX_PATTERN.iter().filter(|&&x| x == s).count();
        assert_eq!((count(64), count(594), count(1518)), (7, 4, 1));
        let reps = SizePlan::Imix(IMIX_PATTERN.to_vec()).representatives(8);
        assert_eq!(reps, vec![(64, 7), (594, 4), (1518, 1)]);
    }

    #[test]
    fn flows_vary_port_then_address() {
        let plan = FlowPlan::new(base(65534, v4()), 5);
        let tuples: Vec<_> = (0..5)
            .map(|k| {
                let f = plan.flow(k);
                (f.src_port, f.ip)
            })
            .collect();
        let ip = |d| IpPair::V4(Ipv4Addr::new(10, 0, 0, d), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(
            tuples,
            vec![
                (65534, ip(1)),
                (65535, ip(1)),
                // 10.0.0.2 is the destination's: stepped over.
                (65534, ip(3)),
                (65535, ip(3)),
                (65534, ip(4))
            ]
        );
        assert_eq!(plan.addresses(), 3);
    }

    #[test]
    fn every_flow_meets_every_imix_size_in_proportion() {
        for flows in [1, 2, 3, 4, 5, 6, 12, 24] {
            let plan = FlowPlan::new(base(1024, v4()), flows);
            let mut packets = PacketPlan::new(plan, SizePlan::Imix(IMIX_PATTERN.to_vec()), None);
            // Each flow's sizes over 12 of its packets per round of the pattern.
            let rounds = 12 * 12;
            let mut seen = vec![[0u32; 3]; flows as usize];
            let mut total = [0u32; 3];
            for i in 0..flows * rounds {
                let p = packets.next_packet();
                let size = [64, 594, 1518]
                    .iter()
                    .position(|&s| s == p.frame_len + 4)
                    .unwrap();
                seen[(i % flows) as usize][size] += 1;
                total[size] += 1;
            }
            let n = flows * rounds / 12;
            assert_eq!(total, [7 * n, 4 * n, n], "{flows} flows");
            for (f, s) in seen.iter().enumerate() {
                assert_eq!(s, &[7 * 12, 4 * 12, 12], "{flows} flows: flow {f}");
            }
        }
    }

    #[test]
    fn flow_addresses_step_over_the_destination_only() {
        // The destination below the source, or the source itself, changes nothing.
        assert_eq!(past_destination(10, 5, 3, u128::from(u32::MAX)), 3);
        assert_eq!(past_destination(10, 10, 3, u128::from(u32::MAX)), 3);
        // Ahead: reached at offset 2.
        assert_eq!(past_destination(10, 12, 1, u128::from(u32::MAX)), 1);
        assert_eq!(past_destination(10, 12, 2, u128::from(u32::MAX)), 3);
        assert_eq!(past_destination(10, 12, 7, u128::from(u32::MAX)), 8);
        // Around the top of the IPv4 space.
        let top = u128::from(u32::MAX);
        assert_eq!(past_destination(top, 0, 1, top), 2);
    }

    #[test]
    fn ipv6_flows_count_up_the_source_address() {
        let v6 = IpPair::V6("fd00::ffff".parse().unwrap(), "fd00::2".parse().unwrap());
        let plan = FlowPlan::new(base(65535, v6), 3);
        let srcs: Vec<String> = (0..3)
            .map(|k| src_addr(&plan.flow(k)).to_string())
            .collect();
        assert_eq!(srcs, ["fd00::ffff", "fd00::1:0", "fd00::1:1"]);
        assert!((0..3).all(|k| plan.flow(k).src_port == 65535));
    }

    #[test]
    fn range_sizes_stay_in_range_and_cover_it() {
        let flows = FlowPlan::new(base(1024, v4()), 1);
        let mut plan = PacketPlan::new(flows, SizePlan::Range(64, 67), None);
        let mut seen = [0u32; 4];
        for _ in 0..1000 {
            let len = plan.next_packet().frame_len + 4;
            assert!((64..=67).contains(&len));
            seen[len - 64] += 1;
        }
        assert!(seen.iter().all(|&n| n > 150), "{seen:?}");
    }

    #[test]
    fn skip_every_leaves_out_exactly_those_numbers() {
        let flows = FlowPlan::new(base(1024, v4()), 3);
        let mut plan = PacketPlan::new(flows, SizePlan::Fixed(64), Some(4));
        let seqs: Vec<u64> = (0..9).map(|_| plan.next_packet().seq).collect();
        assert_eq!(seqs, vec![0, 1, 2, 4, 5, 6, 8, 9, 10]);
        assert_eq!(plan.skipped, 2);
        assert_eq!(plan.next_seq, 11);
    }

    #[test]
    fn ranges_pick_evenly_spaced_representatives() {
        assert_eq!(
            SizePlan::Range(64, 1500).representatives(3),
            vec![(64, 1), (782, 1), (1500, 1)]
        );
        assert_eq!(
            SizePlan::Range(64, 65).representatives(8),
            vec![(64, 1), (65, 1)]
        );
    }
}
