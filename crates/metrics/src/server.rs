//! The `/metrics` listener: a thread that accepts, and one a connection (at most
//! [`MAX_CLIENTS`] at once), each answering one HTTP/1.1 request with what the tool's render
//! function writes at that moment. A client has 5 s (`CLIENT_TIMEOUT`) for its whole request
//! and answer, so one that connects and dawdles holds up no scrape but its own.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The port alone, or `:PORT`, listens on loopback.
pub const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
/// Longest request head read (request line and headers).
const MAX_HEAD: usize = 8192;
/// A client whose request (line and headers) has not all come, and its answer gone, in this
/// long is dropped.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections answered at once at most; another is told 503 at once.
pub const MAX_CLIENTS: usize = 32;
/// What `/metrics` says it holds: Prometheus' text format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("'{0}' is not an address to listen on: give PORT (loopback), HOST:PORT or [IPv6]:PORT")]
    BadAddress(String),
    #[error("'{0}': no such host")]
    UnknownHost(String),
    #[error("listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
}

/// `--metrics`: `PORT` or `:PORT` on loopback, `HOST:PORT`, `[IPv6]:PORT`.
pub fn listen_address(text: &str) -> Result<SocketAddr, MetricsError> {
    let bad = || MetricsError::BadAddress(text.to_string());
    let port_only = text.strip_prefix(':').unwrap_or(text);
    if let Ok(port) = port_only.parse::<u16>() {
        return Ok(SocketAddr::new(LOOPBACK, port));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || port.parse::<u16>().is_err() {
        return Err(bad());
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .ok_or_else(|| MetricsError::UnknownHost(host.to_string()))
}

/// A running listener; dropping it stops the thread.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// A bound listener not yet answering: a tool binds before it opens its ports (a port in
/// use refuses the start), and serves once it has figures to show.
pub struct MetricsListener {
    listener: TcpListener,
    addr: SocketAddr,
}

impl MetricsListener {
    pub fn bind(addr: SocketAddr) -> Result<MetricsListener, MetricsError> {
        let listener =
            TcpListener::bind(addr).map_err(|source| MetricsError::Listen { addr, source })?;
        let addr = listener
            .local_addr()
            .map_err(|source| MetricsError::Listen { addr, source })?;
        Ok(MetricsListener { listener, addr })
    }

    /// Where it listens (the port the kernel chose, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Answers each `GET /metrics` with `render()`, each connection on a thread of its own.
    pub fn serve(
        self,
        render: impl Fn() -> String + Send + Sync + 'static,
    ) -> Result<MetricsServer, MetricsError> {
        let MetricsListener { listener, addr } = self;
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let render = Arc::new(render);
        let open = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::Builder::new()
            .name("metrics".to_string())
            .spawn(move || {
                for stream in listener.incoming() {
                    if stopping.load(Ordering::Relaxed) {
                        break;
                    }
                    // A client that went away or spoke nonsense is its own problem.
                    if let Ok(stream) = stream {
                        answer_apart(stream, &render, &open);
                    }
                }
            })
            .map_err(|source| MetricsError::Listen { addr, source })?;
        Ok(MetricsServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }
}

impl MetricsServer {
    /// Binds `addr` and answers each `GET /metrics` with `render()`.
    pub fn start(
        addr: SocketAddr,
        render: impl Fn() -> String + Send + Sync + 'static,
    ) -> Result<MetricsServer, MetricsError> {
        MetricsListener::bind(addr)?.serve(render)
    }

    /// Where it listens (the port the kernel chose, for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // The thread waits in accept(): a connection of our own wakes it.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => LOOPBACK,
                SocketAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::LOCALHOST),
            });
        }
        if TcpStream::connect_timeout(&wake, Duration::from_secs(1)).is_ok()
            && let Some(thread) = self.thread.take()
        {
            let _ = thread.join();
        }
    }
}

