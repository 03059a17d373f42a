//! The offload's tests: entries installed, credited, revalidated and removed around rule
//! changes, against the kernel's maps where a test needs them.

use super::*;
use crate::dpif::revalidate::Seen;
use crate::dpif::upcall::Decision;
use crate::flow_match::Match;
use crate::group::BucketsTaken;
use crate::ofctl::flow_parse::parse_rule;
use crate::ofctl::group_text::parse_group;
use crate::ofproto::rule_table::RuleTables;
use std::net::Ipv4Addr;
use wirespeed_packet::template::UdpTemplate;
use wirespeed_xdp::AttachMode;

fn frame() -> Vec<u8> {
    frame_to(Ipv4Addr::new(10, 0, 0, 2))
}

fn frame_to(dst_ip: Ipv4Addr) -> Vec<u8> {
    let template = UdpTemplate {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: Ipv4Addr::new(10, 0, 0, 1),
        dst_ip,
        src_port: 1000,
        dst_port: 2000,
        frame_len: 60,
        generator: 1,
    };
    let mut frame = vec![0; 60];
    template.write(&mut frame, 1, 1).unwrap();
    frame
}

/// Every entry has its digest and key at its place in the dense arrays, and nothing else
/// is there.
fn assert_dense(offload: &Offload) {
    let n = offload.entries.len();
    assert_eq!((offload.digests.len(), offload.places.len()), (n, n));
    for (place, key) in offload.places.iter().enumerate() {
        assert_eq!(offload.entries[key].place, place);
    }
}

/// The program loaded, attached nowhere: its maps work (needs root, as the tests that
/// move packets do).
fn offload() -> Offload {
    let fast_path = FastPath::attach(&[], AttachMode::Skb, false, false)
        .expect("load the fast path (the tests run as root)");
    Offload::new(fast_path, &[(1, 1001, 0), (2, 1002, 1)])
}

#[test]
fn removed_entries_are_reused_only_after_the_program_was_waited_for() {
    let mut offload = offload();
    let mut barrier = offload.fast_path.barrier().unwrap();
    let mut tables = RuleTables::new();
    let id = tables.add(
        parse_rule("in_port=1,actions=output:2").unwrap(),
        Duration::ZERO,
    );
    let mut macs = MacTable::default();
    let decision = Decision {
        actions: vec![Action::Output(2)],
        rules: vec![id],
        ..Decision::default()
    };
    let frame = frame();
    let now = Duration::ZERO;
    // A flow that learns stays in user space, where its packets learn again.
    let learning = Decision {
        learned: vec![parse_rule("table=1,actions=drop").unwrap()],
        ..decision.clone()
    };
    let learning = Megaflow::new(Match::ANY, learning, now);
    let decision = Megaflow::new(Match::ANY, decision, now);
    offload.consider(&frame, 1, &learning, &tables, &macs, now);
    assert_eq!(offload.entries.len(), 0);
    offload.consider(&frame, 1, &decision, &tables, &macs, now);
    assert_eq!((offload.entries.len(), offload.unsettled()), (1, None));
    offload.flush(&mut tables, &mut macs, now).unwrap();
    let round = offload
        .unsettled()
        .expect("a flush that removed entries is unsettled");
    offload.consider(&frame, 1, &decision, &tables, &macs, now);
    assert_eq!(offload.entries.len(), 0, "installed before the wait");
    barrier.wait().unwrap();
    offload.settled_at(round).unwrap();
    assert_eq!(offload.unsettled(), None);
    offload.consider(&frame, 1, &decision, &tables, &macs, now);
    assert_eq!(offload.entries.len(), 1);
    // A flush of an empty table removes nothing and leaves nothing to wait for.
    offload.flush(&mut tables, &mut macs, now).unwrap();
    offload.settled_at(offload.unsettled().unwrap()).unwrap();
    offload.flush(&mut tables, &mut macs, now).unwrap();
    assert_eq!(offload.unsettled(), None);
}

/// A frame from port 1 to 10.0.0.`host`, and its megaflow: output to port 2 by rule
/// `id`, through the groups `visits`.
fn output_to_host(host: u8, id: RuleId, visits: Vec<GroupVisit>) -> (Vec<u8>, Megaflow) {
    output_to_host_on(host, 2, id, visits)
}

