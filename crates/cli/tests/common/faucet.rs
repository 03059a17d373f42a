//! faucet and os-ken applications as the controllers of the OpenFlow tests, from the
//! project's own virtual environment (target/faucet-venv, made by scripts/install-deps.sh),
//! each in the switch's namespace on 127.0.0.1:6653; and tshark recording what they say.

use super::*;
use std::process::Child;

/// A program of the faucet virtual environment.
pub fn venv_bin(name: &str) -> String {
    let path = format!(
        "{}/../../target/faucet-venv/bin/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    assert!(
        Path::new(&path).exists(),
        "{path} is missing: scripts/install-deps.sh installs faucet (Python 3.11) there"
    );
    path
}

/// `osken-manager` in `ns`, listening on its 127.0.0.1:6653, to run `app`; with `tls`
/// (its key, certificate and CA certificate), over TLS only, a switch's certificate required.
fn manager(ns: &str, app: &str, tls: Option<[&str; 3]>) -> Command {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns, &venv_bin("osken-manager")])
        .args(["--ofp-listen-host", "127.0.0.1"]);
    match tls {
        None => cmd.args(["--ofp-tcp-listen-port", "6653"]),
        Some([key, cert, ca]) => cmd
            .args(["--ofp-ssl-listen-port", "6653", "--ctl-privkey", key])
            .args(["--ctl-cert", cert, "--ca-certs", ca]),
    };
    cmd.arg(app);
    cmd
}

/// `osken-manager` running an application, killed when dropped.
pub struct OsKen {
    child: Option<Child>,
    ns: String,
    /// Where the application logs (faucet's FAUCET_LOG, or the manager's output).
    pub log: ScratchFile,
}

impl OsKen {
    /// faucet with the configuration in `config` (a faucet.yaml).
    pub fn faucet(ns: &str, config: &str, tag: &str) -> OsKen {
        let log = ScratchFile::new(&format!("{tag}-faucet.log"));
        let exceptions = ScratchFile::new(&format!("{tag}-faucet.exc"));
        let mut cmd = manager(ns, "faucet.faucet", None);
        cmd.env("FAUCET_CONFIG", config)
            .env("FAUCET_LOG", &*log)
            .env("FAUCET_EXCEPTION_LOG", &*exceptions)
            .env("FAUCET_PROMETHEUS_ADDR", "127.0.0.1");
        OsKen::start(cmd, ns, log)
    }

    /// An os-ken application (a Python file); its output is the log. With `tls`, see
    /// [`manager`].
    pub fn app(ns: &str, app: &str, tag: &str, tls: Option<[&str; 3]>) -> OsKen {
        let log = ScratchFile::new(&format!("{tag}-osken.log"));
        let cmd = manager(ns, app, tls);
        OsKen::start(cmd, ns, log)
    }

    fn start(mut cmd: Command, ns: &str, log: ScratchFile) -> OsKen {
        let out = std::fs::File::create(&*log).unwrap();
        let err = out.try_clone().unwrap();
        let child = cmd.stdout(out).stderr(err).spawn().unwrap();
        let osken = OsKen {
            child: Some(child),
            ns: ns.to_string(),
            log,
        };
        osken.wait_listening();
        osken
    }

    fn wait_listening(&self) {
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            let ss = sh(&[
                "ip",
                "netns",
                "exec",
                &self.ns,
                "ss",
                "-Htln",
                "sport = :6653",
            ]);
            if !ss.stdout.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("os-ken never listened: {}", self.text());
    }

    pub fn text(&self) -> String {
        std::fs::read_to_string(&*self.log).unwrap_or_default()
    }

    /// Waits until the log says `needle` at least `count` times.
    pub fn wait_for(&self, needle: &str, count: usize) {
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if self.text().matches(needle).count() >= count {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("never {count} x '{needle}' in the log: {}", self.text());
    }

    /// SIGHUP: faucet reads its configuration again.
    pub fn hup(&self) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        must(&["kill", "-HUP", &pid]);
    }

    /// Kills it (as a crash would) and waits.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OsKen {
    fn drop(&mut self) {
        self.kill();
    }
}

/// tshark recording the OpenFlow connection (TCP port 6653 on the loopback of `ns`).
pub struct OpenFlowCapture {
    child: Child,
    pub file: ScratchFile,
}

impl OpenFlowCapture {
    pub fn start(ns: &str, tag: &str) -> OpenFlowCapture {
        let file = ScratchFile::new(&format!("{tag}-openflow.pcapng"));
        let mut child = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "tshark",
                "-i",
                "lo",
                "-f",
                "tcp port 6653",
            ])
            .args(["-w", &file, "-q"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // tshark says "Capturing on ..." once the filter is in place.
        let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while std::io::BufRead::read_line(&mut err, &mut line).unwrap_or(0) > 0 {
            if line.contains("Capturing on") {
                break;
            }
            line.clear();
        }
        std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
        OpenFlowCapture { child, file }
    }

    /// Stops (SIGINT, so the file is complete).
    pub fn stop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            must(&["kill", "-INT", &self.child.id().to_string()]);
        }
        let _ = self.child.wait();
    }
}

impl Drop for OpenFlowCapture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
