//! The pcap backend (`pcap:FILE`, `pcap:rx=IN,tx=OUT`): a port onto capture files, as DPDK's
//! pcap driver gives one. Receiving replays a pcap or pcapng file as fast as the application
//! takes it, each packet with its recorded time (`RxMeta`); sending records each packet in a
//! file, pcap if its name ends in `.pcap`, else pcapng. Any tool then runs offline: `gen` into
//! a file, `bench l2fwd` or the switch from one file to another, `capture` from a file.
//!
//! Packets are copied between the files and frames of a buffer of our own. Replay reads the
//! file once; `Port::rx_ended` says when it is done. `,pace=SPEED` replays at the recorded
//! pace instead; `-` is standard input or output.

mod files;
mod pace;
mod recording;
mod std_streams;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use wirespeed_capture::{CaptureError, CaptureReader, LINKTYPE_ETHERNET};

pub(crate) use files::is_std_stream;
pub use files::{PcapFiles, PcapPlace, same_file};
use pace::{Held, Pace};
use recording::{Lost, Recording};
use std_streams::StreamClaim;

use crate::heap_frames::{HeapFrames, unused_option_notes};
use crate::{
    Backend, Batch, FrameAudit, Port, PortError, PortInfo, PortOptions, PortSpec, PortStats, RxMeta,
};

/// A port on capture files: one replayed, one recorded, or both.
pub struct PcapPort {
    info: PortInfo,
    frames: HeapFrames,
    replay: Option<CaptureReader>,
    /// Replay at the recorded pace; None: as fast as the application takes the packets.
    pace: Option<Pace>,
    /// The replayed file has ended, or failed (`failed`).
    ended: bool,
    failed: bool,
    /// A read error, held until the packets read before it are delivered.
    read_error: Option<CaptureError>,
    recording: Option<Recording>,
    /// The recording's write failed after `tx_burst` took its batch: returned by the next
    /// call, so that the call that took the batch says how many it queued.
    write_error: Option<PortError>,
    stats: PortStats,
    /// Standard input or output, while this port reads or writes it.
    _streams: Vec<StreamClaim>,
    /// The application takes packets of several frames (`PortOptions::multi_buffer`):
    /// a record larger than a frame is replayed as a chain.
    chains: bool,
    /// The segments of the record `read_next` read last.
    segs: [(u64, u32); MAX_SEGMENTS],
    /// The continuation segments of the packet the pace holds.
    held_tails: Vec<(u64, u32)>,
    /// Where a chain sent to the recording is gathered.
    scratch: Vec<u8>,
}

/// The most frames one replayed packet may span.
const MAX_SEGMENTS: usize = crate::MAX_SEGMENTS;

impl PcapPort {
    pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<PcapPort, PortError> {
        let name = spec.to_string();
        if opts.frame_size != 2048 && opts.frame_size != 4096 {
            return Err(PortError::FrameSize(opts.frame_size));
        }
        if opts.frame_count == 0 {
            return Err(PortError::Unsupported(format!("{name}: no frames")));
        }
        let place = PcapPlace::parse(&spec.iface)
            .map_err(|why| PortError::Unsupported(format!("{name}: {why}")))?;
        let (rx, tx) = files_for(&name, &place, opts)?;
        let streams = claim_streams(&name, rx, tx)?;
        let mut notes = unused_option_notes(opts, "pcap");
        if opts.tx && tx.is_none() {
            notes.push(format!(
                "{name} records nothing: packets sent to it are counted as tx_error"
            ));
        }
        // The replayed file first: a failure there leaves no recording file behind.
        let replay = rx.map(open_replay).transpose()?;
        let largest = match opts.multi_buffer {
            true => opts.frame_size * MAX_SEGMENTS as u32,
            false => opts.frame_size,
        };
        let recording = tx
            .map(|path| Recording::create(path, largest))
            .transpose()?;
        let mode = match (&replay, &recording) {
            (Some(_), Some(_)) => "replay+record",
            (Some(_), None) => "replay",
            _ => "record",
        };
        Ok(PcapPort {
            info: PortInfo {
                spec: name,
                backend: Backend::Pcap,
                mode: mode.to_string(),
                notes,
                busy_poll: false,
                multi_buffer: opts.multi_buffer.then_some(MAX_SEGMENTS as u32),
            },
            frames: HeapFrames::new(opts.frame_count, opts.frame_size),
            ended: replay.is_none(),
            replay,
            pace: place.pace.map(Pace::new),
            failed: false,
            read_error: None,
            recording,
            write_error: None,
            stats: PortStats::default(),
            _streams: streams,
            chains: opts.multi_buffer,
            segs: [(0, 0); MAX_SEGMENTS],
            held_tails: Vec::with_capacity(if opts.multi_buffer { MAX_SEGMENTS } else { 0 }),
            scratch: Vec::new(),
        })
    }

