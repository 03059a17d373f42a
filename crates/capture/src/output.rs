//! Where the writer thread writes: a file at a time, or standard output. Each chunk goes out in
//! a few large `write`s (no further buffering), so after an error we know exactly which
//! records reached the file and can cut it back to the last whole packet.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::path::Path;

use crate::spool::{Chunk, Output, WriteError};

/// The most one `write` takes. A 4 MiB write into tmpfs holds its CPU for about a
/// millisecond, longer than a receive ring lasts at full rate when the receive loop shares
/// that CPU (`taskset -c 1 wirespeed capture`); pieces this size take ~100 µs each, and the
/// writer yields between them.
const WRITE_PIECE: usize = 256 << 10;

/// Writes all of `bytes`; on error, how many bytes made it.
fn write_all_counted(w: &mut dyn Write, bytes: &[u8]) -> Result<(), (usize, io::Error)> {
    let mut done = 0;
    while done < bytes.len() {
        let piece = &bytes[done..bytes.len().min(done + WRITE_PIECE)];
        match w.write(piece) {
            Ok(0) => return Err((done, io::ErrorKind::WriteZero.into())),
            Ok(n) => {
                done += n;
                // A receive loop pinned to this CPU gets it back between pieces.
                std::thread::yield_now();
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err((done, e)),
        }
    }
    Ok(())
}

/// Packets of `chunk` whose records end within its first `done` bytes, and the offset where
/// the last of them ends.
fn whole_packets(chunk: &Chunk, done: usize) -> (u64, usize) {
    let whole = chunk.packet_ends.partition_point(|&end| end <= done);
    let end = whole.checked_sub(1).map_or(0, |i| chunk.packet_ends[i]);
    (whole as u64, end)
}

/// Capture files, one at a time.
#[derive(Default)]
pub struct FileOutput {
    file: Option<File>,
    /// Bytes of the current file that are whole records (or its header).
    valid_len: u64,
}

impl FileOutput {
    pub fn new() -> FileOutput {
        FileOutput::default()
    }
}

impl Output for FileOutput {
    fn open(&mut self, path: &Path, header: &[u8]) -> io::Result<()> {
        let mut file = File::create(path)?;
        if let Err((_, e)) = write_all_counted(&mut file, header) {
            // Not even a header: leave an empty file rather than half a header.
            let _ = file.set_len(0);
            return Err(e);
        }
        self.valid_len = header.len() as u64;
        self.file = Some(file);
        Ok(())
    }

    fn write(&mut self, chunk: &Chunk) -> Result<(), WriteError> {
        let Some(file) = self.file.as_mut() else {
            return Err(WriteError {
                written_packets: 0,
                error: io::Error::other("no file open"),
            });
        };
        match write_all_counted(file, &chunk.bytes) {
            Ok(()) => {
                self.valid_len += chunk.bytes.len() as u64;
                Ok(())
            }
            Err((done, error)) => {
                let (written_packets, end) = whole_packets(chunk, done);
                self.valid_len += end as u64;
                // Cut a partly written record off, so the file ends with a whole packet.
                let _ = file.set_len(self.valid_len);
                self.file = None;
                Err(WriteError {
                    written_packets,
                    error,
                })
            }
        }
    }

    fn close(&mut self, trailer: &[u8]) -> io::Result<()> {
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        if let Err((_, e)) = write_all_counted(&mut file, trailer) {
            // The statistics did not fit: the file still ends after its last packet.
            let _ = file.set_len(self.valid_len);
            return Err(e);
        }
        Ok(())
    }
}

/// Standard output (`-w -`): one stream, never rotated, so `open` only writes the header.
pub struct StdoutOutput {
    /// A descriptor of its own on standard output, taken at `open`. `io::Stdout` buffers by
    /// lines: a packet's bytes after its last 0x0a byte would wait for the next packet, and
    /// a reader of the pipe (`| tcpdump -r -`) would see each packet one packet late.
    out: Option<File>,
}

impl StdoutOutput {
    pub fn new() -> StdoutOutput {
        StdoutOutput { out: None }
    }

    fn stream(&mut self) -> io::Result<&mut File> {
        self.out
            .as_mut()
            .ok_or_else(|| io::Error::other("standard output written before it was opened"))
    }
}

impl Default for StdoutOutput {
    fn default() -> Self {
        StdoutOutput::new()
    }
}

impl Output for StdoutOutput {
    fn open(&mut self, _path: &Path, header: &[u8]) -> io::Result<()> {
        // Whatever was printed before goes first.
        io::stdout().flush()?;
        let out = self
            .out
            .insert(File::from(io::stdout().as_fd().try_clone_to_owned()?));
        write_all_counted(out, header).map_err(|(_, e)| e)
    }

    fn write(&mut self, chunk: &Chunk) -> Result<(), WriteError> {
        let out = self.stream().map_err(|error| WriteError {
            written_packets: 0,
            error,
        })?;
        write_all_counted(out, &chunk.bytes).map_err(|(done, error)| WriteError {
            written_packets: whole_packets(chunk, done).0,
            error,
        })
    }

    fn close(&mut self, trailer: &[u8]) -> io::Result<()> {
        match self.out.as_mut() {
            Some(out) => write_all_counted(out, trailer).map_err(|(_, e)| e),
            None => Ok(()),
        }
    }
}
