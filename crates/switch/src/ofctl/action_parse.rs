//! The action list of ovs-ofctl's flow syntax: `actions=mod_vlan_vid:10,resubmit(,1),output:2`.

use crate::action::{Action, SETTABLE_FIELDS, mod_name};
use crate::error::{FlowError, error, value_help};
use crate::field::{Field, parse_uint};
use crate::meter::METER_MAX;
use crate::ofctl::learn_text::parse_learn;
use crate::subfield::{Nxm, Subfield, SubfieldError};

/// Parses the action list after `actions=`.
pub fn parse_actions(text: &str) -> Result<Vec<Action>, FlowError> {
    let tokens = split_top_level(text.trim())?;
    if tokens.len() == 1 && tokens[0].eq_ignore_ascii_case("drop") {
        return Ok(Vec::new());
    }
    let mut actions = Vec::new();
    for token in tokens.into_iter().filter(|token| !token.is_empty()) {
        if let Some(inner) = token
            .strip_prefix("write_actions(")
            .and_then(|rest| rest.strip_suffix(')'))
        {
            let written = parse_actions(inner)?;
            if !written.iter().all(Action::fits_the_action_set) {
                return Err(error(format!(
                    "{token}: write_actions takes output, group and header actions only"
                )));
            }
            let n = u8::try_from(written.len())
                .map_err(|_| error(format!("{token}: at most 255 actions")))?;
            actions.push(Action::WriteActions(n));
            actions.extend(written);
            continue;
        }
        if token.eq_ignore_ascii_case("clear_actions") {
            actions.push(Action::ClearActions);
            continue;
        }
        actions.push(parse_action(token)?);
    }
    Ok(actions)
}

/// Splits at commas outside parentheses (`resubmit(,2)` holds one).
pub(crate) fn split_top_level(text: &str) -> Result<Vec<&str>, FlowError> {
    let mut tokens = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                tokens.push(text[start..at].trim());
                start = at + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err(error(format!("{text}: unbalanced parentheses")));
        }
    }
    if depth != 0 {
        return Err(error(format!("{text}: unbalanced parentheses")));
    }
    tokens.push(text[start..].trim());
    Ok(tokens)
}

