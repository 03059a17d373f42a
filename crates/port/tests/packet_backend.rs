//! The AF_PACKET (TPACKET_V3) backend moving real frames over a veth pair inside a network
//! namespace of its own. Every frame sent arrives once with identical bytes, or is counted
//! under a named drop. Needs root (CAP_NET_ADMIN for the namespace, CAP_NET_RAW for the
//! sockets); fails with the reason otherwise.

use std::time::{Duration, Instant};

mod common;

use common::{MAC_A, MAC_B, Netns};
use wirespeed_port::packet::PacketPort;
use wirespeed_port::{Batch, Port, PortError, PortOptions, PortSpec};

/// IEEE local experimental ethertype: nothing else on the veth uses it.
const TEST_ETHERTYPE: u16 = 0x88b5;
const MAGIC: &[u8; 4] = b"WSPK";
const TIMEOUT: Duration = Duration::from_secs(10);

fn open(iface: &str, frame_count: u32, frame_size: u32) -> PacketPort {
    let spec: PortSpec = format!("packet:{iface}").parse().unwrap();
    let opts = PortOptions {
        frame_count,
        frame_size,
        ..PortOptions::default()
    };
    PacketPort::open(&spec, &opts).unwrap_or_else(|e| panic!("open {iface}: {e}"))
}

/// Test frame `seq`: Ethernet to `dst`, 60..=1514 bytes, payload derived from `seq`.
fn test_frame(seq: u32, src: [u8; 6], dst: [u8; 6]) -> Vec<u8> {
    let len = 60 + (seq as usize * 37) % 1455;
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(MAGIC);
    f[18..22].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f.iter_mut().enumerate().skip(22) {
        *b = (seq as usize * 7 + i) as u8;
    }
    f
}

/// The sequence number of a test frame, or None for foreign traffic.
fn test_seq(f: &[u8]) -> Option<u32> {
    (f.len() >= 22 && f[12..14] == TEST_ETHERTYPE.to_be_bytes() && &f[14..18] == MAGIC)
        .then(|| u32::from_be_bytes(f[18..22].try_into().unwrap()))
}

/// What a receiver saw: each test frame's arrival count, and everything that was wrong.
struct Arrivals {
    count: Vec<u32>,
    received: u64,
    bytes: u64,
    foreign: u64,
    corrupt: u64,
}

impl Arrivals {
    fn new(n: u32) -> Arrivals {
        Arrivals {
            count: vec![0; n as usize],
            received: 0,
            bytes: 0,
            foreign: 0,
            corrupt: 0,
        }
    }

    fn unique(&self) -> u64 {
        self.count.iter().filter(|&&c| c > 0).count() as u64
    }

    fn duplicates(&self) -> u64 {
        self.count
            .iter()
            .map(|&c| u64::from(c.saturating_sub(1)))
            .sum()
    }

    /// Checks a received frame against `expect(seq)`.
    fn check(&mut self, f: &[u8], expect: &dyn Fn(u32) -> Vec<u8>) {
        self.bytes += f.len() as u64;
        match test_seq(f) {
            Some(seq) if (seq as usize) < self.count.len() => {
                self.received += 1;
                self.count[seq as usize] += 1;
                if f != expect(seq).as_slice() {
                    self.corrupt += 1;
                }
            }
            Some(_) => self.corrupt += 1,
            None => self.foreign += 1,
        }
    }
}

/// Receives everything ready on `port`, checks it, releases it.
fn drain(
    port: &mut PacketPort,
    batch: &mut Batch,
    seen: &mut Arrivals,
    expect: &dyn Fn(u32) -> Vec<u8>,
) {
    while port.rx_burst(batch).unwrap() > 0 {
        for (addr, len) in batch.iter() {
            seen.check(port.packet(addr, len), expect);
        }
        port.release(batch);
    }
}

