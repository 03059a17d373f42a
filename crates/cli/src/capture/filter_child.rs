//! Filters compiled in a child process. libpcap's optimiser can run for ever, growing as it
//! goes, on some expressions (500 `or port N` terms never finish; tcpdump hangs the same
//! way), and a call into C cannot be interrupted: a signal must still end us promptly. So a
//! child, this program run again with a hidden command, compiles and prints the program;
//! we wait at most [`COMPILE_LIMIT`], looking at the stop flag as we do, and kill the child
//! if either says so.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use wirespeed_capture::filter::{Filter, FilterError};

use crate::run::signals::Interrupted;

/// How long libpcap may take to compile a filter.
pub const COMPILE_LIMIT: Duration = Duration::from_secs(10);
/// How often the wait looks at the child and the stop flag.
const LOOK_EVERY: Duration = Duration::from_millis(20);
/// The hidden command the child runs.
pub const CHILD_COMMAND: &str = "compile-filter";

/// What the filter is compiled for.
pub enum Target<'a> {
    /// Packets of a capture file's (or our ports') link type, VLAN tags in the bytes.
    File { link_type: u16 },
    /// The kernel's socket filter on `iface` (VLAN tags in metadata).
    Kernel { iface: &'a str },
}

#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    /// libpcap refused the expression.
    #[error("{0}")]
    Refused(FilterError),
    #[error(
        "libpcap did not finish compiling the filter within {} s (its optimiser may never \
         finish on it; tcpdump would wait for ever): fewer terms, ranges (portrange 1-500) or \
         net masks compile quickly",
        COMPILE_LIMIT.as_secs()
    )]
    TooLong,
    /// A signal came while it compiled.
    #[error("stopped while compiling the filter")]
    Stopped(#[source] Interrupted),
    #[error("compile the filter: {0}")]
    Child(String),
}

/// Compiles `expression` for `target` in a child process; see the module's comment.
pub fn compile(
    expression: &str,
    target: &Target<'_>,
    stop: &AtomicBool,
) -> Result<Filter, CompileError> {
    let me = std::env::current_exe().map_err(|e| CompileError::Child(e.to_string()))?;
    let mut command = Command::new(me);
    command
        .arg(CHILD_COMMAND)
        .args(["--parent", &std::process::id().to_string()]);
    match target {
        Target::File { link_type } => command.args(["--link-type", &link_type.to_string()]),
        Target::Kernel { iface } => command.args(["--kernel", iface]),
    };
    let mut child = command
        .arg("--")
        .arg(expression)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CompileError::Child(e.to_string()))?;
    // Read as it comes: a long program fills a pipe's buffer before the child exits.
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + COMPILE_LIMIT;
    let status = loop {
        if stop.load(Ordering::Relaxed) {
            kill(&mut child);
            return Err(CompileError::Stopped(Interrupted));
        }
        if Instant::now() >= deadline {
            kill(&mut child);
            return Err(CompileError::TooLong);
        }
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => std::thread::sleep(LOOK_EVERY),
            Err(e) => {
                kill(&mut child);
                return Err(CompileError::Child(e.to_string()));
            }
        }
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    match status.code() {
        Some(0) => Filter::from_text(expression, &out).map_err(CompileError::Refused),
        Some(EXIT_REFUSED) => Err(CompileError::Refused(FilterError {
            expression: expression.to_string(),
            message: err.trim_end().to_string(),
        })),
        _ => Err(CompileError::Child(format!("{status}: {}", err.trim_end()))),
    }
}

fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut text);
        }
        text
    })
}

fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// The child's exit status when libpcap refused the expression (its message on stderr).
const EXIT_REFUSED: i32 = 2;
/// The child's exit status when its parent was gone before it started.
const EXIT_ORPHAN: i32 = 3;

/// The hidden command's options: what `compile` runs in the child.
#[derive(Debug, Args)]
pub struct ChildArgs {
    /// The process waiting for the program: the child ends with it.
    #[arg(long)]
    parent: i32,
    #[arg(long)]
    link_type: Option<u16>,
    #[arg(long)]
    kernel: Option<String>,
    expression: String,
}

/// The child: compiles, prints the program (or libpcap's message, exit 2). It dies with its
/// parent (killed outright, say), and of its own CPU limit, whatever libpcap is doing.
pub fn child_main(args: ChildArgs) -> ! {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if nix::unistd::getppid().as_raw() != args.parent {
        std::process::exit(EXIT_ORPHAN);
    }
    let cpu = COMPILE_LIMIT.as_secs() + 5;
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CPU, cpu, cpu);
    let compiled = match (&args.kernel, args.link_type) {
        (Some(iface), _) => Filter::compile_for_kernel(&args.expression, iface),
        (None, link_type) => Filter::compile(&args.expression, link_type.unwrap_or(1)),
    };
    match compiled {
        Ok(filter) => {
            print!("{}", filter.to_text());
            std::process::exit(0)
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(EXIT_REFUSED)
        }
    }
}
