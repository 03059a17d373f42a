//! A running switch's rule tables: `--flows FILE` at start, `ctl add-flows FILE` (a bad
//! line names itself and changes nothing) and `ctl replace-flows FILE`, meters and groups
//! from `ctl` and from `--meters` and `--groups` files at start, their counts (with the
//! kernel forwarding too), `ctl dump-tables` and `ctl --json`, rules that time out, and
//! forwarding between two AF_XDP ports that moves descriptors instead of copying.

mod common;
use common::ScratchFile;
use common::switched::Switched;

fn write_flows(tag: &str, text: &str) -> ScratchFile {
    let path = ScratchFile::new(&format!("{tag}.flows"));
    std::fs::write(&*path, text).unwrap();
    path
}

/// Starts a second switch on `s`'s ports with control socket `ctl` and `extra`, expected to
/// refuse before it opens them: what it printed and how it ended.
fn start_beside(s: &Switched, ctl: &str, extra: &[&str]) -> std::process::Output {
    let (ma, mb) = (format!("1=xdp:{}", s.c.ma), format!("2=xdp:{}", s.c.mb));
    let mut argv = vec![
        "ip",
        "netns",
        "exec",
        &s.c.ns_m,
        common::wirespeed(),
        "switch",
        "--port",
        &ma,
        "--port",
        &mb,
        "--ctl",
        ctl,
    ];
    argv.extend_from_slice(extra);
    common::sh(&argv)
}

/// dump-flows' rules without their duration and counters, which move.
fn flows_of(s: &Switched) -> Vec<String> {
    s.ctl_ok(&["dump-flows"])
        .lines()
        .map(|l| {
            let (_, rest) = l.split_once("n_bytes=").expect(l);
            rest.split_once(", ").expect(l).1.to_string()
        })
        .collect()
}

#[test]
fn flows_from_a_file_at_start_and_by_add_flows() {
    let start = write_flows(
        "start",
        "# hosts may talk, but not ping\n\npriority=100,icmp,actions=drop\npriority=0,actions=normal\n",
    );
    let s = Switched::new("sf", &["--flows", &start]);
    let flows = flows_of(&s);
    assert_eq!(flows.len(), 2, "{flows:?}");
    assert!(
        flows[0].starts_with("priority=100,icmp actions=drop"),
        "{flows:?}"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0, "the file's drop rule");

    // A bad second line: the command fails naming the line and the token, and the first
    // line is not added either.
    let bad = write_flows(
        "bad",
        "priority=200,icmp,actions=normal\npriority=200,udp,tp_dst=nine,actions=drop\n",
    );
    let out = s.ctl(&["add-flows", &bad]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a bad file was accepted");
    assert!(err.contains("line 2") && err.contains("nine"), "{err}");
    assert_eq!(flows_of(&s), flows, "the table changed");
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 1), 0);

    // A line that outputs to a port the bridge does not have: refused the same way.
    let unknown_port = write_flows(
        "port",
        "priority=200,icmp,actions=normal\n# port 7?\npriority=200,udp,actions=output:7\n",
    );
    let out = s.ctl(&["add-flows", &unknown_port]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an unknown port was accepted");
    assert!(
        err.contains("line 3: output:7: no such port (the bridge has ports 1, 2)"),
        "{err}"
    );
    assert_eq!(flows_of(&s), flows, "the table changed");

    let good = write_flows("good", "priority=200,icmp,actions=normal\n");
    s.ctl_ok(&["add-flows", &good]);
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 3),
        3,
        "the file's rule lets ping through"
    );
    assert_eq!(flows_of(&s).len(), 3);

    let missing = s.ctl(&["add-flows", "/tmp/wirespeed-no-such.flows"]);
    assert!(!missing.status.success());
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("/tmp/wirespeed-no-such.flows"),
        "{}",
        String::from_utf8_lossy(&missing.stderr)
    );
}

