//! ctables: a column update and the table's attributes; row-count changes resize every column
//! (`commit_column`), checked against bcolz doing the same row operations; a crash at every
//! step; repair.

use super::*;

fn open_table(path: &Path) -> container::Table {
    match container::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display())) {
        Container::Table(t) => t,
        Container::Array(_) => panic!("{} is not a ctable", path.display()),
    }
}

fn col_index(t: &container::Table, name: &str) -> usize {
    t.columns
        .iter()
        .position(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no column {name}"))
}

/// Rows per chunk and bytes per row of a carray.
fn chunk_geometry(a: &Array) -> (usize, usize) {
    let cl = a.geometry().chunkshape.as_ref().expect("chunkshape")[0] as usize;
    (cl, a.chunksize() / cl)
}

fn rows_of(a: &Array) -> usize {
    a.geometry().shape[0] as usize
}

/// `n` rows of valid values of column `a`: its own rows, starting at row `shift`, cycled.
fn rows_like(a: &Array, n: usize, shift: usize) -> Vec<u8> {
    let (_, atom) = chunk_geometry(a);
    crate::support::cycled_items(&chunks_of(a).concat(), atom, n, shift)
}

/// A fresh ctable "ct2" of the reference generator (6 columns, chunklens 300..4000, dflts).
fn gen_ctable(py: &Path, dir: &Path) -> PathBuf {
    let path = dir.join("ct2");
    run_python(
        py,
        &[
            "scripts/oracle/writeback.py",
            "ctable",
            path.to_str().expect("utf8"),
        ],
    );
    path
}

/// Every column of the ctable at `path` has `rows` rows (b2fs's view).
fn assert_table_rows(path: &Path, rows: usize, what: &str) {
    let t = open_table(path);
    for (name, a) in &t.columns {
        assert_eq!(rows_of(a), rows, "{what}: column {name}");
    }
}

#[test]
fn writer_ctable_column_update_and_table_attrs() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = fixture_copy(&tmp, "bcolz/ctable_3cols");
    let Container::Table(t) = container::open(&path).expect("open") else {
        panic!("not a table");
    };
    let (_, col) = t.columns.iter().find(|(n, _)| n == "val").expect("val");
    let mut want = chunks_of(col);
    let new0: Vec<u8> = (0..1000)
        .flat_map(|v| (v as f64 * 0.5).to_le_bytes())
        .collect();
    want[0] = new0.clone();
    commit(
        col,
        &Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(encode(col, &new0)))],
            ..Edit::default()
        },
    )
    .expect("commit");
    let attrs = json!({"title": "edited", "rows": 2500});
    commit_table_attrs(&t, &attrs).expect("table attrs");
    let Container::Table(t2) = container::open(&path).expect("reopen") else {
        panic!("not a table");
    };
    assert_eq!(t2.attrs, attrs);
    let (_, col2) = t2.columns.iter().find(|(n, _)| n == "val").expect("val");
    assert_eq!(chunks_of(col2), want);
    if let Some(py) = python("writer_ctable") {
        let exp = tmp.path().join("val.bin");
        std::fs::write(&exp, want.concat()).expect("write");
        let p = path.to_str().expect("utf8");
        check_py(&py, &["ctable", p, "val", exp.to_str().expect("utf8")]);
    }
}

