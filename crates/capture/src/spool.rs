//! The hand-off between the receive loop and the writer thread: a fixed pool of large chunks.
//!
//! The receive loop encodes packets into a chunk and passes full chunks to the writer thread,
//! which writes each in a few large `write`s and hands the chunk back. The loop never waits:
//! when no chunk is free (the disk is slower than the wire), the packet is dropped and counted.
//! Both channels are bounded by the pool size, so no send ever blocks or allocates.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// A new file: the blocks that end the previous one, its name, the blocks that start it.
#[derive(Debug, Clone, Default)]
pub struct FileStart {
    pub previous_trailer: Vec<u8>,
    pub path: PathBuf,
    pub header: Vec<u8>,
}

/// Encoded packets on their way to one file.
#[derive(Debug)]
pub struct Chunk {
    /// Close the current file and start this one before writing `bytes`.
    pub start: Option<FileStart>,
    /// Records, each packet's ending at one of `packet_ends`; after the last, possibly the
    /// blocks that end the file.
    pub bytes: Vec<u8>,
    /// Where each packet's record ends in `bytes`.
    pub packet_ends: Vec<usize>,
}

impl Chunk {
    fn with_capacity(bytes: usize) -> Chunk {
        Chunk {
            start: None,
            bytes: Vec::with_capacity(bytes),
            packet_ends: Vec::with_capacity(bytes / 32 + 1),
        }
    }

    fn clear(&mut self) {
        self.start = None;
        self.bytes.clear();
        self.packet_ends.clear();
    }

    pub fn packets(&self) -> u64 {
        self.packet_ends.len() as u64
    }

    /// Room left before the chunk would have to grow.
    pub fn room(&self) -> usize {
        self.bytes.capacity() - self.bytes.len()
    }

    /// Marks the end of a packet's record (call after encoding it into `bytes`).
    #[inline]
    pub fn packet_written(&mut self) {
        self.packet_ends.push(self.bytes.len());
    }
}

/// What goes to the writer thread.
enum Message {
    Chunk(Chunk),
    /// The end: these blocks close the last file.
    Close(Vec<u8>),
}

/// Where the writer thread puts the chunks: files, standard output, or a printer.
pub trait Output: Send {
    /// Starts a file and writes its header (called once before the writer starts, so a file
    /// that cannot be created is an error before the capture begins).
    fn open(&mut self, path: &Path, header: &[u8]) -> io::Result<()>;

    /// Writes a chunk's records; on error, leaves the output valid up to the last whole
    /// packet and says how many packets of the chunk made it.
    fn write(&mut self, chunk: &Chunk) -> Result<(), WriteError>;

    /// Writes the blocks that end the current file, flushes and closes it.
    fn close(&mut self, trailer: &[u8]) -> io::Result<()>;
}

/// A write that failed part way: the packets of the chunk that are whole in the output.
#[derive(Debug)]
pub struct WriteError {
    pub written_packets: u64,
    pub error: io::Error,
}

/// What the writer thread did.
#[derive(Debug, Default)]
pub struct WriterReport {
    /// Packets whole in the output.
    pub written: u64,
    /// Packets handed to the writer that a write error kept out of the output.
    pub lost: u64,
    /// The files started, in order (a name appears again when a ring of files wraps).
    pub files: Vec<PathBuf>,
    /// The first error, with the file it happened on.
    pub error: Option<String>,
    /// That error was the reader closing the pipe (`capture ... | head`): where tcpdump
    /// ends on SIGPIPE, this ends the capture, and it is no failure.
    pub reader_gone: bool,
}

/// What the writer has done so far, for a scrape while it runs (`--metrics`).
#[derive(Debug)]
pub struct WriterProgress {
    /// Packets whole in the output.
    pub written: AtomicU64,
    /// Bytes of their records.
    pub bytes: AtomicU64,
    /// Files started, the first one included.
    pub files: AtomicU64,
}

impl Default for WriterProgress {
    fn default() -> Self {
        WriterProgress {
            written: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            files: AtomicU64::new(1),
        }
    }
}

/// The receive loop's side: the chunk being filled and the pool.
pub struct Spool {
    current: Option<Chunk>,
    free: Receiver<Chunk>,
    full: Option<SyncSender<Message>>,
    failed: Arc<AtomicBool>,
    /// Chunks passed to the writer and not yet written.
    queued: Arc<AtomicUsize>,
    writer: Option<JoinHandle<WriterReport>>,
    chunk_size: usize,
    /// Wait for a free chunk instead of dropping (reading a file: no wire to keep up with).
    wait: bool,
    progress: Arc<WriterProgress>,
}

impl Spool {
    /// Starts the writer thread over `output`, whose first file `first` is open, with
    /// `chunks` chunks of `chunk_size` bytes. With `wait`, a full pool makes the caller wait
    /// for the writer instead of dropping.
    pub fn start(
        output: Box<dyn Output>,
        first: PathBuf,
        chunks: usize,
        chunk_size: usize,
        wait: bool,
    ) -> io::Result<Spool> {
        let chunks = chunks.max(2);
        let (free_tx, free_rx) = sync_channel(chunks);
        let (full_tx, full_rx) = sync_channel(chunks + 1);
        for _ in 0..chunks {
            free_tx
                .send(Chunk::with_capacity(chunk_size))
                .map_err(|_| io::Error::other("chunk pool"))?;
        }
        let failed = Arc::new(AtomicBool::new(false));
        let queued = Arc::new(AtomicUsize::new(0));
        let (flag, count) = (failed.clone(), queued.clone());
        let progress = Arc::new(WriterProgress::default());
        let done = progress.clone();
        let writer = std::thread::Builder::new()
            .name("capture-writer".to_string())
            .spawn(move || write_chunks(output, first, full_rx, free_tx, flag, count, &done))?;
        Ok(Spool {
            current: None,
            free: free_rx,
            full: Some(full_tx),
            failed,
            queued,
            writer: Some(writer),
            chunk_size,
            wait,
            progress,
        })
    }