fn parse_action(token: &str) -> Result<Action, FlowError> {
    if let Some(port) = parse_uint(token) {
        return Ok(Action::Output(
            action_number(token, port, u128::from(u32::MAX))? as u32,
        ));
    }
    if let Some(inner) = token
        .strip_prefix("learn(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        return parse_learn(token, inner);
    }
    if let Some(inner) = token
        .strip_prefix("resubmit(")
        .and_then(|rest| rest.strip_suffix(')'))
    {
        let table = inner
            .strip_prefix(',')
            .ok_or_else(|| error(format!("{token}: only resubmit(,TABLE) is supported")))?;
        let table =
            parse_uint(table).ok_or_else(|| error(format!("{token}: table must be a number")))?;
        return Ok(Action::Resubmit(action_number(token, table, 254)? as u8));
    }
    let (name, argument) = match token.split_once(':') {
        Some((name, argument)) => (name, Some(argument)),
        None => (token, None),
    };
    let name = name.to_ascii_lowercase();
    let needs = |what: &str| {
        argument
            .filter(|argument| !argument.is_empty())
            .ok_or_else(|| error(format!("{token}: '{name}' needs {what} ({name}:{what})")))
    };
    let uint = |what: &str, max: u128| -> Result<u128, FlowError> {
        let text = needs(what)?;
        let value =
            parse_uint(text).ok_or_else(|| error(format!("{token}: '{text}' is not a number")))?;
        action_number(token, value, max)
    };
    let no_argument = |action: Action| match argument {
        Some(_) => Err(error(format!("{token}: '{name}' takes no argument"))),
        _ => Ok(action),
    };
    match name.as_str() {
        // `output:NXM_NX_REG0[0..15]`: the port a field's bits hold (ovs-ofctl's test: a '[').
        "output" if argument.is_some_and(|a| a.contains('[')) => {
            let src =
                Subfield::parse(needs("SRC[BITS]")?).map_err(|e| error(format!("{token}: {e}")))?;
            if src.n_bits > 32 {
                return Err(error(format!("{token}: a port has at most 32 bits")));
            }
            Ok(Action::OutputReg(src))
        }
        // `output:NORMAL` and the other reserved ports by name, as ovs-ofctl reads them.
        "output" => match argument.and_then(reserved_port) {
            Some(action) => Ok(action),
            None => Ok(Action::Output(uint("PORT", u128::from(u32::MAX))? as u32)),
        },
        "normal" => no_argument(Action::Normal),
        "flood" => no_argument(Action::Flood),
        "all" => no_argument(Action::All),
        "in_port" => no_argument(Action::InPort),
        "controller" => match argument {
            None => Ok(Action::Controller(u16::MAX)),
            Some(_) => Ok(Action::Controller(uint("MAX_LEN", 65535)? as u16)),
        },
        // pop_vlan: OpenFlow 1.1's name.
        "strip_vlan" | "pop_vlan" => no_argument(Action::StripVlan),
        "dec_ttl" => no_argument(Action::DecTtl),
        "set_queue" => Ok(Action::SetQueue(uint("QUEUE", u128::from(u32::MAX))? as u32)),
        "drop" => Err(error("drop must be the only action")),
        // set_vlan_*: OpenFlow 1.1's names, as `show` lists them and ovs-ofctl reads them.
        "mod_vlan_vid" | "set_vlan_vid" => Ok(Action::ModVlanVid(uint("VID", 4095)? as u16)),
        "mod_vlan_pcp" | "set_vlan_pcp" => Ok(Action::ModVlanPcp(uint("PCP", 7)? as u8)),
        "goto_table" => Ok(Action::GotoTable(uint("TABLE", 254)? as u8)),
        "group" => Ok(Action::Group(uint("GROUP", 0xffff_ff00)? as u32)),
        "meter" => Ok(Action::Meter(uint("METER", u128::from(METER_MAX))? as u32)),
        "write_metadata" => parse_write_metadata(token, needs("VALUE[/MASK]")?),
        "mod_nw_tos" => {
            let tos = uint("TOS", 255)?;
            if tos & 0x03 != 0 {
                return Err(error(format!(
                    "{token}: ToS must be a multiple of 4 (the DSCP bits)"
                )));
            }
            Ok(Action::SetField(Field::NwTos, tos))
        }
        // Open vSwitch's older spellings of set_field:N->tun_id (32 and 64 bits), as
        // ovs-ofctl reads them and sends them over OpenFlow 1.3.
        "set_tunnel" => Ok(Action::SetField(
            Field::TunId,
            uint("TUN_ID", u128::from(u32::MAX))?,
        )),
        "set_tunnel64" => Ok(Action::SetField(
            Field::TunId,
            uint("TUN_ID", u128::from(u64::MAX))?,
        )),
        "set_field" => parse_set_field(token, needs("VALUE->FIELD")?),
        "load" => parse_load(token, needs("VALUE->DST")?),
        "move" => parse_move(token, needs("SRC->DST")?),
        _ => parse_mod(token, &name, needs("VALUE")),
    }
}

/// Actions spelled as one word (any case): never read as a port's name, whatever a port
/// is called (`ofctl::port_names`).
pub(crate) const ONE_WORD_ACTIONS: [&str; 10] = [
    "normal",
    "flood",
    "all",
    "in_port",
    "controller",
    "drop",
    "strip_vlan",
    "pop_vlan",
    "dec_ttl",
    "clear_actions",
];

/// The action a reserved port's name (`output:NAME`, any case) stands for.
fn reserved_port(name: &str) -> Option<Action> {
    Some(match name.to_ascii_lowercase().as_str() {
        "in_port" => Action::InPort,
        "normal" => Action::Normal,
        "flood" => Action::Flood,
        "all" => Action::All,
        "controller" => Action::Controller(u16::MAX),
        _ => return None,
    })
}

/// `mod_dl_src:MAC` and the other OpenFlow 1.0 spellings of set-field.
fn parse_mod(
    token: &str,
    name: &str,
    argument: Result<&str, FlowError>,
) -> Result<Action, FlowError> {
    let field = SETTABLE_FIELDS
        .into_iter()
        .find(|&field| mod_name(field) == Some(name))
        .ok_or_else(|| error(format!("unknown action '{token}'")))?;
    let text = argument?;
    let value = field
        .parse_value(text)
        .ok_or_else(|| error(format!("{token}: {}", value_help(field))))?;
    Ok(Action::SetField(field, value))
}

