//! The Python oracles' fork servers: one warm interpreter per venv (numpy and python-blosc2
//! imported once, `scripts/oracle/forkserver.py`) forks a child for each oracle run instead of
//! a new interpreter starting and importing them again (about 0.9 CPU-s each, hundreds of runs
//! per suite). Each run is still its own process, with its own arguments, working directory
//! and output. `B2FS_ORACLE_SPAWN=1` turns them off (a plain interpreter per run).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;

/// One warm interpreter waiting for requests.
struct Server {
    child: Child,
    requests: ChildStdin,
    answers: BufReader<ChildStdout>,
}

impl Drop for Server {
    fn drop(&mut self) {
        // Its stdin closes with `requests`; it may be in the middle of nothing: kill and reap.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Idle servers by interpreter: a run takes one (or starts one) and gives it back, so
/// concurrent tests each get their own.
static IDLE: Mutex<Option<HashMap<PathBuf, Vec<Server>>>> = Mutex::new(None);

/// What an oracle run produced.
pub struct Ran {
    /// Its exit code (negative: killed by that signal).
    pub code: i32,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

/// Runs `py ARGS...` (from `cwd`) in a child of a warm server, or `None` when it cannot be
/// run that way (turned off, arguments not `-c CODE ...` or `SCRIPT.py ...` in UTF-8, the
/// server could not start or died): the caller starts a plain interpreter.
pub fn run(py: &Path, args: &[&dyn AsRef<OsStr>], cwd: &Path) -> Option<Ran> {
    if std::env::var_os("B2FS_ORACLE_SPAWN").is_some_and(|v| v == "1") {
        return None;
    }
    let argv: Vec<&str> = args
        .iter()
        .map(|a| a.as_ref().to_str())
        .collect::<Option<_>>()?;
    let mut server = take(py)?;
    let dir = tempfile::tempdir().ok()?;
    let (out, err) = (dir.path().join("stdout"), dir.path().join("stderr"));
    let request = serde_json::json!({
        "argv": argv,
        "cwd": cwd.to_str()?,
        "out": out.to_str()?,
        "err": err.to_str()?,
    });
    let mut answer = String::new();
    if writeln!(server.requests, "{request}")
        .and_then(|()| server.requests.flush())
        .is_err()
    {
        return None; // the server died before the request: dropped here, the caller spawns
    }
    if server.answers.read_line(&mut answer).unwrap_or(0) == 0 {
        // Died during the run: the oracle may have run (and had its effects), so it is not
        // run again; the caller reports the failure.
        return Some(Ran {
            code: -1,
            stdout: Vec::new(),
            stderr: b"the oracle's fork server died during the run".to_vec(),
        });
    }
    let code: i32 = match answer.trim() {
        "spawn" => {
            give_back(py, server);
            return None;
        }
        n => n.parse().ok()?,
    };
    give_back(py, server);
    Some(Ran {
        code,
        stdout: std::fs::read(&out).unwrap_or_default(),
        stderr: std::fs::read(&err).unwrap_or_default(),
    })
}

/// An idle server for `py`, or a new one once it says it is ready.
fn take(py: &Path) -> Option<Server> {
    let idle = IDLE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .get_mut(py)
        .and_then(Vec::pop);
    if idle.is_some() {
        return idle;
    }
    static REAP_AT_EXIT: std::sync::Once = std::sync::Once::new();
    // SAFETY: `reap` is an `extern "C" fn()` that touches only this module's mutex.
    REAP_AT_EXIT.call_once(|| unsafe {
        libc::atexit(reap);
    });
    let script = super::repo_root().join("scripts/oracle/forkserver.py");
    let mut child = Command::new(py)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .ok()?;
    let requests = child.stdin.take()?;
    let answers = BufReader::new(child.stdout.take()?);
    let mut server = Server {
        child,
        requests,
        answers,
    };
    let mut ready = String::new();
    server.answers.read_line(&mut ready).ok()?;
    (ready.trim() == "ready").then_some(server)
}

fn give_back(py: &Path, server: Server) {
    IDLE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .entry(py.to_path_buf())
        .or_default()
        .push(server);
}

/// At the test process's exit: ends and waits for every idle server, so that their CPU time
/// (and their children's) counts in the test process's, as a plain interpreter's did
/// (`scripts/test.sh` prints each step's CPU seconds).
extern "C" fn reap() {
    let servers = IDLE.lock().map(|mut idle| idle.take()).unwrap_or(None);
    drop(servers);
}
