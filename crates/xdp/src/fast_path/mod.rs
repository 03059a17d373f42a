//! The switch's in-kernel fast path (bpf/switch_fast_path.c): one program attached to every
//! AF_XDP port of a bridge, its flow table, and the sockets it sends the rest to.

mod classes;
mod key;
mod probe;

pub use classes::{CLASSES, Classes, class_of};
pub use key::{FastKey, KEY_LEN, KeyFields, fast_key, key_fields};
pub use probe::{PROBE_IFINDEX, Probe};

use std::os::fd::RawFd;

use aya::Btf;
use aya::maps::{Array, ArrayOfMaps, DevMap, HashMap, MapData, PerCpuArray, XskMap};
use aya::programs::BtfTracePoint;
use aya::programs::xdp::XdpLinkId;

use crate::{AttachMode, XdpError, attach, error_chain, load_program, xdp_program};

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/switch_fast_path.o"));
const PROGRAM: &str = "switch_fast_path";

/// Ports the program serves (MAX_PORTS) and queues per port (MAX_QUEUES).
pub const MAX_PORTS: u32 = 64;
pub const MAX_QUEUES: u32 = 64;

/// `struct fp_action`: out slot and class (two u16), then generation (u32) in one word,
/// packets, bytes, TCP flags.
type ActionWords = [u64; 4];
/// `struct fp_validity`: the generation (u32, first in memory) and padding, then the classes
/// stopped.
type ValidityWords = [u64; 2];
/// `struct fp_tx`: frames failed, then the last error (i32, first in memory) and padding.
type TxWords = [u64; 2];
/// `struct fp_config`: the namespace cookie, then fp_devs' map id (u32, first in memory)
/// and padding.
type ConfigWords = [u64; 2];

/// The tracepoints that tell the program of transmits that failed after its redirects.
const WATCHERS: [(&str, &str); 2] = [
    ("fp_devmap_xmit", "xdp_devmap_xmit"),
    ("fp_redirect_err", "xdp_redirect_err"),
];

/// What the kernel failed to send out of one port after the program redirected there.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxFailures {
    /// Frames dropped.
    pub frames: u64,
    /// The last error the device gave (a negative errno), 0 for none: a partial send.
    pub err: i32,
    /// The device refused a whole batch: the program sends the port's flows up to user
    /// space until [`FastPath::unblock`].
    pub blocked: bool,
}

/// What one flow entry counted in the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowCounts {
    pub packets: u64,
    pub bytes: u64,
    /// TCP's flags of every packet it forwarded, ORed (12 bits, as the flow's `tcp_flags`).
    pub tcp_flags: u16,
}

/// The program's own counters, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FastPathCounters {
    /// Packets forwarded in the kernel.
    pub hits: u64,
    /// Packets sent up to a socket (not those of queues without one, which go to the stack
    /// uncounted).
    pub misses: u64,
    /// Of those, packets whose entry was stale (by a rule change, or suspended while one
    /// was made)...
    pub stale: u64,
    /// ...and packets whose entry sends to a blocked port ([`TxFailures::blocked`]).
    pub blocked: u64,
}

/// The program attached to a bridge's interfaces; detached from all when dropped.
pub struct FastPath {
    flows: HashMap<MapData, FastKey, ActionWords>,
    validity: Array<MapData, ValidityWords>,
    ports: HashMap<MapData, u32, u32>,
    xsks: XskMap<MapData>,
    devs: DevMap<MapData>,
    devs_id: u32,
    tx: Array<MapData, TxWords>,
    blocked: Array<MapData, u32>,
    config: Array<MapData, ConfigWords>,
    counters: PerCpuArray<MapData, u64>,
    barrier: ProgramBarrier,
    /// What fp_validity holds: entries of another generation are stale, and those of the
    /// classes `stopped` are not forwarded on for now.
    generation: u32,
    stopped: Classes,
    mode: AttachMode,
    /// The program's attachment to each port's interface, by slot (None once detached).
    links: Vec<Option<XdpLinkId>>,
    // Dropped last: detaching the program from every interface (and the tracepoints).
    ebpf: aya::Ebpf,
}

