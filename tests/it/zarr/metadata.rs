//! Writes of `zarr.json` through the Zarr view: an identical rewrite through a mount changes
//! nothing; a truncation is refused unless it starts a rewrite; a `zarr.json` renamed over
//! the old one commits its attributes to the source's vlmeta (python-blosc2 reads them back),
//! and every other change is refused with the source left as it was.

use b2fs::tree::Tree;
use serde_json::Value;

use super::{ino, json_at, read_all};
use crate::support::no_prefetch as opts;
use crate::support::{Mount, b2fs, fuse_and_python, python, python_says};

#[test]
fn an_identical_rewrite_of_a_zarr_json_through_a_mount_changes_nothing() {
    let Some(py) =
        fuse_and_python("an_identical_rewrite_of_a_zarr_json_through_a_mount_changes_nothing")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("same.b2nd");
    super::float32_b2nd(&py, &src, &[("units", "'m'")]);
    let before = std::fs::read(&src).unwrap();
    let m = Mount::daemon(&src, &["rw"]);
    for rel in ["zarr/same/zarr.json", "zarr/zarr.json"] {
        let path = m.path(rel);
        let doc = std::fs::read(&path).unwrap();
        assert!(doc.len() > 100, "{rel}");
        // In place (open with O_TRUNC, write, close), as json.dump into open(path, "w") does.
        std::fs::write(&path, &doc).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert_eq!(std::fs::read(&path).unwrap(), doc, "{rel}");
        // Through a temp file renamed over it.
        let tmp = path.with_file_name(".zarr.json.tmp");
        std::fs::write(&tmp, &doc).unwrap();
        std::fs::rename(&tmp, &path).unwrap_or_else(|e| panic!("{rel}: rename: {e}"));
        assert_eq!(std::fs::read(&path).unwrap(), doc, "{rel} after the rename");
        assert!(!tmp.exists(), "{rel}: the temp file stays");
        // A change is refused (EPERM), in place and by rename.
        let changed = String::from_utf8(doc.clone())
            .unwrap()
            .replace("\"zarr_format\": 3", "\"zarr_format\": 2");
        assert_ne!(changed.as_bytes(), &doc[..]);
        let err = std::fs::write(&path, &changed).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{rel}: {err}");
        std::fs::write(&tmp, &changed).unwrap();
        let err = std::fs::rename(&tmp, &path).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{rel}: {err}");
        std::fs::remove_file(&tmp).unwrap();
        // A shorter truncate (a setattr through the kernel) is refused too.
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let err = f.set_len(10).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPERM), "{rel}: {err}");
        drop(f);
        // `: > zarr.json`: emptied and never written back. close(2) cannot say so (the
        // kernel releases after it returns); `b2fs log` does, and the file is unchanged.
        drop(std::fs::File::create(&path).unwrap());
        let said = (0..100).find_map(|_| {
            let log = b2fs().arg("log").arg(&m.mp).output().unwrap();
            let log = String::from_utf8_lossy(&log.stdout).into_owned();
            let told = log.lines().any(|l| {
                l.contains(&format!("/{rel}"))
                    && l.contains("release")
                    && l.contains("not written back whole")
            });
            if told {
                return Some(log);
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            None
        });
        assert!(said.is_some(), "{rel}: `b2fs log` never told the refusal");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            doc,
            "{rel} after the refusals"
        );
    }
    m.umount();
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
}

