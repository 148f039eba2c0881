//! Issue 21, who commits at close, through a real read-write mount: a process opens a chunk
//! file, writes half of it, and another process closes a copy of the descriptor (a forked
//! child's exit, a subprocess given it with `pass_fds`, a shell's command substitution and
//! pipeline, a subprocess that writes the rest through it). python-blosc2 reads the source
//! in between and must see the old chunk; the opener's close then commits the whole new
//! chunk. A refused edit: the child's close returns 0, the opener's close EINVAL.
//! The in-process rule itself (no kernel) is pinned in `tests/it/model/cases.rs`
//! (`model_close_by_another_process_commits_nothing`).

use std::path::Path;

use crate::support::{Mount, fuse_and_python, run_python};

fn fork_py(py: &Path, args: &[&str]) -> String {
    let mut all = vec!["scripts/oracle/fork.py"];
    all.extend_from_slice(args);
    String::from_utf8_lossy(&run_python(py, &all))
        .trim()
        .to_string()
}

/// Every case on one mount of a fresh python-blosc2 source (each case rewrites chunk 1 from
/// the original values, so the cases follow one another after a reset).
#[test]
fn fork_a_close_by_another_process_commits_nothing() {
    let py = or_skip!(fuse_and_python(
        "fork_a_close_by_another_process_commits_nothing"
    ));
    let (dir, pristine) = crate::support::temp_path("pristine.b2nd");
    fork_py(&py, &["gen", pristine.to_str().unwrap()]);
    let src = dir.path().join("f.b2nd");
    let s = src.to_str().unwrap();
    for case in ["fork", "pass_fds", "shell", "child_writes", "refused"] {
        // A fresh copy of the source per case: the check compares with the original chunk 1.
        std::fs::copy(&pristine, &src).unwrap();
        let m = Mount::daemon(&src, &[]);
        let mnt = m.mp.to_str().unwrap();
        let said = match case {
            "refused" => fork_py(&py, &["refused", s, mnt]),
            _ => fork_py(&py, &["run", s, mnt, case]),
        };
        assert_eq!(said, format!("ok {case}"));
        m.umount();
    }
}
