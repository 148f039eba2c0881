//! Stopping a commit after each of its durable steps in turn: the loop the in-process crash
//! tests of the container layer share.

/// Runs `at(step)` for step 0, 1, ... until it returns true (the commit stopped after `step`
/// durable steps completed); fails when that takes 20 steps, or fewer than `min`.
#[track_caller]
pub fn every_commit_step(what: &str, min: usize, mut at: impl FnMut(usize) -> bool) {
    let mut steps = 0;
    while !at(steps) {
        steps += 1;
        assert!(steps < 20, "{what}: commit never completes");
    }
    assert!(steps >= min, "{what}: only {steps} steps");
}
