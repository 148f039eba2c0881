//! Commits to bcolz carrays (also ctable columns) and `__attrs__` files, and the JSON text
//! bcolz writes (`json.dumps(..., ensure_ascii=True)`: `", "` / `": "` separators, non-ASCII as
//! `\uXXXX`, then `"\n"`).
//!
//! Knows nothing of chunk data (Blosc1 headers only). Spec: `docs/format/CONTAINERS.md` 5.1 (layout,
//! the `blpk` prefix, the leftover chunk), 5.5 (`__attrs__` must exist) and 6.4 (commit
//! order): every new or replaced chunk in a temp file of the commit's own
//! (`.b2fs-PID-T-N-__N.blp.b2fs-tmp`, made where no file is: `leftover.rs`, `own_temp`), fsync,
//! renamed to `__N.blp`;
//! data directory fsync; `__attrs__` by temp + rename; `meta/sizes` by temp + rename +
//! directory fsync (the commit point for growth and shrinkage); chunk files beyond the new end
//! removed last. When the row count shrinks, `meta/sizes` goes first instead (see
//! [`Prepared::apply`]): a replaced last chunk with fewer rows must not be visible while the
//! old, longer length still is.
//!
//! A column of a ctable cannot change its row count here alone ([`commit`] refuses):
//! `table.rs` changes every column in one ordered commit.
//!
//! Known limit (bcolz has no multi-file transaction): a replaced chunk is visible to readers
//! as soon as its rename lands, before `meta/sizes` changes.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::io::Io;
use super::{Edit, Slot, changed, io_err, plan, refused, unsupported};
use crate::codec::ChunkFormat;
use crate::container::bcolz::{BLP_HEADER_LEN, Carray};
use crate::container::leftover::TEMP_SUFFIX;
use crate::container::{Array, ContainerError};

/// The 16-byte bloscpack prefix bcolz writes before each chunk: `blpk`, version 1, three zero
/// bytes, int64 LE nchunks = 1.
const BLP_PREFIX: [u8; BLP_HEADER_LEN] = *b"blpk\x01\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00";

/// Appends `s` as a python `json.dumps` string literal (ensure_ascii).
fn py_string(s: &str, out: &mut String) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// `value` as python's `json.dumps(value, ensure_ascii=True)` writes it.
pub(super) fn py_json(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => py_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_json(v, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                py_string(k, out);
                out.push_str(": ");
                py_json(v, out);
            }
            out.push('}');
        }
    }
}

/// The file content bcolz writes for a JSON metadata value (JSON + newline).
fn json_file(value: &Value) -> Vec<u8> {
    let mut s = String::new();
    py_json(value, &mut s);
    s.push('\n');
    s.into_bytes()
}

/// Replaces `<dir>/__attrs__` with `attrs` (a JSON object) atomically.
pub(super) fn write_attrs(dir: &Path, attrs: &Value, io: &mut Io) -> Result<(), ContainerError> {
    if !attrs.is_object() {
        return Err(refused(dir, "attrs: not a JSON object"));
    }
    io.replace(&dir.join("__attrs__"), &json_file(attrs))
}

/// Commits `edit` to the carray `c` of `array`.
pub(super) fn commit(
    array: &Array,
    c: &Carray,
    edit: &Edit,
    io: &mut Io,
) -> Result<(), ContainerError> {
    let slots = plan(array, edit, ChunkFormat::Blosc1)?;
    let prepared = prepare(array, c, slots, edit.attrs.as_ref())?;
    if prepared.len != prepared.old_len
        && let Some(table) = table_of(array.path())
    {
        return Err(refused(
            array.path(),
            format!(
                "changing the row count of a column of the ctable {} alone ({} -> {} rows): \
                     the columns must keep one length (commit it with commit_column)",
                table.display(),
                prepared.old_len,
                prepared.len
            ),
        ));
    }
    prepared.apply(io)
}

/// The ctable directory holding the carray at `root` as a column, if any: its parent has a
/// `__rootdirs__` whose names list `root`'s name.
pub(super) fn table_of(root: &Path) -> Option<&Path> {
    let parent = root.parent()?;
    let name = root.file_name()?.to_str()?;
    let text = std::fs::read(parent.join("__rootdirs__")).ok()?;
    let v: Value = serde_json::from_slice(&text).ok()?;
    let listed = v
        .get("names")?
        .as_array()?
        .iter()
        .any(|n| n.as_str() == Some(name));
    listed.then_some(parent)
}

