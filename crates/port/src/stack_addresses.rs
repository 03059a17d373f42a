//! The addresses an interface has for the host's own stack: where an xdp: port that takes
//! every packet of its queues (our redirect program sends none on to the stack) would cut
//! the host off.

use std::net::IpAddr;

use nix::ifaddrs::getifaddrs;

/// The addresses on `iface` that the host's stack uses: all but IPv6 link-local ones, which
/// every interface that is up has.
pub fn stack_addresses(iface: &str) -> Vec<IpAddr> {
    let Ok(addrs) = getifaddrs() else {
        return Vec::new();
    };
    addrs
        .filter(|a| a.interface_name == iface)
        .filter_map(|a| {
            let addr = a.address?;
            if let Some(v4) = addr.as_sockaddr_in() {
                return Some(IpAddr::V4(v4.ip()));
            }
            let v6 = addr.as_sockaddr_in6()?.ip();
            // fe80::/10
            (v6.segments()[0] & 0xffc0 != 0xfe80).then_some(IpAddr::V6(v6))
        })
        .collect()
}