/// Answers `stream` on a thread of its own, or says 503 at once when [`MAX_CLIENTS`] are
/// being answered (`open` counts them).
fn answer_apart<R>(stream: TcpStream, render: &Arc<R>, open: &Arc<AtomicUsize>)
where
    R: Fn() -> String + Send + Sync + 'static,
{
    if open.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
        open.fetch_sub(1, Ordering::AcqRel);
        let busy = format!("busy: {MAX_CLIENTS} connections are being answered; try again\n");
        // The request's bytes are taken first: closing on unread bytes would reset the
        // connection, the answer lost with it.
        let mut stream = stream;
        drain(&mut stream, Duration::from_millis(10));
        // On the accepting thread: some 60 ms at most, whatever the client does.
        let deadline = Instant::now() + Duration::from_millis(40);
        let _ = respond(
            stream,
            "503 Service Unavailable",
            "GET",
            TEXT,
            &busy,
            deadline,
            10,
        );
        return;
    }
    let (render, counted) = (render.clone(), open.clone());
    let spawned = std::thread::Builder::new()
        .name("metrics-client".to_string())
        .spawn(move || {
            // Counted out however the answer ends, a render that panics included.
            let _open = Counted(counted);
            let _ = answer(stream, &*render);
        });
    if spawned.is_err() {
        open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One connection being answered, counted out when dropped.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

const TEXT: &str = "text/plain; charset=utf-8";

/// Reads one request and answers it: `/metrics` with the figures, `/` with a pointer to
/// them, anything else 404 (405 for a method other than GET or HEAD; 431 for a head
/// longer than [`MAX_HEAD`]).
fn answer(mut stream: TcpStream, render: &impl Fn() -> String) -> std::io::Result<()> {
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let Some(head) = read_head(&mut stream, deadline)? else {
        let body = format!("the request line and headers are over {MAX_HEAD} bytes\n");
        return respond(
            stream,
            "431 Request Header Fields Too Large",
            "GET",
            TEXT,
            &body,
            deadline,
            CLOSE_WAIT_MS,
        );
    };
    let request_line = head.lines().next().unwrap_or("");
    let mut words = request_line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    let (status, content_type, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            CONTENT_TYPE,
            render() + &crate::process::process_figures(),
        ),
        ("GET" | "HEAD", "/") => (
            "200 OK",
            TEXT,
            "wirespeed: the metrics are at /metrics\n".to_string(),
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            TEXT,
            "not found: the metrics are at /metrics\n".to_string(),
        ),
        _ => ("405 Method Not Allowed", TEXT, "only GET\n".to_string()),
    };
    respond(
        stream,
        status,
        method,
        content_type,
        &body,
        deadline,
        CLOSE_WAIT_MS,
    )
}

/// How long a client's thread waits for the client to close after the answer, in ms.
const CLOSE_WAIT_MS: u64 = 100;

/// Writes the answer by `deadline` (the whole of it, not each write) and closes (HEAD:
/// without the body), waiting up to `close_wait_ms` for the client to close first: closing
/// on bytes it sent and we did not read would reset the connection, the answer lost with it.
fn respond(
    mut stream: TcpStream,
    status: &str,
    method: &str,
    content_type: &str,
    body: &str,
    deadline: Instant,
    close_wait_ms: u64,
) -> std::io::Result<()> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    );
    if method != "HEAD" {
        out.push_str(body);
    }
    let mut left = out.as_bytes();
    while !left.is_empty() {
        let time = deadline.saturating_duration_since(Instant::now());
        if time.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_write_timeout(Some(time))?;
        match stream.write(left)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => left = &left[n..],
        }
    }
    stream.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    drain(&mut stream, Duration::from_millis(close_wait_ms));
    Ok(())
}