#[test]
fn writer_ctable_commit_column_resizes_every_column() {
    let py = or_skip!(python("writer_ctable_commit_column_resizes_every_column"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = gen_ctable(&py, tmp.path());
    let work = tmp.path().join("t");
    copy_tree(&pristine, &work);
    let mut steps = Vec::new();
    let mut snap = |ops: Value, k: usize| {
        let dir = tmp.path().join(format!("snap{k}"));
        copy_tree(&work, &dir);
        steps.push(json!({"path": dir, "ops": ops}));
    };
    let raw = |name: &str, bytes: &[u8]| -> String {
        let f = tmp.path().join(name);
        std::fs::write(&f, bytes).expect("write");
        f.display().to_string()
    };

    // 1. Column b (not the first; 300 rows per chunk, 2500 = 8 x 300 + 100): its partial
    //    last chunk filled and one chunk appended: 3000 rows in every column.
    let t = open_table(&work);
    let b = col_index(&t, "b");
    let col = &t.columns[b].1;
    let (cl, _) = chunk_geometry(col);
    let n = col.nchunks();
    let fill = rows_like(col, cl, 11);
    let app = rows_like(col, cl, 23);
    let edit = Edit {
        updates: vec![(
            n - 1,
            b2fs::container::write::Chunk::from(encode(col, &fill)),
        )],
        appends: vec![b2fs::container::write::Chunk::from(encode(col, &app))],
        ..Edit::default()
    };
    commit_column(&t, b, &edit).expect("grow b");
    assert_table_rows(&work, 3000, "after growing b");
    let a = &open_table(&work).columns[0].1;
    let new_a = chunks_of(a).concat();
    assert!(
        new_a[2500 * 4..]
            .chunks(4)
            .all(|v| v == (-1i32).to_le_bytes()),
        "new rows of a hold its dflt -1"
    );
    let f = raw("b1.bin", &[fill, app].concat());
    snap(
        json!([{"resize": 3000}, {"set": "b", "start": 2400, "file": f}]),
        0,
    );

    // 2. The first column a (3 full chunks of 1000) loses its last chunk: 2000 rows, other
    //    columns cut inside a chunk (b: 6 x 300 + 200, s: 2 x 700 + 600, ...).
    let t = open_table(&work);
    commit_column(
        &t,
        0,
        &Edit {
            truncate: Some(2),
            ..Edit::default()
        },
    )
    .expect("shrink a");
    assert_table_rows(&work, 2000, "after removing a's last chunk");
    snap(json!([{"resize": 2000}]), 1);

    // 3. Column s (700 rows per chunk): its last chunk (600 rows) rewritten with 350: 1750.
    let t = open_table(&work);
    let s = col_index(&t, "s");
    let col = &t.columns[s].1;
    let short = rows_like(col, 350, 5);
    commit_column(
        &t,
        s,
        &Edit {
            updates: vec![(2, b2fs::container::write::Chunk::from(encode(col, &short)))],
            ..Edit::default()
        },
    )
    .expect("shrink s");
    assert_table_rows(&work, 1750, "after shrinking s");
    let f = raw("s3.bin", &short);
    snap(
        json!([{"resize": 1750}, {"set": "s", "start": 1400, "file": f}]),
        2,
    );

    // 4. Column f (one chunk of 4000 rows holding 1750) extended to 2100 rows, and column u
    //    (not resized) gets chunk 0 rewritten: two commits, one length change.
    let t = open_table(&work);
    let fc = col_index(&t, "f");
    let col = &t.columns[fc].1;
    let ext = rows_like(col, 2100, 1);
    commit_column(
        &t,
        fc,
        &Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(encode(col, &ext)))],
            ..Edit::default()
        },
    )
    .expect("grow f");
    assert_table_rows(&work, 2100, "after growing f");
    let t = open_table(&work);
    let u = col_index(&t, "u");
    let col = &t.columns[u].1;
    let (cl, _) = chunk_geometry(col);
    let u0 = rows_like(col, cl, 77);
    commit_column(
        &t,
        u,
        &Edit {
            updates: vec![(0, b2fs::container::write::Chunk::from(encode(col, &u0)))],
            ..Edit::default()
        },
    )
    .expect("update u");
    assert_table_rows(&work, 2100, "after updating u");
    let fe = raw("f4.bin", &ext);
    let fu = raw("u4.bin", &u0);
    snap(
        json!([{"resize": 2100}, {"set": "f", "start": 0, "file": fe},
               {"set": "u", "start": 0, "file": fu}]),
        3,
    );

    let spec = tmp.path().join("spec.json");
    let workdir = tmp.path().join("oracle");
    std::fs::create_dir(&workdir).expect("mkdir");
    let body = json!({"pristine": pristine, "work": workdir, "steps": steps, "mutate": true});
    std::fs::write(&spec, body.to_string()).expect("write");
    assert_eq!(
        python_says(
            &py,
            &[
                "scripts/oracle/writeback.py",
                "ctable_ops",
                spec.to_str().expect("utf8"),
            ],
        ),
        "4"
    );
}

/// `edit` of column `col` on fresh copies of `pristine` with a crash after every step until
/// the commit completes: the table bcolz opens has the old or the new length and rows, no
/// column shorter; `repair_table` on a copy leaves every column at the table's length.
fn ctable_crash_case(py: &Path, tmp: &Path, pristine: &Path, col: usize, edit: &Edit) -> usize {
    let done = tmp.join("done");
    copy_tree(pristine, &done);
    commit_column(&open_table(&done), col, edit).expect("full commit");
    let mut runs = Vec::new();
    let mut k = 0;
    loop {
        let copy = tmp.join(format!("k{k}"));
        copy_tree(pristine, &copy);
        let completed = commit_column_with_crash_after(&open_table(&copy), col, edit, k)
            .unwrap_or_else(|e| panic!("k={k}: {e}"));
        let t = open_table(&copy);
        let len = rows_of(&t.columns[0].1);
        for (name, a) in &t.columns {
            assert!(
                rows_of(a) >= len,
                "k={k}: column {name} shorter than the first"
            );
        }
        let rep = tmp.join(format!("r{k}"));
        copy_tree(&copy, &rep);
        let fixed = repair_table(&open_table(&rep)).expect("repair");
        assert!(fixed.short.is_empty());
        assert_table_rows(&rep, len, &format!("k={k} repaired"));
        runs.push(json!({"path": copy, "repaired": rep}));
        if completed {
            assert_eq!(
                rows_of(&t.columns[0].1),
                rows_of(&open_table(&done).columns[0].1),
                "completed commit"
            );
            break;
        }
        k += 1;
    }
    let spec = tmp.join("crash.json");
    let body = json!({"old": pristine, "new": done, "runs": runs});
    std::fs::write(&spec, body.to_string()).expect("write");
    assert_eq!(
        python_says(
            py,
            &[
                "scripts/oracle/writeback.py",
                "ctable_crash",
                spec.to_str().expect("utf8"),
            ],
        ),
        (k + 1).to_string()
    );
    k
}

