//! Several receiving threads, one output: each thread encodes the packets it takes, in the
//! file's format, into chunks of its own (a `Feeder`: no lock, no shared counter on the
//! per-packet path), and one merging thread takes the chunks in the order they come and
//! records them through a `Recorder`, which alone decides rotation, `-c` and `-W`, as with
//! one thread. Without rotation a chunk goes into the writer's in one copy; with it, packet
//! by packet (each record's time and length are all rotation needs).
//!
//! Order: a queue belongs to one thread, a thread's chunks reach the merger in the order it
//! sent them (one FIFO channel), and the merger records a chunk's packets in order, so each
//! queue's packets are in the file in the order they arrived. Across queues the file has
//! the order in which chunks were handed over, not that of arrival: the kernel delivers
//! each queue on its own CPU and stamps no order across them either (nor does a NIC's RSS
//! promise one), so there is none to keep.
//!
//! Memory: a thread that finds all its chunks with the merger drops the packet and counts it
//! (the loop never waits), as `Recorder` does when the writer is behind.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::recorder::{Outcome, Recorder};
use crate::spool::WriterReport;
use crate::write::Format;

/// How long the merger waits for a chunk before passing what it encoded on to the writer.
const IDLE_FLUSH: Duration = Duration::from_millis(50);

/// Packets of one thread, in the order it took them: records in the file's format.
#[derive(Debug)]
struct FeedChunk {
    bytes: Vec<u8>,
    /// Where each record ends in `bytes`, and its packet's time.
    ends: Vec<usize>,
    ts: Vec<u64>,
}

impl FeedChunk {
    fn with_capacity(bytes: usize) -> FeedChunk {
        let packets = bytes / 64 + 1;
        FeedChunk {
            bytes: Vec::with_capacity(bytes),
            ends: Vec::with_capacity(packets),
            ts: Vec::with_capacity(packets),
        }
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        self.ts.clear();
    }

    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }
}

/// What the merger did with one thread's packets.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ThreadTally {
    /// Recorded: on their way to the file.
    pub queued: u64,
    /// Dropped by the recorder: the writer was behind.
    pub writer_behind: u64,
    /// Arrived after `-c` or `-W` ended the capture: not recorded.
    pub after_stop: u64,
}

/// What the merger did, once every feeder is gone.
#[derive(Debug)]
pub struct MergeReport {
    pub writer: WriterReport,
    /// Each thread's packets, by what became of them.
    pub threads: Vec<ThreadTally>,
}

/// What the feeders and the merger share: nothing a packet touches.
struct Shared {
    /// Set by the merger when `-c` or `-W` ended the capture, or the writer failed.
    done: AtomicBool,
    /// Chunks sent to the merger and not yet taken apart.
    queued: AtomicUsize,
    /// Each thread's packets received and dropped before reaching it (for the pcapng
    /// statistics), as it last published them.
    received: Vec<AtomicU64>,
    dropped: Vec<AtomicU64>,
}

/// The merging thread and the feeders' way to it.
pub struct Merger {
    handle: Option<JoinHandle<MergeReport>>,
    shared: Arc<Shared>,
}

/// One receiving thread's side: the chunk it fills and its pool.
pub struct Feeder {
    thread: usize,
    current: Option<FeedChunk>,
    free: Receiver<FeedChunk>,
    full: SyncSender<(usize, FeedChunk)>,
    shared: Arc<Shared>,
    format: Format,
    snaplen: usize,
    /// Packets dropped because every chunk of this thread was with the merger.
    pub dropped: u64,
}

