//! Commits to bcolz carrays: updates, a leftover chunk grown, appends, attributes,
//! truncation removing chunk files; b2fs and bcolz read the new carray, and bcolz then
//! appends, updates and flushes.

use super::*;

#[test]
fn writer_bcolz_update_grow_leftover_append_attrs() {
    bcolz_case(
        "bcolz/carray_i4_leftover",
        |a| {
            // 25 int32 items, chunklen 10: chunks of 10, 10, 5.
            let new0: Vec<u8> = (100..110i32).flat_map(|v| v.to_le_bytes()).collect();
            let full2: Vec<u8> = (20..30i32).flat_map(|v| v.to_le_bytes()).collect();
            let tail: Vec<u8> = (30..33i32).flat_map(|v| v.to_le_bytes()).collect();
            let mut want = chunks_of(a);
            want[0] = new0.clone();
            want[2] = full2.clone();
            want.push(tail.clone());
            let edit = Edit {
                updates: vec![
                    (0, b2fs::container::write::Chunk::from(encode(a, &new0))),
                    (2, b2fs::container::write::Chunk::from(encode(a, &full2))),
                ],
                appends: vec![b2fs::container::write::Chunk::from(encode(a, &tail))],
                truncate: None,
                attrs: Some(json!({"unit": "K\u{e9}lvin", "n": 3})),
                ..Edit::default()
            };
            (edit, want.concat())
        },
        true,
    );
}

#[test]
fn writer_bcolz_truncate_removes_chunk_files() {
    bcolz_case(
        "bcolz/carray_i4_leftover",
        |a| {
            let mut want = chunks_of(a);
            want.truncate(2);
            let edit = Edit {
                truncate: Some(2),
                ..Edit::default()
            };
            (edit, want.concat())
        },
        true,
    );
}
