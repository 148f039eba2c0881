//! New arrays through the Zarr view when other writers and the kernel's order of requests
//! get in the way (`src/tree/zarr/create.rs`, docs/ZARR.md "New arrays and groups"): a key
//! another writer takes in a `.b2d` store between the view's checks and the store's lock,
//! temp files of a directory that became an array, errors after the effect, a pending
//! directory whose name another writer's member takes, nested pending directories.

use serde_json::json;

use b2fs::tree::Tree;

use super::create::{doc, listing, put, sources, zstd_codecs};
use super::{ino, json_at, names};
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says, run_python};

/// The keys of `.b2d` store `store` as python-blosc2's `DictStore` lists them.
fn keys(py: &std::path::Path, store: &std::path::Path) -> String {
    python_says(
        py,
        &[
            "-c",
            "import sys, blosc2\n\
             with blosc2.DictStore(sys.argv[1], mode='r') as s:\n\
             \x20   print(sorted(s.keys()))",
            store.to_str().unwrap(),
        ],
    )
}

/// A `.b2d` store: python-blosc2 embeds the key `/t` after the view's `mkdir t` (the view
/// checked the name, its listing of the store is older). The array's `zarr.json` is refused
/// with EEXIST under the store's lock, and the store is as python-blosc2 left it: one key
/// `/t`, no `t.b2nd` beside it.
#[test]
fn a_key_another_writer_embeds_meanwhile_is_not_made_twice() {
    let py = or_skip!(python(
        "a_key_another_writer_embeds_meanwhile_is_not_made_twice"
    ));
    let dir = tempfile::tempdir().unwrap();
    let b2d = dir.path().join("s.b2d");
    run_python(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2\n\
             with blosc2.DictStore(sys.argv[1], mode='w') as s:\n\
             \x20   s['/a'] = np.arange(5)",
            b2d.to_str().unwrap(),
        ],
    );
    let t = Tree::from_source(&b2d, opts(true)).unwrap();
    let z = ino(&t, "zarr");
    let made = t.mkdir(z, "t").unwrap();
    // Another writer embeds the key `/t` (a value under its `threshold`: python-blosc2 keeps
    // it in embed.b2e, no file of its own) after the view's checks, before the store is
    // written.
    let (py2, store) = (py.clone(), b2d.clone());
    t.on_zarr_create(Box::new(move |_| {
        run_python(
            &py2,
            &[
                "-c",
                "import sys, numpy as np, blosc2\n\
                 with blosc2.DictStore(sys.argv[1], mode='a', threshold=1 << 20) as s:\n\
                 \x20   s['/t'] = np.arange(3)",
                store.to_str().unwrap(),
            ],
        );
    }));
    let d = doc("int16", &[7], &[3], json!(-1), zstd_codecs());
    let err = put(&t, made.ino, "zarr.json.1.partial", "zarr.json", &d).unwrap_err();
    let before = listing(&b2d);
    assert_eq!(err, libc::EEXIST);
    assert_eq!(
        before,
        ["a.b2nd", "embed.b2e"],
        "no t.b2nd beside the embedded /t"
    );
    assert_eq!(keys(&py, &b2d), "['/a', '/t']");
}

/// The same window, where the other writer writes the key as its own file `u.b2nd`
/// (python-blosc2's default): the link finds it (EEXIST, not EIO) and it is left as it was.
#[test]
fn a_file_another_writer_makes_meanwhile_is_eexist_and_kept() {
    let py = or_skip!(python(
        "a_file_another_writer_makes_meanwhile_is_eexist_and_kept"
    ));
    let dir = sources(&py);
    let t = Tree::from_source(dir.path(), opts(true)).unwrap();
    let made = t.mkdir(ino(&t, "zarr"), "u").unwrap();
    let (py2, at) = (py.clone(), dir.path().join("u.b2nd"));
    t.on_zarr_create(Box::new(move |_| {
        run_python(
            &py2,
            &[
                "-c",
                "import sys, numpy as np, blosc2\n\
                 blosc2.asarray(np.arange(3), urlpath=sys.argv[1], mode='w')",
                at.to_str().unwrap(),
            ],
        );
    }));
    let d = doc("int16", &[7], &[3], json!(-1), zstd_codecs());
    let err = put(&t, made.ino, "zarr.json.1.partial", "zarr.json", &d).unwrap_err();
    assert_eq!(err, libc::EEXIST);
    assert_eq!(listing(dir.path()), ["a.b2nd", "u.b2nd"]);
    let got = python_says(
        &py,
        &[
            "-c",
            "import sys, blosc2; print(blosc2.open(sys.argv[1])[...].tolist())",
            dir.path().join("u.b2nd").to_str().unwrap(),
        ],
    );
    assert_eq!(got, "[0, 1, 2]");
}