    /// The next record of the replay that fits a frame (or, taking chains, as many as a
    /// packet may span), copied into `segs`: how many segments, and its metadata. None at
    /// the end of the file, on a read error (held until what came before is delivered) or
    /// when the frames are out.
    fn read_next(&mut self, size: u32) -> Option<(usize, RxMeta)> {
        // Frames first: the reader cannot step back over a record it has read. A chain
        // may take half the frames at most, so the rest keep the replay going.
        let most = match self.chains {
            true => MAX_SEGMENTS.min(self.frames.count() / 2).max(1),
            false => 1,
        };
        if self.frames.free_count() < most {
            return None;
        }
        let reader = self.replay.as_mut()?;
        loop {
            let addr = self.frames.take()?;
            let record = match reader.next_record() {
                Ok(Some(r)) => r,
                Ok(None) => {
                    self.frames.give_back(addr);
                    self.ended = true;
                    return None;
                }
                Err(e) => {
                    self.frames.give_back(addr);
                    (self.ended, self.failed) = (true, true);
                    self.read_error = Some(e);
                    return None;
                }
            };
            let len = record.data.len() as u32;
            let k = (len.div_ceil(size) as usize).max(1);
            if k > most {
                // Its frames cannot hold it, and a cut packet must not be forwarded as whole.
                self.frames.give_back(addr);
                self.stats.drops.rx_invalid_desc += 1;
                continue;
            }
            self.segs[0] = (addr, len.min(size));
            for j in 1..k {
                let tail = self.frames.take().unwrap_or_default();
                self.segs[j] = (tail, (len - j as u32 * size).min(size));
            }
            let mut at = 0;
            for &(seg, seg_len) in &self.segs[..k] {
                let end = at + seg_len as usize;
                self.frames
                    .packet_mut(seg, seg_len)
                    .copy_from_slice(&record.data[at..end]);
                at = end;
            }
            let wire_len = if record.orig_len > len {
                record.orig_len
            } else {
                0
            };
            let meta = RxMeta {
                ts_ns: record.ts_ns,
                wire_len,
                outgoing: false,
                vlan_restored: false,
            };
            return Some((k, meta));
        }
    }

    /// Counts what a failed write lost (as sent, they now count as not sent) and returns
    /// the error.
    fn lost(&mut self, lost: Lost) -> PortError {
        self.stats.tx_packets -= lost.packets;
        self.stats.tx_bytes -= lost.bytes;
        self.stats.drops.tx_error += lost.packets;
        lost.error
    }
}

/// The files the port replays and records, as the spec names them and the tool uses the
/// port; refuses a port with no file for what the tool does, one file both ways, and a pace
/// with nothing to replay.
fn files_for<'a>(
    name: &str,
    place: &'a PcapPlace,
    opts: &PortOptions,
) -> Result<(Option<&'a Path>, Option<&'a Path>), PortError> {
    let (rx, tx) = place
        .files
        .resolve(opts.rx, opts.tx)
        .map_err(|why| PortError::Unsupported(format!("{name}: {why}")))?;
    if rx.is_none() && tx.is_none() {
        let does = if opts.rx { "receives" } else { "sends" };
        return Err(PortError::Unsupported(format!(
            "{name}: this tool {does} on the port and the spec names no file for that"
        )));
    }
    if let (Some(rx), Some(tx)) = (rx, tx)
        && same_file(rx, tx)
    {
        return Err(PortError::Unsupported(format!(
            "{name}: rx and tx name the same file; recording would overwrite what is replayed"
        )));
    }
    if place.pace.is_some() && rx.is_none() {
        return Err(PortError::Unsupported(format!(
            "{name}: pace= sets the pace of a replay, and this port replays no file"
        )));
    }
    Ok((rx, tx))
}

