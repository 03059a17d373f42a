//! A small HTTP/1.0 GET on a TcpStream: enough to read a `/metrics` page. HTTP/1.0 so the
//! server closes the connection after its answer and the body ends where the stream does.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, bail};

/// The largest page read: a switch with thousands of ports still answers far less.
const MAX_PAGE: u64 = 64 << 20;

/// Resolves `HOST:PORT` (a name, an IPv4 address, or `[v6]:port`) to its addresses.
pub fn resolve(addr: &str) -> anyhow::Result<Vec<SocketAddr>> {
    if !addr.contains(':') {
        bail!("{addr}: not HOST:PORT or PORT (e.g. 127.0.0.1:9464)");
    }
    let addrs: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .with_context(|| format!("{addr}: not an address to scrape (HOST:PORT)"))?
        .collect();
    if addrs.is_empty() {
        bail!("{addr}: the name has no address");
    }
    Ok(addrs)
}

/// GET `path` from `addr` (HOST:PORT), each step within `timeout`: the body of a 200 answer.
pub fn get(addr: &str, path: &str, timeout: Duration) -> anyhow::Result<String> {
    let mut stream = connect(addr, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let request = format!(
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: text/plain;version=0.0.4\r\n\
         User-Agent: wirespeed-top\r\nConnection: close\r\n\r\n"
    );
    stream
        .write_all(request.as_bytes())
        .with_context(|| format!("{addr}: send the request"))?;
    let mut answer = Vec::new();
    stream
        .take(MAX_PAGE)
        .read_to_end(&mut answer)
        .with_context(|| format!("{addr}: read the answer to GET {path}"))?;
    body_of(&answer).with_context(|| format!("{addr}: GET {path}"))
}

fn connect(addr: &str, timeout: Duration) -> anyhow::Result<TcpStream> {
    let mut last = None;
    for sock in resolve(addr)? {
        match TcpStream::connect_timeout(&sock, timeout) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = Some(e),
        }
    }
    let e = last.expect("resolve returns at least one address");
    if e.kind() == std::io::ErrorKind::ConnectionRefused {
        bail!("{addr}: nothing listening (is the tool running with --metrics {addr}?)");
    }
    Err(e).with_context(|| format!("{addr}: cannot connect"))
}

/// The body of an HTTP answer, which must be `200`; chunked bodies are joined.
fn body_of(answer: &[u8]) -> anyhow::Result<String> {
    let Some(head_end) = answer.windows(4).position(|w| w == b"\r\n\r\n") else {
        if answer.is_empty() {
            bail!("the connection closed with no answer");
        }
        bail!("the answer is not HTTP (no end of headers)");
    };
    let head = String::from_utf8_lossy(&answer[..head_end]);
    let mut lines = head.split("\r\n");
    let status = lines.next().unwrap_or_default();
    let mut parts = status.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if !version.starts_with("HTTP/") {
        bail!("the answer is not HTTP: '{}'", status.trim());
    }
    if code != "200" {
        bail!("answered '{}'", status.trim());
    }
    let chunked = lines.any(|l| {
        let (name, value) = l.split_once(':').unwrap_or((l, ""));
        name.trim().eq_ignore_ascii_case("transfer-encoding")
            && value.trim().eq_ignore_ascii_case("chunked")
    });
    let body = &answer[head_end + 4..];
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    String::from_utf8(body).context("the page is not UTF-8 text")
}

/// Joins a chunked body (`SIZE\r\nDATA\r\n`... `0\r\n\r\n`).
fn dechunk(mut body: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let line_end = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("a chunk size line is cut short")?;
        let size_text = String::from_utf8_lossy(&body[..line_end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .with_context(|| format!("bad chunk size '{size_text}'"))?;
        body = &body[line_end + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size {
            bail!("a chunk is cut short");
        }
        out.extend_from_slice(&body[..size]);
        body = body.get(size + 2..).unwrap_or(&[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_and_chunked_bodies() {
        let plain = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nm 1\n";
        assert_eq!(body_of(plain).unwrap(), "m 1\n");
        let chunked =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nm 1\n\r\n5;x=y\r\nn 22\n\r\n0\r\n\r\n";
        assert_eq!(body_of(chunked).unwrap(), "m 1\nn 22\n");
    }

    #[test]
    fn answers_that_are_not_a_page() {
        let e = body_of(b"HTTP/1.0 404 Not Found\r\n\r\ngone").unwrap_err();
        assert_eq!(e.to_string(), "answered 'HTTP/1.0 404 Not Found'");
        let e = body_of(b"SSH-2.0-OpenSSH_9.2\r\n").unwrap_err();
        assert_eq!(e.to_string(), "the answer is not HTTP (no end of headers)");
        let e = body_of(b"").unwrap_err();
        assert_eq!(e.to_string(), "the connection closed with no answer");
    }

    #[test]
    fn addresses() {
        assert!(resolve("127.0.0.1:9100").is_ok());
        assert!(resolve("[::1]:9100").is_ok());
        let e = resolve("9100").unwrap_err();
        // (top turns a port alone into 127.0.0.1:PORT before it resolves.)
        assert_eq!(
            e.to_string(),
            "9100: not HOST:PORT or PORT (e.g. 127.0.0.1:9464)"
        );
        assert!(resolve("127.0.0.1:http-ish").is_err());
    }
}
