//! Shared by the fast-path tests (the switch crate's tests include `fast_path_frames` too).

pub mod fast_path_frames;
