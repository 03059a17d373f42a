//! Classifier and caches, differential (issue 5): 10,000 random rules (priorities, masks, four
//! tables with goto and resubmit), 100,000 random packets; the decision the caches give (EMC →
//! megaflow → tables) must equal a brute-force linear search's, packet by packet, also after
//! random rule changes between batches — and the per-rule packet counters must agree too.
//! Rules write registers (`load`, `move` from the packet's bits) that later tables match, and
//! move bits between a packet's fields, so every megaflow must have pinned what those read;
//! `learn` actions build rules from the packet's bits, which every packet of a megaflow must
//! build alike.

use std::collections::HashMap;
use std::time::Duration;

use wirespeed_packet::MacAddr;
use wirespeed_packet::flow_key::FlowKey;
use wirespeed_switch::classifier::{RuleId, RuleRank};
use wirespeed_switch::field::PACKET_WORDS;
use wirespeed_switch::ofctl::action_parse::parse_actions;
use wirespeed_switch::subfield::Subfield;
use wirespeed_switch::{
    Action, Decision, Field, FlowBits, FlowCache, Match, Rule, RuleSelector, RuleTables,
};

const TABLES: u8 = 4;

/// SplitMix64: a seeded, dependency-free generator; the seed is printed on failure.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

/// Small value pools, so random rules and packets meet often.
fn mac(rng: &mut Rng) -> MacAddr {
    MacAddr([2, 0, 0, 0, 0, rng.below(12) as u8 + 1])
}
fn ipv4(rng: &mut Rng) -> u32 {
    0x0a00_0000 | (rng.below(3) as u32) << 16 | (rng.below(4) as u32) << 8 | rng.below(8) as u32
}
fn ipv6(rng: &mut Rng) -> u128 {
    0x2001_0db8 << 96 | (rng.below(3) as u128) << 64 | rng.below(6) as u128
}
fn port(rng: &mut Rng) -> u16 {
    rng.pick(&[22, 53, 80, 443, 8080, 0x1234, 0x1235, 5353])
}

/// A rule shape: the protocol it needs and which fields it matches, with which mask. Real rule
/// sets use a few shapes with many values; so does this test (about 40 shapes).
#[derive(Clone)]
struct Shape {
    family: Family,
    fields: Vec<(Field, u128)>,
    /// Some rules of the shape learn ([`add_learn`]).
    learns: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Family {
    Any,
    Ip,
    Tcp,
    Udp,
    Icmp,
    Ipv6,
    Tcp6,
    Arp,
}

impl Family {
    fn dl_type_and_proto(self) -> (Option<u16>, Option<u8>) {
        match self {
            Family::Any => (None, None),
            Family::Ip => (Some(0x0800), None),
            Family::Tcp => (Some(0x0800), Some(6)),
            Family::Udp => (Some(0x0800), Some(17)),
            Family::Icmp => (Some(0x0800), Some(1)),
            Family::Ipv6 => (Some(0x86dd), None),
            Family::Tcp6 => (Some(0x86dd), Some(6)),
            Family::Arp => (Some(0x0806), None),
        }
    }

