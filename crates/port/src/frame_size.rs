//! The frame size a port on an interface wants: the smallest that holds its largest frame.

/// The frame size for `iface`: see `frame_size_for_mtu`.
pub fn frame_size_for(iface: &str, headroom: u32) -> u32 {
    frame_size_for_mtu(interface_mtu(iface), headroom)
}

/// `iface`'s MTU, if it has one here.
pub fn interface_mtu(iface: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{iface}/mtu"))
        .ok()
        .and_then(|m| m.trim().parse::<u32>().ok())
}

/// 2048-byte frames when a full frame (the MTU, Ethernet and a VLAN tag) fits after the
/// kernel's 256 bytes of XDP headroom and ours, else 4096 (also when the MTU is not known).
/// Smaller frames put the kernel's copies on half the pages: fewer TLB misses on the CPU
/// that copies (bench/README.md, "Frames in circulation").
pub fn frame_size_for_mtu(mtu: Option<u32>, headroom: u32) -> u32 {
    match mtu {
        Some(m) if m.saturating_add(18).saturating_add(headroom) <= 2048 - 256 => 2048,
        _ => 4096,
    }
}

#[cfg(test)]
mod tests {
    use super::{frame_size_for, frame_size_for_mtu};

    #[test]
    fn frames_are_small_only_when_the_mtu_fits() {
        assert_eq!(frame_size_for_mtu(Some(1500), 0), 2048);
        assert_eq!(
            frame_size_for_mtu(Some(1774), 0),
            2048,
            "1774 + 18 fills 1792 exactly"
        );
        assert_eq!(frame_size_for_mtu(Some(1775), 0), 4096);
        assert_eq!(frame_size_for_mtu(Some(1500), 274), 2048);
        assert_eq!(
            frame_size_for_mtu(Some(1500), 275),
            4096,
            "--headroom counts"
        );
        assert_eq!(frame_size_for_mtu(Some(u32::MAX), 0), 4096);
        assert_eq!(frame_size_for_mtu(None, 0), 4096);
        // Loopback's MTU is 65536; an interface that is not there has none to read.
        assert_eq!(frame_size_for("lo", 0), 4096);
        assert_eq!(frame_size_for("wsnosuch0", 0), 4096);
    }
}
