//! gen says when it cannot send at the asked rate (before: `--rate 1M` delivered 0.38 Mpps
//! without a word). A pipe nobody reads takes a ring's worth of frames and no more.

mod common;
use common::*;

#[test]
fn a_rate_not_reached_is_said() {
    let pipe = format!("pipe:gs{}", std::process::id());
    let out = std::process::Command::new(wirespeed())
        .args([
            "gen",
            "--port",
            &pipe,
            "--rate",
            "1M",
            "--duration",
            "1.5",
            "--json",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j["rate_reached"], false, "{j}");
    let share = j["rate_share"].as_f64().unwrap();
    assert!(share < 0.05, "{j}");
    assert!(
        stderr.contains("wirespeed gen: note: the asked rate was not reached: 1000000 pps asked"),
        "{stderr}"
    );
}
