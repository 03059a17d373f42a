//! `wirespeed zcopy`: the kernel's zero-copy socket features (seed 004) over TCP, to see what
//! they save on a path: `send` with MSG_ZEROCOPY (or ordinary copying sends), `recv` with TCP
//! zero-copy receive (or ordinary reads). Each reports throughput, the CPU time it used, and
//! how much really went without a copy.

mod live_line;
mod recv;
mod send;

use std::net::{SocketAddr, ToSocketAddrs};

use anyhow::{Context, bail};
use clap::{Args, Subcommand};

/// Options of `wirespeed zcopy`.
#[derive(Debug, Args)]
#[command(after_help = "\
Zero-copy receive maps whole 4096-byte pages of payload, so `recv` asks its peer for segments \
of exactly one page (TCP_MAXSEG 4108: 4096 plus the 12-byte timestamp option) unless --copy \
or --mss says otherwise (the path's MTU must allow it: 4148 or more). The pages must also \
arrive whole: `wirespeed zcopy send` lends the kernel page-aligned buffers, which do; most \
programs' data is copied into the kernel's larger pages, which cannot be mapped. Payload in \
any other shape is copied, and counted as copied.\n\n\
MSG_ZEROCOPY saves the sender's copy only when the data leaves through a device that takes \
the pages as they are (a NIC). Delivered to a socket on this host (loopback, veth between \
namespaces) the kernel copies it anyway, and the completion notices say so: `send` counts \
sends completed as zero-copy and as copied.\n\n\
`send --io-uring` makes the same sends through io_uring (IORING_OP_SEND_ZC): its buffers are \
registered with the ring once instead of pinned at every send, and the notices come on the \
ring's completion queue instead of the socket's error queue.\n\n\
Examples:\n  wirespeed zcopy recv --listen 5201\n  \
wirespeed zcopy send --connect 10.0.0.2:5201 --duration 10\n  \
wirespeed zcopy send --connect 10.0.0.2:5201 --duration 10 --io-uring\n  \
wirespeed zcopy send --connect 10.0.0.2:5201 --file big.iso --copy --json")]
pub struct ZcopyArgs {
    #[command(subcommand)]
    pub command: ZcopyCommand,
}

#[derive(Debug, Subcommand)]
pub enum ZcopyCommand {
    /// Connect and send: a generated pattern for --duration or --bytes, or a file.
    Send(send::SendArgs),
    /// Accept one connection and receive until it ends, optionally into a file.
    Recv(recv::RecvArgs),
}

pub fn run(args: ZcopyArgs) -> anyhow::Result<()> {
    match args.command {
        ZcopyCommand::Send(a) => send::run(a),
        ZcopyCommand::Recv(a) => recv::run(a),
    }
}

/// A byte count with an optional K, M or G suffix (powers of 1024): 65536, 64K, 2M.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let shift = match unit {
        "" => 0,
        "K" | "k" | "KiB" => 10,
        "M" | "m" | "MiB" => 20,
        "G" | "g" | "GiB" => 30,
        _ => {
            return Err(format!(
                "{text:?}: not a byte count (like 65536, 64K, 2M, 1G)"
            ));
        }
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{text:?}: not a byte count (like 65536, 64K, 2M, 1G)"))?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?}: too large"))
}

/// An address to listen on or connect to: `HOST:PORT`, `[V6]:PORT`, or (listen) a port alone.
fn resolve(flag: &str, text: &str, port_alone: bool) -> anyhow::Result<SocketAddr> {
    if port_alone && let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([0, 0, 0, 0], port)));
    }
    let mut addrs = text
        .to_socket_addrs()
        .with_context(|| format!("{flag} {text}: not an address (HOST:PORT or [IPV6]:PORT)"))?;
    match addrs.next() {
        Some(a) => Ok(a),
        None => bail!("{flag} {text}: resolves to no address"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts() {
        assert_eq!(parse_bytes("65536"), Ok(65536));
        assert_eq!(parse_bytes("64K"), Ok(65536));
        assert_eq!(parse_bytes("2M"), Ok(2 << 20));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert!(parse_bytes("12Q").is_err());
        assert!(parse_bytes("K").is_err());
        assert!(parse_bytes("-1").is_err());
        assert!(parse_bytes("99999999999999999999G").is_err());
    }

    #[test]
    fn addresses() {
        assert_eq!(
            resolve("--listen", "5201", true).unwrap().to_string(),
            "0.0.0.0:5201"
        );
        assert_eq!(
            resolve("--connect", "10.0.0.2:80", false)
                .unwrap()
                .to_string(),
            "10.0.0.2:80"
        );
        assert_eq!(
            resolve("--listen", "[::1]:9", true).unwrap().to_string(),
            "[::1]:9"
        );
        assert!(resolve("--connect", "5201", false).is_err());
    }
}