/// `write_metadata:VALUE[/MASK]`, numbers of up to 64 bits.
fn parse_write_metadata(token: &str, argument: &str) -> Result<Action, FlowError> {
    let number = |text: &str| {
        parse_uint(text)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| error(format!("{token}: '{text}' is not a 64-bit number")))
    };
    let (value, mask) = match argument.split_once('/') {
        Some((value, mask)) => (number(value)?, number(mask)?),
        None => (number(argument)?, u64::MAX),
    };
    Ok(Action::WriteMetadata(value, mask))
}

fn action_number(token: &str, value: u128, max: u128) -> Result<u128, FlowError> {
    if value > max {
        return Err(error(format!(
            "{token}: value out of range (at most {max})"
        )));
    }
    Ok(value)
}

fn parse_set_field(token: &str, argument: &str) -> Result<Action, FlowError> {
    let (value, name) = argument
        .split_once("->")
        .ok_or_else(|| error(format!("{token}: set_field needs VALUE->FIELD")))?;
    let field =
        Field::from_name(name).ok_or_else(|| error(format!("{token}: unknown field '{name}'")))?;
    if !SETTABLE_FIELDS.contains(&field) && !matches!(field, Field::Reg(_)) {
        return Err(error(format!("{token}: field '{field}' cannot be set")));
    }
    if let (Field::Reg(_), Some((value, mask))) = (field, value.split_once('/')) {
        return masked_register_write(token, field, value, mask);
    }
    let value = field
        .parse_value(value)
        .ok_or_else(|| error(format!("{token}: {}", value_help(field))))?;
    if field == Field::NwTos && value & 0x03 != 0 {
        return Err(error(format!(
            "{token}: ToS must be a multiple of 4 (the DSCP bits)"
        )));
    }
    Ok(Action::SetField(field, value))
}

/// `set_field:VALUE/MASK->regN`: the bits under the mask, which must be one run of ones, as
/// the `load` of those bits that Open vSwitch sends for it over OpenFlow 1.3.
fn masked_register_write(
    token: &str,
    field: Field,
    value: &str,
    mask: &str,
) -> Result<Action, FlowError> {
    let number = |text: &str| {
        field
            .parse_value(text)
            .ok_or_else(|| error(format!("{token}: {}", value_help(field))))
    };
    let (value, mask) = (number(value)?, number(mask)?);
    let ofs = mask.trailing_zeros();
    // A zero mask has 128 trailing zeros: shifting by them would overflow.
    let n_bits = (mask.checked_shr(ofs).unwrap_or(0)).trailing_ones();
    if mask == 0 || (mask >> ofs).checked_shr(n_bits).unwrap_or(0) != 0 {
        return Err(error(format!(
            "{token}: the mask must be one run of ones (load writes one run of bits)"
        )));
    }
    if value & !mask != 0 {
        return Err(error(format!(
            "{token}: the value has bits outside the mask"
        )));
    }
    let nxm = Nxm::from_name(field.name()).expect("every register has an NXM field");
    let dst = Subfield::new(nxm, ofs, n_bits).expect("a run within the register");
    Ok(Action::Load(dst, (value >> ofs) as u64))
}

/// `load:VALUE->DST[BITS]`: a number of at most 64 bits into a field's bits.
fn parse_load(token: &str, argument: &str) -> Result<Action, FlowError> {
    let (value, dst) = argument
        .split_once("->")
        .ok_or_else(|| error(format!("{token}: load needs VALUE->DST")))?;
    let dst = destination(token, dst)?;
    if dst.n_bits > 64 {
        return Err(error(format!(
            "{token}: load writes at most 64 bits (set_field writes a whole field)"
        )));
    }
    let value = parse_uint(value)
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| error(format!("{token}: '{value}' is not a 64-bit number")))?;
    if dst.n_bits < 64 && value >> dst.n_bits != 0 {
        return Err(error(format!("{token}: {}", SubfieldError::ValueTooWide)));
    }
    Ok(Action::Load(dst, value))
}

