//! What the flow vocabulary says when a flow, a match or an action list is wrong: [`FlowError`],
//! whose message names the bad token, and the help text for a field's values.

use core::fmt;

use crate::field::{Field, ValueFormat};

/// A flow that does not parse, with a message naming the bad token.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FlowError(pub String);

impl fmt::Display for FlowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for FlowError {}

pub(crate) fn error(message: impl Into<String>) -> FlowError {
    FlowError(message.into())
}

pub(crate) fn value_help(field: Field) -> String {
    if !field.maskable() {
        return format!(
            "'{field}' takes a number up to {} (and no mask)",
            field.full_mask()
        );
    }
    match field.value_format() {
        ValueFormat::TcpFlags => format!(
            "'{field}' takes flags joined by | (syn|ack: exactly those set), flags each set \
             or not (+syn-ack: SYN set and ACK not, the others any), or a number up to \
             0xfff[/mask]; the flags: fin syn rst psh ack urg ece cwr ns"
        ),
        ValueFormat::Mac => format!("'{field}' takes a MAC address like aa:bb:cc:dd:ee:ff[/mask]"),
        ValueFormat::Ipv4 => {
            format!("'{field}' takes an IPv4 address like 10.0.0.1[/prefix or /mask]")
        }
        ValueFormat::Ipv6 => {
            format!("'{field}' takes an IPv6 address like 2001:db8::1[/prefix or /mask]")
        }
        _ => format!(
            "'{field}' takes a number up to {}[/mask]",
            field.full_mask()
        ),
    }
}