#[test]
fn writer_ctable_crash_at_every_step() {
    let py = or_skip!(python("writer_ctable_crash_at_every_step"));
    // Growing through a column that is not the first: every other column first, then the
    // first column's meta/sizes. The partial last chunk keeps its rows and gets more (a
    // changed existing row would be visible as soon as its chunk file is renamed in: bcolz
    // has no multi-file transaction, see docs/SEMANTICS.md).
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = gen_ctable(&py, tmp.path());
    let t = open_table(&pristine);
    let b = col_index(&t, "b");
    let col = &t.columns[b].1;
    let (cl, atom) = chunk_geometry(col);
    let mut last = chunks_of(col).pop().expect("chunks");
    last.extend(rows_like(col, cl - last.len() / atom, 3));
    let edit = Edit {
        updates: vec![(
            col.nchunks() - 1,
            b2fs::container::write::Chunk::from(encode(col, &last)),
        )],
        appends: vec![b2fs::container::write::Chunk::from(encode(
            col,
            &rows_like(col, cl, 4),
        ))],
        ..Edit::default()
    };
    let steps = ctable_crash_case(&py, tmp.path(), &pristine, b, &edit);
    assert!(steps > 20, "{steps} steps");
    // Shrinking through the first column: its meta/sizes first.
    let tmp = tempfile::tempdir().expect("tempdir");
    let pristine = gen_ctable(&py, tmp.path());
    let edit = Edit {
        truncate: Some(2),
        ..Edit::default()
    };
    ctable_crash_case(&py, tmp.path(), &pristine, 0, &edit);
}

#[test]
fn writer_ctable_refusals_leave_the_table_unchanged() {
    let py = or_skip!(python("writer_ctable_refusals_leave_the_table_unchanged"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let path = gen_ctable(&py, tmp.path());
    let before = tree_hash(&path);
    let t = open_table(&path);
    let b = col_index(&t, "b");
    let col = &t.columns[b].1;
    let (cl, _) = chunk_geometry(col);
    let grow = Edit {
        appends: vec![b2fs::container::write::Chunk::from(encode(
            col,
            &rows_like(col, cl, 1),
        ))],
        ..Edit::default()
    };
    let refused = |e: container::ContainerError, why: &str| {
        assert!(
            matches!(e, container::ContainerError::Refused { .. }),
            "{e}"
        );
        assert!(e.to_string().contains(why), "{e}");
    };
    // The carray API does not change one column's row count alone.
    let full = Edit {
        updates: vec![(
            col.nchunks() - 1,
            b2fs::container::write::Chunk::from(encode(col, &rows_like(col, cl, 1))),
        )],
        ..Edit::default()
    };
    refused(
        commit(col, &full).expect_err("one column alone"),
        "commit_column",
    );
    // After a partial last chunk only the last chunk may be partial.
    refused(
        commit_column(&t, b, &grow).expect_err("append after a partial chunk"),
        "partial chunk can only be the last",
    );
    assert_eq!(tree_hash(&path), before);
    // A dflt that does not fit the dtype: nothing written.
    let storage = path.join("be/meta/storage");
    let text = std::fs::read_to_string(&storage).expect("storage");
    std::fs::write(&storage, text.replace("\"dflt\": 7", "\"dflt\": 70000")).expect("write");
    let before = tree_hash(&path);
    let t = open_table(&path);
    refused(
        commit_column(&t, b, &full).expect_err("bad dflt"),
        "dflt 70000",
    );
    assert_eq!(tree_hash(&path), before);
    std::fs::write(&storage, text).expect("write");
    // A column shorter than the first: the table's length is left alone.
    let t = open_table(&path);
    let col = &t.columns[b].1;
    commit(
        col,
        &Edit {
            attrs: Some(json!({})),
            ..Edit::default()
        },
    )
    .expect("attrs only");
    let sizes = path.join("u/meta/sizes");
    let orig = std::fs::read_to_string(&sizes).expect("sizes");
    std::fs::write(&sizes, orig.replace("[2500]", "[2400]")).expect("write");
    let before = tree_hash(&path);
    let t = open_table(&path);
    refused(
        commit_column(&t, b, &full).expect_err("short column"),
        "fewer than the 2500 of the first column",
    );
    assert_eq!(tree_hash(&path), before);
    let r = repair_table(&t).expect("repair");
    assert_eq!(r.short, vec![("u".to_string(), 2400)]);
    assert!(r.trimmed.is_empty());
    assert_eq!(tree_hash(&path), before);
}
