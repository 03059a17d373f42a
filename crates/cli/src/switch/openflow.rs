//! `--openflow`, `--controller`, `--datapath-id`, `--fail-mode` and the TLS files: the
//! switch's OpenFlow 1.3 side (see `wirespeed_switch::openflow`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::Sender;

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};

use wirespeed_switch::openflow::agent::Agent;
use wirespeed_switch::openflow::connmgr::{self, Target, Transport};
use wirespeed_switch::openflow::session::{OpenFlowEvents, PacketInOpenFlow, Sessions};
use wirespeed_switch::openflow::stats::port_descs;
use wirespeed_switch::openflow::tls::{TlsConfig, TlsFiles};
use wirespeed_switch::{Bridge, RuleSelector, Work};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FailMode {
    /// Switch as a learning switch while no --controller is connected.
    Standalone,
    /// Forward only by the installed flows, connected or not.
    Secure,
}

/// OpenFlow options of `wirespeed switch`.
#[derive(Debug, Args)]
pub struct OpenFlowArgs {
    /// Listen for OpenFlow 1.3 clients (ovs-ofctl, a controller that connects in):
    /// ptcp:[PORT][:ADDR], 6653 on 127.0.0.1 unless given, or pssl:... for TLS. May be
    /// repeated.
    #[arg(long = "openflow", value_name = "ptcp:[PORT][:ADDR]")]
    pub listen: Vec<String>,
    /// Connect to an OpenFlow 1.3 controller (faucet, os-ken), tcp:HOST[:PORT] (6653) or
    /// ssl:HOST[:PORT], again and again while it is away (1 s, doubling to 8 s). May be
    /// repeated.
    #[arg(long = "controller", value_name = "tcp:HOST[:PORT]")]
    pub controllers: Vec<String>,
    /// For ssl: and pssl:, the switch's private key (PEM), as ovs-vswitchd's.
    #[arg(long, value_name = "FILE")]
    pub private_key: Option<PathBuf>,
    /// For ssl: and pssl:, the switch's certificate (PEM; a chain may follow it).
    #[arg(long, value_name = "FILE")]
    pub certificate: Option<PathBuf>,
    /// For ssl: and pssl:, the CA certificate(s) a peer's certificate must chain to (PEM).
    /// The peer must show one: TLS here is mutual, as Open vSwitch's.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// The datapath id controllers see, in hexadecimal (default: the first port's MAC).
    #[arg(long, value_name = "HEX")]
    pub datapath_id: Option<String>,
    /// With --controller: what happens while none is connected (Open vSwitch's meaning).
    #[arg(long, value_enum, default_value = "standalone")]
    pub fail_mode: FailMode,
}

impl FailMode {
    /// As `--fail-mode` spells it.
    pub fn name(self) -> &'static str {
        match self {
            FailMode::Standalone => "standalone",
            FailMode::Secure => "secure",
        }
    }
}

impl OpenFlowArgs {
    pub fn enabled(&self) -> bool {
        !self.listen.is_empty() || !self.controllers.is_empty()
    }

    /// Every target, checked (before any port opens).
    pub fn targets(&self) -> anyhow::Result<Vec<Target>> {
        let mut targets = Vec::new();
        for text in &self.listen {
            let target: Target = text.parse().context("--openflow")?;
            if !matches!(target, Target::Listen(..)) {
                bail!(
                    "--openflow {text}: listens only (ptcp:, pssl:); dial a controller with --controller"
                );
            }
            targets.push(target);
        }
        for text in &self.controllers {
            let target: Target = text.parse().context("--controller")?;
            if !matches!(target, Target::Dial(..)) {
                bail!("--controller {text}: dials only (tcp:, ssl:); listen with --openflow");
            }
            targets.push(target);
        }
        self.datapath_id()?;
        self.tls(&targets)?;
        // What only an OpenFlow side uses is refused without one, not ignored.
        if targets.is_empty() {
            if self.fail_mode == FailMode::Secure {
                bail!(
                    "--fail-mode secure: says what the switch does while no --controller is \
                     connected; without --controller or --openflow it forwards as a learning \
                     switch (give flows with --flows, or a controller)"
                );
            }
            if self.datapath_id.is_some() {
                bail!("--datapath-id: is what controllers see; give --openflow or --controller");
            }
        }
        Ok(targets)
    }

