//! The ring never loses, duplicates or reorders an entry, whatever the interleaving of
//! producer and consumer bursts; and it holds under two real threads.

use proptest::prelude::*;
use wirespeed_ring::heap_ring;

#[derive(Debug, Clone)]
enum Step {
    Produce(u32),
    Consume(u32),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (0u32..80).prop_map(Step::Produce),
        (0u32..80).prop_map(Step::Consume)
    ]
}

proptest! {
    #[test]
    fn interleaved_bursts_keep_fifo_order(size_log in 1u32..8, steps in prop::collection::vec(step(), 1..300)) {
        let size = 1u32 << size_log;
        let (mut tx, mut rx) = heap_ring::<u64>(size);
        let mut next_sent = 0u64;
        let mut next_expected = 0u64;
        for s in steps {
            match s {
                Step::Produce(n) => {
                    let got = tx.reserve(n);
                    prop_assert!(got <= n);
                    prop_assert_eq!(got, n.min(size - (next_sent - next_expected) as u32));
                    for i in 0..got {
                        tx.write(i, next_sent + i as u64);
                    }
                    tx.submit(got);
                    next_sent += got as u64;
                }
                Step::Consume(n) => {
                    let got = rx.peek(n);
                    prop_assert_eq!(got as u64, (n as u64).min(next_sent - next_expected));
                    for i in 0..got {
                        prop_assert_eq!(rx.read(i), next_expected + i as u64);
                    }
                    rx.release(got);
                    next_expected += got as u64;
                }
            }
        }
        // Everything left is still there, in order.
        let left = rx.peek(u32::MAX);
        prop_assert_eq!(left as u64, next_sent - next_expected);
    }
}

#[test]
fn indices_wrap_around_u32() {
    // Start near the wrap point by running many bursts through a tiny ring.
    let (mut tx, mut rx) = heap_ring::<u32>(4);
    let mut v = 0u32;
    for _ in 0..(1u64 << 20) {
        let n = tx.reserve(3);
        for i in 0..n {
            tx.write(i, v.wrapping_add(i));
        }
        tx.submit(n);
        let m = rx.peek(3);
        assert_eq!(m, n);
        for i in 0..m {
            assert_eq!(rx.read(i), v.wrapping_add(i));
        }
        rx.release(m);
        v = v.wrapping_add(n);
    }
    assert_eq!(tx.producer_index(), rx.consumer_index());
}

#[test]
fn two_threads_move_ten_million_entries_in_order() {
    const TOTAL: u64 = 10_000_000;
    let (mut tx, mut rx) = heap_ring::<u64>(1024);
    let producer = std::thread::spawn(move || {
        let mut sent = 0u64;
        while sent < TOTAL {
            let n = tx.reserve(64.min((TOTAL - sent) as u32));
            for i in 0..n {
                tx.write(i, sent + i as u64);
            }
            tx.submit(n);
            sent += n as u64;
            if n == 0 {
                std::hint::spin_loop();
            }
        }
    });
    let mut expected = 0u64;
    let mut sum = 0u64;
    while expected < TOTAL {
        let n = rx.peek(64);
        for i in 0..n {
            let v = rx.read(i);
            assert_eq!(v, expected, "entry out of order");
            sum = sum.wrapping_add(v);
            expected += 1;
        }
        rx.release(n);
        if n == 0 {
            std::thread::yield_now();
        }
    }
    producer.join().unwrap();
    assert_eq!(sum, TOTAL * (TOTAL - 1) / 2);
    assert_eq!(rx.peek(1), 0);
}

#[test]
fn a_consumer_that_asks_for_a_wakeup_is_seen_by_the_producer() {
    let (mut tx, rx) = heap_ring::<u64>(8);
    assert!(!tx.needs_wakeup_after_submit());
    rx.set_needs_wakeup(true);
    assert!(tx.needs_wakeup_after_submit());
    assert_eq!(tx.reserve(1), 1);
    tx.write(0, 7);
    tx.submit(1);
    assert!(
        tx.needs_wakeup_after_submit(),
        "the flag stays until the consumer clears it"
    );
    rx.set_needs_wakeup(false);
    assert!(!tx.needs_wakeup_after_submit());
}

#[test]
fn a_producer_reads_back_exactly_what_was_not_consumed() {
    let (mut tx, mut rx) = heap_ring::<u32>(8);
    let mut next = 0u32;
    // Around the ring a few times, so the unconsumed entries straddle its end.
    for _ in 0..5 {
        let n = tx.reserve(5);
        for i in 0..n {
            tx.write(i, next + i);
        }
        tx.submit(n);
        next += n;
        let m = rx.peek(3);
        rx.release(m);
        let left: Vec<u32> = (0..tx.pending()).map(|i| tx.read_pending(i)).collect();
        let first = rx.consumer_index();
        assert_eq!(left, (first..next).collect::<Vec<_>>());
        // The consumer takes the rest, so the next round starts empty.
        let m = rx.peek(8);
        rx.release(m);
        assert_eq!(tx.pending(), 0);
    }
}
