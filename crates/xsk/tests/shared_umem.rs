//! Two AF_XDP sockets on two interfaces share one UMEM (XDP_SHARED_UMEM, each with its own
//! fill and completion rings): frames sent by one arrive at the other in the same buffer
//! area, are forwarded by moving their descriptor, and every frame is accounted for.

use std::process::Command;
use std::time::{Duration, Instant};

use wirespeed_packet::{MacAddr, UdpTemplate, read_test_payload};
use wirespeed_umem::{FramePool, Umem, UmemConfig};
use wirespeed_xdp::{AttachMode, XskProgram};
use wirespeed_xsk::{BindMode, Socket, SocketConfig};

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn template() -> UdpTemplate {
    UdpTemplate {
        src_mac: "02:00:00:00:00:01".parse::<MacAddr>().unwrap(),
        dst_mac: "02:00:00:00:00:02".parse::<MacAddr>().unwrap(),
        src_ip: "10.0.0.1".parse().unwrap(),
        dst_ip: "10.0.0.2".parse().unwrap(),
        src_port: 9,
        dst_port: 9,
        frame_len: 60,
        generator: 7,
    }
}

#[test]
fn two_sockets_share_one_umem_and_forward_by_descriptor() {
    assert!(
        std::fs::read_to_string("/proc/self/status")
            .unwrap()
            .contains("\nUid:\t0"),
        "this test needs root"
    );
    // A thread of its own in a network namespace of its own: the namespace, and the veths
    // in it, go away when the thread ends, whatever happens.
    std::thread::spawn(|| {
        // SAFETY: unshare affects only this thread's namespaces; no memory is involved.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(
            r,
            0,
            "unshare(CLONE_NEWNET): {}",
            std::io::Error::last_os_error()
        );
        run_shared_umem();
    })
    .join()
    .expect("shared UMEM test failed");
}

const COUNT: u64 = 1000;

fn run_shared_umem() {
    make_veth_pair();
    let mut umem = Umem::new(UmemConfig {
        frame_count: 2048,
        frame_size: 2048,
        headroom: 0,
        hugepages: false,
    })
    .unwrap();
    let mut pool = umem.frame_pool();
    let mut program = XskProgram::attach("wsua", AttachMode::Native, false).unwrap();
    let cfg = SocketConfig {
        mode: BindMode::Copy,
        ..SocketConfig::default()
    };
    let mut rx_sock = Socket::new(&umem, "wsua", 0, &cfg).unwrap();
    let mut tx_sock = Socket::new_shared(&umem, &rx_sock, "wsub", 0, &cfg).unwrap();
    assert!(
        tx_sock.owns_fill_ring(),
        "another interface needs its own fill/completion rings"
    );
    program.register(0, rx_sock.raw_fd()).unwrap();
    assert_eq!(rx_sock.refill(&mut pool, 512), 512);

    // Send COUNT numbered frames out of wsub, built in the shared UMEM.
    let mut sent = 0u64;
    let mut received = vec![false; COUNT as usize];
    let mut forwarded = 0u64;
    let deadline = Instant::now() + Duration::from_secs(10);
    while (received.iter().any(|&r| !r) || rx_sock.ring_counts().tx + tx_sock.ring_counts().tx > 0)
        && Instant::now() < deadline
    {
        if sent < COUNT {
            sent += send_numbered(&mut umem, &mut pool, &mut tx_sock, sent);
        }
        forwarded += receive_and_forward(&umem, &mut pool, &mut rx_sock, &mut received);
        tx_sock.complete(&umem, &mut pool, 64);
        rx_sock.complete(&umem, &mut pool, 64);
        rx_sock.refill(&mut pool, 64);
    }
    let got = received.iter().filter(|&&r| r).count() as u64;
    assert_eq!(got, COUNT, "received {got} of {COUNT}");
    assert_eq!(forwarded, COUNT);
    wait_until_at_rest(&umem, &mut pool, &mut rx_sock, &mut tx_sock);
}