/// [`output_to_host`] out of port `out`.
fn output_to_host_on(
    host: u8,
    out: u32,
    id: RuleId,
    visits: Vec<GroupVisit>,
) -> (Vec<u8>, Megaflow) {
    let mut flow_match = Match::ANY;
    flow_match.add(Field::InPort, 1, u128::MAX).unwrap();
    flow_match.add(Field::DlType, 0x0800, u128::MAX).unwrap();
    let dst = Ipv4Addr::new(10, 0, 0, host);
    flow_match
        .add(Field::NwDst, u32::from(dst).into(), u128::MAX)
        .unwrap();
    let decision = Decision {
        actions: vec![Action::Output(out)],
        rules: vec![id],
        groups: visits,
        lookups: vec![TableLookup {
            table: 0,
            found: Some(32768),
            seen: Seen::Arrived,
        }],
        ..Decision::default()
    };
    (
        frame_to(dst),
        Megaflow::new(flow_match, decision, Duration::ZERO),
    )
}

/// A port that goes down takes out the entries to and from it, counted, and leaves the
/// others forwarding.
#[test]
fn a_port_down_takes_out_only_its_entries() {
    let fast_path = FastPath::attach(&[], AttachMode::Skb, false, false)
        .expect("load the fast path (the tests run as root)");
    let mut offload = Offload::new(fast_path, &[(1, 1001, 0), (2, 1002, 1), (3, 1003, 2)]);
    let mut tables = RuleTables::new();
    let mut macs = MacTable::default();
    let now = Duration::ZERO;
    let id = tables.add(parse_rule("in_port=1,actions=output:2").unwrap(), now);
    for (frame, megaflow) in [
        output_to_host_on(2, 2, id, vec![]),
        output_to_host_on(3, 3, id, vec![]),
    ] {
        offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    }
    assert_eq!(offload.entries.len(), 2);
    offload
        .port_link(3, false, &mut tables, &mut macs, now)
        .unwrap();
    let kept: Vec<u32> = offload.entries.values().map(|e| e.out_port).collect();
    assert_eq!(kept, [2]);
    let summary = offload.summary().unwrap();
    assert_eq!(
        (summary.port_down, summary.flushes, summary.stops),
        (1, 0, 1)
    );
    // The removed entry's class forwards again once the program has been waited for.
    let key = |host: u8| fast_key(&frame_to(Ipv4Addr::new(10, 0, 0, host)), 1001).unwrap();
    assert_eq!(offload.fast_path.stopped(), Classes::of([&key(3)]));
    let mut barrier = offload.fast_path.barrier().unwrap();
    barrier.wait().unwrap();
    offload.settled_at(offload.unsettled().unwrap()).unwrap();
    assert_eq!(offload.fast_path.stopped(), Classes::NONE);
    assert!(offload.fast_path.forwards(&key(2)).unwrap());
    // Nothing goes to or from it while it is down; once up, it takes entries again.
    let (frame, megaflow) = output_to_host_on(3, 3, id, vec![]);
    offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    assert_eq!(offload.entries.len(), 1);
    offload
        .port_link(3, true, &mut tables, &mut macs, now)
        .unwrap();
    offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    assert_eq!(offload.entries.len(), 2);
}

