//! The pip package: `maturin build` on the repository's `pyproject.toml` (`bindings = "bin"`,
//! `features = ["remote"]`, `compatibility = "manylinux2014"`) makes a wheel that carries the
//! `b2fs` binary, tagged `manylinux_2_17` (auditwheel agrees: no glibc symbol newer than
//! 2.17); installed into a fresh venv of another Python version (no index, no network), its
//! `b2fs` command mounts a local source, an `s3://` object on moto and an `https://` URL
//! served by rclone with a private CA (with the `remote` feature, through rustls and ring).
//!
//! Cost: one build serves every check. The wheel is built in the target directory this test
//! run uses, with the `dev` profile, whose settings the `test` profile inherits unchanged
//! (Cargo.toml): the library and every dependency are the ones `cargo test` built, and only
//! the five-line b2fs binary crate is compiled again, linked by zig against glibc 2.17
//! (maturin's own `maturin zig cc` wrapper, given as `-C linker` to that crate alone). The
//! test fails if cargo compiled anything but the b2fs crate. Releases use `maturin build --release --zig` (docs/INSTALL.md), which links the
//! same way and also compiles the C dependencies with zig, in a separate target directory:
//! a full build, too slow for CI (measured in docs/INSTALL.md).
//!
//! It is `#[ignore]`d in the parallel run: cargo replaces `target/debug/b2fs`, which every
//! other test spawns, with the dev-profile binary (a test saw ENOENT in that window);
//! `scripts/test.sh` (and so CI) runs it on its own after the suite.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use crate::support::{Mount, chunk_files_match, fuse, python, repo_root};

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

fn says(o: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Whether `python -m module arg` succeeds in the venv of `py`; else a SKIP (a failure under
/// `B2FS_REQUIRE_PYTHON`).
fn has_module(test: &str, py: &Path, module: &str, arg: &str) -> bool {
    let what = module;
    let ok = Command::new(py)
        .args(["-m", module, arg])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var("B2FS_REQUIRE_PYTHON").is_err(),
            "{test}: no {what} in the venv (run scripts/setup.sh)"
        );
        eprintln!("SKIP {test}: no {what} in the venv (run scripts/setup.sh)");
    }
    ok
}

/// A Python other than the project venv's (another minor version), for the fresh venv: the
/// pyenv versions the development machines have, else `python3.X` on `PATH`.
fn other_python(project: &Path) -> Option<PathBuf> {
    let version = |p: &Path| {
        Command::new(p)
            .args(["-c", "import sys; print(sys.version_info[:2])"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
    };
    let ours = version(project)?;
    let mut candidates: Vec<PathBuf> = std::fs::read_dir("/root/.pyenv/versions")
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.path().join("bin/python3")))
        .collect();
    // Newest first (3.13 before 3.9).
    let key = |p: &PathBuf| -> Vec<u32> {
        let dir = p
            .parent()
            .and_then(|b| b.parent())
            .and_then(|d| d.file_name());
        let name = dir.and_then(|n| n.to_str()).unwrap_or("");
        name.split('.').filter_map(|x| x.parse().ok()).collect()
    };
    candidates.sort_by_key(|p| std::cmp::Reverse(key(p)));
    candidates.extend(["python3.13", "python3.12", "python3.11", "python3.10"].map(PathBuf::from));
    candidates
        .into_iter()
        .find(|c| version(c).is_some_and(|v| v != ours && v >= b"(3, 8)".to_vec()))
}

