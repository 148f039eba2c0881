//! The fuzz targets' stored inputs (`frame_open`, `bcolz_open`) through `b2fs verify`: every
//! run within its time and peak-RSS bounds, a JSON report, no panic.

use super::*;

/// Inputs per `b2fs verify` run of the hostile corpus.
pub(super) const HOSTILE_BATCH: usize = 150;
/// Time one run (so each input in it) may take.
pub(super) const HOSTILE_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);
/// Peak RSS one run (so each input in it) may reach.
pub(super) const HOSTILE_MAX_RSS_KIB: i64 = 256 << 10;

/// The stored inputs of the fuzz targets that are sources (`frame_open`: frame files,
/// `bcolz_open`: carrays split into their files), from `fuzz/corpus/TARGET` and
/// `tests/data/fuzz-regressions/TARGET` (scripts/fuzz.sh keeps them there), sorted.
fn hostile_inputs(targets: &[(&str, bool)]) -> Vec<(PathBuf, bool)> {
    let root = crate::support::repo_root();
    let mut all = Vec::new();
    for &(target, bcolz) in targets {
        for base in ["fuzz/corpus", "tests/data/fuzz-regressions"] {
            let Ok(rd) = std::fs::read_dir(root.join(base).join(target)) else {
                continue;
            };
            let mut files: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
            files.sort();
            all.extend(files.into_iter().map(|p| (p, bcolz)));
        }
    }
    all
}

/// Lays fuzz input `input` out as source number `i` in `dir`, as its fuzz target reads it.
fn lay_out_hostile(dir: &Path, i: usize, input: &Path, bcolz: bool) -> PathBuf {
    let data = std::fs::read(input).unwrap();
    if !bcolz {
        let f = dir.join(format!("f{i:05}.b2frame"));
        std::fs::write(&f, &data).unwrap();
        return f;
    }
    let c = dir.join(format!("c{i:05}"));
    std::fs::create_dir_all(c.join("meta")).unwrap();
    std::fs::create_dir_all(c.join("data")).unwrap();
    let parts = crate::fuzz::entry::split_parts(&data, 6);
    let part = |k: usize| parts.get(k).copied();
    std::fs::write(c.join("meta/sizes"), part(0).unwrap_or_default()).unwrap();
    std::fs::write(c.join("meta/storage"), part(1).unwrap_or_default()).unwrap();
    if let Some(a) = part(2).filter(|a| !a.is_empty()) {
        std::fs::write(c.join("__attrs__"), a).unwrap();
    }
    for k in 0..3 {
        if let Some(b) = part(3 + k) {
            std::fs::write(c.join(format!("data/__{k}.blp")), b).unwrap();
        }
    }
    c
}

/// One `b2fs verify --json SOURCE` run under [`HOSTILE_LIMIT`].
pub(super) struct Run {
    pub(super) code: Option<i32>,
    pub(super) out: Vec<u8>,
    pub(super) err: String,
    pub(super) max_rss_kib: i64,
    pub(super) timed_out: bool,
    pub(super) took: std::time::Duration,
}

pub(super) fn verify_run(source: &Path) -> Run {
    let mut cmd = b2fs();
    cmd.args(["verify", "--json"]).arg(source);
    timed_run(cmd)
}

/// Runs `cmd` as [`verify_run`] runs verify (under [`HOSTILE_LIMIT`], peak RSS sampled).
pub(super) fn timed_run(mut cmd: std::process::Command) -> Run {
    let t = std::time::Instant::now();
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, out, err, max_rss_kib, timed_out) = wait_with_rusage(child, HOSTILE_LIMIT);
    Run {
        code,
        out,
        err: String::from_utf8_lossy(&err).into_owned(),
        max_rss_kib,
        timed_out,
        took: t.elapsed(),
    }
}

/// What is wrong with run `r` (`None`: within bounds, a JSON report, no panic).
pub(super) fn hostile_fault(r: &Run) -> Option<String> {
    if r.timed_out {
        return Some(format!("killed after {:?}", r.took));
    }
    if r.max_rss_kib > HOSTILE_MAX_RSS_KIB {
        return Some(format!("peak RSS {} KiB", r.max_rss_kib));
    }
    // 3: a single source that is not a container (a batch is a directory: 0 or 1).
    if !matches!(r.code, Some(0 | 1 | 3)) || r.err.contains("panicked") {
        return Some(format!("exit {:?}: {}", r.code, r.err));
    }
    match serde_json::from_slice::<Value>(&r.out) {
        Ok(v) if v["arrays"].is_u64() => None,
        _ => Some("no JSON report".into()),
    }
}

/// Issue 22: every stored input of the `frame_open` fuzz target (about 770 frame files, a
/// few declaring hundreds of millions of chunks) through `b2fs verify --json` (see
/// [`hostile_corpus_bounded`]).
#[test]
fn verify_hostile_corpus_bounded() {
    hostile_corpus_bounded(&[("frame_open", false)], 500);
}

/// [`verify_hostile_corpus_bounded`] for the `bcolz_open` corpus (about 1,900 carrays, some
/// declaring 1e15 chunks beside three `.blp` files).
#[test]
fn verify_hostile_bcolz_corpus_bounded() {
    hostile_corpus_bounded(&[("bcolz_open", true)], 1000);
}

