//! The daemon's memory while it streams a frame over HTTP (rclone serve http on 127.0.0.1):
//! its peak resident size (`VmHWM`) stays within the same frame's local mount plus the
//! `remote_cache` budget plus a stated margin. On glibc malloc's per-thread arenas the
//! fetched chunk buffers used to fragment far past that (BENCHMARKS.md, "Memory while
//! streaming 4 GiB over HTTP"); they now come from a pool of reused anonymous mappings.

use std::path::Path;

use crate::support::mount::{daemon_pid, stream, vm_hwm_kib};
use crate::support::remote::rclone;
use crate::support::{Mount, fuse_and_python, run_python};

/// Chunks (1 MiB decoded each) of the streamed frame.
const CHUNKS: usize = 256;
/// Both cache budgets, in MiB.
const BUDGET_MIB: u64 = 32;
/// What the HTTP daemon may hold beyond the local mount and the remote budget, in MiB: the
/// client's own memory (runtime, TLS, connections: 3 MiB measured after mount) and the body
/// pieces of the GETs under way. Measured on this test's scale (32 MiB budgets): local 26-31
/// MiB, HTTP 63-71 MiB (5-11 MiB of this margin used); before the pool (main at 3170871),
/// HTTP 96-105 MiB, 19 MiB or more over the bound.
const MARGIN_MIB: u64 = 16;

/// Writes `dir/stream.b2nd` with python-blosc2: `CHUNKS` chunks of 131072 float64 with
/// noise (LZ4 clevel 1: they compress little), a slab at a time.
fn write_frame(py: &Path, dir: &Path) -> std::path::PathBuf {
    let path = dir.join("stream.b2nd");
    let script = format!(
        "import numpy as np, blosc2\n\
         ci, n = 128 << 10, {CHUNKS} * (128 << 10)\n\
         a = blosc2.empty((n,), dtype='f8', chunks=(ci,), blocks=(ci // 4,), urlpath={p:?}, \
         mode='w', cparams={{'clevel': 1, 'codec': blosc2.Codec.LZ4}})\n\
         rng = np.random.default_rng(7)\n\
         for i in range(0, n, 32 * ci):\n    \
             a[i:i + 32 * ci] = (rng.standard_normal(32 * ci) * 1000).round(2)\n",
        p = path.display().to_string()
    );
    run_python(py, &["-c", &script]);
    path
}

/// Streams every chunk file of a mount of `source`; returns (decoded bytes, VmHWM in MiB).
fn peak_while_streaming(source: &Path, opts: &str) -> (u64, u64) {
    let m = Mount::daemon(source, &[opts]);
    let pid = daemon_pid(&m.mp).expect("the daemon's pid");
    let (bytes, _) = stream(&m);
    let hwm = vm_hwm_kib(pid) / 1024;
    m.umount();
    (bytes, hwm)
}

#[test]
fn remote_stream_memory_stays_within_the_budgets_plus_a_constant() {
    let t = "remote_stream_memory_stays_within_the_budgets_plus_a_constant";
    let py = or_skip!(fuse_and_python(t));
    let dir = tempfile::tempdir().unwrap();
    let frame = write_frame(&py, dir.path());
    let http = or_skip!(rclone(t, dir.path()));
    let b = BUDGET_MIB;
    let (local_bytes, local) = peak_while_streaming(&frame, &format!("cache_size={b}M,ro"));
    let url = format!("{}/stream.b2nd", http.url);
    let opts = format!("cache_size={b}M,remote_cache={b}M");
    let (remote_bytes, remote) = peak_while_streaming(Path::new(&url), &opts);
    assert_eq!(local_bytes, (CHUNKS as u64) << 20);
    assert_eq!(remote_bytes, local_bytes);
    let bound = local + b + MARGIN_MIB;
    eprintln!(
        "{CHUNKS} MiB streamed: daemon VmHWM local {local} MiB, HTTP {remote} MiB \
         (bound {bound} MiB = local + remote_cache {b} MiB + margin {MARGIN_MIB} MiB)"
    );
    assert!(
        remote <= bound,
        "HTTP daemon peaked at {remote} MiB, over local {local} + remote_cache {b} + \
         {MARGIN_MIB} MiB"
    );
}
