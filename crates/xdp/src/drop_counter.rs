//! The in-kernel drop counter: drops every packet in XDP and counts it (the ceiling).

use aya::maps::PerCpuArray;

use crate::{AttachMode, XdpError, error_chain, load_attached};

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_drop.o"));
const PROGRAM: &str = "xdp_drop";

/// One CPU's `struct drop_count` of bpf/xdp_drop.c: packets, then bytes (two u64s, read as
/// an array so no unsafe Pod impl is needed).
type DropCount = [u64; 2];

/// The drop program attached to one interface; detached when dropped.
pub struct DropCounter {
    ebpf: aya::Ebpf,
}

impl DropCounter {
    pub fn attach(iface: &str, mode: AttachMode, force: bool) -> Result<DropCounter, XdpError> {
        Ok(DropCounter {
            ebpf: load_attached(OBJECT, PROGRAM, &[], iface, mode, force)?,
        })
    }

    /// Packets and bytes dropped so far, summed over the CPUs.
    pub fn read(&self) -> Result<(u64, u64), XdpError> {
        let map = self.ebpf.map("drops").ok_or(XdpError::Map {
            map: "drops",
            reason: "not in the object".to_string(),
        })?;
        let arr: PerCpuArray<_, DropCount> =
            PerCpuArray::try_from(map).map_err(|e| XdpError::Map {
                map: "drops",
                reason: error_chain(&e),
            })?;
        let values = arr.get(&0, 0).map_err(|e| XdpError::Map {
            map: "drops",
            reason: error_chain(&e),
        })?;
        Ok(values
            .iter()
            .fold((0, 0), |(p, b), [cp, cb]| (p + cp, b + cb)))
    }
}
