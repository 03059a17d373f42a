//! Counts what the kernel failed to send out of one interface after redirecting it there from
//! that interface's own XDP (bpf/tx_watch.c, on the tracepoints xdp_redirect_err and
//! xdp_devmap_xmit): the kernel engine's live frames leave so, and their sender is told
//! nothing of a veth peer that refuses them, a link that is down or a queue that overflows.

use aya::Btf;
use aya::maps::{Array, MapData, PerCpuArray};
use aya::programs::BtfTracePoint;

use crate::{XdpError, error_chain};

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/tx_watch.o"));

/// Redirects that failed before their frame was queued (the device refuses XDP frames, is
/// down, or the frame is over its MTU): the tracepoint fires on failures only, so watching
/// it costs nothing while frames go out.
const REDIRECT_ERR: (&str, &str) = ("watch_redirect_err", "xdp_redirect_err");
/// Every flush of a device's queue, with the frames it did not take (a veth whose peer is
/// down refuses them here; a full queue takes part of a batch). It fires for each flush of
/// up to 16 frames: watching it cost about 5 % of the engine's rate into a veth (20.2
/// against 21.3 Mpps, Intel Xeon VM), so it is watched only once asked
/// ([`TxWatch::watch_flushes`]).
const DEVMAP_XMIT: (&str, &str) = ("watch_devmap_xmit", "xdp_devmap_xmit");

/// `struct watch_config`: the namespace cookie, then the interface index (u32, first in
/// memory) and padding.
type ConfigWords = [u64; 2];
/// `struct watch_counts`: refused, queue full, not queued, the last error (i64).
type CountWords = [u64; 4];

/// Frames the kernel did not send out of the watched interface, since the watch began.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxDrops {
    /// The device refused them with an error when its queue was flushed (a veth whose peer
    /// is down: ENXIO).
    pub refused: u64,
    /// The device took part of a batch only: its queue was full (on veth, the peer's ring).
    pub queue_full: u64,
    /// The redirect failed before the frame was queued (a veth whose peer runs no XDP
    /// program and has GRO off: EOPNOTSUPP; the interface down; the frame over its MTU).
    pub not_queued: u64,
    /// The last error given, a negative errno (0: none).
    pub last_err: i32,
    /// Whether flushes were watched ([`TxWatch::watch_flushes`]): without, `refused` and
    /// `queue_full` are not known, and stay 0.
    pub flushes_watched: bool,
}

impl TxDrops {
    pub fn total(&self) -> u64 {
        self.refused + self.queue_full + self.not_queued
    }
}

/// The watch on one interface; it ends when dropped.
pub struct TxWatch {
    counts: PerCpuArray<MapData, CountWords>,
    btf: Btf,
    flushes: bool,
    // Holds the programs and their attachments.
    ebpf: aya::Ebpf,
}

impl TxWatch {
    /// Watches interface `ifindex` of the network namespace with cookie `netns_cookie`
    /// (SO_NETNS_COOKIE of a socket made there) for redirects that fail before their frame
    /// is queued. Needs the kernel's BTF (/sys/kernel/btf/vmlinux). Another sender
    /// redirecting out of the same interface from its own XDP at the same time is counted
    /// too.
    pub fn new(ifindex: u32, netns_cookie: u64) -> Result<TxWatch, XdpError> {
        let map_error = |map: &'static str| {
            move |e: aya::maps::MapError| XdpError::Map {
                map,
                reason: error_chain(&e),
            }
        };
        let btf = Btf::from_sys_fs().map_err(|e| XdpError::Load {
            program: REDIRECT_ERR.0,
            reason: format!("the kernel's BTF: {}", error_chain(&e)),
        })?;
        let mut ebpf = aya::EbpfLoader::new()
            .btf(Some(&btf))
            .load(OBJECT)
            .map_err(|e| XdpError::Load {
                program: REDIRECT_ERR.0,
                reason: error_chain(&e),
            })?;
        let config = ebpf.map_mut("watch_config").ok_or(XdpError::Map {
            map: "watch_config",
            reason: "not in the object".to_string(),
        })?;
        let mut config: Array<_, ConfigWords> =
            Array::try_from(config).map_err(map_error("watch_config"))?;
        let mut index = [0u8; 8];
        index[..4].copy_from_slice(&ifindex.to_ne_bytes());
        config
            .set(0, [netns_cookie, u64::from_ne_bytes(index)], 0)
            .map_err(map_error("watch_config"))?;
        let counts = ebpf.take_map("watch_counts").ok_or(XdpError::Map {
            map: "watch_counts",
            reason: "not in the object".to_string(),
        })?;
        let counts = PerCpuArray::try_from(counts).map_err(map_error("watch_counts"))?;
        let mut watch = TxWatch {
            counts,
            btf,
            flushes: false,
            ebpf,
        };
        watch.attach(REDIRECT_ERR)?;
        Ok(watch)
    }

    /// Watches every flush of the interface's queue too: frames a device refuses there (a
    /// veth whose peer is down: ENXIO) or leaves over from a partial send are counted from
    /// now on, at about 5 % of the engine's rate. A second call does nothing.
    pub fn watch_flushes(&mut self) -> Result<(), XdpError> {
        if !self.flushes {
            self.attach(DEVMAP_XMIT)?;
            self.flushes = true;
        }
        Ok(())
    }

    /// Whether flushes are watched ([`TxWatch::watch_flushes`]).
    pub fn watches_flushes(&self) -> bool {
        self.flushes
    }

    /// Loads and attaches one watcher, until the object is dropped.
    fn attach(
        &mut self,
        (program, tracepoint): (&'static str, &'static str),
    ) -> Result<(), XdpError> {
        let watcher: &mut BtfTracePoint = self
            .ebpf
            .program_mut(program)
            .and_then(|p| p.try_into().ok())
            .ok_or_else(|| XdpError::Load {
                program,
                reason: "not a BTF tracepoint program in the object".into(),
            })?;
        let load_error = |e: aya::programs::ProgramError| XdpError::Load {
            program,
            reason: error_chain(&e),
        };
        watcher.load(tracepoint, &self.btf).map_err(load_error)?;
        watcher.attach().map_err(load_error)?;
        Ok(())
    }

    /// What was dropped so far, over all CPUs.
    pub fn drops(&self) -> Result<TxDrops, XdpError> {
        let per_cpu = self.counts.get(&0, 0).map_err(|e| XdpError::Map {
            map: "watch_counts",
            reason: error_chain(&e),
        })?;
        let mut drops = TxDrops {
            flushes_watched: self.flushes,
            ..TxDrops::default()
        };
        for [refused, queue_full, not_queued, last_err] in per_cpu.iter() {
            drops.refused += refused;
            drops.queue_full += queue_full;
            drops.not_queued += not_queued;
            if *last_err != 0 {
                drops.last_err = *last_err as i64 as i32;
            }
        }
        Ok(drops)
    }
}
