//! The AF_XDP backend: one socket on one queue, its UMEM and frame pool, and our redirect
//! program on the interface. Frames move between the rings and the application by
//! descriptor only; the bytes never move (AF_PACKET V4's design).

use std::str::FromStr;
use std::time::Duration;

use wirespeed_umem::{FramePool, Umem, UmemConfig};
use wirespeed_xdp::{AttachMode, XskProgram};
use wirespeed_xsk::{BindMode, Socket, SocketConfig};

use crate::{
    Backend, Batch, FrameAudit, Port, PortError, PortInfo, PortOptions, PortSpec, PortStats,
};

/// The kernel's headroom in front of every received packet in copy mode (XDP_PACKET_HEADROOM).
const XDP_PACKET_HEADROOM: u32 = 256;

/// How to attach and bind. `Auto` tries zero-copy, then native copy mode, then skb mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpMode {
    Auto,
    /// Native XDP, zero-copy bind (fails where the driver has no zero-copy, e.g. veth).
    ZeroCopy,
    /// Native XDP, copy-mode bind.
    Copy,
    /// Native XDP, the kernel picks zero-copy or copy.
    Native,
    /// Generic (skb) XDP, copy-mode bind.
    Skb,
}

impl FromStr for XdpMode {
    type Err = String;

    fn from_str(s: &str) -> Result<XdpMode, String> {
        Ok(match s {
            "auto" => XdpMode::Auto,
            "zc" | "zerocopy" | "zero-copy" => XdpMode::ZeroCopy,
            "copy" => XdpMode::Copy,
            "native" | "driver" | "drv" => XdpMode::Native,
            "skb" | "generic" => XdpMode::Skb,
            _ => {
                return Err(format!(
                    "unknown XDP mode '{s}' (use auto, zc, copy, native or skb)"
                ));
            }
        })
    }
}

impl XdpMode {
    /// The (attach, bind) pairs to try, in order.
    fn attempts(self) -> &'static [(AttachMode, BindMode)] {
        match self {
            XdpMode::Auto => &[
                (AttachMode::Native, BindMode::ZeroCopy),
                (AttachMode::Native, BindMode::Copy),
                (AttachMode::Skb, BindMode::Copy),
            ],
            XdpMode::ZeroCopy => &[(AttachMode::Native, BindMode::ZeroCopy)],
            XdpMode::Copy => &[(AttachMode::Native, BindMode::Copy)],
            XdpMode::Native => &[(AttachMode::Native, BindMode::Any)],
            XdpMode::Skb => &[(AttachMode::Skb, BindMode::Copy)],
        }
    }
}

/// An AF_XDP port.
pub struct XdpPort {
    // Field order is drop order: detach the program before the socket closes.
    _program: Option<XskProgram>,
    socket: Socket,
    umem: Umem,
    pool: FramePool,
    info: PortInfo,
    stats: PortStats,
    /// Frames the application holds (received or allocated, not yet sent or released).
    app_held: u64,
    /// Frames queued for sending and not yet reclaimed from the completion ring.
    tx_in_flight: u64,
    burst: u32,
}

impl XdpPort {
    pub fn open(spec: &PortSpec, opts: &PortOptions) -> Result<XdpPort, PortError> {
        if opts.frame_size != 2048 && opts.frame_size != 4096 {
            return Err(PortError::FrameSize(opts.frame_size));
        }
        if !opts.ring_size.is_power_of_two() || !(64..=65536).contains(&opts.ring_size) {
            return Err(PortError::RingSize(opts.ring_size));
        }
        if wirespeed_xsk::if_index(&spec.iface).is_none() {
            return Err(PortError::NoInterface(spec.iface.clone()));
        }
        let count = wirespeed_xsk::queue_count(&spec.iface);
        if spec.queue >= count {
            return Err(PortError::NoQueue {
                iface: spec.iface.clone(),
                queue: spec.queue,
                count,
            });
        }
        let umem = Umem::new(UmemConfig {
            frame_count: opts.frame_count,
            frame_size: opts.frame_size,
            headroom: opts.headroom,
            hugepages: opts.hugepages,
        })
        .map_err(|source| PortError::Umem {
            what: format!("{}: UMEM", spec.iface),
            source,
        })?;
        let mut notes: Vec<String> = umem.note().map(str::to_string).into_iter().collect();
        let (program, socket, attach) = bind_first_that_works(spec, opts, &umem, &mut notes)?;
        let mode = if socket.is_zerocopy() {
            "zerocopy"
        } else if attach == AttachMode::Skb {
            "skb"
        } else {
            "copy"
        };
        let pool = umem.frame_pool();
        let mut port = XdpPort {
            _program: program,
            socket,
            umem,
            pool,
            info: PortInfo {
                spec: spec.to_string(),
                backend: Backend::Xdp,
                mode: mode.to_string(),
                notes,
            },
            stats: PortStats::default(),
            app_held: 0,
            tx_in_flight: 0,
            burst: opts.batch.max(1),
        };
        if opts.rx {
            // Half the frames wait in the fill ring for packets; the rest serve transmit.
            let n = (opts.frame_count / 2).min(opts.ring_size * 2);
            port.socket.refill(&mut port.pool, n);
        }
        Ok(port)
    }