/// Flows and groups may name ports by their interfaces, as ovs-ofctl's do: `in_port=NAME`,
/// `output:NAME`, a bare `NAME` among the actions and a bucket's `watch_port:NAME` are the
/// ports' numbers; a name no port has is refused, naming the ports there are.
#[test]
fn flows_and_groups_name_ports_by_their_interfaces() {
    let s = Switched::new("sn", &[]);
    let (ma, mb) = (&s.c.ma, &s.c.mb);
    s.ctl_ok(&["del-flows"]);
    s.ctl_ok(&["add-flow", &format!("in_port={ma},actions=output:{mb}")]);
    s.ctl_ok(&["add-flow", &format!("in_port={mb} actions={ma}")]);
    assert_eq!(
        flows_of(&s),
        ["in_port=1 actions=output:2", "in_port=2 actions=output:1"]
    );
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 3),
        3,
        "the named rules forward"
    );
    s.ctl_ok(&["del-flows", &format!("in_port={mb}")]);
    assert_eq!(flows_of(&s), ["in_port=1 actions=output:2"]);
    let out = s.ctl(&["add-flow", "in_port=wsnosuch0,actions=drop"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "an unknown name was accepted");
    let ports = [ma.as_str(), mb.as_str()];
    let mut ports = ports.to_vec();
    ports.sort_unstable();
    assert!(
        err.contains(&format!(
            "in_port=wsnosuch0,actions=drop: in_port=wsnosuch0: no port is named wsnosuch0 \
             (the ports: {})",
            ports.join(", ")
        )),
        "{err}"
    );
    // Groups, one by one and from a file.
    let group = format!(
        "group_id=1,type=ff,bucket=watch_port:{mb},output:{mb},bucket=watch_port={ma},{ma}"
    );
    s.ctl_ok(&["add-group", &group]);
    let file = format!("group_id=2,type=all,bucket=actions=output:{mb}\n");
    let done = s.ctl_with_input(&["add-groups", "-"], file.as_bytes());
    assert!(done.status.success(), "{done:?}");
    assert_eq!(
        s.ctl_ok(&["dump-groups"]).lines().collect::<Vec<_>>(),
        [
            "group_id=1,type=ff,bucket=watch_port:2,actions=output:2,\
             bucket=watch_port:1,actions=output:1",
            "group_id=2,type=all,bucket=actions=output:2",
        ]
    );
    let out = s.ctl(&["add-group", "group_id=3,type=all,bucket=output:wsnosuch0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no port is named wsnosuch0"),
        "{err}"
    );
}

/// `ctl replace-flows FILE`: the table ends up holding exactly the file's flows in one
/// change; a flow already there as written keeps its counters, a changed one is replaced,
/// a missing one deleted; a file with a bad line changes nothing. `ctl diff-flows FILE`
/// then names what differs, as ovs-ofctl's does.
#[test]
fn replace_flows_makes_the_table_the_files_and_diff_flows_says_how_they_differ() {
    let start = write_flows(
        "sr-start",
        "priority=100,in_port=1,icmp,actions=output:2\npriority=100,in_port=2,icmp,actions=drop\n\
         priority=90,udp,actions=drop\n",
    );
    let s = Switched::new("sr", &["--flows", &start]);
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 2),
        0,
        "the replies are dropped"
    );
    let file = write_flows(
        "sr-new",
        "# the same, changed, new; no udp rule, no normal rule\n\
         priority=100,in_port=1,icmp,actions=output:2\npriority=100,in_port=2,icmp,actions=output:1\n\
         priority=0,arp,actions=normal\n",
    );
    assert_eq!(
        s.ctl_ok(&["replace-flows", &file]).trim(),
        "1 flow added, 1 changed, 2 deleted, 1 kept"
    );
    assert_eq!(
        flows_of(&s),
        [
            "priority=100,icmp,in_port=1 actions=output:2",
            "priority=100,icmp,in_port=2 actions=output:1",
            "priority=0,arp actions=NORMAL",
        ]
    );
    let dump = s.ctl_ok(&["dump-flows"]);
    assert!(
        dump.contains("n_packets=2, n_bytes=196, priority=100,icmp,in_port=1 actions=output:2"),
        "the kept rule keeps its counters: {dump}"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);

    let bad = write_flows(
        "sr-bad",
        "priority=5,actions=drop\npriority=6,udp,actions=output:7\n",
    );
    let out = s.ctl(&["replace-flows", &bad]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("line 2: output:7: no such port"),
        "{err}"
    );
    assert_eq!(flows_of(&s).len(), 3, "nothing changed");
    let none = s.ctl(&["replace-flows"]);
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("replace-flows needs a file of flows"),
        "{none:?}"
    );

    // diff-flows: nothing between the table and the file it was made from (status 0), then
    // each side's own (status 2).
    let same = s.ctl(&["diff-flows", &file]);
    assert_eq!(same.status.code(), Some(0), "{same:?}");
    assert!(same.stdout.is_empty(), "{same:?}");
    let other = write_flows(
        "sr-other",
        "priority=100,in_port=1,icmp,actions=output:2\npriority=100,in_port=2,icmp,actions=drop\n",
    );
    let diff = s.ctl(&["diff-flows", &other]);
    assert_eq!(diff.status.code(), Some(2), "{diff:?}");
    assert_eq!(
        String::from_utf8_lossy(&diff.stdout)
            .lines()
            .collect::<Vec<_>>(),
        [
            "-table=0,priority=100,icmp,in_port=2,actions=output:1",
            "-table=0,priority=0,arp,actions=NORMAL",
            "+table=0,priority=100,icmp,in_port=2,actions=drop",
        ]
    );
}

