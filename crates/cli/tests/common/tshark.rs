//! Helpers of the gen / recv tests: tshark as the judge of frames.

use super::*;

/// tshark's fields of every frame of a capture file, with checksum validation on for IPv4,
/// UDP, TCP and ICMP; one line per frame, fields separated by tabs.
pub fn tshark_fields(file: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut args: Vec<String> = [
        "tshark",
        "-r",
        file,
        "-n",
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-o",
        "tcp.check_checksum:TRUE",
        "-T",
        "fields",
        "-E",
        "separator=/t",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for f in fields {
        args.push("-e".to_string());
        args.push(f.to_string());
    }
    let argv: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
    let out = must(&argv);
    out.lines()
        .map(|l| l.split('\t').map(|s| s.to_string()).collect())
        .collect()
}

/// The expert messages tshark raises for a file (bad checksums and malformed packets
/// among them): empty when every frame is clean.
pub fn tshark_problems(file: &str) -> String {
    tshark_problems_where(file, "")
}

/// [`tshark_problems`] in the frames that match the display filter `only` (all when empty).
pub fn tshark_problems_where(file: &str, only: &str) -> String {
    let problems = "(_ws.expert.severity >= warning || _ws.malformed || ip.checksum.status == 0 \
                    || udp.checksum.status == 0 || tcp.checksum.status == 0 \
                    || icmp.checksum.status == 0 || icmpv6.checksum.status == 0)";
    let filter = match only {
        "" => problems.to_string(),
        only => format!("({only}) && {problems}"),
    };
    must(&[
        "tshark",
        "-r",
        file,
        "-n",
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
        "-o",
        "tcp.check_checksum:TRUE",
        "-Y",
        &filter,
    ])
}