impl Merger {
    /// Starts the merger over `recorder` (started: its first file is open) for `threads`
    /// feeders, each with `chunks` chunks of `chunk_size` bytes; `limit` is `-c`.
    pub fn start(
        recorder: Recorder,
        threads: usize,
        chunks: usize,
        chunk_size: usize,
        limit: Option<u64>,
    ) -> std::io::Result<(Merger, Vec<Feeder>)> {
        let chunks = chunks.max(2);
        let shared = Arc::new(Shared {
            done: AtomicBool::new(false),
            queued: AtomicUsize::new(0),
            received: (0..threads).map(|_| AtomicU64::new(0)).collect(),
            dropped: (0..threads).map(|_| AtomicU64::new(0)).collect(),
        });
        // Never blocks a sender: room for every chunk of every thread.
        let (full_tx, full_rx) = sync_channel(threads * chunks + 1);
        let (format, snaplen) = (recorder.format(), recorder.snaplen());
        let mut feeders = Vec::with_capacity(threads);
        let mut returns = Vec::with_capacity(threads);
        for thread in 0..threads {
            let (free_tx, free_rx) = sync_channel(chunks);
            for _ in 0..chunks {
                let _ = free_tx.send(FeedChunk::with_capacity(chunk_size));
            }
            returns.push(free_tx);
            feeders.push(Feeder {
                thread,
                current: None,
                free: free_rx,
                full: full_tx.clone(),
                shared: shared.clone(),
                format,
                snaplen,
                dropped: 0,
            });
        }
        drop(full_tx);
        let state = MergeState {
            recorder,
            shared: shared.clone(),
            tallies: vec![ThreadTally::default(); threads],
            limit: limit.unwrap_or(u64::MAX),
            recorded: 0,
            stopped: false,
        };
        let handle = std::thread::Builder::new()
            .name("capture-merge".to_string())
            .spawn(move || state.run(full_rx, returns))?;
        let merger = Merger {
            handle: Some(handle),
            shared,
        };
        Ok((merger, feeders))
    }

    /// Waits for the merger to take every chunk (the feeders must be gone: dropped or
    /// finished), close the last file and report.
    pub fn finish(mut self) -> MergeReport {
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(report)) => report,
            _ => MergeReport {
                writer: WriterReport {
                    error: Some("the merging thread panicked".to_string()),
                    ..WriterReport::default()
                },
                threads: Vec::new(),
            },
        }
    }

    /// True once `-c` or `-W` ended the capture or the writer failed.
    pub fn done(&self) -> bool {
        self.shared.done.load(Ordering::Relaxed)
    }
}

impl Feeder {
    /// Takes one packet (cut at the snap length); `Queued` when it is on its way to the
    /// merger, `WriterBehind` when every chunk of this thread is with it (dropped and
    /// counted), `FilesDone` once the merger has ended the capture.
    #[inline]
    pub fn record(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> Outcome {
        if self.shared.done.load(Ordering::Relaxed) {
            return Outcome::FilesDone;
        }
        let data = &data[..data.len().min(self.snaplen)];
        let len = self.format.record_len(data.len());
        if self
            .current
            .as_ref()
            .is_some_and(|c| c.bytes.capacity() - c.bytes.len() < len)
        {
            self.flush();
        }
        if self.current.is_none() {
            match self.free.try_recv() {
                Ok(c) => self.current = Some(c),
                Err(_) => {
                    self.dropped += 1;
                    return Outcome::WriterBehind;
                }
            }
        }
        let Some(chunk) = self.current.as_mut() else {
            return Outcome::WriterBehind;
        };
        self.format.record(&mut chunk.bytes, ts_ns, data, orig_len);
        chunk.ends.push(chunk.bytes.len());
        chunk.ts.push(ts_ns);
        Outcome::Queued
    }

    /// Hands the chunk being filled (if it holds anything) to the merger.
    pub fn flush(&mut self) {
        let Some(chunk) = self.current.take() else {
            return;
        };
        if chunk.is_empty() {
            self.current = Some(chunk);
            return;
        }
        self.shared.queued.fetch_add(1, Ordering::Relaxed);
        // Never blocks: the channel has room for every chunk.
        let _ = self.full.send((self.thread, chunk));
    }

    /// This thread's packets received and lost before the filter so far, for the pcapng
    /// statistics (a few times a second).
    pub fn publish(&self, received: u64, dropped: u64) {
        self.shared.received[self.thread].store(received, Ordering::Relaxed);
        self.shared.dropped[self.thread].store(dropped, Ordering::Relaxed);
    }

    /// True once the merger ended the capture (`-c`, `-W`, a failed write).
    #[inline]
    pub fn done(&self) -> bool {
        self.shared.done.load(Ordering::Relaxed)
    }

    /// True while the merger has chunks to take apart: a thread that finds its port empty
    /// can give it the CPU.
    #[inline]
    pub fn writer_busy(&self) -> bool {
        self.shared.queued.load(Ordering::Relaxed) > 0
    }
}

impl Drop for Feeder {
    /// The last chunk goes to the merger; once every feeder is gone, it finishes.
    fn drop(&mut self) {
        self.flush();
    }
}

/// The merging thread's state.
struct MergeState {
    recorder: Recorder,
    shared: Arc<Shared>,
    tallies: Vec<ThreadTally>,
    /// `-c`, and the packets recorded so far.
    limit: u64,
    recorded: u64,
    stopped: bool,
}

impl MergeState {
    fn run(
        mut self,
        full: Receiver<(usize, FeedChunk)>,
        returns: Vec<SyncSender<FeedChunk>>,
    ) -> MergeReport {
        loop {
            let (thread, mut chunk) = match full.recv_timeout(IDLE_FLUSH) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    self.recorder.flush();
                    self.note_failure();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            self.take_apart(thread, &chunk);
            chunk.clear();
            self.shared.queued.fetch_sub(1, Ordering::Relaxed);
            // The feeder may be gone (a thread that ended): the chunk is dropped then.
            let _ = returns[thread].send(chunk);
        }
        self.update_stats();
        let behind = self.recorder.dropped_by_writer;
        let writer = self.recorder.finish();
        debug_assert_eq!(
            behind,
            self.tallies.iter().map(|t| t.writer_behind).sum::<u64>()
        );
        MergeReport {
            writer,
            threads: self.tallies,
        }
    }

