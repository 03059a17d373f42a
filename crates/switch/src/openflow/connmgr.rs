//! The OpenFlow connections: listening (`ptcp:`, `pssl:`) and dialling out (`tcp:`,
//! `ssl:`, again with back-off when a controller goes away), one thread a connection reading
//! and one writing; TLS ([`crate::openflow::tls`]) sits between them and the socket.
//!
//! The reading thread cuts the stream into messages at the header's length (one under
//! eight bytes ends the connection: nothing after it can be framed), answers HELLO and
//! ECHO itself, and hands everything else to the bridge's control side as a
//! [`Work::Call`], so it is handled in order with `wirespeed ctl`'s requests. Silence for
//! [`ECHO_INTERVAL`] gets an ECHO_REQUEST; silence for another closes the connection, and
//! so does no HELLO in [`HELLO_TIME`] (no TLS handshake in [`tls::HANDSHAKE_TIME`]). A
//! peer's requests are not read while [`MAX_QUEUED_BYTES`] wait for it to read. The
//! listeners serve at most [`MAX_CONNECTIONS`] at once.

use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{Sender, sync_channel};
use std::time::{Duration, Instant};

use crate::bridge::{Bridge, Work};
use crate::openflow::agent::Agent;
use crate::openflow::error::{error_message, hello_failed};
use crate::openflow::message::{Incoming, decode};
use crate::openflow::reply;
use crate::openflow::session::{MAX_QUEUED_BYTES, QUEUE_MESSAGES, Queued, Sessions};
use crate::openflow::tls::{self, TlsConfig, TlsStream};
use crate::openflow::wire::{DEFAULT_PORT, HEADER_LEN, Header, msg};

/// Silence after which the agent sends an ECHO_REQUEST; as long again without an answer and
/// the connection is closed.
pub const ECHO_INTERVAL: Duration = Duration::from_secs(5);
/// How long a peer has to say HELLO once it sent something (after the TLS handshake, over
/// TLS): one that says nothing we take (ECHO now and then, each within the interval) held
/// a connection, and one of the few a switch takes, for as long as it liked.
pub const HELLO_TIME: Duration = Duration::from_secs(10);
/// Messages of one connection the control side may have waiting before its reading pauses.
pub const MAX_PENDING: usize = 256;
/// The longest wait between two attempts to reach a controller.
pub const MAX_BACKOFF: Duration = Duration::from_secs(8);
/// Connections the listening sockets serve at once (each takes two threads); one more is
/// closed as it comes, so a peer that opens connections without end cannot make threads
/// without end. Controllers the switch dials are not counted.
pub const MAX_CONNECTIONS: usize = 64;

/// One of the [`MAX_CONNECTIONS`] a connection holds, given back when it ends.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(open: &Arc<AtomicUsize>) -> Option<Slot> {
        if open.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot(open.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Says on stderr that connections were refused: the first at once, then at most a line
/// a second with how many, so a flood of them does not flood the terminal.
#[derive(Default)]
struct Refusals {
    last: Option<Instant>,
    unsaid: u64,
}

impl Refusals {
    fn refused(&mut self, peer: io::Result<SocketAddr>) {
        self.unsaid += 1;
        if self
            .last
            .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        let peer = peer.map_or("?".into(), |a| a.to_string());
        eprintln!(
            "wirespeed switch: OpenFlow: closed {} connection(s), the last from {peer}: \
             {MAX_CONNECTIONS} are open",
            self.unsaid
        );
        (self.last, self.unsaid) = (Some(Instant::now()), 0);
    }
}

/// What a connection runs over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Tcp,
    /// TLS with certificates on both sides (`ssl:`, `pssl:`).
    Tls,
}

/// Where OpenFlow connections come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// `ptcp:[PORT][:ADDR]` or `pssl:...`: listen (127.0.0.1:6653 by default).
    Listen(SocketAddr, Transport),
    /// `tcp:HOST[:PORT]` or `ssl:...`: dial out.
    Dial(String, u16, Transport),
}

impl Target {
    pub fn transport(&self) -> Transport {
        match self {
            Target::Listen(_, t) | Target::Dial(_, _, t) => *t,
        }
    }
}

