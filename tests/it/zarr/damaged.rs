//! A damaged chunk through the Zarr view (`src/tree/zarr/undo.rs`): removing its chunk object
//! zeroes it although it does not decode (the commit needs only its length), and a refused
//! resize after that puts back the healthy chunks it removed but never the damaged one.

use b2fs::tree::Tree;
use serde_json::json;

use super::metadata::rename_json_over;
use super::{ino, json_at, read_all};
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says, run_python, sha256_hex};

/// Overwrites the first block start of chunk `index` of frame file `path` (right after its
/// 32-byte header) with a value past any chunk: its header is intact (its length still
/// reads) but it no longer decodes.
pub(super) fn break_chunk(path: &std::path::Path, index: usize) {
    let b2fs::container::Container::Array(a) = b2fs::container::open(path).unwrap() else {
        panic!("{}: not an array", path.display());
    };
    let chunk = a.chunk_bytes(index).unwrap().into_owned();
    let mut file = std::fs::read(path).unwrap();
    let at = file
        .windows(chunk.len())
        .position(|w| w == chunk.as_slice())
        .expect("the chunk in its file")
        + 32;
    file[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    std::fs::write(path, file).unwrap();
}

/// SHA-256 of each 50x50 chunk region `(i, j)` of the (100, 100) float64 b2nd at argv[1] as
/// python-blosc2 reads it ("bad" where it cannot), and whether the whole array reads as
/// `arange` but for the regions listed in argv[2] (zeros there).
const CHECK: &str = "import sys, json, hashlib, numpy as np, blosc2\n\
    a = blosc2.open(sys.argv[1])\n\
    def sha(i, j):\n\
    \x20   try:\n\
    \x20       r = np.ascontiguousarray(a[50*i:50*i+50, 50*j:50*j+50])\n\
    \x20   except Exception:\n\
    \x20       return 'bad'\n\
    \x20   return hashlib.sha256(r.tobytes()).hexdigest()\n\
    out = {f'{i}/{j}': sha(i, j) for i in range(2) for j in range(2)}\n\
    try:\n\
    \x20   v = a[...]\n\
    \x20   w = np.arange(10000, dtype=np.float64).reshape(100, 100)\n\
    \x20   for k in json.loads(sys.argv[2]):\n\
    \x20       i, j = map(int, k.split('/'))\n\
    \x20       w[50*i:50*i+50, 50*j:50*j+50] = 0\n\
    \x20   out['whole'] = bool((v == w).all())\n\
    except Exception:\n\
    \x20   out['whole'] = 'bad'\n\
    print(json.dumps(out))\n";

/// A chunk python-blosc2 wrote, damaged on purpose so that neither python-blosc2 nor b2fs
/// decodes it, is zeroed by removing its chunk object (it used to be EIO: the removal decoded
/// it to keep its content): it then reads as zeros through the view and in python-blosc2,
/// which opens the array, and every other chunk object is byte-identical to what
/// python-blosc2 reads. A resize refused after removals of the damaged chunk and a healthy
/// one puts back the healthy one only: the damaged one's content was never kept (a take-back
/// writes only what it decoded), and the array stays readable.
#[test]
fn removing_a_damaged_chunk_object_zeroes_it() {
    let py = or_skip!(python("removing_a_damaged_chunk_object_zeroes_it"));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("m.b2nd");
    let make = "import sys, numpy as np, blosc2\n\
        blosc2.asarray(np.arange(10000, dtype=np.float64).reshape(100, 100), chunks=(50, 50), \
        blocks=(25, 25), urlpath=sys.argv[1], mode='w')\n";
    let fresh = || {
        run_python(&py, &["-c", make, src.to_str().unwrap()]);
        break_chunk(&src, 1);
    };
    fresh();
    let check = |zeroed: &[&str]| -> serde_json::Value {
        let keys = serde_json::to_string(zeroed).unwrap();
        let out = python_says(&py, &["-c", CHECK, src.to_str().unwrap(), &keys]);
        serde_json::from_str(&out).unwrap()
    };
    let before = check(&[]);
    assert_eq!(before["0/1"], "bad", "the damage is real: {before}");
    assert_eq!(before["whole"], "bad");

    let t = Tree::from_source(&src, opts(true)).unwrap();
    let arr = "zarr/m";
    let doc = json_at(&t, &format!("{arr}/zarr.json"));
    let bad = ino(&t, &format!("{arr}/c/0/1"));
    let err = crate::support::tree_read(&t, bad, 1 << 20).unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "the view cannot read it either");
    t.unlink(ino(&t, &format!("{arr}/c/0")), "1")
        .expect("removing a damaged chunk object");
    let obj = |key: &str| obj_of(&t, arr, key);
    assert_eq!(obj("0/1"), vec![0u8; 50 * 50 * 8], "the chunk reads zeros");
    let after = check(&["0/1"]);
    assert_eq!(
        after["whole"], true,
        "python-blosc2 opens and reads it: {after}"
    );
    for key in ["0/0", "0/1", "1/0", "1/1"] {
        assert_eq!(after[key], json!(sha256_hex(&obj(key))), "chunk {key}");
    }
    for key in ["0/0", "1/0", "1/1"] {
        assert_eq!(after[key], before[key], "chunk {key} unchanged");
    }
    drop(t);

    // Removals of the damaged chunk and a healthy one, then a refused resize (another axis):
    // the healthy one is put back, the damaged one holds the fill value.
    fresh();
    assert_eq!(check(&[]), before);
    let t = Tree::from_source(&src, opts(true)).unwrap();
    for (parent, leaf) in [("c/0", "1"), ("c/1", "1")] {
        t.unlink(ino(&t, &format!("{arr}/{parent}")), leaf).unwrap();
    }
    assert_eq!(
        check(&["0/1", "1/1"])["whole"],
        true,
        "both removals commit"
    );
    let mut narrower = doc.clone();
    narrower["shape"] = json!([100, 50]);
    let err = rename_json_over(&t, arr, &serde_json::to_vec(&narrower).unwrap()).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM);
    let back = check(&["0/1"]);
    assert_eq!(
        back["whole"], true,
        "chunk (1, 1) is back, (0, 1) zeros: {back}"
    );
    assert_eq!(back["1/1"], before["1/1"]);
    assert_eq!(obj_of(&t, arr, "0/1"), vec![0u8; 50 * 50 * 8]);
}

fn obj_of(t: &Tree, arr: &str, key: &str) -> Vec<u8> {
    read_all(t, ino(t, &format!("{arr}/c/{key}")), 1 << 20)
}
