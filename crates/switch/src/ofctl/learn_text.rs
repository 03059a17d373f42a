//! `learn(...)` in ovs-ofctl's flow syntax: the learned rule's settings (`table=10`,
//! `priority=`, `idle_timeout=`, `hard_timeout=`, `cookie=`, `send_flow_rem`,
//! `delete_learned`) and its specs:
//!
//! - `FIELD[BITS]` matches those bits on the packet's own;
//! - `DST[BITS]=SRC[BITS]` matches DST on SRC's value (`NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[]`);
//! - `DST=VALUE` matches on a constant (`eth_type=0x800`, `NXM_OF_VLAN_TCI[0..11]=20`);
//! - `load:SRC->DST` loads a field's bits or a constant into DST;
//! - `output:SRC` outputs to the port SRC holds.
//!
//! Printing is [`crate::learn::Learn`]'s `Display`.

use crate::action::Action;
use crate::error::{FlowError, error};
use crate::field::parse_uint;
use crate::learn::{Learn, LearnId, LearnSource, LearnSpec};
use crate::ofctl::action_parse::split_top_level;
use crate::subfield::Subfield;

/// Parses the inside of `learn(...)` (`token` is the whole action, for messages).
pub fn parse_learn(token: &str, inner: &str) -> Result<Action, FlowError> {
    let mut learn = Learn::default();
    for part in split_top_level(inner)?
        .into_iter()
        .filter(|p| !p.is_empty())
    {
        let fail = |message: String| error(format!("{token}: {part}: {message}"));
        let number = |text: &str, max: u64| {
            parse_uint(text)
                .and_then(|n| u64::try_from(n).ok())
                .filter(|&n| n <= max)
                .ok_or_else(|| fail(format!("'{text}' is not a number up to {max}")))
        };
        let (key, value) = match part.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim())),
            None => (part, None),
        };
        match (key, value) {
            ("table", Some(v)) => learn.table = number(v, 254)? as u8,
            ("priority", Some(v)) => learn.priority = number(v, 0xffff)? as u16,
            ("idle_timeout", Some(v)) => learn.idle_timeout = number(v, 0xffff)? as u16,
            ("hard_timeout", Some(v)) => learn.hard_timeout = number(v, 0xffff)? as u16,
            ("cookie", Some(v)) => learn.cookie = number(v, u64::MAX)?,
            ("send_flow_rem", None) => learn.send_flow_rem = true,
            ("delete_learned", None) => learn.delete_learned = true,
            ("fin_idle_timeout" | "fin_hard_timeout" | "limit" | "result_dst", _) => {
                return Err(fail("not supported by this switch".into()));
            }
            _ => learn.specs.push(parse_spec(part).map_err(fail)?),
        }
    }
    LearnId::keep(learn)
        .map(Action::Learn)
        .map_err(|e| error(format!("{token}: {e}")))
}

fn parse_spec(part: &str) -> Result<LearnSpec, String> {
    if let Some(load) = part.strip_prefix("load:") {
        let (src, dst) = load
            .split_once("->")
            .ok_or_else(|| "a load needs SRC->DST".to_string())?;
        let dst = Subfield::parse(dst)?;
        return Ok(LearnSpec::Load {
            dst,
            src: source(src, dst)?,
        });
    }
    if let Some(src) = part.strip_prefix("output:") {
        return Ok(LearnSpec::Output(Subfield::parse(src)?));
    }
    let Some((dst, src)) = part.split_once('=') else {
        let field = Subfield::parse(part)?;
        return Ok(LearnSpec::Match {
            dst: field,
            src: LearnSource::Field(field),
        });
    };
    let dst = Subfield::parse(dst)?;
    Ok(LearnSpec::Match {
        dst,
        src: source(src, dst)?,
    })
}

/// A constant (in the field's own format where `dst` is a whole field: `ip_src=10.0.0.1`,
/// `NXM_OF_ETH_SRC[]=00:11:22:33:44:55`) or a field's bits.
fn source(text: &str, dst: Subfield) -> Result<LearnSource, String> {
    let in_format = (dst == Subfield::whole(dst.nxm))
        .then(|| dst.field().parse_value(text))
        .flatten();
    match in_format.or_else(|| parse_uint(text)) {
        Some(value) => Ok(LearnSource::Value(value)),
        None => Subfield::parse(text).map(LearnSource::Field),
    }
}

#[cfg(test)]
mod tests {
    use crate::ofctl::action_parse::parse_actions;
    use crate::ofctl::flow_parse::parse_rule;