/// `move:SRC[BITS]->DST[BITS]`: as many bits each side.
fn parse_move(token: &str, argument: &str) -> Result<Action, FlowError> {
    let (src, dst) = argument
        .split_once("->")
        .ok_or_else(|| error(format!("{token}: move needs SRC->DST")))?;
    let src = Subfield::parse(src).map_err(|e| error(format!("{token}: {e}")))?;
    let dst = destination(token, dst)?;
    if src.n_bits != dst.n_bits {
        return Err(error(format!(
            "{token}: {} ({} bits and {})",
            SubfieldError::WidthsDiffer,
            src.n_bits,
            dst.n_bits
        )));
    }
    Ok(Action::Move(src, dst))
}

/// The bits a `load` or `move` writes, if they may be written.
fn destination(token: &str, text: &str) -> Result<Subfield, FlowError> {
    let dst = Subfield::parse(text).map_err(|e| error(format!("{token}: {e}")))?;
    dst.writable().map_err(|_| {
        error(format!(
            "{token}: {} cannot be written (load and move write registers, metadata and the \
             fields set_field sets)",
            dst.nxm.info().name
        ))
    })?;
    Ok(dst)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_one_word_action_is_an_action() {
        for word in ONE_WORD_ACTIONS {
            assert!(parse_actions(word).is_ok(), "{word}");
            assert!(parse_actions(&word.to_uppercase()).is_ok(), "{word}");
        }
    }
    use crate::ofctl::flow_parse::parse_rule;

    #[test]
    fn every_action() {
        let rule = parse_rule(
            "ip,actions=output:1,2,normal,flood,all,in_port,controller,mod_vlan_vid:10,mod_vlan_pcp:2,\
             strip_vlan,mod_dl_src:02:00:00:00:00:01,mod_dl_dst:02:00:00:00:00:02,mod_nw_src:10.0.0.1,\
             mod_nw_dst:10.0.0.2,mod_nw_tos:184,dec_ttl,set_field:9->nw_ttl,resubmit(,3),goto_table:4",
        )
        .unwrap();
        assert_eq!(rule.actions.len(), 19);
        assert_eq!(rule.actions[1], Action::Output(2));
        assert_eq!(rule.actions[14], Action::SetField(Field::NwTos, 184));
        assert_eq!(rule.actions[17], Action::Resubmit(3));
        assert_eq!(rule.actions[18], Action::GotoTable(4));
        let rule = parse_rule("tcp,actions=mod_tp_src:80,set_field:443->tp_dst").unwrap();
        assert_eq!(
            rule.actions,
            vec![
                Action::SetField(Field::TpSrc, 80),
                Action::SetField(Field::TpDst, 443)
            ]
        );
        assert!(parse_rule("actions=").unwrap().actions.is_empty());
        // Open vSwitch's set_tunnel spellings are set_field to tun_id.
        let rule =
            parse_rule("actions=set_tunnel:0x2a,set_tunnel64:0x100000000,output:10").unwrap();
        assert_eq!(
            rule.actions[..2],
            [
                Action::SetField(Field::TunId, 42),
                Action::SetField(Field::TunId, 1 << 32)
            ]
        );
        assert!(parse_rule("actions=set_tunnel:0x100000000").is_err());
        // OpenFlow 1.1's names for the VLAN rewrites, which `show` lists.
        let rule = parse_rule("actions=set_vlan_vid:5,set_vlan_pcp:3").unwrap();
        assert_eq!(
            rule.actions,
            vec![Action::ModVlanVid(5), Action::ModVlanPcp(3)]
        );
        let rule = parse_rule("actions=set_queue:7,output:2").unwrap();
        assert_eq!(rule.actions, vec![Action::SetQueue(7), Action::Output(2)]);
        assert_eq!(rule.actions[0].to_string(), "set_queue:7");
        assert!(parse_rule("actions=set_queue").is_err());
        assert!(parse_rule("actions=set_queue:4294967296").is_err());
        // Reserved ports by name after output:, in any case, as ovs-ofctl reads them.
        let rule =
            parse_rule("actions=output:in_port,output:NORMAL,output:flood,output:All").unwrap();
        assert_eq!(
            rule.actions,
            vec![Action::InPort, Action::Normal, Action::Flood, Action::All]
        );
        assert_eq!(
            parse_rule("actions=output:controller").unwrap().actions,
            vec![Action::Controller(u16::MAX)]
        );
    }

    #[test]
    fn load_move_and_registers_print_as_ovs_ofctl_does() {
        let text = "load:0x5->NXM_NX_REG0[],load:0->NXM_NX_REG1[0..15],move:NXM_OF_IN_PORT[]->NXM_NX_REG2[16..31],set_field:0x7->reg3,output:1,output:NXM_NX_REG0[0..15]";
        let rule = parse_rule(&format!("actions={text}")).unwrap();
        assert_eq!(crate::action::ActionList(&rule.actions).to_string(), text);
        // The short names, as ovs-ofctl takes them.
        let rule = parse_rule("udp,actions=move:udp_src[]->reg0[0..15],load:1->reg1[3]").unwrap();
        assert_eq!(
            crate::action::ActionList(&rule.actions).to_string(),
            "move:NXM_OF_UDP_SRC[]->NXM_NX_REG0[0..15],load:0x1->NXM_NX_REG1[3]"
        );
        // A masked set_field is the load of its bits.
        let rule = parse_rule("actions=set_field:0x500/0xff00->reg2").unwrap();
        assert_eq!(
            crate::action::ActionList(&rule.actions).to_string(),
            "load:0x5->NXM_NX_REG2[8..15]"
        );
        let refused = |text: &str| parse_rule(text).unwrap_err().to_string();
        assert_eq!(
            refused("actions=set_field:0x5/0x5->reg0"),
            "set_field:0x5/0x5->reg0: the mask must be one run of ones (load writes one run of bits)"
        );
        assert!(refused("actions=set_field:0/0->reg0").contains("one run of ones"));
        assert_eq!(
            refused("actions=set_field:0x7/0x3->reg0"),
            "set_field:0x7/0x3->reg0: the value has bits outside the mask"
        );
        assert_eq!(
            refused("actions=output:NXM_NX_IPV6_SRC[0..63]"),
            "output:NXM_NX_IPV6_SRC[0..63]: a port has at most 32 bits"
        );
        assert_eq!(
            refused("actions=load:0x10->NXM_NX_REG0[0..3]"),
            "load:0x10->NXM_NX_REG0[0..3]: the value does not fit in the bits"
        );
        assert_eq!(
            refused("actions=move:NXM_NX_REG0[]->NXM_NX_REG1[0..15]"),
            "move:NXM_NX_REG0[]->NXM_NX_REG1[0..15]: source and destination differ in width (32 bits and 16)"
        );
        assert_eq!(
            refused("actions=load:1->NXM_OF_IN_PORT[]"),
            "load:1->NXM_OF_IN_PORT[]: NXM_OF_IN_PORT cannot be written (load and move write registers, metadata and the fields set_field sets)"
        );
        assert_eq!(
            refused("actions=load:1->NXM_NX_IPV6_SRC[]"),
            "load:1->NXM_NX_IPV6_SRC[]: load writes at most 64 bits (set_field writes a whole field)"
        );
        assert_eq!(
            refused("actions=move:NXM_OF_TCP_SRC[]->NXM_NX_REG0[0..15]"),
            "move:NXM_OF_TCP_SRC[]->NXM_NX_REG0[0..15] requires tcp or tcp6 (nw_proto=6)"
        );
        for text in [
            "actions=write_actions(load:1->reg0[])",
            "actions=write_actions(move:reg1[]->reg0[])",
        ] {
            assert!(refused(text).contains("write_actions takes"), "{text}");
        }
    }

    #[test]
    fn a_meter_comes_first_and_prints_as_written() {
        let rule = parse_rule("udp,actions=meter:7,output:2").unwrap();
        assert_eq!(rule.actions, [Action::Meter(7), Action::Output(2)]);
        assert_eq!(
            crate::action::ActionList(&rule.actions).to_string(),
            "meter:7,output:2"
        );
    }

    #[test]
    fn controller_takes_a_max_len_and_nothing_else() {
        let actions = |text: &str| parse_rule(text).map(|rule| rule.actions);
        assert_eq!(
            actions("actions=controller,controller:100"),
            Ok(vec![Action::Controller(65535), Action::Controller(100)])
        );
        assert_eq!(
            actions("actions=controller:abc").unwrap_err().to_string(),
            "controller:abc: 'abc' is not a number"
        );
        assert_eq!(
            actions("actions=controller:65536").unwrap_err().to_string(),
            "controller:65536: value out of range (at most 65535)"
        );
        assert_eq!(
            actions("actions=flood:1").unwrap_err().to_string(),
            "flood:1: 'flood' takes no argument"
        );
    }
}
