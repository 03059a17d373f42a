//! OpenFlow's error numbers (`ofp_error_type` and each type's codes) and the ERROR message,
//! which carries the request it answers, whole where it fits (the specification asks for
//! 64 bytes at least, and Open vSwitch sends 64): ovs-ofctl then prints the flow refused,
//! not a truncated hex dump.

use crate::openflow::wire::{Writer, msg};

/// An error as the specification numbers it: type and code.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct OfpError {
    pub kind: u16,
    pub code: u16,
}

const fn e(kind: u16, code: u16) -> OfpError {
    OfpError { kind, code }
}

pub mod hello_failed {
    use super::*;
    pub const INCOMPATIBLE: OfpError = e(0, 0);
}

pub mod bad_request {
    use super::*;
    pub const BAD_VERSION: OfpError = e(1, 0);
    pub const BAD_TYPE: OfpError = e(1, 1);
    pub const BAD_MULTIPART: OfpError = e(1, 2);
    pub const BAD_LEN: OfpError = e(1, 6);
    pub const BUFFER_UNKNOWN: OfpError = e(1, 8);
    pub const BAD_TABLE_ID: OfpError = e(1, 9);
    pub const IS_SLAVE: OfpError = e(1, 10);
    pub const BAD_PORT: OfpError = e(1, 11);
    pub const BAD_PACKET: OfpError = e(1, 12);
}

pub mod bad_action {
    use super::*;
    pub const BAD_TYPE: OfpError = e(2, 0);
    pub const BAD_LEN: OfpError = e(2, 1);
    pub const BAD_OUT_PORT: OfpError = e(2, 4);
    pub const BAD_ARGUMENT: OfpError = e(2, 5);
    pub const TOO_MANY: OfpError = e(2, 7);
    pub const BAD_OUT_GROUP: OfpError = e(2, 9);
    pub const MATCH_INCONSISTENT: OfpError = e(2, 10);
    pub const UNSUPPORTED_ORDER: OfpError = e(2, 11);
    pub const BAD_SET_TYPE: OfpError = e(2, 13);
    pub const BAD_SET_LEN: OfpError = e(2, 14);
    pub const BAD_SET_ARGUMENT: OfpError = e(2, 15);
}

pub mod bad_instruction {
    use super::*;
    pub const UNKNOWN_INST: OfpError = e(3, 0);
    pub const UNSUP_INST: OfpError = e(3, 1);
    pub const BAD_TABLE_ID: OfpError = e(3, 2);
    pub const BAD_LEN: OfpError = e(3, 7);
}

pub mod bad_match {
    use super::*;
    pub const BAD_TYPE: OfpError = e(4, 0);
    pub const BAD_LEN: OfpError = e(4, 1);
    pub const BAD_FIELD: OfpError = e(4, 6);
    pub const BAD_VALUE: OfpError = e(4, 7);
    pub const BAD_MASK: OfpError = e(4, 8);
    pub const BAD_PREREQ: OfpError = e(4, 9);
    pub const DUP_FIELD: OfpError = e(4, 10);
}

pub mod flow_mod_failed {
    use super::*;
    pub const TABLE_FULL: OfpError = e(5, 1);
    pub const BAD_TABLE_ID: OfpError = e(5, 2);
    pub const OVERLAP: OfpError = e(5, 3);
    pub const EPERM: OfpError = e(5, 4);
    pub const BAD_COMMAND: OfpError = e(5, 6);
    pub const BAD_FLAGS: OfpError = e(5, 7);
}

pub mod group_mod_failed {
    use super::*;
    pub const GROUP_EXISTS: OfpError = e(6, 0);
    pub const INVALID_GROUP: OfpError = e(6, 1);
    pub const OUT_OF_GROUPS: OfpError = e(6, 3);
    pub const CHAINING_UNSUPPORTED: OfpError = e(6, 5);
    pub const LOOP: OfpError = e(6, 7);
    pub const UNKNOWN_GROUP: OfpError = e(6, 8);
    pub const BAD_TYPE: OfpError = e(6, 10);
    pub const BAD_COMMAND: OfpError = e(6, 11);
    pub const BAD_BUCKET: OfpError = e(6, 12);
    pub const BAD_WATCH: OfpError = e(6, 13);
}

