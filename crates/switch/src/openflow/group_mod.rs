//! GROUP_MOD on the bridge's groups: add, modify and delete (one group, or `OFPG_ALL`),
//! through the same [`Ofproto::set_group`] as ctl's add-group, inside one `Bridge::edit`
//! (the agent's, or a bundle's commit of many).

use core::time::Duration;

use crate::group::{Group, GroupError, GroupType};
use crate::ofproto::rule_table::InstalledRule;
use crate::ofproto::state::{Ofproto, OutputPorts};
use crate::openflow::error::{OfpError, bad_action, group_mod_failed};
use crate::openflow::message::{GroupMod, group_command};
use crate::openflow::wire::GROUP_ALL;

/// A GROUP_MOD of any command; the rules a delete took with its groups.
pub fn apply_group_mod(
    dp: &mut Ofproto,
    gm: &GroupMod,
    now: Duration,
) -> Result<Vec<InstalledRule>, OfpError> {
    let replace = match gm.command {
        group_command::DELETE => {
            let only = (gm.group_id != GROUP_ALL).then_some(gm.group_id);
            return Ok(dp.delete_groups(only, now));
        }
        group_command::ADD => false,
        group_command::MODIFY => true,
        _ => return Err(group_mod_failed::BAD_COMMAND),
    };
    let kind = GroupType::from_number(gm.kind).ok_or(group_mod_failed::BAD_TYPE)?;
    let group = Group {
        id: gm.group_id,
        kind,
        buckets: gm.buckets.clone(),
    };
    dp.set_group(group, replace, OutputPorts::AnyNumber, now)
        .map_err(|e| match e {
            GroupError::IndirectBuckets | GroupError::InvalidId => group_mod_failed::INVALID_GROUP,
            GroupError::NoWatch => group_mod_failed::BAD_WATCH,
            GroupError::Chained => group_mod_failed::CHAINING_UNSUPPORTED,
            GroupError::Exists => group_mod_failed::GROUP_EXISTS,
            GroupError::Unknown => group_mod_failed::UNKNOWN_GROUP,
            GroupError::TooMany => group_mod_failed::OUT_OF_GROUPS,
            GroupError::BadOutPort(_) => bad_action::BAD_OUT_PORT,
            GroupError::TooLong => group_mod_failed::BAD_BUCKET,
        })?;
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::Bucket;
    use crate::openflow::reply;

    /// So many buckets that the group's statistics (16 bytes a bucket) would not fit a
    /// reply: refused. Before, dump-group-stats wrapped its lengths.
    #[test]
    fn a_group_too_long_to_dump_is_refused() {
        let mut dp = Ofproto::new();
        let bucket = Bucket {
            weight: 0,
            watch_port: None,
            actions: Vec::new(),
        };
        let gm = |n| GroupMod {
            command: group_command::ADD,
            kind: GroupType::All.number(),
            group_id: 1,
            buckets: vec![bucket.clone(); n],
        };
        let at_most = (reply::MAX_MESSAGE - 16 - 40) / 16;
        let refused = apply_group_mod(&mut dp, &gm(at_most + 1), Duration::ZERO);
        assert_eq!(refused.err(), Some(group_mod_failed::BAD_BUCKET));
        assert!(apply_group_mod(&mut dp, &gm(at_most), Duration::ZERO).is_ok());
    }
}