    /// Records the packets of one thread's chunk, in order: all at once when nothing is to
    /// be decided between them (no rotation, -c not reached within), else one by one.
    fn take_apart(&mut self, thread: usize, chunk: &FeedChunk) {
        self.update_stats();
        let n = chunk.ends.len() as u64;
        let last_ts = chunk.ts.last().copied().unwrap_or_default();
        if !self.stopped
            && self.recorded.saturating_add(n) < self.limit
            && self
                .recorder
                .record_encoded_all(&chunk.bytes, &chunk.ends, last_ts)
        {
            self.tallies[thread].queued += n;
            self.recorded += n;
            self.note_failure();
            return;
        }
        let mut start = 0;
        for (&end, &ts) in chunk.ends.iter().zip(&chunk.ts) {
            let record = &chunk.bytes[start..end];
            start = end;
            let tally = &mut self.tallies[thread];
            if self.stopped {
                tally.after_stop += 1;
                continue;
            }
            match self.recorder.record_encoded(ts, record) {
                Outcome::Queued => {
                    tally.queued += 1;
                    self.recorded += 1;
                    if self.recorded >= self.limit {
                        self.stop();
                    }
                }
                Outcome::WriterBehind => tally.writer_behind += 1,
                Outcome::FilesDone => {
                    tally.after_stop += 1;
                    self.stop();
                }
            }
        }
        self.note_failure();
    }

    fn stop(&mut self) {
        self.stopped = true;
        self.shared.done.store(true, Ordering::Relaxed);
    }

    /// A failed writer ends the capture, as with one thread.
    fn note_failure(&mut self) {
        if self.recorder.failed() {
            self.shared.done.store(true, Ordering::Relaxed);
        }
    }

