//! SIGINT, SIGTERM and SIGHUP: the first asks the tool to stop, a later one ends the process.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::Context;
use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// A signal this long after the first ends the process; closer ones are the same request
/// twice (GNU timeout signals its child and then the child's process group).
const FORCE_AFTER: Duration = Duration::from_millis(500);

/// The number of the SIGINT, SIGTERM or SIGHUP that came (0 before one did), set by the handler
/// itself: it is known the moment the stop flag is.
static SIGNAL: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// The flag `stop_flag` made, for set-up steps that take long (a port's buffer area) to
/// give up on.
static FLAG: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// The stop flag, once `stop_flag` made it.
pub fn flag() -> Option<Arc<AtomicBool>> {
    FLAG.get().cloned()
}

/// The signal that asked the tool to stop, if one did.
pub fn received() -> Option<i32> {
    match SIGNAL.get().map(|s| s.load(Ordering::Relaxed)) {
        None | Some(0) => None,
        Some(sig) => Some(sig as i32),
    }
}

/// A set-up step (a filter compiling in a child, say) that gave up because a signal asked the
/// tool to stop: the source of that step's own error, so [`exit_status`] finds it.
#[derive(Debug, thiserror::Error)]
#[error("a signal asked the tool to stop")]
pub struct Interrupted;

/// The exit status of a run that a signal ended before it could finish its set-up (`e` is
/// the set-up step giving up: a port opening, a filter compiling): the shell's for the
/// signal, 130, 143 or 129. None for any other error, which exits 1 as always.
pub fn exit_status(e: &anyhow::Error) -> Option<i32> {
    let gave_up = e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<wirespeed_port::PortError>(),
            Some(wirespeed_port::PortError::Cancelled(_))
        ) || cause.is::<Interrupted>()
    });
    received().filter(|_| gave_up).map(|sig| 128 + sig)
}

/// Set on SIGINT or SIGTERM: loops finish their burst, report and clean up. SIGHUP (the
/// terminal closed) too, as in tcpdump, so a capture file is whole; unless the tool was
/// started with hangups ignored (`nohup`), which it then keeps ignoring.
///
/// The signals are taken by a thread of their own and blocked in the thread that runs the
/// tool, so a long system call there (a BPF_PROG_RUN of a million frames) is never cut
/// short with EINTR: it finishes its chunk, and every frame sent is counted.
///
/// A second signal, half a second or more after the first, ends the process at once with
/// the shell's status for it (130, 143 or 129): the way out of a read that waits on an idle pipe
/// (`pcap:-`). Our XDP programs go with the process (they are attached by BPF links); a
/// file being written lacks its last blocks.
pub fn stop_flag() -> anyhow::Result<Arc<AtomicBool>> {
    if let Some(stop) = flag() {
        return Ok(stop);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let _ = FLAG.set(stop.clone());
    let which = SIGNAL.get_or_init(|| Arc::new(AtomicUsize::new(0))).clone();
    let mut stopping = vec![SIGINT, SIGTERM];
    if !ignored_when_started(SIGHUP) {
        stopping.push(SIGHUP);
    }
    // Set by the handler itself, so the flag never waits for the thread below.
    for &sig in &stopping {
        signal_hook::flag::register(sig, stop.clone()).context("install signal handler")?;
        signal_hook::flag::register_usize(sig, which.clone(), sig as usize)
            .context("install signal handler")?;
    }
    let mut signals =
        signal_hook::iterator::Signals::new(&stopping).context("install signal handler")?;
    // Spawned before the mask changes, so the signals stay unblocked in it alone.
    std::thread::Builder::new()
        .name("signals".to_string())
        .spawn(move || {
            let mut first: Option<Instant> = None;
            for sig in signals.forever() {
                match first {
                    None => first = Some(Instant::now()),
                    Some(at) if at.elapsed() >= FORCE_AFTER => std::process::exit(128 + sig),
                    Some(_) => {}
                }
            }
        })
        .context("start the signal thread")?;
    let mut set = SigSet::empty();
    for &sig in &stopping {
        set.add(Signal::try_from(sig).context("block signals")?);
    }
    pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None).context("block signals")?;
    Ok(stop)
}

/// Whether `sig` was ignored when the process started (`nohup` ignores SIGHUP), as the
/// kernel says in /proc/self/status (`SigIgn`, a hexadecimal mask with bit `sig - 1`). A
/// handler installed over an ignored signal would undo what the user asked for.
fn ignored_when_started(sig: i32) -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| ignored_in(&status, sig))
        .unwrap_or(false)
}

/// `sig`'s bit in a /proc status text's `SigIgn` mask (None when it has none).
fn ignored_in(status: &str, sig: i32) -> Option<bool> {
    let mask = status.lines().find_map(|l| l.strip_prefix("SigIgn:"))?;
    let mask = u64::from_str_radix(mask.trim(), 16).ok()?;
    let bit = u32::try_from(sig - 1).ok().filter(|&b| b < 64)?;
    Some(mask & (1 << bit) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ignored_mask_is_read_bit_by_signal() {
        // SIGHUP (1) and SIGPIPE (13) ignored.
        let status = "Name:\twirespeed\nSigBlk:\t0000000000000000\nSigIgn:\t0000000000001001\n";
        assert_eq!(ignored_in(status, SIGHUP), Some(true));
        assert_eq!(ignored_in(status, 13), Some(true));
        assert_eq!(ignored_in(status, SIGINT), Some(false));
        assert_eq!(ignored_in(status, 0), None);
        assert_eq!(ignored_in("Name:\tx\n", SIGHUP), None);
    }
}