/// The stored inputs of fuzz `targets` (at least `min`) through `b2fs verify --json`, in runs
/// of [`HOSTILE_BATCH`] inputs (a directory of sources each), two at a time: every run
/// finishes within [`HOSTILE_LIMIT`] and [`HOSTILE_MAX_RSS_KIB`] (the child's peak RSS from
/// `wait4`), so every input does, with a JSON report and no panic. A run that fails is
/// verified again input by input to name the culprits. Prints the worst run's peak RSS and
/// time (docs/VERIFY.md records them).
fn hostile_corpus_bounded(targets: &[(&str, bool)], min: usize) {
    let inputs = hostile_inputs(targets);
    assert!(inputs.len() >= min, "{} inputs", inputs.len());
    let started = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let batches: Vec<Vec<(usize, &(PathBuf, bool))>> = inputs
        .iter()
        .enumerate()
        .collect::<Vec<_>>()
        .chunks(HOSTILE_BATCH)
        .map(<[_]>::to_vec)
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                loop {
                    let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(batch) = batches.get(b) else { break };
                    let bdir = dir.path().join(format!("b{b:03}"));
                    std::fs::create_dir(&bdir).unwrap();
                    for (i, (input, bcolz)) in batch {
                        lay_out_hostile(&bdir, *i, input, *bcolz);
                    }
                    let r = verify_run(&bdir);
                    results.lock().unwrap().push((b, r));
                }
            });
        }
    });
    let results = results.into_inner().unwrap();
    let (mut arrays, mut faults) = (0, Vec::new());
    for (b, r) in &results {
        match hostile_fault(r) {
            None => {
                let v: Value = serde_json::from_slice(&r.out).unwrap();
                arrays += v["arrays"].as_u64().unwrap();
            }
            Some(why) => {
                // Name the inputs: each alone.
                for (i, (input, bcolz)) in &batches[*b] {
                    let one = dir.path().join(format!("one{i:05}"));
                    std::fs::create_dir(&one).unwrap();
                    let src = lay_out_hostile(&one, *i, input, *bcolz);
                    if let Some(w) = hostile_fault(&verify_run(&src)) {
                        faults.push(format!("{}: {w}", input.display()));
                    }
                }
                faults.push(format!("run {b}: {why}"));
            }
        }
    }
    let rss = results
        .iter()
        .map(|(_, r)| r.max_rss_kib)
        .max()
        .unwrap_or(0);
    let slowest = results
        .iter()
        .map(|(_, r)| r.took)
        .max()
        .unwrap_or_default();
    eprintln!(
        "hostile corpus: {} inputs in {} runs, {arrays} arrays, worst run {slowest:?} and peak \
         RSS {} MiB, {:?} in all",
        inputs.len(),
        results.len(),
        rss / 1024,
        started.elapsed()
    );
    assert!(faults.is_empty(), "{faults:#?}");
    assert!(arrays as usize > min / 4, "{arrays} arrays verified");
}

/// Waits for `child` with `wait4`, killing it (SIGKILL) once it has run `limit`: its exit code,
/// stdout, stderr, maximum RSS in KiB and whether it was killed (stdout and stderr are
/// drained on threads meanwhile). The child is killed only before it is reaped, so its pid
/// cannot have been reused.
pub(super) fn wait_with_rusage(
    mut child: std::process::Child,
    limit: std::time::Duration,
) -> (Option<i32>, Vec<u8>, Vec<u8>, i64, bool) {
    use std::io::Read;
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let t2 = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value of this plain C struct.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let started = std::time::Instant::now();
    let mut killed = false;
    // The child's own peak (VmHWM of its mm), sampled while it runs: `ru_maxrss` is no measure
    // of it, since exec records the spawning process's high-water mark into the child's
    // (the test binary, running other tests beside, may have passed 256 MiB). A sample every
    // millisecond misses at most the growth of the child's last millisecond (under 1 MiB at
    // this machine's rate of touching fresh memory); a child that exits before the first
    // sample has had no time to grow.
    let mut peak_kib = 0i64;
    loop {
        if let Some(kib) = vm_hwm_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        let flags = if killed { 0 } else { libc::WNOHANG };
        // SAFETY: `pid` is our own child, not yet reaped; both pointers are valid.
        let r = unsafe { libc::wait4(pid, &mut status, flags, &mut ru) };
        if r == pid {
            break;
        }
        assert_eq!(r, 0, "wait4");
        if started.elapsed() > limit {
            // SAFETY: our child, not reaped yet (a zombie at worst): the pid is still its.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            killed = true;
        } else {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    (
        code,
        t1.join().unwrap(),
        t2.join().unwrap(),
        peak_kib,
        killed,
    )
}

/// The peak resident set (VmHWM) of live process `pid` in KiB; `None` once it has exited.
pub(super) fn vm_hwm_kib(pid: libc::pid_t) -> Option<i64> {
    // Between its spawn and its exec the child is still this test binary (spawned with
    // vfork, it even shares this process's memory): its VmHWM then is the test process's,
    // which other tests running beside may have grown past any bound (366 MiB once in CI).
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    if std::env::current_exe().is_ok_and(|me| me == exe) {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}
