//! The `zarr_edit` target: a short sequence of the edits a Zarr writer makes through the Zarr
//! view of a writable [`Tree`] over a fuzzed source: a `zarr.json` renamed over an array's
//! (zarr-python's resize and attribute writes: another first dimension, other attributes, or
//! raw bytes), chunk objects written, truncated and removed (zarr-python removes the chunks
//! outside a new shape before it renames the metadata; a refused rename takes them back).
//!
//! An input is a kind byte ([`Kind`]), four operation bytes ([`Step`]), the source's bytes,
//! [`EDIT_SEPARATOR`] and the payload the steps use (the attributes, the bytes written). A
//! kind byte with its high bit set runs the creation steps of `zarr_create.rs` instead (new
//! arrays and groups in a directory of sources or `.b2d` store).
//!
//! What is checked, beyond no panic, hang or unbounded allocation: a refused step leaves the
//! source byte for byte as it was before it (but a refused rename after a chunk removal,
//! which may take the removal back), and so does an accepted truncation or in-place write of
//! `zarr.json` (they change nothing); a chunk object written whole reads back as written
//! inside the shape, a removed one reads zeros, an applied rename shows the shape asked for;
//! and a source that opened before the steps opens again after them, shows the array with the
//! shape the view showed last, and can be walked.

use b2fs::tree::{EntryKind, ROOT_INO, Tree, TreeError};
use serde_json::Value;

use super::source::{self, Kind};
use super::tree::{EDIT_SEPARATOR, options, walk};

/// Steps of one input.
const STEPS: usize = 4;

/// Largest chunk object the target writes whole (bigger ones are written at an offset only).
const WHOLE_MAX: u64 = 4 << 20;

/// What one step does: the operation byte modulo 8; its high bits pick a value (a first
/// dimension from [`lengths`], an offset from [`OFFSETS`], a chunk).
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A `zarr.json` with another first dimension (and the same attributes) renamed over the
    /// array's.
    Resize,
    /// A `zarr.json` with the payload as its attributes (when it is a JSON object) and
    /// another first dimension renamed over the array's.
    ResizeWithAttrs,
    /// The payload's raw bytes renamed over the array's `zarr.json`.
    RawJson,
    /// The payload written into a chunk object at an offset.
    WriteChunk,
    /// A chunk object written whole: the payload repeated to the object's size.
    WriteWhole,
    /// A chunk object removed (`unlink`).
    Unlink,
    /// A chunk object truncated to a length.
    Truncate,
    /// The payload written into the array's `zarr.json` in place (refused unless unchanged).
    WriteJson,
}

const STEP_KINDS: [Step; 8] = [
    Step::Resize,
    Step::ResizeWithAttrs,
    Step::RawJson,
    Step::WriteChunk,
    Step::WriteWhole,
    Step::Unlink,
    Step::Truncate,
    Step::WriteJson,
];

/// Offsets of [`Step::WriteChunk`] and lengths of [`Step::Truncate`].
const OFFSETS: [u64; 8] = [0, 1, 7, 100, 4096, 1 << 20, 1 << 40, u64::MAX - 3];

/// First dimensions a resize asks for, given the array's: shrinks, grows, none, and absurd ones.
fn lengths(old: u64) -> [u64; 8] {
    [
        0,
        1,
        old.saturating_sub(1),
        old,
        old.saturating_add(1),
        old.saturating_mul(2).saturating_add(3),
        1 << 40,
        u64::MAX,
    ]
}

/// What became of a `zarr_edit` input.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The source opened as a writable tree with a Zarr array in its view.
    pub array: Option<String>,
    /// The steps that were applied (returned no error).
    pub applied: Vec<String>,
    /// The steps that were refused, with the error.
    pub refused: Vec<String>,
}

/// Runs one input.
pub fn zarr_edit(data: &[u8]) {
    let _ = zarr_edit_outcome(data);
}

