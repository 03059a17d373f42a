//! The full-screen view: a heading, the tables (ports, threads, caches, busiest flows), a
//! line of keys. Redrawn on each reading, each key, and each resize.

use std::sync::atomic::Ordering;
use std::sync::mpsc::TryRecvError;
use std::time::Duration;

use anyhow::{Context, bail};
use ratatui::Frame;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Padding, Paragraph, Row, Table};

use super::Watch;
use super::model::{Update, rates};
use super::scrape::Scrape;
use super::tables::{Detail, FLOWS, TextTable, tables};
use super::terminal::TakenTerminal;

/// How long the loop waits for a key before it looks for a reading and the stop flag.
const KEY_WAIT: Duration = Duration::from_millis(100);

/// What the screen shows.
struct Screen {
    source: String,
    detail: Detail,
    /// The last two readings: rates come from them, again when a key changes the detail.
    before: Scrape,
    now: Scrape,
    update: Update,
    updates: u64,
    /// Why the last reading failed, until one works again.
    error: Option<String>,
}

impl Screen {
    fn recompute(&mut self) {
        self.update = rates(&self.before, &self.now, self.detail.queues);
    }

    /// q, Esc and Ctrl-C quit; d and s turn drops by reason and queues on and off.
    fn on_key(&mut self, key: KeyEvent) -> Key {
        let ctrl_c =
            key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Key::Quit,
            _ if ctrl_c => return Key::Quit,
            KeyCode::Char('d') => self.detail.drop_reasons ^= true,
            KeyCode::Char('s') => {
                self.detail.queues ^= true;
                self.recompute();
            }
            _ => {}
        }
        Key::Stay
    }
}

/// What a key asks of the loop.
#[derive(PartialEq)]
enum Key {
    Quit,
    Stay,
}

pub fn run(watch: Watch, first: Scrape) -> anyhow::Result<()> {
    let mut taken = TakenTerminal::take()?;
    exit_when_the_terminal_hangs_up();
    let terminal = &mut taken.terminal;
    let mut screen = Screen {
        source: watch.source.clone(),
        detail: watch.detail,
        // Until the second reading, every rate is 0 over the ports and threads there are.
        update: rates(&first, &first, watch.detail.queues),
        before: first.clone(),
        now: first,
        updates: 0,
        error: None,
    };
    let mut dirty = true;
    while !watch.stop.load(Ordering::Relaxed) {
        if dirty {
            terminal
                .draw(|frame| draw(frame, &screen))
                .context("draw the screen")?;
            dirty = false;
        }
        if event::poll(KEY_WAIT).context("read the keyboard")? {
            match event::read().context("read the keyboard")? {
                Event::Key(key) if key.kind != KeyEventKind::Release => {
                    if screen.on_key(key) == Key::Quit {
                        return Ok(());
                    }
                    dirty = true;
                }
                Event::Resize(..) => {
                    // Everything repainted at the new size: nothing of the old frame stays.
                    terminal.autoresize().context("resize")?;
                    terminal.clear().context("clear the screen")?;
                    dirty = true;
                }
                _ => {}
            }
        }
        match watch.readings.try_recv() {
            Ok(Ok(now)) => {
                screen.before = std::mem::replace(&mut screen.now, now);
                screen.recompute();
                screen.error = None;
                screen.updates += 1;
                dirty = true;
                if watch.count.is_some_and(|count| screen.updates >= count) {
                    terminal.draw(|frame| draw(frame, &screen))?;
                    return Ok(());
                }
            }
            Ok(Err(e)) => {
                screen.error = Some(e);
                dirty = true;
            }
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => bail!("the scrape thread ended"),
        }
    }
    Ok(())
}

/// Ends the process when the terminal hangs up (its window closed, its tmux killed):
/// crossterm's reader would spin on end-of-file inside `event::poll` and never return to
/// the loop, and there is no screen left to give back. A thread waits in poll() on standard
/// input for the hang-up alone (poll reports it whatever events are asked for).
fn exit_when_the_terminal_hangs_up() {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::io::IsTerminal;
    use std::os::fd::AsFd;
    if !std::io::stdin().is_terminal() {
        return;
    }
    let _ = std::thread::Builder::new()
        .name("top-hangup".to_string())
        .spawn(|| {
            let stdin = std::io::stdin();
            loop {
                let mut fds = [PollFd::new(stdin.as_fd(), PollFlags::empty())];
                if poll(&mut fds, PollTimeout::NONE).is_err() {
                    continue;
                }
                let gone = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
                if fds[0].revents().is_some_and(|r| r.intersects(gone)) {
                    std::process::exit(0);
                }
            }
        });
}

