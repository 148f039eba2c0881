//! Resizes of the bytes view of a frame that records no dtype (`src/tree/zarr/resize.rs`):
//! shown as `uint8` bytes while its length is no multiple of its typesize, it resizes to
//! other such lengths, and is refused a length the view would show as items instead.

use b2fs::tree::Tree;
use serde_json::json;

use super::json_at;
use super::metadata::rename_json_over;
use crate::support::no_prefetch as opts;
use crate::support::{python, python_says, run_python};

/// python-blosc2's SChunk of 349 bytes, typesize 4, chunks of 64 bytes: the view shows its
/// bytes. A resize to 348 (87 items of 4 bytes: the view would show `[87, 4]`) is refused
/// with EPERM and the source left byte for byte; one to 350 grows it, read back by
/// python-blosc2 with the old bytes and a zero.
#[test]
fn the_bytes_view_of_a_dtype_less_frame_resizes_only_to_lengths_it_can_show() {
    let py = or_skip!(python(
        "the_bytes_view_of_a_dtype_less_frame_resizes_only_to_lengths_it_can_show"
    ));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("raw.b2frame");
    let make = "import sys, blosc2\n\
        blosc2.SChunk(chunksize=64, data=bytes(range(256)) + bytes(range(93)), \
        cparams={'typesize': 4}, urlpath=sys.argv[1], mode='w')\n";
    run_python(&py, &["-c", make, src.to_str().unwrap()]);
    let before = std::fs::read(&src).unwrap();
    let t = Tree::from_source(&src, opts(true)).unwrap();
    let doc = json_at(&t, "zarr/raw/zarr.json");
    assert_eq!(doc["shape"], json!([349]), "{doc}");
    assert_eq!(doc["data_type"], "uint8", "{doc}");
    let resized = |len: u64| {
        let mut d = doc.clone();
        d["shape"] = json!([len]);
        rename_json_over(&t, "zarr/raw", &serde_json::to_vec(&d).unwrap())
    };
    let err = resized(348).unwrap_err();
    assert_eq!(err.errno(), libc::EPERM, "{err}");
    assert_eq!(json_at(&t, "zarr/raw/zarr.json")["shape"], json!([349]));
    assert!(std::fs::read(&src).unwrap() == before, "the source changed");
    resized(350).unwrap();
    assert_eq!(json_at(&t, "zarr/raw/zarr.json")["shape"], json!([350]));
    drop(t);
    let read = "import sys, blosc2\n\
        s = blosc2.open(sys.argv[1])\n\
        print(s.nbytes, bytes(s.get_slice()).hex())\n";
    let out = python_says(&py, &["-c", read, src.to_str().unwrap()]);
    let (nbytes, hex) = out.trim().split_once(' ').unwrap();
    assert_eq!(nbytes, "350");
    let mut want: Vec<u8> = (0..=255u8).chain(0..93).collect();
    want.push(0);
    // python-blosc2 slices SChunks by whole items (typesize 4): 87 of the 350 bytes.
    let got = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect::<Vec<u8>>();
    assert_eq!(got, want[..got.len()], "the bytes python-blosc2 reads");
    assert_eq!(got.len(), 348);
    let chunk5 = "import sys, blosc2\n\
        s = blosc2.open(sys.argv[1])\n\
        print(s.decompress_chunk(5).hex())\n";
    let out = python_says(&py, &["-c", chunk5, src.to_str().unwrap()]);
    assert_eq!(
        out.trim(),
        hex_of(&want[320..]),
        "the last chunk, grown by a zero"
    );
}

fn hex_of(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
