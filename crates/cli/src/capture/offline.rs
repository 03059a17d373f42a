//! `-r FILE`: filter and rewrite (or print) a capture file. There is no wire to keep up with,
//! so here the loop waits for the writer instead of dropping.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Context;
use wirespeed_capture::CaptureReader;
use wirespeed_capture::recorder::{Outcome, Recorder};
use wirespeed_capture::rotate::Rotation;
use wirespeed_capture::write::Interface;

use super::counts::Counts;
use super::{CaptureArgs, compile_or_exit, now_ns};

/// Records between looks at the stop flag.
const STOP_CHECK: u64 = 1024;

pub fn run(
    args: &CaptureArgs,
    path: &Path,
    rotation: Rotation,
    stop: &AtomicBool,
) -> anyhow::Result<Counts> {
    let mut reader = CaptureReader::open(path)?;
    let expression = args.expression();
    let filter = compile_or_exit(expression.as_deref(), reader.link_type(), false);
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
    let limit = args.count.unwrap_or(u64::MAX);
    let mut recorder: Option<Recorder> = None;
    let mut sink = Some(args.recorder(rotation, interface, true));
    let mut queued = 0u64;
    let mut read_error = None;
    loop {
        let record = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                read_error = Some(e);
                break;
            }
        };
        counts.received += 1;
        if let Some(f) = &filter
            && !f.matches(record.data, record.orig_len)
        {
            counts.filtered_out += 1;
            continue;
        }
        // The first file is named for the first packet's time (-G names), so a file read
        // twice is rotated the same way twice.
        if recorder.is_none() {
            let s = sink.take().context("output already started")?;
            recorder = Some(
                Recorder::start(s.config, s.output, record.ts_ns).context("create the output")?,
            );
        }
        let Some(rec) = recorder.as_mut() else { break };
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
                break;
            }
        }
        if queued >= limit
            || rec.failed()
            || (counts.received.is_multiple_of(STOP_CHECK) && stop.load(Ordering::Relaxed))
        {
            break;
        }
    }
    let mut recorder = match (recorder, sink) {
        (Some(r), _) => r,
        // No packet passed: still write a valid, empty file.
        (None, Some(s)) => {
            Recorder::start(s.config, s.output, now_ns()).context("create the output")?
        }
        (None, None) => anyhow::bail!("output lost"),
    };
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
