//! The pip package: `maturin build` on the repository's `pyproject.toml` (`bindings = "bin"`)
//! makes a wheel that carries the `b2fs` binary; installed into a fresh venv (no index, no
//! network) its `b2fs` command runs and mounts the sample.
//!
//! Cost: the wheel is built in the target directory this test run uses, with the `dev`
//! profile, whose dependencies `cargo test` has already built: only the b2fs crate is compiled
//! again (measured 47-95 s on the loaded 2-core machine, 2-5 s when up to date; a release wheel is
//! `maturin build --release`, the same steps with the release profile).
//!
//! It is `#[ignore]`d in the parallel run: cargo replaces `target/debug/b2fs`, which every
//! other test spawns, with the dev-profile binary (a test saw ENOENT in that window);
//! `scripts/test.sh` (and so CI) runs it on its own after the suite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::support::{Mount, fuse_available, python, repo_root};

/// The target directory of the `b2fs` binary under test, and the profile to build the wheel
/// with: `release` when the tests run in release, else `dev`, which shares the dependencies
/// `cargo test` built (the `test` profile itself cannot be used: cargo builds a binary's
/// unit-test harness with it, not the program).
fn built_profile() -> (PathBuf, &'static str) {
    let bin = Path::new(env!("CARGO_BIN_EXE_b2fs"));
    let profile_dir = bin.parent().unwrap();
    let target = profile_dir.parent().unwrap().to_path_buf();
    let profile = match profile_dir.file_name().and_then(|n| n.to_str()) {
        Some("release") => "release",
        _ => "dev",
    };
    (target, profile)
}

#[test]
#[ignore = "rebuilds target/debug/b2fs (dev profile) under the other tests' feet: \
            scripts/test.sh runs it alone after the suite (--ignored wheel_)"]
fn wheel_installs_a_b2fs_command_that_mounts_the_sample() {
    let test = "wheel_installs_a_b2fs_command_that_mounts_the_sample";
    let Some(py) = python(test) else {
        return;
    };
    let has_maturin = Command::new(&py)
        .args(["-m", "maturin", "--version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_maturin {
        assert!(
            std::env::var("B2FS_REQUIRE_PYTHON").is_err(),
            "{test}: no maturin in the venv (run scripts/setup.sh)"
        );
        eprintln!("SKIP {test}: no maturin in the venv (run scripts/setup.sh)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let wheels = tmp.path().join("wheels");
    let (target, profile) = built_profile();
    let started = Instant::now();
    let out = Command::new(&py)
        .args(["-m", "maturin", "build", "--locked", "--profile", profile])
        .arg("--out")
        .arg(&wheels)
        .current_dir(repo_root())
        .env("CARGO_TARGET_DIR", &target)
        .output()
        .unwrap();
    eprintln!(
        "{test}: maturin build --profile {profile} took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        out.status.success(),
        "maturin build failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("a .whl in the output directory");
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(&format!("b2fs-{}-", env!("CARGO_PKG_VERSION"))),
        "{name}"
    );

    // A fresh venv (without its own pip: the project venv's pip installs into it, which
    // spares ensurepip's ~10 s), the wheel installed from the file alone.
    let venv = tmp.path().join("venv");
    let st = Command::new(&py)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(st.success(), "python -m venv");
    let out = Command::new(&py)
        .args(["-m", "pip", "--python"])
        .arg(venv.join("bin/python"))
        .args(["install", "-q", "--no-index", "--no-deps"])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "pip install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let installed = venv.join("bin/b2fs");
    let v = Command::new(&installed).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("b2fs {}", env!("CARGO_PKG_VERSION"))
    );
    eprintln!(
        "{test}: built, installed and ran in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    if !fuse_available(test) {
        return;
    }
    // The installed command mounts (its daemon re-executes the installed binary).
    let m = Mount::empty();
    let sample = repo_root().join("examples/sample.b2nd");
    let out = Command::new(&installed)
        .args(["mount", "-o", "ro"])
        .arg(&sample)
        .arg(&m.mp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "installed b2fs mount: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sizes = std::fs::read_to_string(m.path("meta/sizes")).unwrap();
    assert!(sizes.contains("\"nbytes\": 10944"), "{sizes}");
    assert_eq!(
        std::fs::read(m.path("data/00000003.bin")).unwrap().len(),
        2736
    );
    let out = Command::new(&installed)
        .arg("umount")
        .arg(&m.mp)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
