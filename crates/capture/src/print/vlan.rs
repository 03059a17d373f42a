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

#[cfg(test)]
mod tests {
    use crate::LINKTYPE_ETHERNET;
    use crate::print::line_of;

    // Lines as tcpdump 4.99 -n (-e) prints them for the same bytes.
    const VLAN_UDP: [u8; 66] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x81, 0x00, 0xb0,
        0x2a, 0x08, 0x00, 0x45, 0x00, 0x00, 0x30, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x66, 0xba,
        0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02, 0x04, 0xd2, 0x16, 0x2e, 0x00, 0x1c, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    const VLAN_CUT: [u8; 15] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x81, 0x00, 0x00,
    ];

    #[test]
    fn a_tagged_packet_without_e_shows_the_packet_inside() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, false, &VLAN_UDP),
            "IP 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 20"
        );
    }

    #[test]
    fn a_tag_with_e_shows_id_priority_and_dei() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, true, &VLAN_UDP),
            "02:00:00:00:00:01 > 02:00:00:00:00:02, ethertype 802.1Q (0x8100), length 66: vlan 42, p 5, DEI, ethertype IPv4 (0x0800), 10.0.0.1.1234 > 10.0.0.2.5678: UDP, length 20"
        );
    }

    #[test]
    fn a_cut_tag_is_marked() {
        assert_eq!(
            line_of(LINKTYPE_ETHERNET, true, &VLAN_CUT),
            "02:00:00:00:00:01 > 02:00:00:00:00:02,  [|vlan]"
        );
    }
}
