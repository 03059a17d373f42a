//! Reading packets: pcap_dispatch's one burst, pcap_loop's many, pcap_next's one packet.
//! A packet is handed to the program in its frame (no copy; pcap_next copies, since its
//! pointer must outlive the call) and the frames go back to the port at the next burst. A
//! packet of several frames is gathered into one buffer first.
//!
//! The program's callback runs with the port not held, so it may call back in: send with
//! pcap_inject (a responder answering what it reads), ask pcap_stats, break the loop. Only
//! another read from inside a callback is refused: it would take the next burst and give
//! back the frame the outer callback is reading. Nor is the port held while a read waits
//! for packets, so another thread's pcap_inject goes out meanwhile, as with libpcap.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use wirespeed_capture::filter::Metadata;

use crate::exports::live_of;
use crate::ffi::{PCAP_ERROR, PCAP_ERROR_BREAK, PCAP_TSTAMP_PRECISION_NANO, PcapPkthdr};
use crate::handle::{Handle, Settings};
use crate::live::Live;
use wirespeed_port::{LinkState, Step};

/// The longest a blocked read sleeps before it looks again (a stop from another thread
/// also wakes it at once, through the wake eventfd).
const WAIT_SLICE: Duration = Duration::from_millis(250);

/// How often a quiet port's interface is looked up: an AF_XDP socket whose interface is
/// deleted just receives nothing more, where libpcap's read fails.
const LINK_CHECK: Duration = Duration::from_secs(1);

/// How often an empty burst reads the word of link changes (a system call): not every
/// empty burst of a spinning read, and soon enough for a program woken by that word.
const LINK_EVENTS_CHECK: Duration = Duration::from_millis(10);

/// A packet handed to the program: its header, and its bytes (`caplen` of them) in their
/// frame, where they stay until the next burst.
pub type Deliver<'a> = dyn FnMut(&PcapPkthdr, *const u8) + 'a;

/// Hands up to `cnt` packets that pass the filter (every waiting one when `cnt` <= 0) to
/// `deliver`. With none waiting: 0 at once when non-blocking, else waits for some, at most
/// the handle's timeout when it has one. Returns how many were delivered, or
/// PCAP_ERROR_BREAK after pcap_breakloop, or PCAP_ERROR with the reason in pcap_geterr.
pub fn dispatch(h: &Handle, cnt: i32, deliver: &mut Deliver<'_>) -> i32 {
    reading(h, || dispatch_once(h, cnt, deliver)).unwrap_or_else(|code| code)
}

/// Runs the read `read` marked as one ([`Handle::reading`]) from its start to its end, so
/// that a close meanwhile never frees the handle under it; PCAP_ERROR for a read from
/// inside a read's callback.
fn reading<R>(h: &Handle, read: impl FnOnce() -> R) -> Result<R, i32> {
    if h.reading.swap(true, Ordering::SeqCst) {
        h.set_error(&format!(
            "{}: a read from inside a pcap_loop or pcap_dispatch callback is not supported",
            h.device
        ));
        return Err(PCAP_ERROR);
    }
    let r = read();
    h.reading.store(false, Ordering::SeqCst);
    Ok(r)
}

