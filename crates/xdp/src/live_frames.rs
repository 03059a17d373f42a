//! The kernel transmit engine: BPF_PROG_RUN with BPF_F_TEST_XDP_LIVE_FRAMES. The kernel
//! builds each frame from our template and sends it out of the interface by XDP_TX, so
//! no socket, ring or copy to user space is on the way.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use aya::maps::{Array, MapData};
use aya::programs::{TestRun, TestRunAttrs, TestRunOptions, Xdp};

use wirespeed_packet::{EtherType, IpProtocol};

use crate::{XdpError, error_chain, load_program};

const OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/xdp_live_tx.o"));
const PROGRAM: &str = "xdp_live_tx";
const VARY_PROGRAM: &str = "xdp_live_vary";
const ETH_P_8021Q: [u8; 2] = EtherType::VLAN.0.to_be_bytes();
const ETH_P_IP: [u8; 2] = EtherType::IPV4.0.to_be_bytes();
const UDP: u8 = IpProtocol::UDP.0;
const TCP: u8 = IpProtocol::TCP.0;

/// The loaded engine, bound to one interface (by index). Threads on one CPU may share it
/// ([`LiveFrames::send_shared`]): its program then keeps one sequence of stamps for them.
pub struct LiveFrames {
    ebpf: aya::Ebpf,
    program: &'static str,
    iface: String,
    ifindex: u32,
    /// Stamped frames: the program's `live_run` map and the calls made, told to the program
    /// before each (it reads the clock afresh at the start of a call).
    run_map: Option<Mutex<Array<MapData, u32>>>,
    runs: AtomicU32,
    /// What the varying program does, and its configuration for the last frame given: it
    /// follows each frame given (see `send`).
    variation: Variation,
    config: Option<VaryConfig>,
}

/// `struct live_vary` of bpf/xdp_live_tx.c, as bytes.
type VaryConfig = [u8; 64];

/// What the kernel changes in each frame, from the template of each call ([`LiveFrames::send`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Variation {
    /// Turns the template into this many flows: frame k of a CPU gets source port `p + k %
    /// (65536 - p)` and source address `a + k / (65536 - p)` (stepping over the
    /// destination's address), where `p` and `a` are the template's, k cycling through
    /// 0..flows. The template must then be Ethernet (one
    /// 802.1Q tag at most) / IPv4 without options / UDP or TCP ([`LiveFrames::can_vary`]).
    pub flows: Option<u32>,
    pub stamp: Option<Stamp>,
}

/// Writes the test payload's generator id, sequence number (0, 1, 2... per engine) and send
/// time (CLOCK_REALTIME ns, low 48 bits) into every frame, as
/// `wirespeed_packet::TestPayload` lays them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// Where the test payload starts in the template.
    pub payload_at: usize,
    /// Where the transport checksum that covers it is; None: no checksum to update.
    pub check_at: Option<usize>,
    /// The checksum is UDP's (0 means none; a computed 0 is sent as 0xffff).
    pub udp: bool,
    pub generator: u16,
    /// CLOCK_REALTIME minus CLOCK_TAI in ns (the program reads the TAI clock).
    pub clock_offset_ns: i64,
}

impl LiveFrames {
    /// An engine that sends the frames it is given as they are.
    pub fn new(iface: &str, ifindex: u32) -> Result<LiveFrames, XdpError> {
        Ok(LiveFrames {
            ebpf: load_program(OBJECT, PROGRAM)?,
            program: PROGRAM,
            iface: iface.to_string(),
            ifindex,
            run_map: None,
            runs: AtomicU32::new(0),
            variation: Variation::default(),
            config: None,
        })
    }

    /// An engine that varies each frame it is given, frame by frame, as `variation` says;
    /// checksums are updated. `templates` are the frames it will be given, all checked here,
    /// so a run cannot fail on one of them halfway. An 802.1Q-tagged frame also gets its
    /// first 16 bytes (addresses and tag) written back each time, since a receiver that
    /// takes the tag off moves the addresses over it in the page the kernel recycles.
    pub fn varied(
        iface: &str,
        ifindex: u32,
        templates: &[&[u8]],
        variation: &Variation,
    ) -> Result<LiveFrames, XdpError> {
        let refuse = |reason: &str| XdpError::Run {
            iface: iface.to_string(),
            reason: reason.to_string(),
        };
        let first = templates
            .first()
            .ok_or_else(|| refuse("no frame to send"))?;
        for template in &templates[1..] {
            vary_config(template, variation).map_err(refuse)?;
        }
        let config = vary_config(first, variation).map_err(refuse)?;
        let mut ebpf = load_program(OBJECT, VARY_PROGRAM)?;
        let run_map = match variation.stamp {
            Some(_) => Some(Mutex::new(take_array(&mut ebpf, "live_run")?)),
            None => None,
        };
        let mut engine = LiveFrames {
            ebpf,
            program: VARY_PROGRAM,
            iface: iface.to_string(),
            ifindex,
            run_map,
            runs: AtomicU32::new(0),
            variation: *variation,
            config: None,
        };
        engine.configure(config)?;
        Ok(engine)
    }