    fn printed(text: &str) -> Result<String, String> {
        let actions = parse_actions(text).map_err(|e| e.0)?;
        Ok(actions
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(","))
    }

    #[test]
    fn reads_and_prints_as_ovs_ofctl() {
        // Each as ovs-ofctl 3.1 parse-flow prints it.
        for (text, expected) in [
            (
                "learn(table=10, NXM_OF_VLAN_TCI[0..11], NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[], \
                 load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15])",
                "learn(table=10,NXM_OF_VLAN_TCI[0..11],NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],\
                 load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15])",
            ),
            ("learn()", "learn(table=1)"),
            (
                "learn(table=1,priority=5,idle_timeout=10,hard_timeout=20,cookie=0x99,\
                 send_flow_rem,eth_type=0x800,nw_src=10.0.0.1,ip_dst=nw_src,\
                 NXM_OF_IP_SRC[0..7]=0x5,load:0x7->NXM_NX_REG1[],\
                 load:eth_src[0..15]->NXM_NX_REG2[0..15],output:NXM_OF_IN_PORT[],in_port=99,\
                 NXM_OF_VLAN_TCI[0..11]=0x3,eth_dst,reg3[0..3]=reg4[4..7],NXM_NX_REG5[]=0x10,\
                 load:0xff->reg6[0..7],load:0x1->eth_dst[40],eth_src=00:11:22:33:44:55)",
                "learn(table=1,idle_timeout=10,hard_timeout=20,priority=5,send_flow_rem,\
                 cookie=0x99,eth_type=0x800,ip_src=10.0.0.1,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[],\
                 NXM_OF_IP_SRC[0..7]=0x5,load:0x7->NXM_NX_REG1[],\
                 load:NXM_OF_ETH_SRC[0..15]->NXM_NX_REG2[0..15],output:NXM_OF_IN_PORT[],\
                 in_port=99,NXM_OF_VLAN_TCI[0..11]=0x3,NXM_OF_ETH_DST[],\
                 NXM_NX_REG3[0..3]=NXM_NX_REG4[4..7],reg5=0x10,load:0xff->NXM_NX_REG6[0..7],\
                 load:0x1->NXM_OF_ETH_DST[40],eth_src=00:11:22:33:44:55)",
            ),
            (
                "learn(eth_type=0x86dd,ipv6_src=::1,NXM_OF_ETH_SRC[]=00:11:22:33:44:55,\
                 eth_type=0,vlan_tci=0)",
                "learn(table=1,eth_type=0x86dd,ipv6_src=::1,eth_src=00:11:22:33:44:55,\
                 eth_type=0,vlan_tci=0)",
            ),
            (
                "learn(eth_type=0x800,NXM_OF_IP_TOS[]=0x10)",
                "learn(table=1,eth_type=0x800,nw_tos=16)",
            ),
            (
                "learn(table=1,eth_type=0x800,ip_proto=6,tcp_dst=80)",
                "learn(table=1,eth_type=0x800,nw_proto=6,tcp_dst=80)",
            ),
        ] {
            assert_eq!(printed(text).as_deref(), Ok(expected), "{text}");
        }
    }

    #[test]
    fn refuses_with_the_reason() {
        for (text, reason) in [
            ("learn(table=255)", "'255' is not a number up to 254"),
            ("learn(limit=10)", "not supported by this switch"),
            ("learn(fin_idle_timeout=3)", "not supported by this switch"),
            (
                "learn(nw_src=10.0.0.1)",
                "the learned rule must match ip (dl_type=0x0800) first",
            ),
            ("learn(NXM_OF_ETH_DST[]=NXM_NX_REG0[])", "differ in width"),
            ("learn(load:0x1->NXM_OF_ETH_TYPE[])", "cannot be written"),
            (
                "learn(load:0x10->NXM_NX_REG0[0..3])",
                "the value is too wide",
            ),
            ("learn(load:0x1)", "a load needs SRC->DST"),
            ("learn(nosuch=1)", "unknown field 'nosuch'"),
        ] {
            let message = printed(text).unwrap_err();
            assert!(message.contains(reason), "{text}: {message}");
        }
        // What a learn reads, the learning rule must match the protocol of.
        let reads_tcp = "actions=learn(load:tcp_src->reg0[0..15])";
        let message = parse_rule(&format!("ip,{reads_tcp}")).unwrap_err().0;
        assert!(message.contains("requires tcp"), "{message}");
        assert!(parse_rule(&format!("tcp,{reads_tcp}")).is_ok());
    }
}
