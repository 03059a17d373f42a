//! An update as tables of text: the same cells for the terminal view and for plain lines.

use std::collections::BTreeMap;

use super::model::{PortRates, SwitchRates, Update};

/// One table: a title, column names, rows of cells, a line under it.
#[derive(Debug, Clone, PartialEq)]
pub struct TextTable {
    pub title: &'static str,
    pub header: Vec<&'static str>,
    /// Which columns hold numbers (aligned right).
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
    /// Said when there are no rows.
    pub empty: &'static str,
    /// A line under the rows (the switch's totals).
    pub footer: Option<String>,
}

/// The busiest flows' table title.
pub const FLOWS: &str = "busiest flows";

/// What to show of an update.
#[derive(Debug, Clone, Copy, Default)]
pub struct Detail {
    /// Drops by reason, a row each under their port, rather than summed.
    pub drop_reasons: bool,
    /// A row per queue.
    pub queues: bool,
}

/// The tables of `update`: ports, threads, the switch's caches, the busiest rules.
pub fn tables(update: &Update, detail: Detail) -> Vec<TextTable> {
    let mut tables = vec![ports(&update.ports, detail)];
    if !update.threads.is_empty() {
        tables.push(threads(update));
    }
    if let Some(switch) = &update.switch {
        tables.push(caches(switch, detail));
    }
    if let Some(flows) = &update.flows {
        tables.push(TextTable {
            title: FLOWS,
            header: vec!["pkt/s", "bit/s", "rule"],
            numeric: vec![true, true, false],
            rows: flows
                .iter()
                .map(|f| vec![si(f.packets), si(f.bits), f.rule.clone()])
                .collect(),
            empty: "(no rule counted a packet)",
            footer: None,
        });
    }
    tables
}

fn ports(ports: &[PortRates], detail: Detail) -> TextTable {
    let mut header = vec!["port", "device"];
    if detail.queues {
        header.push("queue");
    }
    header.extend(["rx pkt/s", "rx bit/s", "tx pkt/s", "tx bit/s", "drops/s"]);
    let text_columns = header.len() - 5;
    let mut rows = Vec::new();
    for p in ports {
        let mut row = vec![p.port.clone().unwrap_or_default(), p.device.clone()];
        if detail.queues {
            row.push(p.queue.clone().unwrap_or_default());
        }
        row.extend(
            [
                p.receive_packets,
                p.receive_bits,
                p.transmit_packets,
                p.transmit_bits,
                p.drops,
            ]
            .map(si),
        );
        rows.push(row);
        if detail.drop_reasons {
            // Tools export every reason, most of them at 0: the ones that dropped.
            for (reason, rate) in p.drops_by_reason.iter().filter(|(_, r)| **r > 0.0) {
                let mut row = vec![String::new(); header.len()];
                row[1] = format!("  {reason}");
                row[header.len() - 1] = si(*rate);
                rows.push(row);
            }
        }
    }
    TextTable {
        title: "ports",
        numeric: (0..header.len()).map(|i| i >= text_columns).collect(),
        header,
        rows,
        empty: "(no port reported)",
        footer: None,
    }
}

fn threads(update: &Update) -> TextTable {
    TextTable {
        title: "poll-mode threads",
        header: vec!["thread", "cpu", "busy", "pkt/s", "bursts/s", "pkt/burst"],
        numeric: vec![false, true, true, true, true, true],
        rows: update
            .threads
            .iter()
            .map(|t| {
                vec![
                    t.thread.clone(),
                    t.cpu.clone().unwrap_or_else(|| "-".into()),
                    t.busy_share.map_or("-".into(), percent),
                    si(t.packets),
                    si(t.bursts),
                    t.packets_per_burst
                        .map_or("-".into(), |p| format!("{p:.1}")),
                ]
            })
            .collect(),
        empty: "",
        footer: None,
    }
}

fn caches(switch: &SwitchRates, detail: Detail) -> TextTable {
    let gauge = |g: Option<f64>| g.map_or("-".to_string(), |v| format!("{v:.0}"));
    let rules = switch.rules.values().fold(0.0, |sum, n| sum + n);
    let mut footer = format!(
        "upcalls/s {}  megaflows {}  rules {:.0}{}",
        si(switch.upcalls),
        gauge(switch.megaflows),
        rules,
        per_table(&switch.rules),
    );
    // The XDP fast path only where the switch has one (--offload).
    if switch.fast_path_flows.is_some() || switch.fast_path_hits > 0.0 {
        footer.push_str(&format!(
            "  fast path hits/s {}, flows {}",
            si(switch.fast_path_hits),
            gauge(switch.fast_path_flows)
        ));
    }
    footer.push_str(&format!("  drops/s {}", si(switch.drops)));
    let reasons: Vec<String> = switch
        .drops_by_reason
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .map(|(r, v)| format!("{r} {}", si(*v)))
        .collect();
    if detail.drop_reasons && !reasons.is_empty() {
        footer.push_str(&format!(" ({})", reasons.join(", ")));
    }
    TextTable {
        title: "switch caches",
        header: vec!["cache", "hit rate", "hits/s", "misses/s"],
        numeric: vec![false, true, true, true],
        rows: switch
            .caches
            .iter()
            .map(|c| {
                vec![
                    c.cache.replace('_', "-"),
                    c.hit_rate.map_or("-".into(), percent),
                    si(c.hits),
                    si(c.misses),
                ]
            })
            .collect(),
        empty: "(no cache reported)",
        footer: Some(footer),
    }
}

