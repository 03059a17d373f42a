//! A terminal of known size for full-screen programs: a tmux server of the test's own (its own
//! socket, so no other tmux is touched) running a shell, read back with `capture-pane`.
//! The server is killed when dropped.

use super::*;

pub struct Tmux {
    socket: String,
    session: String,
    /// The server's socket file, which kill-server leaves behind.
    socket_path: String,
}

impl Tmux {
    /// A `width` x `height` terminal running a plain bash (no rc files: a known prompt).
    pub fn shell(tag: &str, width: u16, height: u16) -> Tmux {
        let id = unique_id(tag);
        let mut t = Tmux {
            socket: format!("wirespeed-{id}"),
            session: format!("ws{id}"),
            socket_path: String::new(),
        };
        let (w, h) = (width.to_string(), height.to_string());
        t.must(&[
            "new-session",
            "-d",
            "-s",
            &t.session,
            "-x",
            &w,
            "-y",
            &h,
            "env PS1='$ ' bash --norc --noprofile",
        ]);
        t.socket_path = t.query("#{socket_path}");
        t
    }

    fn tmux(&self, args: &[&str]) -> Output {
        let mut argv = vec!["tmux", "-L", &self.socket];
        argv.extend_from_slice(args);
        sh(&argv)
    }

    fn must(&self, args: &[&str]) -> String {
        let out = self.tmux(args);
        assert!(
            out.status.success(),
            "tmux {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Types `line` and Enter into the shell.
    pub fn type_line(&self, line: &str) {
        self.must(&["send-keys", "-t", &self.session, "-l", line]);
        self.must(&["send-keys", "-t", &self.session, "Enter"]);
    }

    /// Presses `key` (tmux's key names: `q`, `C-c`).
    pub fn press(&self, key: &str) {
        self.must(&["send-keys", "-t", &self.session, key]);
    }

    /// What the screen shows now, a line each row (trailing blanks trimmed by tmux).
    pub fn screen(&self) -> String {
        self.must(&["capture-pane", "-p", "-t", &self.session])
    }

    /// The screen once `ready` holds for it; panics with the screen after 20 s.
    pub fn wait_for(&self, what: &str, ready: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + Duration::from_secs(20);
        loop {
            let screen = self.screen();
            if ready(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < until,
                "the screen never showed {what}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// A tmux format (`#{alternate_on}`) for the pane.
    pub fn query(&self, format: &str) -> String {
        self.must(&["display-message", "-p", "-t", &self.session, format])
            .trim()
            .to_string()
    }

    /// Resizes the terminal, as a user dragging the window's corner.
    pub fn resize(&self, width: u16, height: u16) {
        let (w, h) = (width.to_string(), height.to_string());
        self.must(&["resize-window", "-t", &self.session, "-x", &w, "-y", &h]);
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
        if !self.socket_path.is_empty() {
            let _ = std::fs::remove_file(&self.socket_path);
        }
    }
}
