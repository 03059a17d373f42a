//! What the kernel says about a port's network interface, for `show`: its MAC address,
//! whether it is up and has a carrier, its speed. Read from sysfs, so from the network
//! namespace the switch runs in.

use wirespeed_packet::MacAddr;

/// An interface's state. An interface that is gone has no address and is down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkState {
    pub mac: Option<MacAddr>,
    /// Administratively up (IFF_UP).
    pub admin_up: bool,
    pub carrier: bool,
    /// Megabits a second; `None` when the driver does not say (or the link is down).
    pub speed_mbps: Option<u32>,
}

impl LinkState {
    pub fn of(iface: &str) -> LinkState {
        // Names with a slash or dots only would leave the interface's directory.
        if iface.is_empty() || iface.contains('/') || iface.chars().all(|c| c == '.') {
            return LinkState::default();
        }
        let read = |what: &str| {
            std::fs::read_to_string(format!("/sys/class/net/{iface}/{what}"))
                .ok()
                .map(|t| t.trim().to_string())
        };
        let flags = read("flags")
            .and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0);
        LinkState {
            mac: read("address").and_then(|a| a.parse().ok()),
            admin_up: flags & 1 != 0,
            carrier: read("carrier").as_deref() == Some("1"),
            speed_mbps: read("speed")
                .and_then(|s| s.parse::<i64>().ok())
                .and_then(|s| u32::try_from(s).ok())
                .filter(|&s| s > 0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_up_with_a_zero_address() {
        let lo = LinkState::of("lo");
        assert_eq!(lo.mac, Some(MacAddr([0; 6])));
        assert!(lo.admin_up);
    }

    #[test]
    fn no_interface_and_no_escape() {
        for name in ["wsnosuch0", "", "..", "../lo", "lo/.."] {
            assert_eq!(LinkState::of(name), LinkState::default(), "{name}");
        }
    }
}
