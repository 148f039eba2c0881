//! Collections: `.b2z`/`.b2d` stores written by python-blosc2 (TreeStore, DictStore, a
//! 4.0.0-style `b2embed` store, ZIP64 members, embedded values, SChunk leaves, attributes)
//! read leaf by leaf against python-blosc2's `decompress_chunk`; damaged zips; directories
//! of sources. Oracle: `scripts/oracle/stores.py`, whose fixtures ([`fixtures`]) the commits
//! to stores share (`store/commits.rs`: read back by python-blosc2, crashes at every step).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Instant;

use b2fs::codec;
use b2fs::container::store::{Form, Location, Marker, Node, open_store};
use b2fs::container::{Collection, Opened, open_any};
use serde_json::{Value, json};

use crate::support;

mod commits;

/// The stores of `stores.py gen`, made once per test run, and their manifest.
fn fixtures(test: &str) -> Option<(PathBuf, PathBuf, &'static Value)> {
    static DIR: OnceLock<(tempfile::TempDir, Value)> = OnceLock::new();
    let py = support::python(test)?;
    let (dir, manifest) = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().to_str().unwrap().to_string();
        support::run_python(&py, &["scripts/oracle/stores.py", "gen", &d]);
        let m = std::fs::read_to_string(dir.path().join("manifest.json")).unwrap();
        (dir, serde_json::from_str(&m).unwrap())
    });
    Some((py, dir.path().to_path_buf(), manifest))
}

fn collection(path: &Path) -> Collection {
    match open_any(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())) {
        Opened::Collection(c) => c,
        Opened::Single(_) => panic!("{} opened as a single source", path.display()),
    }
}

fn chunk_shas(a: &b2fs::container::Array) -> Vec<String> {
    (0..a.nchunks())
        .map(|i| {
            let c = a.chunk_bytes(i).unwrap();
            support::sha256_hex(&codec::decompress(&c).unwrap())
        })
        .collect()
}

