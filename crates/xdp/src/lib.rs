//! wirespeed's XDP programs (C in `bpf/`, built by build.rs) and their loader (aya):
//! the redirect to AF_XDP sockets (and its variant that spills to a ring buffer), the in-kernel drop counter (the benchmark's ceiling) and
//! the live-frames transmit engine, and the switch's in-kernel fast path.
//!
//! Each program and the module that loads it: `bpf/xsk_redirect.c` and `bpf/xsk_spill.c`
//! (`xsk_program.rs`: redirect to the sockets, or spill while they are behind),
//! `bpf/xdp_drop.c` (`drop_counter.rs`: drop and count, `bench xdpdrop`),
//! `bpf/xdp_live_tx.c` (`live_frames.rs`: "the kernel engine" of `bench txpush` and `gen`,
//! frames sent by BPF_PROG_RUN in live-frames mode), `bpf/tx_watch.c` (`tx_watch.rs`: what
//! the kernel failed to send of them), `bpf/switch_fast_path.c`
//! ([`fast_path`]: the switch's `--offload`). `attach.rs` attaches them, `join.rs` shares
//! one.
//!
//! Several processes can share one interface by queue: the plain redirect program one
//! attached, the others join (`join.rs`); it stays while any of them lives.
//!
//! Programs are attached through BPF links where the kernel has them, so they detach when
//! the process exits on any path, a crash included. A program someone else attached is
//! never replaced unless the caller forces it.

mod attach;
mod drop_counter;
pub mod fast_path;
pub mod handover;
mod join;
mod live_frames;
mod tx_watch;
mod xsk_program;

pub use attach::{AttachMode, Holder, attached_program};
pub use drop_counter::DropCounter;
pub use fast_path::{FastPath, ProgramBarrier};
pub use join::{SharedProgram, shared_program};
pub use live_frames::{LiveFrames, Stamp, Variation};
pub use tx_watch::{TxDrops, TxWatch};
pub use xsk_program::{SPILL_RINGS, SpillRecord, SpillRing, XskProgram};

/// What can go wrong loading or attaching an XDP program.
#[derive(Debug, thiserror::Error)]
pub enum XdpError {
    #[error("{0}: no such interface")]
    NoInterface(String),
    #[error("{}", attach::foreign_text(.iface, .existing, .holder))]
    ForeignProgram {
        iface: String,
        existing: String,
        holder: Option<attach::Holder>,
    },
    #[error("{iface}: cannot remove the XDP program attached there ({existing}): {reason}")]
    ForceFailed {
        iface: String,
        existing: String,
        reason: String,
    },
    #[error("{iface}: attach XDP program {program} in {mode} mode: {reason}")]
    Attach {
        iface: String,
        program: &'static str,
        mode: &'static str,
        reason: String,
    },
    #[error("detach XDP program {program} from port {slot}'s interface: {reason}")]
    Detach {
        slot: u32,
        program: &'static str,
        reason: String,
    },
    #[error("load XDP program {program}: {reason}")]
    Load {
        program: &'static str,
        reason: String,
    },
    #[error("XDP map {map}: {reason}")]
    Map { map: &'static str, reason: String },
    #[error("live-frames run on {iface}: {reason}")]
    Run { iface: String, reason: String },
}

/// Loads one of the built objects and its named program, ready to attach or run.
fn load_program(object: &[u8], program: &'static str) -> Result<aya::Ebpf, XdpError> {
    load_program_sized(object, program, &[])
}

/// `load_program`, with the maps named in `sizes` given that many entries (bytes for a ring
/// buffer).
fn load_program_sized(
    object: &[u8],
    program: &'static str,
    sizes: &[(&str, u32)],
) -> Result<aya::Ebpf, XdpError> {
    let mut loader = aya::EbpfLoader::new();
    for &(map, entries) in sizes {
        loader.map_max_entries(map, entries);
    }
    let mut ebpf = loader.load(object).map_err(|e| XdpError::Load {
        program,
        reason: error_chain(&e),
    })?;
    xdp_program(&mut ebpf, program)?
        .load()
        .map_err(|e| XdpError::Load {
            program,
            reason: error_chain(&e),
        })?;
    Ok(ebpf)
}

/// The XDP program `program` of a loaded object.
fn xdp_program<'a>(
    ebpf: &'a mut aya::Ebpf,
    program: &'static str,
) -> Result<&'a mut aya::programs::Xdp, XdpError> {
    ebpf.program_mut(program)
        .and_then(|p| p.try_into().ok())
        .ok_or(XdpError::Load {
            program,
            reason: "not an XDP program in the object".to_string(),
        })
}

/// Loads `program` of `object` and attaches it to `iface` (see `attach::attach`).
fn load_attached(
    object: &[u8],
    program: &'static str,
    sizes: &[(&str, u32)],
    iface: &str,
    mode: AttachMode,
    force: bool,
) -> Result<aya::Ebpf, XdpError> {
    let mut ebpf = load_program_sized(object, program, sizes)?;
    attach::attach(
        xdp_program(&mut ebpf, program)?,
        program,
        iface,
        mode,
        force,
    )?;
    Ok(ebpf)
}

/// An error with its causes, on one line.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(c) = src {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        src = c.source();
    }
    s
}