    /// The fields a rule of this family may match, with the masks it may use.
    fn fields(self) -> Vec<(Field, Vec<u128>)> {
        let mut fields = vec![
            (Field::InPort, vec![u32::MAX as u128]),
            (Field::DlSrc, vec![0xffff_ffff_ffff, 0xffff_ffff_fff0]),
            (Field::DlDst, vec![0xffff_ffff_ffff, 0x0100_0000_0000]),
            (Field::VlanTci, vec![0x1fff, 0xffff, 0xf000]),
        ];
        let ipv4_masks = vec![
            0xffff_ffff,
            0xffff_ff00,
            0xffff_0000,
            0xff00_0000,
            0xff00_ff00,
        ];
        let port_masks = vec![0xffff, 0xff00, 0xfff0];
        match self {
            Family::Any => {}
            Family::Ip | Family::Tcp | Family::Udp | Family::Icmp => {
                fields.push((Field::NwSrc, ipv4_masks.clone()));
                fields.push((Field::NwDst, ipv4_masks));
                fields.push((Field::NwTos, vec![0xfc]));
                fields.push((Field::NwEcn, vec![0x3]));
                // Partial TTL masks: after dec_ttl, 64 -> 63 crosses them.
                fields.push((Field::NwTtl, vec![0xff, 0xc0, 0xf0]));
            }
            Family::Ipv6 | Family::Tcp6 => {
                fields.push((Field::Ipv6Src, vec![u128::MAX, u128::MAX << 64]));
                fields.push((Field::Ipv6Dst, vec![u128::MAX, u128::MAX << 64]));
            }
            Family::Arp => {
                fields.push((Field::ArpSpa, ipv4_masks.clone()));
                fields.push((Field::ArpTpa, ipv4_masks));
                fields.push((Field::ArpOp, vec![0xffff]));
                // They share the words of the IPv6 addresses.
                fields.push((Field::ArpSha, vec![0xffff_ffff_ffff, 0xffff_ffff_fff0]));
                fields.push((Field::ArpTha, vec![0xffff_ffff_ffff]));
            }
        }
        if matches!(self, Family::Tcp | Family::Udp | Family::Tcp6) {
            fields.push((Field::TpSrc, port_masks.clone()));
            fields.push((Field::TpDst, port_masks));
        }
        if self == Family::Icmp {
            fields.push((Field::IcmpType, vec![0xff]));
        }
        fields
    }
}

const FAMILIES: [Family; 8] = [
    Family::Any,
    Family::Ip,
    Family::Tcp,
    Family::Udp,
    Family::Icmp,
    Family::Ipv6,
    Family::Tcp6,
    Family::Arp,
];

fn random_shape(rng: &mut Rng) -> Shape {
    let family = rng.pick(&FAMILIES);
    let mut fields = Vec::new();
    for (field, masks) in family.fields() {
        if rng.chance(30) {
            fields.push((field, masks[rng.below(masks.len() as u64) as usize]));
        }
    }
    Shape {
        family,
        fields,
        learns: true,
    }
}

/// A random value for `field`, from the pools.
fn random_value(rng: &mut Rng, field: Field) -> u128 {
    match field {
        Field::InPort => rng.below(8) as u128 + 1,
        Field::DlSrc | Field::DlDst | Field::ArpSha | Field::ArpTha => {
            Field::DlSrc.parse_value(&mac(rng).to_string()).unwrap()
        }
        Field::Metadata => rng.pick(&[0u128, 1, 2, 0x101]),
        Field::Reg(_) => rng.pick(&[0u128, 1, 2, 3, 5, 8, 0x101, 0x500]),
        Field::NwEcn => rng.pick(&[0u128, 1, 3]),
        Field::VlanTci => match rng.below(4) {
            0 => 0,
            n => 0x1000 | (n as u128) | (rng.below(2) as u128) << 13,
        },
        Field::NwSrc | Field::NwDst | Field::ArpSpa | Field::ArpTpa => ipv4(rng) as u128,
        Field::Ipv6Src | Field::Ipv6Dst => ipv6(rng),
        Field::NwTos => rng.pick(&[0u128, 0x20, 0xb8]),
        Field::NwTtl => rng.pick(&[1u128, 2, 64, 65, 128]),
        Field::TpSrc | Field::TpDst => port(rng) as u128,
        Field::IcmpType => rng.pick(&[0u128, 8]),
        Field::ArpOp => rng.below(2) as u128 + 1,
        _ => 0,
    }
}

fn random_rule(rng: &mut Rng, shapes: &[Shape], table: u8) -> Rule {
    let shape = &shapes[rng.below(shapes.len() as u64) as usize];
    let mut flow_match = Match::ANY;
    let (dl_type, nw_proto) = shape.family.dl_type_and_proto();
    if let Some(dl_type) = dl_type {
        flow_match
            .add(Field::DlType, dl_type.into(), u128::MAX)
            .unwrap();
    }
    if let Some(nw_proto) = nw_proto {
        flow_match
            .add(Field::NwProto, nw_proto.into(), u128::MAX)
            .unwrap();
    }
    for &(field, mask) in &shape.fields {
        let value = random_value(rng, field);
        // A VLAN match on "tagged" bits must say tagged; keep the present bit consistent.
        let value = if field == Field::VlanTci && mask != 0xffff {
            value | 0x1000
        } else {
            value
        };
        flow_match.set(field, value, mask);
    }
    // Later tables may look at what earlier ones wrote to the metadata.
    if table > 0 && rng.chance(20) {
        let mask = rng.pick(&[u64::MAX as u128, 0xff]);
        flow_match.set(Field::Metadata, random_value(rng, Field::Metadata), mask);
    }
    // ...and at what earlier ones wrote to the registers.
    if table > 0 && rng.chance(25) {
        let register = rng.pick(&[Field::Reg(0), Field::Reg(1)]);
        let mask = rng.pick(&[u32::MAX as u128, 0xff, 0xff00]);
        flow_match.set(register, random_value(rng, register) & mask, mask);
    }
    let mut actions = random_actions(rng, shape.family, table);
    if shape.learns {
        add_learn(&mut actions, &flow_match, shape.family);
    }
    let mut rule = Rule::new(flow_match, actions);
    rule.table = table;
    rule.priority = rng.below(200) as u16;
    rule
}

fn random_actions(rng: &mut Rng, family: Family, table: u8) -> Vec<Action> {
    let mut actions = Vec::new();
    let ip = matches!(
        family,
        Family::Ip | Family::Tcp | Family::Udp | Family::Icmp
    );
    let bits = |text: &str| Subfield::parse(text).unwrap();
    for _ in 0..rng.below(3) {
        let action = match rng.below(10) {
            0 => Action::SetField(Field::DlSrc, random_value(rng, Field::DlSrc)),
            6 => {
                let (dst, value) = rng.pick(&[
                    ("NXM_NX_REG0[]", 0x101),
                    ("NXM_NX_REG1[0..7]", 5),
                    ("NXM_NX_REG0[8..15]", 5),
                ]);
                Action::Load(bits(dst), value)
            }
            7 => {
                let mut moves = vec![
                    ("NXM_OF_IN_PORT[0..7]", "NXM_NX_REG0[0..7]"),
                    ("NXM_OF_ETH_SRC[0..7]", "NXM_NX_REG1[0..7]"),
                    ("NXM_NX_REG0[0..7]", "NXM_NX_REG1[8..15]"),
                ];
                if ip {
                    // The TTL an earlier dec_ttl computed from the packet's.
                    moves.push(("NXM_NX_IP_TTL[]", "NXM_NX_REG0[0..7]"));
                }
                let (src, dst) = rng.pick(&moves);
                Action::Move(bits(src), bits(dst))
            }
            8 if ip => Action::Move(bits("NXM_OF_IP_SRC[]"), bits("NXM_OF_IP_DST[]")),
            8 => Action::Move(bits("NXM_NX_REG0[0..7]"), bits("NXM_OF_ETH_DST[0..7]")),
            9 => Action::Load(bits("NXM_OF_ETH_SRC[0..3]"), 5),
            1 => Action::ModVlanVid(rng.below(4) as u16),
            2 => Action::StripVlan,
            3 if ip => Action::SetField(Field::NwDst, ipv4(rng) as u128),
            4 if matches!(family, Family::Tcp | Family::Udp) => {
                Action::SetField(Field::TpDst, port(rng) as u128)
            }
            _ => Action::DecTtl,
        };
        actions.push(action);
    }
    if table + 1 < TABLES && rng.chance(25) {
        actions.push(Action::Resubmit(
            table + 1 + rng.below((TABLES - table - 1) as u64) as u8,
        ));
    }
    match rng.below(10) {
        0 => {}
        8 => actions.push(Action::OutputReg(bits("NXM_NX_REG0[0..7]"))),
        9 => actions.push(Action::OutputReg(bits("NXM_OF_ETH_SRC[0..3]"))),
        1 => actions.push(Action::Normal),
        2 => actions.push(Action::Flood),
        3 => actions.push(Action::Controller(u16::MAX)),
        _ => actions.push(Action::Output(rng.below(8) as u32 + 1)),
    }
    if rng.chance(30) {
        let value = random_value(rng, Field::Metadata) as u64;
        actions.push(Action::WriteMetadata(
            value,
            rng.pick(&[u64::MAX, 0xff, 0x100]),
        ));
    }
    if table + 1 < TABLES && rng.chance(35) {
        actions.push(Action::GotoTable(
            table + 1 + rng.below((TABLES - table - 1) as u64) as u8,
        ));
    }
    actions
}

/// A `learn` in about one rule in twelve, somewhere before the rule's last output. Chosen by a
/// hash of the match, not by the generator, whose sequence the rules' other randomness (and
/// with it how wide the megaflows come out) keeps as it was.
fn add_learn(actions: &mut Vec<Action>, flow_match: &Match, family: Family) {
    let hash = flow_match.value().hash64();
    if !hash.is_multiple_of(12) {
        return;
    }
    let mut learns = vec![
        "learn(table=3,NXM_OF_ETH_DST[]=NXM_OF_ETH_SRC[],load:NXM_OF_IN_PORT[]->NXM_NX_REG0[0..15])",
        // The registers as earlier actions wrote them; the VLAN as mod_vlan_vid left it.
        "learn(table=2,NXM_NX_REG1[0..7]=NXM_NX_REG0[0..7],NXM_OF_VLAN_TCI[0..11],output:NXM_OF_IN_PORT[])",
    ];
    if matches!(
        family,
        Family::Ip | Family::Tcp | Family::Udp | Family::Icmp
    ) {
        // The TTL as dec_ttl left it.
        learns.push(
            "learn(table=1,priority=7,eth_type=0x800,NXM_OF_IP_DST[]=NXM_OF_IP_SRC[],NXM_NX_REG2[0..7]=NXM_NX_IP_TTL[],load:0x5->NXM_NX_REG3[0..3])",
        );
    }
    let learn = parse_actions(learns[(hash / 12) as usize % learns.len()]).unwrap();
    let last = actions
        .iter()
        .position(|a| matches!(a, Action::WriteMetadata(..) | Action::GotoTable(_)))
        .unwrap_or(actions.len());
    let at = (hash / 36) as usize % (last + 1);
    actions.splice(at..at, learn);
}

/// A random flow: either one a rule matches (its masked bits, random elsewhere) or pure noise.
fn random_flow(rng: &mut Rng, tables: &RuleTables, ids: &[RuleId]) -> FlowBits {
    let family = rng.pick(&FAMILIES);
    let (dl_type, nw_proto) = family.dl_type_and_proto();
    let mut key = FlowKey {
        in_port: rng.below(8) as u32 + 1,
        dl_src: mac(rng),
        dl_dst: mac(rng),
        vlan_tci: random_value(rng, Field::VlanTci) as u16,
        dl_type: dl_type.unwrap_or(0x88cc),
        nw_proto: nw_proto.unwrap_or(rng.pick(&[6, 17, 1, 47])),
        ..FlowKey::default()
    };
    match family {
        Family::Arp => {
            key.arp_spa = ipv4(rng);
            key.arp_tpa = ipv4(rng);
            key.arp_op = rng.below(2) as u16 + 1;
            key.arp_sha = mac(rng);
            key.arp_tha = mac(rng);
            key.nw_proto = 0;
        }
        Family::Ipv6 | Family::Tcp6 => {
            key.ipv6_src = ipv6(rng);
            key.ipv6_dst = ipv6(rng);
            key.nw_ttl = random_value(rng, Field::NwTtl) as u8;
        }
        Family::Any => key.nw_proto = 0,
        _ => {
            key.nw_src = ipv4(rng);
            key.nw_dst = ipv4(rng);
            key.nw_tos = random_value(rng, Field::NwTos) as u8;
            key.nw_ecn = random_value(rng, Field::NwEcn) as u8;
            key.nw_ttl = random_value(rng, Field::NwTtl) as u8;
        }
    }
    if key.nw_proto == 6 || key.nw_proto == 17 {
        key.tp_src = port(rng);
        key.tp_dst = port(rng);
    } else if key.nw_proto == 1 {
        key.icmp_type = rng.pick(&[0, 8]);
    }
    let mut flow = FlowBits::from_key(&key);
    if !ids.is_empty() && rng.chance(60) {
        let rule = &tables.get(rng.pick(ids)).unwrap().rule;
        let mask = rule.flow_match.mask();
        for (word, (value, mask)) in flow
            .0
            .iter_mut()
            .zip(rule.flow_match.value().0.iter().zip(mask.0))
        {
            *word = (*word & !mask) | value;
        }
    }
    // Packets arrive without metadata or registers; only actions give a flow any.
    Field::Metadata.set(&mut flow, 0);
    for register in 0..16 {
        Field::Reg(register).set(&mut flow, 0);
    }
    flow
}

/// A rule as the brute force keeps it.
type ReferenceRule = (RuleRank, RuleId, Match, Vec<Action>);

/// The brute force: every table a list sorted best first, scanned until a rule matches.
struct Reference {
    tables: Vec<Vec<ReferenceRule>>,
    /// Each rule's origin, for the packet-ins its `controller` actions make.
    origins: HashMap<RuleId, wirespeed_switch::rule::PacketInOrigin>,
}

impl Reference {
    fn new(tables: &RuleTables) -> Reference {
        let mut lists = vec![Vec::new(); TABLES as usize];
        let mut origins = HashMap::new();
        for (id, installed) in tables.iter() {
            let rule = &installed.rule;
            origins.insert(id, wirespeed_switch::rule::PacketInOrigin::of(Some(rule)));
            lists[rule.table as usize].push((
                installed.rank,
                id,
                rule.flow_match,
                rule.actions.clone(),
            ));
        }
        for list in &mut lists {
            list.sort_by_key(|(rank, ..)| (std::cmp::Reverse(rank.priority), rank.seq));
        }
        Reference {
            tables: lists,
            origins,
        }
    }