fn draw(frame: &mut Frame<'_>, screen: &Screen) {
    let tables = tables(&screen.update, screen.detail);
    let mut constraints = vec![Constraint::Length(1)];
    for table in &tables {
        // Borders, the header, the rows (or the word for none), the footer.
        let height = 3 + table.rows.len().max(1) + usize::from(table.footer.is_some());
        // The busiest flows take what is left; the tables above them what they need.
        constraints.push(if table.title == FLOWS {
            Constraint::Fill(1)
        } else {
            Constraint::Length(height as u16)
        });
    }
    // Room left over with no flows table goes under the tables, not into one of them.
    let flows = tables.iter().any(|t| t.title == FLOWS);
    constraints.push(Constraint::Fill(u16::from(!flows)));
    constraints.push(Constraint::Length(1));
    let areas = Layout::vertical(constraints).split(frame.area());
    frame.render_widget(Paragraph::new(heading(screen)), areas[0]);
    for (table, area) in tables.iter().zip(&areas[1..]) {
        draw_table(frame, table, *area);
    }
    frame.render_widget(Paragraph::new(status(screen)), areas[areas.len() - 1]);
}

fn heading(screen: &Screen) -> Line<'static> {
    let mut spans = vec![
        Span::styled("wirespeed top", Style::new().add_modifier(Modifier::BOLD)),
        Span::raw(format!("  {}", screen.source)),
    ];
    if screen.updates == 0 {
        spans.push(Span::raw("  (first reading: rates after one interval)"));
    } else {
        spans.push(Span::raw(format!(
            "  over {:.2} s",
            screen.update.interval_seconds
        )));
    }
    if let Some(note) = &screen.now.no_metrics {
        spans.push(Span::styled(format!("  ({note})"), Color::Yellow));
    }
    Line::from(spans)
}

fn status(screen: &Screen) -> Line<'static> {
    let on_off = |on: bool| if on { "on" } else { "off" };
    let mut spans = vec![
        Span::raw(format!(
            "q quit  d drops by reason ({})  s queues ({})",
            on_off(screen.detail.drop_reasons),
            on_off(screen.detail.queues)
        ))
        .dark_gray(),
    ];
    if let Some(e) = &screen.error {
        spans.push(Span::styled(format!("  {e}"), Color::Red));
    }
    Line::from(spans)
}

fn draw_table(frame: &mut Frame<'_>, table: &TextTable, area: Rect) {
    let block = Block::bordered()
        .title(format!(" {} ", table.title))
        .padding(Padding::horizontal(1));
    let inner = block.inner(area);
    frame.render_widget(block, area);
    let [rows_area, footer_area] = Layout::vertical([
        Constraint::Fill(1),
        Constraint::Length(u16::from(table.footer.is_some())),
    ])
    .areas(inner);
    let cell = |text: &str, numeric: bool| {
        let line = Line::from(text.to_string());
        Cell::from(if numeric { line.right_aligned() } else { line })
    };
    let header = Row::new(
        table
            .header
            .iter()
            .zip(&table.numeric)
            .map(|(h, &numeric)| cell(h, numeric)),
    )
    .style(Style::new().add_modifier(Modifier::BOLD));
    let rows = table.rows.iter().map(|row| {
        Row::new(
            row.iter()
                .zip(&table.numeric)
                .map(|(text, &numeric)| cell(text, numeric)),
        )
    });
    let widths = column_widths(table);
    frame.render_widget(
        Table::new(rows, widths).header(header).column_spacing(2),
        rows_area,
    );
    if table.rows.is_empty() {
        let below_header = Rect {
            y: rows_area.y.saturating_add(1),
            height: rows_area.height.saturating_sub(1),
            ..rows_area
        };
        frame.render_widget(Paragraph::new(table.empty).dark_gray(), below_header);
    }
    if let Some(footer) = &table.footer {
        frame.render_widget(Paragraph::new(footer.as_str()), footer_area);
    }
}

/// Each column as wide as its widest cell; a last text column (a rule) takes the rest.
fn column_widths(table: &TextTable) -> Vec<Constraint> {
    let columns = table.header.len();
    (0..columns)
        .map(|i| {
            if i + 1 == columns && !table.numeric[i] {
                return Constraint::Fill(1);
            }
            let widest = table
                .rows
                .iter()
                .filter_map(|row| row.get(i))
                .map(|cell| cell.chars().count())
                .chain([table.header[i].len()])
                .max()
                .unwrap_or(0);
            Constraint::Length(widest as u16)
        })
        .collect()
}
