//! The receive loop's side of writing: cut each packet at the snap length, start new files
//! when rotation says so, encode the packet into the spool. Never waits for the writer.

use std::io;
use std::path::PathBuf;

use crate::rotate::{Namer, Rotation};
use crate::spool::{FileStart, Output, Spool, WriterReport};
use crate::write::{Format, IfStats, Interface};

/// Chunks are this large: a write of 4 MiB amortizes the system call, and at 64-byte packets
/// holds about 50,000 of them.
pub const CHUNK_SIZE: usize = 4 << 20;

/// What became of a packet handed to `record`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Encoded and on its way to the file.
    Queued,
    /// The writer is behind (every chunk is with it): dropped and counted.
    WriterBehind,
    /// `-W` files with `-G` are done: the capture ends before this packet.
    FilesDone,
}

/// Where to write and how.
#[derive(Debug, Clone)]
pub struct RecorderConfig {
    pub format: Format,
    pub interface: Interface,
    pub rotation: Rotation,
    /// File name (a strftime pattern with `-G`); `-` is standard output.
    pub pattern: String,
    /// Bytes of chunks between the receive loop and the disk.
    pub buffer_bytes: usize,
    /// Bytes a chunk holds (`CHUNK_SIZE` unless testing).
    pub chunk_size: usize,
    /// Wait for the writer rather than drop (offline: reading a file).
    pub wait_for_writer: bool,
}

pub struct Recorder {
    format: Format,
    interface: Interface,
    rotation: Rotation,
    namer: Namer,
    spool: Spool,
    /// Bytes, packets and start time of the current file.
    file_bytes: u64,
    file_packets: u64,
    file_start_ns: u64,
    /// Files started in this `-G` interval (the number `-C` appends), and in all.
    interval_files: u64,
    files_started: u64,
    /// Statistics for the pcapng trailer; the caller keeps `received` and `dropped` current.
    pub stats: IfStats,
    pub dropped_by_writer: u64,
}

impl Recorder {
    /// Creates the first file (named for `start_ns`) and starts the writer thread. An error
    /// here means nothing was written.
    pub fn start(
        config: RecorderConfig,
        mut output: Box<dyn Output>,
        start_ns: u64,
    ) -> io::Result<Recorder> {
        let namer = Namer::new(&config.pattern, config.rotation);
        let first = namer.name(start_ns, 0);
        let mut header = Vec::new();
        config.format.file_header(&config.interface, &mut header);
        output
            .open(&first, &header)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", first.display())))?;
        let chunk_size = config.chunk_size.max(64 << 10);
        let chunks = (config.buffer_bytes / chunk_size).max(2);
        let spool = Spool::start(output, first, chunks, chunk_size, config.wait_for_writer)?;
        Ok(Recorder {
            format: config.format,
            interface: config.interface,
            rotation: config.rotation,
            namer,
            spool,
            file_bytes: header.len() as u64,
            file_packets: 0,
            file_start_ns: start_ns,
            interval_files: 1,
            files_started: 1,
            stats: IfStats {
                start_ns,
                ..IfStats::default()
            },
            dropped_by_writer: 0,
        })
    }

    /// The most bytes of a packet this recorder keeps.
    pub fn snaplen(&self) -> usize {
        self.interface.snaplen as usize
    }

    /// What the writer has done so far (`--metrics`).
    pub fn writer_progress(&self) -> std::sync::Arc<crate::spool::WriterProgress> {
        self.spool.progress()
    }

    /// True once the writer failed (the capture should stop and report it).
    pub fn failed(&self) -> bool {
        self.spool.failed()
    }

