//! IEEE 802.1Q VLAN tags as tcpdump -n -e prints them (its print-vlan.c, in print-ether.c
//! today): `vlan ID, p PRIORITY[, DEI], ethertype ...` a tag; without -e, nothing.

use std::fmt::Write as _;

use wirespeed_packet::{EtherType, VlanTag};

use super::ether::write_ethertype;

/// tcpdump's VLAN tag types: 802.1Q, QinQ's 802.1ad, and the older QinQ 0x9100 and 0x9200.
pub(super) fn is_tag(ethertype: EtherType) -> bool {
    ethertype.is_vlan() || matches!(ethertype.0, 0x9100 | 0x9200)
}

/// Steps over the VLAN tags in front of `payload` (shown with `link`), and returns the
/// EtherType and bytes after them; `None` when a tag was cut short (its mark is printed).
pub(super) fn print_tags<'a>(
    mut ethertype: EtherType,
    mut payload: &'a [u8],
    link: bool,
    line: &mut String,
) -> Option<(EtherType, &'a [u8])> {
    while is_tag(ethertype) {
        let Ok(tag) = VlanTag::new_checked(payload) else {
            line.push_str(" [|vlan]");
            return None;
        };
        // Without -e the tag is not shown, as in tcpdump: the packet inside it is.
        if link {
            let dei = if tag.drop_eligible() { ", DEI" } else { "" };
            let _ = write!(line, "vlan {}, p {}{dei}, ", tag.vlan_id(), tag.priority());
            write_ethertype(line, tag.ethertype());
            line.push_str(", ");
        }
        // The tag is 4 bytes: TCI, then the next EtherType.
        (ethertype, payload) = (tag.ethertype(), payload.get(4..).unwrap_or(&[]));
    }
    Some((ethertype, payload))
}
