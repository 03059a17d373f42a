//! The bridge's meters (OpenFlow's METER_MOD): set, deleted with the rules that use them,
//! and the rules each one meters.

use core::time::Duration;

use super::{InstalledRule, RuleTables};
use crate::classifier::RuleId;
use crate::dpif::revalidate::RuleChange;
use crate::meter::{MAX_METERS, Meter, MeterConfig, MeterError, MeterRef};

impl RuleTables {
    pub fn meter(&self, id: u32) -> Option<&MeterRef> {
        self.meters.get(&id)
    }

    /// Every meter, by id.
    pub fn meters(&self) -> impl Iterator<Item = &MeterRef> {
        self.meters.values()
    }

    /// Installs a meter (`replace`: replaces one; OpenFlow's METER_MOD add and modify), its
    /// bucket full and its counts zero at `now`. The flows that name it take the new one.
    pub fn set_meter(
        &mut self,
        config: MeterConfig,
        replace: bool,
        now: Duration,
    ) -> Result<(), MeterError> {
        config.check()?;
        match (self.meters.contains_key(&config.id), replace) {
            (true, false) => return Err(MeterError::Exists),
            (false, true) => return Err(MeterError::Unknown),
            (false, false) if self.meters.len() >= MAX_METERS => return Err(MeterError::TooMany),
            _ => {}
        }
        let meter = MeterRef(std::sync::Arc::new(Meter::new(config, now)));
        self.meters.insert(config.id, meter);
        // A flow translated while the controller meter was missing holds no meter for its
        // packet-ins: adding that one must reach every flow.
        match config.id {
            crate::meter::METER_CONTROLLER => self.changed_everything(),
            id => self.changed(RuleChange::Meter(id)),
        }
        Ok(())
    }

    /// Removes a meter and the rules that use it (as OpenFlow says); the rules removed.
    pub fn delete_meter(&mut self, id: u32) -> Vec<InstalledRule> {
        if self.meters.remove(&id).is_none() {
            return Vec::new();
        }
        self.changed(RuleChange::Meter(id));
        let ids = self.metered_by(id);
        ids.into_iter().filter_map(|id| self.remove(id)).collect()
    }

    /// The rules that pass meter `id`.
    pub fn metered_by(&self, id: u32) -> Vec<RuleId> {
        self.iter()
            .filter(|(_, installed)| installed.rule.meter() == Some(id))
            .map(|(id, _)| id)
            .collect()
    }

    /// Removes meter `only`, or every meter (None), and the rules that use them.
    pub fn delete_meters(&mut self, only: Option<u32>) -> Vec<InstalledRule> {
        let ids: Vec<u32> = match only {
            Some(id) => vec![id],
            None => self.meters.keys().copied().collect(),
        };
        ids.into_iter()
            .flat_map(|id| self.delete_meter(id))
            .collect()
    }

    /// How many rules use meter `id`.
    pub fn meter_flow_count(&self, id: u32) -> usize {
        self.rules
            .iter()
            .flatten()
            .filter(|installed| installed.rule.meter() == Some(id))
            .count()
    }
}
