//! The pipe backend: two ends in one process (each end is its own open file, as in two
//! processes), packets both ways with their bytes, frames home again, a third end refused,
//! a new end taking the place of one that left, and a lying other end counted, not trusted.

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use wirespeed_port::pipe::PipePort;
use wirespeed_port::{Batch, Port, PortOptions, PortSpec};

/// A pipe name no other test (or run) uses.
fn name(test: &str) -> String {
    format!("t{}-{test}", std::process::id())
}

fn opts() -> PortOptions {
    PortOptions {
        frame_count: 256,
        frame_size: 2048,
        ring_size: 64,
        ..PortOptions::default()
    }
}

fn open(name: &str) -> PipePort {
    let spec: PortSpec = format!("pipe:{name}").parse().unwrap();
    PipePort::open(&spec, &opts()).unwrap()
}

/// Sends `count` packets from `tx` to `rx`, packet i of length 60 + i % 200 filled with
/// byte i; checks each packet's bytes on arrival and releases it. Returns what `rx` got.
fn send_and_check(tx: &mut PipePort, rx: &mut PipePort, count: usize) -> usize {
    let mut out = Batch::with_capacity(32);
    let mut inb = Batch::with_capacity(32);
    let (mut sent, mut got) = (0usize, 0usize);
    let until = Instant::now() + Duration::from_secs(10);
    while got < count && Instant::now() < until {
        let n = (count - sent).min(32);
        tx.flush().unwrap();
        let len = |i: usize| 60 + (i % 200) as u32;
        let allocated = tx.alloc_tx(&mut out, n, 60);
        for k in 0..allocated {
            let i = sent + k;
            out.set_len(k, len(i));
            tx.packet_mut(out.addr(k), len(i)).fill(i as u8);
        }
        sent += tx.tx_burst(&mut out).unwrap();
        rx.rx_burst(&mut inb).unwrap();
        for (addr, plen) in inb.iter() {
            assert_eq!(plen, len(got), "packet {got}'s length");
            assert!(
                rx.packet(addr, plen).iter().all(|&b| b == got as u8),
                "packet {got}'s bytes"
            );
            got += 1;
        }
        rx.release(&mut inb);
    }
    got
}

#[test]
fn packets_cross_both_ways_with_their_bytes_and_frames_go_home() {
    let n = name("both");
    let mut a = open(&n);
    let mut b = open(&n);
    assert_eq!((a.end(), b.end()), (0, 1));
    assert_eq!(a.info().mode, "shm");
    assert_eq!(send_and_check(&mut a, &mut b, 10_000), 10_000);
    assert_eq!(send_and_check(&mut b, &mut a, 7_000), 7_000);
    for p in [&mut a, &mut b] {
        p.flush().unwrap();
        let audit = p.audit().unwrap();
        assert_eq!((audit.total, audit.pool), (128, 128), "{audit:?}");
    }
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!((sa.tx_packets, sa.rx_packets), (10_000, 7_000));
    assert_eq!((sb.tx_packets, sb.rx_packets), (7_000, 10_000));
    assert_eq!(sa.tx_bytes, sb.rx_bytes);
    assert_eq!((sa.drops.total(), sb.drops.total()), (0, 0));
    assert_eq!(sa.copies + sb.copies, 0);
}

#[test]
fn a_packet_sent_back_across_comes_home_to_its_own_frame() {
    let n = name("bounce");
    let (mut a, mut b) = (open(&n), open(&n));
    let mut batch = Batch::with_capacity(64);
    assert_eq!(a.alloc_tx(&mut batch, 40, 100), 40);
    let sent: Vec<u64> = batch.iter().map(|(addr, _)| addr).collect();
    for (i, addr) in sent.iter().enumerate() {
        a.packet_mut(*addr, 100).fill(i as u8);
    }
    assert_eq!(a.tx_burst(&mut batch).unwrap(), 40);
    assert_eq!(a.audit().unwrap().tx, 40);
    // l2fwd at b: what arrives goes straight back, the same descriptors.
    assert_eq!(b.rx_burst(&mut batch).unwrap(), 40);
    assert_eq!(b.tx_burst(&mut batch).unwrap(), 40);
    assert_eq!(a.rx_burst(&mut batch).unwrap(), 40);
    let back: Vec<u64> = batch.iter().map(|(addr, _)| addr).collect();
    assert_eq!(back, sent, "the same frames, in order");
    for (i, addr) in back.iter().enumerate() {
        assert!(a.packet(*addr, 100).iter().all(|&x| x == i as u8));
    }
    a.release(&mut batch);
    let audit = a.audit().unwrap();
    assert_eq!((audit.pool, audit.tx, audit.application), (128, 0, 0));
    assert_eq!(b.audit().unwrap().pool, 128, "b lent none of its own");
}