/// A `zarr.json` truncated to any size but its own is refused with EPERM and left as it was
/// (it was accepted and changed nothing: the file silently kept its size); `O_TRUNC`, and
/// `ftruncate` to 0 on a descriptor open for writing, still start an identical rewrite. Tree
/// API on a b2nd python-blosc2 wrote.
#[test]
fn truncating_a_zarr_json_is_refused_unless_it_starts_a_rewrite() {
    let py = or_skip!(python(
        "truncating_a_zarr_json_is_refused_unless_it_starts_a_rewrite"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("t.b2nd");
    super::float32_b2nd(&py, &src, &[]);
    let before = std::fs::read(&src).unwrap();
    let t = Tree::from_source(&src, opts(true)).unwrap();
    for rel in ["zarr/t/zarr.json", "zarr/zarr.json"] {
        let o = ino(&t, rel);
        let doc = read_all(&t, o, 4096);
        let len = doc.len() as u64;
        assert!(len > 100, "{rel}");
        // No descriptor open: shorter, 0 and longer are refused; its own size is accepted.
        for size in [len - 1, 10, 0, len + 1] {
            let err = t.set_size(o, size).unwrap_err();
            assert_eq!(err.errno(), libc::EPERM, "{rel} to {size}: {err}");
            assert_eq!(t.getattr(o).unwrap().size, len, "{rel}");
        }
        t.set_size(o, len).unwrap();
        // O_TRUNC, then the same bytes in two writes.
        let fh = t.open(o, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        t.write(o, fh, 0, &doc[..50]).unwrap();
        t.write(o, fh, 50, &doc[50..]).unwrap();
        t.release(fh).unwrap();
        // ftruncate to 0 on a descriptor open for writing, then the same bytes; a shorter
        // size on it is still refused.
        let fh = t.open(o, libc::O_WRONLY).unwrap();
        let err = t.set_size(o, 5).unwrap_err();
        assert_eq!(err.errno(), libc::EPERM, "{rel}: {err}");
        t.set_size(o, 0).unwrap();
        t.write(o, fh, 0, &doc).unwrap();
        t.release(fh).unwrap();
        assert!(read_all(&t, o, 4096) == doc, "{rel}");
        // Written back whole out of order (the second half first) is the same rewrite.
        let fh = t.open(o, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        t.write(o, fh, 60, &doc[60..]).unwrap();
        t.write(o, fh, 0, &doc[..60]).unwrap();
        t.release(fh).unwrap();
        // Emptied and not written back (`: > zarr.json`), or only in part: the last
        // release says EPERM; the file is unchanged either way.
        for part in [0, 60, doc.len() - 1] {
            let fh = t.open(o, libc::O_WRONLY | libc::O_TRUNC).unwrap();
            t.write(o, fh, 0, &doc[..part]).unwrap();
            let err = t.release(fh).unwrap_err();
            assert_eq!(
                err.errno(),
                libc::EPERM,
                "{rel}, {part} bytes written: {err}"
            );
            assert!(read_all(&t, o, 4096) == doc, "{rel}");
        }
        // A gap in the middle is not whole either; two writers: only the last release checks.
        let fh = t.open(o, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        let fh2 = t.open(o, libc::O_WRONLY).unwrap();
        t.write(o, fh, 0, &doc[..40]).unwrap();
        t.write(o, fh2, 50, &doc[50..]).unwrap();
        t.release(fh).unwrap();
        assert_eq!(t.release(fh2).unwrap_err().errno(), libc::EPERM, "{rel}");
        // The next identical rewrite starts afresh.
        let fh = t.open(o, libc::O_WRONLY | libc::O_TRUNC).unwrap();
        t.write(o, fh, 0, &doc).unwrap();
        t.release(fh).unwrap();
    }
    drop(t);
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
}

/// Renames a temp file holding `doc` over `zarr.json` in Zarr directory `dir` (tree path)
/// of `t`, as zarr-python writes metadata.
pub(super) fn rename_json_over(
    t: &Tree,
    dir: &str,
    doc: &[u8],
) -> Result<(), b2fs::tree::TreeError> {
    let d = ino(t, dir);
    let tmp = temp_json_name(doc);
    let (attr, fh) = t.create(d, &tmp).unwrap();
    t.write(attr.ino, fh, 0, doc).unwrap();
    t.release(fh).unwrap();
    t.rename(d, &tmp, d, "zarr.json", false)
}

/// The temp file [`rename_json_over`] writes `doc` into (one name per content).
pub(super) fn temp_json_name(doc: &[u8]) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    doc.hash(&mut h);
    format!("zarr.{:016x}.partial", h.finish())
}

/// A `zarr.json` renamed over the old one with other attributes commits them to the
/// source's vlmeta (python-blosc2 reads them back); any other change (the shape, the data
/// type), attributes that are no object and attributes of the root group of a one-array
/// mount are refused with EPERM and leave the source byte-identical and the temp file in
/// place; the same attributes with another `consolidated_metadata` change nothing. Tree
/// API on a b2nd python-blosc2 wrote.
#[test]
fn attribute_edits_through_zarr_json_commit_and_every_other_change_is_refused() {
    let py = or_skip!(python(
        "attribute_edits_through_zarr_json_commit_and_every_other_change_is_refused"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("temps.b2nd");
    super::float32_b2nd(&py, &src, &[("units", "'m'")]);
    let vlmeta = || {
        python_says(
            &py,
            &[
                "-c",
                "import sys, json, blosc2; a = blosc2.open(sys.argv[1]); \
                 print(json.dumps(dict(a.vlmeta), sort_keys=True))",
                src.to_str().unwrap(),
            ],
        )
    };
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let shown = json_at(&t, "zarr/temps/zarr.json");
    assert_eq!(shown["attributes"], serde_json::json!({"units": "m"}));
    let before = std::fs::read(&src).unwrap();
    let with = |f: &dyn Fn(&mut Value)| {
        let mut doc = shown.clone();
        f(&mut doc);
        serde_json::to_vec(&doc).unwrap()
    };
    // Refused, each leaving the source and the view as they were, and the temp file.
    let refusals: [(&str, Vec<u8>); 4] = [
        (
            "a resize of an axis but the first",
            with(&|d| d["shape"] = serde_json::json!([20, 40])),
        ),
        (
            "another data type",
            with(&|d| d["data_type"] = "float64".into()),
        ),
        (
            "attributes that are a list",
            with(&|d| d["attributes"] = serde_json::json!([1])),
        ),
        ("no JSON", b"{\"attributes\": ".to_vec()),
    ];
    for (what, doc) in &refusals {
        let err = rename_json_over(&t, "zarr/temps", doc).unwrap_err();
        assert_eq!(err.errno(), libc::EPERM, "{what}");
        let tmp = temp_json_name(doc);
        assert!(t.lookup(ino(&t, "zarr/temps"), &tmp).is_ok(), "{what}");
        assert!(
            std::fs::read(&src).unwrap() == before,
            "{what}: the source changed"
        );
        assert_eq!(json_at(&t, "zarr/temps/zarr.json"), shown, "{what}");
    }
    // A document past twice the view's and 16 MiB is not parsed: EFBIG.
    let shown_len = serde_json::to_vec_pretty(&shown).unwrap().len();
    let mut huge = with(&|d| d["attributes"] = serde_json::json!({"pad": ""}));
    let pad = 2 * shown_len + (16 << 20);
    let at = huge.len() - 3;
    huge.splice(at..at, std::iter::repeat_n(b'x', pad));
    let err = rename_json_over(&t, "zarr/temps", &huge).unwrap_err();
    assert_eq!(err.errno(), libc::EFBIG);
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
    // The root group of a one-array mount has no attributes of its own.
    let root = json_at(&t, "zarr/zarr.json");
    let mut other = root.clone();
    other["attributes"] = serde_json::json!({"title": "x"});
    let err = rename_json_over(&t, "zarr", &serde_json::to_vec(&other).unwrap()).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    // Its own attributes without the consolidated metadata (or with another copy of it):
    // nothing changes, the temp file goes.
    let mut bare = root.clone();
    bare.as_object_mut()
        .unwrap()
        .remove("consolidated_metadata");
    let bare = serde_json::to_vec(&bare).unwrap();
    rename_json_over(&t, "zarr", &bare).unwrap();
    assert!(t.lookup(ino(&t, "zarr"), &temp_json_name(&bare)).is_err());
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
    // New attributes, with the fill value spelled `0` and zarr-python's empty
    // `storage_transformers`: committed at the rename.
    let doc = with(&|d| {
        d["attributes"] = serde_json::json!({"units": "km", "scale": [1, 2]});
        d["fill_value"] = 0.into();
        d["storage_transformers"] = serde_json::json!([]);
    });
    rename_json_over(&t, "zarr/temps", &doc).unwrap();
    assert!(
        t.lookup(ino(&t, "zarr/temps"), &temp_json_name(&doc))
            .is_err()
    );
    let now = json_at(&t, "zarr/temps/zarr.json");
    assert_eq!(
        now["attributes"],
        serde_json::json!({"units": "km", "scale": [1, 2]})
    );
    assert_eq!(now["shape"], shown["shape"]);
    let root_now = json_at(&t, "zarr/zarr.json");
    assert_eq!(
        root_now["consolidated_metadata"]["metadata"]["temps"]["attributes"],
        now["attributes"]
    );
    drop(t);
    assert_eq!(vlmeta(), r#"{"scale": [1, 2], "units": "km"}"#);
}
