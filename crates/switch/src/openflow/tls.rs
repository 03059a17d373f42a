//! OpenFlow over TLS (`ssl:`, `pssl:`), as Open vSwitch runs it: both ends show a certificate
//! and each checks the other's against the CA certificate it was given (`--ca-cert`).
//! Like Open vSwitch, a switch dialling `ssl:HOST` does not check that the controller's
//! certificate names HOST: trust comes from the private CA alone, so certificates made by
//! `ovs-pki` (a common name, no subject alternative names) work.
//!
//! A TLS connection is one rustls state shared by the connection's reading and writing
//! threads ([`split`]): each takes its lock only to move bytes through rustls, never while
//! it waits on the socket, so a reader waiting for the controller does not hold up the
//! switch's messages and a send blocked on a slow peer does not stop the reading (which
//! would deadlock with a peer that reads only once its own send is done). Records reach the
//! socket in the order rustls made them: a second lock, taken before the first is let go,
//! orders the sends.

use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{IpAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::{Error as PemError, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore,
    ServerConfig, ServerConnection, SignatureScheme,
};

/// The files of `--private-key`, `--certificate` and `--ca-cert`.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    pub private_key: PathBuf,
    pub certificate: PathBuf,
    pub ca_cert: PathBuf,
}

/// Why the TLS set-up could not be made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{0}: {1}")]
    File(PathBuf, String),
    #[error("{0}: no {1} in it")]
    Missing(PathBuf, &'static str),
    #[error("{0}")]
    Rustls(String),
}

/// Both sides' configurations, made once from the files.
#[derive(Clone)]
pub struct TlsConfig {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("TlsConfig")
    }
}

impl TlsConfig {
    /// Reads the key, the certificate chain and the CA certificates; an error names the file.
    pub fn load(files: &TlsFiles) -> Result<TlsConfig, TlsError> {
        let chain = certificates(&files.certificate, "certificate")?;
        let key = PrivateKeyDer::from_pem_file(&files.private_key).map_err(|e| match e {
            PemError::NoItemsFound => TlsError::Missing(files.private_key.clone(), "private key"),
            e => file_error(&files.private_key, e),
        })?;
        let mut roots = RootCertStore::empty();
        for ca in certificates(&files.ca_cert, "certificate")? {
            roots
                .add(ca)
                .map_err(|e| TlsError::File(files.ca_cert.clone(), e.to_string()))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let rustls_error = |e: &dyn fmt::Display| TlsError::Rustls(e.to_string());

        let clients = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| rustls_error(&e))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| rustls_error(&e))?
            .with_client_cert_verifier(clients)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| TlsError::File(files.private_key.clone(), e.to_string()))?;

        let servers = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| rustls_error(&e))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| rustls_error(&e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyName(servers)))
            .with_client_auth_cert(chain, key)
            .map_err(|e| TlsError::File(files.private_key.clone(), e.to_string()))?;
        Ok(TlsConfig {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// The server side of a connection accepted on a `pssl:` socket.
    pub fn accept(&self, tcp: TcpStream) -> io::Result<TlsStream> {
        let conn = ServerConnection::new(self.server.clone()).map_err(io::Error::other)?;
        Ok(TlsStream::new(tcp, conn.into()))
    }

    /// The client side of a connection to `ssl:HOST`.
    pub fn connect(&self, host: &str, tcp: TcpStream) -> io::Result<TlsStream> {
        let name = match host.parse::<IpAddr>() {
            Ok(ip) => ServerName::IpAddress(ip.into()),
            Err(_) => ServerName::try_from(host.to_owned()).map_err(io::Error::other)?,
        };
        let conn = ClientConnection::new(self.client.clone(), name).map_err(io::Error::other)?;
        Ok(TlsStream::new(tcp, conn.into()))
    }
}

fn certificates(path: &Path, what: &'static str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(TlsError::Missing(path.to_owned(), what));
    }
    Ok(certs)
}

fn file_error(path: &Path, error: PemError) -> TlsError {
    let text = match error {
        PemError::Io(e) => e.to_string(),
        e => e.to_string(),
    };
    TlsError::File(path.to_owned(), text)
}

/// The controller's certificate must chain to the CA; its names are not looked at (see the
/// module's comment).
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The chain, validity and key usage are checked before the name.
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The rustls state, and the turn to send on the socket.
struct Shared {
    conn: Mutex<rustls::Connection>,
    sending: Mutex<()>,
}

