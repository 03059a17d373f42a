//! `wirespeed ctl`: ovs-ofctl's commands against a running `wirespeed switch`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Args;
use wirespeed_switch::{DEFAULT_CTL, JSON, JSON_COMMANDS, Request, STRICT, STRICT_COMMANDS};

/// Options of `wirespeed ctl`.
#[derive(Debug, Args)]
#[command(
    after_help = "Commands: add-flow FLOW, add-flows FILE (- for standard input), replace-flows \
FILE (the tables then hold exactly the file's flows: those already there as written keep their \
counters, others are replaced, added or deleted, all in one change), diff-flows FILE (-RULE for \
each flow only the switch has, or holds otherwise; +RULE for each of the file's it lacks; exit \
status 2 when they differ, as ovs-ofctl's), mod-flows FLOW, \
del-flows [MATCH], dump-flows [MATCH], dump-tables (each table's rules, and the packets that \
looked it up and found a rule there; tables with neither are left out), dump-ports [PORT], \
show, dump-cache, fdb-show (the \
learning table, as ovs-appctl fdb/show prints it), metrics (what --metrics serves, in \
Prometheus' text format), add-meter METER, mod-meter METER, del-meter [meter=ID] (deletes the \
flows that use it too, as OpenFlow says), dump-meters, meter-stats, add-group GROUP, add-groups \
FILE (one a line, all or none; - for standard input), mod-group \
GROUP, del-groups [group_id=ID] (deletes the flows that send to it too), dump-groups \
[group_id=ID], dump-group-stats [group_id=ID]\n\nA group is ovs-ofctl's \
group_id=ID,type=TYPE,bucket=...: type all (every bucket), select (one bucket a flow, by a \
hash of it, weighted), indirect (its one bucket) or fast_failover, ff (the first bucket whose \
watch_port is up); each bucket= holds weight:N, watch_port:PORT and its actions.\n\nAs in ovs-ofctl, mod-flows, del-flows and \
dump-flows select the rules at least as specific as MATCH (with --strict: exactly MATCH, at its \
priority, 32768 if not given; ovs-ofctl's dump-flows has no strict form), in every table unless \
table= is given; cookie=VALUE/MASK selects by cookie (/-1: all bits), and mod-flows' \
cookie=VALUE sets a new one. priority= selects only with --strict.\n\nExamples:\n  \
wirespeed ctl add-flow 'cookie=0x7,priority=100,icmp,actions=drop'\n  wirespeed ctl del-flows icmp\n  \
wirespeed ctl del-flows cookie=0x7/-1\n  wirespeed ctl --strict del-flows priority=100,icmp\n  \
wirespeed ctl dump-flows\n  wirespeed ctl dump-flows table=1\n  \
wirespeed ctl --json dump-flows icmp | jq '.[].n_packets'\n  \
wirespeed ctl diff-flows switch.flows || wirespeed ctl replace-flows switch.flows\n  \
wirespeed ctl add-meter meter=1,pktps,burst,stats,bands=type=drop,rate=1000,burst_size=100\n  \
wirespeed ctl add-flow 'in_port=1,actions=meter:1,output:2'\n  wirespeed ctl meter-stats\n  \
wirespeed ctl add-group 'group_id=1,type=select,bucket=output:2,bucket=weight:2,output:3'\n  \
wirespeed ctl add-flow 'in_port=1,actions=group:1'\n  wirespeed ctl dump-group-stats"
)]
pub struct CtlArgs {
    /// The switch's control socket.
    #[arg(long, default_value = DEFAULT_CTL)]
    pub ctl: PathBuf,
    /// mod-flows, del-flows, dump-flows: select only rules with exactly this match and
    /// priority.
    #[arg(long)]
    pub strict: bool,
    /// dump-flows, dump-tables, dump-ports, dump-group-stats, meter-stats: answer in JSON,
    /// for scripts (dump-ports: the object `switch --json` prints at exit, less its OpenFlow
    /// and IPFIX parts); a failure is {"error": "..."} on standard output too, exit 1.
    #[arg(long)]
    pub json: bool,
    /// How long to wait for the switch's answer, in seconds: a switch stopped or stuck is
    /// said so, and ctl exits 1.
    #[arg(long, default_value_t = 60.0, value_name = "SECONDS")]
    pub timeout: f64,
    /// The command (see below).
    pub command: String,
    /// Its argument: a flow, a match, a meter, a group, or (add-flows, replace-flows,
    /// diff-flows, add-groups) a file.
    pub arg: Option<String>,
}

