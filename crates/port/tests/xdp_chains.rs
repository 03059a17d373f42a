//! Packets larger than a frame on `xdp:` ports (AF_XDP multi-buffer): sent as a chain of
//! frames, received as one, byte for byte, on a veth pair with a 9000-byte MTU. Needs root.

mod common;

use std::time::{Duration, Instant};

use common::{MAC_A, MAC_B, Netns};
use wirespeed_port::{Batch, Port, PortOptions, PortSpec};

/// The test bytes of packet `n`, `len` long: our MACs, a local EtherType, then a pattern
/// that differs by position and packet.
fn test_packet(n: u8, len: usize) -> Vec<u8> {
    let mut p: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ n).collect();
    p[..6].copy_from_slice(&MAC_B);
    p[6..12].copy_from_slice(&MAC_A);
    p[12..14].copy_from_slice(&[0x88, 0xb5]);
    p
}

fn open(spec: &str, opts: PortOptions) -> Box<dyn Port> {
    let spec: PortSpec = spec.parse().unwrap();
    wirespeed_port::open(&spec, &opts).unwrap_or_else(|e| panic!("open {spec}: {e}"))
}

/// Copies `bytes` into the segments of slot `i`.
fn scatter(port: &mut dyn Port, batch: &Batch, i: usize, bytes: &[u8]) {
    let mut at = 0;
    let segments: Vec<(u64, u32)> = batch.segments(i).collect();
    for (addr, len) in segments {
        let len = len as usize;
        port.packet_mut(addr, len as u32)
            .copy_from_slice(&bytes[at..at + len]);
        at += len;
    }
    assert_eq!(at, bytes.len());
}

/// Receives until `want` packets came or two seconds pass.
fn receive(rx: &mut dyn Port, want: usize) -> Batch {
    let mut got = Batch::with_capacity(64);
    let until = Instant::now() + Duration::from_secs(2);
    while got.len() < want && Instant::now() < until {
        rx.rx_burst(&mut got).unwrap();
        if got.len() < want {
            rx.wait_rx(Duration::from_millis(10)).unwrap();
        }
    }
    got
}

#[test]
fn packets_larger_than_a_frame_cross_as_chains_byte_for_byte() {
    let ns = Netns::enter("packets_larger_than_a_frame_cross_as_chains");
    ns.set_mtu(9000);
    let mut rx = open(
        &format!("xdp:{}", ns.b),
        PortOptions {
            tx: false,
            multi_buffer: true,
            ..PortOptions::default()
        },
    );
    let mut tx = open(
        &format!("xdp:{}", ns.a),
        PortOptions {
            rx: false,
            multi_buffer: true,
            ..PortOptions::default()
        },
    );
    assert_eq!(rx.info().multi_buffer, Some(18), "{:?}", rx.info());
    assert_eq!(tx.info().multi_buffer, Some(18), "{:?}", tx.info());
    assert_eq!(rx.info().mode, "copy");

    // Sent in 4096-byte frames; received after the kernel's 256 bytes of headroom, so in
    // 3840-byte segments.
    let sizes = [64usize, 3000, 3840, 3841, 5000, 9014];
    let sent_segments = [1usize, 1, 1, 1, 2, 3];
    let received_segments = [1usize, 1, 1, 2, 2, 3];
    let packets: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(n, &len)| test_packet(n as u8, len))
        .collect();
    let mut out = Batch::with_capacity(8);
    for p in &packets {
        assert_eq!(tx.alloc_tx(&mut out, 1, p.len() as u32), 1);
    }
    for (i, p) in packets.iter().enumerate() {
        assert_eq!(out.more(i) + 1, sent_segments[i], "packet {i}");
        assert_eq!(out.packet_len(i) as usize, p.len());
        scatter(tx.as_mut(), &out, i, p);
    }
    assert_eq!(tx.tx_burst(&mut out).unwrap(), sizes.len());
    tx.flush().unwrap();

    let mut got = receive(rx.as_mut(), sizes.len());
    assert_eq!(got.len(), sizes.len(), "{:?}", rx.stats());
    for (i, p) in packets.iter().enumerate() {
        assert_eq!(got.more(i) + 1, received_segments[i], "packet {i}");
        assert_eq!(got.packet_len(i) as usize, p.len(), "packet {i}");
        let mut bytes = Vec::new();
        for (addr, len) in got.segments(i) {
            bytes.extend_from_slice(rx.packet(addr, len));
        }
        assert!(bytes == *p, "packet {i} ({} bytes) differs", p.len());
    }
    let s = rx.stats();
    assert_eq!(s.rx_packets, sizes.len() as u64);
    assert_eq!(s.rx_bytes, sizes.iter().sum::<usize>() as u64);
    assert_eq!(s.drops.total(), 0, "{s:?}");
    assert_eq!(
        rx.audit().unwrap().application,
        10,
        "every segment's frame is held"
    );
    rx.release(&mut got);
    assert!(rx.audit().unwrap().balanced(), "{:?}", rx.audit());
    assert_eq!(rx.audit().unwrap().application, 0);

    // Every frame sent comes back through the completion ring.
    let until = Instant::now() + Duration::from_secs(2);
    while tx.tx_pending() && Instant::now() < until {
        tx.flush().unwrap();
        std::thread::sleep(Duration::from_millis(5));
    }
    let a = tx.audit().unwrap();
    assert!(a.balanced() && a.pool == a.total, "{a:?}");
    let s = tx.stats();
    assert_eq!(
        (s.tx_packets, s.drops.total()),
        (sizes.len() as u64, 0),
        "{s:?}"
    );
}

#[test]
fn chains_a_port_cannot_send_are_counted_and_their_frames_kept() {
    let ns = Netns::enter("chains_a_port_cannot_send_are_counted");
    ns.set_mtu(9000);
    for multi_buffer in [true, false] {
        let mut tx = open(
            &format!("xdp:{}", ns.a),
            PortOptions {
                rx: false,
                multi_buffer,
                ..PortOptions::default()
            },
        );
        // A packet the port cannot send whole is never cut to fit: no frames for it.
        let mut none = Batch::with_capacity(4);
        let too_long = if multi_buffer { 18 * 4096 + 1 } else { 4097 };
        assert_eq!(tx.alloc_tx(&mut none, 1, too_long), 0);
        let mut frames = Batch::with_capacity(32);
        assert_eq!(tx.alloc_tx(&mut frames, 24, 64), 24);
        let mut segments: Vec<(u64, u32)> = frames.iter().collect();
        frames.clear();
        // 19 segments, one more than the kernel sends in copy mode; then a chain with an
        // empty segment; then one that is fine (on a port with multi-buffer).
        let (long, rest) = segments.split_at_mut(19);
        rest[1].1 = 0;
        let mut out = Batch::with_capacity(4);
        assert!(out.push_chain(long));
        assert!(out.push_chain(&rest[..3]));
        assert!(out.push_chain(&rest[3..]));
        let sent = tx.tx_burst(&mut out).unwrap();
        let s = tx.stats();
        match multi_buffer {
            true => assert_eq!((sent, s.drops.tx_bad_chain), (1, 2), "{s:?}"),
            false => assert_eq!((sent, s.drops.tx_bad_chain), (0, 3), "{s:?}"),
        }
        let until = Instant::now() + Duration::from_secs(2);
        while tx.tx_pending() && Instant::now() < until {
            tx.flush().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        let a = tx.audit().unwrap();
        assert!(a.balanced() && a.pool == a.total, "frames all home: {a:?}");
    }
}