fn map_error(map: &'static str) -> impl Fn(aya::maps::MapError) -> XdpError {
    move |e| XdpError::Map {
        map,
        reason: error_chain(&e),
    }
}

fn take<T: TryFrom<aya::maps::Map, Error = aya::maps::MapError>>(
    ebpf: &mut aya::Ebpf,
    map: &'static str,
) -> Result<T, XdpError> {
    let m = ebpf.take_map(map).ok_or(XdpError::Map {
        map,
        reason: "not in the object".to_string(),
    })?;
    T::try_from(m).map_err(map_error(map))
}

/// A map of the object as plain map data (for the barrier's inner map).
fn take_data(ebpf: &mut aya::Ebpf, map: &'static str) -> Result<MapData, XdpError> {
    match ebpf.take_map(map) {
        Some(aya::maps::Map::Array(data)) => Ok(data),
        _ => Err(XdpError::Map {
            map,
            reason: "not an array in the object".to_string(),
        }),
    }
}

/// Waits for the program: updating a map-in-map (fp_barrier) returns only after every run
/// of a BPF program in progress at the time has ended (an RCU grace period, about 10 ms).
/// [`FastPath::barrier`] gives a second handle, for a caller that waits outside the lock
/// the fast path is kept under.
pub struct ProgramBarrier {
    outer: ArrayOfMaps<MapData>,
    inner: MapData,
    ids: (u32, u32),
}

impl ProgramBarrier {
    fn new(outer: ArrayOfMaps<MapData>, inner: MapData, ids: (u32, u32)) -> ProgramBarrier {
        ProgramBarrier { outer, inner, ids }
    }

    /// Returns when no program run that started before the call is still going.
    pub fn wait(&mut self) -> Result<(), XdpError> {
        self.outer
            .set(0, &self.inner, 0)
            .map_err(map_error("fp_barrier"))
    }

    /// Another handle on the same maps (new descriptors).
    fn reopen(&self) -> Result<ProgramBarrier, XdpError> {
        let outer = MapData::from_id(self.ids.0).map_err(map_error("fp_barrier"))?;
        let inner = MapData::from_id(self.ids.1).map_err(map_error("fp_barrier_inner"))?;
        let outer = ArrayOfMaps::try_from(aya::maps::Map::ArrayOfMaps(outer))
            .map_err(map_error("fp_barrier"))?;
        Ok(ProgramBarrier::new(outer, inner, self.ids))
    }
}

fn map_id(data: &MapData, map: &'static str) -> Result<u32, XdpError> {
    Ok(data.info().map_err(map_error(map))?.id())
}

fn take_barrier(ebpf: &mut aya::Ebpf) -> Result<ProgramBarrier, XdpError> {
    let inner = take_data(ebpf, "fp_barrier_inner")?;
    let outer = match ebpf.take_map("fp_barrier") {
        Some(map @ aya::maps::Map::ArrayOfMaps(_)) => map,
        _ => {
            return Err(XdpError::Map {
                map: "fp_barrier",
                reason: "not an array of maps in the object".to_string(),
            });
        }
    };
    let outer_id = match &outer {
        aya::maps::Map::ArrayOfMaps(data) => map_id(data, "fp_barrier")?,
        _ => unreachable!("matched above"),
    };
    let ids = (outer_id, map_id(&inner, "fp_barrier_inner")?);
    let outer = ArrayOfMaps::try_from(outer).map_err(map_error("fp_barrier"))?;
    Ok(ProgramBarrier::new(outer, inner, ids))
}

impl FastPath {
    /// Loads the program and attaches it to every interface of `ifaces` in `mode`; with
    /// `fall_back`, an interface where native mode fails makes all of them skb mode.
    pub fn attach(
        ifaces: &[&str],
        mode: AttachMode,
        fall_back: bool,
        force: bool,
    ) -> Result<FastPath, XdpError> {
        match FastPath::attach_in(ifaces, mode, force) {
            Err(
                e @ (XdpError::ForeignProgram { .. }
                | XdpError::ForceFailed { .. }
                | XdpError::NoInterface(_)),
            ) => Err(e),
            Err(_) if fall_back && mode == AttachMode::Native => {
                FastPath::attach_in(ifaces, AttachMode::Skb, force)
            }
            other => other,
        }
    }

