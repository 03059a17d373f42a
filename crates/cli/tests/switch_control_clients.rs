//! The control socket under clients that do not behave: silent ones, one that sends half a
//! request, and one whose request is a megabyte of nonsense. Each delays only itself, and
//! what a client is told is what happened.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::switched::Switched;
use common::{must, sh, wirespeed};

/// dump-flows' lines that mention `text`.
fn flows_with(s: &Switched, text: &str) -> usize {
    s.ctl_ok(&["dump-flows"])
        .lines()
        .filter(|l| l.contains(text))
        .count()
}

#[test]
fn silent_clients_delay_nobody_and_failed_means_not_done() {
    let s = Switched::new("scc", &[]);
    let connect = || UnixStream::connect(&*s.ctl).expect("connect to the control socket");
    let silent: Vec<UnixStream> = (0..5).map(|_| connect()).collect();
    let started = Instant::now();
    s.ctl_ok(&["dump-flows"]);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "dump-flows took {took:?}");

    // With idle clients around, what ctl is told succeeded did.
    s.ctl_ok(&["add-flow", "priority=555,udp,actions=drop"]);
    assert_eq!(flows_with(&s, "priority=555"), 1);

    // Half a request, then nothing: the client is told nothing was done, and nothing was.
    let half = connect();
    (&half)
        .write_all(br#"{"command":"add-flow","args":["priority=556,udp,actions=drop""#)
        .unwrap();
    let mut answer = String::new();
    BufReader::new(&half).read_line(&mut answer).unwrap();
    let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(
        answer["output"],
        "request not complete within 5 s: nothing was done"
    );
    drop(half);
    drop(silent);
    assert_eq!(flows_with(&s, "priority=556"), 0);

    // A hundred kilobytes of bad action: named by its start and length, not echoed.
    let flow = format!("actions=output:{}", "9".repeat(100_000));
    let out = s.ctl(&["add-flow", &flow]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.len() < 500, "{} bytes of error", err.len());
    assert!(err.contains(&format!("{}...(", &flow[..60])), "{err}");
}

/// ovs-ofctl's first word is the bridge; ctl has none to take. `ctl diff-flows br0 FILE`
/// is refused with status 1 and says so: clap's 2 is what diff-flows says when the flows
/// differ, so a script read the typo as a difference.
#[test]
fn a_bridge_name_given_to_ctl_is_a_usage_error_of_status_1() {
    for argv in [
        &["ctl", "diff-flows", "br0", "switch.flows"][..],
        &["ctl", "add-flow", "br0", "in_port=1,actions=drop"],
    ] {
        let out = sh(&[&[wirespeed()][..], argv].concat());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{argv:?}: {err}");
        assert!(
            err.contains("unexpected argument") && err.contains("it takes no bridge name"),
            "{argv:?}: {err}"
        );
    }
    // Any other tool's usage error is still 2, as clap's.
    let out = sh(&[wirespeed(), "gen", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A switch that does not answer (stopped: SIGSTOP) is said so once `--timeout` is up, and
/// ctl exits 1, instead of waiting for ever; `top` says so too, within its own few seconds.
#[test]
fn a_switch_that_does_not_answer_is_said_so_when_the_timeout_is_up() {
    let s = Switched::new("cto", &[]);
    let pid = s.pid().to_string();
    must(&["kill", "-STOP", &pid]);
    let start = Instant::now();
    let out = s.ctl(&["--timeout", "1", "dump-flows"]);
    let took = start.elapsed();
    let top = sh(&[wirespeed(), "top", "--ctl", &s.ctl, "--count", "1"]);
    must(&["kill", "-CONT", &pid]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("the switch did not answer within 1 s"),
        "{err}"
    );
    assert!(took < Duration::from_secs(10), "{took:?}");
    let top_err = String::from_utf8_lossy(&top.stderr);
    assert!(!top.status.success(), "{top_err}");
    assert!(top_err.contains("did not answer within 5 s"), "{top_err}");
    assert!(s.ctl_ok(&["dump-flows"]).contains("actions=NORMAL"));
}
