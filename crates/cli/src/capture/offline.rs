//! `-r FILE`: filter and rewrite (or print) a capture file. There is no wire to keep up with,
//! so here the loop waits for the writer instead of dropping.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use wirespeed_capture::filter::Filter;
use wirespeed_capture::recorder::{Outcome, Recorder};
use wirespeed_capture::rotate::Rotation;
use wirespeed_capture::write::Interface;
use wirespeed_capture::{CaptureError, CaptureReader, ErrorKind, Record};

use super::counts::Counts;
use super::metrics::{self, ReadProgress};
use super::{CaptureArgs, Sink, compile_or_exit, info};
use crate::run::clock::now_ns;

/// Records between looks at the stop flag.
const STOP_CHECK: u64 = 1024;

/// Standard input for `-r -`, read so that a stopping signal ends the capture even while the
/// pipe is idle (the signals only set the stop flag; the read itself would wait on): it waits
/// in poll() and looks at the flag every 100 ms, and once the flag is set the input ends.
struct StoppableStdin {
    file: File,
    stop: Arc<AtomicBool>,
}

impl StoppableStdin {
    fn new(stop: &Arc<AtomicBool>) -> io::Result<StoppableStdin> {
        // A duplicate of descriptor 0, read directly: std's Stdin buffers behind poll()'s back.
        let fd = io::stdin().as_fd().try_clone_to_owned()?;
        Ok(StoppableStdin {
            file: File::from(fd),
            stop: stop.clone(),
        })
    }
}