/// A TCP connection with TLS over it, before it is split.
pub struct TlsStream {
    tcp: TcpStream,
    shared: Arc<Shared>,
    /// When the handshake must be done by.
    handshake_by: Instant,
}

/// How long a handshake may take: a peer sending a byte now and then, each within the read
/// timeout, held a connection (and one of the few a switch takes) for as long as it liked.
pub const HANDSHAKE_TIME: Duration = Duration::from_secs(10);

impl TlsStream {
    fn new(tcp: TcpStream, conn: rustls::Connection) -> TlsStream {
        let shared = Shared {
            conn: Mutex::new(conn),
            sending: Mutex::new(()),
        };
        TlsStream {
            tcp,
            shared: Arc::new(shared),
            handshake_by: Instant::now() + HANDSHAKE_TIME,
        }
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }
}

/// The connection's reading and writing halves (the socket's timeouts, set before, apply).
pub fn split(stream: TlsStream) -> io::Result<(TlsReader, TlsWriter)> {
    let writer = TlsWriter {
        tcp: stream.tcp.try_clone()?,
        shared: stream.shared.clone(),
    };
    let reader = TlsReader {
        tcp: stream.tcp,
        shared: stream.shared,
        handshake_by: stream.handshake_by,
        received: Vec::new(),
        chunk: vec![0; 1 << 14],
    };
    Ok((reader, writer))
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Sends what rustls has for the peer (handshake messages, alerts, records), letting go
    /// of the rustls state once it is this thread's turn to send.
    fn send_pending(
        &self,
        mut conn: MutexGuard<'_, rustls::Connection>,
        mut tcp: &TcpStream,
    ) -> io::Result<()> {
        if !conn.wants_write() {
            return Ok(());
        }
        let mut records = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut records)?;
        }
        let _turn = lock(&self.sending);
        drop(conn);
        tcp.write_all(&records)
    }
}

/// Plain bytes from the peer. The socket's read timeout comes through as `WouldBlock` or
/// `TimedOut`, as from a plain socket, and so does a handshake not done in
/// [`HANDSHAKE_TIME`]; a peer that breaks TLS is `InvalidData`.
pub struct TlsReader {
    tcp: TcpStream,
    shared: Arc<Shared>,
    handshake_by: Instant,
    /// Bytes from the socket rustls has not taken yet.
    received: Vec<u8>,
    chunk: Vec<u8>,
}

impl Read for TlsReader {
    /// Plain bytes, or `TimedOut` when the socket's read timeout passes without any (records
    /// that carry none, empty ones or key updates, count as silence).
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let quiet_by = self.tcp.read_timeout()?.map(|t| Instant::now() + t);
        loop {
            let mut conn = lock(&self.shared.conn);
            match conn.reader().read(buf) {
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                done => return done,
            }
            if self.received.is_empty() {
                // What came is taken first: a handshake ended by bytes already read is done.
                let now = Instant::now();
                let quiet = quiet_by.is_some_and(|at| now >= at);
                if quiet || (conn.is_handshaking() && now >= self.handshake_by) {
                    return Err(ErrorKind::TimedOut.into());
                }
                drop(conn);
                let n = self.tcp.read(&mut self.chunk)?;
                if n == 0 {
                    return Ok(0);
                }
                self.received.extend_from_slice(&self.chunk[..n]);
                continue;
            }
            let taken = conn.read_tls(&mut self.received.as_slice())?;
            self.received.drain(..taken);
            let state = conn.process_new_packets().map(|_| ());
            // An alert for the peer goes out even when the records were refused.
            self.shared.send_pending(conn, &self.tcp)?;
            state.map_err(|e| io::Error::new(ErrorKind::InvalidData, e))?;
        }
    }
}

/// Plain bytes to the peer, encrypted and sent at once.
pub struct TlsWriter {
    tcp: TcpStream,
    shared: Arc<Shared>,
}

impl Write for TlsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Until the handshake ends rustls keeps what is written, up to a limit; beyond it,
        // wait for the handshake as long as a blocked send would.
        let deadline = self.tcp.write_timeout()?.map(|t| Instant::now() + t);
        loop {
            let mut conn = lock(&self.shared.conn);
            let n = conn.writer().write(buf)?;
            self.shared.send_pending(conn, &self.tcp)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            if deadline.is_some_and(|d| Instant::now() > d) {
                return Err(ErrorKind::TimedOut.into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        self.shared.send_pending(lock(&self.shared.conn), &self.tcp)
    }
}
