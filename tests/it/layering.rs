//! The layering rule, checked on the source text: each top-level module uses only the layers
//! below it, `fuser` appears only in the fuse adapter and the CLI, and `unsafe` only in the
//! modules allowed to hold it (SIMD filter kernels, the file source, the SIGBUS-guarded frame
//! mappings, the commit lock's flock, the disk cache's flock, the daemon's libc calls and its
//! inherited `/dev/fuse` descriptor, the huge-page advice for large buffers); and the code
//! the test suite compiles keeps to Cargo.toml's `rust-version` (no let chains before 1.88).

use std::fs;
use std::path::{Path, PathBuf};

/// Which crate modules each top-level module may use.
/// `error` (one-line error chains) is usable by every layer. `tree` reaches chunk bytes only
/// through `reader`; it names `codec` only to print format fields in `meta/storage`.
const ALLOWED: &[(&str, &[&str])] = &[
    ("error", &["error"]),
    ("mem", &["mem"]),
    ("codec", &["codec"]),
    ("container", &["codec", "container", "error", "mem"]),
    ("cache", &["cache", "mem"]),
    (
        "reader",
        &["cache", "codec", "container", "error", "mem", "reader"],
    ),
    (
        "commit",
        &["codec", "commit", "container", "error", "reader"],
    ),
    (
        "tree",
        &["codec", "commit", "container", "error", "reader", "tree"],
    ),
    ("fuse", &["error", "fuse", "tree"]),
    // A remote object is a byte source below the container layer: it implements the
    // container's `ByteSource` trait and uses nothing else of it.
    ("remote", &["container", "remote"]),
    (
        "cli",
        &[
            "cli",
            "codec",
            "commit",
            "container",
            "cache",
            "error",
            "mem",
            "reader",
            "remote",
            "tree",
            "fuse",
        ],
    ),
];

/// Files where `unsafe` is allowed, by path prefix under src/.
const UNSAFE_ALLOWED: &[&str] = &[
    "codec/filter/bitshuffle_simd.rs",
    "codec/filter/bytedelta_simd.rs",
    "codec/filter/shuffle_simd.rs",
    "codec/streams.rs",
    "container/mapped.rs",
    "container/source.rs",
    "container/write/io.rs",
    "remote/disk.rs",
    "cli/daemon.rs",
    "cli/devfd.rs",
    "mem.rs",
];

/// The crate's `src/` and every Rust file below it.
fn src_files() -> (PathBuf, Vec<PathBuf>) {
    let src = support::repo_root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    (src, files)
}