/// The linker wrapper for the b2fs binary crate: maturin's `zig cc` for this machine's
/// architecture and glibc 2.17 (what `maturin build --zig` uses for manylinux2014).
fn zig_linker(dir: &Path, py: &Path) -> PathBuf {
    let path = dir.join("zig-cc-glibc2.17");
    let script = format!(
        "#!/bin/sh\nexec '{}' -m maturin zig cc -- -g -fno-sanitize=all -target {}-linux-gnu.2.17 \"$@\"\n",
        py.display(),
        std::env::consts::ARCH
    );
    std::fs::write(&path, script).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

#[test]
#[ignore = "rebuilds target/debug/b2fs (dev profile) under the other tests' feet: \
            scripts/test.sh runs it alone after the suite (--ignored wheel_)"]
fn wheel_is_manylinux2014_and_mounts_local_s3_and_https_sources_from_another_python() {
    let test = "wheel_is_manylinux2014_and_mounts_local_s3_and_https_sources_from_another_python";
    let py = or_skip!(python(test));
    if !has_module(test, &py, "maturin", "--version")
        || !has_module(test, &py, "ziglang", "version")
    {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let started = Instant::now();
    // B2FS_TEST_WHEEL: check a wheel built elsewhere (a release wheel of `maturin build
    // --release --zig`, docs/INSTALL.md) instead of building one.
    let wheel = match std::env::var_os("B2FS_TEST_WHEEL") {
        Some(w) => PathBuf::from(w),
        None => build_wheel(test, tmp.path(), &py),
    };
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    let arch = std::env::consts::ARCH;
    // The platform tags, in the order maturin writes them.
    let tags = name
        .strip_prefix(&format!("b2fs-{}-py3-none-", env!("CARGO_PKG_VERSION")))
        .and_then(|t| t.strip_suffix(".whl"))
        .map(|t| {
            let mut v: Vec<&str> = t.split('.').collect();
            v.sort();
            v
        });
    assert_eq!(
        tags,
        Some(vec![
            format!("manylinux2014_{arch}").as_str(),
            format!("manylinux_2_17_{arch}").as_str()
        ]),
        "{name}"
    );
    // auditwheel (the PyPA tool) agrees: nothing but glibc, no symbol newer than 2.17.
    if has_module(test, &py, "auditwheel", "--version") {
        let out = Command::new(&py)
            .args(["-m", "auditwheel", "show"])
            .arg(&wheel)
            .output()
            .unwrap();
        let shown = says(&out);
        assert!(out.status.success(), "{shown}");
        let flat = shown.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains(&format!(
                "is consistent with the following platform tag: \"manylinux_2_17_{arch}\""
            )),
            "{shown}"
        );
        eprintln!("{test}: auditwheel show: {flat}");
    }

    // A fresh venv of another Python version (without its own pip: the project venv's pip
    // installs into it, which spares ensurepip's ~10 s), the wheel installed from the file.
    let other = other_python(&py);
    let base = match &other {
        Some(p) => p.clone(),
        None => {
            eprintln!("{test}: no other Python version found, the venv uses the project's");
            py.clone()
        }
    };
    let venv = tmp.path().join("venv");
    let st = Command::new(&base)
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(st.success(), "{} -m venv", base.display());
    let out = Command::new(&py)
        .args(["-m", "pip", "--python"])
        .arg(venv.join("bin/python"))
        .args(["install", "-q", "--no-index", "--no-deps"])
        .arg(&wheel)
        .output()
        .unwrap();
    assert!(out.status.success(), "pip install: {}", says(&out));
    let installed = venv.join("bin/b2fs");
    let v = Command::new(&installed).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&v.stdout).trim(),
        format!("b2fs {}", env!("CARGO_PKG_VERSION"))
    );
    eprintln!(
        "{test}: built, audited, installed into {} and ran in {:.1}s",
        base.display(),
        started.elapsed().as_secs_f64()
    );

    or_skip!(fuse(test));
    let sample = repo_root().join("examples/sample.b2nd");
    mounts_the_sample(&installed, &sample, &[]);
    #[cfg(feature = "remote")]
    remote_mounts(test, &installed, &sample);
}

/// The installed command mounts `source` (its daemon re-executes the installed binary) and
/// every chunk file has the bytes python-blosc2 decoded (`examples/sample.json`).
fn mounts_the_sample(installed: &Path, source: &Path, opts: &[&str]) {
    let sc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(repo_root().join("examples/sample.json")).unwrap())
            .unwrap();
    let m = Mount::empty();
    let mut c = Command::new(installed);
    c.arg("mount");
    for o in opts {
        c.args(["-o", o]);
    }
    let out = c.arg(source).arg(&m.mp).output().unwrap();
    assert!(
        out.status.success(),
        "installed b2fs mount {}: {}",
        source.display(),
        says(&out)
    );
    let sizes = std::fs::read_to_string(m.path("meta/sizes")).unwrap();
    assert!(sizes.contains("\"nbytes\": 10944"), "{sizes}");
    chunk_files_match(&m.mp, &sc, &source.display().to_string());
    let out = Command::new(installed)
        .arg("umount")
        .arg(&m.mp)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", says(&out));
}

