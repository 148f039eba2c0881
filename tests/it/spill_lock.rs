//! The spill file's I/O is done with the edits lock released (src/tree/edit/pending.rs,
//! `evict.rs`, `reads.rs`), on a python-blosc2 `gen2d` array edited through the in-process
//! tree: while an eviction pass is held in the middle of writing a chunk to the spill file
//! (a test hook), reads of other edited chunks and of the chunk being spilled, and writes to
//! both, go through; the edits made meanwhile are kept and committed. A read of `array.npy`
//! across a spilled chunk reads it from the file once (not once per row); a truncation of a
//! spilled chunk reads nothing back; a commit whose spill read-back fails answers EIO and
//! keeps the edits for a retry. python-blosc2 reads back every commit.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use b2fs::reader::ChunkId;
use b2fs::tree::Tree;

use crate::support::gen2d::{CHUNK, COLS, ROWS, budget_tree, gen2d};
use crate::support::{self, no_prefetch, tree_ino as ino, tree_read};

/// How long a step may take before the test calls it blocked (a deadlock detector, far above
/// anything the steps take: nothing here is timed).
const BLOCKED: Duration = Duration::from_secs(60);

struct Fixture {
    dir: tempfile::TempDir,
    src: std::path::PathBuf,
    _spill: tempfile::TempDir,
    t: Arc<Tree>,
    npy: u64,
    /// `array.npy` as stored, and the header's length.
    before: Vec<u8>,
    hlen: usize,
}

impl Fixture {
    /// A fresh `gen2d` array (230 x 170 float64, 16 chunks of 60 x 50) in a read-write tree
    /// keeping at most `chunks` chunks of edits in memory.
    fn new(py: &Path, chunks: usize) -> Fixture {
        let (dir, src) = gen2d(py);
        let spill = tempfile::tempdir().unwrap();
        let t = budget_tree(&src, chunks * CHUNK, spill.path());
        let npy = ino(&t, "array.npy");
        let before = tree_read(&t, npy, 1 << 20).unwrap();
        let hlen = before.len() - ROWS * COLS * 8;
        Fixture {
            dir,
            src,
            _spill: spill,
            t: Arc::new(t),
            npy,
            before,
            hlen,
        }
    }

    /// The byte offset of item (`row`, `col`) in `array.npy`.
    fn item(&self, row: usize, col: usize) -> usize {
        self.hlen + (row * COLS + col) * 8
    }

    /// Writes `v` at item (`row`, `col`) through handle `fh` and into `want`.
    fn put(&self, fh: u64, want: &Mutex<Vec<u8>>, row: usize, col: usize, v: f64) {
        let at = self.item(row, col);
        self.t
            .write(self.npy, fh, at as u64, &v.to_le_bytes())
            .unwrap();
        want.lock().unwrap()[at..at + 8].copy_from_slice(&v.to_le_bytes());
    }

    /// What a fresh tree reads of `array.npy` from the source, and what python-blosc2 says of
    /// it against `want`.
    fn stored(&self, py: &Path, want: &[u8]) -> (Vec<u8>, String) {
        let fresh = Tree::from_source(&self.src, no_prefetch(false)).unwrap();
        let got = tree_read(&fresh, ino(&fresh, "array.npy"), 1 << 20).unwrap();
        let expect = self.dir.path().join("expect.npy");
        std::fs::write(&expect, want).unwrap();
        let says = support::oracle_says(
            py,
            &[&"scripts/oracle/npy_check.py", &"same", &self.src, &expect],
        );
        (got, says)
    }
}

/// The whole of `ino` read through handle `fh` in one read call.
fn read_all(t: &Tree, ino: u64, fh: u64) -> Vec<u8> {
    t.read(ino, fh, 0, 1 << 20).unwrap().to_vec()
}

/// A hook that holds the first spill write it sees until `go` says so, after telling
/// `entered` which chunk it holds; later spill writes go through.
fn hold_first_spill(t: &Tree) -> (Receiver<ChunkId>, Sender<()>) {
    let (entered_tx, entered) = channel::<ChunkId>();
    let (go, go_rx) = channel::<()>();
    let go_rx = Mutex::new(go_rx);
    let entered_tx = Mutex::new(entered_tx);
    let first = AtomicBool::new(true);
    t.on_spill_write(Some(Arc::new(move |id: ChunkId| {
        if first.swap(false, Ordering::SeqCst) {
            let _ = entered_tx.lock().unwrap().send(id);
            let _ = go_rx.lock().unwrap().recv();
        }
    })));
    (entered, go)
}