#[test]
fn a_full_ring_takes_no_more_and_what_does_not_fit_is_counted() {
    let n = name("full");
    let (mut a, mut b) = (open(&n), open(&n));
    let mut batch = Batch::with_capacity(128);
    assert_eq!(
        a.alloc_tx(&mut batch, 100, 64),
        64,
        "no more than the ring's room"
    );
    assert_eq!(a.tx_burst(&mut batch).unwrap(), 64);
    assert_eq!(a.alloc_tx(&mut batch, 1, 64), 0, "the ring is full");
    // 36 of b's packets, sent back across by a into its full ring: counted, and home to b.
    assert_eq!(b.alloc_tx(&mut batch, 36, 64), 36);
    assert_eq!(b.tx_burst(&mut batch).unwrap(), 36);
    assert_eq!(a.rx_burst(&mut batch).unwrap(), 36);
    assert_eq!(a.tx_burst(&mut batch).unwrap(), 0);
    let s = a.stats();
    assert_eq!((s.tx_packets, s.drops.tx_ring_full), (64, 36));
    let audit = a.audit().unwrap();
    assert_eq!((audit.pool, audit.tx, audit.application), (64, 64, 0));
    assert!(audit.balanced());
    assert!(a.tx_pending());
    b.flush().unwrap();
    assert_eq!(b.audit().unwrap().pool, 128, "b has its 36 frames back");
}

#[test]
fn a_third_end_is_refused() {
    let n = name("third");
    let (_a, _b) = (open(&n), open(&n));
    let spec: PortSpec = format!("pipe:{n}").parse().unwrap();
    let e = PipePort::open(&spec, &opts()).err().unwrap().to_string();
    assert_eq!(
        e,
        format!("pipe:{n}: the pipe already has its two ends (another process at each)")
    );
}

#[test]
fn the_last_end_out_removes_the_pipe() {
    let n = name("gone");
    let path = format!("/dev/shm/wirespeed-pipe-{n}");
    let a = open(&n);
    let b = open(&n);
    drop(a);
    assert!(std::path::Path::new(&path).exists(), "b is still there");
    drop(b);
    for suffix in ["", ".bell0", ".bell1"] {
        assert!(!std::path::Path::new(&format!("{path}{suffix}")).exists());
    }
}

