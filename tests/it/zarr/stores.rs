//! Collections in the Zarr view: mounting opens no leaf, the consolidated metadata is built on
//! the first read (and for a 2,000-member store).

use b2fs::tree::{Tree, TreeOptions};
use serde_json::Value;

use super::{assemble, dims, ino, json_at, names, read_all};
use crate::support::no_prefetch as opts;
use crate::support::{python, run_python};

#[test]
fn a_collection_mounts_lazily_and_consolidates_on_first_read() {
    let py = or_skip!(python(
        "a_collection_mounts_lazily_and_consolidates_on_first_read"
    ));
    let dir = tempfile::tempdir().unwrap();
    crate::support::oracle(&py, &[&"scripts/oracle/stores.py", &"gen", &dir.path()]);
    let t = Tree::from_source(&dir.path().join("tree.b2z"), opts(false)).unwrap();
    assert_eq!(t.leaves_opened(), Some(0));
    let mut top = names(&t, "zarr");
    top.sort();
    assert!(
        top.contains(&"group".to_owned()) && top.contains(&"temps".to_owned()),
        "{top:?}"
    );
    assert_eq!(t.leaves_opened(), Some(0), "listing zarr/ opened a leaf");
    let root = json_at(&t, "zarr/zarr.json");
    assert!(t.leaves_opened().unwrap() >= 5);
    assert_eq!(root["attributes"]["title"], "demo store");
    let md = root["consolidated_metadata"]["metadata"]
        .as_object()
        .unwrap();
    assert_eq!(md["group"]["node_type"], "group");
    assert_eq!(md["group"]["attributes"]["units"], "counts");
    assert_eq!(
        md["group"]["consolidated_metadata"]["metadata"],
        serde_json::json!({})
    );
    assert_eq!(md["a/b/c/leaf"]["shape"], serde_json::json!([20, 30]));
    assert_eq!(
        md["a/b/c/leaf"]["chunk_grid"]["configuration"]["chunk_shape"],
        serde_json::json!([10, 15])
    );
    assert_eq!(md["group/counts"]["data_type"], "int32");
    // Every array's own document (from its laid-out native tree) equals its consolidated
    // entry (read from the leaf's header); its data equals the reference.
    let arrays: Vec<&String> = md
        .iter()
        .filter(|(_, v)| v["node_type"] == "array")
        .map(|(k, _)| k)
        .collect();
    assert!(arrays.len() >= 4, "{arrays:?}");
    for key in arrays {
        let own = json_at(&t, &format!("zarr/{key}/zarr.json"));
        assert_eq!(
            own,
            md[key.as_str()],
            "{key}: own zarr.json = consolidated entry"
        );
    }
    // Every group's own zarr.json carries the consolidated metadata of what is below it,
    // keyed from the group: the root's entries under its path, nothing else.
    let groups: Vec<&String> = md
        .iter()
        .filter(|(_, v)| v["node_type"] == "group")
        .map(|(k, _)| k)
        .collect();
    assert!(groups.iter().any(|g| g.as_str() == "a/b"), "{groups:?}");
    for g in groups {
        let own = json_at(&t, &format!("zarr/{g}/zarr.json"));
        assert_eq!(own["attributes"], md[g.as_str()]["attributes"], "{g}");
        assert_eq!(own["consolidated_metadata"]["kind"], "inline", "{g}");
        let below = own["consolidated_metadata"]["metadata"]
            .as_object()
            .unwrap();
        let prefix = format!("{g}/");
        let want: serde_json::Map<String, Value> = md
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix(&prefix)?.to_owned(), v.clone())))
            .collect();
        assert!(!want.is_empty(), "{g}: nothing below it");
        assert_eq!(
            *below, want,
            "{g}: its document = the root's entries below it"
        );
    }
    let leaf = json_at(&t, "zarr/a/b/c/leaf/zarr.json");
    let got = assemble(&t, "a/b/c/leaf", &leaf, 333);
    let want: Vec<u8> = (0..600).flat_map(|i| (i as f32).to_le_bytes()).collect();
    assert!(got == want);
    // Raw SChunks: uint8 (with a trailing axis of the typesize when it is not 1).
    assert_eq!(md["raw"]["data_type"], "uint8");
    let shape = dims(&md["raw"]["shape"]);
    assert_eq!(
        shape.iter().product::<u64>(),
        12000,
        "{shape:?}: the raw bytes"
    );
    let got = assemble(&t, "raw", &md["raw"], 1 << 20);
    let want: Vec<u8> = (0..3000i32).flat_map(i32::to_le_bytes).collect();
    assert!(got == want);
}

/// What python-blosc2 reads from `src`: sha256 of `arr[...]`'s bytes.

