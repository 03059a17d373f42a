//! What `wirespeed pcap-run` tells the library through the environment: the port's XDP mode
//! and sizes, and whether to say what it set up.

use wirespeed_port::xdp::XdpMode;

/// A port the size of `wirespeed capture`'s: a deep ring rides out the program's pauses
/// (tcpdump's writes, a slow printer) without drops.
const DEFAULT_FRAME_BYTES: u32 = 160 << 20;
const DEFAULT_RING: u32 = 65536;

pub const XDP_MODE: &str = "WIRESPEED_PCAP_XDP_MODE";
pub const FRAMES: &str = "WIRESPEED_PCAP_FRAMES";
pub const RING_SIZE: &str = "WIRESPEED_PCAP_RING_SIZE";
pub const VERBOSE: &str = "WIRESPEED_PCAP_VERBOSE";
pub const TAKE: &str = "WIRESPEED_PCAP_TAKE";

/// The options in effect for one handle.
#[derive(Debug, Clone, Copy)]
pub struct ShimOptions {
    pub xdp_mode: XdpMode,
    /// Frames of the port; None: from the buffer size asked for, at least the default's.
    pub frames: Option<u32>,
    pub ring_size: u32,
    pub verbose: bool,
    /// Open xdp: devices on interfaces with addresses too (pcap-run --take).
    pub take: bool,
}

impl ShimOptions {
    /// From the environment; a value that does not parse is an error naming its variable.
    pub fn from_env() -> Result<ShimOptions, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let number = |name: &str| -> Result<Option<u32>, String> {
            var(name)
                .map(|v| {
                    v.parse::<u32>()
                        .map_err(|_| format!("{name}={v}: not a number"))
                })
                .transpose()
        };
        Ok(ShimOptions {
            xdp_mode: match var(XDP_MODE) {
                Some(m) => m.parse().map_err(|e| format!("{XDP_MODE}: {e}"))?,
                None => XdpMode::Auto,
            },
            frames: number(FRAMES)?,
            ring_size: number(RING_SIZE)?.unwrap_or(DEFAULT_RING),
            verbose: var(VERBOSE).is_some_and(|v| v != "0"),
            take: var(TAKE).is_some_and(|v| v != "0"),
        })
    }

    /// Frames for a port of `frame_size`-byte frames when the program asked for a buffer of
    /// `buffer_size` bytes (pcap_set_buffer_size; 0 when it did not), at most `lockable`
    /// bytes of them.
    pub fn frame_count(&self, frame_size: u32, buffer_size: i32, lockable: Option<u64>) -> u32 {
        let wanted = self.frames.unwrap_or_else(|| {
            let bytes = DEFAULT_FRAME_BYTES.max(buffer_size.max(0) as u32);
            bytes / frame_size
        });
        match lockable {
            Some(bytes) => wanted.min((bytes / u64::from(frame_size)) as u32),
            None => wanted,
        }
    }
}

/// Bytes of UMEM this process may lock, when something limits it: the kernel counts a
/// UMEM against RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK, which dumpcap gives up
/// (and pcap-run cannot raise the limit without CAP_SYS_RESOURCE). A quarter of the limit:
/// the user's other locked memory counts too, and so does, for a while, that of a port
/// just closed (see live.rs, `open_within_memlock`).
pub fn lockable_bytes() -> Option<u64> {
    const CAP_IPC_LOCK: u32 = 14;
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let effective = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())?;
    if effective & (1 << CAP_IPC_LOCK) != 0 {
        return None;
    }
    let (soft, _) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_MEMLOCK).ok()?;
    (soft != nix::sys::resource::RLIM_INFINITY).then_some(soft / 4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_larger_than_the_default_gets_more_frames() {
        let o = ShimOptions {
            xdp_mode: XdpMode::Auto,
            frames: None,
            ring_size: DEFAULT_RING,
            verbose: false,
            take: false,
        };
        assert_eq!(o.frame_count(2048, 2 << 20, None), 81920);
        assert_eq!(o.frame_count(2048, 320 << 20, None), 163840);
        let fixed = ShimOptions {
            frames: Some(4096),
            ..o
        };
        assert_eq!(fixed.frame_count(2048, 320 << 20, None), 4096);
        // dumpcap's 8 MiB of lockable memory, a quarter of it ours.
        assert_eq!(o.frame_count(2048, 0, Some(2 << 20)), 1024);
    }
}
