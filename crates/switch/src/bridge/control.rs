//! The control socket: a Unix stream socket (mode 0600) on which `wirespeed ctl` sends one
//! request a connection, as a JSON line, and reads one JSON line back. Each connection has a
//! thread of its own, so a silent or slow client delays nobody but itself: it has
//! [`REQUEST_DEADLINE`] to send a request of at most [`MAX_REQUEST`] bytes. The request
//! goes to the bridge's control side ([`crate::Bridge::run`]) as a [`Job`], which applies it
//! under the lock the poll-mode threads take once a burst, and answers.
//!
//! An answer is the truth: a job the bridge has not taken within [`ANSWER_TIMEOUT`] is
//! withdrawn (the bridge then skips it) and the client told that nothing was done; a job
//! the bridge took is answered with what it did, however long that takes.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Where `wirespeed switch` listens unless told otherwise.
pub const DEFAULT_CTL: &str = "/run/wirespeed/switch.sock";
/// How long the bridge may take to pick a request up before it is withdrawn.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a client has to send its whole request, from when it connects.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// The largest request (an `add-flows` file of some 100,000 rules).
pub const MAX_REQUEST: usize = 16 << 20;
/// Connections served at once; one more is answered "busy" at once.
pub const MAX_CLIENTS: usize = 64;
/// How long `request` waits for an answer: the switch answers within ANSWER_TIMEOUT unless
/// it took the request, and then as soon as it has done it.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(60);

/// A control request and where its answer goes. The bridge runs it only if [`Job::take`]
/// says so: the client's side may have withdrawn it, and then told the client so.
pub struct Job {
    pub request: Request,
    pub reply: Sender<Response>,
    claim: Arc<AtomicU8>,
}

const PENDING: u8 = 0;
const TAKEN: u8 = 1;
const WITHDRAWN: u8 = 2;

impl Job {
    pub fn new(request: Request, reply: Sender<Response>) -> Job {
        Job {
            request,
            reply,
            claim: Arc::new(AtomicU8::new(PENDING)),
        }
    }