/// The scene the lock tests start from, made by [`hold_a_spill`].
struct HeldSpill {
    /// The writer's handle of `array.npy`.
    fh: u64,
    /// Lets the held spill write go on.
    go: Sender<()>,
    /// The thread whose write of chunk 2 waits for that spill.
    writer: std::thread::JoinHandle<()>,
}

/// Handle `fh` edits chunks 0 and 1 (row 0, columns 0 and 50: they fill a budget of two
/// chunks), then a thread's edit of chunk 2 (row 0, column 100) needs room: its pass spills
/// chunk 0 (the least recently edited, asserted) and is held in that spill write until `go`.
/// Every edit goes into `want` too.
fn hold_a_spill(f: &Arc<Fixture>, want: &Arc<Mutex<Vec<u8>>>) -> HeldSpill {
    let fh = f.t.open(f.npy, libc::O_RDWR).unwrap();
    f.put(fh, want, 0, 0, 1.5);
    f.put(fh, want, 0, 50, 2.5);
    let (entered, go) = hold_first_spill(&f.t);
    let writer = {
        let (f, want) = (f.clone(), want.clone());
        std::thread::spawn(move || f.put(fh, &want, 0, 100, 3.5))
    };
    let held = entered
        .recv_timeout(BLOCKED)
        .expect("the spill write starts");
    assert_eq!(
        held.index, 0,
        "the least recently edited chunk spills first"
    );
    HeldSpill { fh, go, writer }
}

#[test]
fn reads_and_writes_go_on_while_a_chunk_is_being_spilled_and_nothing_is_lost() {
    let py = or_skip!(support::python(
        "reads_and_writes_go_on_while_a_chunk_is_being_spilled_and_nothing_is_lost"
    ));
    let f = Arc::new(Fixture::new(&py, 2));
    let want = Arc::new(Mutex::new(f.before.clone()));
    let HeldSpill { fh, go, writer } = hold_a_spill(&f, &want);
    // Meanwhile, on another thread: reads of chunk 1 (in memory) and of chunk 0 (being
    // spilled: its memory still counts), through its chunk file and array.npy, and writes to
    // both.
    let (done_tx, done) = channel();
    let other = {
        let (f, want) = (f.clone(), want.clone());
        std::thread::spawn(move || {
            let c1 = ino(&f.t, "data/00000001.bin");
            let c1fh = f.t.open(c1, libc::O_RDWR).unwrap();
            let chunk1 = read_all(&f.t, c1, c1fh);
            f.t.release(c1fh).unwrap();
            let npy_seen = read_all(&f.t, f.npy, fh);
            f.put(fh, &want, 1, 0, 4.5); // chunk 0, being spilled
            f.put(fh, &want, 1, 51, 5.5); // chunk 1
            let npy_after = read_all(&f.t, f.npy, fh);
            let _ = done_tx.send((chunk1, npy_seen, npy_after));
        })
    };
    let seen = done.recv_timeout(BLOCKED);
    // Let the pass finish whatever the outcome (a failed test must not leave it held).
    go.send(()).unwrap();
    let (chunk1, npy_seen, npy_after) =
        seen.expect("reads and writes of edited chunks wait for a spill write");
    other.join().unwrap();
    writer.join().unwrap();
    f.t.on_spill_write(None);
    assert_eq!(chunk1.len(), CHUNK);
    assert_eq!(chunk1[..8], 2.5f64.to_le_bytes(), "chunk 1's edit, read");
    // The read saw chunk 0's and chunk 1's edits (chunk 2's write was still waiting).
    let first = |v: &[u8], row, col| v[f.item(row, col)..f.item(row, col) + 8].to_vec();
    assert_eq!(first(&npy_seen, 0, 0), 1.5f64.to_le_bytes());
    assert_eq!(first(&npy_seen, 0, 50), 2.5f64.to_le_bytes());
    assert_eq!(first(&npy_after, 1, 0), 4.5f64.to_le_bytes());
    let want = want.lock().unwrap().clone();
    assert_eq!(read_all(&f.t, f.npy, fh), want, "every edit reads back");
    // The write to chunk 0 took it back into memory: that pass's copy was discarded, and
    // the pass (or a later one) spilled another chunk instead.
    let s = f.t.edit_stats();
    assert!(s.memory <= 2 * CHUNK, "{s:?}");
    assert_eq!(s.spilled_chunks, 1, "{s:?}");
    f.t.fsync(f.npy, fh).unwrap();
    f.t.release(fh).unwrap();
    let (got, says) = f.stored(&py, &want);
    assert!(got == want, "the commit stored every edit");
    assert_eq!(says, "same", "python-blosc2 reads the edited array");
}