    /// The TLS set-up when a target wants it, the files read and checked.
    pub fn tls(&self, targets: &[Target]) -> anyhow::Result<Option<TlsConfig>> {
        let Some(target) = targets.iter().find(|t| t.transport() == Transport::Tls) else {
            let given = [
                ("--private-key", self.private_key.is_some()),
                ("--certificate", self.certificate.is_some()),
                ("--ca-cert", self.ca_cert.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, given)| *given) {
                bail!("{flag}: is for ssl: and pssl: targets, and none is given");
            }
            return Ok(None);
        };
        let (Some(private_key), Some(certificate), Some(ca_cert)) =
            (&self.private_key, &self.certificate, &self.ca_cert)
        else {
            bail!("{target}: TLS needs --private-key, --certificate and --ca-cert");
        };
        let files = TlsFiles {
            private_key: private_key.clone(),
            certificate: certificate.clone(),
            ca_cert: ca_cert.clone(),
        };
        Ok(Some(TlsConfig::load(&files).context("TLS")?))
    }

    fn datapath_id(&self) -> anyhow::Result<Option<u64>> {
        let Some(text) = &self.datapath_id else {
            return Ok(None);
        };
        let digits = text.trim_start_matches("0x");
        match u64::from_str_radix(digits, 16) {
            Ok(id) if !digits.is_empty() && digits.len() <= 16 => Ok(Some(id)),
            _ => bail!("--datapath-id {text}: expected up to 16 hexadecimal digits"),
        }
    }

    /// Whether the bridge starts with Open vSwitch's `priority=0,actions=normal`: only a
    /// standalone bridge without controllers to dial has it.
    pub fn keeps_default_rule(&self) -> bool {
        self.controllers.is_empty() && self.fail_mode == FailMode::Standalone
    }
}

/// The sessions every connection will share; made before the bridge, whose controller
/// sends their PACKET_INs.
pub fn sessions() -> (Arc<Sessions>, Box<dyn wirespeed_switch::PacketInSink>) {
    let sessions = Sessions::new(Vec::new());
    let controller = Box::new(PacketInOpenFlow {
        sessions: sessions.clone(),
    });
    (sessions, controller)
}

/// The OpenFlow side's counts for `--json`: connections open at the end, PACKET_INs handed
/// to them, and messages dropped because a connection's queue was full.
pub fn summary(sessions: &Sessions) -> serde_json::Value {
    use std::sync::atomic::Ordering::Relaxed;
    serde_json::json!({
        "connections": sessions.count(),
        "packet_ins": sessions.packet_ins.load(Relaxed),
        "dropped": sessions.dropped.load(Relaxed),
    })
}

/// The OpenFlow side's figures for a scrape: atomics only (the sessions' list is locked by
/// poll-mode threads sending PACKET_INs).
pub fn metrics(e: &mut wirespeed_metrics::Exposition, sessions: &Sessions) {
    use std::sync::atomic::Ordering::Relaxed;
    e.gauge(
        "wirespeed_switch_openflow_connections",
        "OpenFlow connections open (clients of --openflow and --controller).",
        &[],
        sessions.open_now() as f64,
    );
    e.counter(
        "wirespeed_switch_openflow_packet_ins_total",
        "PACKET_IN messages for the controllers, sent or dropped.",
        &[],
        sessions.packet_ins.load(Relaxed),
    );
    e.counter(
        "wirespeed_switch_controller_dropped_messages_total",
        "Messages to controllers (PACKET_INs among them) dropped because a connection's \
         queue was full.",
        &[],
        sessions.dropped.load(Relaxed),
    );
}

/// Starts the OpenFlow side on an open bridge: the default rule as the fail mode wants it,
/// the ports as controllers see them, the listeners and dialers. The datapath id it uses.
pub fn start(
    args: &OpenFlowArgs,
    targets: &[Target],
    bridge: &mut Bridge,
    sessions: Arc<Sessions>,
    work: Sender<Work>,
) -> anyhow::Result<u64> {
    if !args.keeps_default_rule() {
        bridge.edit(|dp| dp.tables.delete(&RuleSelector::default()));
    }
    let ports = port_descs(bridge);
    let from_mac = ports
        .iter()
        .map(|p| p.hw_addr)
        .find(|m| m != &[0; 6])
        .map_or(0, |m| m.iter().fold(0u64, |id, &b| id << 8 | u64::from(b)));
    let datapath_id = args.datapath_id()?.unwrap_or(from_mac);
    bridge.set_datapath_id(datapath_id);
    *sessions.ports.lock().unwrap_or_else(|e| e.into_inner()) = ports;
    bridge.set_events(Box::new(OpenFlowEvents {
        sessions: sessions.clone(),
    }));
    let agent = Arc::new(Agent::new(sessions, datapath_id));
    let standalone = args.fail_mode == FailMode::Standalone;
    let tls = args.tls(targets)?;
    connmgr::start(targets, tls, agent, work, standalone).context("OpenFlow")?;
    Ok(datapath_id)
}