/// Meters from `ctl`, in ovs-ofctl's syntax: added, shown, counted, changed and deleted
/// with the flow that used one; a flow file that names a meter no `--meters` file gives is
/// refused, and the switch says so before it opens a port.
#[test]
fn ctl_adds_changes_and_deletes_meters() {
    let s = Switched::new("sm", &[]);
    let meter = "meter=1,pktps,burst,stats,bands=type=drop,rate=1,burst_size=10";
    s.ctl_ok(&["add-meter", meter]);
    assert_eq!(
        s.ctl_ok(&["dump-meters"]).trim(),
        "meter=1 pktps burst stats bands=type=drop rate=1 burst_size=10"
    );
    let again = s.ctl(&["add-meter", meter]);
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(
        !again.status.success() && err.contains("the meter exists"),
        "{err}"
    );
    let zero = "meter=2,pktps,bands=type=drop,rate=0";
    let out = s.ctl(&["add-meter", zero]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        format!("wirespeed: error: {zero}: a band's rate must be above 0"),
        "said once, whole"
    );
    let bad = s.ctl(&["add-meter", "meter=2,pktps,bands=type=dscp_remark,rate=5"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        !bad.status.success() && err.contains("only drop bands"),
        "{err}"
    );
    s.ctl_ok(&[
        "add-flow",
        "priority=50,in_port=1,udp,actions=meter:1,output:2",
    ]);
    let stats = s.ctl_ok(&["meter-stats"]);
    assert!(
        stats.starts_with("meter:1 flow_count:1 packet_in_count:0 byte_in_count:0 duration:")
            && stats
                .trim_end()
                .ends_with("bands: 0: packet_count:0 byte_count:0"),
        "{stats}"
    );
    s.ctl_ok(&["mod-meter", "meter=1,kbps,bands=type=drop,rate=1000"]);
    assert_eq!(
        s.ctl_ok(&["dump-meters"]).trim(),
        "meter=1 kbps bands=type=drop rate=1000"
    );
    let missing = s.ctl(&["mod-meter", "meter=3,kbps,bands=type=drop,rate=1"]);
    assert!(!missing.status.success());
    assert_eq!(
        s.ctl_ok(&["del-meter", "meter=1"]).trim(),
        "flows deleted with the meter: 1"
    );
    assert!(flows_of(&s).iter().all(|f| !f.contains("meter:")));
    assert_eq!(s.ctl_ok(&["dump-meters"]).trim(), "");

    let with_meter = write_flows("sm", "priority=50,udp,actions=meter:1,output:2\n");
    let ctl = ScratchFile::new("sm-refused.sock");
    let out = start_beside(&s, &ctl, &["--flows", &with_meter]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "wirespeed: error: --flows {}: line 1: meter:1: no such meter (--meters FILE \
             defines meters at start)",
            &*with_meter
        )
    );
}

