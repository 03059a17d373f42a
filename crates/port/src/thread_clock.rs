//! A receive thread's busy share: its CPU time over the wall time since it started, what
//! the idle policy (`idle.rs`) is there to keep low. Read on the thread itself: the CPU
//! clock is the calling thread's.

use std::time::{Duration, Instant};

/// A thread's wall and CPU time since it was made.
#[derive(Debug, Clone, Copy)]
pub struct ThreadClock {
    wall: Instant,
    cpu: Duration,
}

impl ThreadClock {
    /// Starts counting, on the thread to be measured.
    pub fn start() -> ThreadClock {
        ThreadClock {
            wall: Instant::now(),
            cpu: thread_cpu_time(),
        }
    }

    pub fn wall(&self) -> Duration {
        self.wall.elapsed()
    }

    /// CPU time used since the start; called on the same thread.
    pub fn cpu(&self) -> Duration {
        thread_cpu_time().saturating_sub(self.cpu)
    }

    /// CPU time over wall time since the start, 0 to 1; called on the same thread.
    pub fn busy(&self) -> f64 {
        let wall = self.wall().as_secs_f64();
        (self.cpu().as_secs_f64() / wall.max(1e-9)).min(1.0)
    }
}

/// CPU time the calling thread has used (user and system).
pub fn thread_cpu_time() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
        .map_or(Duration::ZERO, Duration::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spinning_thread_is_busy_and_a_sleeping_one_is_not() {
        let clock = ThreadClock::start();
        let until = Instant::now() + Duration::from_millis(50);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        assert!(clock.busy() > 0.5, "{}", clock.busy());
        let clock = ThreadClock::start();
        std::thread::sleep(Duration::from_millis(50));
        assert!(clock.busy() < 0.5, "{}", clock.busy());
    }
}