/// As Open vSwitch writes a target, every part given (`pssl:6653:127.0.0.1`, `tcp:[::1]:6653`).
impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = match self.transport() {
            Transport::Tcp => "tcp",
            Transport::Tls => "ssl",
        };
        match self {
            Target::Listen(addr, _) if addr.is_ipv6() => {
                write!(f, "p{scheme}:{}:[{}]", addr.port(), addr.ip())
            }
            Target::Listen(addr, _) => write!(f, "p{scheme}:{}:{}", addr.port(), addr.ip()),
            Target::Dial(host, port, _) if host.contains(':') => {
                write!(f, "{scheme}:[{host}]:{port}")
            }
            Target::Dial(host, port, _) => write!(f, "{scheme}:{host}:{port}"),
        }
    }
}

/// Why a target does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TargetError {
    #[error(
        "'{0}': expected ptcp:[PORT][:ADDR], pssl:[PORT][:ADDR], tcp:HOST[:PORT] or ssl:HOST[:PORT]"
    )]
    Syntax(String),
    #[error("'{0}': '{1}' is not a port number (1-65535)")]
    Port(String, String),
    #[error("'{0}': '{1}' is not an IP address")]
    Address(String, String),
}

impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        let port_of = |p: &str| -> Result<u16, TargetError> {
            match p {
                "" => Ok(DEFAULT_PORT),
                p => p
                    .parse::<u16>()
                    .ok()
                    .filter(|&n| n != 0)
                    .ok_or_else(|| TargetError::Port(text.into(), p.into())),
            }
        };
        let (scheme, rest) = text
            .split_once(':')
            .ok_or_else(|| TargetError::Syntax(text.into()))?;
        let transport = match scheme {
            "ptcp" | "tcp" => Transport::Tcp,
            "pssl" | "ssl" => Transport::Tls,
            _ => return Err(TargetError::Syntax(text.into())),
        };
        if scheme.starts_with('p') {
            let (port, addr) = rest.split_once(':').unwrap_or((rest, ""));
            let ip = match addr {
                "" => Ipv4Addr::LOCALHOST.into(),
                a => a
                    .trim_matches(['[', ']'])
                    .parse()
                    .map_err(|_| TargetError::Address(text.into(), a.into()))?,
            };
            return Ok(Target::Listen(
                SocketAddr::new(ip, port_of(port)?),
                transport,
            ));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.is_empty() && !p.contains(']') => (h, port_of(p)?),
            _ => (rest, DEFAULT_PORT),
        };
        if host.is_empty() {
            return Err(TargetError::Syntax(text.into()));
        }
        Ok(Target::Dial(
            host.trim_matches(['[', ']']).into(),
            port,
            transport,
        ))
    }
}

