//! The redirect program: packets of a queue go to the AF_XDP socket registered for it. Its
//! spilling variant (bpf/xsk_spill.c) sends them to a BPF ring buffer instead while the
//! socket's user falls behind. Where another process already runs the plain one on the
//! interface, a process joins it (`join.rs`) and serves its own queues through it.

use std::os::fd::{AsFd, OwnedFd, RawFd};

use crate::join::{self, Joined, PROGRAM, SharedProgram};
use crate::{AttachMode, XdpError, error_chain, load_attached};
use aya::maps::{Map, MapData, RingBuf, XskMap};

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xsk_redirect.o"));
const SPILL_OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xsk_spill.o"));
const SPILL_PROGRAM: &str = "xsk_spill";

/// The spill rings in the spilling variant (`SPILL_RINGS` of bpf/xsk_spill.c): one for each
/// receiving thread, at most.
pub const SPILL_RINGS: u32 = 16;

/// The least a ring buffer can be: the size of the rings no thread reads.
const UNUSED_RING: u32 = 4096;

/// The name of spill ring `ring` in the object.
fn spill_map(ring: u32) -> String {
    match ring {
        0 => "spill".to_string(),
        n => format!("spill{n}"),
    }
}

/// The redirect program on one interface: loaded and attached by this process (detached
/// when dropped), or another process's that this one joined (it goes when the last process
/// sharing it lets go).
pub struct XskProgram {
    program: Program,
    iface: String,
    mode: AttachMode,
}

enum Program {
    Own(aya::Ebpf),
    Joined(Joined),
}