#[test]
fn a_read_across_a_spilled_chunk_reads_it_from_the_file_once() {
    let py = or_skip!(support::python(
        "a_read_across_a_spilled_chunk_reads_it_from_the_file_once"
    ));
    let f = Fixture::new(&py, 1);
    let want = Mutex::new(f.before.clone());
    let fh = f.t.open(f.npy, libc::O_RDWR).unwrap();
    f.put(fh, &want, 0, 0, 1.5);
    f.put(fh, &want, 59, 49, 2.5); // chunk 0's last item
    f.put(fh, &want, 0, 50, 3.5); // chunk 1: chunk 0 spills
    assert_eq!(f.t.edit_stats().spilled_chunks, 1);
    let want = want.into_inner().unwrap();
    // One read of the whole array.npy: chunk 0's 60 rows are 180 runs (blocks of 24
    // columns), all taken from one read of the spill file.
    let reads = f.t.edit_stats().spill_reads;
    assert_eq!(read_all(&f.t, f.npy, fh), want);
    assert_eq!(
        f.t.edit_stats().spill_reads - reads,
        1,
        "one pread per chunk"
    );
    // Its chunk file: one read too.
    let c0 = ino(&f.t, "data/00000000.bin");
    let c0fh = f.t.open(c0, libc::O_RDWR).unwrap();
    let reads = f.t.edit_stats().spill_reads;
    let chunk0 = read_all(&f.t, c0, c0fh);
    assert_eq!(f.t.edit_stats().spill_reads - reads, 1);
    assert_eq!(chunk0.len(), CHUNK);
    assert_eq!(chunk0[..8], 1.5f64.to_le_bytes());
    f.t.release(c0fh).unwrap();
    f.t.fsync(f.npy, fh).unwrap();
    f.t.release(fh).unwrap();
    let (got, says) = f.stored(&py, &want);
    assert!(got == want);
    assert_eq!(says, "same");
}

#[test]
fn a_truncated_spilled_chunk_is_cut_in_place_and_brought_back_only_as_far_as_it_is_kept() {
    let py = or_skip!(support::python(
        "a_truncated_spilled_chunk_is_cut_in_place_and_brought_back_only_as_far_as_it_is_kept"
    ));
    let f = Fixture::new(&py, 1);
    let want = Mutex::new(f.before.clone());
    let c0 = ino(&f.t, "data/00000000.bin");
    let c0fh = f.t.open(c0, libc::O_RDWR).unwrap();
    let mut chunk0 = read_all(&f.t, c0, c0fh);
    chunk0[..8].copy_from_slice(&7.5f64.to_le_bytes());
    f.t.write(c0, c0fh, 0, &chunk0[..8]).unwrap();
    // Chunk 1 edited through array.npy: chunk 0 spills.
    let fh = f.t.open(f.npy, libc::O_RDWR).unwrap();
    f.put(fh, &want, 0, 50, 3.5);
    assert_eq!(f.t.edit_stats().spilled_chunks, 1);
    // Cut to 100 bytes (a handle is open: not committed yet): nothing read back, still in
    // the file, 100 bytes long.
    let reads = f.t.edit_stats().spill_reads;
    f.t.set_size(c0, 100).unwrap();
    let s = f.t.edit_stats();
    assert_eq!((s.spilled_chunks, s.spill_reads), (1, reads), "{s:?}");
    assert_eq!(f.t.getattr(c0).unwrap().size, 100);
    assert_eq!(read_all(&f.t, c0, c0fh), chunk0[..100]);
    // Written whole again: the 100 bytes kept come back, the rest is written.
    let reads = f.t.edit_stats().spill_reads;
    f.t.write(c0, c0fh, 100, &chunk0[100..]).unwrap();
    assert_eq!(f.t.edit_stats().spill_reads - reads, 1);
    assert_eq!(read_all(&f.t, c0, c0fh), chunk0);
    f.t.fsync(c0, c0fh).unwrap();
    f.t.release(c0fh).unwrap();
    f.t.fsync(f.npy, fh).unwrap();
    f.t.release(fh).unwrap();
    let mut want = want.into_inner().unwrap();
    let at = f.item(0, 0);
    want[at..at + 8].copy_from_slice(&7.5f64.to_le_bytes());
    let (got, says) = f.stored(&py, &want);
    assert!(got == want);
    assert_eq!(says, "same");
}