/// With `--offload`, the kernel forwards a group's flows after their first packet: its
/// counts still come back to the group and the bucket taken, and a modify starts them anew
/// even when the kernel forwarded packets since they were last read.
#[test]
fn group_counts_come_back_from_the_offload() {
    let groups = write_flows(
        "sgo-groups",
        "group_id=1,type=indirect,bucket=output:2\n\
         group_id=2,type=select,bucket=weight:0,output:2,bucket=output:1\n",
    );
    let flows = write_flows(
        "sgo-flows",
        "priority=50,in_port=1,icmp,actions=group:1\npriority=50,in_port=2,icmp,actions=group:2\n",
    );
    let s = Switched::new(
        "sgo",
        &["--offload", "--groups", &groups, "--flows", &flows],
    );
    // The hosts' veths take the kernel's XDP redirects only with NAPI on: GRO on.
    for (ns, dev) in [(&s.c.ns_a, &s.c.a), (&s.c.ns_b, &s.c.b)] {
        common::must(&["ip", "netns", "exec", ns, "ethtool", "-K", dev, "gro", "on"]);
    }
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    // Modified before any read: what the kernel forwarded is the old group's.
    s.ctl_ok(&["mod-group", "group_id=1,type=indirect,bucket=output:2"]);
    assert_eq!(
        group_stats_of(&s),
        [
            "group_id=1,ref_count=1,packet_count=0,byte_count=0,\
             bucket0:packet_count=0,byte_count=0",
            "group_id=2,ref_count=1,packet_count=3,byte_count=294,\
             bucket0:packet_count=0,byte_count=0,bucket1:packet_count=3,byte_count=294",
        ]
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    assert_eq!(
        group_stats_of(&s),
        [
            "group_id=1,ref_count=1,packet_count=2,byte_count=196,\
             bucket0:packet_count=2,byte_count=196",
            "group_id=2,ref_count=1,packet_count=5,byte_count=490,\
             bucket0:packet_count=0,byte_count=0,bucket1:packet_count=5,byte_count=490",
        ]
    );
    // The kernel carried the requests but each ping's first (each ping is its own flow).
    let ports = s.ctl_ok(&["dump-ports", "1"]);
    assert!(ports.contains("fast path: rx pkts=3,"), "{ports}");
}

/// `switch --meters FILE --groups FILE --flows FILE`: a switch that starts with its groups
/// and meters, and flows that use them, forwarding and counting from the first packet; a
/// file the bridge would refuse stops the start before anything is opened, naming the file
/// and the line.
#[test]
fn groups_and_meters_from_files_at_start() {
    let meters = write_flows(
        "sgm-meters",
        "# ping's budget\nmeter=1,pktps,bands=type=drop,rate=1000\n",
    );
    let groups = write_flows(
        "sgm-groups",
        "group_id=1,type=select,bucket=output:2\ngroup_id=2,type=all,bucket=output:1\n",
    );
    let flows = write_flows(
        "sgm-flows",
        "priority=50,in_port=1,icmp,actions=meter:1,group:1\n\
         priority=50,in_port=2,icmp,actions=group:2\n",
    );
    let s = Switched::new(
        "sgm",
        &["--meters", &meters, "--groups", &groups, "--flows", &flows],
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    assert_eq!(
        s.ctl_ok(&["dump-groups"]).lines().collect::<Vec<_>>(),
        [
            "group_id=1,type=select,bucket=actions=output:2",
            "group_id=2,type=all,bucket=actions=output:1",
        ]
    );
    let stats = group_stats_of(&s);
    assert_eq!(
        stats,
        [
            "group_id=1,ref_count=1,packet_count=3,byte_count=294,\
             bucket0:packet_count=3,byte_count=294",
            "group_id=2,ref_count=1,packet_count=3,byte_count=294,\
             bucket0:packet_count=3,byte_count=294",
        ]
    );
    let meter = s.ctl_ok(&["meter-stats"]);
    assert!(
        meter.starts_with("meter:1 flow_count:1 packet_in_count:3 byte_in_count:294 duration:"),
        "{meter}"
    );
    let mut meters: serde_json::Value =
        serde_json::from_str(s.ctl_ok(&["--json", "meter-stats"]).trim()).unwrap();
    meters[0]["duration"] = serde_json::Value::Null;
    assert_eq!(
        meters,
        serde_json::json!([{
            "meter_id": 1, "flow_count": 1, "packet_in_count": 3, "byte_in_count": 294,
            "duration": null, "bands": [{ "packet_count": 0, "byte_count": 0 }],
        }]),
        "the same in JSON"
    );

    // Refused starts: the flag, the file, the line and why; no control socket is left.
    let bad_port = write_flows(
        "sgm-bad-port",
        "group_id=1,type=all,bucket=output:1\ngroup_id=2,type=all,bucket=output:9\n",
    );
    let twice = write_flows("sgm-twice", "meter=1,pktps\n#\nmeter=1,kbps\n");
    let missing = format!("/tmp/ws-sgm-missing-{}", std::process::id());
    for (flag, file, why) in [
        (
            "--groups",
            missing.as_str(),
            "No such file or directory (os error 2)",
        ),
        (
            "--groups",
            &*bad_port,
            "line 2: output:9: no such port (the bridge has ports 1, 2)",
        ),
        ("--meters", &*twice, "line 3: meter 1 is given twice"),
    ] {
        let ctl = ScratchFile::new("sgm-refused.sock");
        let out = start_beside(&s, &ctl, &[flag, file]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(
            err.trim(),
            format!("wirespeed: error: {flag} {file}: {why}")
        );
        assert!(
            !std::path::Path::new(&*ctl).exists(),
            "{flag}: the socket was made"
        );
    }
    // The running switch was not disturbed.
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 1), 1);
}

/// The lines of an ovs-ofctl reply (its header line dropped, the leading space trimmed).
fn ofctl_lines(text: &str) -> Vec<String> {
    text.lines().skip(1).map(|l| l.trim().to_string()).collect()
}

/// `ctl dump-group-stats`, each line without its duration.
fn group_stats_of(s: &Switched) -> Vec<String> {
    let lines: Vec<String> = s
        .ctl_ok(&["dump-group-stats"])
        .lines()
        .map(String::from)
        .collect();
    without_duration(&lines)
}

/// `dump-group-stats` lines without their duration, which moves.
fn without_duration(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            let (head, rest) = l.split_once(",duration=").expect(l);
            format!("{head},{}", rest.split_once(',').expect(l).1)
        })
        .collect()
}