/// A change to a group stops the kernel first only if an entry's packets pass through
/// it, and the resume removes only those entries.
#[test]
fn a_group_change_takes_only_the_entries_through_it() {
    let mut offload = offload();
    let mut tables = RuleTables::new();
    let mut macs = MacTable::default();
    let now = Duration::ZERO;
    let group = |id| parse_group(&format!("group_id={id},type=indirect,bucket=output:2"));
    tables.set_group(group(5).unwrap(), false, now).unwrap();
    let id = tables.add(parse_rule("in_port=1,actions=group:5").unwrap(), now);
    let visit = GroupVisit {
        group: 5,
        taken: BucketsTaken::One(0),
    };
    for (frame, megaflow) in [
        output_to_host(2, id, vec![visit]),
        output_to_host(3, id, vec![]),
    ] {
        offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    }
    assert_eq!(offload.entries.len(), 2);
    offload
        .suspend_for(&[], &[6], &mut tables, &mut macs, now)
        .unwrap();
    assert!(matches!(offload.suspension, Some(Suspension::Watching(_))));
    tables.set_group(group(6).unwrap(), false, now).unwrap();
    offload.resume(&mut tables, &mut macs, now).unwrap();
    offload
        .suspend_for(&[], &[5], &mut tables, &mut macs, now)
        .unwrap();
    assert!(matches!(offload.suspension, Some(Suspension::Stopped(..))));
    tables.set_group(group(5).unwrap(), true, now).unwrap();
    offload.resume(&mut tables, &mut macs, now).unwrap();
    let kept: Vec<[u8; 4]> = offload
        .entries
        .keys()
        .map(|key| wirespeed_xdp::fast_path::key_fields(key).dst)
        .collect();
    assert_eq!(kept, [[10, 0, 0, 3]]);
    let summary = offload.summary().unwrap();
    assert_eq!(
        (summary.revalidated, summary.flushes, summary.stops),
        (1, 0, 1)
    );
}

/// A rule change suspends the kernel's entries; the resume removes only those whose
/// packets the change could decide otherwise, and a change the rules' log cannot say
/// removes them all.
#[test]
fn a_resume_removes_only_the_entries_a_change_touches() {
    let mut offload = offload();
    let mut tables = RuleTables::new();
    let mut macs = MacTable::default();
    let now = Duration::ZERO;
    let id = tables.add(parse_rule("in_port=1,actions=output:2").unwrap(), now);
    let to = |host: u8| output_to_host(host, id, vec![]);
    for (frame, megaflow) in [to(2), to(3)] {
        offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    }
    assert_eq!(offload.entries.len(), 2);
    let kept = |offload: &Offload| -> Vec<[u8; 4]> {
        let fields = wirespeed_xdp::fast_path::key_fields;
        offload.entries.keys().map(|key| fields(key).dst).collect()
    };
    let mut barrier = offload.fast_path.barrier().unwrap();
    // Only a rule an entry counts for needs the kernel stopped before it goes.
    let other = tables.add(parse_rule("in_port=2,actions=output:1").unwrap(), now);
    offload
        .suspend_for(&[other], &[], &mut tables, &mut macs, now)
        .unwrap();
    assert!(matches!(offload.suspension, Some(Suspension::Watching(_))));
    offload.resume(&mut tables, &mut macs, now).unwrap();
    offload
        .suspend_for(&[other, id], &[], &mut tables, &mut macs, now)
        .unwrap();
    assert!(matches!(offload.suspension, Some(Suspension::Stopped(..))));
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!(offload.entries.len(), 2);

    // A rule added for another host: the kernel goes on, nothing is touched.
    offload.watch(&tables);
    tables.add(
        parse_rule("priority=40000,ip,nw_dst=10.0.0.9,actions=drop").unwrap(),
        now,
    );
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!((offload.entries.len(), offload.unsettled()), (2, None));

    // One that outranks the rule for 10.0.0.3, the kernel stopped before it or not:
    // the removed entry's class stays stopped, and nothing is installed, until the
    // program has been waited for.
    let key = |host: u8| fast_key(&to(host).0, 1001).unwrap();
    offload.suspend(&mut tables, &mut macs, now).unwrap();
    tables.add(
        parse_rule("priority=40000,ip,nw_dst=10.0.0.3,actions=drop").unwrap(),
        now,
    );
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!(kept(&offload), vec![[10, 0, 0, 2]]);
    assert_dense(&offload);
    assert_eq!(offload.fast_path.stopped(), Classes::of([&key(3)]));
    let round = offload.unsettled().expect("a removal is unsettled");
    let (frame, megaflow) = to(3);
    offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    assert_eq!(offload.entries.len(), 1, "installed before the wait");
    barrier.wait().unwrap();
    offload.settled_at(round).unwrap();
    assert_eq!(offload.fast_path.stopped(), Classes::NONE);
    offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    offload.watch(&tables);
    tables.add(
        parse_rule("priority=40000,ip,nw_dst=10.0.0.2,actions=drop").unwrap(),
        now,
    );
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!(kept(&offload), vec![[10, 0, 0, 3]]);
    assert_eq!(offload.fast_path.stopped(), Classes::of([&key(2)]));
    barrier.wait().unwrap();
    offload.settled_at(offload.unsettled().unwrap()).unwrap();
    assert!(offload.fast_path.forwards(&key(3)).unwrap());
    let summary = offload.summary().unwrap();
    assert_eq!((summary.revalidated, summary.flushes), (2, 0));

    // A flush owed (a stop or removal that failed) is made at the resume instead: no
    // generation goes back while entries it did not test may be there.
    offload.watch(&tables);
    offload.flush_failed = true;
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!((offload.entries.len(), offload.flush_failed), (0, false));
    let summary = offload.summary().unwrap();
    assert_eq!((summary.revalidated, summary.flushes), (2, 1));
    let round = offload
        .unsettled()
        .expect("a flush that removed entries is unsettled");
    barrier.wait().unwrap();
    offload.settled_at(round).unwrap();

    // A change the rules' log cannot say removes every entry.
    let (frame, megaflow) = to(3);
    offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    offload.watch(&tables);
    tables.set_fail_open(true);
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!(offload.entries.len(), 0);
    let summary = offload.summary().unwrap();
    assert_eq!((summary.revalidated, summary.flushes), (2, 2));
    // With no entry there is nothing to stop or revalidate.
    offload.suspend(&mut tables, &mut macs, now).unwrap();
    offload.watch(&tables);
    assert_eq!(offload.suspension, None);
}

