//! The kernel transmit engine: BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES. The kernel
//! builds each frame from our template and sends it out of the interface by XDP_TX, so
//! no socket, ring or copy to user space is on the way.

use aya::maps::Array;
use aya::programs::{TestRun, TestRunAttrs, TestRunOptions};

use crate::{XdpError, error_chain, load_program, xdp_program};

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_live_tx.o"));
const PROGRAM: &str = "xdp_live_tx";
const FLOWS_PROGRAM: &str = "xdp_live_flows";

/// The loaded engine, bound to one interface (by index).
pub struct LiveFrames {
    ebpf: aya::Ebpf,
    program: &'static str,
    iface: String,
    ifindex: u32,
}

/// `struct live_flows` of bpf/xdp_live_tx.c, as bytes.
type FlowConfig = [u8; 24];

impl LiveFrames {
    /// An engine that sends the frames it is given as they are.
    pub fn new(iface: &str, ifindex: u32) -> Result<LiveFrames, XdpError> {
        Ok(LiveFrames {
            ebpf: load_program(OBJECT, PROGRAM)?,
            program: PROGRAM,
            iface: iface.to_string(),
            ifindex,
        })
    }

    /// An engine that turns `template` (the frame it will be given) into `flows` flows: frame
    /// k of a CPU gets source port `p + k % (65536 - p)` and source address `a + k / (65536 -
    /// p)`, where `p` and `a` are the template's, k cycling through 0..flows, checksums
    /// updated. The template must be Ethernet (one 802.1Q tag at most) / IPv4 without options
    /// / UDP or TCP.
    pub fn with_flows(
        iface: &str,
        ifindex: u32,
        template: &[u8],
        flows: u32,
    ) -> Result<LiveFrames, XdpError> {
        let config = flow_config(template, flows).ok_or_else(|| XdpError::Run {
            iface: iface.to_string(),
            reason: "the kernel engine varies flows of IPv4 UDP or TCP frames only".to_string(),
        })?;
        let mut ebpf = load_program(OBJECT, FLOWS_PROGRAM)?;
        let map = ebpf.map_mut("live_flows").ok_or(XdpError::Map {
            map: "live_flows",
            reason: "not in the object".to_string(),
        })?;
        let mut array: Array<_, FlowConfig> = Array::try_from(map).map_err(|e| XdpError::Map {
            map: "live_flows",
            reason: error_chain(&e),
        })?;
        array.set(0, config, 0).map_err(|e| XdpError::Map {
            map: "live_flows",
            reason: error_chain(&e),
        })?;
        Ok(LiveFrames {
            ebpf,
            program: FLOWS_PROGRAM,
            iface: iface.to_string(),
            ifindex,
        })
    }

    /// Whether [`LiveFrames::with_flows`] can vary `template`.
    pub fn can_vary(template: &[u8]) -> bool {
        flow_config(template, 1).is_some()
    }

    /// Sends `frame` `repeat` times out of the interface, `batch` frames per kernel batch
    /// (0: the kernel's default of 64). Blocks until the kernel is done.
    pub fn send(&mut self, frame: &[u8], repeat: u32, batch: u32) -> Result<(), XdpError> {
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex. XDP_TX in a live run leaves through the ingress interface.
        let mut ctx = [0u8; 24];
        ctx[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        ctx[12..16].copy_from_slice(&self.ifindex.to_ne_bytes());
        let prog = xdp_program(&mut self.ebpf, self.program)?;
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

/// The program's configuration for `template`, or `None` when it is not a frame the program
/// can vary.
fn flow_config(template: &[u8], flows: u32) -> Option<FlowConfig> {
    let l3 = match template.get(12..14)? {
        [0x81, 0x00] if template.get(16..18)? == [0x08, 0x00] => 18,
        [0x08, 0x00] => 14,
        _ => return None,
    };
    let ip = template.get(l3..l3 + 20)?;
    let (l4_check, udp) = match (ip[0], ip[9]) {
        (0x45, 17) => (6usize, 1u16),
        (0x45, 6) => (16, 0),
        _ => return None,
    };
    let l4 = template.get(l3 + 20..l3 + 40)?;
    let base_port = u16::from_be_bytes([l4[0], l4[1]]);
    let base_addr = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
    let span = 65536 - u32::from(base_port);
    let mut c = [0u8; 24];
    c[0..4].copy_from_slice(&flows.to_ne_bytes());
    c[4..8].copy_from_slice(&span.to_ne_bytes());
    c[8..12].copy_from_slice(&base_addr.to_ne_bytes());
    c[12..14].copy_from_slice(&base_port.to_ne_bytes());
    c[14..16].copy_from_slice(&(l3 as u16).to_ne_bytes());
    c[16..18].copy_from_slice(&(l4_check as u16).to_ne_bytes());
    // The checksums as they lie in the frame: the program sums in frame byte order.
    c[18..20].copy_from_slice(&ip[10..12]);
    c[20..22].copy_from_slice(&l4[l4_check..l4_check + 2]);
    c[22..24].copy_from_slice(&udp.to_ne_bytes());
    Some(c)
}