/// A carray commit with every check done and every byte settled: [`Prepared::apply`] only
/// writes.
#[derive(Debug)]
pub(super) struct Prepared<'a> {
    root: &'a Path,
    slots: Vec<Slot<'a>>,
    old_n: usize,
    /// Rows before and after the commit.
    pub(super) old_len: u64,
    pub(super) len: u64,
    /// The new `meta/sizes` file, when it changes.
    sizes: Option<Vec<u8>>,
    attrs: Option<&'a Value>,
    /// `__attrs__` is missing and must be created (bcolz cannot open a carray without it).
    create_attrs: bool,
}

/// Checks `slots` (the new chunk list of `array`) against bcolz's rules and settles the new
/// `meta/sizes`: every chunk but the last holds chunklen rows, the last a positive number
/// of rows up to chunklen. Refuses when the carray changed on disk since `array` was opened.
pub(super) fn prepare<'a>(
    array: &'a Array,
    c: &Carray,
    slots: Vec<Slot<'a>>,
    attrs: Option<&'a Value>,
) -> Result<Prepared<'a>, ContainerError> {
    let root = array.path();
    let old_n = array.nchunks();
    let n = slots.len();
    let cs = c.chunksize();
    let chunklen = c.chunklen();
    let atom = cs / chunklen.max(1);
    if atom == 0 {
        return Err(unsupported(root, "writing a carray with 0-byte rows"));
    }
    let mut last = 0u64;
    for (p, s) in slots.iter().enumerate() {
        let size = match s {
            Slot::Old(i) => array.chunk_nbytes(*i)? as u64,
            Slot::New(_, h) => h.nbytes as u64,
        };
        let ok = if p + 1 < n {
            size == cs
        } else {
            size > 0 && size <= cs && size % atom == 0
        };
        if !ok {
            let want = if p + 1 < n {
                format!("{cs} (chunklen {chunklen} x {atom}-byte rows)")
            } else {
                format!("a multiple of {atom} up to {cs}")
            };
            let what = if matches!(s, Slot::Old(_)) {
                " (a partial chunk can only be the last one: update it to a full chunk in the same edit)"
            } else {
                ""
            };
            return Err(refused(
                root,
                format!("chunk {p}: {size} bytes uncompressed, bcolz needs {want}{what}"),
            ));
        }
        last = size;
    }
    let len = if n == 0 {
        0
    } else {
        (n as u64 - 1) * chunklen + last / atom
    };
    if array.changed_on_disk()? {
        return Err(changed(
            root,
            "meta/sizes, meta/storage or __attrs__ differ",
        ));
    }

    // Bookkeeping cbytes: old figure, minus replaced/removed chunks, plus new ones.
    let old_cb = |i: usize| array.chunk_header(i).map_or(0, |h| h.cbytes as u64);
    let mut cbytes = c.cbytes();
    for (p, s) in slots.iter().enumerate() {
        if let Slot::New(_, h) = s {
            if p < old_n {
                cbytes = cbytes.saturating_sub(old_cb(p));
            }
            cbytes = cbytes.saturating_add(h.cbytes as u64);
        }
    }
    for i in n..old_n {
        cbytes = cbytes.saturating_sub(old_cb(i));
    }

    // The new meta/sizes, settled before the first write.
    let changed = n != old_n || slots.iter().any(|s| matches!(s, Slot::New(..)));
    let sizes = if changed {
        let mut sizes = c.sizes().clone();
        let obj = sizes.as_object_mut().ok_or_else(|| {
            unsupported(&root.join("meta/sizes"), "meta/sizes is not a JSON object")
        })?;
        let mut shape: Vec<Value> = c.shape().iter().map(|&d| Value::from(d)).collect();
        if let Some(s0) = shape.first_mut() {
            *s0 = Value::from(len);
        }
        obj.insert("shape".into(), Value::Array(shape));
        obj.insert("nbytes".into(), Value::from(len.saturating_mul(atom)));
        obj.insert("cbytes".into(), Value::from(cbytes));
        Some(json_file(&sizes))
    } else {
        None
    };
    if let Some(a) = attrs
        && !a.is_object()
    {
        return Err(refused(root, "attrs: not a JSON object"));
    }
    Ok(Prepared {
        root,
        slots,
        old_n,
        old_len: c.shape().first().copied().unwrap_or(0),
        len,
        sizes,
        attrs,
        create_attrs: !root.join("__attrs__").exists(),
    })
}

