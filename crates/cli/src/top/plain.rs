//! `top` when standard output is not a terminal: a block of lines an update (or a JSON
//! object a line, `--json`), for logs and scripts.

use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::mpsc::RecvTimeoutError;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Serialize;

use super::Watch;
use super::model::{Update, rates};
use super::scrape::Scrape;
use super::tables::{tables, to_lines};

/// How often the loop looks at the stop flag while it waits for a reading.
const STOP_CHECK: Duration = Duration::from_millis(100);

/// One `--json` line.
#[derive(Serialize)]
struct JsonUpdate<'a> {
    source: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    #[serde(flatten)]
    update: &'a Update,
}

pub fn run(watch: Watch, first: Scrape, json: bool) -> anyhow::Result<()> {
    let mut before = first;
    let mut updates = 0;
    let mut out = std::io::stdout().lock();
    while !watch.stop.load(Ordering::Relaxed) {
        let now = match watch.readings.recv_timeout(STOP_CHECK) {
            Ok(Ok(now)) => now,
            Ok(Err(e)) => {
                // The tool may come back (a restart): say so and keep trying. With --count
                // a failed reading is one of the updates asked for, so a script waiting for
                // them ends, with the failure, when the tool is gone.
                updates += 1;
                if watch.count.is_some_and(|count| updates >= count) {
                    bail!("{e}");
                }
                eprintln!("wirespeed top: {e}");
                continue;
            }
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => bail!("the scrape thread ended"),
        };
        let update = rates(&before, &now, watch.detail.queues);
        let text = if json {
            let line = JsonUpdate {
                source: &watch.source,
                note: now.no_metrics.as_deref(),
                update: &update,
            };
            serde_json::to_string(&line).context("encode an update")? + "\n"
        } else {
            block(&watch, &update, now.no_metrics.as_deref())
        };
        // `top | head` closes the pipe early: not an error.
        match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            result => result.context("write to standard output")?,
        }
        before = now;
        updates += 1;
        if watch.count.is_some_and(|count| updates >= count) {
            break;
        }
    }
    Ok(())
}

/// One update's lines: a heading, the tables, a blank line.
fn block(watch: &Watch, update: &Update, note: Option<&str>) -> String {
    let mut lines = vec![format!(
        "wirespeed top: {}, over {:.2} s",
        watch.source, update.interval_seconds
    )];
    if let Some(note) = note {
        lines.push(format!("({note})"));
    }
    for table in tables(update, watch.detail) {
        lines.extend(to_lines(&table));
    }
    lines.push(String::new());
    lines.join("\n") + "\n"
}