/// The veth pair wsua / wsub, up, in this thread's namespace with IPv6 off.
fn make_veth_pair() {
    // No IPv6 in this namespace: a veth coming up would send router solicitations and MLD
    // reports, which the XDP program hands to the socket among the test frames. (This
    // thread's namespace is the one /proc/sys/net shows it.)
    for conf in ["all", "default"] {
        let path = format!("/proc/sys/net/ipv6/conf/{conf}/disable_ipv6");
        std::fs::write(&path, "1").unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    ip(&[
        "link", "add", "wsua", "type", "veth", "peer", "name", "wsub",
    ]);
    ip(&["link", "set", "wsua", "up"]);
    ip(&["link", "set", "wsub", "up"]);
}

/// Sends up to 32 frames numbered from `next` out of `tx_sock`; returns how many.
fn send_numbered(umem: &mut Umem, pool: &mut FramePool, tx_sock: &mut Socket, next: u64) -> u64 {
    let t = template();
    let n = (COUNT - next).min(32) as usize;
    let addrs: Vec<u64> = (0..n).map_while(|_| pool.alloc()).collect();
    for (i, &a) in addrs.iter().enumerate() {
        t.write(umem.packet_mut(a, 60).unwrap(), next + i as u64, 0)
            .unwrap();
    }
    let queued = tx_sock.send(addrs.len() as u32, |i| (addrs[i as usize], 60));
    assert_eq!(
        queued as usize,
        addrs.len(),
        "TX ring has room for a small burst"
    );
    tx_sock.kick_tx().unwrap();
    queued as u64
}

/// Receives on `rx_sock`, checks each frame's bytes and that it came once, and forwards it by
/// descriptor out of the same socket (no copy); returns how many were forwarded.
fn receive_and_forward(
    umem: &Umem,
    pool: &mut FramePool,
    rx_sock: &mut Socket,
    received: &mut [bool],
) -> u64 {
    let t = template();
    let mut descs = Vec::new();
    rx_sock.recv(umem, pool, 64, |addr, len| descs.push((addr, len)));
    for &(addr, len) in &descs {
        assert!(umem.is_valid(addr, len));
        let frame = umem.packet(addr, len).unwrap();
        let p = read_test_payload(frame).expect("a test frame");
        let mut expected = vec![0u8; 60];
        t.write(&mut expected, p.seq, 0).unwrap();
        assert_eq!(frame, &expected[..], "frame {} changed", p.seq);
        assert!(!received[p.seq as usize], "frame {} twice", p.seq);
        received[p.seq as usize] = true;
    }
    let fwd = rx_sock.send(descs.len() as u32, |i| descs[i as usize]);
    assert_eq!(fwd as usize, descs.len());
    rx_sock.kick_tx().unwrap();
    fwd as u64
}

/// Lets the last completions come back, then accounts for every frame of the one UMEM.
fn wait_until_at_rest(
    umem: &Umem,
    pool: &mut FramePool,
    rx_sock: &mut Socket,
    tx_sock: &mut Socket,
) {
    let total = umem.frame_count() as u64;
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        tx_sock.complete(umem, pool, 256);
        rx_sock.complete(umem, pool, 256);
        let (a, b) = (rx_sock.ring_counts(), tx_sock.ring_counts());
        let in_kernel = a.fill
            + a.kernel
            + a.rx
            + a.tx
            + a.completion
            + b.fill
            + b.kernel
            + b.rx
            + b.tx
            + b.completion;
        if pool.len() as u64 + in_kernel == total && a.tx + b.tx + a.completion + b.completion == 0
        {
            // At rest every frame is either free or waiting in wsua's fill ring.
            assert_eq!(pool.len() as u64 + a.fill, total, "a {a:?} b {b:?}");
            break;
        }
        assert!(
            Instant::now() < until,
            "frames unaccounted: pool {} a {a:?} b {b:?}",
            pool.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