    fn decide(&self, flow: &FlowBits) -> Decision {
        let mut decision = Decision::default();
        self.run_table(0, *flow, &mut decision);
        decision
    }

    /// Returns the flow as the table's actions left it.
    fn run_table(&self, table: u8, mut flow: FlowBits, decision: &mut Decision) -> FlowBits {
        let Some((_, id, _, actions)) = self.tables[table as usize]
            .iter()
            .find(|(_, _, m, _)| m.matches(&flow))
        else {
            decision.missed.push(table);
            return flow;
        };
        decision.rules.push(*id);
        for action in actions {
            match *action {
                Action::GotoTable(next) => return self.run_table(next, flow, decision),
                Action::Resubmit(next) => flow = self.run_table(next, flow, decision),
                Action::WriteMetadata(..) => {
                    action.apply_to_flow(&mut flow, &mut FlowBits::default())
                }
                // A register's write stays in the pipeline; a packet's field written by
                // load or move reaches the datapath as the field's new value.
                Action::Load(dst, _) | Action::Move(_, dst) => {
                    action.apply_to_flow(&mut flow, &mut FlowBits::default());
                    let field = dst.field();
                    if !field.is_pipeline_state() {
                        decision
                            .actions
                            .push(Action::SetField(field, field.get(&flow)));
                    }
                }
                Action::Learn(learn) => decision
                    .learned
                    .push(learn.get().rule_for(&flow, &mut FlowBits::default())),
                // Out of the port the bits hold, if they hold one.
                Action::OutputReg(src) => match src.get(&flow) as u32 {
                    0 => {}
                    port => decision.actions.push(Action::Output(port)),
                },
                _ => {
                    if matches!(action, Action::Controller(_)) && decision.packet_in.is_none() {
                        decision.packet_in = Some(self.origins[id]);
                    }
                    action.apply_to_flow(&mut flow, &mut FlowBits::default());
                    decision.actions.push(*action);
                }
            }
        }
        flow
    }
}

/// `count` random adds, deletes, modifies and identical-match replaces.
/// As the bridge's changes do ([`wirespeed_switch::ofproto::state::edit`]), a rule taken
/// away or replaced has its megaflows harvested first; the rest of the cache's counts wait.
fn change_rules(
    rng: &mut Rng,
    tables: &mut RuleTables,
    cache: &mut FlowCache,
    shapes: &[Shape],
    tally: &mut HashMap<RuleId, u64>,
    count: usize,
) {
    for _ in 0..count {
        let ids: Vec<RuleId> = tables.iter().map(|(id, _)| id).collect();
        match rng.below(10) {
            0..=3 => {
                let table = rng.below(TABLES as u64) as u8;
                let rule = random_rule(rng, shapes, table);
                let replaced = tables.find_exact(rule.table, &rule.flow_match, rule.priority);
                cache.harvest_for(tables, &Vec::from_iter(replaced), &[]);
                let id = tables.add(rule, Duration::ZERO);
                tally.insert(id, 0);
            }
            4..=6 => {
                let id = rng.pick(&ids);
                cache.harvest_for(tables, &[id], &[]);
                tables.remove(id);
            }
            7 | 8 => {
                let installed = tables.get(rng.pick(&ids)).unwrap();
                let rule = &installed.rule;
                let selector = RuleSelector {
                    table: Some(rule.table),
                    flow_match: rule.flow_match,
                    strict_priority: Some(rule.priority),
                    cookie: None,
                    out_port: None,
                    out_group: None,
                };
                let actions = random_actions(rng, Family::Any, rule.table);
                assert!(tables.modify(&selector, &actions, None).unwrap() >= 1);
            }
            _ => {
                let mut rule = tables.get(rng.pick(&ids)).unwrap().rule.clone();
                rule.actions = random_actions(rng, Family::Any, rule.table);
                let replaced = tables.find_exact(rule.table, &rule.flow_match, rule.priority);
                cache.harvest_for(tables, &Vec::from_iter(replaced), &[]);
                let id = tables.add(rule, Duration::ZERO);
                tally.insert(id, 0);
            }
        }
    }
}

struct Run {
    /// Distinct rule shapes (masks); fewer shapes give wider megaflows.
    shapes: usize,
    /// Some rules learn (which pins a learning megaflow's sources: narrower megaflows).
    learns: bool,
    rules: usize,
    batches: usize,
    /// Rule changes between two batches.
    changes: usize,
    packets_per_batch: usize,
    flows_per_batch: usize,
    /// Of each batch's flows, how many (in percent) come again in the next.
    kept_flows_percent: usize,
    emc_entries: usize,
    megaflow_capacity: usize,
}

fn run(seed: u64, config: Run) -> FlowCache {
    let mut rng = Rng(seed);
    let shapes: Vec<Shape> = (0..config.shapes)
        .map(|_| Shape {
            learns: config.learns,
            ..random_shape(&mut rng)
        })
        .collect();
    let mut tables = RuleTables::new();
    let mut tally: HashMap<RuleId, u64> = HashMap::new();
    for index in 0..config.rules {
        // Table 0 holds 40%, the others 20% each.
        let table = [0, 0, 1, 2, 3][index % 5];
        let id = tables.add(random_rule(&mut rng, &shapes, table), Duration::ZERO);
        tally.insert(id, 0);
    }
    assert!(
        tables.len() > config.rules * 9 / 10,
        "few identical rules replaced each other"
    );
    let mut cache = FlowCache::new(config.emc_entries, config.megaflow_capacity);
    cache.revalidate(&mut tables);
    let mut flows: Vec<FlowBits> = Vec::new();
    for batch in 0..config.batches {
        if batch > 0 {
            // As the bridge's control side does: the change, harvesting what it takes
            // away, then the cache revalidates, crediting the megaflows it removes.
            let changes = config.changes;
            change_rules(
                &mut rng,
                &mut tables,
                &mut cache,
                &shapes,
                &mut tally,
                changes,
            );
            cache.revalidate(&mut tables);
        }
        let reference = Reference::new(&tables);
        let ids: Vec<RuleId> = tables.iter().map(|(id, _)| id).collect();
        // Flows kept from the batch before meet the megaflows made before the change.
        let kept = flows.len() * config.kept_flows_percent / 100;
        flows.truncate(kept);
        while flows.len() < config.flows_per_batch {
            flows.push(random_flow(&mut rng, &tables, &ids));
        }
        let mut expected: HashMap<FlowBits, Decision> = HashMap::new();
        for packet in 0..config.packets_per_batch {
            let flow = flows[rng.below(flows.len() as u64) as usize];
            let want = expected
                .entry(flow)
                .or_insert_with(|| reference.decide(&flow));
            // A poll-mode thread's path: the cache, the rules on a miss; the megaflow counts.
            let id = match cache.hit(&flow) {
                Some(id) => id,
                None => cache.miss(&mut tables, &flow, Duration::ZERO),
            };
            let got = without_lookups(&cache.credit(id, 64, Duration::ZERO).decision);
            assert_eq!(
                &got, want,
                "seed {seed:#x}, batch {batch}, packet {packet}, flow {flow:?}"
            );
            for id in &want.rules {
                *tally.get_mut(id).unwrap() += 1;
            }
        }
        // The rules' counters are the harvested megaflow counts: exact, also across rule
        // slots reused by the changes and full-cache flushes. After every other batch (not
        // the last) the counts stay in the cache instead, so the next changes harvest only
        // what they take away and revalidation credits the rest.
        if batch % 2 == 0 && batch + 1 < config.batches {
            continue;
        }
        cache.harvest(&mut tables);
        for (id, installed) in tables.iter() {
            assert_eq!(
                installed.stats.n_packets, tally[&id],
                "seed {seed:#x}: counter of rule {id:?}"
            );
        }
    }
    cache
}

#[test]
fn cached_decisions_equal_linear_search() {
    let cache = run(
        0x5eed_0005,
        Run {
            shapes: 40,
            learns: true,
            rules: 10_000,
            batches: 10,
            // At most 60 logged changes (a replace is two): under the precise limit.
            changes: 30,
            packets_per_batch: 10_000,
            flows_per_batch: 2_500,
            kept_flows_percent: 50,
            emc_entries: 8192,
            megaflow_capacity: 65536,
        },
    );
    let stats = cache.stats;
    eprintln!("{stats:?}, {} megaflow masks", cache.megaflow_masks());
    assert_eq!(stats.emc_hits + stats.megaflow_hits + stats.misses, 100_000);
    assert!(stats.emc_hits > 50_000, "{stats:?}");
    assert!(stats.misses < 30_000, "{stats:?}");
    assert!(
        stats.flushes == 0 && stats.stale > 0,
        "every batch's rule changes revalidate, one megaflow at a time: {stats:?}"
    );
}

/// A few rules change at a time, as when a controller or a `learn` adds one: most
/// megaflows stay, and every decision still equals the brute force's after each change.
#[test]
fn precise_revalidation_keeps_what_a_change_cannot_touch() {
    let cache = run(
        0x5eed_0008,
        Run {
            shapes: 40,
            learns: true,
            rules: 5_000,
            batches: 40,
            changes: 10,
            packets_per_batch: 2_000,
            flows_per_batch: 400,
            kept_flows_percent: 75,
            emc_entries: 8192,
            megaflow_capacity: 65536,
        },
    );
    let stats = cache.stats;
    eprintln!("{stats:?}");
    assert_eq!(stats.flushes, 0, "{stats:?}");
    assert!(stats.stale > 0, "{stats:?}");
    // Each batch draws new flows, so misses are at least one batch's flows; an emptied
    // cache would miss every flow of every batch.
    assert!(stats.stale < stats.misses / 2, "{stats:?}");
}

/// More changes at once than revalidation tests one by one empty the cache.
#[test]
fn many_changes_at_once_flush() {
    let cache = run(
        0x5eed_0009,
        Run {
            shapes: 20,
            learns: false,
            rules: 2_000,
            batches: 3,
            changes: 300,
            packets_per_batch: 2_000,
            flows_per_batch: 500,
            kept_flows_percent: 0,
            emc_entries: 8192,
            megaflow_capacity: 65536,
        },
    );
    assert_eq!(cache.stats.flushes, 2, "{:?}", cache.stats);
    assert_eq!(cache.stats.stale, 0, "{:?}", cache.stats);
}

/// A cached decision less its lookups' record, which the brute force does not keep.
fn without_lookups(decision: &Decision) -> Decision {
    Decision {
        lookups: Vec::new(),
        ..decision.clone()
    }
}

#[test]
fn megaflows_alone_and_full_cache_flushes() {
    // No EMC, so every hit comes from a megaflow; a small capacity forces flush-on-full.
    let cache = run(
        0x5eed_0006,
        Run {
            shapes: 4,
            // Megaflows wide enough to fill the small cache with hits between flushes.
            learns: false,
            rules: 500,
            batches: 5,
            changes: 100,
            packets_per_batch: 8_000,
            flows_per_batch: 1_000,
            kept_flows_percent: 0,
            emc_entries: 0,
            megaflow_capacity: 600,
        },
    );
    let stats = cache.stats;
    eprintln!("{stats:?}");
    assert_eq!(stats.emc_hits, 0);
    assert!(stats.megaflow_hits > stats.misses, "{stats:?}");
    assert!(stats.flushes > 5, "{stats:?}");
}

#[test]
fn every_megaflow_is_sound() {
    // Each megaflow, tried with other flows that agree on its un-wildcarded bits (the rest from
    // the value pools or pure noise): the brute force must decide them all alike.
    let mut rng = Rng(0x5eed_0007);
    let shapes: Vec<Shape> = (0..40).map(|_| random_shape(&mut rng)).collect();
    let mut tables = RuleTables::new();
    for index in 0..3_000 {
        tables.add(
            random_rule(&mut rng, &shapes, [0, 0, 1, 2, 3][index % 5]),
            Duration::ZERO,
        );
    }
    let reference = Reference::new(&tables);
    let ids: Vec<RuleId> = tables.iter().map(|(id, _)| id).collect();
    let mut cache = FlowCache::new(0, 1 << 20);
    let mut wide = 0;
    let mut learning = 0;
    for _ in 0..3_000 {
        let flow = random_flow(&mut rng, &tables, &ids);
        let megaflow = cache.lookup(&mut tables, &flow, 64).clone();
        assert!(megaflow.flow_match.matches(&flow));
        // Every flow it admits must learn the same rules.
        let decided = megaflow.decision.clone();
        learning += usize::from(!decided.learned.is_empty());
        let mask = megaflow.flow_match.mask();
        // An exact IPv4 TCP flow pins about 280 bits. The metadata and registers are not in
        // the mask: every packet arrives with them zero.
        let pinned = *mask;
        assert!(pinned.0[PACKET_WORDS..].iter().all(|&w| w == 0));
        if pinned.0.iter().map(|word| word.count_ones()).sum::<u32>() < 140 {
            wide += 1;
        }
        for attempt in 0..8 {
            let mut other = random_flow(&mut rng, &tables, &ids);
            if attempt % 2 == 1 {
                other = FlowBits(core::array::from_fn(|_| rng.next()));
            }
            for (word, (value, mask)) in other
                .0
                .iter_mut()
                .zip(megaflow.flow_match.value().0.iter().zip(mask.0))
            {
                *word = (*word & !mask) | value;
            }
            // Only packets: no metadata, no registers.
            other.0[PACKET_WORDS..].fill(0);
            assert_eq!(
                reference.decide(&other),
                without_lookups(&decided),
                "megaflow {:?} vs flow {other:?}",
                megaflow.flow_match
            );
        }
    }
    eprintln!(
        "{wide} of 3000 megaflows pin fewer than 140 bits, {:?}",
        cache.stats
    );
    assert!(
        wide > 200,
        "megaflows are barely wider than exact flows: {wide}"
    );
    eprintln!("{learning} of 3000 megaflows learn");
    assert!(learning > 100, "{learning} of 3000 megaflows learn");
}
