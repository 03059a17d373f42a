//! A table's features (OpenFlow 1.3 §7.3.5.5): what its rules may match, the instructions and
//! actions they may hold, the fields those may set, and the tables a `goto_table` may name.
//! OpenFlow 1.3 requires all eight of the properties that are not about table misses, and
//! ovs-ofctl refuses a reply without them (it asks for one before `add-flow`, for table
//! names); the miss properties would say the same and are left out, as the specification
//! allows.

use crate::openflow::actions::{
    ACTION_TYPES, GOTO_TABLE, INSTRUCTION_TYPES, settable_field_numbers,
};
use crate::openflow::oxm::{MATCH_FIELDS, OxmField, oxm_header};
use crate::openflow::wire::Writer;
use crate::rule::N_TABLES;

/// `ofp_table_feature_prop_type`s.
mod property {
    pub const INSTRUCTIONS: u16 = 0;
    pub const NEXT_TABLES: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 4;
    pub const APPLY_ACTIONS: u16 = 6;
    pub const MATCH: u16 = 8;
    pub const WILDCARDS: u16 = 10;
    pub const WRITE_SETFIELD: u16 = 12;
    pub const APPLY_SETFIELD: u16 = 14;
}

/// The `ofp_table_features` of `table`, properties and all.
pub fn table_features_entry(table: u8) -> Vec<u8> {
    let last = table + 1 >= N_TABLES;
    let mut w = Writer::default();
    w.u16(0).u8(table).zeros(5);
    w.text(&format!("table{table}"), 32);
    // metadata_match and metadata_write: every bit of the metadata.
    w.u64(u64::MAX).u64(u64::MAX).u32(0).u32(1_000_000);
    add(&mut w, property::INSTRUCTIONS, |w| {
        // goto_table only goes forward: none from the last table.
        for kind in INSTRUCTION_TYPES
            .into_iter()
            .filter(|&k| !last || k != GOTO_TABLE)
        {
            w.u16(kind).u16(4);
        }
    });
    add(&mut w, property::NEXT_TABLES, |w| {
        for next in table.saturating_add(1)..N_TABLES {
            w.u8(next);
        }
    });
    for kind in [property::WRITE_ACTIONS, property::APPLY_ACTIONS] {
        add(&mut w, kind, |w| {
            for action in ACTION_TYPES {
                w.u16(action).u16(4);
            }
        });
    }
    add(&mut w, property::MATCH, |w| {
        for number in MATCH_FIELDS {
            let maskable = OxmField::of(number).is_some_and(|f| f.maskable);
            oxm_header(w, number, maskable);
        }
    });
    add(&mut w, property::WILDCARDS, |w| {
        for number in MATCH_FIELDS {
            oxm_header(w, number, false);
        }
    });
    for kind in [property::WRITE_SETFIELD, property::APPLY_SETFIELD] {
        add(&mut w, kind, |w| {
            for number in settable_field_numbers() {
                oxm_header(w, number, false);
            }
        });
    }
    w.set_len(0, 0);
    w.bytes
}

/// One property: its type, its length (padding not counted), what `body` writes, padding to
/// eight bytes.
fn add(w: &mut Writer, kind: u16, body: impl FnOnce(&mut Writer)) {
    let start = w.len();
    w.u16(kind).u16(0);
    body(w);
    w.set_len(start + 2, start);
    w.pad8();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openflow::wire::Reader;

    /// Each property of an entry: (type, length without padding).
    fn properties(entry: &[u8]) -> Vec<(u16, usize)> {
        let mut r = Reader::new(&entry[64..]);
        let mut found = Vec::new();
        while !r.is_empty() {
            let (kind, len) = (r.u16().unwrap(), usize::from(r.u16().unwrap()));
            r.take(len.next_multiple_of(8) - 4).unwrap();
            found.push((kind, len));
        }
        found
    }

    #[test]
    fn every_table_has_the_eight_required_properties() {
        for table in [0, 1, N_TABLES - 1] {
            let entry = table_features_entry(table);
            assert_eq!(
                usize::from(u16::from_be_bytes([entry[0], entry[1]])),
                entry.len()
            );
            assert_eq!(entry.len() % 8, 0);
            assert_eq!(entry[2], table);
            let kinds: Vec<u16> = properties(&entry).iter().map(|p| p.0).collect();
            assert_eq!(kinds, [0, 2, 4, 6, 8, 10, 12, 14], "table {table}");
        }
        let first = properties(&table_features_entry(0));
        // Instructions: six of four bytes (meter among them); next tables: 1 to 253.
        assert_eq!(first[0], (0, 4 + 6 * 4));
        assert_eq!(first[1], (2, 4 + usize::from(N_TABLES) - 1));
        assert_eq!(first[4], (8, 4 + MATCH_FIELDS.len() * 4));
        let last = properties(&table_features_entry(N_TABLES - 1));
        assert_eq!(last[0], (0, 4 + 5 * 4), "no goto_table from the last table");
        assert_eq!(last[1], (2, 4));
    }
}