/// ` (table 0: 3, 1: 1)` when there is more than one table.
fn per_table(rules: &BTreeMap<String, f64>) -> String {
    if rules.len() < 2 {
        return String::new();
    }
    let tables: Vec<String> = rules.iter().map(|(t, n)| format!("{t}: {n:.0}")).collect();
    format!(" (table {})", tables.join(", "))
}

fn percent(share: f64) -> String {
    format!("{:.1}%", 100.0 * share)
}

/// A rate with an SI prefix and three significant digits: `0`, `0.5`, `999`, `1.23k`,
/// `45.6M`, `789G`.
pub fn si(value: f64) -> String {
    if !value.is_finite() {
        return format!("{value}");
    }
    // Rounded as printed: 999.7 is 1.00k.
    if value.abs() < 999.5 {
        return match value {
            0.0 => "0".to_string(),
            v if v.abs() < 10.0 && v.fract() != 0.0 => format!("{v:.1}"),
            v => format!("{v:.0}"),
        };
    }
    let mut scaled = value;
    for prefix in ["k", "M", "G", "T", "P"] {
        scaled /= 1000.0;
        // Rounded as printed: 999.96k is 1.00M.
        if scaled.abs() < 999.5 || prefix == "P" {
            let digits = match scaled.abs() {
                s if s < 9.995 => 2,
                s if s < 99.95 => 1,
                _ => 0,
            };
            return format!("{scaled:.digits$}{prefix}");
        }
    }
    unreachable!("the loop returns at P")
}

/// The table as lines of text, columns padded to their widest cell (plain output).
pub fn to_lines(table: &TextTable) -> Vec<String> {
    let mut widths: Vec<usize> = table.header.iter().map(|h| h.chars().count()).collect();
    for row in &table.rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .zip(&table.numeric)
            .enumerate()
            .map(|(i, ((cell, &w), &numeric))| {
                if numeric {
                    format!("{cell:>w$}")
                } else if i + 1 == cells.len() {
                    // The last column (a rule) is not padded out.
                    cell.to_string()
                } else {
                    format!("{cell:<w$}")
                }
            })
            .collect();
        format!("  {}", padded.join("  ")).trim_end().to_string()
    };
    let mut lines = vec![table.title.to_string()];
    lines.push(line(table.header.clone()));
    for row in &table.rows {
        lines.push(line(row.iter().map(String::as_str).collect()));
    }
    if table.rows.is_empty() && !table.empty.is_empty() {
        lines.push(format!("  {}", table.empty));
    }
    if let Some(footer) = &table.footer {
        lines.push(format!("  {footer}"));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn si_prefixes() {
        let cases = [
            (0.0, "0"),
            (0.5, "0.5"),
            (3.0, "3"),
            (999.0, "999"),
            (999.7, "1.00k"),
            (1234.0, "1.23k"),
            (12345.0, "12.3k"),
            (123456.0, "123k"),
            (999_960.0, "1.00M"),
            (14_880_952.0, "14.9M"),
            (10e9, "10.0G"),
        ];
        for (value, text) in cases {
            assert_eq!(si(value), text, "{value}");
        }
    }

    #[test]
    fn plain_lines_align_columns() {
        let table = TextTable {
            title: "ports",
            header: vec!["port", "device", "rx pkt/s"],
            numeric: vec![false, false, true],
            rows: vec![
                vec!["1".into(), "veth0".into(), "2.00k".into()],
                vec!["2".into(), "a-long-name".into(), "0".into()],
            ],
            empty: "",
            footer: Some("total".into()),
        };
        assert_eq!(
            to_lines(&table),
            vec![
                "ports",
                "  port  device       rx pkt/s",
                "  1     veth0           2.00k",
                "  2     a-long-name         0",
                "  total",
            ]
        );
    }

    #[test]
    fn drops_by_reason_under_their_port_only_those_that_dropped() {
        use crate::top::model::PortRates;
        let port = PortRates {
            port: Some("1".into()),
            device: "veth0".into(),
            queue: None,
            receive_packets: 1500.0,
            receive_bits: 768_000.0,
            transmit_packets: 0.0,
            transmit_bits: 0.0,
            drops: 12.0,
            drops_by_reason: BTreeMap::from([
                ("fill_ring_empty".to_string(), 12.0),
                ("link_down".to_string(), 0.0),
            ]),
        };
        let update = Update {
            interval_seconds: 1.0,
            ports: vec![port],
            threads: vec![],
            switch: None,
            flows: None,
        };
        let summed = tables(&update, Detail::default());
        assert_eq!(summed.len(), 1);
        assert_eq!(
            to_lines(&summed[0])[1..],
            [
                "  port  device  rx pkt/s  rx bit/s  tx pkt/s  tx bit/s  drops/s",
                "  1     veth0      1.50k      768k         0         0       12",
            ]
        );
        let detail = Detail {
            drop_reasons: true,
            queues: false,
        };
        assert_eq!(
            to_lines(&tables(&update, detail)[0])[2..],
            [
                "  1     veth0                 1.50k      768k         0         0       12",
                "          fill_ring_empty                                               12",
            ]
        );
    }
}
