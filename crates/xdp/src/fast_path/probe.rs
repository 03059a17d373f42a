//! The fast path's parser run by the kernel on a frame, for tests: the program is built a
//! second time with its result exported (`switch_fast_path_probe.o`), loaded without being
//! attached anywhere, and run with BPF_PROG_RUN on loopback's index, so its key can be
//! compared with [`super::fast_key`]'s byte for byte.

use aya::maps::Array;
use aya::programs::{TestRun, TestRunOptions};

use super::{FastKey, KEY_LEN};
use crate::{XdpError, error_chain, load_program, xdp_program};

const OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/switch_fast_path_probe.o"));
const PROGRAM: &str = "switch_fast_path";
/// Loopback's index: the run needs a device of this namespace to receive on.
pub const PROBE_IFINDEX: u32 = 1;

/// `struct fp_probe`: accepted (u32), then the key.
type ProbeValue = [u8; 4 + KEY_LEN];

pub struct Probe {
    ebpf: aya::Ebpf,
}

impl Probe {
    pub fn load() -> Result<Probe, XdpError> {
        Ok(Probe {
            ebpf: load_program(OBJECT, PROGRAM)?,
        })
    }

    /// The key the kernel's parser makes of `frame` (at least 14 bytes) received on
    /// [`PROBE_IFINDEX`], or `None` when it does not take the frame.
    pub fn key_of(&mut self, frame: &[u8]) -> Result<Option<FastKey>, XdpError> {
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index.
        let mut ctx = [0u8; 24];
        ctx[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        ctx[12..16].copy_from_slice(&PROBE_IFINDEX.to_ne_bytes());
        let prog = xdp_program(&mut self.ebpf, PROGRAM)?;
        let opts = TestRunOptions {
            data_in: Some(frame),
            ctx_in: Some(&ctx),
            repeat: 1,
            ..TestRunOptions::new()
        };
        prog.test_run(opts).map_err(|e| XdpError::Run {
            iface: "lo".to_string(),
            reason: error_chain(&e),
        })?;
        let map = self.ebpf.map("fp_probe").ok_or(XdpError::Map {
            map: "fp_probe",
            reason: "not in the object".to_string(),
        })?;
        let array: Array<_, ProbeValue> = Array::try_from(map).map_err(|e| XdpError::Map {
            map: "fp_probe",
            reason: error_chain(&e),
        })?;
        let value = array.get(&0, 0).map_err(|e| XdpError::Map {
            map: "fp_probe",
            reason: error_chain(&e),
        })?;
        if value[0..4] == [0, 0, 0, 0] {
            return Ok(None);
        }
        let mut key = [0u8; KEY_LEN];
        key.copy_from_slice(&value[4..]);
        Ok(Some(key))
    }
}