/// Checks `c` against python's description of the same store (`stores.py` describe).
fn check_against(c: &Collection, want: &Value, name: &str) {
    let keys = want["keys"].as_object().unwrap();
    let leaves: Vec<String> = c.leaves().iter().map(|l| l.key().to_string()).collect();
    let mut expected: Vec<String> = keys.keys().cloned().collect();
    expected.sort();
    assert_eq!(leaves, expected, "{name}: leaf keys");
    for (key, w) in keys {
        let Some(Node::Leaf(leaf)) = c.find(key) else {
            panic!("{name}: {key} is not a leaf");
        };
        let embedded = matches!(leaf.location(), Location::Embedded { .. });
        if c.form() == Form::Zip {
            assert_eq!(embedded, w["window"].is_null(), "{name}: {key} embedded");
        }
        let a = leaf
            .array()
            .unwrap_or_else(|e| panic!("{name}: {key}: {e}"));
        let want_chunks: Vec<String> = w["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect();
        assert_eq!(chunk_shas(a), want_chunks, "{name}: {key} chunks");
        if let Some(shape) = w.get("shape") {
            let got: Vec<Value> = a.geometry().shape.iter().map(|&d| json!(d)).collect();
            assert_eq!(&Value::Array(got), shape, "{name}: {key} shape");
        }
    }
    for (gkey, attrs) in want["attrs"].as_object().unwrap() {
        let g = c
            .group(gkey)
            .unwrap_or_else(|| panic!("{name}: group {gkey}"));
        assert_eq!(&g.attrs().unwrap(), attrs, "{name}: attrs of {gkey}");
    }
}

#[test]
fn store_every_kind_matches_python() {
    let (_py, dir, manifest) = or_skip!(fixtures("store_every_kind_matches_python"));
    for (name, want) in manifest.as_object().unwrap() {
        let c = collection(&dir.join(name));
        let form = if name.ends_with(".b2z") {
            Form::Zip
        } else {
            Form::Dir
        };
        assert_eq!(c.form(), form, "{name}");
        let marker = match name.as_str() {
            "dict.b2z" => Some(Marker::Dict),
            "old.b2z" => Some(Marker::Embed),
            _ => Some(Marker::Tree),
        };
        assert_eq!(c.marker(), marker, "{name}");
        check_against(&c, want, name);
        // Carriers never show as leaves.
        assert!(
            c.leaves().iter().all(|l| l.name() != "__vlmeta__"),
            "{name}"
        );
    }
    // The ZIP64 fixture really has a ZIP64 local extra field on its first member.
    let z = std::fs::read(dir.join("zip64.b2z")).unwrap();
    assert_eq!(
        u16::from_le_bytes([z[28], z[29]]),
        20,
        "ZIP64 extra in fixture"
    );
}

#[test]
fn store_open_reads_no_leaf() {
    let (_py, dir, _) = or_skip!(fixtures("store_open_reads_no_leaf"));
    let c = open_store(&dir.join("deflt.b2z")).unwrap();
    assert!(c.leaves().iter().all(|l| !l.is_open()));
    let leaf = c.leaves()[0].clone();
    leaf.array().unwrap();
    assert!(leaf.is_open());
    assert_eq!(c.leaves().iter().filter(|l| l.is_open()).count(), 1);
}

#[test]
fn store_of_10000_members_opens_fast() {
    let py = or_skip!(support::python("store_of_10000_members_opens_fast"));
    let p = support::many_members_store(&py);
    let t = Instant::now();
    let c = open_store(p).unwrap();
    let took = t.elapsed();
    eprintln!("open_store of 10000 members: {took:?}");
    assert_eq!(c.leaves().len(), 10000);
    assert!(c.leaves().iter().all(|l| !l.is_open()));
    assert!(took.as_secs_f64() < 1.0, "took {took:?}");
    let Some(Node::Leaf(l)) = c.find("/g7/a4207") else {
        panic!("no /g7/a4207");
    };
    let a = l.array().unwrap();
    let data = codec::decompress(&a.chunk_bytes(0).unwrap()).unwrap();
    let want: Vec<u8> = (4207..4211i32).flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(data, want);
}

/// A zip whose bytes were cut or patched: refused with one line, never a panic.
#[test]
fn store_damaged_zips_refused() {
    let (_py, dir, _) = or_skip!(fixtures("store_damaged_zips_refused"));
    let good = std::fs::read(dir.join("deflt.b2z")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let eocd = good
        .windows(4)
        .rposition(|w| w == b"PK\x05\x06")
        .expect("eocd");
    let cd = u32::from_le_bytes(good[eocd + 16..eocd + 20].try_into().unwrap()) as usize;
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("truncated central directory", good[..cd + 20].to_vec()),
        ("cut before the end record", good[..eocd + 10].to_vec()),
        ("empty", Vec::new()),
        ("bad central directory offset", {
            let mut b = good.clone();
            b[eocd + 16..eocd + 20].copy_from_slice(&(cd as u32 + 7).to_le_bytes());
            b
        }),
        ("bad local header offset of the first entry", {
            let mut b = good.clone();
            b[cd + 42..cd + 46].copy_from_slice(&0x00ff_ff00u32.to_le_bytes());
            b
        }),
    ];
    for (what, bytes) in cases {
        let p = tmp.path().join("bad.b2z");
        std::fs::write(&p, &bytes).unwrap();
        // Either the store is refused, or the damaged member fails on its own.
        match open_store(&p) {
            Err(e) => {
                let msg = e.to_string();
                assert!(
                    !msg.contains('\n') && msg.contains("bad.b2z"),
                    "{what}: {msg}"
                );
            }
            Ok(c) => {
                let errs: Vec<String> = c
                    .leaves()
                    .iter()
                    .filter_map(|l| l.array().err().map(|e| e.to_string()))
                    .collect();
                assert!(!errs.is_empty(), "{what}: nothing failed");
                assert!(errs.iter().all(|m| !m.contains('\n')), "{what}: {errs:?}");
            }
        }
    }
    // A wrong CRC-32 is not checked on read (as upstream reads by offset); a damaged
    // member's chunk fails on decode, without a panic.
    let mut b = good.clone();
    b[cd + 16] ^= 0xff;
    let p = tmp.path().join("crc.b2z");
    std::fs::write(&p, &b).unwrap();
    assert_eq!(open_store(&p).unwrap().leaves().len(), 6);
    let mut b = good;
    b[200] ^= 0x55; // inside temps.b2nd's first chunk
    std::fs::write(&p, &b).unwrap();
    let c = open_store(&p).unwrap();
    let Some(Node::Leaf(l)) = c.find("/temps") else {
        panic!("temps");
    };
    if let Ok(a) = l.array() {
        let _ = a.chunk_bytes(0).map(|ch| codec::decompress(&ch));
    }
}

/// A `.b2z` cut short (a download or copy interrupted: the members come first, the central
/// directory and its end record last): `info`, `mount` and `verify` each say that the zip's
/// end record is missing. Before session 31 `info` and `verify` reopened it as a single
/// frame and said "no Blosc2 frame magic", which sent the user looking for the wrong thing.
#[test]
fn store_a_truncated_b2z_is_named_a_truncated_zip_by_every_command() {
    let (_py, dir, _) = or_skip!(fixtures(
        "store_a_truncated_b2z_is_named_a_truncated_zip_by_every_command"
    ));
    let good = std::fs::read(dir.join("deflt.b2z")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("cut.b2z");
    std::fs::write(&p, &good[..good.len() / 2]).unwrap();
    let mp = tmp.path().join("mnt");
    std::fs::create_dir(&mp).unwrap();
    for (args, code) in [
        (vec!["info"], 3),
        (vec!["verify"], 1),
        (vec!["verify", "--json"], 1),
        (vec!["mount"], 3),
    ] {
        let mut cmd = crate::support::b2fs();
        cmd.args(&args).arg(&p);
        if args[0] == "mount" {
            cmd.arg(&mp);
        }
        let out = cmd.output().unwrap();
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(code), "{args:?}: {said}");
        assert!(said.contains("end record is missing"), "{args:?}: {said}");
        assert!(!said.contains("frame magic"), "{args:?}: {said}");
    }
}

#[test]
fn directory_of_sources_is_a_collection() {
    let (py, dir, _) = or_skip!(fixtures("directory_of_sources_is_a_collection"));
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let code = format!(
        "import blosc2, numpy as np, bcolz, os\n\
         r = {root:?}\n\
         os.makedirs(r + '/sub/deeper')\n\
         blosc2.asarray(np.arange(100, dtype=np.int32), urlpath=r + '/a.b2nd', mode='w')\n\
         blosc2.SChunk(chunksize=400, data=np.arange(300, dtype=np.int32).tobytes(), \
           urlpath=r + '/sub/s.b2frame', mode='w')\n\
         blosc2.asarray(np.arange(50, dtype=np.int16), urlpath=r + '/sub/sparse', \
           contiguous=False, mode='w')\n\
         bcolz.carray(np.arange(1000, dtype=np.float64), rootdir=r + '/sub/deeper/carr', \
           mode='w').flush()\n\
         os.makedirs(r + '/plain.b2d')\n\
         blosc2.asarray(np.arange(9, dtype=np.int8), urlpath=r + '/plain.b2d/x.b2nd', mode='w')\n\
         open(r + '/notes.txt', 'w').write('hello')\n\
         b = open(r + '/a.b2nd', 'rb').read()\n\
         open(r + '/broken.b2nd', 'wb').write(b[:60])\n\
         open(r + '/.b2fs-7-0-a.b2nd.b2fs-tmp', 'wb').write(b)\n",
        root = root.to_str().unwrap()
    );
    support::run_python(&py, &["-c", &code]);
    std::fs::copy(dir.join("tree.b2z"), root.join("sub/store.b2z")).unwrap();
    let c = collection(root);
    assert_eq!(c.form(), Form::Frames);
    let keys: Vec<&str> = c.leaves().iter().map(|l| l.key()).collect();
    assert_eq!(
        keys,
        [
            "/a.b2nd",
            "/broken.b2nd",
            "/plain.b2d/x.b2nd",
            "/sub/deeper/carr",
            "/sub/s.b2frame",
            "/sub/sparse"
        ]
    );
    assert!(
        c.find("/notes.txt").is_none(),
        "non-source files are hidden"
    );
    assert!(
        c.find("/.b2fs-7-0-a.b2nd.b2fs-tmp").is_none(),
        "a commit's leftover temp file (a frame) is hidden"
    );
    let Some(Node::Store(s)) = c.find("/sub/store.b2z") else {
        panic!("nested store");
    };
    assert_eq!(s.leaves().len(), 6);
    let mut failures = 0;
    for l in c.leaves() {
        match l.open() {
            Ok(b2fs::container::Container::Array(a)) => {
                assert!(a.nchunks() > 0, "{}", l.key());
                for i in 0..a.nchunks() {
                    a.chunk_bytes(i).unwrap();
                }
            }
            Ok(_) => {}
            Err(e) => {
                assert_eq!(l.key(), "/broken.b2nd", "{e}");
                failures += 1;
            }
        }
    }
    assert_eq!(failures, 1);
    assert_eq!(c.root().attrs().unwrap(), json!({}));
}

#[test]
fn store_info_lists_groups_and_leaves() {
    let (_py, dir, manifest) = or_skip!(fixtures("store_info_lists_groups_and_leaves"));
    let out = crate::support::ok(support::b2fs().args([
        "info",
        "--json",
        dir.join("tree.b2z").to_str().unwrap(),
    ]));
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["kind"], json!("collection"));
    assert_eq!(doc["marker"], json!("b2tree"));
    let want = &manifest["tree.b2z"];
    let keys: Vec<&str> = doc["leaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["key"].as_str().unwrap())
        .collect();
    let expected = sorted_keys(&want["keys"]);
    assert_eq!(keys, expected);
    let root = doc["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["key"] == json!("/"))
        .unwrap();
    assert_eq!(root["attrs"], want["attrs"]["/"]);
}

/// A CTable in a TreeStore shows as its internal subtree (docs/COLLECTIONS.md: its columns keep deleted
/// rows, masked only by `_valid_rows`): every member opens with python's chunks.
#[test]
fn store_ctable_shows_its_subtree() {
    let (_py, dir, _) = or_skip!(fixtures("store_ctable_shows_its_subtree"));
    let want: Value =
        serde_json::from_slice(&std::fs::read(dir.join("ctab/manifest.json")).unwrap()).unwrap();
    assert_eq!(
        want["keys"],
        json!(["/data", "/data/table"]),
        "python hides the internals"
    );
    let c = open_store(&dir.join("ctab/ctab.b2z")).unwrap();
    let keys: Vec<&str> = c.leaves().iter().map(|l| l.key()).collect();
    let expected = sorted_keys(&want["members"]);
    assert_eq!(keys, expected);
    for l in c.leaves() {
        let shas: Vec<Value> = chunk_shas(l.array().unwrap())
            .into_iter()
            .map(Value::from)
            .collect();
        assert_eq!(Value::Array(shas), want["members"][l.key()], "{}", l.key());
    }
}

/// Members repacked with deflate: a deflated leaf fails alone, a deflated `embed.b2e` refuses
/// the store (python-blosc2 4.14.1 does the same).
#[test]
fn store_deflated_members() {
    let (py, dir, _) = or_skip!(fixtures("store_deflated_members"));
    let tmp = tempfile::tempdir().unwrap();
    let (leaf, all) = (tmp.path().join("leaf.b2z"), tmp.path().join("all.b2z"));
    let code = format!(
        "import zipfile\n\
         src = zipfile.ZipFile({src:?})\n\
         for out, only in (({leaf:?}, 'temps.b2nd'), ({all:?}, None)):\n\
         \x20   with zipfile.ZipFile(out, 'w') as z:\n\
         \x20       for i in src.infolist():\n\
         \x20           deflate = only is None or i.filename == only\n\
         \x20           z.writestr(i.filename, src.read(i.filename),\n\
         \x20                      zipfile.ZIP_DEFLATED if deflate else zipfile.ZIP_STORED)\n",
        src = dir.join("deflt.b2z").to_str().unwrap(),
        leaf = leaf.to_str().unwrap(),
        all = all.to_str().unwrap(),
    );
    support::run_python(&py, &["-c", &code]);
    let c = open_store(&leaf).unwrap();
    let Some(Node::Leaf(t)) = c.find("/temps") else {
        panic!("temps");
    };
    let e = t.array().unwrap_err();
    assert!(e.to_string().contains("compressed"), "{e}");
    let Some(Node::Leaf(r)) = c.find("/raw") else {
        panic!("raw");
    };
    assert_eq!(r.array().unwrap().nchunks(), 3);
    let e = open_store(&all).unwrap_err().to_string();
    assert!(e.contains("embed.b2e") && e.contains("compressed"), "{e}");
}

/// The keys of JSON object `v`, sorted.
fn sorted_keys(v: &Value) -> Vec<&str> {
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort();
    keys
}
