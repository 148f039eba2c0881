//! Frames whose index or trailer is damaged: `verify` opens them leniently and `salvage`
//! rebuilds a sound frame, or both say why they cannot.

use super::*;

/// A frame python-blosc2 wrote whose index or trailer is damaged: python-blosc2 cannot open
/// it; `verify` opens it leniently, says which part is damaged and still checks every chunk
/// (located by walking their headers when the index is gone); `salvage` writes a sound frame
/// with every readable chunk exact (damaged ones zeros), the index rebuilt and what the
/// damaged trailer held lost (exit 1, DEST written). A frame whose index and a chunk header
/// are both destroyed cannot be walked safely: verify says why, salvage writes nothing.
#[test]
fn verify_and_salvage_a_frame_with_a_damaged_index_or_trailer() {
    let py = or_skip!(python(
        "verify_and_salvage_a_frame_with_a_damaged_index_or_trailer"
    ));
    let f = fixtures(&py);
    let src = f.join("frame.b2frame");
    let a = array(&src);
    let n = a.nchunks();
    let idx = a.frame_info().unwrap().index_offset.unwrap();
    let good = reference(&py, "frame", &src);
    let (s3, c3) = chunk_at(&a, 3);
    let (s2, _) = chunk_at(&a, 2);
    let bytes = std::fs::read(&src).unwrap();
    let vl = &a.vlmetalayers()[0].chunk;
    let vl_at = offset_of(&bytes, vl);
    let dir = tempfile::tempdir().unwrap();
    // Each case: (name, damage, chunks damaged, a structure reason, salvage exit code).
    type Damage = fn(&Path, u64, u64, u64, u64);
    let cases: [(&str, Damage, &[usize], &str, i32); 2] = [
        (
            "index",
            |p, idx, s3, c3, _| {
                smash(p, idx + 4, 12);
                smash(p, s3 + c3 / 2, 64);
            },
            &[3],
            "located by walking their headers",
            0,
        ),
        (
            "trailer",
            |p, _, _, _, vl_at| smash(p, vl_at, 16),
            &[],
            "vlmetalayer damaged",
            1,
        ),
    ];
    for (name, damage, want, reason, code) in cases {
        let p = dir.path().join(format!("{name}.b2frame"));
        copy_tree(&src, &p);
        damage(&p, idx, s3, c3, vl_at);
        if name == "index" {
            let r = reference(&py, "frame", &p);
            assert!(!r.errors.is_empty(), "{name}: python-blosc2 opens it");
        }
        let dest = dir.path().join(format!("salvaged-{name}.b2frame"));
        verify_then_salvage(&py, &p, &dest, &good, n, (want, reason, code), name);
    }
    // The index and chunk 2's header destroyed: chunk 2 cannot be told from what follows.
    let p = dir.path().join("both.b2frame");
    copy_tree(&src, &p);
    smash(&p, idx + 4, 12);
    smash(&p, s2, 16);
    let (exit, v) = verify_json(&p);
    assert_eq!(exit, 1);
    let why = structure(&v);
    assert!(why.contains("cannot be located without it"), "{why}");
    assert!(why.contains("chunk 2's header"), "{why}");
    let dest = dir.path().join("salvaged-both.b2frame");
    let (exit, err) = salvage_run(&p, &dest);
    assert_eq!(exit, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot be located"), "{err}");
    assert!(!dest.exists());
}

/// The same for a sparse frame python-blosc2 wrote: its `chunks.b2frame` index damaged
/// (chunk `i` is then the file named `i`, as C-Blosc2 names the chunks it appends) or its
/// trailer. Without the index, a directory that does not hold exactly the declared chunk
/// files (one missing: it may have been a zero chunk; one extra: an updated one) cannot be
/// read safely: verify says which file, salvage writes nothing.
#[test]
fn verify_and_salvage_a_sparse_frame_with_a_damaged_index_or_trailer() {
    let py = or_skip!(python(
        "verify_and_salvage_a_sparse_frame_with_a_damaged_index_or_trailer"
    ));
    let f = fixtures(&py);
    let src = f.join("sframe");
    let a = array(&src);
    let n = a.nchunks();
    assert!(n > 6, "{n} chunks");
    let idx = a.frame_info().unwrap().index_offset.unwrap();
    let bytes = std::fs::read(src.join("chunks.b2frame")).unwrap();
    let vl = &a.vlmetalayers()[0].chunk;
    let vl_at = offset_of(&bytes, vl);
    drop(a);
    let good = reference(&py, "frame", &src);
    assert!(good.errors.is_empty(), "{:?}", good.errors);
    let dir = tempfile::tempdir().unwrap();
    let index = |p: &Path| p.join("chunks.b2frame");
    type Damage = fn(&Path, u64, u64);
    let cases: [(&str, Damage, &[usize], &str, i32); 2] = [
        (
            "index",
            |p, idx, _| {
                smash(&p.join("chunks.b2frame"), idx + 4, 12);
                let c3 = p.join("00000003.chunk");
                let len = std::fs::metadata(&c3).unwrap().len();
                smash(&c3, len / 2, 64);
            },
            &[3],
            "located by their files' names",
            0,
        ),
        (
            "trailer",
            |p, _, vl_at| smash(&p.join("chunks.b2frame"), vl_at, 16),
            &[],
            "vlmetalayer damaged",
            1,
        ),
    ];
    for (name, damage, want, reason, code) in cases {
        let p = dir.path().join(name);
        copy_tree(&src, &p);
        damage(&p, idx, vl_at);
        assert!(
            container::open(&p).is_err(),
            "{name}: b2fs opens it strictly"
        );
        if name == "index" {
            let r = reference(&py, "frame", &p);
            assert!(!r.errors.is_empty(), "{name}: python-blosc2 opens it");
        }
        let dest = dir.path().join(format!("salvaged-{name}"));
        verify_then_salvage(&py, &p, &dest, &good, n, (want, reason, code), name);
    }
    // The index damaged and the files not exactly the declared chunks, or one in another
    // chunk's place: which file is which chunk is unknown.
    type Files = fn(&Path);
    let ambiguous: [(&str, Files, &str); 4] = [
        (
            "missing",
            |p| std::fs::remove_file(p.join("00000005.chunk")).unwrap(),
            "the first: 00000005.chunk",
        ),
        (
            "extra",
            |p| {
                std::fs::copy(p.join("00000001.chunk"), p.join("000000FF.chunk")).unwrap();
            },
            "beyond the",
        ),
        (
            // Not C-Blosc2's spelling: the reader would not open it as chunk 1.
            "spelling",
            |p| std::fs::rename(p.join("00000001.chunk"), p.join("+0000001.chunk")).unwrap(),
            "the first: 00000001.chunk",
        ),
        (
            // The short last chunk's file and chunk 3's swapped: every name there, but a
            // header declares another size than its place holds.
            "swapped",
            |p| {
                let n = std::fs::read_dir(p).unwrap().count() - 1;
                let last = p.join(format!("{:08X}.chunk", n - 1));
                let third = p.join("00000003.chunk");
                let tmp = p.join("swap");
                std::fs::rename(&last, &tmp).unwrap();
                std::fs::rename(&third, &last).unwrap();
                std::fs::rename(&tmp, &third).unwrap();
            },
            "holds another chunk",
        ),
    ];
    for (name, change, says) in ambiguous {
        let p = dir.path().join(name);
        copy_tree(&src, &p);
        smash(&index(&p), idx + 4, 12);
        change(&p);
        let (exit, v) = verify_json(&p);
        assert_eq!(exit, 1, "{name}: {v:#}");
        let why = structure(&v);
        assert!(
            why.contains("cannot be located without it"),
            "{name}: {why}"
        );
        assert!(why.contains(says), "{name}: {why}");
        let dest = dir.path().join(format!("salvaged-{name}"));
        let (exit, err) = salvage_run(&p, &dest);
        assert_eq!(exit, Some(1), "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.contains(says), "{name}: {err}");
        assert!(!dest.exists(), "{name}");
    }
}

/// What a damaged copy `p` of a frame with `n` chunks must show: `verify` exits 1, names
/// `reason` and exactly the chunks `want` as damaged and still checks all `n`; `salvage`
/// writes `dest` (exit `code`, `reason` on stderr), which python-blosc2 reads with every
/// other chunk as in `good` and the damaged ones zeros, recorded with `reason`, and which
/// verifies sound.
fn verify_then_salvage(
    py: &Path,
    p: &Path,
    dest: &Path,
    good: &Reference,
    n: usize,
    (want, reason, code): (&[usize], &str, i32),
    name: &str,
) {
    let (exit, v) = verify_json(p);
    assert_eq!(exit, 1, "{name}: {v:#}");
    assert!(structure(&v).contains(reason), "{name}: {v:#}");
    assert_eq!(v["chunks"], n, "{name}: {v:#}");
    let damaged: Vec<u64> = damaged_chunks(&v).into_iter().map(|(_, i)| i).collect();
    assert_eq!(damaged, want.iter().map(|&i| i as u64).collect::<Vec<_>>());
    let (exit, err) = salvage_run(p, dest);
    assert_eq!(exit, Some(code), "{name}: {err}");
    assert!(err.contains(reason), "{name}: {err}");
    let after = reference(py, "frame", dest);
    assert!(after.errors.is_empty(), "{name}: {:?}", after.errors);
    assert_eq!(after.chunks[""].len(), n, "{name}");
    let (was, now) = (&good.chunks[""], &after.chunks[""]);
    assert_salvaged(was, now, |i| want.contains(&i), name);
    let record = &after.salvage[""];
    assert_eq!(record["damaged"].as_array().unwrap().len(), want.len());
    assert!(record["structure"][0].as_str().unwrap().contains(reason));
    let (exit, v) = verify_json(dest);
    assert_eq!(exit, 0, "{name}: salvaged copy not sound: {v:#}");
}

/// Where `part` first stands in `bytes` (a vlmetalayer in its frame).
fn offset_of(bytes: &[u8], part: &[u8]) -> u64 {
    bytes.windows(part.len()).position(|w| w == part).unwrap() as u64
}

/// The damaged chunks a `verify --json` report names, (array, chunk) in its order.
fn damaged_chunks(v: &Value) -> Vec<(String, u64)> {
    v["damaged"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (label(&d["array"]), d["chunk"].as_u64().unwrap()))
        .collect()
}

/// The chunks python-blosc2 read from a salvaged leaf (`now`) against the sound source's
/// (`was`), pairwise: chunk `i` zeros where `zeroed(i)`, else as it was (`what` names the
/// leaf in the messages).
fn assert_salvaged(
    was: &[Option<(String, bool)>],
    now: &[Option<(String, bool)>],
    zeroed: impl Fn(usize) -> bool,
    what: &str,
) {
    for (i, (was, now)) in was.iter().zip(now).enumerate() {
        let now = now.as_ref().unwrap();
        if zeroed(i) {
            assert!(now.1, "{what}: chunk {i} not zeros");
        } else {
            assert_eq!(was.as_ref(), Some(now), "{what}: chunk {i} changed");
        }
    }
}

/// python-blosc2 writes a TreeStore at `path` (`.b2d` or `.b2z`) whose `/r` is 8 chunks of
/// random floats `d` (LZ4: a smashed chunk fails to decode, where the fixture stores' ramps
/// may decode to other values unnoticed), then runs the lines `more` (each indented by 4, in
/// the store's `with`).
fn lz4_store(py: &Path, path: &Path, more: &str) {
    let script = format!(
        "import sys, numpy as np, blosc2\n\
         d = (np.random.default_rng(5).standard_normal(40000) * 100).round(1)\n\
         with blosc2.TreeStore(sys.argv[1], mode='w') as ts:\n\
         \x20   ts['/r'] = blosc2.asarray(d, chunks=(5000,), cparams={{'codec': blosc2.Codec.LZ4}})\n\
         {more}"
    );
    run_python(py, &["-c", &script, path.to_str().unwrap()]);
}

/// Smashes the index of contiguous frame `p` and the middle of its chunk 3.
fn smash_index_and_chunk_3(p: &Path) {
    let a = array(p);
    let idx = a.frame_info().unwrap().index_offset.unwrap();
    let (s3, c3) = chunk_at(&a, 3);
    drop(a);
    smash(p, idx + 4, 12);
    smash(p, s3 + c3 / 2, 64);
}

/// Leaves of collections are opened leniently too (before session 31 only a frame checked on
/// its own was): in a `.b2d` store python-blosc2 wrote, member `/r`'s index and chunk 3
/// damaged; in a directory of sources, a contiguous frame's index and chunk 3, a sparse
/// frame's index and chunk 3, and another frame's vlmetalayer damaged, beside a sound b2nd.
/// python-blosc2 cannot open the leaves with a damaged index. `verify` names each damaged part by its
/// key, still checks every chunk of those leaves and finds exactly chunk 3 of each;
/// `salvage` rebuilds them in DEST (exit 0 for the store, whose index is recovered; exit 1
/// for the directory, whose lost attributes it names) and python-blosc2 reads every leaf of
/// DEST with every other chunk exact and chunk 3 zeros, the record in each leaf's vlmeta.
#[test]
fn verify_and_salvage_damaged_leaf_frames_of_a_b2d_store_and_a_directory() {
    let py = or_skip!(python(
        "verify_and_salvage_damaged_leaf_frames_of_a_b2d_store_and_a_directory"
    ));
    let f = fixtures(&py);
    let dir = tempfile::tempdir().unwrap();

    // The store: `/r` is 8 chunks of random floats.
    let store = dir.path().join("store.b2d");
    lz4_store(
        &py,
        &store,
        "\x20   ts['/g/b'] = blosc2.asarray(np.linspace(0, 1, 30000), chunks=(10000,))\n\
         \x20   ts['/g'].vlmeta['kind'] = 'group'",
    );
    let good = reference(&py, "store", &store);
    assert!(good.errors.is_empty(), "{:?}", good.errors);
    smash_index_and_chunk_3(&store.join("r.b2nd"));
    let r = reference(&py, "store", &store);
    assert!(
        r.errors.contains_key("/r"),
        "python-blosc2 opens /r: {:?}",
        r.errors
    );
    let (exit, v) = verify_json(&store);
    assert_eq!(exit, 1, "{v:#}");
    let problems = v["structure"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{v:#}");
    assert_eq!(problems[0]["array"], "/r", "{v:#}");
    assert!(
        structure(&v).contains("located by walking their headers"),
        "{v:#}"
    );
    let damaged = damaged_chunks(&v);
    assert_eq!(damaged, [("/r".to_owned(), 3)], "{v:#}");
    let all: usize = good.chunks.values().map(Vec::len).sum();
    assert_eq!(
        v["chunks"], all as u64,
        "every chunk of every leaf checked: {v:#}"
    );
    let dest = dir.path().join("salvaged.b2d");
    let (exit, err) = salvage_run(&store, &dest);
    assert_eq!(exit, Some(0), "{err}");
    assert!(err.contains("/r: index damaged"), "{err}");
    assert!(err.contains("(rebuilt in DEST)"), "{err}");
    let after = reference(&py, "store", &dest);
    assert!(after.errors.is_empty(), "{:?}", after.errors);
    for (key, list) in &good.chunks {
        let got = &after.chunks[key];
        assert_eq!(got.len(), list.len(), "{key}");
        assert_salvaged(list, got, |i| key == "/r" && i == 3, key);
    }
    let record = &after.salvage["/r"];
    assert_eq!(record["damaged"].as_array().unwrap().len(), 1, "{record}");
    assert!(
        record["structure"][0]
            .as_str()
            .unwrap()
            .contains("index damaged")
    );
    assert_eq!(verify_json(&dest).0, 0, "salvaged store not sound");

    // The directory of sources.
    let sources = dir.path().join("sources");
    std::fs::create_dir(&sources).unwrap();
    let frame = f.join("frame.b2frame");
    let good_frame = reference(&py, "frame", &frame);
    for name in ["f.b2frame", "t.b2frame"] {
        std::fs::copy(&frame, sources.join(name)).unwrap();
    }
    copy_tree(&f.join("sframe"), &sources.join("s"));
    std::fs::copy(f.join("arr.b2nd"), sources.join("arr.b2nd")).unwrap();
    smash_index_and_chunk_3(&sources.join("f.b2frame"));
    let s = array(&sources.join("s"));
    let sidx = s.frame_info().unwrap().index_offset.unwrap();
    drop(s);
    smash(&sources.join("s/chunks.b2frame"), sidx + 4, 12);
    let c3 = sources.join("s/00000003.chunk");
    smash(&c3, std::fs::metadata(&c3).unwrap().len() / 2, 64);
    let t = array(&sources.join("t.b2frame"));
    let vl = t.vlmetalayers()[0].chunk.clone();
    drop(t);
    let bytes = std::fs::read(sources.join("t.b2frame")).unwrap();
    let vl_at = offset_of(&bytes, &vl);
    smash(&sources.join("t.b2frame"), vl_at, 16);
    // (python-blosc2 opens `t.b2frame`: it reads vlmetalayers only when asked.)
    for name in ["f.b2frame", "s"] {
        let r = reference(&py, "frame", &sources.join(name));
        assert!(!r.errors.is_empty(), "python-blosc2 opens {name}");
    }
    let (exit, v) = verify_json(&sources);
    assert_eq!(exit, 1, "{v:#}");
    let mut damaged = damaged_chunks(&v);
    damaged.sort();
    assert_eq!(
        damaged,
        [("/f.b2frame".to_owned(), 3), ("/s".to_owned(), 3)],
        "{v:#}"
    );
    let why = structure(&v);
    assert!(why.contains("located by walking their headers"), "{why}");
    assert!(why.contains("located by their files' names"), "{why}");
    assert!(why.contains("vlmetalayer damaged"), "{why}");
    let dest = dir.path().join("salvaged-sources");
    let (exit, err) = salvage_run(&sources, &dest);
    assert_eq!(exit, Some(1), "{err}");
    assert!(err.contains("/t.b2frame: vlmetalayer damaged"), "{err}");
    assert!(err.contains("(lost in DEST)"), "{err}");
    assert!(dest.is_dir(), "DEST written: {err}");
    for name in ["f.b2frame", "s", "t.b2frame"] {
        let after = reference(&py, "frame", &dest.join(name));
        assert!(after.errors.is_empty(), "{name}: {:?}", after.errors);
        let got = &after.chunks[""];
        assert_eq!(got.len(), good_frame.chunks[""].len(), "{name}");
        assert_salvaged(
            &good_frame.chunks[""],
            got,
            |i| name != "t.b2frame" && i == 3,
            name,
        );
        assert!(
            after.salvage[""]["structure"][0].is_string(),
            "{name}: {:?}",
            after.salvage
        );
    }
    assert_eq!(
        std::fs::read(dest.join("arr.b2nd")).unwrap(),
        std::fs::read(f.join("arr.b2nd")).unwrap(),
        "the sound leaf is copied as it was"
    );
    assert_eq!(verify_json(&dest).0, 0, "salvaged directory not sound");
}

/// A contiguous frame python-blosc2 wrote, cut short (a copy or download interrupted). Cut in
/// its trailer (the index whole) or in its index (the chunk area whole): `verify` opens it
/// leniently and says it is truncated, the chunks located by the index or by walking their
/// headers; `salvage` writes a sound frame with every chunk exact (exit 1: the attributes,
/// in the trailer, are lost). Cut inside the chunk area, or in the index of a frame with a
/// chunk of zeros (stored in the index alone): refused by both, saying why (which chunk each
/// whole one is cannot be told). A whole file whose `frame_len` alone is damaged (too large)
/// ends with a whole trailer: opened with its attributes, salvaged with exit 0. Cut inside
/// the header: refused, and a mount's refusal points to `verify`. Before session 31 every
/// one of these was refused ("frame_len exceeds the bytes of the file").
#[test]
fn verify_and_salvage_a_truncated_frame() {
    let py = or_skip!(python("verify_and_salvage_a_truncated_frame"));
    let f = fixtures(&py);
    let src = f.join("frame.b2frame");
    let a = array(&src);
    let n = a.nchunks();
    assert!(n > 6, "{n} chunks");
    let (s5, c5) = chunk_at(&a, 5);
    let info = a.frame_info().unwrap();
    let index_at = info.index_offset.unwrap();
    drop(a);
    let len = std::fs::metadata(&src).unwrap().len();
    let good = reference(&py, "frame", &src);
    let dir = tempfile::tempdir().unwrap();
    let cut = |name: &str, from: &Path, at: u64| -> PathBuf {
        let p = dir.path().join(name);
        let bytes = std::fs::read(from).unwrap();
        std::fs::write(&p, &bytes[..at as usize]).unwrap();
        p
    };
    // In the trailer, and in the index: every chunk there.
    for (name, at) in [("trailer", len - 8), ("index", index_at + 10)] {
        let p = cut(&format!("{name}.b2frame"), &src, at);
        assert!(
            !reference(&py, "frame", &p).errors.is_empty(),
            "{name}: python-blosc2 opens it"
        );
        let dest = dir.path().join(format!("salvaged-{name}.b2frame"));
        verify_then_salvage(&py, &p, &dest, &good, n, (&[], "truncated", 1), name);
    }
    // Inside the chunk area: refused.
    let p = cut("chunks.b2frame", &src, s5 + c5 / 2);
    let (exit, v) = verify_json(&p);
    assert_eq!(exit, 1, "{v:#}");
    assert!(
        structure(&v).contains("ends inside the chunk area"),
        "{v:#}"
    );
    assert_eq!(v["chunks"], 0, "{v:#}");
    let dest = dir.path().join("salvaged-chunks.b2frame");
    let (exit, err) = salvage_run(&p, &dest);
    assert_eq!(exit, Some(1), "{err}");
    assert!(err.contains("ends inside the chunk area"), "{err}");
    assert!(!dest.exists());
    // A frame with a chunk of zeros, cut in its index: the walk cannot place the chunks.
    let zsrc = dir.path().join("zeros.b2nd");
    run_python(
        &py,
        &[
            "-c",
            "import sys, numpy as np, blosc2\n\
             d = (np.random.default_rng(7).standard_normal(40000) * 100).round(1)\n\
             d[10000:15000] = 0\n\
             blosc2.asarray(d, chunks=(5000,), urlpath=sys.argv[1], mode='w', cparams={'codec': blosc2.Codec.LZ4})",
            zsrc.to_str().unwrap(),
        ],
    );
    let z = array(&zsrc);
    assert!(
        z.frame_index_entry(2).unwrap() < 0,
        "chunk 2 is not special"
    );
    let zindex = z.frame_info().unwrap().index_offset.unwrap();
    drop(z);
    let p = cut("zeros-index.b2nd", &zsrc, zindex + 10);
    let (exit, v) = verify_json(&p);
    assert_eq!(exit, 1, "{v:#}");
    assert!(structure(&v).contains("places are unknown"), "{v:#}");
    assert_eq!(v["chunks"], 0, "{v:#}");
    // frame_len alone damaged: the file ends with a whole trailer.
    let p = dir.path().join("frame_len.b2frame");
    let mut bytes = std::fs::read(&src).unwrap();
    let fl = bytes[..87].iter().position(|&b| b == 0xcf).unwrap();
    bytes[fl + 1..fl + 9].copy_from_slice(&(len + 1000).to_be_bytes());
    std::fs::write(&p, &bytes).unwrap();
    let (exit, v) = verify_json(&p);
    assert_eq!(exit, 1, "{v:#}");
    assert!(structure(&v).contains("frame_len damaged"), "{v:#}");
    let dest = dir.path().join("salvaged-frame_len.b2frame");
    let (exit, err) = salvage_run(&p, &dest);
    assert_eq!(exit, Some(0), "{err}");
    let after = reference(&py, "frame", &dest);
    assert_eq!(after.chunks, good.chunks);
    assert!(
        after.salvage[""]["structure"][0]
            .as_str()
            .unwrap()
            .contains("frame_len")
    );
    // Inside the header: refused by both.
    let p = cut("header.b2frame", &src, 90);
    let (exit, v) = verify_json(&p);
    assert_eq!(exit, 1, "{v:#}");
    assert!(structure(&v).contains("frame_len"), "{v:#}");
    let (exit, err) = salvage_run(&p, &dir.path().join("salvaged-header.b2frame"));
    assert_eq!(exit, Some(1), "{err}");
    // A mount refuses a truncated frame, and says where to look.
    let out = b2fs()
        .arg("info")
        .arg(dir.path().join("chunks.b2frame"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("b2fs verify"), "{said}");
}

/// A `.b2z` python-blosc2 wrote, cut short: `salvage` finds its members by their local
/// headers when the zip does not open. Cut in the central directory (every member whole,
/// `embed.b2e` included): DEST is a `.b2z` again, python-blosc2 reads every key and the
/// group's attributes as before, exit 0. Cut inside the second member: DEST is a directory of
/// the member files (`embed.b2e`, written last, is lost: exit 1, named), in which
/// python-blosc2 reads the first member whole; the member cut inside its chunks is named as
/// not salvaged. Cut right after the first member: the same, the end named. A zip that opens
/// but whose `embed.b2e` is damaged is refused as any damaged store (no extraction). A file
/// that is no zip past its first bytes: nothing written. Before session 31, salvage refused
/// every zip it could not open.
#[test]
fn salvage_a_b2z_cut_short() {
    let py = or_skip!(python("salvage_a_b2z_cut_short"));
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("store.b2z");
    lz4_store(
        &py,
        &src,
        "\x20   ts['/s/t'] = blosc2.asarray(d * 2, chunks=(10000,), cparams={'codec': blosc2.Codec.LZ4})\n\
         \x20   ts['/s'].vlmeta['kind'] = 'group'\n\
         \x20   ts.vlmeta['title'] = 'kept'",
    );
    let good = reference(&py, "store", &src);
    assert!(good.errors.is_empty(), "{:?}", good.errors);
    let bytes = std::fs::read(&src).unwrap();
    let opened = container::open_any(&src).unwrap();
    let Opened::Collection(c) = &opened else {
        panic!("not a collection")
    };
    let chunk = |key: &str, i: usize| {
        let Some(container::store::Node::Leaf(leaf)) = c.find(key) else {
            panic!("no {key}")
        };
        let a = leaf.array().unwrap();
        (chunk_at(a, i), a.nchunks())
    };
    let ((t1, tc1), _) = chunk("/s/t", 1);
    let ((r_last, r_lastc), rn) = chunk("/r", 7);
    // Where /r's member ends: the next local header after its chunks (its index and trailer
    // lie between).
    let r_chunks_end = (r_last + r_lastc) as usize;
    let r_end = r_chunks_end
        + bytes[r_chunks_end..]
            .windows(4)
            .position(|w| w == b"PK\x03\x04")
            .unwrap();
    drop(opened);
    let cd = bytes.windows(4).position(|w| w == b"PK\x01\x02").unwrap();
    let attrs = |p: &Path| -> Value {
        let out = run_python(
            &py,
            &[
                "-c",
                "import sys, json, blosc2\n\
                 with blosc2.TreeStore(sys.argv[1], mode='r') as ts:\n\
                 \x20   print(json.dumps([dict(ts.vlmeta[:]), dict(ts['/s'].vlmeta[:])]))",
                p.to_str().unwrap(),
            ],
        );
        serde_json::from_slice(&out).unwrap()
    };
    let cut = |name: &str, at: usize| -> PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, &bytes[..at]).unwrap();
        p
    };

    // Cut in the central directory.
    let p = cut("cd.b2z", cd + 20);
    let dest = dir.path().join("salvaged-cd.b2z");
    let (exit, err) = salvage_run(&p, &dest);
    assert_eq!(exit, Some(0), "{err}");
    assert!(
        err.contains("members found by their local headers"),
        "{err}"
    );
    let after = reference(&py, "store", &dest);
    assert!(after.errors.is_empty(), "{:?}", after.errors);
    assert_eq!(after.chunks, good.chunks);
    assert_eq!(
        attrs(&dest),
        serde_json::json!([{"title": "kept"}, {"kind": "group"}])
    );
    assert_eq!(verify_json(&dest).0, 0);
    // python-blosc2 puts embed.b2e last, and so does the packed copy.
    let names = run_python(
        &py,
        &[
            "-c",
            "import sys, zipfile; print(zipfile.ZipFile(sys.argv[1]).namelist()[-1])",
            dest.to_str().unwrap(),
        ],
    );
    assert_eq!(String::from_utf8_lossy(&names).trim(), "embed.b2e");

    // Cut inside /s/t's chunk 1, and right after /r (the first member).
    for (name, at) in [("in-t", (t1 + tc1 / 2) as usize), ("after-r", r_end)] {
        let p = cut(&format!("{name}.b2z"), at);
        let dest = dir.path().join(format!("salvaged-{name}"));
        let (exit, err) = salvage_run(&p, &dest);
        assert_eq!(exit, Some(1), "{name}: {err}");
        assert!(err.contains("embed.b2e: not found"), "{name}: {err}");
        assert!(dest.is_dir(), "{name}: {err}");
        let after = reference(&py, "frame", &dest.join("r.b2nd"));
        assert!(after.errors.is_empty(), "{name}: {:?}", after.errors);
        assert_eq!(after.chunks[""], good.chunks["/r"], "{name}");
        assert_eq!(after.chunks[""].len(), rn);
        if name == "in-t" {
            assert!(err.contains("ends inside the chunk area"), "{name}: {err}");
        } else {
            assert!(
                err.contains("the file ends after member r.b2nd"),
                "{name}: {err}"
            );
        }
    }

    // A zip that opens, its embed.b2e damaged: no extraction, the store's refusal.
    let p = dir.path().join("estore.b2z");
    let mut b = bytes.clone();
    // The first `embed.b2e` is its local header's name (the central directory's comes last).
    let e = b.windows(9).position(|w| w == b"embed.b2e").unwrap();
    let lh = e - 30;
    assert_eq!(&b[lh..lh + 4], b"PK\x03\x04");
    let data = e + 9 + usize::from(u16::from_le_bytes([b[lh + 28], b[lh + 29]]));
    // Its frame header's magic and lengths.
    for k in &mut b[data..data + 32] {
        *k ^= 0x5a;
    }
    std::fs::write(&p, &b).unwrap();
    let dest = dir.path().join("salvaged-estore");
    let (exit, err) = salvage_run(&p, &dest);
    assert_eq!(exit, Some(1), "{err}");
    assert!(!err.contains("local headers"), "{err}");
    assert!(!dest.exists());

    // No zip past its first bytes.
    let p = dir.path().join("junk.b2z");
    let mut junk = b"PK\x03\x04".to_vec();
    junk.extend((0..200u8).map(|i| i.wrapping_mul(37)));
    std::fs::write(&p, &junk).unwrap();
    let dest = dir.path().join("salvaged-junk");
    let (exit, err) = salvage_run(&p, &dest);
    assert_eq!(exit, Some(1), "{err}");
    assert!(err.contains("no member was found"), "{err}");
    assert!(!dest.exists());
    // No temporary left beside DEST by any of them.
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