    fn configure(&mut self, config: VaryConfig) -> Result<(), XdpError> {
        set_first(&mut self.ebpf, "live_vary", config)?;
        self.config = Some(config);
        Ok(())
    }

    /// Whether a tagged frame needs [`LiveFrames::varied`] even to be sent as it is.
    pub fn needs_restoring(frame: &[u8]) -> bool {
        frame.get(12..14) == Some(&ETH_P_8021Q)
    }

    /// Whether `template` can be turned into flows ([`Variation::flows`]).
    pub fn can_vary(template: &[u8]) -> bool {
        flow_fields(template).is_some()
    }

    /// Sends `frame` `repeat` times out of the interface, `batch` frames per kernel batch
    /// (0: the kernel's default of 64). Blocks until the kernel is done. A varying engine
    /// given frames in turn (sizes of a mix, a replay's frames) varies each from its own
    /// checksums and payload, and writes back its own tag; the sequence numbers and the
    /// flows go on from one frame to the next.
    pub fn send(&mut self, frame: &[u8], repeat: u32, batch: u32) -> Result<(), XdpError> {
        if self.config.is_some() {
            let config = vary_config(frame, &self.variation).map_err(|reason| XdpError::Run {
                iface: self.iface.clone(),
                reason: reason.to_string(),
            })?;
            if self.config != Some(config) {
                self.configure(config)?;
            }
        }
        self.run(frame, repeat, batch)
    }

    /// [`LiveFrames::send`] from threads that share the engine: it sends the frame it was
    /// made or last given for, unchanged. Calls from threads on one CPU take turns in the
    /// kernel a batch at a time, each batch stamped and sent before the next, so the
    /// stamps stay one series in order; one thread's call can go on while another's ends
    /// (the end of a call waits for an RCU grace period with the CPU idle).
    pub fn send_shared(&self, frame: &[u8], repeat: u32, batch: u32) -> Result<(), XdpError> {
        if let Some(config) = self.config
            && vary_config(frame, &self.variation) != Ok(config)
        {
            return Err(XdpError::Run {
                iface: self.iface.clone(),
                reason: "a shared engine sends only the frame it was set up for".to_string(),
            });
        }
        self.run(frame, repeat, batch)
    }