    /// What the writer has done so far.
    pub fn progress(&self) -> Arc<WriterProgress> {
        self.progress.clone()
    }

    /// True once the writer has hit an error (the capture should stop).
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// True while the writer has chunks to write.
    #[inline]
    pub fn writer_busy(&self) -> bool {
        self.queued.load(Ordering::Relaxed) > 0
    }

    /// The largest record a chunk takes.
    pub fn chunk_size(&self) -> usize {
        self.chunk_size
    }

    /// A chunk with at least `len` bytes of room, passing the current one on if it is too
    /// full; `None` when every chunk is with the writer.
    #[inline]
    pub fn room_for(&mut self, len: usize) -> Option<&mut Chunk> {
        if self.current.as_ref().is_some_and(|c| c.room() < len) {
            self.pass_on();
        }
        if self.current.is_none() {
            self.current = Some(self.free_chunk()?);
        }
        self.current.as_mut()
    }

    #[inline]
    fn free_chunk(&mut self) -> Option<Chunk> {
        match self.wait {
            true => self.free.recv().ok(),
            false => self.free.try_recv().ok(),
        }
    }

    /// A fresh chunk that starts the next file; `None` when every chunk is with the writer
    /// (the caller drops the packet and tries again with the next one).
    pub fn start_file(&mut self, start: FileStart) -> Option<&mut Chunk> {
        self.pass_on();
        let mut chunk = match self.current.take() {
            Some(empty) => empty,
            None => self.free_chunk()?,
        };
        chunk.start = Some(start);
        self.current = Some(chunk);
        self.current.as_mut()
    }

    /// Passes the chunk being filled (if it holds anything) to the writer.
    pub fn pass_on(&mut self) {
        let Some(chunk) = self.current.take() else {
            return;
        };
        if chunk.bytes.is_empty() && chunk.start.is_none() {
            self.current = Some(chunk);
            return;
        }
        if let Some(full) = &self.full {
            self.queued.fetch_add(1, Ordering::Relaxed);
            // Never blocks: the channel holds as many messages as there are chunks, plus one.
            let _ = full.send(Message::Chunk(chunk));
        }
    }

    /// Passes on the last chunk, closes the last file with `trailer`, waits for the writer to
    /// write everything, and reports.
    pub fn finish(mut self, trailer: Vec<u8>) -> WriterReport {
        self.pass_on();
        if let Some(full) = self.full.take() {
            let _ = full.send(Message::Close(trailer));
        }
        match self.writer.take().map(|w| w.join()) {
            Some(Ok(report)) => report,
            _ => WriterReport {
                error: Some("the writer thread panicked".to_string()),
                ..WriterReport::default()
            },
        }
    }
}

/// The writer thread: writes chunks in order until the receive loop hangs up.
fn write_chunks(
    mut output: Box<dyn Output>,
    first: PathBuf,
    full: Receiver<Message>,
    free: SyncSender<Chunk>,
    failed: Arc<AtomicBool>,
    queued: Arc<AtomicUsize>,
    progress: &WriterProgress,
) -> WriterReport {
    let mut report = WriterReport {
        files: vec![first.clone()],
        ..WriterReport::default()
    };
    let mut current = first;
    let mut closed = false;
    for message in full.iter() {
        let mut chunk = match message {
            Message::Chunk(chunk) => chunk,
            Message::Close(trailer) => {
                if report.error.is_none()
                    && let Err(e) = output.close(&trailer)
                {
                    report.error = Some(format!("{}: {e}", current.display()));
                }
                closed = true;
                break;
            }
        };
        if report.error.is_none() {
            write_chunk(&mut *output, &chunk, &mut current, &mut report, progress);
            if report.error.is_some() {
                failed.store(true, Ordering::Relaxed);
            }
        } else {
            report.lost += chunk.packets();
        }
        chunk.clear();
        queued.fetch_sub(1, Ordering::Relaxed);
        let _ = free.send(chunk);
    }
    if !closed && report.error.is_none() {
        let _ = output.close(&[]);
    }
    report
}

fn write_chunk(
    output: &mut dyn Output,
    chunk: &Chunk,
    current: &mut PathBuf,
    report: &mut WriterReport,
    progress: &WriterProgress,
) {
    if let Some(start) = &chunk.start {
        let opened = output
            .close(&start.previous_trailer)
            .map_err(|e| format!("{}: {e}", current.display()))
            .and_then(|()| {
                output
                    .open(&start.path, &start.header)
                    .map_err(|e| format!("{}: {e}", start.path.display()))
            });
        if let Err(e) = opened {
            report.error = Some(e);
            report.lost += chunk.packets();
            return;
        }
        report.files.push(start.path.clone());
        progress.files.fetch_add(1, Ordering::Relaxed);
        *current = start.path.clone();
    }
    match output.write(chunk) {
        Ok(()) => {
            report.written += chunk.packets();
            progress
                .written
                .fetch_add(chunk.packets(), Ordering::Relaxed);
            progress
                .bytes
                .fetch_add(chunk.bytes.len() as u64, Ordering::Relaxed);
        }
        Err(e) => {
            report.written += e.written_packets;
            report.lost += chunk.packets() - e.written_packets;
            report.reader_gone = e.error.kind() == std::io::ErrorKind::BrokenPipe;
            report.error = Some(format!("{}: {}", current.display(), e.error));
        }
    }
}