fn dispatch_once(h: &Handle, cnt: i32, deliver: &mut Deliver<'_>) -> i32 {
    let settings = h.settings();
    let limit = if cnt <= 0 { usize::MAX } else { cnt as usize };
    let deadline = (settings.timeout_ms > 0)
        .then(|| Instant::now() + Duration::from_millis(settings.timeout_ms as u64));
    let expired = || deadline.is_some_and(|d| Instant::now() >= d);
    loop {
        if h.slot.take_break() {
            return PCAP_ERROR_BREAK;
        }
        let waiting = match live_of(h).map(|mut live| refill(h, &mut live)) {
            Ok(Ok(waiting)) => waiting,
            Ok(Err(code)) | Err(code) => return code,
        };
        if waiting {
            match deliver_burst(h, limit, deliver) {
                // Every packet of the burst filtered out: libpcap goes back for more.
                0 if !settings.nonblock && !expired() => continue,
                n => return n,
            }
        }
        if settings.nonblock {
            return 0;
        }
        let live = match live_of(h) {
            Ok(live) => live,
            Err(code) => return code,
        };
        // Under load the ring is empty only for moments: look again, or nap, before sleeping
        // in poll() (rule 8), or each packet after a sleep costs the sending CPU a wake-up.
        match live.step {
            Step::Spin | Step::Nap(_) if expired() => return 0,
            Step::Spin => {
                std::hint::spin_loop();
                continue;
            }
            Step::Nap(d) => {
                drop(live);
                let left = deadline.map_or(d, |at| at.saturating_duration_since(Instant::now()));
                std::thread::sleep(d.min(left));
                continue;
            }
            Step::Sleep(_) => {}
        }
        // Let go while asleep: another thread may send meanwhile.
        let wait_fds = live.wait_fds.clone();
        drop(live);
        let slice = match deadline {
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => left.min(WAIT_SLICE),
                _ => return 0,
            },
            None => WAIT_SLICE,
        };
        if let Err(e) = wirespeed_port::poll_any(&wait_fds, slice) {
            h.set_error(&format!("{}: poll: {e}", h.device));
            return PCAP_ERROR;
        }
        match live_of(h) {
            Ok(live) => live.drain_wake(),
            Err(code) => return code,
        }
    }
}

/// Takes the next burst when the last one is all handed out (its frames go back to the
/// port first). True when packets wait; PCAP_ERROR when the port failed.
fn refill(h: &Handle, live: &mut Live) -> Result<bool, i32> {
    if live.next == live.batch.len() {
        live.port.release(&mut live.batch);
        live.next = 0;
        let room = live.batch.room();
        match live.port.rx_burst(&mut live.batch) {
            Ok(got) => {
                if got > 0 {
                    live.stamp_ns = now_ns();
                } else if live.link_changed(LINK_EVENTS_CHECK)
                    || live.link_checked.elapsed() >= LINK_CHECK
                {
                    live.link_checked = Instant::now();
                    if live.port.link() == LinkState::Gone {
                        // libpcap's words (tcpdump: "pcap_loop: The interface disappeared").
                        h.set_error("The interface disappeared");
                        return Err(PCAP_ERROR);
                    }
                }
                live.step = live.idle.after_burst(got, room);
            }
            Err(e) => {
                h.set_error(&format!("{}: {e}", h.device));
                return Err(PCAP_ERROR);
            }
        }
    }
    let waiting = live.next < live.batch.len();
    if !waiting {
        live.signal_pending();
    }
    Ok(waiting)
}

/// Hands the waiting packets of the burst to `deliver`, up to `limit` that pass the filter.
/// A breakloop asked for from a callback ends it at once, even after the last packet the
/// count allowed (libpcap's Linux reader does the same: the read says PCAP_ERROR_BREAK,
/// and the next one reads); the packets left stay for the next read.
///
/// The packets are picked out a run at a time under one hold of the port, then handed over
/// with the port let go (each callback may send): a hold for each packet cost a fifth of
/// tcpdump's rate through the shim. A run ends at a packet gathered from several frames
/// (there is one buffer for it). What a break, or a filter set by a callback, leaves
/// undelivered of a run, and what the old filter left out between, is picked again under
/// the filter then in force.
fn deliver_burst(h: &Handle, limit: usize, deliver: &mut Deliver<'_>) -> i32 {
    let settings = h.settings();
    let mut delivered = 0usize;
    let mut broken = false;
    while delivered < limit && !broken {
        let filters = h.filters_set.load(Ordering::SeqCst);
        let (mut run, started_at) = match live_of(h) {
            Ok(mut live) => {
                let mut run = std::mem::take(&mut live.run);
                let started_at = live.next;
                pick_run(&mut live, &settings, limit - delivered, &mut run);
                (run, started_at)
            }
            Err(code) => return code,
        };
        if run.is_empty() {
            break;
        }
        let mut handed = 0;
        for picked in &run {
            if delivered > 0 && h.slot.take_break() {
                broken = true;
                break;
            }
            if h.filters_set.load(Ordering::SeqCst) != filters {
                break;
            }
            delivered += 1;
            handed += 1;
            h.counts.count_match();
            deliver(&picked.header, picked.bytes);
        }
        match live_of(h) {
            Ok(mut live) => {
                if handed < run.len() {
                    live.next = match handed {
                        0 => started_at,
                        n => run[n - 1].slot + 1,
                    };
                }
                run.clear();
                live.run = run;
            }
            Err(code) => return code,
        }
    }
    if let Ok(mut live) = live_of(h) {
        live.signal_pending();
    }
    if broken || (delivered > 0 && h.slot.take_break()) {
        return PCAP_ERROR_BREAK;
    }
    delivered as i32
}