/// Runs the command; with `--json`, a failure is a JSON object on standard output too
/// (`{"error": "..."}`), so that a script's `| jq` sees why, not an empty input.
pub fn run(args: CtlArgs) -> anyhow::Result<()> {
    let json = args.json;
    let ran = run_command(args);
    crate::run::error_text::say_json_error(json, &ran);
    ran
}

fn run_command(args: CtlArgs) -> anyhow::Result<()> {
    // The flags first: a refused one must not wait for a file on standard input.
    if args.strict && !STRICT_COMMANDS.contains(&args.command.as_str()) {
        bail!(
            "--strict is for {} only, not {}",
            STRICT_COMMANDS.join(", "),
            args.command
        );
    }
    if args.json && !JSON_COMMANDS.contains(&args.command.as_str()) {
        bail!(
            "--json is for {} only, not {}",
            JSON_COMMANDS.join(", "),
            args.command
        );
    }
    crate::run::meter::check_seconds("--timeout", Some(args.timeout))?;
    let arg = match (args.command.as_str(), args.arg) {
        ("add-flow" | "mod-flows", None) => bail!(
            "{} needs a flow, e.g. 'in_port=1,actions=output:2'",
            args.command
        ),
        ("add-flows" | "replace-flows" | "diff-flows", None) => {
            bail!("{} needs a file of flows, one a line", args.command)
        }
        ("add-groups", None) => bail!("add-groups needs a file of groups, one a line"),
        ("add-group" | "mod-group", None) => bail!(
            "{} needs a group, e.g. 'group_id=1,type=all,bucket=output:2,bucket=output:3'",
            args.command
        ),
        ("add-meter" | "mod-meter", None) => bail!(
            "{} needs a meter, e.g. 'meter=1,pktps,bands=type=drop,rate=1000'",
            args.command
        ),
        ("add-flows" | "replace-flows" | "diff-flows" | "add-groups", Some(path))
            if path == "-" =>
        {
            std::io::read_to_string(std::io::stdin())
                .with_context(|| format!("{}: cannot read standard input", args.command))?
        }
        ("add-flows" | "replace-flows" | "diff-flows" | "add-groups", Some(path)) => {
            std::fs::read_to_string(&path)
                .with_context(|| format!("{}: cannot read {path}", args.command))?
        }
        (_, arg) => arg.unwrap_or_default(),
    };
    let mut request = Request {
        command: args.command,
        args: vec![arg],
    };
    if args.strict {
        request.args.push(STRICT.to_string());
    }
    if args.json {
        request.args.push(JSON.to_string());
    }
    let timeout = std::time::Duration::from_secs_f64(args.timeout);
    let answer = wirespeed_switch::bridge::control::request_within(&args.ctl, &request, timeout)?;
    if !answer.ok {
        bail!("{}", answer.output);
    }
    if !answer.output.is_empty() {
        // `ctl dump-flows | head` closes the pipe early: not an error.
        let mut out = std::io::stdout().lock();
        match writeln!(out, "{}", answer.output).and_then(|()| out.flush()) {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(e).context("write the answer");
            }
            _ => {}
        }
        // As diff(1) and ovs-ofctl diff-flows: 2 says the two differ.
        if request.command == "diff-flows" {
            std::process::exit(EXIT_DIFFERENT);
        }
    }
    Ok(())
}

/// diff-flows' exit status when the switch's flows and the file's differ.
const EXIT_DIFFERENT: i32 = 2;