    fn reclaim(&mut self) {
        let (done, invalid) = self.socket.complete(&self.umem, &mut self.pool, u32::MAX);
        self.tx_in_flight -= (done + invalid) as u64;
        self.stats.drops.tx_invalid_desc += invalid as u64;
    }

    fn free_frame(&mut self, addr: u64) {
        self.pool.free(self.umem.frame_base(addr));
    }
}

/// Tries the attach/bind pairs of the mode in order; returns the first that works. A
/// foreign program or a missing interface ends the search at once.
fn bind_first_that_works(
    spec: &PortSpec,
    opts: &PortOptions,
    umem: &Umem,
    notes: &mut Vec<String>,
) -> Result<(Option<XskProgram>, Socket, AttachMode), PortError> {
    let config = SocketConfig {
        rx_size: if opts.rx { opts.ring_size } else { 0 },
        tx_size: if opts.tx { opts.ring_size } else { 0 },
        fill_size: if opts.rx { opts.ring_size * 2 } else { 64 },
        completion_size: opts.ring_size,
        mode: BindMode::Any,
        need_wakeup: true,
        busy_poll_budget: opts.busy_poll.then_some(opts.batch),
    };
    let mut last_err = None;
    let mut tried: Vec<String> = Vec::new();
    for &(attach, bind) in opts.xdp_mode.attempts() {
        let program = if opts.rx {
            match XskProgram::attach(&spec.iface, attach, opts.force) {
                Ok(p) => Some(p),
                Err(
                    e @ (wirespeed_xdp::XdpError::ForeignProgram { .. }
                    | wirespeed_xdp::XdpError::ForceFailed { .. }
                    | wirespeed_xdp::XdpError::NoInterface(_)),
                ) => return Err(e.into()),
                Err(e) => {
                    tried.push(format!("{} XDP: {e}", attach.name()));
                    last_err = Some(PortError::from(e));
                    continue;
                }
            }
        } else {
            None
        };
        let cfg = SocketConfig {
            mode: bind,
            ..config
        };
        match Socket::new(umem, &spec.iface, spec.queue, &cfg) {
            Ok(socket) => {
                let mut program = program;
                if let Some(p) = program.as_mut() {
                    p.register(spec.queue, socket.raw_fd())?;
                }
                if !tried.is_empty() {
                    notes.push(format!("fell back after: {}", tried.join("; ")));
                }
                return Ok((program, socket, attach));
            }
            Err(e) => {
                tried.push(format!("{} bind: {}", bind.name(), e));
                last_err = Some(e.into());
                // `program` drops here: detached before the next attempt.
            }
        }
    }
    Err(last_err.expect("every mode has at least one attempt"))
}

impl Port for XdpPort {
    fn info(&self) -> &PortInfo {
        &self.info
    }