/// Queues `frames` on `port` through `alloc_tx`, in bursts of up to 64.
fn send_burst(port: &mut PacketPort, batch: &mut Batch, frames: &[Vec<u8>]) -> usize {
    let got = port.alloc_tx(batch, frames.len(), port.max_packet_len());
    for (i, f) in frames.iter().take(got).enumerate() {
        let addr = batch.addr(i);
        port.packet_mut(addr, f.len() as u32).copy_from_slice(f);
        batch.set_len(i, f.len() as u32);
    }
    port.tx_burst(batch).unwrap()
}

/// Sends frames 0..n from `tx` and receives them on `rx`, draining between bursts unless
/// `drain_late` (then the receive ring fills and the kernel counts its drops).
fn run_transfer(ns: &Netns, n: u32, rx_frames: u32, frame_size: u32, drain_late: bool) {
    let mut tx = open(&ns.a, 4096, frame_size);
    let mut rx = open(&ns.b, rx_frames, frame_size);
    let (mut tx_batch, mut rx_batch) = (Batch::with_capacity(64), Batch::with_capacity(64));
    let expect = |seq| test_frame(seq, MAC_A, MAC_B);
    let mut seen = Arrivals::new(n);
    let (mut next, mut sent_bytes) = (0u32, 0u64);
    let start = Instant::now();
    while next < n {
        assert!(start.elapsed() < TIMEOUT, "sending stalled at frame {next}");
        let frames: Vec<Vec<u8>> = (next..n.min(next + 64)).map(expect).collect();
        let queued = send_burst(&mut tx, &mut tx_batch, &frames);
        sent_bytes += frames[..queued].iter().map(|f| f.len() as u64).sum::<u64>();
        next += queued as u32;
        if queued == 0 {
            tx.flush().unwrap();
        }
        if !drain_late {
            drain(&mut rx, &mut rx_batch, &mut seen, &expect);
        }
    }
    while tx.tx_pending() {
        assert!(start.elapsed() < TIMEOUT, "transmit never completed");
        tx.flush().unwrap();
    }
    let tx_stats = tx.stats();
    assert_eq!(
        tx_stats.drops.total(),
        0,
        "sender drops: {:?}",
        tx_stats.drops
    );
    assert_eq!(
        (tx_stats.tx_packets, tx_stats.tx_bytes),
        (u64::from(n), sent_bytes)
    );

    let settle = Instant::now();
    loop {
        drain(&mut rx, &mut rx_batch, &mut seen, &expect);
        let dropped = rx.stats().drops.rx_ring_full;
        if seen.unique() + dropped >= u64::from(n) || settle.elapsed() > Duration::from_secs(3) {
            break;
        }
        rx.wait_rx(Duration::from_millis(10)).unwrap();
    }
    let rx_stats = rx.stats();
    eprintln!(
        "n={n} frame_size={frame_size} received={} rx_ring_full={} foreign={}",
        seen.received, rx_stats.drops.rx_ring_full, seen.foreign
    );
    assert_eq!(seen.corrupt, 0, "frames with wrong bytes");
    assert_eq!(seen.duplicates(), 0, "frames received twice");
    assert_eq!(
        seen.unique() + rx_stats.drops.total(),
        u64::from(n),
        "{:?}",
        rx_stats.drops
    );
    assert_eq!(rx_stats.rx_packets, seen.received + seen.foreign);
    assert_eq!(rx_stats.rx_bytes, seen.bytes);
    if drain_late {
        assert!(
            rx_stats.drops.rx_ring_full > 0,
            "a small ring left undrained must overflow"
        );
    } else {
        assert_eq!(
            seen.unique(),
            u64::from(n),
            "every frame arrives when the receiver keeps up"
        );
    }
}

#[test]
fn ten_thousand_frames_arrive_once_with_identical_bytes() {
    let ns = Netns::enter("ten_thousand_frames_arrive_once_with_identical_bytes");
    run_transfer(&ns, 10_000, 4096, 4096, false);
    run_transfer(&ns, 10_000, 4096, 2048, false);
}

#[test]
fn an_overflowing_receive_ring_counts_every_lost_frame() {
    let ns = Netns::enter("an_overflowing_receive_ring_counts_every_lost_frame");
    // 64 frames of 2048 bytes: two 64 KiB blocks, far fewer than 10,000 frames need.
    run_transfer(&ns, 10_000, 64, 2048, true);
}