/// `report(text)` of every Rust file of `src/`: the path (below `src/`) of each file it says
/// something of, followed by what it says.
fn src_files_where(report: impl Fn(&str) -> Option<String>) -> Vec<String> {
    let (src, files) = src_files();
    files
        .iter()
        .filter_map(|f| {
            let said = report(&fs::read_to_string(f).unwrap())?;
            Some(format!("{}{said}", f.strip_prefix(&src).unwrap().display()))
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source with line comments (including doc comments) removed; string literals are kept
/// (none of the checked tokens appear in strings today).
fn code_only(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn top_module(rel: &Path) -> String {
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy()
        .to_string();
    first.trim_end_matches(".rs").to_string()
}

fn words_after<'a>(code: &'a str, prefix: &str) -> Vec<&'a str> {
    code.match_indices(prefix)
        .map(|(i, _)| {
            let rest = &code[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .collect()
}

#[test]
fn layers_only_use_the_layers_below() {
    let (src, files) = src_files();
    assert!(files.len() > 20, "found only {} source files", files.len());
    let mut violations = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let module = top_module(rel);
        let Some((_, allowed)) = ALLOWED.iter().find(|(m, _)| *m == module) else {
            continue; // lib.rs, main.rs
        };
        let code = code_only(&fs::read_to_string(file).unwrap());
        for used in words_after(&code, "crate::") {
            if !allowed.contains(&used) {
                violations.push(format!("{}: uses crate::{used}", rel.display()));
            }
        }
        if !matches!(module.as_str(), "fuse" | "cli") && code.contains("fuser") {
            violations.push(format!(
                "{}: mentions fuser outside fuse/cli",
                rel.display()
            ));
        }
        let unsafe_ok = UNSAFE_ALLOWED.iter().any(|p| rel.to_string_lossy() == *p);
        if !unsafe_ok
            && code
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == "unsafe")
        {
            violations.push(format!(
                "{}: unsafe outside the allowed modules",
                rel.display()
            ));
        }
    }
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_module_starts_with_a_doc_comment() {
    let missing = src_files_where(|text| (!text.trim_start().starts_with("//!")).then(String::new));
    assert!(
        missing.is_empty(),
        "modules without a leading //! doc: {missing:?}"
    );
}

/// A file longer than this holds more than one concern: split it where a seam shows.
const MAX_SOURCE_LINES: usize = 800;

#[test]
fn no_source_file_is_over_800_lines() {
    let long = src_files_where(|text| {
        let n = text.lines().count();
        (n > MAX_SOURCE_LINES).then(|| format!(" ({n} lines)"))
    });
    assert!(
        long.is_empty(),
        "source files over {MAX_SOURCE_LINES} lines: {long:?}"
    );
}

/// The `rust-version` of a Cargo.toml, as (major, minor).
fn rust_version(manifest: &str) -> (u32, u32) {
    let text = fs::read_to_string(support::repo_root().join(manifest)).unwrap();
    let v = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("rust-version = "))
        .unwrap_or_else(|| panic!("{manifest}: no rust-version"))
        .trim_matches('"');
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap());
    (parts.next().unwrap(), parts.next().unwrap())
}

/// The lines (from 1) of `code` where a let chain starts: an `&& let`, or an `if let` /
/// `while let` whose condition (up to its block's `{`) has an `&&` outside brackets (not
/// one inside a closure's). Struct patterns (`if let S { .. } = s && c`) are not seen.
fn let_chains(code: &str) -> Vec<usize> {
    let line_of = |at: usize| code[..at].matches('\n').count() + 1;
    // (Spelled apart, so that this file does not name itself.)
    let and_let = format!("{} let ", "&&");
    let mut found: Vec<usize> = code
        .match_indices(&and_let)
        .map(|(at, _)| line_of(at))
        .collect();
    for head in ["if let ", "while let "] {
        for (at, _) in code.match_indices(head) {
            let (mut depth, mut prev) = (0i32, ' ');
            for c in code[at + head.len()..].chars() {
                match c {
                    '(' | '[' => depth += 1,
                    ')' | ']' => depth -= 1,
                    '{' if depth <= 0 => break,
                    '&' if prev == '&' && depth == 0 => {
                        found.push(line_of(at));
                        break;
                    }
                    _ => {}
                }
                prev = c;
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

/// Let chains (`if let A = b && c`) are stable from Rust 1.88: below that `rust-version`,
/// none in what `cargo test` compiles (`src/`, `tests/`, `benches/`, and `fuzz/src/`, which
/// `tests/it/fuzz.rs` includes; the fuzz crate declares the same version). The code had
/// them while Cargo.toml said 1.85.
#[test]
fn the_code_keeps_to_the_declared_rust_version() {
    let declared = rust_version("Cargo.toml");
    assert_eq!(rust_version("fuzz/Cargo.toml"), declared, "fuzz/Cargo.toml");
    if declared >= (1, 88) {
        return;
    }
    let root = support::repo_root();
    let mut files = Vec::new();
    for dir in ["src", "tests", "benches", "fuzz/src"] {
        if root.join(dir).is_dir() {
            rust_files(&root.join(dir), &mut files);
        }
    }
    let found: Vec<String> = files
        .iter()
        .flat_map(|f| {
            let code = code_only(&fs::read_to_string(f).unwrap());
            let rel = f.strip_prefix(&root).unwrap().display().to_string();
            let_chains(&code)
                .into_iter()
                .map(move |line| format!("{rel}:{line}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "let chains need Rust 1.88, Cargo.toml says {}.{}: {found:?}",
        declared.0,
        declared.1
    );
}

#[test]
fn every_top_level_module_has_a_layering_rule() {
    let lib = fs::read_to_string(support::repo_root().join("src/lib.rs")).unwrap();
    let modules: Vec<&str> = lib
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub mod ")
                .or_else(|| l.trim().strip_prefix("mod "))
        })
        .map(|m| m.trim_end_matches(';'))
        .collect();
    assert!(modules.len() >= 10, "{modules:?}");
    for m in modules {
        assert!(
            ALLOWED.iter().any(|(name, _)| *name == m),
            "src/lib.rs declares `{m}`, which has no entry in ALLOWED"
        );
    }
}

use crate::support;