/// Standard input and output, for a port whose files are `-`.
fn claim_streams(
    name: &str,
    rx: Option<&Path>,
    tx: Option<&Path>,
) -> Result<Vec<StreamClaim>, PortError> {
    let mut streams = Vec::new();
    for (path, claim) in [
        (rx, StreamClaim::stdin as fn() -> _),
        (tx, StreamClaim::stdout),
    ] {
        if path.is_some_and(is_std_stream) {
            streams.push(claim().map_err(|why| PortError::Unsupported(format!("{name}: {why}")))?);
        }
    }
    Ok(streams)
}

fn open_replay(path: &Path) -> Result<CaptureReader, PortError> {
    let reader = CaptureReader::open(path)?;
    if reader.link_type() != LINKTYPE_ETHERNET {
        return Err(CaptureError::unsupported_link_type(path, reader.link_type()).into());
    }
    Ok(reader)
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl Port for PcapPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn rx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        if self.ended {
            return match self.read_error.take() {
                Some(e) => Err(e.into()),
                None => Ok(0),
            };
        }
        if self.replay.is_none() {
            return Ok(0);
        }
        let size = self.frames.frame_size();
        // Paced: one clock reading a burst decides what is due.
        let now = self.pace.as_ref().map(|_| Instant::now());
        let mut count = 0;
        // Room for a packet, and for the longest chain when taking chains.
        let tails = if self.chains { MAX_SEGMENTS - 1 } else { 0 };
        while batch.room() > 0 && batch.tail_room() >= tails {
            let held = self.pace.as_ref().and_then(Pace::held);
            let (k, meta) = match (held, self.pace.as_mut(), now) {
                // A paced packet read earlier goes first, once it is due.
                (Some(_), Some(pace), Some(now)) => match pace.take_due(now) {
                    Some(h) => {
                        self.segs[0] = (h.addr, h.len);
                        let k = 1 + self.held_tails.len();
                        self.segs[1..k].copy_from_slice(&self.held_tails);
                        self.held_tails.clear();
                        (k, h.meta)
                    }
                    None => break,
                },
                _ => {
                    let Some(next) = self.read_next(size) else {
                        break;
                    };
                    next
                }
            };
            let (addr, len) = self.segs[0];
            if let (Some(pace), Some(now)) = (self.pace.as_mut(), now)
                && held.is_none()
            {
                let due = pace.due(meta.ts_ns, now);
                if due > now {
                    pace.hold(Held {
                        addr,
                        len,
                        meta,
                        due,
                    });
                    self.held_tails.extend_from_slice(&self.segs[1..k]);
                    break;
                }
            }
            match k {
                1 => batch.push_with_meta(addr, len, meta),
                _ => {
                    batch.push_chain(&self.segs[..k]);
                    batch.set_meta(batch.len() - 1, meta);
                    true
                }
            };
            self.stats.rx_packets += 1;
            self.stats.rx_bytes += self.segs[..k]
                .iter()
                .map(|&(_, l)| u64::from(l))
                .sum::<u64>();
            count += 1;
        }
        if count == 0
            && let Some(e) = self.read_error.take()
        {
            return Err(e.into());
        }
        Ok(count)
    }

    fn tx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        if let Some(e) = self.write_error.take() {
            return Err(e);
        }
        let ts_ns = now_ns();
        let mut queued = 0;
        for i in 0..batch.len() {
            if batch
                .segments(i)
                .any(|(a, l)| self.frames.range(a, l).is_none())
            {
                // Not a frame of ours: the caller broke the contract; count it, send nothing.
                for (addr, _) in batch.segments(i) {
                    self.frames.give_back(addr);
                }
                self.stats.drops.tx_invalid_desc += 1;
                continue;
            }
            if batch.more(i) > 0 && !self.chains {
                for (addr, _) in batch.segments(i) {
                    self.frames.give_back(addr);
                }
                self.stats.drops.tx_bad_chain += 1;
                continue;
            }
            queued += 1;
            let packet: &[u8] = match batch.more(i) {
                0 => self.frames.packet(batch.addr(i), batch.frame_len(i)),
                _ => {
                    self.scratch.clear();
                    for (addr, len) in batch.segments(i) {
                        self.scratch
                            .extend_from_slice(self.frames.packet(addr, len));
                    }
                    &self.scratch
                }
            };
            let recorded = self
                .recording
                .as_mut()
                .is_some_and(|r| r.add(ts_ns, packet));
            if recorded {
                self.stats.tx_packets += 1;
                self.stats.tx_bytes += u64::from(batch.packet_len(i));
            } else {
                self.stats.drops.tx_error += 1;
            }
            for (addr, _) in batch.segments(i) {
                self.frames.give_back(addr);
            }
        }
        batch.clear();
        if let Some(r) = self.recording.as_mut()
            && r.full()
            && let Err(lost) = r.write_out()
        {
            self.write_error = Some(self.lost(lost));
        }
        Ok(queued)
    }

    fn release(&mut self, batch: &mut Batch) {
        self.frames.release(batch);
    }

    fn alloc_tx(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize {
        match self.chains && len > self.frames.frame_size() {
            true => self.frames.alloc_chains(batch, n, len, MAX_SEGMENTS),
            false => self.frames.alloc(batch, n, len),
        }
    }

    fn packet(&self, addr: u64, len: u32) -> &[u8] {
        self.frames.packet(addr, len)
    }

    fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        self.frames.packet_mut(addr, len)
    }

    fn max_packet_len(&self) -> u32 {
        self.frames.frame_size()
    }

    fn max_chain_len(&self) -> u32 {
        match self.chains {
            true => self.frames.frame_size() * MAX_SEGMENTS as u32,
            false => self.frames.frame_size(),
        }
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if let Some(e) = self.write_error.take() {
            return Err(e);
        }
        match self.recording.as_mut().map(Recording::write_out) {
            Some(Err(lost)) => Err(self.lost(lost)),
            _ => Ok(()),
        }
    }

    fn wait_rx(&mut self, timeout: Duration) -> Result<(), PortError> {
        // A file is always ready until it ends, but for a paced packet's time; after its end
        // nothing will come.
        if let Some(held) = self.pace.as_ref().and_then(Pace::held) {
            let wait = held.due.saturating_duration_since(Instant::now());
            std::thread::sleep(wait.min(timeout));
        } else if self.ended {
            std::thread::sleep(timeout);
        }
        Ok(())
    }

    fn poll_fds(&self) -> Vec<std::os::fd::RawFd> {
        Vec::new()
    }

    fn tx_pending(&self) -> bool {
        self.write_error.is_some() || self.recording.as_ref().is_some_and(Recording::pending)
    }

    fn stats(&mut self) -> PortStats {
        self.stats
    }

    fn audit(&self) -> Option<FrameAudit> {
        let mut audit = self.frames.audit();
        // A paced packet waiting for its time is received, not yet the application's.
        if self.pace.as_ref().and_then(Pace::held).is_some() {
            let frames = 1 + self.held_tails.len() as u64;
            audit.application -= frames;
            audit.rx += frames;
        }
        Some(audit)
    }

    fn rx_ended(&self) -> bool {
        self.replay.is_some() && self.ended && !self.failed
    }
}

impl Drop for PcapPort {
    fn drop(&mut self) {
        // What the application did not flush: written now, or cut off whole if that fails.
        if let Some(r) = self.recording.as_mut() {
            let _ = r.write_out();
        }
    }
}
