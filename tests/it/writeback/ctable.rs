//! ctable columns through a mount grow and shrink together, checked against bcolz doing the
//! same row operations.

use super::*;

fn write_at_end(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
}

fn sizes_rows(m: &Mount, col: &str) -> u64 {
    let v: Value =
        serde_json::from_slice(&std::fs::read(m.path(&format!("{col}/meta/sizes"))).unwrap())
            .unwrap();
    v["shape"][0].as_u64().unwrap()
}

/// Rows of column `col` of the mounted ctable, as the mount shows them (all chunk files).
fn column_bytes(m: &Mount, col: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Ok(b) = std::fs::read(m.path(&format!("{col}/data/{i:08}.bin"))) {
        out.extend(b);
        i += 1;
    }
    out
}

/// A bcolz ctable whose columns have different chunklens and dflts, edited column by column
/// through a mount: growing one column (extending its last chunk, appending a chunk with
/// `cp`) grows every column with its dflt, removing or truncating the first column's or
/// another column's last chunk shrinks them all; a shell's `cat > last chunk` replaces it;
/// an append after a partial last chunk is EINVAL. After each step a copy of the source must
/// equal what bcolz makes of the pristine table with the same row operations (resize, then
/// set the written rows); bcolz then appends to the result.
#[test]
fn writeback_ctable_columns_grow_and_shrink_together() {
    let py = or_skip!(fuse_and_python(
        "writeback_ctable_columns_grow_and_shrink_together"
    ));
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let src = root.join("ct2");
    let pristine = root.join("pristine");
    crate::support::oracle(&py, &[&"scripts/oracle/writeback.py", &"ctable", &src]);
    crate::support::copy_all(&src, &pristine);
    let m = Mount::daemon(&src, &[]);
    let mut steps = Vec::new();
    let mut snap = |ops: Value| {
        let k = steps.len();
        let to = root.join(format!("snap{k}"));
        crate::support::copy_all(&src, &to);
        steps.push(serde_json::json!({"path": to, "ops": ops}));
    };
    let raw = |name: &str, bytes: &[u8]| -> String {
        let f = root.join(name);
        std::fs::write(&f, bytes).unwrap();
        f.display().to_string()
    };
    // Rows of valid values for a column: its own rows 0.. cycled from `shift`.
    let rows_like = |col: &str, atom: usize, n: usize, shift: usize| -> Vec<u8> {
        crate::support::cycled_items(&column_bytes(&m, col), atom, n, shift)
    };

    // 1. Extend the last chunk of b (float64, 300 rows a chunk, 2500 = 8 x 300 + 100) by 200
    //    rows: every column has 2700 rows, a's new rows hold its dflt -1.
    let ext = rows_like("b", 8, 200, 7);
    write_at_end(&m.path("b/data/00000008.bin"), &ext);
    for col in ["a", "b", "s", "be", "u", "f"] {
        assert_eq!(sizes_rows(&m, col), 2700, "{col}");
    }
    let a2 = std::fs::read(m.path("a/data/00000002.bin")).unwrap();
    assert_eq!(a2.len(), 700 * 4);
    assert!(a2[500 * 4..].chunks(4).all(|v| v == (-1i32).to_le_bytes()));
    let f = raw("1.bin", &ext);
    snap(serde_json::json!([{"resize": 2700}, {"set": "b", "start": 2500, "file": f}]));

    // 2. Appending after a partial last chunk (s: 700 rows a chunk, 2700 = 3 x 700 + 600):
    //    EINVAL at close, nothing changes.
    let mut f = std::fs::File::create(m.path("s/data/00000004.bin")).unwrap();
    f.write_all(&rows_like("s", 2, 700, 0)).unwrap();
    assert_eq!(os_err(f.sync_all()), Some(libc::EINVAL));
    drop(f);
    assert!(!m.path("s/data/00000004.bin").exists());
    assert_eq!(sizes_rows(&m, "a"), 2700);

    // 3. A shell's `cat new > u/data/<last chunk>` (u: 900 rows a chunk, 3 full chunks):
    //    the chunk is replaced, the length stays.
    let u2 = rows_like("u", 8, 900, 13);
    let f = raw("3.bin", &u2);
    let st = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "cat '{f}' > '{}'",
            m.path("u/data/00000002.bin").display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(std::fs::read(m.path("u/data/00000002.bin")).unwrap(), u2);
    assert_eq!(sizes_rows(&m, "f"), 2700);
    snap(serde_json::json!([{"set": "u", "start": 1800, "file": f}]));

    // 4. Remove the last chunk of the first column a (1000, 1000, 700): 2000 rows; other
    //    columns are cut inside a chunk.
    std::fs::remove_file(m.path("a/data/00000002.bin")).unwrap();
    for col in ["a", "b", "s", "be", "u", "f"] {
        assert_eq!(sizes_rows(&m, col), 2000, "{col}");
    }
    assert_eq!(
        std::fs::metadata(m.path("b/data/00000006.bin"))
            .unwrap()
            .len(),
        200 * 8
    );
    snap(serde_json::json!([{"resize": 2000}]));

    // 5. `truncate -s` of f's only chunk (bool, 4000 rows a chunk) to 1800 rows.
    let st = Command::new("truncate")
        .args(["-s", "1800"])
        .arg(m.path("f/data/00000000.bin"))
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(sizes_rows(&m, "a"), 1800);
    snap(serde_json::json!([{"resize": 1800}]));

    // 6. Fill a's partial last chunk (800 rows) and append a chunk with `cp`: 3000 rows.
    let fill = rows_like("a", 4, 200, 3);
    write_at_end(&m.path("a/data/00000001.bin"), &fill);
    let app = rows_like("a", 4, 1000, 5);
    let f = raw("6.bin", &app);
    let st = Command::new("cp")
        .arg(&f)
        .arg(m.path("a/data/00000002.bin"))
        .status()
        .unwrap();
    assert!(st.success());
    for col in ["a", "b", "s", "be", "u", "f"] {
        assert_eq!(sizes_rows(&m, col), 3000, "{col}");
    }
    let f = raw("6all.bin", &[fill, app].concat());
    snap(serde_json::json!([{"resize": 3000}, {"set": "a", "start": 1800, "file": f}]));
    m.umount();

    let spec = root.join("spec.json");
    let work = root.join("oracle");
    std::fs::create_dir(&work).unwrap();
    let body = serde_json::json!({"pristine": pristine, "work": work, "steps": steps,
                                  "mutate": true});
    std::fs::write(&spec, body.to_string()).unwrap();
    assert_eq!(
        crate::support::oracle_says(&py, &[&"scripts/oracle/writeback.py", &"ctable_ops", &spec]),
        "5"
    );
}
