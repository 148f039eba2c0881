//! bcolz carrays and ctables against bcolz-zipline's sidecars: geometry, attributes and every
//! chunk's sha256, for each fixture of `tests/data/bcolz`.

use super::*;

fn check_carray(r: &mut Report, name: &str, a: &Array, sc: &Value) {
    r.check(name, "kind", a.kind(), SourceKind::BcolzCarray);
    let shape = u64s(&sc["sizes"]["shape"]);
    let len = sc["len"].as_u64().unwrap();
    let chunklen = sc["chunklen"].as_u64().unwrap();
    r.check(name, "shape", a.geometry().shape.clone(), shape.clone());
    let mut cs = vec![chunklen];
    cs.extend_from_slice(&shape[1..]);
    r.check(
        name,
        "chunkshape",
        a.geometry().chunkshape.clone(),
        Some(cs),
    );
    r.check(
        name,
        "dtype",
        a.geometry().dtype.clone(),
        sc["dtype"].as_str().map(String::from),
    );
    r.check(
        name,
        "sizes",
        a.bcolz_sizes().cloned(),
        Some(sc["sizes"].clone()),
    );
    // Key order is the file's (the tree shows these objects as they are stored).
    let keys = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default()
    };
    r.check(
        name,
        "storage key order",
        keys(a.bcolz_storage()),
        keys(Some(&sc["storage"])),
    );
    r.check(
        name,
        "attrs key order",
        keys(Some(a.attrs())),
        keys(Some(&sc["attrs"])),
    );
    r.check(
        name,
        "storage",
        a.bcolz_storage().cloned(),
        Some(sc["storage"].clone()),
    );
    r.check(name, "attrs", a.attrs().clone(), sc["attrs"].clone());
    r.check(
        name,
        "cbytes",
        a.cbytes(),
        sc["sizes"]["cbytes"].as_u64().unwrap(),
    );
    r.check(
        name,
        "nbytes",
        a.nbytes(),
        sc["sizes"]["nbytes"].as_u64().unwrap(),
    );
    if let Some(full) = sc["nchunks_full"].as_u64() {
        let left = sc["leftover_items"].as_u64().unwrap();
        r.check(
            name,
            "nchunks",
            a.nchunks() as u64,
            full + u64::from(left > 0),
        );
    }
    r.check(name, "nchunks", a.nchunks() as u64, len.div_ceil(chunklen));
    let files = sc["chunk_files"].as_array().unwrap();
    let mut data = Vec::new();
    for i in 0..a.nchunks() {
        let f = files
            .iter()
            .find(|f| f["file"] == format!("data/__{i}.blp"));
        let Some(f) = f else {
            r.0.push(format!("{name}: sidecar has no data/__{i}.blp"));
            continue;
        };
        let Some(d) = r.check_chunk(name, a, i, f) else {
            continue;
        };
        let h = a.chunk_header(i).expect("blosc1 header");
        r.check(
            name,
            &format!("chunk {i} header nbytes"),
            h.nbytes as u64,
            f["nbytes"].as_u64().unwrap(),
        );
        let n = a.chunk_nbytes(i).unwrap();
        // Sizes from the metadata agree with each chunk's own Blosc1 header.
        r.check(
            name,
            &format!("chunk {i} nbytes"),
            n as u64,
            f["nbytes"].as_u64().unwrap(),
        );
        data.extend_from_slice(&d[..n.min(d.len())]);
    }
    r.check(
        name,
        "array sha256",
        sha256_hex(&data),
        sc["array_sha256"].as_str().unwrap().to_string(),
    );
}

#[test]
fn container_bcolz_carrays_match_reference_sidecars() {
    let fixtures = bcolz_sidecars("carray");
    assert!(fixtures.len() >= 20, "found {}", fixtures.len());
    let mut r = Report::default();
    for (path, sc) in &fixtures {
        let name = sc["name"].as_str().unwrap();
        let a = open_array(path);
        r.check(name, "has __attrs__", a.bcolz_has_attrs_file(), Some(true));
        check_carray(&mut r, name, &a, sc);
    }
    r.finish(fixtures.len());
}

#[test]
fn container_bcolz_ctables_match_reference_sidecars() {
    let fixtures = bcolz_sidecars("ctable");
    assert!(!fixtures.is_empty());
    let mut r = Report::default();
    for (path, sc) in &fixtures {
        let name = sc["name"].as_str().unwrap();
        let t = match container::open(path) {
            Ok(Container::Table(t)) => t,
            other => panic!("{name}: {other:?}"),
        };
        r.check(name, "attrs", t.attrs.clone(), sc["attrs"].clone());
        let names: Vec<&str> = t.columns.iter().map(|(n, _)| n.as_str()).collect();
        let want: Vec<&str> = sc["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        r.check(name, "column order", names, want);
        for (col, a) in &t.columns {
            let mut csc = sc["columns"][col].clone();
            csc["name"] = json!(format!("{name}/{col}"));
            check_carray(&mut r, &format!("{name}/{col}"), a, &csc);
        }
    }
    r.finish(fixtures.len());
}