/// A packet picked for the program: its header, where its bytes are, and its slot in the
/// burst.
#[derive(Clone, Copy)]
pub struct Picked {
    header: PcapPkthdr,
    bytes: *const u8,
    slot: usize,
}

// SAFETY: `bytes` points into the port's frames or its gathering buffer, both owned by the
// `Live` that keeps the run, and is read only by the read that picked it, while the burst
// it belongs to is not given back: the pointer goes wherever the port goes.
unsafe impl Send for Picked {}

/// Picks the burst's next packets that pass the filter into `run`, at most `limit`, cut to
/// the snapshot (and to what the filter keeps); up to and with the first one gathered from
/// several frames.
fn pick_run(live: &mut Live, settings: &Settings, limit: usize, run: &mut Vec<Picked>) {
    let meta = Metadata {
        pkttype: 0,
        ifindex: live.ifindex,
        vlan: None,
    };
    let nano = settings.precision == PCAP_TSTAMP_PRECISION_NANO;
    while live.next < live.batch.len() && run.len() < limit {
        let slot = live.next;
        live.next += 1;
        let gathered = live.batch.more(slot) != 0;
        let bytes = live
            .port
            .packet_bytes(&live.batch, slot, &mut live.gathered);
        let len = bytes.len() as u32;
        let keep = match &live.filter {
            Some(f) => f.run_with(bytes, len, Some(meta)),
            None => u32::MAX,
        };
        if keep == 0 {
            continue;
        }
        let caplen = len.min(settings.snapshot()).min(keep);
        run.push(Picked {
            header: header(live.stamp_ns, nano, caplen, len),
            bytes: bytes.as_ptr(),
            slot,
        });
        if gathered {
            break;
        }
    }
}

/// pcap_loop: bursts until `cnt` packets (forever when `cnt` <= 0), a break or an error.
/// Returns 0 when the count is reached, else what `dispatch` ended with.
pub fn run_loop(h: &Handle, cnt: i32, deliver: &mut Deliver<'_>) -> i32 {
    let mut left = cnt;
    let run = || loop {
        let n = dispatch_once(h, if cnt > 0 { left } else { -1 }, deliver);
        if n < 0 {
            return n;
        }
        if cnt > 0 {
            left -= n;
            if left <= 0 {
                return 0;
            }
        }
    };
    reading(h, run).unwrap_or_else(|code| code)
}

/// Where pcap_next_ex's packet is: its header and bytes, in the handle, valid until the
/// next read.
pub type NextPacket = (*mut PcapPkthdr, *const u8);

/// pcap_next_ex: one packet, copied into the handle (valid until the next read). 1 with a
/// packet (and where it is), 0 when the timeout passed or nothing waits in non-blocking
/// mode, else an error.
pub fn next_one(h: &Handle) -> (i32, Option<NextPacket>) {
    reading(h, || next_one_read(h)).unwrap_or_else(|code| (code, None))
}

fn next_one_read(h: &Handle) -> (i32, Option<NextPacket>) {
    let mut one = live_of(h)
        .map(|mut live| std::mem::take(&mut live.one))
        .unwrap_or_default();
    let mut got = None;
    let n = dispatch_once(h, 1, &mut |hdr, bytes| {
        one.clear();
        // SAFETY: `bytes` is the packet's caplen bytes in its frame, which stays the
        // port's until the next burst, after this returns.
        one.extend_from_slice(unsafe { std::slice::from_raw_parts(bytes, hdr.caplen as usize) });
        got = Some(*hdr);
    });
    let Ok(mut live) = live_of(h) else {
        // The read's own error (not activated, a break) if it had one.
        return (n.min(PCAP_ERROR), None);
    };
    live.one = one;
    if let Some(hdr) = got {
        live.one_hdr = hdr;
    }
    // The handle is boxed and `live` lives in it until pcap_close: these stay put.
    let at = (n == 1).then(|| (&raw mut live.one_hdr, live.one.as_ptr()));
    (n, at)
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