    fn attach_in(ifaces: &[&str], mode: AttachMode, force: bool) -> Result<FastPath, XdpError> {
        let mut ebpf = load_program(OBJECT, PROGRAM)?;
        let program = xdp_program(&mut ebpf, PROGRAM)?;
        let mut links = Vec::with_capacity(ifaces.len());
        for iface in ifaces {
            links.push(Some(attach::attach(program, PROGRAM, iface, mode, force)?));
        }
        let (devs, devs_id) = match ebpf.take_map("fp_devs") {
            Some(aya::maps::Map::DevMap(data)) => {
                let id = map_id(&data, "fp_devs")?;
                let devs =
                    DevMap::try_from(aya::maps::Map::DevMap(data)).map_err(map_error("fp_devs"))?;
                (devs, id)
            }
            _ => {
                return Err(XdpError::Map {
                    map: "fp_devs",
                    reason: "not a device map in the object".to_string(),
                });
            }
        };
        Ok(FastPath {
            flows: take(&mut ebpf, "fp_flows")?,
            validity: take(&mut ebpf, "fp_validity")?,
            ports: take(&mut ebpf, "fp_ports")?,
            xsks: take(&mut ebpf, "xsks")?,
            devs,
            devs_id,
            tx: take(&mut ebpf, "fp_tx")?,
            blocked: take(&mut ebpf, "fp_blocked")?,
            config: take(&mut ebpf, "fp_config")?,
            counters: take(&mut ebpf, "fp_counters")?,
            barrier: take_barrier(&mut ebpf)?,
            generation: 0,
            stopped: Classes::NONE,
            mode,
            links,
            ebpf,
        })
    }

    /// Takes the program off the interface of port `slot`, which went away: deleted, or
    /// moved to another network namespace, where it would send what it receives to a
    /// socket bound to nothing (its new owner could not take it off either). The fast path
    /// does not take a port back. Done already when it was detached.
    pub fn detach_port(&mut self, slot: u32) -> Result<(), XdpError> {
        let Some(link) = self.links.get_mut(slot as usize).and_then(Option::take) else {
            return Ok(());
        };
        xdp_program(&mut self.ebpf, PROGRAM)?
            .detach(link)
            .map_err(|e| XdpError::Detach {
                slot,
                program: PROGRAM,
                reason: error_chain(&e),
            })
    }

    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// Makes `ifindex` port `slot` (`slot < MAX_PORTS`): a place to send packets to, and a
    /// place whose sockets receive what the kernel does not forward.
    pub fn add_port(&mut self, slot: u32, ifindex: u32) -> Result<(), XdpError> {
        self.ports
            .insert(ifindex, slot, 0)
            .map_err(map_error("fp_ports"))?;
        self.devs
            .set(slot, ifindex, None, 0)
            .map_err(|e| XdpError::Map {
                map: "fp_devs",
                reason: error_chain(&e),
            })
    }

    /// Watches the kernel's transmits after the program's redirects (tracepoints
    /// xdp_devmap_xmit and xdp_redirect_err, in the network namespace of `netns_cookie`):
    /// frames dropped are counted per port ([`FastPath::tx_failures`]), and a port that
    /// refuses them all is blocked at once, so its flows go to user space, not into a hole.
    /// Needs the kernel's BTF (/sys/kernel/btf/vmlinux).
    pub fn watch_transmits(&mut self, netns_cookie: u64) -> Result<(), XdpError> {
        let mut id = [0u8; 8];
        id[..4].copy_from_slice(&self.devs_id.to_ne_bytes());
        self.config
            .set(0, [netns_cookie, u64::from_ne_bytes(id)], 0)
            .map_err(map_error("fp_config"))?;
        let btf = Btf::from_sys_fs().map_err(|e| XdpError::Load {
            program: "fp_devmap_xmit",
            reason: format!("the kernel's BTF: {}", error_chain(&e)),
        })?;
        for (program, tracepoint) in WATCHERS {
            self.watcher(program)?
                .load(tracepoint, &btf)
                .map_err(|e| XdpError::Load {
                    program,
                    reason: error_chain(&e),
                })?;
        }
        // All or none: one watcher alone would count and block on half the failures.
        let mut attached = Vec::new();
        for (program, _) in WATCHERS {
            match self.watcher(program)?.attach() {
                Ok(link) => attached.push((program, link)),
                Err(e) => {
                    for (program, link) in attached {
                        let _ = self.watcher(program).map(|p| p.detach(link));
                    }
                    return Err(XdpError::Load {
                        program,
                        reason: error_chain(&e),
                    });
                }
            }
        }
        Ok(())
    }

