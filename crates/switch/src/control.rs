//! The control socket: a Unix stream socket (mode 0600) on which `wirespeed ctl` sends one
//! request a connection, as a JSON line, and reads one JSON line back. The server thread
//! hands each request to the bridge's control side ([`crate::Bridge::run`]), which applies it
//! under the lock the poll-mode threads take once a burst, and answers.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::bridge::Job;

/// Where `wirespeed switch` listens unless told otherwise.
pub const DEFAULT_CTL: &str = "/run/wirespeed/switch.sock";
/// How long a request may wait for the bridge's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(10);

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
pub fn listen(path: &Path, jobs: Sender<Job>) -> Result<ControlServer, ControlError> {
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
        .spawn(move || {
            for stream in listener.incoming().flatten() {
                serve(stream, &jobs);
            }
        })
        .map_err(io("start the control thread"))?;
    Ok(ControlServer {
        path: path.to_path_buf(),
    })
}

fn serve(stream: UnixStream, jobs: &Sender<Job>) {
    let _ = stream.set_read_timeout(Some(ANSWER_TIMEOUT));
    let mut line = String::new();
    let mut reader = BufReader::new(&stream);
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let response = match serde_json::from_str::<Request>(&line) {
        Err(e) => Response::error(format!("malformed request: {e}")),
        Ok(request) => {
            let (reply, answer) = mpsc::channel();
            if jobs.send(Job { request, reply }).is_err() {
                Response::error("the switch is stopping")
            } else {
                answer
                    .recv_timeout(ANSWER_TIMEOUT)
                    .unwrap_or_else(|_| Response::error("the switch did not answer in time"))
            }
        }
    };
    let mut out = serde_json::to_string(&response).unwrap_or_default();
    out.push('\n');
    let _ = (&stream).write_all(out.as_bytes());
}

/// Sends one request to the switch listening on `path` and returns its answer.
pub fn request(path: &Path, request: &Request) -> Result<Response, ControlError> {
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
    let _ = stream.set_read_timeout(Some(ANSWER_TIMEOUT + Duration::from_secs(2)));
    let mut line = serde_json::to_string(request).unwrap_or_default();
    line.push('\n');
    (&stream).write_all(line.as_bytes()).map_err(io("send"))?;
    let mut answer = String::new();
    BufReader::new(&stream)
        .read_line(&mut answer)
        .map_err(io("receive"))?;
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

    #[test]
    fn a_file_that_is_not_a_socket_is_left_alone() {
        let dir = Dir::new("file");
        let path = dir.0.join("switch.sock");
        std::fs::write(&path, "precious").unwrap();
        let (jobs, _) = mpsc::channel();
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
        let (jobs, _keep) = mpsc::channel();
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

    #[test]
    fn a_missing_directory_is_refused_not_made() {
        let dir = Dir::new("nodir");
        let missing = dir.0.join("typo");
        let (jobs, _keep) = mpsc::channel();
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
