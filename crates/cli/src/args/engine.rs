//! `--engine`: which transmit engine a sending command (`gen`, `bench txpush`) uses.

use clap::ValueEnum;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Engine {
    /// AF_XDP (or AF_PACKET) socket transmit from user space.
    Socket,
    /// The kernel's XDP live-frames engine (BPF_PROG_RUN): the fastest load this host makes.
    Kernel,
}