    fn watcher(&mut self, program: &'static str) -> Result<&mut BtfTracePoint, XdpError> {
        self.ebpf
            .program_mut(program)
            .and_then(|p| p.try_into().ok())
            .ok_or_else(|| XdpError::Load {
                program,
                reason: "not a BTF tracepoint program in the object".into(),
            })
    }

    /// What the kernel failed to send out of port `slot` so far.
    pub fn tx_failures(&self, slot: u32) -> Result<TxFailures, XdpError> {
        // The flag first: the program writes the error before it, so a blocked port's error
        // is in the counts read after it.
        let blocked = self
            .blocked
            .get(&slot, 0)
            .map_err(map_error("fp_blocked"))?;
        let [frames, word] = self.tx.get(&slot, 0).map_err(map_error("fp_tx"))?;
        let word = word.to_ne_bytes();
        Ok(TxFailures {
            frames,
            err: i32::from_ne_bytes([word[0], word[1], word[2], word[3]]),
            blocked: blocked != 0,
        })
    }

    /// Lets the program forward to port `slot` again (to see whether it takes frames now).
    pub fn unblock(&mut self, slot: u32) -> Result<(), XdpError> {
        self.blocked
            .set(slot, 0, 0)
            .map_err(map_error("fp_blocked"))
    }

    /// Sends what port `slot` receives on `queue` and the kernel does not forward to `fd`.
    pub fn register(&mut self, slot: u32, queue: u32, fd: RawFd) -> Result<(), XdpError> {
        if queue >= MAX_QUEUES {
            return Err(XdpError::Map {
                map: "xsks",
                reason: format!(
                    "queue {queue}: the fast path serves queues 0-{}",
                    MAX_QUEUES - 1
                ),
            });
        }
        self.xsks
            .set(slot * MAX_QUEUES + queue, fd, 0)
            .map_err(map_error("xsks"))
    }

    /// Forwards packets with `key` out of port `out_slot` from now on (once its class is
    /// not stopped: install none while one is), counting them; false when the table is full.
    pub fn install(&mut self, key: &FastKey, out_slot: u32) -> Result<bool, XdpError> {
        debug_assert!(out_slot < MAX_PORTS);
        let mut head = [0u8; 8];
        head[..2].copy_from_slice(&(out_slot as u16).to_ne_bytes());
        head[2..4].copy_from_slice(&(class_of(key) as u16).to_ne_bytes());
        head[4..].copy_from_slice(&self.generation.to_ne_bytes());
        let words = [u64::from_ne_bytes(head), 0, 0, 0];
        match self.flows.insert(key, words, 0) {
            Ok(()) => Ok(true),
            Err(aya::maps::MapError::SyscallError(s))
                if matches!(s.io_error.raw_os_error(), Some(libc::E2BIG | libc::ENOMEM)) =>
            {
                Ok(false)
            }
            Err(e) => Err(map_error("fp_flows")(e)),
        }
    }

    /// What the entry of `key` has counted (zero when there is none).
    pub fn counts(&self, key: &FastKey) -> Result<FlowCounts, XdpError> {
        match self.flows.get(key, 0) {
            Ok([_, packets, bytes, tcp_flags]) => Ok(FlowCounts {
                packets,
                bytes,
                tcp_flags: tcp_flags as u16,
            }),
            Err(aya::maps::MapError::KeyNotFound) => Ok(FlowCounts::default()),
            Err(e) => Err(map_error("fp_flows")(e)),
        }
    }