#[test]
fn a_commit_whose_spilled_chunk_cannot_be_read_back_fails_with_eio_and_keeps_the_edits() {
    let py = or_skip!(support::python(
        "a_commit_whose_spilled_chunk_cannot_be_read_back_fails_with_eio_and_keeps_the_edits"
    ));
    let f = Fixture::new(&py, 1);
    let stored = std::fs::read(&f.src).unwrap();
    let want = Mutex::new(f.before.clone());
    let fh = f.t.open(f.npy, libc::O_RDWR).unwrap();
    f.put(fh, &want, 0, 0, 1.5);
    f.put(fh, &want, 0, 50, 2.5); // chunk 0 spills
    let want = want.into_inner().unwrap();
    f.t.fail_spill_reads(Some(libc::EIO));
    // fsync and the opener's close: EIO, nothing stored, every edit still pending.
    let e = f.t.fsync(f.npy, fh).unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    let e = f.t.flush(f.npy, fh).unwrap_err();
    assert_eq!(e.errno(), libc::EIO, "{e}");
    assert!(
        std::fs::read(&f.src).unwrap() == stored,
        "the source changed"
    );
    let s = f.t.edit_stats();
    assert_eq!((s.spilled_chunks, s.memory), (1, CHUNK), "{s:?}");
    // The disk works again: a retry commits all of it.
    f.t.fail_spill_reads(None);
    assert_eq!(read_all(&f.t, f.npy, fh), want);
    f.t.fsync(f.npy, fh).unwrap();
    f.t.release(fh).unwrap();
    let (got, says) = f.stored(&py, &want);
    assert!(got == want);
    assert_eq!(says, "same");
    // The last close is the end of the edit: when its commit fails that way, the edits go
    // (nobody is left to retry, and kept they would hold the mount back from following other
    // writers); what was committed stays.
    let committed = std::fs::read(&f.src).unwrap();
    let fh = f.t.open(f.npy, libc::O_RDWR).unwrap();
    f.t.write(f.npy, fh, f.item(0, 0) as u64, &9.5f64.to_le_bytes())
        .unwrap();
    f.t.write(f.npy, fh, f.item(0, 50) as u64, &9.5f64.to_le_bytes())
        .unwrap();
    f.t.fail_spill_reads(Some(libc::EIO));
    assert_eq!(f.t.release(fh).unwrap_err().errno(), libc::EIO);
    f.t.fail_spill_reads(None);
    let s = f.t.edit_stats();
    assert_eq!(
        (s.memory, s.spilled_chunks, s.spilled_bytes),
        (0, 0, 0),
        "{s:?}"
    );
    assert!(
        std::fs::read(&f.src).unwrap() == committed,
        "the source changed"
    );
    assert_eq!(tree_read(&f.t, f.npy, 1 << 20).unwrap(), want);
}

/// A write that makes a new buffer reads its base, then an eviction pass releases the lock;
/// another handle's write and fsync of that chunk in that window is kept: the stale base is
/// read again (review of session 23: it was put back over the commit).
#[test]
fn a_commit_while_a_new_buffer_waits_for_room_is_not_undone() {
    let py = or_skip!(support::python(
        "a_commit_while_a_new_buffer_waits_for_room_is_not_undone"
    ));
    let f = Arc::new(Fixture::new(&py, 2));
    let want = Arc::new(Mutex::new(f.before.clone()));
    let HeldSpill { fh, go, writer } = hold_a_spill(&f, &want);
    let fh2 = f.t.open(f.npy, libc::O_RDWR).unwrap();
    f.put(fh2, &want, 1, 101, 7.5); // chunk 2, another handle
    f.t.fsync(f.npy, fh2).unwrap();
    {
        let w = want.lock().unwrap().clone();
        let (mid, _) = f.stored(&py, &w);
        let at = f.item(1, 101);
        assert_eq!(mid[at..at + 8], 7.5f64.to_le_bytes(), "B committed");
    }
    go.send(()).unwrap();
    writer.join().unwrap();
    f.t.on_spill_write(None);
    f.t.fsync(f.npy, fh).unwrap();
    f.t.release(fh2).unwrap();
    f.t.release(fh).unwrap();
    let want = want.lock().unwrap().clone();
    let (got, _) = f.stored(&py, &want);
    let at = f.item(1, 101);
    assert_eq!(
        got[at..at + 8],
        7.5f64.to_le_bytes(),
        "B's committed write lost"
    );
    assert!(got == want);
}