/// Starts serving `targets`: listening sockets are bound now (an error names the one that
/// failed), controllers are dialled from threads. `tls` serves the `ssl:` and `pssl:` ones
/// (it must be there if there are any). With `fail_open`, the tables are set aside for
/// learning-switch forwarding while no controller that was dialled is connected.
pub fn start(
    targets: &[Target],
    tls: Option<TlsConfig>,
    agent: Arc<Agent>,
    work: Sender<Work>,
    fail_open: bool,
) -> io::Result<()> {
    if tls.is_none() && targets.iter().any(|t| t.transport() == Transport::Tls) {
        let error = "ssl: and pssl: need a private key, a certificate and a CA certificate";
        return Err(io::Error::new(ErrorKind::InvalidInput, error));
    }
    let dials = targets.iter().any(|t| matches!(t, Target::Dial(..)));
    let fail_open = fail_open && dials;
    let mut listeners = Vec::new();
    for target in targets {
        if let Target::Listen(addr, transport) = target {
            let listener = TcpListener::bind(addr)
                .map_err(|e| io::Error::new(e.kind(), format!("{target}: {e}")))?;
            let tls = (*transport == Transport::Tls)
                .then(|| tls.clone())
                .flatten();
            listeners.push((listener, tls));
        }
    }
    if fail_open {
        set_fail_open(&work, true);
    }
    let open = Arc::new(AtomicUsize::new(0));
    for (listener, tls) in listeners {
        let (agent, work, open) = (agent.clone(), work.clone(), open.clone());
        std::thread::Builder::new()
            .name("openflow-listen".into())
            .spawn(move || {
                let mut refusals = Refusals::default();
                for stream in listener.incoming().flatten() {
                    let Some(slot) = Slot::take(&open) else {
                        refusals.refused(stream.peer_addr());
                        continue;
                    };
                    let (agent, work, tls) = (agent.clone(), work.clone(), tls.clone());
                    let _ = std::thread::Builder::new()
                        .name("openflow".into())
                        .spawn(move || {
                            let _slot = slot;
                            let stream = match tls {
                                None => Stream::Tcp(stream),
                                Some(tls) => match tls.accept(stream) {
                                    Ok(stream) => Stream::Tls(stream),
                                    Err(_) => return,
                                },
                            };
                            serve(stream, &agent, &work, None, &mut || {});
                        });
                }
            })?;
    }
    for target in targets {
        if let Target::Dial(host, port, transport) = target {
            let (agent, work, host, port) = (agent.clone(), work.clone(), host.clone(), *port);
            let tls = (*transport == Transport::Tls)
                .then(|| tls.clone())
                .flatten();
            std::thread::Builder::new()
                .name("openflow-dial".into())
                .spawn(move || dial(&host, port, tls.as_ref(), &agent, &work, fail_open))?;
        }
    }
    Ok(())
}

/// A connection's socket, with TLS over it or not.
enum Stream {
    Tcp(TcpStream),
    Tls(TlsStream),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Tcp(tcp) => tcp,
            Stream::Tls(tls) => tls.tcp(),
        }
    }

    fn split(self) -> io::Result<(Box<dyn Read + Send>, Box<dyn Write + Send>)> {
        Ok(match self {
            Stream::Tcp(tcp) => (Box::new(tcp.try_clone()?), Box::new(tcp)),
            Stream::Tls(tls) => {
                let (reader, writer) = tls::split(tls)?;
                (Box::new(reader), Box::new(writer))
            }
        })
    }
}

fn set_fail_open(work: &Sender<Work>, on: bool) {
    let _ = work.send(Work::Call(Box::new(move |bridge: &mut Bridge| {
        fail_open_now(bridge, on)
    })));
}

/// Sets the tables aside, on the bridge's thread, if no controller controls it then: a
/// controller's HELLO queued meanwhile (its `set_fail_open(false)` after this) or before
/// (counted here) wins over one going away.
fn fail_open_unless_controlled(work: &Sender<Work>, sessions: Arc<Sessions>) {
    let _ = work.send(Work::Call(Box::new(move |bridge: &mut Bridge| {
        if sessions.active_count() == 0 {
            fail_open_now(bridge, true)
        }
    })));
}

fn fail_open_now(bridge: &mut Bridge, on: bool) {
    bridge.edit(|dp| {
        // Flows the kernel forwards under the rules, or under `normal`, go too.
        dp.watch_offload();
        dp.tables.set_fail_open(on)
    });
}