/// [`zarr_edit`], saying what became of each step.
pub fn zarr_edit_outcome(data: &[u8]) -> Outcome {
    let mut out = Outcome::default();
    let [k, ops @ ..] = data else {
        return out;
    };
    let Some((ops, rest)) = ops.split_first_chunk::<STEPS>() else {
        return out;
    };
    let (src, payload) = match rest
        .windows(EDIT_SEPARATOR.len())
        .rposition(|w| w == EDIT_SEPARATOR)
    {
        Some(at) => (&rest[..at], &rest[at + EDIT_SEPARATOR.len()..]),
        None => (rest, &[][..]),
    };
    // The high bit of the kind byte: new arrays and groups (`zarr_create.rs`).
    if k & 0x80 != 0 {
        return super::zarr_create::run(*k, ops, src, payload);
    }
    let dir = super::scratch().join("zarr");
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let Some(path) = source::write(&dir, Kind::of(*k), src) else {
        return out;
    };
    let Ok(t) = Tree::from_source(&path, options(true)) else {
        return out;
    };
    let Some(array) = first_array(&t) else {
        return out;
    };
    out.array = Some(array.clone());
    let meta_path = format!("{array}/zarr.json");
    // The shape the view shows after the last step (checked again after a reopen), and
    // whether a chunk object was removed (a refused rename may then take the removal back).
    let mut shape = read_json(&t, &meta_path).map(|m| m["shape"].clone());
    let mut removed = false;
    for &op in ops {
        let step = STEP_KINDS[usize::from(op % 8)];
        let pick = usize::from(op >> 3);
        let before = source::snapshot(&dir);
        let res = run_step(&t, &array, step, pick, payload);
        let renamed = matches!(step, Step::Resize | Step::ResizeWithAttrs | Step::RawJson);
        // What must leave the source byte for byte: every refused step (but a refused
        // rename after a removal: the take-back commits), and a truncation or an in-place
        // write of `zarr.json` that were accepted (they change nothing).
        let unchanged = match &res {
            Err(_) => !(renamed && removed),
            Ok(()) => matches!(step, Step::Truncate | Step::WriteJson),
        };
        if unchanged {
            let after = source::snapshot(&dir);
            assert!(
                before == after,
                "{step:?}/{pick} ({res:?}) changed the source"
            );
        }
        match res {
            Ok(()) => {
                removed |= matches!(step, Step::Unlink);
                if renamed {
                    shape = read_json(&t, &meta_path).map(|m| m["shape"].clone());
                }
                out.applied.push(format!("{step:?}/{pick}"));
            }
            Err(e) => out.refused.push(format!("{step:?}/{pick}: {e}")),
        }
    }
    drop(t);
    let again = match Tree::from_source(&path, options(false)) {
        Ok(t) => t,
        Err(e) => panic!("the source does not open after the steps {out:?}: {e}"),
    };
    // What the view showed at the end is what the source holds: a reopen shows the array
    // with the same shape.
    let reopened = read_json(&again, &meta_path).map(|m| m["shape"].clone());
    assert_eq!(
        reopened, shape,
        "{meta_path}: the shape shown before and after a reopen differ ({out:?})"
    );
    walk(&again, u64::from(*k));
    out
}

/// The inode of `path` (components separated by `/`) from the root.
pub(super) fn find(t: &Tree, path: &str) -> Option<u64> {
    let mut ino = ROOT_INO;
    for part in path.split('/') {
        ino = t.lookup(ino, part).ok()?.ino;
    }
    Some(ino)
}

/// The path (from the root) of the first array of the Zarr view, in listing order, at most
/// two levels below `zarr/`.
fn first_array(t: &Tree) -> Option<String> {
    let mut dirs = vec!["zarr".to_owned()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for d in dirs {
            let ino = find(t, &d)?;
            let Ok(listing) = t.readdir(ino, 2) else {
                continue;
            };
            for e in listing.take(16) {
                if e.kind != EntryKind::Directory {
                    continue;
                }
                let sub = format!("{d}/{}", e.name);
                if let Some(Value::Object(m)) = read_json(t, &format!("{sub}/zarr.json"))
                    && m.get("node_type").and_then(Value::as_str) == Some("array")
                {
                    return Some(sub);
                }
                next.push(sub);
            }
        }
        dirs = next;
    }
    None
}

/// Reads a whole file of at most [`WHOLE_MAX`] bytes (a chunk object written whole).
fn read_all(t: &Tree, rel: &str) -> Option<Vec<u8>> {
    read_at_most(t, rel, WHOLE_MAX)
}