    /// True when the bridge may run the job (and must answer it): false when it was
    /// withdrawn, its client told that nothing was done.
    pub fn take(&self) -> bool {
        self.claim
            .compare_exchange(PENDING, TAKEN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Withdraws a job the bridge has not taken; false when it already has.
    fn withdraw(claim: &AtomicU8) -> bool {
        claim
            .compare_exchange(PENDING, WITHDRAWN, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Request {
    pub command: String,
    pub args: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Response {
    pub ok: bool,
    /// What the command prints (dump-flows lines...), or the error message.
    pub output: String,
}

impl Response {
    pub fn ok(output: impl Into<String>) -> Response {
        Response {
            ok: true,
            output: output.into(),
        }
    }

    pub fn error(message: impl Into<String>) -> Response {
        Response {
            ok: false,
            output: message.into(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("{0}: another wirespeed switch is listening there (pass --ctl PATH for a second one)")]
    InUse(PathBuf),
    #[error("{path}: {what}: {source}")]
    Io {
        path: PathBuf,
        what: &'static str,
        source: std::io::Error,
    },
    #[error("{0}: no switch is listening there (is `wirespeed switch` running? pass --ctl PATH)")]
    NotListening(PathBuf),
    #[error("{0}: permission denied (the control socket is mode 0600: run as the switch's user)")]
    Permission(PathBuf),
    #[error("{0}: not a wirespeed control socket ({1})")]
    NotOurs(PathBuf, String),
    #[error("{0}: exists and is not a socket; refusing to replace it (pass --ctl PATH)")]
    NotASocket(PathBuf),
    #[error("{0}: no such directory for the control socket (make it first)")]
    NoDirectory(PathBuf),
    #[error(
        "{0}: the switch did not answer within {1} s (stopped, or busy with a large change); \
         a change asked for may still take effect (look with dump-flows)"
    )]
    NoAnswer(PathBuf, f64),
    #[error(
        "{0}: the switch closed the connection without answering (stopping?); a change asked \
         for may or may not have taken effect (look with dump-flows)"
    )]
    ClosedWithoutAnswer(PathBuf),
}

/// The listening socket; removed when dropped.
pub struct ControlServer {
    path: PathBuf,
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Listens on `path` and forwards each request to `jobs`. A stale socket file left by a
/// switch that died is replaced; a live one is refused, and so is anything that is not a
/// socket. The socket appears at `path` already mode 0600: it is bound in a private
/// directory, restricted, then linked into place (link, unlike rename, never replaces a
/// file).
pub fn listen<W: From<Job> + Send + 'static>(
    path: &Path,
    jobs: Sender<W>,
) -> Result<ControlServer, ControlError> {
    let io = |what| {
        move |source| ControlError::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    // The default's directory is ours to make (/run is emptied at boot); any other must
    // exist, so a mistyped path does not leave directories behind.
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if Path::new(DEFAULT_CTL).parent() == Some(dir) {
            std::fs::create_dir_all(dir).map_err(io("create directory"))?;
        } else if !dir.is_dir() {
            return Err(ControlError::NoDirectory(dir.to_path_buf()));
        }
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(ControlError::NotASocket(path.to_path_buf()));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(ControlError::InUse(path.to_path_buf()));
        }
        std::fs::remove_file(path).map_err(io("remove stale socket"))?;
    }
    // Bound inside a directory only we can search, so nobody reaches it before the chmod.
    let name = path
        .file_name()
        .map_or("ctl".into(), |n| n.to_string_lossy());
    let private = path.with_file_name(format!(".{name}.{}", std::process::id()));
    let temporary = private.join("socket");
    let _ = std::fs::remove_file(&temporary);
    let _ = std::fs::remove_dir(&private);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&private)
        .map_err(io("create a private directory"))?;
    let placed = UnixListener::bind(&temporary)
        .map_err(io("bind"))
        .and_then(|listener| {
            std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
                .map_err(io("chmod 0600"))?;
            std::fs::hard_link(&temporary, path).map_err(|e| match e.kind() {
                std::io::ErrorKind::AlreadyExists => ControlError::InUse(path.to_path_buf()),
                _ => io("link into place")(e),
            })?;
            Ok(listener)
        });
    let _ = std::fs::remove_file(&temporary);
    let _ = std::fs::remove_dir(&private);
    let listener = placed?;
    std::thread::Builder::new()
        .name("control".to_string())
        .spawn(move || accept(&listener, &jobs))
        .map_err(io("start the control thread"))?;
    Ok(ControlServer {
        path: path.to_path_buf(),
    })
}

/// Serves each connection on a thread of its own, up to MAX_CLIENTS at once.
fn accept<W: From<Job> + Send + 'static>(listener: &UnixListener, jobs: &Sender<W>) {
    let open = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming().flatten() {
        if open.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
            open.fetch_sub(1, Ordering::AcqRel);
            answer(
                &stream,
                &Response::error(format!(
                    "busy: {MAX_CLIENTS} control connections are open; try again"
                )),
            );
            continue;
        }
        let (jobs, open_here) = (jobs.clone(), open.clone());
        let spawned = std::thread::Builder::new()
            .name("control-client".to_string())
            .spawn(move || {
                serve(&stream, &jobs);
                open_here.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            open.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Why a request could not be read.
#[derive(Debug, PartialEq, Eq)]
enum ReadError {
    TooLarge,
    Late,
    Closed,
}

/// Reads one request line, all of it within `deadline` and at most `limit` bytes.
fn read_request(stream: &UnixStream, deadline: Instant, limit: usize) -> Result<String, ReadError> {
    let mut line = Vec::new();
    let mut chunk = [0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(ReadError::Late);
        }
        let _ = stream.set_read_timeout(Some(left));
        let n = match (&*stream).read(&mut chunk) {
            Ok(0) => return Err(ReadError::Closed),
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(ReadError::Late);
            }
            Err(_) => return Err(ReadError::Closed),
        };
        let end = chunk[..n].iter().position(|&b| b == b'\n');
        line.extend_from_slice(&chunk[..end.unwrap_or(n)]);
        if line.len() > limit {
            return Err(ReadError::TooLarge);
        }
        if end.is_some() {
            return Ok(String::from_utf8_lossy(&line).into_owned());
        }
    }
}

fn serve<W: From<Job>>(stream: &UnixStream, jobs: &Sender<W>) {
    serve_with(stream, jobs, REQUEST_DEADLINE, ANSWER_TIMEOUT, MAX_REQUEST);
}

fn serve_with<W: From<Job>>(
    stream: &UnixStream,
    jobs: &Sender<W>,
    deadline: Duration,
    answer_timeout: Duration,
    limit: usize,
) {
    let line = match read_request(stream, Instant::now() + deadline, limit) {
        Ok(line) => line,
        Err(ReadError::Closed) => return,
        Err(ReadError::TooLarge) => {
            return answer(
                stream,
                &Response::error(format!(
                    "request larger than {limit} bytes: nothing was done"
                )),
            );
        }
        Err(ReadError::Late) => {
            return answer(
                stream,
                &Response::error(format!(
                    "request not complete within {} s: nothing was done",
                    deadline.as_secs_f64()
                )),
            );
        }
    };
    let response = match serde_json::from_str::<Request>(&line) {
        Err(e) => Response::error(format!("malformed request: {e}")),
        Ok(request) => {
            let (reply, answered) = mpsc::channel();
            let job = Job::new(request, reply);
            let claim = job.claim.clone();
            if jobs.send(W::from(job)).is_err() {
                Response::error("the switch is stopping: nothing was done")
            } else {
                match answered.recv_timeout(answer_timeout) {
                    Ok(response) => response,
                    Err(RecvTimeoutError::Timeout) if Job::withdraw(&claim) => {
                        Response::error(format!(
                            "the switch did not take the request within {} s: nothing was done",
                            answer_timeout.as_secs_f64()
                        ))
                    }
                    // Taken: it is being done, and the answer says what was.
                    Err(RecvTimeoutError::Timeout) => answered.recv().unwrap_or_else(|_| {
                        Response::error("the switch stopped before it answered")
                    }),
                    Err(RecvTimeoutError::Disconnected) if Job::withdraw(&claim) => {
                        Response::error("the switch is stopping: nothing was done")
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        Response::error("the switch stopped before it answered")
                    }
                }
            }
        }
    };
    answer(stream, &response);
}

/// Writes `response` as one line; a client that does not read it within a second is left.
fn answer(stream: &UnixStream, response: &Response) {
    let mut out = serde_json::to_string(response).unwrap_or_default();
    out.push('\n');
    let _ = stream.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = (&*stream).write_all(out.as_bytes());
}

/// Sends one request to the switch listening on `path` and returns its answer, waiting for
/// it a minute at most.
pub fn request(path: &Path, request: &Request) -> Result<Response, ControlError> {
    request_within(path, request, CLIENT_TIMEOUT)
}

/// [`request`], waiting `timeout` at most for the answer.
pub fn request_within(
    path: &Path,
    request: &Request,
    timeout: Duration,
) -> Result<Response, ControlError> {
    if std::fs::metadata(path).is_ok_and(|meta| !meta.file_type().is_socket()) {
        return Err(ControlError::NotOurs(
            path.to_path_buf(),
            "not a socket".to_string(),
        ));
    }
    let stream = UnixStream::connect(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
            ControlError::NotListening(path.to_path_buf())
        }
        std::io::ErrorKind::PermissionDenied => ControlError::Permission(path.to_path_buf()),
        _ => ControlError::NotOurs(path.to_path_buf(), e.to_string()),
    })?;
    let io = |what| {
        move |source| ControlError::Io {
            path: path.to_path_buf(),
            what,
            source,
        }
    };
    // At least a millisecond: a zero timeout would be none.
    let timeout = timeout.max(Duration::from_millis(1));
    let _ = stream.set_read_timeout(Some(timeout));
    // A stopped switch reads nothing: a large request would fill the socket and wait.
    let _ = stream.set_write_timeout(Some(timeout));
    let mut line = serde_json::to_string(request).unwrap_or_default();
    line.push('\n');
    // A switch that refuses a request (too large) answers before it has read it all, and
    // closes: its answer is still there to read.
    let sent = (&stream).write_all(line.as_bytes());
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                ControlError::NoAnswer(path.to_path_buf(), timeout.as_secs_f64())
            }
            _ => io("receive")(e),
        })?;
    if answer.is_empty() {
        sent.map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => {
                ControlError::NoAnswer(path.to_path_buf(), timeout.as_secs_f64())
            }
            _ => io("send")(e),
        })?;
        // Sent whole, and the end of the stream came back: a switch that took the request
        // and stopped (or died) before it answered.
        return Err(ControlError::ClosedWithoutAnswer(path.to_path_buf()));
    }
    serde_json::from_str(&answer)
        .map_err(|e| ControlError::NotOurs(path.to_path_buf(), format!("answered {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh directory for one test, removed at the end.
    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Dir {
            let dir = std::env::temp_dir()
                .join(format!("wirespeed-control-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// A switch that reads the request and closes without answering (it stopped meanwhile)
    /// is said so: the request may have taken effect. (It was "not a wirespeed control
    /// socket", for the empty answer that would not parse.)
    #[test]
    fn a_switch_that_closes_without_answering_is_said_so() {
        let dir = Dir::new("closed");
        let path = dir.0.join("switch.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let switch = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut conn), &mut line)
                .unwrap();
        });
        let show = Request {
            command: "add-flow".to_string(),
            args: vec!["actions=drop".to_string()],
        };
        let err = request(&path, &show).unwrap_err();
        switch.join().unwrap();
        assert!(
            matches!(err, ControlError::ClosedWithoutAnswer(_))
                && err.to_string().contains("may or may not have taken effect"),
            "{err}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_socket_is_left_alone() {
        let dir = Dir::new("file");
        let path = dir.0.join("switch.sock");
        std::fs::write(&path, "precious").unwrap();
        let (jobs, _) = mpsc::channel::<Job>();
        let err = listen(&path, jobs)
            .err()
            .expect("a regular file was replaced");
        assert!(matches!(err, ControlError::NotASocket(_)), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");
        let show = Request {
            command: "show".to_string(),
            args: vec![],
        };
        let err = request(&path, &show).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("not a wirespeed control socket (not a socket)"),
            "{err}"
        );
    }

    #[test]
    fn the_socket_is_0600_live_ones_are_refused_stale_ones_replaced() {
        let dir = Dir::new("socket");
        let path = dir.0.join("switch.sock");
        drop(UnixListener::bind(&path).unwrap()); // a dead switch's socket file
        let (jobs, _keep) = mpsc::channel::<Job>();
        let server = listen(&path, jobs.clone()).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_socket());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(
            entries(&dir.0),
            ["switch.sock"],
            "the temporary name is gone"
        );
        let err = listen(&path, jobs)
            .err()
            .expect("a live socket was replaced");
        assert!(matches!(err, ControlError::InUse(_)), "{err}");
        drop(server);
        assert!(entries(&dir.0).is_empty(), "the socket is removed at exit");
    }

    fn show() -> Request {
        Request {
            command: "show".to_string(),
            args: vec![],
        }
    }

    /// A server thread for one connection with the given limits, and the client's end.
    fn one_connection(
        deadline: Duration,
        answer_timeout: Duration,
        limit: usize,
    ) -> (UnixStream, mpsc::Receiver<Job>, std::thread::JoinHandle<()>) {
        let (client, server) = UnixStream::pair().unwrap();
        let (jobs, inbox) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            serve_with(&server, &jobs, deadline, answer_timeout, limit);
        });
        (client, inbox, thread)
    }

    fn answer_of(client: &UnixStream) -> Response {
        let mut line = String::new();
        BufReader::new(client).read_line(&mut line).unwrap();
        serde_json::from_str(&line).unwrap()
    }

    fn send(client: &UnixStream, request: &Request) {
        let line = serde_json::to_string(request).unwrap() + "\n";
        (&*client).write_all(line.as_bytes()).unwrap();
    }

    #[test]
    fn a_job_the_bridge_did_not_take_in_time_is_withdrawn_and_said_undone() {
        let (client, inbox, thread) =
            one_connection(Duration::from_secs(5), Duration::from_millis(200), 1 << 20);
        send(&client, &show());
        let answer = answer_of(&client);
        assert_eq!(
            answer,
            Response::error("the switch did not take the request within 0.2 s: nothing was done")
        );
        thread.join().unwrap();
        let job = inbox.try_recv().expect("the job was queued");
        assert!(!job.take(), "a withdrawn job was run");
    }

    #[test]
    fn a_job_taken_late_is_answered_with_what_it_did() {
        let (client, inbox, thread) =
            one_connection(Duration::from_secs(5), Duration::from_millis(200), 1 << 20);
        send(&client, &show());
        let job = inbox.recv().unwrap();
        assert!(job.take());
        // Longer than the answer timeout: the client still gets the real answer.
        std::thread::sleep(Duration::from_millis(400));
        job.reply.send(Response::ok("done")).unwrap();
        assert_eq!(answer_of(&client), Response::ok("done"));
        thread.join().unwrap();
    }

    #[test]
    fn a_client_that_dribbles_is_cut_off_at_the_deadline() {
        let (client, inbox, thread) =
            one_connection(Duration::from_millis(300), Duration::from_secs(1), 1 << 20);
        let started = Instant::now();
        for byte in b"{\"comm" {
            (&client).write_all(&[*byte]).unwrap();
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_eq!(
            answer_of(&client),
            Response::error("request not complete within 0.3 s: nothing was done")
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        thread.join().unwrap();
        assert!(inbox.try_recv().is_err(), "a partial request became a job");
    }

    #[test]
    fn a_request_over_the_limit_is_refused_unread() {
        let (client, inbox, thread) =
            one_connection(Duration::from_secs(5), Duration::from_secs(1), 1024);
        let big = Request {
            command: "add-flow".to_string(),
            args: vec!["x".repeat(4096)],
        };
        let line = serde_json::to_string(&big).unwrap() + "\n";
        let _ = (&client).write_all(line.as_bytes());
        assert_eq!(
            answer_of(&client),
            Response::error("request larger than 1024 bytes: nothing was done")
        );
        thread.join().unwrap();
        assert!(inbox.try_recv().is_err());
    }

    #[test]
    fn silent_clients_do_not_delay_another() {
        let dir = Dir::new("silent");
        let path = dir.0.join("switch.sock");
        let (jobs, inbox) = mpsc::channel::<Job>();
        let _server = listen(&path, jobs).unwrap();
        std::thread::spawn(move || {
            for job in inbox {
                if job.take() {
                    let _ = job.reply.send(Response::ok("answered"));
                }
            }
        });
        let silent: Vec<UnixStream> = (0..5)
            .map(|_| UnixStream::connect(&path).unwrap())
            .collect();
        let started = Instant::now();
        let answer = request(&path, &show()).unwrap();
        assert_eq!(answer, Response::ok("answered"));
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{:?}",
            started.elapsed()
        );
        drop(silent);
    }

    #[test]
    fn a_missing_directory_is_refused_not_made() {
        let dir = Dir::new("nodir");
        let missing = dir.0.join("typo");
        let (jobs, _keep) = mpsc::channel::<Job>();
        let err = listen(&missing.join("switch.sock"), jobs)
            .err()
            .expect("listened in a directory that does not exist");
        assert_eq!(
            err.to_string(),
            format!(
                "{}: no such directory for the control socket (make it first)",
                missing.display()
            )
        );
        assert!(!missing.exists(), "the directory was made");
    }
}