/// Reads and drops what the client has sent, for at most `time`, until it closes.
fn drain(stream: &mut TcpStream, time: Duration) {
    let until = Instant::now() + time;
    let mut buf = [0u8; 4096];
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// The request line and headers, up to the blank line (the body, if any, is not read), as
/// they came by `deadline`; None when they run past [`MAX_HEAD`] bytes. Each read looks for
/// the blank line only in what it added (and the three bytes before): a client sending its
/// head a byte at a time made each read scan it all again.
fn read_head(stream: &mut TcpStream, deadline: Instant) -> std::io::Result<Option<String>> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    let mut scanned: usize = 0;
    loop {
        let new = &head[scanned.saturating_sub(3)..];
        if new.windows(4).any(|w| w == b"\r\n\r\n") || new.windows(2).any(|w| w == b"\n\n") {
            break;
        }
        scanned = head.len();
        if head.len() > MAX_HEAD {
            return Ok(None);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        let n = stream.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    Ok(Some(String::from_utf8_lossy(&head).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(request.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    #[test]
    fn answers_metrics_and_refuses_the_rest() {
        let server =
            MetricsServer::start("127.0.0.1:0".parse().unwrap(), || "a_total 1\n".to_string())
                .unwrap();
        let addr = server.local_addr();
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            ok.contains("Content-Type: text/plain; version=0.0.4"),
            "{ok}"
        );
        // The tool's figures, then the process's own.
        let (head, body) = ok.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("Content-Length: {}\r\n", body.len())),
            "{ok}"
        );
        assert!(
            body.starts_with("a_total 1\n# HELP process_cpu_seconds_total"),
            "{ok}"
        );
        let missing = get(addr, "GET /nothing HTTP/1.0\r\n\r\n");
        assert!(missing.starts_with("HTTP/1.1 404 Not Found"), "{missing}");
        let post = get(addr, "POST /metrics HTTP/1.0\r\n\r\n");
        assert!(post.starts_with("HTTP/1.1 405"), "{post}");
        drop(server);
        assert!(TcpStream::connect(addr).is_err(), "the listener is closed");
    }

    /// A client that connects and drips its headers slower than the timeout holds up no
    /// other scrape, and is dropped once its time is up; a head too long is refused.
    #[test]
    fn a_slow_client_holds_up_no_scrape_and_a_huge_head_is_refused() {
        let server =
            MetricsServer::start("127.0.0.1:0".parse().unwrap(), || "a_total 1\n".to_string())
                .unwrap();
        let addr = server.local_addr();
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
        let idle = TcpStream::connect(addr).unwrap();
        let start = Instant::now();
        let ok = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        // The dripping client is cut off at its deadline, headers still coming.
        let dripping = std::thread::spawn(move || {
            for i in 0..20 {
                if slow.write_all(format!("X-{i}: y\r\n").as_bytes()).is_err() {
                    return i;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
            20
        });
        let lines = dripping.join().unwrap();
        assert!(lines < 20, "the slow client was never cut off");
        drop(idle);
        let huge = format!("GET /metrics HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(20_000));
        let mut s = TcpStream::connect(addr).unwrap();
        // The answer may come before the whole request is written.
        let _ = s.write_all(huge.as_bytes());
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(out.starts_with("HTTP/1.1 431 "), "{out}");
    }

    #[test]
    fn past_the_limit_a_client_is_told_503_at_once() {
        let server =
            MetricsServer::start("127.0.0.1:0".parse().unwrap(), || "a_total 1\n".to_string())
                .unwrap();
        let addr = server.local_addr();
        let idle: Vec<TcpStream> = (0..MAX_CLIENTS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        // Accepted in turn: the one after them finds every place taken.
        let busy = get(addr, "GET /metrics HTTP/1.1\r\n\r\n");
        assert!(busy.starts_with("HTTP/1.1 503 "), "{busy}");
        drop(idle);
        // Their threads see them go (a busy machine may take a while to run them).
        let until = Instant::now() + Duration::from_secs(10);
        let ok = loop {
            let answer = get(addr, "GET /metrics HTTP/1.1\r\n\r\n");
            if answer.starts_with("HTTP/1.1 200 OK") || Instant::now() > until {
                break answer;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
    }

    #[test]
    fn addresses_default_to_loopback() {
        assert_eq!(
            listen_address("9100").unwrap(),
            "127.0.0.1:9100".parse().unwrap()
        );
        assert_eq!(
            listen_address(":9100").unwrap(),
            "127.0.0.1:9100".parse().unwrap()
        );
        assert_eq!(
            listen_address("0.0.0.0:9100").unwrap(),
            "0.0.0.0:9100".parse().unwrap()
        );
        assert_eq!(
            listen_address("[::1]:9100").unwrap(),
            "[::1]:9100".parse().unwrap()
        );
        assert_eq!(
            listen_address("localhost:9100").unwrap().port(),
            9100,
            "a host name"
        );
        for bad in ["", "x", "1.2.3.4", "1.2.3.4:99999", ":x"] {
            assert!(
                matches!(listen_address(bad), Err(MetricsError::BadAddress(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            listen_address("no-such-host.invalid:9100"),
            Err(MetricsError::UnknownHost(_))
        ));
    }
}
