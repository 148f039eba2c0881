//! Waiting for a condition by polling it, never by sleeping a guessed time: a test that
//! proves something happened polls until it has (or fails at the deadline); a test that
//! proves something did NOT happen polls for the event that would have caused it first.

use std::time::{Duration, Instant};

/// Polls `cond` every few milliseconds until it holds (`true`) or `deadline` has passed
/// (`false`, after one last look).
pub fn wait_until(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + deadline;
    let mut pause = Duration::from_millis(1);
    while Instant::now() < end {
        if cond() {
            return true;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    cond()
}