    /// Removes the entry of `key`, if there is one.
    pub fn remove(&mut self, key: &FastKey) -> Result<(), XdpError> {
        match self.flows.remove(key) {
            Ok(()) | Err(aya::maps::MapError::KeyNotFound) => Ok(()),
            Err(e) => Err(map_error("fp_flows")(e)),
        }
    }

    /// Whether the entry of `key` is valid now, neither stale nor of a stopped class (as the
    /// kernel's maps say): the program forwards on it unless its output port is blocked
    /// ([`TxFailures::blocked`]).
    pub fn forwards(&self, key: &FastKey) -> Result<bool, XdpError> {
        let head = match self.flows.get(key, 0) {
            Ok([head, ..]) => head.to_ne_bytes(),
            Err(aya::maps::MapError::KeyNotFound) => return Ok(false),
            Err(e) => return Err(map_error("fp_flows")(e)),
        };
        let [word, stopped] = self.validity.get(&0, 0).map_err(map_error("fp_validity"))?;
        let word = word.to_ne_bytes();
        let class = u16::from_ne_bytes([head[2], head[3]]);
        let generation = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]);
        let valid = u32::from_ne_bytes([word[0], word[1], word[2], word[3]]);
        Ok(generation == valid && stopped >> (u32::from(class) % CLASSES) & 1 == 0)
    }

    /// Has the program forward on the entries of `generation` but those of the classes
    /// `stopped`.
    fn set_validity(&mut self, generation: u32, stopped: Classes) -> Result<(), XdpError> {
        let mut word = [0u8; 8];
        word[..4].copy_from_slice(&generation.to_ne_bytes());
        self.validity
            .set(0, [u64::from_ne_bytes(word), stopped.bits()], 0)
            .map_err(map_error("fp_validity"))?;
        (self.generation, self.stopped) = (generation, stopped);
        Ok(())
    }

    /// Makes every entry installed so far stale at once. When this returns, no packet is
    /// being forwarded or counted on them any more, not even one the program was handling
    /// during the change (they keep their final counts until removed).
    pub fn invalidate_all(&mut self) -> Result<(), XdpError> {
        // The classes stopped stay stopped until the program was waited for: a run that read
        // the old generation and then the new classes would forward on a stopped entry.
        let generation = self.generation.wrapping_add(1);
        self.set_validity(generation, self.stopped)?;
        self.barrier.wait()?;
        self.set_validity(generation, Classes::NONE)
    }

    /// Stops the kernel forwarding on the entries of the classes `classes` for now, as
    /// [`FastPath::invalidate_all`] does, but keeps them: [`FastPath::resume`] makes those
    /// still there valid again (so install none meanwhile: it would be valid then too). The
    /// other classes' entries go on forwarding. Waits for the program only if a class was
    /// not stopped already.
    pub fn suspend(&mut self, classes: Classes) -> Result<(), XdpError> {
        let before = self.stopped;
        if classes.minus(before).is_empty() {
            return Ok(());
        }
        self.set_validity(self.generation, before.union(classes))?;
        // A class counts as stopped once the program was waited for: a failed wait leaves
        // it to be waited for by the next stop.
        self.barrier.wait().inspect_err(|_| self.stopped = before)
    }

    /// The classes stopped now (and the program waited for since).
    pub fn stopped(&self) -> Classes {
        self.stopped
    }

    /// The kernel forwards on the entries of the classes `classes` again (after
    /// [`FastPath::suspend`]).
    pub fn resume(&mut self, classes: Classes) -> Result<(), XdpError> {
        if classes.is_empty() {
            return Ok(());
        }
        self.set_validity(self.generation, self.stopped.minus(classes))
    }

    /// A handle that waits for the program (see [`ProgramBarrier`]) without this.
    pub fn barrier(&self) -> Result<ProgramBarrier, XdpError> {
        self.barrier.reopen()
    }

    pub fn counters(&self) -> Result<FastPathCounters, XdpError> {
        let sum = |which: u32| -> Result<u64, XdpError> {
            let values = self
                .counters
                .get(&which, 0)
                .map_err(map_error("fp_counters"))?;
            Ok(values.iter().sum())
        };
        Ok(FastPathCounters {
            hits: sum(0)?,
            misses: sum(1)?,
            stale: sum(2)?,
            blocked: sum(3)?,
        })
    }
}
