//! The kernel transmit engine: BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES. The kernel
//! builds each frame from our template and sends it out of the interface by XDP_TX, so
//! no socket, ring or copy to user space is on the way.

use aya::programs::{TestRun, TestRunAttrs, TestRunOptions};

use crate::{XdpError, error_chain, load_program, xdp_program};

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_live_tx.o"));
const PROGRAM: &str = "xdp_live_tx";

/// The loaded engine, bound to one interface (by index).
pub struct LiveFrames {
    ebpf: aya::Ebpf,
    iface: String,
    ifindex: u32,
}

impl LiveFrames {
    pub fn new(iface: &str, ifindex: u32) -> Result<LiveFrames, XdpError> {
        Ok(LiveFrames {
            ebpf: load_program(OBJECT, PROGRAM)?,
            iface: iface.to_string(),
            ifindex,
        })
    }

    /// Sends `frame` `repeat` times out of the interface, `batch` frames per kernel batch
    /// (0: the kernel's default of 64). Blocks until the kernel is done.
    pub fn send(&mut self, frame: &[u8], repeat: u32, batch: u32) -> Result<(), XdpError> {
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex. XDP_TX in a live run leaves through the ingress interface.
        let mut ctx = [0u8; 24];
        ctx[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        ctx[12..16].copy_from_slice(&self.ifindex.to_ne_bytes());
        let prog = xdp_program(&mut self.ebpf, PROGRAM)?;
        let opts = TestRunOptions {
            data_in: Some(frame),
            ctx_in: Some(&ctx),
            repeat,
            attrs: TestRunAttrs::new().xdp_live_frames(batch),
            ..TestRunOptions::new()
        };
        prog.test_run(opts).map_err(|e| XdpError::Run {
            iface: self.iface.clone(),
            reason: error_chain(&e),
        })?;
        Ok(())
    }
}