/// A change stops the kernel only on the classes of the entries it needs: the others
/// go on forwarding throughout.
#[test]
fn a_change_stops_only_the_classes_of_the_entries_it_needs() {
    let mut offload = offload();
    let mut tables = RuleTables::new();
    let mut macs = MacTable::default();
    let now = Duration::ZERO;
    let low = tables.add(parse_rule("in_port=1,actions=output:2").unwrap(), now);
    let high = "priority=40000,ip,nw_dst=10.0.0.2,actions=output:2";
    let high = tables.add(parse_rule(high).unwrap(), now);
    let key = |host: u8| fast_key(&frame_to(Ipv4Addr::new(10, 0, 0, host)), 1001).unwrap();
    let class_of = wirespeed_xdp::fast_path::class_of;
    // Host 2's entry counts for `high`; the others, in other classes, for `low`.
    let others: Vec<u8> = (3..=12)
        .filter(|&h| class_of(&key(h)) != class_of(&key(2)))
        .collect();
    assert!(others.len() >= 8);
    let hosts = std::iter::once((2, high)).chain(others.iter().map(|&h| (h, low)));
    for (host, rule) in hosts {
        let (frame, megaflow) = output_to_host(host, rule, vec![]);
        offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    }
    assert_eq!(offload.entries.len(), 1 + others.len());
    let forwarding = |offload: &Offload| -> Vec<u8> {
        (2..=12)
            .filter(|&h| offload.fast_path.forwards(&key(h)).unwrap())
            .collect()
    };
    let all: Vec<u8> = std::iter::once(2).chain(others.iter().copied()).collect();
    assert_eq!(forwarding(&offload), all);
    let mut barrier = offload.fast_path.barrier().unwrap();
    let mut settle = |offload: &mut Offload| {
        barrier.wait().unwrap();
        offload.settled_at(offload.unsettled().unwrap()).unwrap();
    };

    // `high` goes: only host 2's class stops while its counts are taken.
    offload
        .suspend_for(&[high], &[], &mut tables, &mut macs, now)
        .unwrap();
    assert_eq!(offload.fast_path.stopped(), Classes::of([&key(2)]));
    assert_eq!(forwarding(&offload), others);
    tables.remove(high);
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert!(!offload.entries.contains_key(&key(2)));
    // Its class stays stopped until the program has been waited for.
    assert_eq!(offload.fast_path.stopped(), Classes::of([&key(2)]));
    settle(&mut offload);
    assert_eq!(offload.fast_path.stopped(), Classes::NONE);
    assert_eq!(forwarding(&offload), others);

    // A rule above the host of an entry with a class-mate: only their class stops while
    // the entry goes, and the class-mate forwards again once the program has been
    // waited for.
    let same_class = |h: u8, g: u8| h != g && class_of(&key(h)) == class_of(&key(g));
    let touched = *(others.iter())
        .find(|&&h| others.iter().any(|&g| same_class(h, g)))
        .expect("two of ten hosts in one class");
    offload.watch(&tables);
    let above = format!("priority=40000,ip,nw_dst=10.0.0.{touched},actions=drop");
    tables.add(parse_rule(&above).unwrap(), now);
    offload.resume(&mut tables, &mut macs, now).unwrap();
    let others: Vec<u8> = others.into_iter().filter(|&h| h != touched).collect();
    assert_dense(&offload);
    let unstopped: Vec<u8> = (others.iter().copied())
        .filter(|&h| !same_class(h, touched))
        .collect();
    assert!(unstopped.len() < others.len());
    assert_eq!(forwarding(&offload), unstopped);
    settle(&mut offload);
    assert_eq!(forwarding(&offload), others);
    let summary = offload.summary().unwrap();
    assert_eq!(
        (summary.revalidated, summary.stops, summary.stopped_classes),
        (2, 2, 2)
    );

    // A change that may take any rule stops every class; with none of their entries
    // removed they forward again at once.
    offload.suspend(&mut tables, &mut macs, now).unwrap();
    assert_eq!(forwarding(&offload), Vec::<u8>::new());
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!((forwarding(&offload), offload.unsettled()), (others, None));
    let summary = offload.summary().unwrap();
    let classes = Classes::of(offload.entries.keys()).len();
    assert_eq!(
        (summary.stops, summary.stopped_classes),
        (3, 2 + u64::from(classes))
    );

    // A change the rules' log cannot say, made with classes stopped, removes every
    // entry and leaves no class stopped.
    offload
        .suspend_for(&[low], &[], &mut tables, &mut macs, now)
        .unwrap();
    assert_eq!(offload.fast_path.stopped().len(), classes);
    tables.set_fail_open(true);
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!(offload.fast_path.stopped(), Classes::NONE);
    assert_eq!((offload.entries.len(), forwarding(&offload)), (0, vec![]));
}