/// l2fwd: port B sends every frame it receives back out (a copy into its transmit ring)
/// with the MAC addresses swapped in place; port A gets them all back.
#[test]
fn l2fwd_copies_received_frames_back_out() {
    let ns = Netns::enter("l2fwd_copies_received_frames_back_out");
    let n = 10_000u32;
    let mut a = open(&ns.a, 4096, 2048);
    let mut b = open(&ns.b, 4096, 2048);
    let (mut a_batch, mut b_batch) = (Batch::with_capacity(64), Batch::with_capacity(64));
    let expect = |seq| test_frame(seq, MAC_B, MAC_A);
    let mut seen = Arrivals::new(n);
    let mut next = 0u32;
    let start = Instant::now();
    while seen.unique() < u64::from(n) && start.elapsed() < TIMEOUT {
        if next < n {
            let frames: Vec<Vec<u8>> = (next..n.min(next + 64))
                .map(|s| test_frame(s, MAC_A, MAC_B))
                .collect();
            next += send_burst(&mut a, &mut a_batch, &frames) as u32;
        }
        a.flush().unwrap();
        while b.rx_burst(&mut b_batch).unwrap() > 0 {
            for (addr, len) in b_batch.iter() {
                let f = b.packet_mut(addr, len);
                let (dst, src) = f.split_at_mut(6);
                dst.swap_with_slice(&mut src[..6]);
            }
            b.tx_burst(&mut b_batch).unwrap();
        }
        b.flush().unwrap();
        drain(&mut a, &mut a_batch, &mut seen, &expect);
        if next == n && !a.tx_pending() && !b.tx_pending() {
            a.wait_rx(Duration::from_millis(5)).unwrap();
        }
    }
    let (a_stats, b_stats) = (a.stats(), b.stats());
    eprintln!("l2fwd: a={a_stats:?}\nb={b_stats:?}");
    assert_eq!((seen.corrupt, seen.duplicates()), (0, 0));
    assert_eq!(seen.unique(), u64::from(n));
    assert_eq!(a_stats.tx_packets, u64::from(n));
    assert_eq!(b_stats.rx_packets, u64::from(n));
    assert_eq!(b_stats.copies, u64::from(n));
    assert_eq!(b_stats.tx_packets, u64::from(n));
    assert_eq!(a_stats.drops.total() + b_stats.drops.total(), 0);
}

/// A VLAN tag the kernel strips into the ring header is put back: the bytes are the wire's.
#[test]
fn vlan_tagged_frames_keep_their_tag() {
    let ns = Netns::enter("vlan_tagged_frames_keep_their_tag");
    let mut tx = open(&ns.a, 256, 2048);
    let mut rx = open(&ns.b, 256, 2048);
    let mut batch = Batch::with_capacity(64);
    let tagged = |seq: u32| {
        let mut f = test_frame(seq, MAC_A, MAC_B);
        let tag = [0x81, 0x00, 0x20 | (seq as u8 & 0x0f), 0x64];
        f.splice(12..12, tag);
        f
    };
    let plain: Vec<Vec<u8>> = (0..8).map(tagged).collect();
    assert_eq!(send_burst(&mut tx, &mut batch, &plain), 8);
    let mut got = Vec::new();
    let start = Instant::now();
    while got.len() < 8 && start.elapsed() < TIMEOUT {
        rx.wait_rx(Duration::from_millis(10)).unwrap();
        while rx.rx_burst(&mut batch).unwrap() > 0 {
            for (addr, len) in batch.iter() {
                let f = rx.packet(addr, len);
                if f.len() > 16 && f[16..18] == TEST_ETHERTYPE.to_be_bytes() {
                    got.push(f.to_vec());
                }
            }
            rx.release(&mut batch);
        }
    }
    assert_eq!(got, plain);
}