impl XskProgram {
    /// Joins wirespeed's redirect program where another process runs it on `iface` (in its
    /// mode, whatever `mode` asks: see `mode` and `shared`); else loads the program and
    /// attaches it.
    pub fn attach(iface: &str, mode: AttachMode, force: bool) -> Result<XskProgram, XdpError> {
        let ifindex = wirespeed_xsk::if_index(iface)
            .ok_or_else(|| XdpError::NoInterface(iface.to_string()))?;
        if let Some(joined) = join::join(iface, ifindex)? {
            return Ok(XskProgram::joined(iface, joined));
        }
        match load_attached(OBJECT, PROGRAM, &[], iface, mode, force) {
            Ok(ebpf) => Ok(XskProgram {
                program: Program::Own(ebpf),
                iface: iface.to_string(),
                mode,
            }),
            // Another process starting at the same moment attached it first: join that.
            Err(e @ XdpError::ForeignProgram { .. }) => match join::join(iface, ifindex)? {
                Some(joined) => Ok(XskProgram::joined(iface, joined)),
                None => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    fn joined(iface: &str, joined: Joined) -> XskProgram {
        XskProgram {
            mode: joined.shared.mode,
            program: Program::Joined(joined),
            iface: iface.to_string(),
        }
    }

    /// Loads and attaches the spilling variant, with `rings` spill rings (one for each
    /// thread that receives, at most `SPILL_RINGS`) of `spill_bytes` each (a power of two,
    /// at least a page). Until `SpillLevels::enable` it redirects like `attach`'s. Never
    /// shared: its rings and levels serve one process.
    pub fn attach_spilling(
        iface: &str,
        mode: AttachMode,
        force: bool,
        spill_bytes: u32,
        rings: u32,
    ) -> Result<XskProgram, XdpError> {
        if !spill_bytes.is_power_of_two() || spill_bytes < 4096 {
            return Err(XdpError::Map {
                map: "spill",
                reason: format!("size {spill_bytes} is not a power of two of at least 4096"),
            });
        }
        if !(1..=SPILL_RINGS).contains(&rings) {
            return Err(XdpError::Map {
                map: "spill",
                reason: format!("{rings} spill rings: the program has 1 to {SPILL_RINGS}"),
            });
        }
        let names: Vec<String> = (0..SPILL_RINGS).map(spill_map).collect();
        let sizes: Vec<(&str, u32)> = names
            .iter()
            .enumerate()
            .map(|(r, name)| {
                let size = if (r as u32) < rings {
                    spill_bytes
                } else {
                    UNUSED_RING
                };
                (name.as_str(), size)
            })
            .collect();
        Ok(XskProgram {
            program: Program::Own(load_attached(
                SPILL_OBJECT,
                SPILL_PROGRAM,
                &sizes,
                iface,
                mode,
                force,
            )?),
            iface: iface.to_string(),
            mode,
        })
    }

    pub fn iface(&self) -> &str {
        &self.iface
    }

    pub fn mode(&self) -> AttachMode {
        self.mode
    }

    /// The program another process attached, when this one joined it rather than attaching
    /// its own.
    pub fn shared(&self) -> Option<&SharedProgram> {
        match &self.program {
            Program::Own(_) => None,
            Program::Joined(j) => Some(&j.shared),
        }
    }

    /// Sends the packets of `queue` to the socket `fd`.
    pub fn register(&mut self, queue: u32, fd: RawFd) -> Result<(), XdpError> {
        let result = match &mut self.program {
            Program::Own(ebpf) => {
                let map = ebpf.map_mut("xsks").ok_or(XdpError::Map {
                    map: "xsks",
                    reason: "not in the object".to_string(),
                })?;
                let mut xsks: XskMap<_> = XskMap::try_from(map).map_err(|e| XdpError::Map {
                    map: "xsks",
                    reason: error_chain(&e),
                })?;
                xsks.set(queue, fd, 0)
            }
            Program::Joined(j) => j.xsks.set(queue, fd, 0),
        };
        result.map_err(|e| XdpError::Map {
            map: "xsks",
            reason: format!("register queue {queue}: {}", error_chain(&e)),
        })
    }

    /// The spilling variant's ring `ring` and its levels array (a descriptor to map, see
    /// `wirespeed_xsk::SpillLevels`). Each ring is taken once, by the one thread that reads
    /// it (a ring buffer has one consumer); the levels, shared by queue, by each of them.
    pub fn take_spill(&mut self, ring: u32) -> Result<(SpillRing, OwnedFd), XdpError> {
        let missing = |map: &'static str| XdpError::Map {
            map,
            reason: "not in the program (attach it with attach_spilling)".to_string(),
        };
        let Program::Own(ebpf) = &mut self.program else {
            return Err(missing("levels"));
        };
        let levels = match ebpf.map("levels") {
            Some(Map::Array(data)) => data,
            _ => return Err(missing("levels")),
        };
        let levels_fd = levels
            .fd()
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| XdpError::Map {
                map: "levels",
                reason: e.to_string(),
            })?;
        let ring = ebpf
            .take_map(&spill_map(ring))
            .ok_or_else(|| XdpError::Map {
                map: "spill",
                reason: format!("ring {ring}: not in the program, or already taken"),
            })?;
        let ring = RingBuf::try_from(ring).map_err(|e| XdpError::Map {
            map: "spill",
            reason: error_chain(&e),
        })?;
        Ok((SpillRing { ring }, levels_fd))
    }
}

/// Bytes in front of each spilled packet: `struct spill_head` of bpf/xsk_spill.c.
const SPILL_HEAD: usize = 16;

/// A packet the program spilled: its queue, how many of that queue's packets went to the
/// socket before it, and its bytes.
#[derive(Debug, Clone, Copy)]
pub struct SpillRecord<'a> {
    pub queue: u32,
    pub before: u64,
    pub packet: &'a [u8],
}

/// The spill program's ring buffer, read in order.
pub struct SpillRing {
    ring: RingBuf<MapData>,
}

impl SpillRing {
    /// Hands the oldest record to `take` and frees its room; None when the ring is empty.
    /// A record shorter than it says (never written so by our program) comes as Err, its
    /// room freed all the same.
    pub fn pop<R>(&mut self, take: impl FnOnce(SpillRecord<'_>) -> R) -> Option<Result<R, ()>> {
        let item = self.ring.next()?;
        let bytes: &[u8] = &item;
        let Some(head) = bytes.get(..SPILL_HEAD) else {
            return Some(Err(()));
        };
        let before = u64::from_ne_bytes(head[0..8].try_into().unwrap_or_default());
        let len = u32::from_ne_bytes(head[8..12].try_into().unwrap_or_default()) as usize;
        let queue = u32::from_ne_bytes(head[12..16].try_into().unwrap_or_default());
        Some(match bytes.get(SPILL_HEAD..SPILL_HEAD + len) {
            Some(packet) => Ok(take(SpillRecord {
                queue,
                before,
                packet,
            })),
            None => Err(()),
        })
    }
}