/// Reads up to `max` bytes of file `rel` through one handle.
pub(super) fn read_at_most(t: &Tree, rel: &str, max: u64) -> Option<Vec<u8>> {
    let ino = find(t, rel)?;
    let size = t.getattr(ino).ok()?.size.min(max);
    let fh = t.open(ino, libc::O_RDONLY).ok()?;
    let mut got = Vec::new();
    while (got.len() as u64) < size {
        match t.read(ino, fh, got.len() as u64, 1 << 20) {
            Ok(d) if !d.is_empty() => got.extend_from_slice(&d),
            _ => break,
        }
    }
    let _ = t.release(fh);
    Some(got)
}

fn read_json(t: &Tree, rel: &str) -> Option<Value> {
    serde_json::from_slice(&read_all(t, rel)?).ok()
}

/// The key of chunk `pick` of an array of `ndim` dimensions: the first chunk, or along the
/// first axis the second or the last one.
fn chunk_key(meta: &Value, pick: usize) -> String {
    let shape: Vec<u64> = meta["shape"]
        .as_array()
        .map(|s| s.iter().filter_map(Value::as_u64).collect())
        .unwrap_or_default();
    let chunk0 = meta["chunk_grid"]["configuration"]["chunk_shape"][0]
        .as_u64()
        .unwrap_or(1)
        .max(1);
    if shape.is_empty() {
        return "c".into();
    }
    let rows = shape[0].div_ceil(chunk0).max(1);
    let first = match pick % 3 {
        0 => 0,
        1 => 1.min(rows - 1),
        _ => rows - 1,
    };
    let mut key = format!("c/{first}");
    for _ in 1..shape.len() {
        key.push_str("/0");
    }
    key
}

/// Writes `bytes` to a new file `name` in directory `dir` and renames it over `zarr.json`
/// there.
fn rename_over(t: &Tree, dir: &str, name: &str, bytes: &[u8]) -> Result<(), TreeError> {
    put_via(t, dir, name, "zarr.json", bytes, false)
}

/// Writes `bytes` to a new file `tmp` of directory `dir` and renames it to `target` there
/// (or links it, with `link`); `tmp` is removed when that fails, and after a link.
pub(super) fn put_via(
    t: &Tree,
    dir: &str,
    tmp: &str,
    target: &str,
    bytes: &[u8],
    link: bool,
) -> Result<(), TreeError> {
    let dino = find(t, dir).ok_or(TreeError::NotFound)?;
    let (attr, fh) = t.create(dino, tmp)?;
    let wrote = t.write(attr.ino, fh, 0, bytes);
    let closed = t.release(fh);
    let done = wrote.and(closed).and_then(|_| match link {
        true => t.link(attr.ino, dino, target).map(|_| ()),
        false => t.rename(dino, tmp, dino, target, false),
    });
    if done.is_err() || link {
        let _ = t.unlink(dino, tmp);
    }
    done
}

