//! The port flags `gen` and `recv` share with `bench` (same names, same defaults).

use anyhow::bail;
use clap::Args;
use wirespeed_port::PortOptions;
use wirespeed_port::xdp::XdpMode;

#[derive(Debug, Args)]
pub struct PortFlags {
    /// Packets per burst (1 to the ring size).
    #[arg(long, default_value_t = 64)]
    pub batch: u32,
    /// AF_XDP mode: auto tries zc, then copy (native XDP), then skb (generic XDP).
    #[arg(long, default_value = "auto", value_parser = parse_xdp_mode)]
    pub xdp_mode: XdpMode,
    /// Ask the kernel to busy-poll the socket instead of sleeping in poll().
    #[arg(long)]
    pub busy_poll: bool,
    /// UMEM frame size: 2048 or 4096.
    #[arg(long, default_value_t = 4096)]
    pub frame_size: u32,
    /// AF_XDP: bytes the kernel leaves free in front of each received packet, after its own
    /// 256 (room to push headers in place).
    #[arg(long, default_value_t = 0)]
    pub headroom: u32,
    /// UMEM frames (AF_XDP) or ring frames per direction (AF_PACKET). The rings, not this,
    /// set how many frames circulate: the frame pool hands out the frames it got back last,
    /// so frames beyond the rings' reach stay idle (bench/README.md).
    #[arg(long, default_value_t = 4096)]
    pub frames: u32,
    /// Entries per ring (a power of two).
    #[arg(long, default_value_t = 1024)]
    pub ring_size: u32,
    /// Back the UMEM with hugepages (falls back to normal pages with a note).
    #[arg(long)]
    pub hugepages: bool,
    /// Replace an XDP program someone else attached to the interface.
    #[arg(long)]
    pub force: bool,
}

fn parse_xdp_mode(s: &str) -> Result<XdpMode, String> {
    s.parse()
}

impl PortFlags {
    pub fn validate(&self) -> anyhow::Result<()> {
        validate_port_sizes(self.frame_size, self.ring_size, self.batch, self.frames)?;
        // The kernel keeps XDP_PACKET_HEADROOM (256) and wants a minimal frame after both.
        if self.headroom.saturating_add(256 + 64) > self.frame_size {
            bail!(
                "--headroom {}: leaves no room for a packet in a {}-byte frame (the kernel keeps 256 bytes in front too)",
                self.headroom,
                self.frame_size
            );
        }
        Ok(())
    }

    pub fn options(&self, rx: bool, tx: bool) -> PortOptions {
        PortOptions {
            xdp_mode: self.xdp_mode,
            frame_count: self.frames,
            frame_size: self.frame_size,
            headroom: self.headroom,
            ring_size: self.ring_size,
            hugepages: self.hugepages,
            busy_poll: self.busy_poll,
            batch: self.batch,
            force: self.force,
            rx,
            tx,
            outgoing: false,
            program_attached: None,
            spill_bytes: 0,
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