/// With a flush owed (as a removal that failed leaves it), the class of an entry removed
/// stays stopped when the program has been waited for: the flush, which removes every
/// entry, leaves none stopped.
#[test]
fn a_flush_owed_keeps_the_removed_entries_classes_stopped() {
    let mut offload = offload();
    let mut tables = RuleTables::new();
    let mut macs = MacTable::default();
    let now = Duration::ZERO;
    let id = tables.add(parse_rule("in_port=1,actions=output:2").unwrap(), now);
    let (frame, megaflow) = output_to_host(2, id, vec![]);
    offload.consider(&frame, 1, &megaflow, &tables, &macs, now);
    let key = fast_key(&frame, 1001).unwrap();
    assert!(offload.fast_path.forwards(&key).unwrap());
    offload.watch(&tables);
    let drop = "priority=40000,ip,nw_dst=10.0.0.2,actions=drop";
    tables.add(parse_rule(drop).unwrap(), now);
    offload.resume(&mut tables, &mut macs, now).unwrap();
    assert_eq!(offload.fast_path.stopped(), Classes::of([&key]));
    offload.flush_failed = true;
    let mut barrier = offload.fast_path.barrier().unwrap();
    barrier.wait().unwrap();
    offload.settled_at(offload.unsettled().unwrap()).unwrap();
    assert_eq!(
        (offload.fast_path.stopped(), offload.unsettled()),
        (Classes::of([&key]), None)
    );
    offload.flush(&mut tables, &mut macs, now).unwrap();
    assert_eq!(offload.fast_path.stopped(), Classes::NONE);
    assert_dense(&offload);
}