#[test]
fn a_big_store_mounts_opening_no_leaf_and_consolidates_on_the_first_read() {
    let py = or_skip!(python(
        "a_big_store_mounts_opening_no_leaf_and_consolidates_on_the_first_read"
    ));
    // B2FS_ZARR_MEMBERS=10000 for the measurement docs/ZARR.md quotes.
    let n: usize = crate::support::env_or("B2FS_ZARR_MEMBERS", 2000);
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("many.b2z");
    run_python(
        &py,
        &[
            "scripts/oracle/stores.py",
            "many",
            p.to_str().unwrap(),
            &n.to_string(),
        ],
    );
    let t = Tree::from_source(&p, TreeOptions::default()).unwrap();
    let groups = names(&t, "zarr");
    assert_eq!(groups.len(), 101, "zarr.json and g0..g99");
    let leaves: usize = groups
        .iter()
        .filter(|g| g.starts_with('g'))
        .map(|g| names(&t, &format!("zarr/{g}")).len() - 1)
        .sum();
    assert_eq!(leaves, n);
    assert_eq!(
        t.leaves_opened(),
        Some(0),
        "listing the view opened a member"
    );
    // The first lookup of zarr.json (it answers with the size) builds the consolidated
    // metadata.
    let started = std::time::Instant::now();
    let j = ino(&t, "zarr/zarr.json");
    let first = started.elapsed();
    let size = t.getattr(j).unwrap().size;
    let started = std::time::Instant::now();
    let root: Value = serde_json::from_slice(&read_all(&t, j, 1 << 20)).unwrap();
    let again = started.elapsed();
    eprintln!(
        "zarr/zarr.json of a {n}-member .b2z: {size} bytes, built in {first:?} (first \
         lookup), read in {again:?}"
    );
    // Every leaf's header was read (and the root attributes' carrier), but no leaf was laid
    // out: a leaf's Zarr directory's link count stays 1 ("unknown") until it is.
    assert!(t.leaves_opened().unwrap() >= n);
    let nlink = |path: &str| t.getattr(ino(&t, path)).unwrap().nlink;
    for i in [0, n / 3, n - 1] {
        assert_eq!(
            nlink(&format!("zarr/g{}/a{i}", i % 100)),
            1,
            "a{i} was laid out"
        );
    }
    let md = root["consolidated_metadata"]["metadata"]
        .as_object()
        .unwrap();
    assert_eq!(md.len(), n + 100, "every leaf and group");
    let i = n / 2 + 7;
    let key = format!("g{}/a{i}", i % 100);
    assert_eq!(md[&key]["shape"], serde_json::json!([4]));
    assert_eq!(root["attributes"]["n"], n);
    // The consolidated entries equal the leaves' own documents (laid out now).
    for i in [0, i, n - 1] {
        let key = format!("g{}/a{i}", i % 100);
        assert_eq!(
            json_at(&t, &format!("zarr/{key}/zarr.json")),
            md[&key],
            "{key}"
        );
        assert_eq!(
            nlink(&format!("zarr/g{}/a{i}", i % 100)),
            2,
            "a{i} laid out"
        );
    }
    let got = assemble(&t, &key, &md[&key], 1 << 20);
    let want: Vec<u8> = (0..4)
        .flat_map(|k: i32| (k + i as i32).to_le_bytes())
        .collect();
    assert!(got == want);
}

/// The groups' documents of a deep store (python-blosc2's TreeStore, twelve nested groups
/// with an array in each) are kept within the cache's byte budget (a tiny one here): past it
/// the least recently read are built again when read, never refused, and every group's
/// document, read in any order and again, is the one a tree with the default budget serves,
/// holding what is below the group.
#[test]
fn group_documents_of_a_deep_store_stay_within_their_budget() {
    let py = or_skip!(python(
        "group_documents_of_a_deep_store_stay_within_their_budget"
    ));
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("deep.b2z");
    let write = r#"
import sys, numpy as np, blosc2
with blosc2.TreeStore(sys.argv[1], mode="w") as st:
    p = ""
    for d in range(12):
        p += f"/g{d}"
        st[p + "/x"] = blosc2.asarray(np.arange(10 + d, dtype="i4"))
"#;
    run_python(&py, &["-c", write, &store.to_string_lossy()]);
    let whole = Tree::from_source(&store, opts(false)).unwrap();
    let tight = Tree::from_source(&store, opts(false)).unwrap();
    const BUDGET: usize = 6 << 10;
    tight.set_zarr_doc_budget(BUDGET);
    let mut groups = vec![String::new()];
    let mut p = String::new();
    for d in 0..12 {
        p = if p.is_empty() {
            format!("g{d}")
        } else {
            format!("{p}/g{d}")
        };
        groups.push(p.clone());
    }
    let doc = |t: &Tree, g: &str| {
        json_at(
            t,
            &if g.is_empty() {
                "zarr/zarr.json".to_owned()
            } else {
                format!("zarr/{g}/zarr.json")
            },
        )
    };
    let root = doc(&whole, "");
    let all = root["consolidated_metadata"]["metadata"]
        .as_object()
        .unwrap();
    assert_eq!(all.len(), 24, "12 groups and 12 arrays below the root");
    let (kept, _, evicted) = whole.zarr_doc_usage();
    assert_eq!(evicted, 0);
    assert!(
        kept > BUDGET,
        "the root's document alone is past the tight budget"
    );
    // Deepest first, then root first, then again: every document right, the cache within
    // its budget after each read.
    let order: Vec<&String> = groups
        .iter()
        .rev()
        .chain(groups.iter())
        .chain(groups.iter().rev())
        .collect();
    for g in order {
        let got = doc(&tight, g);
        assert_eq!(got, doc(&whole, g), "group {g:?}");
        let below = got["consolidated_metadata"]["metadata"]
            .as_object()
            .unwrap();
        let depth = if g.is_empty() {
            0
        } else {
            g.split('/').count()
        };
        // g<d-1> holds the arrays of depths d..=12 and the groups of depths d+1..=12.
        let want = if depth == 0 { 24 } else { 25 - 2 * depth };
        assert_eq!(below.len(), want, "group {g:?}: {:?}", below.keys());
        // Within the budget, or one document past it kept alone (so that its stats and
        // opens do not build it again).
        let (bytes, docs, _) = tight.zarr_doc_usage();
        assert!(
            bytes <= BUDGET || docs == 1,
            "{bytes} bytes in {docs} documents kept, budget {BUDGET}"
        );
    }
    let (bytes, docs, evicted) = tight.zarr_doc_usage();
    assert!(
        docs > 0 && bytes > 0,
        "documents within the budget are kept"
    );
    assert!(evicted > 0, "the budget dropped documents");
}
