//! Reading packets: pcap_dispatch's one burst, pcap_loop's many, pcap_next's one packet.
//! A packet is handed to the program in its frame (no copy; pcap_next copies, since its
//! pointer must outlive the call) and the frames go back to the port at the next burst.

use std::time::{Duration, Instant};

use wirespeed_capture::filter::Metadata;

use crate::ffi::{PCAP_ERROR, PCAP_ERROR_BREAK, PCAP_TSTAMP_PRECISION_NANO, PcapPkthdr};
use crate::handle::Handle;
use crate::live::Live;

/// The longest a blocked read sleeps between looks at the kernel's drop counts.
const WAIT_SLICE: Duration = Duration::from_millis(250);

/// The drop counts are a system call: read at most this often while the reads wait (a
/// trickle of packets wakes them often), and whenever pcap_stats asks.
const DROPS_EVERY: Duration = Duration::from_millis(100);

/// Hands up to `cnt` packets that pass the filter (every waiting one when `cnt` <= 0) to
/// `deliver`. With none waiting: 0 at once when non-blocking, else waits for some, at most
/// the handle's timeout when it has one. Returns how many were delivered, or
/// PCAP_ERROR_BREAK after pcap_breakloop, or PCAP_ERROR with the reason in pcap_geterr.
pub fn dispatch(
    h: &Handle,
    live: &mut Live,
    cnt: i32,
    deliver: &mut dyn FnMut(&PcapPkthdr, &[u8]),
) -> i32 {
    let settings = h.settings.get();
    let limit = if cnt <= 0 { usize::MAX } else { cnt as usize };
    let deadline = (settings.timeout_ms > 0)
        .then(|| Instant::now() + Duration::from_millis(settings.timeout_ms as u64));
    loop {
        if h.slot.take_break() {
            return PCAP_ERROR_BREAK;
        }
        if live.next == live.batch.len() {
            live.port.release(&mut live.batch);
            live.next = 0;
            match live.port.rx_burst(&mut live.batch) {
                Ok(0) => {}
                Ok(_) => {
                    live.stamp_ns = now_ns();
                    live.idle.busy();
                }
                Err(e) => {
                    h.set_error(&format!("{}: {e}", h.device));
                    return PCAP_ERROR;
                }
            }
        }
        if live.next < live.batch.len() {
            let n = deliver_burst(h, live, limit, deliver);
            live.signal_pending();
            return n;
        }
        live.signal_pending();
        if settings.nonblock {
            return 0;
        }
        // Under load the ring is empty only for moments: look again before sleeping (rule
        // 8), or each packet after a sleep costs the sending CPU a wake-up.
        if !live.idle.should_sleep() {
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return 0;
            }
            std::hint::spin_loop();
            continue;
        }
        let slice = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(WAIT_SLICE),
                _ => return 0,
            },
            None => WAIT_SLICE,
        };
        if let Err(e) = wirespeed_port::poll_any(&live.wait_fds, slice) {
            h.set_error(&format!("{}: poll: {e}", h.device));
            return PCAP_ERROR;
        }
        live.drain_wake();
        if live.drops_read.elapsed() >= DROPS_EVERY {
            refresh_drops(h, live);
        }
    }
}

/// Hands the waiting packets of the burst to `deliver`, up to `limit` that pass the filter.
/// A breakloop asked for from a callback ends it at once (libpcap's Linux reader does the
/// same); the packets left stay for the next read.
fn deliver_burst(
    h: &Handle,
    live: &mut Live,
    limit: usize,
    deliver: &mut dyn FnMut(&PcapPkthdr, &[u8]),
) -> i32 {
    let settings = h.settings.get();
    let snapshot = settings.snapshot();
    let nano = settings.precision == PCAP_TSTAMP_PRECISION_NANO;
    let meta = Metadata {
        pkttype: 0,
        ifindex: live.ifindex,
    };
    let mut delivered = 0usize;
    while live.next < live.batch.len() && delivered < limit {
        if delivered > 0 && h.slot.take_break() {
            return PCAP_ERROR_BREAK;
        }
        let i = live.next;
        live.next += 1;
        let (addr, len) = (live.batch.addr(i), live.batch.frame_len(i));
        let bytes = live.port.packet(addr, len);
        let keep = match &live.filter {
            Some(f) => f.run_with(bytes, len, Some(meta)),
            None => u32::MAX,
        };
        if keep == 0 {
            continue;
        }
        let caplen = len.min(snapshot).min(keep);
        let header = header(live.stamp_ns, nano, caplen, len);
        h.counts.matched.set(h.counts.matched.get() + 1);
        delivered += 1;
        deliver(&header, &bytes[..caplen as usize]);
    }
    delivered as i32
}

/// pcap_loop: bursts until `cnt` packets (forever when `cnt` <= 0), a break or an error.
/// Returns 0 when the count is reached, else what `dispatch` ended with.
pub fn run_loop(
    h: &Handle,
    live: &mut Live,
    cnt: i32,
    deliver: &mut dyn FnMut(&PcapPkthdr, &[u8]),
) -> i32 {
    let mut left = cnt;
    loop {
        let n = dispatch(h, live, if cnt > 0 { left } else { -1 }, deliver);
        if n < 0 {
            return n;
        }
        if cnt > 0 {
            left -= n;
            if left <= 0 {
                return 0;
            }
        }
    }
}

/// pcap_next_ex: one packet, copied into the handle (valid until the next read). 1 with a
/// packet, 0 when the timeout passed or nothing waits in non-blocking mode, else an error.
pub fn next_one(h: &Handle, live: &mut Live) -> i32 {
    let mut got: Option<PcapPkthdr> = None;
    let mut one = std::mem::take(&mut live.one);
    let n = dispatch(h, live, 1, &mut |hdr, bytes| {
        one.clear();
        one.extend_from_slice(bytes);
        got = Some(*hdr);
    });
    live.one = one;
    if let Some(hdr) = got {
        live.one_hdr = hdr;
    }
    n
}

/// The kernel's drop counts into the handle's counts (a system call: when idle or asked).
pub fn refresh_drops(h: &Handle, live: &mut Live) {
    live.drops_read = Instant::now();
    let stats = live.port.stats();
    let d = stats.drops;
    h.counts
        .kernel_drops
        .set(d.fill_ring_empty + d.rx_ring_full + d.kernel_dropped);
    h.counts.invalid.set(d.rx_invalid_desc);
}

fn header(stamp_ns: u64, nano: bool, caplen: u32, len: u32) -> PcapPkthdr {
    let sec = stamp_ns / 1_000_000_000;
    let ns = stamp_ns % 1_000_000_000;
    PcapPkthdr {
        tv_sec: sec as libc::c_long,
        tv_frac: if nano { ns } else { ns / 1000 } as libc::c_long,
        caplen,
        len,
    }
}

/// Nanoseconds since the epoch (CLOCK_REALTIME through the vDSO: no system call).
fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_carry_micro_or_nanoseconds() {
        let h = header(1_700_000_000_123_456_789, false, 60, 64);
        assert_eq!(
            (h.tv_sec, h.tv_frac, h.caplen, h.len),
            (1_700_000_000, 123_456, 60, 64)
        );
        let h = header(1_700_000_000_123_456_789, true, 64, 64);
        assert_eq!(h.tv_frac, 123_456_789);
    }
}