impl Read for StoppableStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(0);
            }
            let mut fds = [PollFd::new(self.file.as_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(100u8)) {
                Ok(0) | Err(Errno::EINTR) => continue,
                Ok(_) => return self.file.read(buf),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn open(path: &Path, stop: &Arc<AtomicBool>) -> anyhow::Result<CaptureReader> {
    if path != Path::new("-") {
        return Ok(CaptureReader::open(path)?);
    }
    let stdin = StoppableStdin::new(stop).context("read standard input")?;
    match CaptureReader::from_reader(path, Box::new(stdin)) {
        Err(e) if stop.load(Ordering::Relaxed) => {
            anyhow::bail!("stopped before standard input gave a whole capture file header ({e})")
        }
        r => Ok(r?),
    }
}

/// A record cut short by the stop flag ends the input like the end of a file: what came
/// before it is written, and the capture was not truncated but stopped.
fn cut_by_stop(e: &CaptureError, stop: &AtomicBool) -> bool {
    matches!(e.kind, ErrorKind::Truncated { .. }) && stop.load(Ordering::Relaxed)
}

pub fn run(
    args: &CaptureArgs,
    path: &Path,
    rotation: Rotation,
    stop: &Arc<AtomicBool>,
) -> anyhow::Result<Counts> {
    // Answered from the start: `-r -` may wait a while for its file header.
    let progress = Arc::new(ReadProgress::default());
    metrics::watch_reader(progress.clone());
    let expression = args.expression();
    info::answer_sigusr1(expression.is_some(), false)?;
    let mut reader = open(path, stop)?;
    refuse_undecoded_lines(args, path, reader.link_type())?;
    let filter = compile_or_exit(expression.as_deref(), reader.link_type(), false, stop)?;
    let mut counts = Counts {
        source: path.display().to_string(),
        filter: expression,
        filter_location: filter.as_ref().map(|_| "user".to_string()),
        ..Counts::default()
    };
    let interface = Interface {
        link_type: reader.link_type(),
        snaplen: args.snaplen(),
        name: None,
    };
    let started = Instant::now();
    let mut writer = Writer {
        sink: Some(args.recorder(rotation, interface, true)),
        recorder: None,
    };
    let read_error = record_all(
        args,
        &mut reader,
        filter.as_ref(),
        &mut writer,
        &mut counts,
        (stop, &progress),
    )?;
    let mut recorder = writer.finish()?;
    counts.seconds = started.elapsed().as_secs_f64();
    recorder.stats.received = counts.received;
    let behind = recorder.dropped_by_writer;
    counts.set_writer(recorder.finish(), behind);
    if args.write.is_none() {
        counts.files.clear();
    }
    if let Some(e) = read_error {
        // What was read before the error is written; the error still makes the exit non-zero.
        counts.error = Some(
            counts
                .error
                .take()
                .map_or(e.to_string(), |w| format!("{w}; {e}")),
        );
    }
    Ok(counts)
}

/// Lines need a link type the printer decodes; files take any.
fn refuse_undecoded_lines(args: &CaptureArgs, path: &Path, link_type: u16) -> anyhow::Result<()> {
    if args.write.is_none() && !wirespeed_capture::print::decodes(link_type) {
        anyhow::bail!(
            "{}: link type {}: lines show Ethernet, Linux cooked (SLL, SLL2) and raw IP \
             packets; write these to a file with -w (filters take any link type)",
            path.display(),
            link_type
        );
    }
    Ok(())
}

/// Reads the records until the end of the input, -c, the last file, a failed writer or a
/// stop, and hands the ones the filter passes to the writer, telling `progress` (SIGUSR1)
/// of each. A read error ends the input and is returned, for the counts to report after
/// what was read is written.
fn record_all(
    args: &CaptureArgs,
    reader: &mut CaptureReader,
    filter: Option<&Filter>,
    writer: &mut Writer,
    counts: &mut Counts,
    (stop, progress): (&AtomicBool, &ReadProgress),
) -> anyhow::Result<Option<CaptureError>> {
    let limit = args.count.unwrap_or(u64::MAX);
    let mut queued = 0u64;
    loop {
        let record = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => return Ok(None),
            Err(e) if cut_by_stop(&e, stop) => return Ok(None),
            Err(e) => return Ok(Some(e)),
        };
        counts.received += 1;
        progress.received.store(counts.received, Ordering::Relaxed);
        if let Some(f) = filter
            && !f.matches(record.data, record.orig_len)
        {
            counts.filtered_out += 1;
            continue;
        }
        let rec = writer.recorder_for(&record)?;
        // What the statistics at the end of a file count, should this packet start the next.
        rec.stats.received = counts.received - 1;
        match rec.record(record.ts_ns, record.data, record.orig_len) {
            Outcome::Queued => {
                counts.matched += 1;
                queued += 1;
            }
            Outcome::WriterBehind => counts.matched += 1,
            Outcome::FilesDone => {
                counts.after_stop += 1;
                return Ok(None);
            }
        }
        progress.matched.store(counts.matched, Ordering::Relaxed);
        if queued >= limit
            || rec.failed()
            || (counts.received.is_multiple_of(STOP_CHECK) && stop.load(Ordering::Relaxed))
        {
            return Ok(None);
        }
    }
}

/// The writer, started at the first packet that passes the filter.
struct Writer {
    sink: Option<Sink>,
    recorder: Option<Recorder>,
}

impl Writer {
    /// The first file is named for the first packet's time (-G names), so a file read
    /// twice is rotated the same way twice.
    fn recorder_for(&mut self, record: &Record) -> anyhow::Result<&mut Recorder> {
        if self.recorder.is_none() {
            let mut s = self.sink.take().context("output already started")?;
            // A pcapng file's one interface keeps its name.
            s.config.interface.name = record.interface_name.map(str::to_string);
            let recorder =
                Recorder::start(s.config, s.output, record.ts_ns).context("create the output")?;
            metrics::watch_writer(recorder.writer_progress());
            self.recorder = Some(recorder);
        }
        self.recorder.as_mut().context("output lost")
    }

    fn finish(self) -> anyhow::Result<Recorder> {
        match (self.recorder, self.sink) {
            (Some(r), _) => Ok(r),
            // No packet passed: still write a valid, empty file.
            (None, Some(s)) => {
                Ok(Recorder::start(s.config, s.output, now_ns()).context("create the output")?)
            }
            (None, None) => anyhow::bail!("output lost"),
        }
    }
}
