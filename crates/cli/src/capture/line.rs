//! Lines on standard output: the writer thread's `Output` that prints each record of a chunk
//! with `wirespeed_capture::print`, so printing never slows the receive loop.

use std::io::{self, BufWriter, Stdout, Write};
use std::path::Path;

use wirespeed_capture::print::{PrintOptions, Printer};
use wirespeed_capture::spool::{Chunk, Output, WriteError};

/// Prints the records of each chunk (classic pcap records) as lines on standard output.
pub struct LineOutput {
    out: BufWriter<Stdout>,
    line: String,
    printer: Printer,
}

impl LineOutput {
    /// `link_type`: the records' (see `wirespeed_capture::print::decodes`).
    pub fn new(link_type: u16, options: PrintOptions) -> LineOutput {
        LineOutput {
            out: BufWriter::with_capacity(1 << 16, io::stdout()),
            line: String::with_capacity(256),
            printer: Printer::new(link_type, options),
        }
    }
}

impl Output for LineOutput {
    fn open(&mut self, _path: &Path, _header: &[u8]) -> io::Result<()> {
        Ok(())
    }

    fn write(&mut self, chunk: &Chunk) -> Result<(), WriteError> {
        let mut start = 0;
        for (i, &end) in chunk.packet_ends.iter().enumerate() {
            let record = &chunk.bytes[start..end];
            start = end;
            self.line.clear();
            self.printer.record(record, &mut self.line);
            if let Err(error) = writeln!(self.out, "{}", self.line) {
                return Err(WriteError {
                    written_packets: i as u64,
                    error,
                });
            }
        }
        // Lines appear as the chunks come (the loop passes chunks on when it goes idle).
        self.out.flush().map_err(|error| WriteError {
            written_packets: chunk.packets(),
            error,
        })
    }

    fn close(&mut self, _trailer: &[u8]) -> io::Result<()> {
        self.out.flush()
    }
}