fn run_step(
    t: &Tree,
    array: &str,
    step: Step,
    pick: usize,
    payload: &[u8],
) -> Result<(), TreeError> {
    let meta_path = format!("{array}/zarr.json");
    let meta = read_json(t, &meta_path).ok_or(TreeError::NotFound)?;
    let key = format!("{array}/{}", chunk_key(&meta, pick));
    let with_len = |m: &Value| {
        let mut m = m.clone();
        if let Some(s0) = m["shape"].get_mut(0) {
            let old = s0.as_u64().unwrap_or(0);
            *s0 = Value::from(lengths(old)[pick % 8]);
        }
        m
    };
    match step {
        Step::Resize => {
            let m = with_len(&meta);
            rename_over(
                t,
                array,
                ".zarr.json.resize",
                &serde_json::to_vec(&m).unwrap(),
            )?;
            shows_shape(t, &meta_path, &m);
            Ok(())
        }
        Step::ResizeWithAttrs => {
            let mut m = with_len(&meta);
            if let Ok(a @ Value::Object(_)) = serde_json::from_slice::<Value>(payload) {
                m["attributes"] = a;
            }
            rename_over(
                t,
                array,
                ".zarr.json.attrs",
                &serde_json::to_vec(&m).unwrap(),
            )?;
            shows_shape(t, &meta_path, &m);
            Ok(())
        }
        Step::RawJson => rename_over(t, array, ".zarr.json.raw", payload),
        Step::WriteJson => write_at(t, &meta_path, OFFSETS[pick % 8], payload),
        Step::WriteChunk => write_at(t, &key, OFFSETS[pick % 8], payload),
        Step::WriteWhole => {
            let ino = find(t, &key).ok_or(TreeError::NotFound)?;
            let size = t.getattr(ino)?.size;
            if size == 0 || size > WHOLE_MAX || payload.is_empty() {
                return Ok(());
            }
            let whole: Vec<u8> = payload
                .iter()
                .copied()
                .cycle()
                .take(size as usize)
                .collect();
            write_at(t, &key, 0, &whole)?;
            // Bytes of an edge chunk beyond the array's shape are not data: Zarr readers
            // ignore them, and b2fs shows them as the fill value. What must read back is the
            // part inside the shape: all of an inner chunk, the leading part of a 1-D edge
            // chunk (other edge chunks are not checked).
            let inside = inside_len(&meta, &key, size);
            let shown = read_all(t, &key).unwrap_or_default();
            assert!(
                shown.len() as u64 == size && shown[..inside] == whole[..inside],
                "{key} does not read back as written whole ({inside} of {size} bytes checked)"
            );
            Ok(())
        }
        Step::Unlink => {
            let (parent, name) = key.rsplit_once('/').unwrap_or((array, "c"));
            let pino = find(t, parent).ok_or(TreeError::NotFound)?;
            t.unlink(pino, name)?;
            // A removed chunk reads as the fill value (zeros) inside the shape, if shown.
            if let Some(shown) = read_all(t, &key) {
                let inside = inside_len(&meta, &key, shown.len() as u64);
                assert!(
                    shown[..inside].iter().all(|&b| b == 0),
                    "{key} is not zeros after its removal"
                );
            }
            Ok(())
        }
        Step::Truncate => {
            let ino = find(t, &key).ok_or(TreeError::NotFound)?;
            t.set_size(ino, OFFSETS[pick % 8])
        }
    }
}

/// After an applied rename of `zarr.json`: the view shows the shape that was asked for.
fn shows_shape(t: &Tree, meta_path: &str, asked: &Value) {
    let shown = read_json(t, meta_path).unwrap_or_default();
    assert_eq!(
        shown["shape"], asked["shape"],
        "{meta_path} after an applied rename shows another shape"
    );
}

/// How many leading bytes of chunk object `key` (of `size` bytes) lie inside the array's
/// shape and must read back as written: all of them for a chunk inside the shape along every
/// axis; for a 1-D array's last chunk, its items before the end; else none.
fn inside_len(meta: &Value, key: &str, size: u64) -> usize {
    let dims = |v: &Value| -> Vec<u64> {
        v.as_array()
            .map(|s| s.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default()
    };
    let shape = dims(&meta["shape"]);
    let chunk = dims(&meta["chunk_grid"]["configuration"]["chunk_shape"]);
    let index: Vec<u64> = key
        .rsplit("/c")
        .next()
        .unwrap_or("")
        .split('/')
        .filter_map(|p| p.parse().ok())
        .collect();
    if shape.len() != chunk.len() || index.len() != shape.len() || chunk.contains(&0) {
        return 0;
    }
    let ends_inside = |d: usize| (index[d] + 1).saturating_mul(chunk[d]) <= shape[d];
    if (0..shape.len()).all(ends_inside) {
        return size as usize;
    }
    if shape.len() == 1 {
        let items = shape[0].saturating_sub(index[0] * chunk[0]);
        return (size / chunk[0] * items).min(size) as usize;
    }
    0
}

/// Writes `bytes` at `at` into file `rel` through one handle, then closes it (the commit).
fn write_at(t: &Tree, rel: &str, at: u64, bytes: &[u8]) -> Result<(), TreeError> {
    let ino = find(t, rel).ok_or(TreeError::NotFound)?;
    let fh = t.open(ino, libc::O_WRONLY)?;
    let wrote = t.write(ino, fh, at, bytes);
    let closed = t.release(fh);
    wrote.map(|_| ()).and(closed)
}
