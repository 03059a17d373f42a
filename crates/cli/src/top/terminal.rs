//! Taking the terminal for the view and giving it back exactly as it was: the alternate screen
//! left (what was on the screen before comes back), raw mode off, the cursor shown. Given back
//! on every path: `q`, an error (the guard's Drop), a panic (the hook, before the message).

use std::io::{Stdout, stdout};
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};

/// Whether the terminal is taken: restoring twice (the panic hook, then the guard's Drop
/// while unwinding) would leave the alternate screen twice.
static TAKEN: AtomicBool = AtomicBool::new(false);

/// The terminal, taken; given back when dropped.
pub struct TakenTerminal {
    pub terminal: Terminal<CrosstermBackend<Stdout>>,
}

impl TakenTerminal {
    pub fn take() -> anyhow::Result<TakenTerminal> {
        install_panic_hook();
        enable_raw_mode().context("put the terminal in raw mode")?;
        TAKEN.store(true, Ordering::SeqCst);
        // From here on, an error gives the terminal back through `give_back`.
        let terminal = (|| {
            execute!(stdout(), EnterAlternateScreen, Hide)?;
            let backend = CrosstermBackend::new(stdout());
            match ratatui::crossterm::terminal::size() {
                // A terminal that gives no size (`script` without one, a serial console):
                // 80 by 24, as top and htop take it, rather than nothing drawn.
                Ok((0, _) | (_, 0)) => Terminal::with_options(
                    backend,
                    TerminalOptions {
                        viewport: Viewport::Fixed(Rect::new(0, 0, 80, 24)),
                    },
                ),
                _ => Terminal::new(backend),
            }
        })();
        match terminal {
            Ok(terminal) => Ok(TakenTerminal { terminal }),
            Err(e) => {
                give_back();
                Err(e).context("take the terminal")
            }
        }
    }
}

impl Drop for TakenTerminal {
    fn drop(&mut self) {
        give_back();
    }
}

/// Leaves the alternate screen, shows the cursor, turns raw mode off; once.
fn give_back() {
    if TAKEN.swap(false, Ordering::SeqCst) {
        let _ = execute!(stdout(), LeaveAlternateScreen, Show);
        let _ = disable_raw_mode();
    }
}

/// A panic gives the terminal back before its message is printed, so the message is seen
/// on the screen the shell uses, and the shell gets a sane terminal.
fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            give_back();
            previous(info);
        }));
    });
}
