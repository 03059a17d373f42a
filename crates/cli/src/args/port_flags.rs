//! The port flags every port-opening command shares (`bench`, `gen`, `recv`, `switch`):
//! same names, same defaults.

use anyhow::bail;
use clap::Args;
use wirespeed_port::xdp::XdpMode;
use wirespeed_port::{PortOptions, frame_size_for};

#[derive(Debug, Args)]
pub struct PortFlags {
    /// Packets per burst (1 to the ring size).
    #[arg(long, default_value_t = 64)]
    pub batch: u32,
    /// AF_XDP mode: auto tries zc, then copy (native XDP), then skb (generic XDP); zc only
    /// (the driver's zero-copy: not veth's), copy, native (native XDP, the kernel picks zc or
    /// copy) or skb.
    #[arg(long, default_value = "auto", value_parser = parse_xdp_mode)]
    pub xdp_mode: XdpMode,
    /// Ask the kernel to busy-poll the socket instead of sleeping in poll(). Zero-copy
    /// sockets only (Linux 6.13+): a copy-mode one (veth) says so and polls as without it.
    #[arg(long)]
    pub busy_poll: bool,
    /// UMEM frame size: 2048 or 4096 (default: 2048 when a frame of the interface's MTU fits
    /// after the kernel's 256 bytes and --headroom, else 4096). On veth (Intel Xeon), 2048
    /// took AF_XDP rxdrop from 12.2-12.35 to 14.0-14.4 Mpps (bench/README.md).
    #[arg(long)]
    pub frame_size: Option<u32>,
    /// AF_XDP: bytes the kernel leaves free in front of each received packet, after its own
    /// 256 (room to push headers in place).
    #[arg(long, default_value_t = 0)]
    pub headroom: u32,
    /// UMEM frames (AF_XDP) or ring frames per direction (AF_PACKET); default 4096 for each
    /// receive queue a port serves; a count given here is shared out between the queues. The rings, not this, set how many frames circulate: the frame
    /// pool hands out the frames it got back last, so frames beyond the rings' reach stay
    /// idle (bench/README.md).
    #[arg(long)]
    pub frames: Option<u32>,
    /// Entries per ring (a power of two); default 1024.
    #[arg(long)]
    pub ring_size: Option<u32>,
    /// Back the UMEM with hugepages (falls back to normal pages with a note).
    #[arg(long)]
    pub hugepages: bool,
    /// Replace an XDP program someone else attached to the interface.
    #[arg(long)]
    pub force: bool,
    /// The defaults of the tool these flags are for.
    #[arg(skip)]
    pub defaults: SizeDefaults,
}

/// A tool's ring size and frames when its user names none.
#[derive(Debug, Clone, Copy)]
pub struct SizeDefaults {
    pub ring_size: u32,
    /// Frames: this many, or with None twice the ring size.
    pub frames: Option<u32>,
}

impl Default for SizeDefaults {
    fn default() -> Self {
        SizeDefaults {
            ring_size: 1024,
            frames: Some(4096),
        }
    }
}

fn parse_xdp_mode(s: &str) -> Result<XdpMode, String> {
    s.parse()
}

impl PortFlags {
    /// --ring-size, or the tool's default.
    pub fn ring_size(&self) -> u32 {
        self.ring_size.unwrap_or(self.defaults.ring_size)
    }

    /// --frames, or the tool's default.
    pub fn frames(&self) -> u32 {
        self.frames
            .or(self.defaults.frames)
            .unwrap_or(2 * self.ring_size())
    }

    pub fn validate(&self) -> anyhow::Result<()> {
        // Left to us, the frame size is 4096 whenever 2048 is too small.
        let frame_size = self.frame_size.unwrap_or(4096);
        validate_port_sizes(frame_size, self.ring_size(), self.batch, self.frames())?;
        // The kernel keeps XDP_PACKET_HEADROOM (256) and wants a minimal frame after both.
        if self.headroom.saturating_add(256 + 64) > frame_size {
            bail!(
                "--headroom {}: leaves no room for a packet in a {}-byte frame (the kernel keeps 256 bytes in front too)",
                self.headroom,
                frame_size
            );
        }
        Ok(())
    }

    /// --frame-size, or the size that holds a full frame on every one of `ifaces`.
    pub fn frame_size(&self, ifaces: &[&str]) -> u32 {
        self.frame_size.unwrap_or_else(|| {
            ifaces
                .iter()
                .map(|i| frame_size_for(i, self.headroom))
                .max()
                .unwrap_or(4096)
        })
    }

    /// The options of ports on `ifaces` (their MTUs choose the frame size).
    pub fn options(&self, ifaces: &[&str], rx: bool, tx: bool) -> PortOptions {
        PortOptions {
            xdp_mode: self.xdp_mode,
            frame_count: self.frames(),
            frame_size: self.frame_size(ifaces),
            headroom: self.headroom,
            ring_size: self.ring_size(),
            hugepages: self.hugepages,
            busy_poll: self.busy_poll,
            batch: self.batch,
            force: self.force,
            rx,
            tx,
            outgoing: false,
            program_attached: None,
            spill_bytes: 0,
            spill_rings: 1,
            spill_ring: 0,
            // The default grows with the queues a port serves; a count given is the whole.
            frames_per_queue: self.frames.is_none(),
            // Set by the tools that take packets of several frames.
            multi_buffer: false,
            // A signal gives up opening (a large buffer area takes seconds to set up).
            cancel: crate::run::signals::flag(),
        }
    }
}

/// Frame size, ring size, batch and frame count, as `bench` and `gen` both take them.
pub fn validate_port_sizes(
    frame_size: u32,
    ring_size: u32,
    batch: u32,
    frames: u32,
) -> anyhow::Result<()> {
    if frame_size != 2048 && frame_size != 4096 {
        bail!(
            "--frame-size {}: frame size must be 2048 or 4096",
            frame_size
        );
    }
    if !ring_size.is_power_of_two() || !(64..=65536).contains(&ring_size) {
        bail!(
            "--ring-size {}: must be a power of two from 64 to 65536",
            ring_size
        );
    }
    if batch == 0 || batch > ring_size {
        bail!(
            "--batch {}: must be between 1 and the ring size ({})",
            batch,
            ring_size
        );
    }
    if frames < 2 * batch || frames > 1 << 20 {
        bail!(
            "--frames {}: must be between twice the batch and 1048576",
            frames
        );
    }
    Ok(())
}
