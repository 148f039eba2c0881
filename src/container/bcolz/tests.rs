//! Unit tests of the bcolz reader: dtype strings, present chunks from the listing, chunk file
//! and column names, JSON error offsets.

use std::ops::Range;

use super::chunks::chunk_file_index;
use super::ctable::column_name_ok;
use super::json::json_offset;
use super::*;

#[test]
fn dtype_info_numpy_strings() {
    let i = |s: &str| dtype_info(s).map(|d| (d.itemsize, d.blosc_typesize));
    assert_eq!(i("int32"), Some((4, 4)));
    assert_eq!(i("float64"), Some((8, 8)));
    assert_eq!(i("bool"), Some((1, 1)));
    assert_eq!(i("|S3"), Some((3, 1)));
    assert_eq!(i("<U3"), Some((12, 4)));
    assert_eq!(i("datetime64[ns]"), Some((8, 8)));
    assert_eq!(i("<M8[D]"), Some((8, 8)));
    assert_eq!(i(">i4"), Some((4, 4)));
    assert_eq!(i("|V300"), Some((300, 1)));
    assert_eq!(i("complex128"), Some((16, 16)));
    assert_eq!(i("object"), None);
    assert_eq!(i("[('a', '<i4')]"), None);
    assert_eq!(i(""), None);
    assert_eq!(i("<i99999999999999999999999"), None);
}

#[test]
fn present_chunks_come_from_the_listing_not_the_declared_count() {
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("meta")).unwrap();
    // 1e18 rows of chunklen 1: 1e18 chunks declared.
    std::fs::write(
        d.path().join("meta/sizes"),
        r#"{"shape": [1000000000000000000]}"#,
    )
    .unwrap();
    let storage = r#"{"dtype": "int8", "chunklen": 1}"#;
    std::fs::write(d.path().join("meta/storage"), storage).unwrap();
    let open = || Carray::open_in(&Files::Local, d.path(), Arc::default()).unwrap();
    assert_eq!(open().present_chunks().unwrap(), Vec::<Range<usize>>::new());
    std::fs::create_dir(d.path().join("data")).unwrap();
    for f in [
        "__0.blp", "__1.blp", "__3.blp", "__03.blp", "__7.blp", "x.blp", "__5",
    ] {
        std::fs::write(d.path().join("data").join(f), b"").unwrap();
    }
    assert_eq!(open().present_chunks().unwrap(), vec![0..2, 3..4, 7..8]);
}

#[test]
fn chunk_files_are_named_as_carray_names_them() {
    assert_eq!(chunk_file_index("__0.blp"), Some(0));
    assert_eq!(chunk_file_index("__553023.blp"), Some(553_023));
    for bad in [
        "__00.blp", "__07.blp", "__.blp", "__-1.blp", "__1.blpx", "_1.blp", "__1a.blp",
    ] {
        assert_eq!(chunk_file_index(bad), None, "{bad}");
    }
}

#[test]
fn column_names_are_plain() {
    assert!(column_name_ok("id"));
    assert!(column_name_ok("f0"));
    for bad in ["", ".", "..", "a/b", "/abs", "../x", "a\0b"] {
        assert!(!column_name_ok(bad), "{bad:?}");
    }
}

#[test]
fn json_offset_points_at_error() {
    let text = b"{\"a\": 1,\n \"b\": x}";
    let e = serde_json::from_slice::<Value>(text).unwrap_err();
    assert_eq!(text[json_offset(text, &e) as usize], b'x');
}
