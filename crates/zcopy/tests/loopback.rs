//! Zero-copy send and receive over loopback: every byte arrives in order, the receiver maps
//! pages, and the sender's completions account for every send, by system calls and through
//! io_uring.

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use wirespeed_zcopy::{Chunk, PAGE_MSS, Receiver, SendApi, Sender};

const TOTAL: usize = 16 << 20;
const SIZE: usize = 64 << 10;

fn pattern(offset: usize) -> u8 {
    (offset.wrapping_mul(2654435761) >> 13) as u8
}

fn transfer(
    send_zc: bool,
    api: SendApi,
    recv_zc: bool,
) -> (wirespeed_zcopy::SendStats, wirespeed_zcopy::RecvStats) {
    let stop = Arc::new(AtomicBool::new(false));
    let socket = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    wirespeed_zcopy::set_mss(&socket, PAGE_MSS).unwrap();
    let listener: TcpListener = socket;
    let addr = listener.local_addr().unwrap();
    let stop2 = stop.clone();
    let sender = std::thread::spawn(move || {
        let stream = TcpStream::connect(addr).unwrap();
        let mut tx = Sender::new(stream, send_zc, api, 16, SIZE, stop2).unwrap();
        let mut at = 0;
        while at < TOTAL {
            let buf = tx.buffer().unwrap();
            for (i, b) in buf.iter_mut().enumerate() {
                *b = pattern(at + i);
            }
            tx.send(SIZE).unwrap();
            at += SIZE;
        }
        tx.finish().unwrap();
        tx.stats()
    });
    let (stream, _) = listener.accept().unwrap();
    let mut rx = Receiver::new(stream, recv_zc.then_some(2 << 20), 256 << 10, stop).unwrap();
    let mut at = 0usize;
    while let Some(chunk) = rx.next_chunk().unwrap() {
        let bytes = match chunk {
            Chunk::Mapped(b) | Chunk::Copied(b) => b,
            Chunk::Idle => continue,
        };
        for (i, &b) in bytes.iter().enumerate() {
            assert_eq!(b, pattern(at + i), "byte {}", at + i);
        }
        at += bytes.len();
    }
    assert_eq!(at, TOTAL);
    (sender.join().unwrap(), rx.stats())
}

#[test]
fn zerocopy_both_ways_moves_every_byte() {
    for api in [SendApi::Syscalls, SendApi::IoUring] {
        zerocopy_both_ways(api);
    }
}

fn zerocopy_both_ways(api: SendApi) {
    let (tx, rx) = transfer(true, api, true);
    eprintln!("{api:?}\n{tx:?}\n{rx:?}");
    assert_eq!(tx.bytes, TOTAL as u64);
    assert_eq!(
        tx.zerocopied + tx.copied,
        tx.calls,
        "a completion for every send"
    );
    assert_eq!(rx.bytes, TOTAL as u64);
    assert_eq!(rx.mapped + rx.copied, TOTAL as u64);
    assert!(rx.mapped > 0, "pages mapped");
}

#[test]
fn copy_both_ways_moves_every_byte() {
    for api in [SendApi::Syscalls, SendApi::IoUring] {
        copy_both_ways(api);
    }
}

fn copy_both_ways(api: SendApi) {
    let (tx, rx) = transfer(false, api, false);
    assert_eq!(
        (tx.bytes, tx.notices, tx.zerocopied + tx.copied),
        (TOTAL as u64, 0, 0)
    );
    assert_eq!(
        (rx.bytes, rx.mapped, rx.copied, rx.zc_calls),
        (TOTAL as u64, 0, TOTAL as u64, 0)
    );
}
