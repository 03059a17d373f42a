//! Builds the XDP programs in bpf/ with clang into OUT_DIR, where the loader includes them.

use std::env;
use std::path::PathBuf;
use std::process::Command;

/// Objects: name, source in bpf/, extra clang arguments.
const PROGRAMS: [(&str, &str, &[&str]); 7] = [
    ("xsk_redirect", "xsk_redirect", &[]),
    ("xsk_spill", "xsk_spill", &[]),
    ("xdp_drop", "xdp_drop", &[]),
    ("xdp_live_tx", "xdp_live_tx", &[]),
    ("tx_watch", "tx_watch", &[]),
    // -mcpu=v3: an atomic OR (the flags it counts).
    ("switch_fast_path", "switch_fast_path", &["-mcpu=v3"]),
    // The fast path with its parser's result exported, for the tests.
    (
        "switch_fast_path_probe",
        "switch_fast_path",
        &["-mcpu=v3", "-DFP_PROBE"],
    ),
];

fn main() {
    let bpf_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../bpf");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".to_string());
    // Debian keeps asm/types.h under the multiarch include directory.
    let multiarch = format!(
        "/usr/include/{}-linux-gnu",
        env::var("CARGO_CFG_TARGET_ARCH").unwrap()
    );
    for (name, source, extra) in PROGRAMS {
        let src = bpf_dir.join(format!("{source}.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        let obj = out.join(format!("{name}.o"));
        let status = Command::new(&clang)
            .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
            .arg(format!("-I{multiarch}"))
            .args(extra)
            .arg("-c")
            .arg(&src)
            .arg("-o")
            .arg(&obj)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {clang} to build {}: {e} (install clang: make deps)",
                    src.display()
                )
            });
        assert!(status.success(), "{clang} failed on {}", src.display());
    }
    // Included by the tracepoint programs.
    println!(
        "cargo:rerun-if-changed={}",
        bpf_dir.join("kernel_net.h").display()
    );
    println!("cargo:rerun-if-env-changed=CLANG");
}