    /// Encodes one packet. `data` is what was received; it is cut at the snap length here.
    #[inline]
    pub fn record(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> Outcome {
        let data = &data[..data.len().min(self.interface.snaplen as usize)];
        let len = self.format.record_len(data.len());
        if let Some(outcome) = self.rotate_if_due(ts_ns, len) {
            return outcome;
        }
        let Some(chunk) = self.spool.room_for(len) else {
            self.dropped_by_writer += 1;
            return Outcome::WriterBehind;
        };
        self.format.record(&mut chunk.bytes, ts_ns, data, orig_len);
        chunk.packet_written();
        self.file_bytes += len as u64;
        self.file_packets += 1;
        self.stats.end_ns = ts_ns;
        Outcome::Queued
    }

    /// The format records are encoded in (for `merge::Feeder`, which encodes them itself).
    pub fn format(&self) -> Format {
        self.format
    }

    /// Records one packet another thread encoded in this recorder's format, cut at its snap
    /// length (`merge`): `record` is the whole record, `ts_ns` the packet's time.
    #[inline]
    pub fn record_encoded(&mut self, ts_ns: u64, record: &[u8]) -> Outcome {
        let len = record.len();
        if let Some(outcome) = self.rotate_if_due(ts_ns, len) {
            return outcome;
        }
        let Some(chunk) = self.spool.room_for(len) else {
            self.dropped_by_writer += 1;
            return Outcome::WriterBehind;
        };
        chunk.bytes.extend_from_slice(record);
        chunk.packet_written();
        self.file_bytes += len as u64;
        self.file_packets += 1;
        self.stats.end_ns = ts_ns;
        Outcome::Queued
    }

    /// Records, in one copy, packets another thread encoded as `record_encoded` takes them:
    /// `records` holds them one after another, the i-th ending at `ends[i]`; `last_ts_ns` is
    /// the last one's time. Only without rotation (nothing to decide packet by packet) and
    /// with a free chunk: false, and nothing recorded, otherwise.
    pub fn record_encoded_all(&mut self, records: &[u8], ends: &[usize], last_ts_ns: u64) -> bool {
        if !self.rotation.is_none() || records.len() > self.spool.chunk_size() {
            return false;
        }
        let Some(chunk) = self.spool.room_for(records.len()) else {
            return false;
        };
        let base = chunk.bytes.len();
        chunk.bytes.extend_from_slice(records);
        chunk.packet_ends.extend(ends.iter().map(|&e| base + e));
        self.file_bytes += records.len() as u64;
        self.file_packets += ends.len() as u64;
        self.stats.end_ns = last_ts_ns;
        true
    }

    /// Starts the next file when `-G` or `-C` says so; an outcome when the packet must not
    /// be recorded.
    #[inline]
    fn rotate_if_due(&mut self, ts_ns: u64, len: usize) -> Option<Outcome> {
        let interval_over = self
            .rotation
            .seconds
            .is_some_and(|g| ts_ns >= self.file_start_ns.saturating_add(g * 1_000_000_000));
        let full = self.rotation.bytes.is_some_and(|c| {
            self.file_packets > 0 && self.file_bytes + (len + self.format.trailer_len()) as u64 > c
        });
        if !interval_over && !full {
            return None;
        }
        if interval_over
            && self.rotation.bytes.is_none()
            && self
                .rotation
                .files
                .is_some_and(|w| self.files_started >= u64::from(w))
        {
            return Some(Outcome::FilesDone);
        }
        let index = if interval_over {
            0
        } else {
            self.interval_files
        };
        // A size-rotated file keeps its interval's time in its name, as tcpdump's does.
        let named_for = if interval_over {
            ts_ns
        } else {
            self.file_start_ns
        };
        let path = self.namer.name(named_for, index);
        match self.next_file(path, ts_ns) {
            true => {
                if interval_over {
                    self.file_start_ns = ts_ns;
                    self.interval_files = 1;
                } else {
                    self.interval_files += 1;
                }
                None
            }
            false => {
                self.dropped_by_writer += 1;
                Some(Outcome::WriterBehind)
            }
        }
    }

    fn next_file(&mut self, path: PathBuf, ts_ns: u64) -> bool {
        let mut previous_trailer = Vec::new();
        self.format.trailer(&self.stats, &mut previous_trailer);
        let mut header = Vec::new();
        self.format.file_header(&self.interface, &mut header);
        let header_len = header.len() as u64;
        let start = FileStart {
            previous_trailer,
            path,
            header,
        };
        if self.spool.start_file(start).is_none() {
            return false;
        }
        self.files_started += 1;
        self.file_bytes = header_len;
        self.file_packets = 0;
        self.stats.start_ns = ts_ns;
        true
    }

    /// Hands what is encoded so far to the writer (when the loop goes idle, so packets reach
    /// the file soon at low rates).
    pub fn flush(&mut self) {
        self.spool.pass_on();
    }

    /// True while the writer thread has chunks to write: a receive loop that finds its port
    /// empty can give it the CPU they may share.
    #[inline]
    pub fn writer_busy(&self) -> bool {
        self.spool.writer_busy()
    }

    /// Writes the end of the last file and waits for the writer to finish.
    pub fn finish(self) -> WriterReport {
        let mut trailer = Vec::new();
        self.format.trailer(&self.stats, &mut trailer);
        self.spool.finish(trailer)
    }
}

#[cfg(test)]
mod tests;