    /// The pcapng statistics: what the threads last published, summed.
    fn update_stats(&mut self) {
        let sum = |v: &[AtomicU64]| v.iter().map(|a| a.load(Ordering::Relaxed)).sum::<u64>();
        self.recorder.stats.received = sum(&self.shared.received);
        self.recorder.stats.dropped = sum(&self.shared.dropped);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::FileOutput;
    use crate::read::CaptureReader;
    use crate::recorder::RecorderConfig;
    use crate::rotate::Rotation;
    use crate::write::{Format, Interface};

    /// A packet of thread `t` with sequence number `seq`.
    fn packet(t: u8, seq: u32) -> Vec<u8> {
        let mut p = vec![t; 60];
        p[1..5].copy_from_slice(&seq.to_be_bytes());
        p
    }

    fn merge_into(path: &std::path::Path, counts: [u32; 2], limit: Option<u64>) -> MergeReport {
        merge_rotating(path, counts, limit, Rotation::default())
    }

    fn merge_rotating(
        path: &std::path::Path,
        counts: [u32; 2],
        limit: Option<u64>,
        rotation: Rotation,
    ) -> MergeReport {
        let config = RecorderConfig {
            format: Format::Pcapng,
            interface: Interface {
                link_type: 1,
                snaplen: 262_144,
                name: None,
            },
            rotation,
            pattern: path.display().to_string(),
            buffer_bytes: 8 << 20,
            chunk_size: 64 << 10,
            wait_for_writer: false,
        };
        let recorder = Recorder::start(config, Box::new(FileOutput::new()), 1).unwrap();
        // Small chunks, many of them: the threads' chunks interleave at the merger.
        let (merger, feeders) = Merger::start(recorder, 2, 1000, 4096, limit).unwrap();
        std::thread::scope(|s| {
            for (t, mut f) in feeders.into_iter().enumerate() {
                s.spawn(move || {
                    for seq in 0..counts[t] {
                        let outcome = f.record(u64::from(seq) + 1, &packet(t as u8, seq), 60);
                        assert_ne!(outcome, Outcome::WriterBehind);
                    }
                });
            }
        });
        merger.finish()
    }

    /// Per thread, the sequence numbers in the files, in file order.
    fn sequences_in(paths: &[std::path::PathBuf]) -> [Vec<u32>; 2] {
        let mut out = [Vec::new(), Vec::new()];
        for path in paths {
            let mut r = CaptureReader::open(path).unwrap();
            while let Some(rec) = r.next_record().unwrap() {
                let seq = u32::from_be_bytes(rec.data[1..5].try_into().unwrap());
                out[rec.data[0] as usize].push(seq);
            }
        }
        out
    }

    fn sequences(path: &std::path::Path) -> [Vec<u32>; 2] {
        sequences_in(&[path.to_path_buf()])
    }

    /// -C: the merger records packet by packet, each file within its size.
    #[test]
    fn rotation_by_size_keeps_each_thread_s_order_across_files() {
        let dir = std::env::temp_dir().join(format!("ws-merge-r-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let rotation = Rotation {
            bytes: Some(50_000),
            ..Rotation::default()
        };
        let report = merge_rotating(&dir.join("r.pcapng"), [3000, 5000], None, rotation);
        assert_eq!(report.writer.written, 8000);
        let files = &report.writer.files;
        assert!(files.len() > 10, "{files:?}");
        for f in files {
            assert!(std::fs::metadata(f).unwrap().len() <= 50_000, "{f:?}");
        }
        let [a, b] = sequences_in(files);
        assert_eq!(a, (0..3000).collect::<Vec<u32>>());
        assert_eq!(b, (0..5000).collect::<Vec<u32>>());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn each_thread_s_packets_reach_the_file_in_order() {
        let path = std::env::temp_dir().join(format!("ws-merge-{}.pcapng", std::process::id()));
        let report = merge_into(&path, [3000, 5000], None);
        assert_eq!(report.writer.written, 8000);
        let queued: Vec<u64> = report.threads.iter().map(|t| t.queued).collect();
        assert_eq!(queued, [3000, 5000]);
        let [a, b] = sequences(&path);
        assert_eq!(a, (0..3000).collect::<Vec<u32>>());
        assert_eq!(b, (0..5000).collect::<Vec<u32>>());
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn the_merger_counts_to_the_limit_and_ends_the_capture() {
        let path = std::env::temp_dir().join(format!("ws-merge-c-{}.pcapng", std::process::id()));
        let report = merge_into(&path, [3000, 5000], Some(100));
        assert_eq!(report.writer.written, 100);
        let t = &report.threads;
        assert_eq!(t[0].queued + t[1].queued, 100);
        // What the feeders handed over past the limit, counted after the stop.
        assert!(t[0].after_stop + t[1].after_stop <= 7900, "{t:?}");
        let [a, b] = sequences(&path);
        assert_eq!(a.len() + b.len(), 100);
        assert!(a.windows(2).all(|w| w[0] + 1 == w[1]));
        assert!(b.windows(2).all(|w| w[0] + 1 == w[1]));
        let _ = std::fs::remove_file(&path);
    }
}