/// A `normal` entry depends on where its destination was learned: that address moving
/// calls for a flush, another address moving or ageing out does not.
#[test]
fn only_the_destinations_of_normal_entries_call_for_a_flush() {
    let mut offload = offload();
    let tables = RuleTables::new();
    let mut macs = MacTable::default();
    let (dst, other) = (MacAddr([2, 0, 0, 0, 0, 2]), MacAddr([2, 0, 0, 0, 0, 9]));
    macs.learn(0, dst, 2, Duration::ZERO);
    macs.learn(0, other, 2, Duration::ZERO);
    let decision = Decision {
        actions: vec![Action::Normal],
        ..Decision::default()
    };
    let megaflow = Megaflow::new(Match::ANY, decision, Duration::ZERO);
    offload.consider(&frame(), 1, &megaflow, &tables, &macs, Duration::ZERO);
    assert_eq!(offload.entries.len(), 1);
    assert!(!offload.macs_changed(&macs));
    macs.learn(0, other, 1, Duration::ZERO);
    assert!(!offload.macs_changed(&macs), "another address moved");
    assert_eq!(
        offload.macs_seen,
        macs.changes(),
        "and that change is taken note of"
    );
    macs.learn(0, dst, 1, Duration::ZERO);
    assert!(offload.macs_changed(&macs), "the destination moved");
}

/// A read between the kernel's two adds sees a packet without its bytes: the bytes are
/// credited when they come, even with no new packet.
#[test]
fn bytes_read_after_their_packet_are_credited() {
    let mut tables = RuleTables::new();
    let group = parse_group("group_id=1,type=indirect,bucket=output:2").unwrap();
    tables.set_group(group, false, Duration::ZERO).unwrap();
    let id = tables.add(
        parse_rule("in_port=1,actions=group:1").unwrap(),
        Duration::ZERO,
    );
    let mut macs = MacTable::default();
    let mut ports = HashMap::new();
    let mut entry = Entry {
        rules: vec![id],
        groups: vec![GroupVisit {
            group: 1,
            taken: BucketsTaken::One(0),
        }],
        missed: vec![],
        arrival: [0; PACKET_WORDS],
        lookups: vec![],
        place: 0,
        in_port: 1,
        out_port: 2,
        credited: FlowCounts::default(),
        last_moved: Duration::ZERO,
        learns: None,
        depends: None,
        read_at: Duration::ZERO,
        export_from: Duration::ZERO,
        exported: FlowCounts::default(),
    };
    let now = Duration::from_secs(1);
    let mut read = |packets, bytes| {
        let counts = FlowCounts {
            packets,
            bytes,
            tcp_flags: 0,
        };
        credit(&mut entry, counts, &mut ports, &mut tables, &mut macs, now)
    };
    assert!(read(2, 120));
    assert!(read(3, 120), "a packet without its bytes yet");
    assert!(read(3, 180), "its bytes, later");
    assert!(!read(3, 180));
    let stats = &tables.get(id).unwrap().stats;
    assert_eq!((stats.n_packets, stats.n_bytes), (3, 180));
    let group = tables.group_usage(1, now).counts;
    let counts = |c: crate::group::Counts| (c.packets, c.bytes);
    assert_eq!(counts(group.total), (3, 180));
    assert_eq!(counts(group.buckets[0]), (3, 180), "and its bucket's");
    assert_eq!(ports[&2].tx_bytes, 180);
    assert_eq!(ports[&1].rx_packets, 3);

    // Flow records: the first takes what came since the install; the next, what came
    // after the read before that record, not since the install (a flow a record forgot
    // when idle would otherwise start long before its packets).
    let key = [0u8; wirespeed_xdp::fast_path::KEY_LEN];
    let mut taken = Vec::new();
    take_unexported(&key, &mut entry, &mut |c| taken.push((c.packets, c.since)));
    let later = Duration::from_secs(9);
    let counts = FlowCounts {
        packets: 5,
        bytes: 300,
        tcp_flags: 0,
    };
    credit(
        &mut entry,
        counts,
        &mut ports,
        &mut tables,
        &mut macs,
        later,
    );
    take_unexported(&key, &mut entry, &mut |c| taken.push((c.packets, c.since)));
    assert_eq!(taken, [(3, Duration::ZERO), (2, now)]);
}