pub mod queue_op_failed {
    use super::*;
    pub const BAD_PORT: OfpError = e(9, 0);
}

pub mod port_mod_failed {
    use super::*;
    pub const BAD_PORT: OfpError = e(7, 0);
    pub const BAD_HW_ADDR: OfpError = e(7, 1);
    pub const BAD_CONFIG: OfpError = e(7, 2);
}

pub mod table_mod_failed {
    use super::*;
    pub const BAD_TABLE: OfpError = e(8, 0);
}

pub mod switch_config_failed {
    use super::*;
    pub const BAD_FLAGS: OfpError = e(10, 0);
}

pub mod role_request_failed {
    use super::*;
    pub const STALE: OfpError = e(11, 0);
    pub const BAD_ROLE: OfpError = e(11, 2);
}

pub mod meter_mod_failed {
    use super::*;
    pub const METER_EXISTS: OfpError = e(12, 1);
    pub const INVALID_METER: OfpError = e(12, 2);
    pub const UNKNOWN_METER: OfpError = e(12, 3);
    pub const BAD_COMMAND: OfpError = e(12, 4);
    pub const BAD_FLAGS: OfpError = e(12, 5);
    pub const BAD_RATE: OfpError = e(12, 6);
    pub const BAD_BAND: OfpError = e(12, 8);
    pub const OUT_OF_METERS: OfpError = e(12, 10);
    pub const OUT_OF_BANDS: OfpError = e(12, 11);
}

/// ONF's bundle errors for OpenFlow 1.3 (OpenFlow 1.4's BUNDLE_FAILED): experimenter errors,
/// whose code is ONF's number and whose ERROR message names ONF after it.
pub mod bundle_failed {
    use super::*;
    pub const BAD_ID: OfpError = e(EXPERIMENTER, 2302);
    pub const BUNDLE_CLOSED: OfpError = e(EXPERIMENTER, 2304);
    pub const OUT_OF_BUNDLES: OfpError = e(EXPERIMENTER, 2305);
    pub const BAD_TYPE: OfpError = e(EXPERIMENTER, 2306);
    pub const BAD_FLAGS: OfpError = e(EXPERIMENTER, 2307);
    pub const MSG_BAD_LEN: OfpError = e(EXPERIMENTER, 2308);
    pub const MSG_BAD_XID: OfpError = e(EXPERIMENTER, 2309);
    pub const MSG_UNSUP: OfpError = e(EXPERIMENTER, 2310);
    pub const MSG_TOO_MANY: OfpError = e(EXPERIMENTER, 2312);
    pub const MSG_FAILED: OfpError = e(EXPERIMENTER, 2313);
    pub const TIMEOUT: OfpError = e(EXPERIMENTER, 2314);
}

/// `OFPET_EXPERIMENTER`: the error type of the experimenters' errors (all ONF's here).
pub const EXPERIMENTER: u16 = 0xffff;

/// The most of a failed request an ERROR message echoes.
pub const ECHOED_BYTES: usize = 65_535 - 8 - 4 - 4;

/// An ERROR message answering `request` (its transaction id, and the request itself up to
/// [`ECHOED_BYTES`]).
pub fn error_message(error: OfpError, xid: u32, request: &[u8]) -> Vec<u8> {
    let mut w = Writer::message(msg::ERROR, xid);
    w.u16(error.kind).u16(error.code);
    if error.kind == EXPERIMENTER {
        w.u32(crate::openflow::bundle::ONF_EXPERIMENTER);
    }
    w.slice(&request[..request.len().min(ECHOED_BYTES)]);
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_echoes_the_request_whole_as_far_as_a_message_holds() {
        let request = [0xabu8; 100];
        let bytes = error_message(bad_request::BAD_TYPE, 9, &request);
        assert_eq!(bytes.len(), 8 + 4 + 100);
        assert_eq!(&bytes[..12], &[4, 1, 0, 112, 0, 0, 0, 9, 0, 1, 0, 1]);
        let longest = error_message(bad_request::BAD_TYPE, 9, &[0xab; 70_000]);
        assert_eq!(longest.len(), 65_535 - 4);
        let experimenter = error_message(
            OfpError {
                kind: EXPERIMENTER,
                code: 1,
            },
            9,
            &[0; 70_000],
        );
        assert_eq!(experimenter.len(), 65_535);
    }
}
