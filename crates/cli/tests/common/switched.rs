//! A switch between two host namespaces, for the switch tests.

use super::*;

/// Hosts A (10.9.0.1) and B (10.9.0.2) joined through a `wirespeed switch` in the middle
/// namespace (port 1 towards A, port 2 towards B), with a control socket of its own.
pub struct Switched {
    pub c: NetChain,
    pub ctl: String,
    switch: Option<Running>,
}

impl Switched {
    pub fn new(tag: &str, extra: &[&str]) -> Switched {
        let c = NetChain::new(tag);
        must(&[
            "ip",
            "-n",
            &c.ns_a,
            "addr",
            "add",
            "10.9.0.1/24",
            "dev",
            &c.a,
        ]);
        must(&[
            "ip",
            "-n",
            &c.ns_b,
            "addr",
            "add",
            "10.9.0.2/24",
            "dev",
            &c.b,
        ]);
        let ctl = format!("/tmp/wirespeed-test-{}-{tag}.sock", std::process::id());
        let (p1, p2) = (format!("1=xdp:{}", c.ma), format!("2=xdp:{}", c.mb));
        let mut args = vec![
            "switch", "--port", &p1, "--port", &p2, "--ctl", &ctl, "--json",
        ];
        args.extend_from_slice(extra);
        let mut switch = spawn_in(&c.ns_m, &args);
        switch.wait_ready();
        Switched {
            c,
            ctl,
            switch: Some(switch),
        }
    }

    pub fn ctl(&self, args: &[&str]) -> std::process::Output {
        let mut argv = vec![wirespeed(), "ctl", "--ctl", &self.ctl];
        argv.extend_from_slice(args);
        sh(&argv)
    }

    pub fn ctl_ok(&self, args: &[&str]) -> String {
        let out = self.ctl(args);
        assert!(
            out.status.success(),
            "ctl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Pings from `ns` to `to`: how many of `count` replies came back.
    pub fn ping(&self, ns: &str, to: &str, count: u32) -> u32 {
        let out = sh(&[
            "ip",
            "netns",
            "exec",
            ns,
            "ping",
            "-n",
            "-c",
            &count.to_string(),
            "-i",
            "0.2",
            "-W",
            "1",
            to,
        ]);
        let text = String::from_utf8_lossy(&out.stdout);
        text.split(", ")
            .find_map(|part| part.strip_suffix(" received"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no ping summary: {text}"))
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        if let Some(s) = self.switch.take()
            && !std::thread::panicking()
        {
            let (j, log) = s.interrupt();
            assert!(!log.contains("panicked"), "{log}");
            assert_eq!(j["frames"]["balanced"], true, "{j}");
        }
        let _ = std::fs::remove_file(&self.ctl);
    }
}
