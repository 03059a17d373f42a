//! An xdp: capture takes the packets it captures: our program redirects every packet of a
//! queue to the socket, filtered out or not, and none of them reaches the kernel's stack.
//! On an interface the host uses (one with an address), that cuts the host off it while the
//! capture runs, which tcpdump never does; so capture asks for `--take` there.

use std::net::IpAddr;

use anyhow::bail;
use wirespeed_port::stack_addresses;

/// Refuses an xdp: capture on an interface with addresses unless `take` was given.
pub fn check(iface: &str, take: bool) -> anyhow::Result<()> {
    let addrs = stack_addresses(iface);
    if take || addrs.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = addrs.iter().map(IpAddr::to_string).collect();
    bail!(
        "{iface} has addresses ({}): an xdp: capture takes the packets it captures (all of \
         them, whatever the filter) from the kernel's stack, so this host would stop receiving \
         on {iface} while it runs. Watch with packet:{iface} instead, or give --take to capture \
         on xdp: anyway",
        list.join(", ")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_has_an_address_and_a_missing_interface_none() {
        // Every network namespace's lo has 127.0.0.1 once it is up; this one may not be.
        let lo = stack_addresses("lo");
        assert!(lo.iter().all(|a| a.is_loopback()), "{lo:?}");
        assert!(stack_addresses("wsnosuch0").is_empty());
        assert!(check("wsnosuch0", false).is_ok());
    }
}