impl Prepared<'_> {
    /// Performs the commit (`docs/format/CONTAINERS.md` 6.4). First every new chunk is
    /// written to its temp file (fsync), each read back from the edit's spool as it is
    /// written: nothing a reader sees has changed yet, so a failure there (a write, a
    /// read-back) removes those files and leaves the carray byte-identical. Then, growing or
    /// keeping the length: the temp files renamed over the chunk files, directory fsync,
    /// `__attrs__`, then `meta/sizes` (the commit point: rows past the old length appear),
    /// then chunk files past the new end are removed. Shrinking: `meta/sizes` first (the
    /// commit point: every slot still holds at least the rows it must show, since bcolz and
    /// b2fs read only the first rows of a longer last chunk), then the renames, `__attrs__`,
    /// removals.
    pub(super) fn apply(&self, io: &mut Io) -> Result<(), ContainerError> {
        let staged = self.stage(io)?;
        let done = self.finish(&staged, io);
        if done.is_err() && !io.crashed() {
            // The temp files not renamed yet (a `meta/sizes` that could not be replaced, a
            // rename that failed): never read, removed (the renamed ones are gone already).
            unstage(&staged);
        }
        done
    }

    /// The first part of [`Prepared::apply`]: every new chunk written to its temp file (a
    /// failure removes those made so far, but after a simulated crash); returns (temp,
    /// chunk file) pairs for [`Prepared::finish`]. Nothing a reader sees changes.
    pub(super) fn stage(&self, io: &mut Io) -> Result<Vec<(PathBuf, PathBuf)>, ContainerError> {
        let data = self.root.join("data");
        // Where the chunk files' temp files lie, looked up once (`io::temp_dir_in`: beside
        // the outermost `.b2d` store holding the carray, if any).
        let temps = super::io::temp_dir_in(&data);
        let mut staged = Vec::new();
        let staging = (|| {
            for (p, s) in self.slots.iter().enumerate() {
                if let Slot::New(chunk, _) = s {
                    let name = format!("__{p}.blp");
                    let tmp = temps.join(super::io::temp_name(name.as_ref(), TEMP_SUFFIX));
                    let target = data.join(name);
                    let bytes = chunk.bytes().map_err(|e| io_err(&target, e))?;
                    let mut file = Vec::with_capacity(BLP_HEADER_LEN + bytes.len());
                    file.extend_from_slice(&BLP_PREFIX);
                    file.extend_from_slice(&bytes);
                    drop(bytes);
                    // Only a file this commit made is staged (and so removed on failure).
                    io.create_new(&tmp, &file)?;
                    staged.push((tmp, target));
                }
            }
            Ok(())
        })();
        if let Err(e) = staging {
            if !io.crashed() {
                unstage(&staged);
            }
            return Err(e);
        }
        Ok(staged)
    }

    /// The rest of [`Prepared::apply`], after [`Prepared::stage`] made `staged`.
    pub(super) fn finish(
        &self,
        staged: &[(PathBuf, PathBuf)],
        io: &mut Io,
    ) -> Result<(), ContainerError> {
        let shrinking = self.len < self.old_len;
        let sizes_path = self.root.join("meta/sizes");
        let data = self.root.join("data");
        if shrinking && let Some(sizes) = &self.sizes {
            io.replace(&sizes_path, sizes)?;
        }
        for (tmp, target) in staged {
            io.rename(tmp, target)?;
        }
        if !staged.is_empty() {
            io.sync_dir(&data)?;
        }
        // Attributes (bcolz cannot open a carray without `__attrs__`).
        match self.attrs {
            Some(a) => write_attrs(self.root, a, io)?,
            None if self.create_attrs => {
                write_attrs(self.root, &Value::Object(Default::default()), io)?
            }
            None => {}
        }
        if !shrinking && let Some(sizes) = &self.sizes {
            io.replace(&sizes_path, sizes)?;
        }
        // Chunk files beyond the new end.
        for i in self.slots.len()..self.old_n {
            io.remove(&data.join(format!("__{i}.blp")))?;
        }
        Ok(())
    }
}

/// Removes temp files [`Prepared::stage`] made (best effort: what is left is never read).
pub(super) fn unstage(staged: &[(PathBuf, PathBuf)]) {
    for (tmp, _) in staged {
        let _ = std::fs::remove_file(tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn py_json_matches_python_dumps() {
        let v: Value =
            serde_json::from_str(r#"{"shape": [25, 3], "s": "K\u00e9\n\"x\" \ud83d\ude00", "f": 2.5, "n": null, "b": [true, {}]}"#)
                .unwrap_or_default();
        let mut s = String::new();
        py_json(&v, &mut s);
        assert_eq!(
            s,
            r#"{"shape": [25, 3], "s": "K\u00e9\n\"x\" \ud83d\ude00", "f": 2.5, "n": null, "b": [true, {}]}"#
        );
    }
}