/// The installed command mounts the sample from moto (`s3://`) and from rclone over HTTPS
/// with a private CA (`ca_file=`): the wheel carries the `remote` feature and its TLS works.
#[cfg(feature = "remote")]
fn remote_mounts(test: &str, installed: &Path, sample: &Path) {
    use crate::support::remote::{BUCKET, moto, private_ca, put_object, rclone_with};

    let moto = or_skip!(moto(test));
    put_object(&moto, "sample.b2nd", &std::fs::read(sample).unwrap(), true);
    let s3 = format!("s3://{BUCKET}/sample.b2nd");
    let ep = format!("endpoint={},no_sign_request", moto.url);
    mounts_the_sample(installed, Path::new(&s3), &[&ep]);

    let tls = tempfile::tempdir().unwrap();
    let (ca_cert, cert, key) = or_skip!(private_ca(test, tls.path()));
    let server = or_skip!(rclone_with(
        test,
        sample.parent().unwrap(),
        Some((&cert, &key))
    ));
    let url = format!("{}/sample.b2nd", server.url);
    assert!(url.starts_with("https://"), "{url}");
    let ca = format!("ca_file={}", ca_cert.display());
    mounts_the_sample(installed, Path::new(&url), &[&ca]);
}

/// Builds the wheel in the target directory of this test run (see the module comment) and
/// returns its path.
fn build_wheel(test: &str, dir: &Path, py: &Path) -> PathBuf {
    let wheels = dir.join("wheels");
    let (target, profile) = built_profile();
    let linker = zig_linker(dir, py);
    // `python3 -m ziglang` is how maturin's zig wrapper finds zig: the venv's bin/ first.
    let venv_bin = py.parent().unwrap();
    let path = format!(
        "{}:{}",
        venv_bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let started = Instant::now();
    let mut maturin = Command::new(py);
    // Not the variables `cargo test` set for this test process (CARGO_MANIFEST_DIR,
    // CARGO_PKG_*, ...): build scripts watch some of them (ring's does), so cargo would run
    // ring's again and compile ring, rustls, reqwest and object_store once more here, and
    // again for the next `cargo test` (~140 CPU-s each way).
    for (name, _) in std::env::vars_os().filter(|(k, _)| set_by_cargo_for_tests(k)) {
        maturin.env_remove(name);
    }
    let out = maturin
        .args(["-m", "maturin", "build", "--locked", "--profile", profile])
        .arg("--out")
        .arg(&wheels)
        .arg("--")
        .arg("-C")
        .arg(format!("linker={}", linker.display()))
        // The dev profile's debug info (over 200 MB) is not needed in the wheel: without it
        // the link and the zip take seconds, not minutes.
        .args(["-C", "strip=debuginfo"])
        .current_dir(repo_root())
        .env("CARGO_TARGET_DIR", &target)
        .env("PATH", &path)
        .output()
        .unwrap();
    eprintln!(
        "{test}: maturin build --profile {profile} took {:.1}s",
        started.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "maturin build failed: {}", says(&out));
    // What cargo compiled (and, with CARGO_LOG=cargo::core::compiler::fingerprint=info in the
    // environment, why it found each unit dirty).
    let err = String::from_utf8_lossy(&out.stderr);
    let compiled: Vec<&str> = err
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("Compiling "))
        .collect();
    eprintln!("{test}: cargo compiled {compiled:?}");
    for l in err.lines().filter(|l| l.contains("dirty")) {
        eprintln!("{test}: {l}");
    }
    // With `remote` (the wheel's feature set, as CI runs it) this run's `cargo test` built
    // every dependency with the features and variables the wheel's build sees: only the
    // binary crate (relinked with zig) is compiled again; any other unit is ~140 CPU-s of CI
    // time lost (Cargo.toml's feature unification).
    assert!(
        !cfg!(feature = "remote") || compiled.iter().all(|c| c.starts_with("b2fs v")),
        "the wheel's build compiled more than b2fs: {compiled:?}"
    );
    std::fs::read_dir(&wheels)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .expect("a .whl in the output directory")
}

/// Whether `name` is one of the variables cargo sets for the programs it runs (a test binary,
/// a build script), not one of the environment's own.
fn set_by_cargo_for_tests(name: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    [
        "CARGO_PKG_",
        "CARGO_MANIFEST_",
        "CARGO_BIN_",
        "CARGO_CRATE_",
        "CARGO_CFG_",
    ]
    .iter()
    .any(|p| name.starts_with(p))
        || matches!(
            &*name,
            "CARGO_PRIMARY_PACKAGE" | "CARGO_TARGET_TMPDIR" | "CARGO_RUSTC_CURRENT_DIR" | "OUT_DIR"
        )
}