#[test]
fn a_new_end_takes_the_place_of_one_that_left() {
    let n = name("rejoin");
    let mut a = open(&n);
    let mut b = open(&n);
    assert_eq!(send_and_check(&mut a, &mut b, 500), 500);
    // b leaves holding 20 of a's packets, with 30 more in the ring, and 10 of its own
    // frames with a.
    let mut held = Batch::with_capacity(64);
    a.alloc_tx(&mut held, 50, 64);
    a.tx_burst(&mut held).unwrap();
    assert_eq!(b.rx_burst(&mut Batch::with_capacity(20)).unwrap(), 20);
    b.alloc_tx(&mut held, 10, 64);
    b.tx_burst(&mut held).unwrap();
    assert_eq!(a.rx_burst(&mut held).unwrap(), 10);
    drop(b);
    // The newcomer waits for a, which answers the next time it polls.
    let joiner = std::thread::spawn({
        let n = n.clone();
        move || {
            let spec: PortSpec = format!("pipe:{n}").parse().unwrap();
            PipePort::open(&spec, &opts())
        }
    });
    let mut empty = Batch::with_capacity(64);
    while !joiner.is_finished() {
        a.rx_burst(&mut empty).unwrap();
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut c = joiner.join().unwrap().unwrap();
    assert_eq!(c.end(), 1);
    let audit = a.audit().unwrap();
    assert_eq!(
        (audit.pool, audit.tx),
        (128, 0),
        "a took its 50 frames back"
    );
    // The 10 frames of the one that left: released without being handed to the newcomer.
    a.release(&mut held);
    assert_eq!(c.stats().rx_packets, 0);
    assert_eq!(send_and_check(&mut a, &mut c, 3_000), 3_000);
    assert_eq!(send_and_check(&mut c, &mut a, 3_000), 3_000);
    a.flush().unwrap();
    c.flush().unwrap();
    assert_eq!(a.audit().unwrap().pool, 128);
    assert_eq!(c.audit().unwrap().pool, 128);
    assert_eq!(a.stats().drops.total() + c.stats().drops.total(), 0);
}

#[test]
fn a_sleeping_end_is_woken_by_a_send() {
    let n = name("wake");
    let (mut a, mut b) = (open(&n), open(&n));
    let sleeper = std::thread::spawn(move || {
        let started = Instant::now();
        b.wait_rx(Duration::from_secs(20)).unwrap();
        let mut batch = Batch::with_capacity(8);
        (started.elapsed(), b.rx_burst(&mut batch).unwrap())
    });
    std::thread::sleep(Duration::from_millis(200));
    let mut batch = Batch::with_capacity(8);
    a.alloc_tx(&mut batch, 1, 64);
    assert_eq!(a.tx_burst(&mut batch).unwrap(), 1);
    let (slept, got) = sleeper.join().unwrap();
    assert_eq!(got, 1);
    assert!(
        slept < Duration::from_secs(10),
        "woken by the send, not the timeout"
    );
}

/// The other end, played by writing its ring into the file: end 1's ring of packets is
/// the second ring, after the header page and end 0's (64 entries of 16 bytes: one page).
#[test]
fn what_a_lying_other_end_hands_over_is_counted_not_used() {
    let n = name("liar");
    let mut a = open(&n);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/dev/shm/wirespeed-pipe-{n}"))
        .unwrap();
    let ring = 2 * 4096;
    let desc = |addr: u64, len: u32| [addr.to_ne_bytes(), u64::from(len).to_ne_bytes()].concat();
    let own = 2048 * 5; // a frame of a's that it never sent
    let peer = 2048 * 130; // a frame of end 1's
    let lies = [
        desc(2048 * 256, 64),  // past the frames
        desc(own, 64),         // a's own frame, never lent
        desc(peer, 0),         // empty
        desc(peer + 2000, 64), // across the frame's end
        desc(peer, 64),        // the one honest packet
        desc(peer, 64),        // the same frame again while a holds it
    ];
    for (i, d) in lies.iter().enumerate() {
        file.write_all_at(d, ring + 192 + 16 * i as u64).unwrap();
    }
    file.write_all_at(&(lies.len() as u32).to_ne_bytes(), ring)
        .unwrap();
    let mut batch = Batch::with_capacity(16);
    assert_eq!(a.rx_burst(&mut batch).unwrap(), 1);
    assert_eq!(batch.iter().collect::<Vec<_>>(), vec![(peer, 64)]);
    let s = a.stats();
    assert_eq!((s.rx_packets, s.drops.rx_invalid_desc), (1, 5));
    // The honest frame goes home on end 1's ring of frames going home (the fourth ring).
    a.release(&mut batch);
    let home = 2 * 4096 + 4096 + 4096; // header, two rings of packets, a's ring home
    let mut word = [0u8; 8];
    file.read_exact_at(&mut word[..4], home).unwrap();
    assert_eq!(u32::from_ne_bytes(word[..4].try_into().unwrap()), 1);
    file.read_exact_at(&mut word, home + 192).unwrap();
    assert_eq!(u64::from_ne_bytes(word), peer);
}

fn open_chains(name: &str) -> PipePort {
    let spec: PortSpec = format!("pipe:{name}").parse().unwrap();
    let opts = PortOptions {
        multi_buffer: true,
        ..opts()
    };
    PipePort::open(&spec, &opts).unwrap()
}

#[test]
fn packets_larger_than_a_frame_cross_as_chains_and_every_frame_goes_home() {
    let n = name("chains");
    let (mut a, mut b) = (open_chains(&n), open_chains(&n));
    assert_eq!(a.info().multi_buffer, Some(64));
    let sizes = [60usize, 2048, 2049, 9000, 20_000];
    let mut out = Batch::with_capacity(8);
    for &len in &sizes {
        assert_eq!(a.alloc_tx(&mut out, 1, len as u32), 1, "{len}");
    }
    for (i, &len) in sizes.iter().enumerate() {
        assert_eq!(out.packet_len(i) as usize, len);
        assert_eq!(out.more(i), len.div_ceil(2048) - 1);
        let bytes: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
        assert_eq!(a.write_packet(&out, i, &bytes), len);
    }
    assert_eq!(a.tx_burst(&mut out).unwrap(), sizes.len());
    let mut inb = Batch::with_capacity(8);
    assert_eq!(b.rx_burst(&mut inb).unwrap(), sizes.len());
    let mut scratch = Vec::new();
    for (i, &len) in sizes.iter().enumerate() {
        let bytes: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
        assert!(
            b.packet_bytes(&inb, i, &mut scratch) == &bytes[..],
            "packet {i}"
        );
    }
    // Sent back across as they came, then released at a.
    assert_eq!(b.tx_burst(&mut inb).unwrap(), sizes.len());
    assert_eq!(a.rx_burst(&mut inb).unwrap(), sizes.len());
    a.release(&mut inb);
    b.flush().unwrap();
    a.flush().unwrap();
    for port in [&a, &b] {
        let audit = port.audit().unwrap();
        assert_eq!(audit.pool, audit.total, "every frame home: {audit:?}");
    }
    assert_eq!(a.stats().drops.total() + b.stats().drops.total(), 0);
}

#[test]
fn a_chain_to_an_end_that_takes_single_frames_is_counted_and_its_frames_go_home() {
    let n = name("nochains");
    let (mut a, mut b) = (open_chains(&n), open(&n));
    let mut out = Batch::with_capacity(4);
    assert_eq!(a.alloc_tx(&mut out, 1, 5000), 1);
    assert_eq!(a.alloc_tx(&mut out, 1, 100), 1);
    assert_eq!(a.tx_burst(&mut out).unwrap(), 2);
    let mut inb = Batch::with_capacity(4);
    assert_eq!(b.rx_burst(&mut inb).unwrap(), 1, "the one-frame packet");
    assert_eq!(inb.packet_len(0), 100);
    b.release(&mut inb);
    assert_eq!(b.stats().drops.rx_bad_chain, 1);
    a.flush().unwrap();
    let audit = a.audit().unwrap();
    assert_eq!(audit.pool, audit.total, "every frame home: {audit:?}");
    // And b, which sends single frames only, refuses to send a chain.
    let mut chain = Batch::with_capacity(2);
    let mut frames = Batch::with_capacity(2);
    assert_eq!(b.alloc_tx(&mut frames, 2, 64), 2);
    let segs: Vec<(u64, u32)> = frames.iter().collect();
    frames.clear();
    assert!(chain.push_chain(&segs));
    assert_eq!(b.tx_burst(&mut chain).unwrap(), 0);
    assert_eq!(b.stats().drops.tx_bad_chain, 1);
    let audit = b.audit().unwrap();
    assert_eq!(audit.pool, audit.total, "{audit:?}");
}

#[test]
fn bad_chains_from_a_lying_other_end_are_counted_never_followed() {
    let n = name("badchains");
    let mut a = open_chains(&n);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(format!("/dev/shm/wirespeed-pipe-{n}"))
        .unwrap();
    let ring = 2 * 4096;
    let desc = |addr: u64, len: u32, more: bool| {
        let flags = u64::from(more as u32) << 32;
        [addr.to_ne_bytes(), (u64::from(len) | flags).to_ne_bytes()].concat()
    };
    let peer = |k: u64| 2048 * (128 + k); // end 1's frames
    let mut lies = Vec::new();
    // A chain that never ends: 100 continuing descriptors; the one after ends it.
    for k in 0..100 {
        lies.push(desc(peer(k % 50), 64, true));
    }
    lies.push(desc(peer(50), 64, false));
    // A chain with a segment across its frame's end.
    lies.push(desc(peer(51), 64, true));
    lies.push(desc(peer(52) + 2000, 64, true));
    lies.push(desc(peer(53), 64, false));
    // An honest chain of two, then an honest packet.
    lies.push(desc(peer(60), 2048, true));
    lies.push(desc(peer(61), 10, false));
    lies.push(desc(peer(62), 64, false));
    // The ring has 64 entries: they go in as a's receiving frees them, and the frames a
    // sends home are taken from end 1's ring home as end 1 would.
    let home = 2 * 4096 + 4096 + 4096;
    let word = |at: u64| {
        let mut w = [0u8; 4];
        file.read_exact_at(&mut w, at).unwrap();
        u32::from_ne_bytes(w)
    };
    let mut batch = Batch::with_capacity(64);
    let mut got = Vec::new();
    let (mut produced, mut came_home) = (0usize, 0u32);
    while produced < lies.len() {
        let room = 64 - (produced as u32 - word(ring + 64)) as usize;
        for d in lies[produced..].iter().take(room) {
            file.write_all_at(d, ring + 192 + 16 * (produced % 64) as u64)
                .unwrap();
            produced += 1;
        }
        file.write_all_at(&(produced as u32).to_ne_bytes(), ring)
            .unwrap();
        a.rx_burst(&mut batch).unwrap();
        got.extend((0..batch.len()).map(|i| batch.segments(i).collect::<Vec<_>>()));
        a.release(&mut batch);
        let home_produced = word(home);
        came_home += home_produced - word(home + 64);
        file.write_all_at(&home_produced.to_ne_bytes(), home + 64)
            .unwrap();
    }
    assert_eq!(
        got,
        vec![vec![(peer(60), 2048), (peer(61), 10)], vec![(peer(62), 64)]]
    );
    let s = a.stats();
    assert_eq!(
        (s.drops.rx_bad_chain, s.drops.rx_invalid_desc),
        (1, 1),
        "{s:?}"
    );
    assert_eq!(s.rx_packets, 2);
    assert_eq!(
        word(ring + 64) as usize,
        lies.len(),
        "every descriptor taken"
    );
    // Every frame lent came home once each time it was lent, but the one across its
    // frame's end, which was never a's.
    assert_eq!(came_home, 101 + 2 + 3);
}