    fn run(&self, frame: &[u8], repeat: u32, batch: u32) -> Result<(), XdpError> {
        if let Some(map) = &self.run_map {
            let runs = self.runs.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
            let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
            map.set(0, runs, 0).map_err(|e| XdpError::Map {
                map: "live_run",
                reason: error_chain(&e),
            })?;
        }
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex, rx_queue_index,
        // egress_ifindex. XDP_TX in a live run leaves through the ingress interface.
        let mut ctx = [0u8; 24];
        ctx[4..8].copy_from_slice(&(frame.len() as u32).to_ne_bytes());
        ctx[12..16].copy_from_slice(&self.ifindex.to_ne_bytes());
        let prog: &Xdp = self
            .ebpf
            .program(self.program)
            .and_then(|p| p.try_into().ok())
            .ok_or(XdpError::Load {
                program: self.program,
                reason: "not an XDP program in the object".to_string(),
            })?;
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

/// Takes the array map `map` out of `ebpf`, to update it without holding the object.
fn take_array(ebpf: &mut aya::Ebpf, map: &'static str) -> Result<Array<MapData, u32>, XdpError> {
    let data = ebpf.take_map(map).ok_or(XdpError::Map {
        map,
        reason: "not in the object".to_string(),
    })?;
    Array::try_from(data).map_err(|e| XdpError::Map {
        map,
        reason: error_chain(&e),
    })
}

/// Sets entry 0 of the array map `map` of `ebpf` to `value`.
fn set_first<T: aya::Pod>(
    ebpf: &mut aya::Ebpf,
    map: &'static str,
    value: T,
) -> Result<(), XdpError> {
    let data = ebpf.map_mut(map).ok_or(XdpError::Map {
        map,
        reason: "not in the object".to_string(),
    })?;
    let mut array: Array<_, T> = Array::try_from(data).map_err(|e| XdpError::Map {
        map,
        reason: error_chain(&e),
    })?;
    array.set(0, value, 0).map_err(|e| XdpError::Map {
        map,
        reason: error_chain(&e),
    })
}

/// A receiver that takes an 802.1Q tag off moves the addresses over it in the page the
/// kernel recycles for the next frames of a call: the program puts back the first 16 bytes
/// of a tagged `frame` (and nothing for an untagged one).
fn restore_header(c: &mut VaryConfig, frame: &[u8]) {
    if LiveFrames::needs_restoring(frame) && frame.len() >= 16 {
        c[40..56].copy_from_slice(&frame[..16]);
        c[56..58].copy_from_slice(&16u16.to_ne_bytes());
    } else {
        c[40..58].fill(0);
    }
}

/// The flow fields of `template`: (offset of IPv4, offset of the transport checksum in its
/// header, UDP); None when the program cannot vary its flows.
fn flow_fields(template: &[u8]) -> Option<(usize, usize, bool)> {
    let l3 = match <[u8; 2]>::try_from(template.get(12..14)?).ok()? {
        ETH_P_8021Q if template.get(16..18)? == ETH_P_IP => 18,
        ETH_P_IP => 14,
        _ => return None,
    };
    let ip = template.get(l3..l3 + 20)?;
    let (l4_check, udp) = match (ip[0], ip[9]) {
        (0x45, UDP) => (6usize, true),
        (0x45, TCP) => (16, false),
        _ => return None,
    };
    template.get(l3 + 20..l3 + 40)?;
    Some((l3, l4_check, udp))
}

/// The program's configuration for `template` and `variation`, or why it cannot be varied so.
fn vary_config(template: &[u8], variation: &Variation) -> Result<VaryConfig, &'static str> {
    let word = |at: usize| [template[at], template[at + 1]];
    let mut c = [0u8; 64];
    let mut check_at = None;
    let mut udp = false;
    if let Some(flows) = variation.flows {
        let (l3, l4_check, is_udp) = flow_fields(template)
            .ok_or("the kernel engine varies flows of IPv4 UDP or TCP frames only")?;
        let ip = &template[l3..l3 + 20];
        let base_port = u16::from_be_bytes(word(l3 + 20));
        let base_addr = u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]);
        let span = 65536 - u32::from(base_port);
        c[0..4].copy_from_slice(&flows.to_ne_bytes());
        c[4..8].copy_from_slice(&span.to_ne_bytes());
        c[8..12].copy_from_slice(&base_addr.to_ne_bytes());
        c[12..14].copy_from_slice(&base_port.to_ne_bytes());
        c[14..16].copy_from_slice(&(l3 as u16).to_ne_bytes());
        // The address number that would be the destination's: stepped over (0: none ahead).
        let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
        let past_dst = dst.wrapping_sub(base_addr);
        c[60..64].copy_from_slice(&past_dst.to_ne_bytes());
        // The checksums as they lie in the frame: the program sums in frame byte order.
        c[18..20].copy_from_slice(&ip[10..12]);
        check_at = Some(l3 + 20 + l4_check);
        udp = is_udp;
    }
    if let Some(stamp) = &variation.stamp {
        let end = stamp.payload_at + 18;
        if end > template.len() || stamp.payload_at == 0 || stamp.payload_at > 0x3fff {
            return Err("the template has no room for the test payload where it was said to be");
        }
        if check_at.is_none() {
            check_at = stamp.check_at;
            udp = stamp.udp;
        }
        c[24..26].copy_from_slice(&(stamp.payload_at as u16).to_ne_bytes());
        c[26..28].copy_from_slice(&stamp.generator.to_ne_bytes());
        // What RFC 1624 takes out for the template's words, summed in frame byte order.
        let mut sum: u32 = template[stamp.payload_at + 2..end]
            .chunks_exact(2)
            .map(|w| u32::from(!u16::from_ne_bytes([w[0], w[1]])))
            .sum();
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        c[28..32].copy_from_slice(&sum.to_ne_bytes());
        c[32..40].copy_from_slice(&stamp.clock_offset_ns.to_ne_bytes());
    }
    restore_header(&mut c, template);
    if let Some(at) = check_at {
        if at + 2 > template.len() || at > 0x3fff {
            return Err("the checksum is past the template's end");
        }
        c[16..18].copy_from_slice(&(at as u16).to_ne_bytes());
        c[20..22].copy_from_slice(&word(at));
        c[22..24].copy_from_slice(&u16::from(udp).to_ne_bytes());
    }
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet / IPv4 / UDP frame from `src` to `dst` (last octets of 10.0.0.x).
    fn udp_frame(src: u8, dst: u8) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, src]);
        f[30..34].copy_from_slice(&[10, 0, 0, dst]);
        f[34..36].copy_from_slice(&1024u16.to_be_bytes());
        f
    }

    #[test]
    fn flow_addresses_step_over_the_destination() {
        let vary = Variation {
            flows: Some(70_000),
            stamp: None,
        };
        let past_dst = |src, dst| {
            let c = vary_config(&udp_frame(src, dst), &vary).unwrap();
            u32::from_ne_bytes(c[60..64].try_into().unwrap())
        };
        // 10.0.0.1 to 10.0.0.2: address number 1 would be the destination's.
        assert_eq!(past_dst(1, 2), 1);
        // The destination behind the source never comes up; the source itself is kept.
        assert_eq!(past_dst(5, 2), u32::MAX - 2);
        assert_eq!(past_dst(2, 2), 0);
    }
}