/// Frames handed out and given back unsent, a frame the kernel rejects, and handles that
/// name nothing: the good frames still all go out, and each bad one is counted once.
#[test]
fn holes_rejects_and_bad_handles_are_counted_and_skipped() {
    let ns = Netns::enter("holes_rejects_and_bad_handles_are_counted_and_skipped");
    let mut tx = open(&ns.a, 64, 4096);
    let mut rx = open(&ns.b, 256, 2048);
    let mut batch = Batch::with_capacity(64);
    let mut spare = Batch::with_capacity(64);

    // 8 frames; 2 and 5 go back unsent (holes), 3 is longer than the MTU allows (the kernel
    // answers TP_STATUS_WRONG_FORMAT), the rest are sent.
    assert_eq!(tx.alloc_tx(&mut batch, 8, 1500), 8);
    let mut sent = Vec::new();
    let mut keep = Batch::with_capacity(64);
    for i in 0..8u32 {
        let (addr, mut f) = (batch.addr(i as usize), test_frame(100 + i, MAC_A, MAC_B));
        if i == 3 {
            f.resize(3000, 0xee);
        }
        tx.packet_mut(addr, f.len() as u32).copy_from_slice(&f);
        if i == 2 || i == 5 {
            spare.push(addr, f.len() as u32);
            continue;
        }
        keep.push(addr, f.len() as u32);
        if i != 3 {
            sent.push(f);
        }
    }
    batch.clear();
    tx.release(&mut spare);
    assert_eq!(tx.tx_burst(&mut keep).unwrap(), 6);

    // Handles that name nothing: refused, counted, never read.
    assert!(tx.packet(7, 64).is_empty());
    assert!(tx.packet(u64::MAX, 64).is_empty());
    keep.push(u64::MAX - 3, 60);
    keep.push(1 << 40, 60);
    assert_eq!(tx.tx_burst(&mut keep).unwrap(), 0);
    // A frame too short to be Ethernet.
    assert_eq!(tx.alloc_tx(&mut batch, 1, 10), 1);
    assert_eq!(tx.tx_burst(&mut batch).unwrap(), 0);
    // After all that, frames still flow.
    let late: Vec<Vec<u8>> = (200..204).map(|s| test_frame(s, MAC_A, MAC_B)).collect();
    assert_eq!(send_burst(&mut tx, &mut batch, &late), 4);
    sent.extend(late);

    let start = Instant::now();
    while tx.tx_pending() {
        assert!(start.elapsed() < TIMEOUT, "transmit never completed");
        tx.flush().unwrap();
    }
    let mut got = Vec::new();
    while got.len() < sent.len() && start.elapsed() < TIMEOUT {
        rx.wait_rx(Duration::from_millis(10)).unwrap();
        while rx.rx_burst(&mut batch).unwrap() > 0 {
            for (addr, len) in batch.iter() {
                let f = rx.packet(addr, len);
                if test_seq(f).is_some() {
                    got.push(f.to_vec());
                }
            }
            rx.release(&mut batch);
        }
    }
    let stats = tx.stats();
    assert_eq!(got, sent, "the good frames, in order");
    assert_eq!(stats.tx_packets, sent.len() as u64);
    assert_eq!(stats.drops.tx_error, 1, "the oversized frame");
    assert_eq!(stats.drops.tx_invalid_desc, 3, "two bad handles and a runt");
    // Every transmit frame is free again: a full ring can be handed out.
    assert_eq!(tx.alloc_tx(&mut batch, 64, 60), 64);
    tx.release(&mut batch);
    // Releasing a handle twice, or one never handed out, changes nothing.
    batch.push(1 << 40, 60);
    tx.release(&mut batch);
}

#[test]
fn bad_options_and_unknown_interfaces_are_refused() {
    let spec: PortSpec = "packet:wspk-nosuch0".parse().unwrap();
    let opts = PortOptions::default();
    assert!(
        matches!(PacketPort::open(&spec, &opts), Err(PortError::NoInterface(name)) if name == "wspk-nosuch0")
    );
    let opts = PortOptions {
        frame_size: 1000,
        ..PortOptions::default()
    };
    assert!(matches!(
        PacketPort::open(&spec, &opts),
        Err(PortError::FrameSize(1000))
    ));
}