/// Connects to a controller again and again, waiting 1 s after a failure, doubling up to
/// [`MAX_BACKOFF`] (back to 1 s after a connection that lasted).
fn dial(
    host: &str,
    port: u16,
    tls: Option<&TlsConfig>,
    agent: &Arc<Agent>,
    work: &Sender<Work>,
    fail_open: bool,
) {
    let mut backoff = Duration::from_secs(1);
    // Why the last try failed, once said: said again only when the reason changes.
    let mut failing: Option<String> = None;
    loop {
        let stream = match connect(host, port, tls) {
            Ok(stream) => Some(stream),
            Err(reason) => {
                if failing.as_ref() != Some(&reason) {
                    eprintln!(
                        "wirespeed switch: OpenFlow: controller {host}:{port}: {reason}; trying \
                         again (every {} s at most)",
                        MAX_BACKOFF.as_secs()
                    );
                    failing = Some(reason);
                }
                None
            }
        };
        if let Some(stream) = stream {
            // Said as the controller comes and goes (an operator otherwise learns of a lost
            // controller from its flows): once it has spoken, not at each try, nor for a peer
            // that takes the connection and says nothing.
            let began = Instant::now();
            let mut spoke = false;
            let refused = serve(stream, agent, work, Some(fail_open), &mut || {
                spoke = true;
                eprintln!("wirespeed switch: OpenFlow: connected to controller {host}:{port}");
            });
            if spoke {
                failing = None;
            }
            // A controller of another OpenFlow version is told so by HELLO_FAILED; its
            // operator hears it here, once, as for a controller that cannot be reached.
            if let Some(version) = refused {
                let reason = format!(
                    "it speaks OpenFlow version 0x{version:02x} only, and wirespeed 1.3 (0x04)"
                );
                if failing.as_ref() != Some(&reason) {
                    eprintln!(
                        "wirespeed switch: OpenFlow: controller {host}:{port}: {reason}; \
                         trying again (every {} s at most)",
                        MAX_BACKOFF.as_secs()
                    );
                    failing = Some(reason);
                }
            }
            let left = match (fail_open, agent.sessions.active_count()) {
                (true, 0) => {
                    "; fail mode standalone: the bridge forwards as a learning switch \
                              until a controller is back"
                }
                (false, 0) => "; fail mode secure: the rules stay as they are",
                _ => "",
            };
            if spoke {
                eprintln!(
                    "wirespeed switch: OpenFlow: controller {host}:{port} went away after {:.1} \
                     s{left}",
                    began.elapsed().as_secs_f64()
                );
            }
            if began.elapsed() > MAX_BACKOFF {
                backoff = Duration::from_secs(1);
            }
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// A connection to the controller at `host`:`port` (TLS with `tls`), or why there is none.
fn connect(host: &str, port: u16, tls: Option<&TlsConfig>) -> Result<Stream, String> {
    let addr = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} has no address"))?;
    let tcp = TcpStream::connect_timeout(&addr, Duration::from_secs(2))
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    match tls {
        None => Ok(Stream::Tcp(tcp)),
        Some(tls) => tls
            .connect(host, tcp)
            .map(Stream::Tls)
            .map_err(|e| format!("TLS: {e}")),
    }
}

/// One connection, until it ends. `active`: a dialled controller (Some(whether its going
/// away may set the tables aside)); `spoke` runs once it said a HELLO we speak. A dialled
/// controller controls the bridge (counts for the fail mode) from that HELLO on, not from
/// the connection: a peer that takes it and stays silent leaves a standalone bridge
/// forwarding, as Open vSwitch's fail-open does. Returns the version of a HELLO refused
/// (HELLO_FAILED), if that is how it ended.
fn serve(
    stream: Stream,
    agent: &Arc<Agent>,
    work: &Sender<Work>,
    active: Option<bool>,
    spoke: &mut dyn FnMut(),
) -> Option<u8> {
    let tcp = stream.tcp();
    let _ = tcp.set_nodelay(true);
    // A peer that stops reading must not hold the writer (and so this connection's end,
    // and a controller's reconnection) for as long as TCP keeps trying.
    let _ = tcp.set_write_timeout(Some(2 * ECHO_INTERVAL));
    let _ = tcp.set_read_timeout(Some(ECHO_INTERVAL));
    let (Ok(socket), Ok(closer)) = (tcp.try_clone(), tcp.try_clone()) else {
        return None;
    };
    let Ok((reader, mut writer)) = stream.split() else {
        return None;
    };
    let (out, outbox) = sync_channel::<Vec<u8>>(QUEUE_MESSAGES);
    let sessions = &agent.sessions;
    let (id, queued) = sessions.open(out.clone(), false);
    let unsent = queued.clone();
    let writing = std::thread::Builder::new()
        .name("openflow-write".into())
        .spawn(move || {
            for message in outbox {
                let written = writer.write_all(&message);
                queued.written(message.len());
                if written.is_err() {
                    let _ = closer.shutdown(Shutdown::Both);
                    break;
                }
            }
        });
    sessions.send(id, reply::hello(0));
    let mut controlling = false;
    let mut hello = || {
        spoke();
        if active.is_some() {
            sessions.with(id, |s| s.active = true);
            controlling = true;
        }
        if active == Some(true) {
            set_fail_open(work, false);
        }
    };
    let refused = match read_messages(reader, agent, work, (id, &unsent), &mut hello) {
        Ok(refused) => refused,
        // Only TLS breaks the stream so (a certificate refused, a record that fails): say
        // why, or an operator sees nothing but a controller that never connects.
        Err(e) => {
            if e.kind() == ErrorKind::InvalidData {
                let peer = socket.peer_addr().map_or("?".into(), |a| a.to_string());
                eprintln!("wirespeed switch: OpenFlow: {peer}: TLS: {e}");
            }
            None
        }
    };
    sessions.close(id);
    drop(out);
    if let Ok(writing) = writing {
        let _ = writing.join();
    }
    let _ = socket.shutdown(Shutdown::Both);
    if active == Some(true) && controlling {
        fail_open_unless_controlled(work, agent.sessions.clone());
    }
    refused
}

/// Reads and dispatches messages of session `id` until the peer closes, falls silent, says
/// no HELLO in [`HELLO_TIME`] after its first bytes, reads none of its replies (`queued`,
/// those not yet sent: [`MAX_QUEUED_BYTES`] of them, none taken for two echo intervals),
/// breaks the framing, or says a HELLO we do not speak (`Ok`, with that HELLO's version),
/// or the stream fails (its error); `spoke` runs at the first HELLO we speak.
fn read_messages(
    mut stream: impl Read,
    agent: &Arc<Agent>,
    work: &Sender<Work>,
    (id, queued): (u64, &Queued),
    spoke: &mut dyn FnMut(),
) -> io::Result<Option<u8>> {
    let mut first_bytes: Option<Instant> = None;
    let mut heard = false;
    let sessions = &agent.sessions;
    // Messages handed to the control side and not yet handled: the reading waits while
    // there are too many, so a controller that floods gets TCP's back-pressure, not a
    // growing queue in the switch.
    let pending = Arc::new(AtomicUsize::new(0));
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut chunk = vec![0u8; 1 << 16];
    let mut echo_sent = false;
    loop {
        // Idle bundles go between reads; not while this connection's messages wait to be
        // handled (one of them may be for the bundle).
        if pending.load(Ordering::Acquire) == 0 {
            agent.expire_bundles(id, Instant::now());
        }
        if !heard && first_bytes.is_some_and(|at| at.elapsed() >= HELLO_TIME) {
            return Ok(None);
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(None),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                echo_sent = false;
                first_bytes.get_or_insert_with(Instant::now);
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if echo_sent {
                    return Ok(None); // no answer for two intervals: dead
                }
                sessions.send(id, reply::echo(msg::ECHO_REQUEST, 0, &[]));
                echo_sent = true;
                continue;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
        let mut at = 0;
        while let Some(header) = Header::peek(&buf[at..]) {
            let len = usize::from(header.length);
            if len < HEADER_LEN {
                let bad = &buf[at..at + HEADER_LEN];
                let error = crate::openflow::error::bad_request::BAD_LEN;
                sessions.send(id, error_message(error, header.xid, bad));
                return Ok(None);
            }
            if buf.len() - at < len {
                break;
            }
            let message = buf[at..at + len].to_vec();
            at += len;
            while pending.load(Ordering::Acquire) >= MAX_PENDING {
                std::thread::sleep(Duration::from_millis(1));
            }
            // A peer that reads, however slowly, is waited for; one that has taken none of
            // its replies for two echo intervals is gone.
            let (mut waiting, mut unsent) = (Instant::now(), queued.bytes());
            while unsent >= MAX_QUEUED_BYTES {
                let no_hello = !heard && first_bytes.is_some_and(|at| at.elapsed() >= HELLO_TIME);
                if no_hello || waiting.elapsed() >= 2 * ECHO_INTERVAL {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_millis(1));
                let now_unsent = queued.bytes();
                if now_unsent < unsent {
                    waiting = Instant::now();
                }
                unsent = now_unsent;
            }
            let hello = header.kind == msg::HELLO;
            let version = header.version;
            if !dispatch(message, header, agent, work, id, &pending) {
                // A HELLO ends the connection only when it is one we do not speak.
                return Ok(hello.then_some(version));
            }
            if hello && !heard {
                heard = true;
                spoke();
            }
        }
        buf.drain(..at);
    }
}

/// Handles HELLO and ECHO here, hands the rest to the control side; false ends the
/// connection.
fn dispatch(
    message: Vec<u8>,
    header: Header,
    agent: &Arc<Agent>,
    work: &Sender<Work>,
    id: u64,
    pending: &Arc<AtomicUsize>,
) -> bool {
    let sessions = &agent.sessions;
    match header.kind {
        msg::HELLO => {
            if let Ok((_, Incoming::Hello { speaks_13: false })) = decode(&message) {
                let error = hello_failed::INCOMPATIBLE;
                let mut reply = error_message(error, header.xid, &[]);
                // The data of HELLO_FAILED is text (§7.4.1).
                reply.extend_from_slice(b"wirespeed speaks OpenFlow 1.3 only");
                let len = reply.len() as u16;
                reply[2..4].copy_from_slice(&len.to_be_bytes());
                sessions.send(id, reply);
                return false;
            }
            true
        }
        msg::ECHO_REQUEST if header.version == crate::openflow::wire::OFP_VERSION => {
            sessions.send(
                id,
                reply::echo(msg::ECHO_REPLY, header.xid, &message[HEADER_LEN..]),
            );
            true
        }
        msg::ECHO_REPLY => true,
        _ => {
            let (agent, pending) = (agent.clone(), pending.clone());
            pending.fetch_add(1, Ordering::AcqRel);
            let call = move |bridge: &mut Bridge| {
                agent.handle(bridge, id, &message);
                pending.fetch_sub(1, Ordering::AcqRel);
            };
            work.send(Work::Call(Box::new(call))).is_ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_as_ovs_writes_them() {
        use Transport::{Tcp, Tls};
        let t = |s: &str| s.parse::<Target>();
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(t("ptcp:"), Ok(Target::Listen(at("127.0.0.1:6653"), Tcp)));
        assert_eq!(
            t("ptcp:6634"),
            Ok(Target::Listen(at("127.0.0.1:6634"), Tcp))
        );
        assert_eq!(
            t("ptcp:6634:0.0.0.0"),
            Ok(Target::Listen(at("0.0.0.0:6634"), Tcp))
        );
        assert_eq!(
            t("pssl:6634"),
            Ok(Target::Listen(at("127.0.0.1:6634"), Tls))
        );
        assert_eq!(
            t("tcp:10.0.0.1"),
            Ok(Target::Dial("10.0.0.1".into(), 6653, Tcp))
        );
        assert_eq!(
            t("tcp:127.0.0.1:6654"),
            Ok(Target::Dial("127.0.0.1".into(), 6654, Tcp))
        );
        assert_eq!(
            t("ssl:1.2.3.4:6653"),
            Ok(Target::Dial("1.2.3.4".into(), 6653, Tls))
        );
        assert_eq!(t("ssl:[::1]"), Ok(Target::Dial("::1".into(), 6653, Tls)));
        assert_eq!(
            t("ptcp:99999"),
            Err(TargetError::Port("ptcp:99999".into(), "99999".into()))
        );
        assert_eq!(t("udp:1"), Err(TargetError::Syntax("udp:1".into())));
        assert_eq!(t("tcp:"), Err(TargetError::Syntax("tcp:".into())));
        assert_eq!(t("6653"), Err(TargetError::Syntax("6653".into())));
        assert!(matches!(t("ptcp:1:nope"), Err(TargetError::Address(..))));
        // Written back with every part, they parse to themselves.
        for text in [
            "ptcp:6653:127.0.0.1",
            "pssl:7:[::1]",
            "tcp:h:1",
            "ssl:[::1]:6653",
        ] {
            let target = t(text).unwrap();
            assert_eq!(target.to_string(), text);
            assert_eq!(t(&target.to_string()), Ok(target));
        }
    }
}
