//! Unit tests of a remote prefix: chunk objects numbered and ordered per directory, the names
//! under a directory, chunk data told from metadata.

use std::time::SystemTime;

use object_store::path::Path as StorePath;

use super::listing::*;
use crate::remote::client::Pin;

#[test]
fn chunk_objects_are_read_in_number_order_per_directory() {
    assert_eq!(chunk_number("0000002A.chunk"), Some(("", 42)));
    assert_eq!(chunk_number("col/data/__12.blp"), Some(("col/data", 12)));
    assert_eq!(chunk_number("data/__x.blp"), None);
    // Named as bcolz names chunks only (the carray ignores "__007.blp").
    assert_eq!(chunk_number("data/__007.blp"), None);
    assert_eq!(chunk_number("meta/sizes"), None);
    let listed = |rel: &str| Listed {
        rel: rel.to_owned(),
        path: StorePath::from(rel),
        url: rel.to_owned(),
        size: 1,
        mtime: SystemTime::UNIX_EPOCH,
        pin: Pin::default(),
    };
    // The listing's order (by name).
    let names = [
        "a/data/__0.blp",
        "a/data/__1.blp",
        "a/data/__10.blp",
        "a/data/__2.blp",
        "a/meta/sizes",
        "b/data/__0.blp",
    ];
    let objects: Vec<Listed> = names.iter().map(|n| listed(n)).collect();
    let c = Chunks::of(&objects);
    let in_order: Vec<&str> = c.order.iter().map(|&i| names[i]).collect();
    assert_eq!(
        in_order,
        [
            "a/data/__0.blp",
            "a/data/__1.blp",
            "a/data/__2.blp",
            "a/data/__10.blp",
            "b/data/__0.blp"
        ]
    );
    assert_eq!(c.group, [0, 0, 0, 0, 1]);
    assert_eq!(c.pos[4], usize::MAX, "metadata is not in the order");
    assert_eq!(c.pos[2], 3);
}

#[test]
fn the_names_under_a_directory_are_one_range_of_the_sorted_listing() {
    let names = [
        "__attrs__",
        "a/data/__0.blp",
        "a/data/__1.blp",
        "a/data2/__0.blp",
        "a/meta/sizes",
        "b/data/__0.blp",
    ];
    let under = |p: &str| sorted_under(&names, |n| n, p).to_vec();
    assert_eq!(under("a/data/"), ["a/data/__0.blp", "a/data/__1.blp"]);
    assert_eq!(under("a/"), names[1..5]);
    assert_eq!(under(""), names);
    assert!(under("c/").is_empty());
    assert!(under("zz").is_empty());
}

#[test]
fn chunk_data_is_told_from_metadata() {
    for c in ["0000002A.chunk", "data/__0.blp", "col/data/__12.blp"] {
        assert!(is_chunk_data(c), "{c}");
    }
    for m in ["chunks.b2frame", "meta/sizes", "__attrs__", "__rootdirs__"] {
        assert!(!is_chunk_data(m), "{m}");
    }
}