/// Groups from `ctl`, in ovs-ofctl's syntax: added, shown as ovs-ofctl shows them over
/// OpenFlow, used by a flow that pings through them and counted exactly, refused with the
/// reason when malformed or naming a port the bridge lacks, changed, and deleted with the
/// flows that send to them; `add-groups FILE` adds a file's, all or none.
#[test]
fn ctl_adds_changes_and_deletes_groups() {
    let s = Switched::new("sg", &["--openflow", "ptcp:"]);
    s.ctl_ok(&["add-group", "group_id=1,type=all,bucket=output:2"]);
    s.ctl_ok(&[
        "add-group",
        "group_id=2,type=select,bucket=weight:3,actions=output:1,bucket=weight=0,output:2",
    ]);
    s.ctl_ok(&[
        "add-group",
        "group_id=3,type=fast_failover,bucket=watch_port:2,output:2,\
         bucket=watch_port=1,output:1",
    ]);
    let groups: Vec<String> = s
        .ctl_ok(&["dump-groups"])
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(
        groups,
        [
            "group_id=1,type=all,bucket=actions=output:2",
            "group_id=2,type=select,bucket=weight:3,actions=output:1,bucket=weight:0,\
             actions=output:2",
            "group_id=3,type=ff,bucket=watch_port:2,actions=output:2,\
             bucket=watch_port:1,actions=output:1",
        ]
    );
    assert_eq!(
        ofctl_lines(&s.ofctl_ok(&["dump-groups"])),
        groups,
        "ovs-ofctl agrees"
    );
    assert_eq!(
        s.ctl_ok(&["dump-groups", "group_id=2"]).trim(),
        groups[1],
        "one group by its id"
    );

    // Refused, with the reason, and nothing changes.
    for (group, reason) in [
        (
            "group_id=1,type=all,bucket=output:1",
            "the group exists (mod-group changes it)",
        ),
        (
            "group_id=4,type=all,bucket=output:9",
            "output:9: no such port (the bridge has ports 1, 2)",
        ),
        (
            "group_id=4,type=indirect,bucket=output:1,bucket=output:2",
            "an indirect group has exactly one bucket",
        ),
        (
            "group_id=4,type=fast_failover,bucket=output:1",
            "each bucket of a fast_failover group needs watch_port",
        ),
        (
            "group_id=4,type=all,bucket=group:1",
            "a bucket holds actions only: no group, table, action set or meter (no chaining)",
        ),
        (
            "group_id=4,type=any,bucket=output:1",
            "type=any: a group's type is all, select, indirect or fast_failover (ff)",
        ),
        ("type=all,bucket=output:1", "a group needs group_id=ID"),
    ] {
        let out = s.ctl(&["add-group", group]);
        let err = String::from_utf8_lossy(&out.stderr);
        // Said once, whole: the group as given, then why.
        assert!(!out.status.success(), "{group}");
        assert_eq!(err.trim(), format!("wirespeed: error: {group}: {reason}"));
    }
    let out = s.ctl(&["mod-group", "group_id=9,type=all,bucket=output:1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("no such group"),
        "{err}"
    );
    assert_eq!(
        s.ctl_ok(&["dump-groups"]).lines().collect::<Vec<_>>(),
        groups,
        "refusals change nothing"
    );

    // A flow through group 1 and one through group 2: each ping crosses both.
    s.ctl_ok(&["add-flow", "priority=50,in_port=1,icmp,actions=group:1"]);
    s.ctl_ok(&["add-flow", "priority=50,in_port=2,icmp,actions=group:2"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let stats = group_stats_of(&s);
    // 98-byte echo requests and replies; select counts the bucket it chose (never one of
    // weight 0).
    assert_eq!(
        stats,
        [
            "group_id=1,ref_count=1,packet_count=3,byte_count=294,\
             bucket0:packet_count=3,byte_count=294",
            "group_id=2,ref_count=1,packet_count=3,byte_count=294,\
             bucket0:packet_count=3,byte_count=294,bucket1:packet_count=0,byte_count=0",
            "group_id=3,ref_count=0,packet_count=0,byte_count=0,\
             bucket0:packet_count=0,byte_count=0,bucket1:packet_count=0,byte_count=0",
        ]
    );
    assert_eq!(
        without_duration(&ofctl_lines(&s.ofctl_ok(&["dump-group-stats"]))),
        stats,
        "ovs-ofctl agrees"
    );

    // Through the fast-failover group: its first bucket's port is live, so that bucket
    // counts; group 1 keeps what it counted.
    s.ctl_ok(&["mod-flows", "in_port=1,icmp,actions=group:3"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    let stats = without_duration(&ofctl_lines(&s.ofctl_ok(&["dump-group-stats"])));
    assert_eq!(
        stats,
        [
            "group_id=1,ref_count=0,packet_count=3,byte_count=294,\
             bucket0:packet_count=3,byte_count=294",
            "group_id=2,ref_count=1,packet_count=5,byte_count=490,\
             bucket0:packet_count=5,byte_count=490,bucket1:packet_count=0,byte_count=0",
            "group_id=3,ref_count=1,packet_count=2,byte_count=196,\
             bucket0:packet_count=2,byte_count=196,bucket1:packet_count=0,byte_count=0",
        ],
        "ovs-ofctl's view"
    );
    // One group asked for, one group answered (OFPG_ALL above); none for one not there.
    assert_eq!(
        without_duration(&ofctl_lines(
            &s.ofctl_ok(&["dump-group-stats", "group_id=3"])
        )),
        [stats[2].clone()]
    );
    assert!(ofctl_lines(&s.ofctl_ok(&["dump-group-stats", "group_id=9"])).is_empty());
    s.ctl_ok(&["mod-flows", "in_port=1,icmp,actions=group:1"]);

    // A bucket that sends back out of the input port sends nothing (OpenFlow's rule). A
    // modify starts the group's counts anew, as Open vSwitch does; the packets still
    // passed through it.
    s.ctl_ok(&["mod-group", "group_id=1,type=all,bucket=output:1"]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 0);
    assert_eq!(
        without_duration(&[s.ctl_ok(&["dump-group-stats", "group_id=1"]).trim().into()]),
        ["group_id=1,ref_count=1,packet_count=2,byte_count=196,\
          bucket0:packet_count=2,byte_count=196"]
    );
    // Deleting a group deletes the flows that send to it.
    assert_eq!(
        s.ctl_ok(&["del-groups", "group_id=1"]).trim(),
        "flows deleted with the group: 1"
    );
    let flows = flows_of(&s);
    assert!(
        flows.iter().all(|f| !f.contains("group:1")) && flows.iter().any(|f| f.contains("group:2")),
        "{flows:?}"
    );
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 2), 2);
    assert_eq!(
        s.ctl_ok(&["del-groups"]).trim(),
        "flows deleted with the group: 1"
    );
    assert_eq!(s.ctl_ok(&["dump-groups"]).trim(), "");
    assert!(flows_of(&s).iter().all(|f| !f.contains("group:")));

    // add-groups FILE: all or none; a refusal names its line, and the group added before
    // it is taken back.
    let bad = write_flows(
        "sg-groups-bad",
        "group_id=5,type=all,bucket=output:1\n# next\ngroup_id=6,type=all,bucket=output:9\n",
    );
    let out = s.ctl(&["add-groups", &bad]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "wirespeed: error: line 3: output:9: no such port (the bridge has ports 1, 2)"
    );
    assert_eq!(s.ctl_ok(&["dump-groups"]).trim(), "", "nothing added");
    let good = write_flows(
        "sg-groups-good",
        "group_id=5,type=all,bucket=output:1\ngroup_id=6,type=indirect,bucket=output:2\n",
    );
    assert_eq!(s.ctl_ok(&["add-groups", &good]).trim(), "2 groups added");
    assert_eq!(
        s.ctl_ok(&["dump-groups"]).lines().collect::<Vec<_>>(),
        [
            "group_id=5,type=all,bucket=actions=output:1",
            "group_id=6,type=indirect,bucket=actions=output:2",
        ]
    );
    // add-groups - reads them from standard input, as add-flows - does.
    let groups = b"group_id=7,type=all,bucket=output:2\n";
    let done = s.ctl_with_input(&["add-groups", "-"], groups);
    assert_eq!(
        String::from_utf8_lossy(&done.stdout).trim(),
        "1 group added",
        "{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(
        s.ctl_ok(&["dump-groups"])
            .contains("group_id=7,type=all,bucket=actions=output:2")
    );
}

#[test]
fn rules_with_timeouts_leave_the_running_table() {
    let s = Switched::new("so", &[]);
    // Idle: never hit, gone after a second (the switch looks once a second).
    s.ctl_ok(&["add-flow", "priority=100,idle_timeout=1,udp,actions=drop"]);
    // Hard: hit all along, gone after two seconds all the same.
    s.ctl_ok(&["add-flow", "priority=100,hard_timeout=2,icmp,actions=drop"]);
    let flows = s.ctl_ok(&["dump-flows"]);
    assert!(flows.contains("idle_timeout=1"), "{flows}");
    assert!(flows.contains("hard_timeout=2"), "{flows}");
    let added = std::time::Instant::now();
    assert_eq!(
        s.ping(&s.c.ns_a, "10.9.0.2", 1),
        0,
        "the hard-timeout rule drops"
    );
    while added.elapsed() < std::time::Duration::from_millis(3500) {
        // Keeps the icmp rule busy: hard_timeout does not care.
        s.ping(&s.c.ns_a, "10.9.0.2", 1);
    }
    let flows = flows_of(&s);
    assert_eq!(flows.len(), 1, "both expired: {flows:?}");
    assert!(flows[0].starts_with("priority=0 actions="), "{flows:?}");
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
}

/// An idle timeout counts from the rule's last packet, which the threads' caches hold until
/// the switch harvests them: a busy rule stays, the same rule left idle goes.
#[test]
fn a_busy_rule_outlives_its_idle_timeout() {
    let s = Switched::new("sb", &[]);
    s.ctl_ok(&[
        "add-flow",
        "priority=100,idle_timeout=1,icmp,actions=normal",
    ]);
    // 15 echoes 0.2 s apart: three seconds, three housekeeping rounds.
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 15), 15);
    let flows = s.ctl_ok(&["dump-flows"]);
    let busy = flows
        .lines()
        .find(|l| l.contains("idle_timeout=1"))
        .unwrap_or_else(|| panic!("the busy rule expired: {flows}"));
    assert!(
        busy.contains("n_packets=30,"),
        "requests and replies: {busy}"
    );
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let flows = flows_of(&s);
    assert_eq!(flows.len(), 1, "idle, it expired: {flows:?}");
}

#[test]
fn forwarding_between_af_xdp_ports_moves_descriptors() {
    let mut s = Switched::new("sm", &[]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 5), 5);
    assert_eq!(s.ping(&s.c.ns_b, "10.9.0.1", 5), 5);
    let show = s.ctl_ok(&["show"]);
    assert!(
        show.contains(" UMEM of "),
        "one UMEM for both ports: {show}"
    );
    let (j, _) = s.stop();
    let ports = j["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 2, "{j}");
    for p in ports {
        // 10 echo requests and replies, and ARP, each way.
        assert!(p["tx_packets"].as_u64().unwrap() >= 10, "{p}");
        assert_eq!(p["copies"], 0, "a frame was copied: {p}");
    }
}

#[test]
fn the_control_socket_is_the_switch_users_alone() {
    use std::os::unix::fs::PermissionsExt;
    let s = Switched::new("su", &[]);
    let mode = std::fs::metadata(&s.ctl).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    // Another user (nobody) is refused by the kernel; ctl says what that means. The binary
    // is copied where nobody can run it (the checkout may be in root's home).
    let binary = ScratchFile::new("nobody");
    std::fs::copy(common::wirespeed(), &*binary).unwrap();
    std::fs::set_permissions(&*binary, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = common::sh(&[
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        &binary,
        "ctl",
        "--ctl",
        &s.ctl,
        "dump-flows",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "nobody read the flows: {err}");
    assert!(
        err.contains(&format!("{}: permission denied", s.ctl)),
        "{err}"
    );
}

/// `ctl --json`, for scripts: dump-flows, dump-group-stats and dump-ports answer one JSON
/// value each, with the counts the text shows; other commands refuse it, saying which take it.
#[test]
fn ctl_answers_in_json_for_scripts() {
    let s = Switched::new("sj", &[]);
    s.ctl_ok(&["add-group", "group_id=1,type=select,bucket=output:2"]);
    s.ctl_ok(&[
        "add-flow",
        "cookie=0x2a,priority=50,in_port=1,icmp,actions=group:1",
    ]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 3);
    let json = |args: &[&str]| -> serde_json::Value {
        let mut argv = vec!["--json"];
        argv.extend_from_slice(args);
        let out = s.ctl_ok(&argv);
        serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
    };

    let mut flows = json(&["dump-flows", "icmp"]);
    assert!(flows[0]["duration"].as_f64().is_some(), "{flows}");
    flows[0]["duration"] = serde_json::Value::Null;
    assert_eq!(
        flows,
        serde_json::json!([{
            "table": 0, "priority": 50, "cookie": "0x2a", "match": "icmp,in_port=1",
            "actions": "group:1", "n_packets": 3, "n_bytes": 294, "duration": null,
            "idle_timeout": 0, "hard_timeout": 0,
        }])
    );

    let mut groups = json(&["dump-group-stats", "group_id=1"]);
    groups[0]["duration"] = serde_json::Value::Null;
    assert_eq!(
        groups,
        serde_json::json!([{
            "group_id": 1, "type": "select", "duration": null, "ref_count": 1,
            "packet_count": 3, "byte_count": 294,
            "buckets": [{ "packet_count": 3, "byte_count": 294 }],
        }])
    );

    // One port's part of the exit summary: the echo requests came in on port 1 (with the
    // hosts' own packets beside them).
    let ports = json(&["dump-ports", "1"]);
    let port = &ports["ports"];
    assert_eq!(port.as_array().map(Vec::len), Some(1), "{ports}");
    assert_eq!(
        (&port[0]["port"], &port[0]["link"]),
        (&1.into(), &"up".into())
    );
    assert!(port[0]["rx_packets"].as_u64() >= Some(3), "{ports}");

    let out = s.ctl(&["--json", "show"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "wirespeed: error: --json is for dump-flows, dump-tables, dump-ports, dump-group-stats, \
         meter-stats only, not show"
    );
}

/// `ctl dump-tables`: each table's rules, the packets that looked it up and those that found
/// a rule there. ICMP goes on to table 1, which sends the echo requests to B and has no rule
/// for the replies: three of its six lookups match. Tables with neither rules nor lookups
/// are left out.
#[test]
fn ctl_dump_tables_counts_each_tables_lookups() {
    let s = Switched::new("sdt", &[]);
    s.ctl_ok(&["add-flow", "priority=10,icmp,actions=goto_table:1"]);
    s.ctl_ok(&[
        "add-flow",
        "table=1,priority=10,in_port=1,icmp,actions=output:2",
    ]);
    assert_eq!(s.ping(&s.c.ns_a, "10.9.0.2", 3), 0, "the replies miss");
    let text = s.ctl_ok(&["dump-tables"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        (lines.len(), lines[0], lines[1]),
        (5, "OFPST_TABLE reply:", "  table 0:")
    );
    // Table 0 also takes the hosts' own packets (normal): every lookup finds a rule.
    let (lookups, matched) = lines[2]
        .strip_prefix("    active=2, lookup=")
        .and_then(|rest| rest.split_once(", matched="))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        lookups == matched && lookups.parse::<u64>().unwrap() >= 6,
        "{text}"
    );
    assert_eq!(
        lines[3..],
        ["  table 1:", "    active=1, lookup=6, matched=3"]
    );
    let out = s.ctl_ok(&["--json", "dump-tables"]);
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        json[1],
        serde_json::json!({ "table": 1, "active": 1, "lookup": 6, "matched": 3 }),
        "{json}"
    );
    assert_eq!(json.as_array().map(Vec::len), Some(2), "{json}");
}