    #[inline]
    fn rx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        let room = batch.room() as u32;
        self.socket.refill(&mut self.pool, room.max(self.burst));
        let mut bytes = 0u64;
        let out = self
            .socket
            .recv(&self.umem, &mut self.pool, room, |addr, len| {
                batch.push(addr, len);
                bytes += len as u64;
            });
        self.stats.rx_packets += out.received as u64;
        self.stats.rx_bytes += bytes;
        self.stats.drops.rx_invalid_desc += out.invalid as u64;
        self.app_held += out.received as u64;
        if out.received == 0 {
            self.socket.wake_rx().map_err(|source| PortError::Io {
                iface: self.info.spec.clone(),
                what: "wake receive",
                source,
            })?;
        }
        Ok(out.received as usize)
    }

    #[inline]
    fn tx_burst(&mut self, batch: &mut Batch) -> Result<usize, PortError> {
        if batch.is_empty() {
            return Ok(0);
        }
        self.reclaim();
        let b: &Batch = batch;
        let sent = self.socket.send(b.len() as u32, |i| {
            (b.addr(i as usize), b.frame_len(i as usize))
        }) as usize;
        let mut bytes = 0u64;
        for i in 0..sent {
            bytes += batch.frame_len(i) as u64;
        }
        for i in sent..batch.len() {
            let addr = batch.addr(i);
            self.free_frame(addr);
        }
        self.stats.tx_packets += sent as u64;
        self.stats.tx_bytes += bytes;
        self.stats.drops.tx_ring_full += (batch.len() - sent) as u64;
        self.app_held -= batch.len() as u64;
        self.tx_in_flight += sent as u64;
        batch.clear();
        self.socket.kick_tx().map_err(|source| PortError::Io {
            iface: self.info.spec.clone(),
            what: "kick transmit",
            source,
        })?;
        Ok(sent)
    }

    fn release(&mut self, batch: &mut Batch) {
        for i in 0..batch.len() {
            let addr = batch.addr(i);
            self.free_frame(addr);
        }
        self.app_held -= batch.len() as u64;
        batch.clear();
    }

    fn alloc_tx(&mut self, batch: &mut Batch, n: usize, len: u32) -> usize {
        self.reclaim();
        let len = len.min(self.umem.frame_size());
        let n = n
            .min(batch.room())
            .min(self.pool.len())
            .min(self.socket.tx_free(n as u32) as usize);
        for _ in 0..n {
            let addr = self.pool.alloc().unwrap_or_default();
            batch.push(addr, len);
        }
        self.app_held += n as u64;
        n
    }

    #[inline]
    fn packet(&self, addr: u64, len: u32) -> &[u8] {
        self.umem.packet(addr, len).unwrap_or(&[])
    }

    #[inline]
    fn packet_mut(&mut self, addr: u64, len: u32) -> &mut [u8] {
        self.umem.packet_mut(addr, len).unwrap_or(&mut [])
    }

    fn max_packet_len(&self) -> u32 {
        self.umem.frame_size() - XDP_PACKET_HEADROOM - self.umem.config().headroom
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.reclaim();
        if self.socket.tx_queued() {
            self.socket.kick_tx().map_err(|source| PortError::Io {
                iface: self.info.spec.clone(),
                what: "kick transmit",
                source,
            })?;
        }
        Ok(())
    }

    fn wait_rx(&mut self, timeout: Duration) -> Result<(), PortError> {
        self.socket
            .poll_rx(timeout.as_millis().min(i32::MAX as u128) as i32)
            .map_err(|source| PortError::Io {
                iface: self.info.spec.clone(),
                what: "poll",
                source,
            })?;
        Ok(())
    }

    fn tx_pending(&self) -> bool {
        self.tx_in_flight > 0
    }

    fn stats(&mut self) -> PortStats {
        let mut s = self.stats;
        if let Ok(k) = self.socket.statistics() {
            // In copy mode a packet that finds the fill ring empty is counted both as
            // rx_dropped and as a fill-ring-empty event: count it once, under the latter.
            let fill_empty = k.rx_fill_ring_empty_descs.min(k.rx_dropped);
            s.drops.fill_ring_empty = fill_empty;
            s.drops.kernel_dropped = k.rx_dropped - fill_empty;
            s.drops.rx_ring_full = k.rx_ring_full;
            s.drops.rx_invalid_desc += k.rx_invalid_descs;
            s.drops.tx_invalid_desc += k.tx_invalid_descs;
        }
        s
    }

    fn audit(&self) -> Option<FrameAudit> {
        let r = self.socket.ring_counts();
        Some(FrameAudit {
            total: self.umem.frame_count() as u64,
            pool: self.pool.len() as u64,
            fill: r.fill,
            kernel: r.kernel,
            rx: r.rx,
            application: self.app_held,
            tx: r.tx,
            completion: r.completion,
        })
    }
}
