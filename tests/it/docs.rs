//! Every path a comment or a document names exists in this repository: comments in the code
//! (`src`, `tests`, `benches`, `fuzz`, `scripts`), doc comments included, with the files they
//! name by their name alone (`mapped.rs`, `tree/edit.rs`); links in the README and `docs/`,
//! and the paths their text names. A reader who follows a reference must find the file.

use std::fs;
use std::path::{Path, PathBuf};

use crate::support;

/// Top-level directories a repository path starts with.
const ROOTS: &[&str] = &[
    "src/",
    "tests/",
    "docs/",
    "scripts/",
    "benches/",
    "fuzz/",
    "examples/",
    ".ci/",
];

/// Paths that the code names on purpose but that only exist at run time (made by the scripts
/// or the tests), with a reason each.
const MADE_AT_RUN_TIME: &[&str] = &[
    "fuzz/logs",          // scripts/test.sh writes the fuzz build log there
    "fuzz/artifacts",     // libFuzzer's crash inputs
    "fuzz/target",        // the fuzz build
    "fuzz/work",          // long fuzz runs' working corpora
    "docs/bench.png",     // drawn by scripts/bench.sh
    "tests/data/scratch", // temporary files of the tests
];

/// Paths of other projects' trees that a document names, with the project: they are not ours.
const OTHER_PROJECTS: &[(&str, &str)] = &[
    ("docs/URING.md", "src/session.rs"), // fuser 0.18.0's sources
    ("docs/URING.md", "src/request.rs"),
    ("docs/URING.md", "src/reply.rs"),
    ("docs/URING.md", "src/channel.rs"),
    ("docs/URING.md", "src/ll/flags/init_flags.rs"),
    ("docs/format/STORES.md", "RELEASE_NOTES.md"), // python-blosc2's
];

fn repo() -> PathBuf {
    support::repo_root()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name == "target" || name == "corpus" || name.starts_with('.') && name != ".ci" {
            continue;
        }
        if p.is_dir() {
            walk(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The comment text of one line of `ext` source, if any.
fn comment(line: &str, ext: &str) -> Option<String> {
    let marker = match ext {
        "rs" => "//",
        "py" | "sh" | "toml" => "#",
        _ => return None,
    };
    line.find(marker)
        .map(|i| line[i + marker.len()..].to_owned())
}

/// The path-like tokens of `text` that name a file or directory of this repository: starting
/// with a top-level directory, or a bare top-level Markdown file such as `BENCHMARKS.md`.
fn paths_in(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_-./*".contains(c);
    let mut out = Vec::new();
    let bytes: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        if !is_path_char(bytes[i]) || (i > 0 && is_path_char(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len() && is_path_char(bytes[j]) {
            j += 1;
        }
        let token: String = bytes[i..j].iter().collect();
        let token = token.trim_end_matches(['.', ',']).to_owned();
        // Research notes kept outside the repository are named by an upper-case stem ending
        // in "NOTES" after an underscore: report them as paths, which do not exist here.
        if token.ends_with("_NOTES") {
            out.push(token);
            i = j;
            continue;
        }
        // A URL's path is not ours.
        let in_url = i >= 3
            && bytes[..i]
                .iter()
                .rev()
                .take_while(|c| !c.is_whitespace())
                .any(|&c| c == ':');
        if !in_url
            && (ROOTS.iter().any(|r| token.starts_with(r))
                || (token.ends_with(".md") && !token.contains('/') && token.len() > 3))
        {
            out.push(token);
        }
        i = j;
    }
    out
}

/// Whether `path` (maybe with a `*` glob in its last part, or `{a,b}`) exists under the repo.
fn exists(path: &str) -> bool {
    let root = repo();
    let path = path.trim_end_matches('/');
    if MADE_AT_RUN_TIME.iter().any(|m| path.starts_with(m)) {
        return true;
    }
    // A placeholder component (`fuzz/corpus/TARGET/`, `scripts/NAME`): its directory exists.
    if let Some(k) = path
        .split('/')
        .position(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_uppercase()))
    {
        let dir: Vec<&str> = path.split('/').take(k).collect();
        return root.join(dir.join("/")).is_dir();
    }
    if let Some(star) = path.find('*') {
        // A glob: some file or directory starts with the part before the star.
        let (dir, stem) = match path[..star].rfind('/') {
            Some(k) => (&path[..k], &path[k + 1..star]),
            None => ("", &path[..star]),
        };
        return fs::read_dir(root.join(dir)).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(stem))
        });
    }
    root.join(path).exists()
}

/// `file:line` of line index `n` of `file`, relative to the repository.
fn place(root: &Path, file: &Path, n: usize) -> String {
    format!("{}:{}", file.strip_prefix(root).unwrap().display(), n + 1)
}

/// Every comment of the files under the folders `dirs`: `(file, line index, comment text)`.
fn comments(root: &Path, dirs: &[&str]) -> Vec<(PathBuf, usize, String)> {
    let mut files = Vec::new();
    for dir in dirs {
        walk(&root.join(dir), &mut files);
    }
    let mut out = Vec::new();
    for f in files {
        let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("sh");
        let Ok(text) = fs::read_to_string(&f) else {
            continue;
        };
        let found: Vec<(usize, String)> = text
            .lines()
            .enumerate()
            .filter_map(|(n, line)| Some((n, comment(line, ext)?)))
            .collect();
        out.extend(found.into_iter().map(|(n, c)| (f.clone(), n, c)));
    }
    out
}

#[test]
fn every_path_a_comment_names_exists() {
    let root = repo();
    let mut missing = Vec::new();
    let mut checked = 0;
    let dirs = ["src", "tests", "benches", "fuzz", "scripts", ".ci"];
    for (f, n, c) in comments(&root, &dirs) {
        for p in paths_in(&c) {
            checked += 1;
            if !exists(&p) {
                missing.push(format!("{}: {p}", place(&root, &f, n)));
            }
        }
    }
    all_found(
        checked,
        50,
        "paths",
        &missing,
        "comments name paths that do not exist",
    );
}

#[test]
fn every_link_of_the_docs_exists() {
    let root = repo();
    let mut docs = vec![
        root.join("README.md"),
        root.join("BENCHMARKS.md"),
        root.join("RELIABILITY.md"),
    ];
    walk(&root.join("docs"), &mut docs);
    let mut missing = Vec::new();
    let mut checked = 0;
    for d in docs
        .iter()
        .filter(|d| d.extension().is_some_and(|e| e == "md"))
    {
        let text = fs::read_to_string(d).unwrap();
        let dir = d.parent().unwrap();
        // Markdown links `[text](target)`: relative targets must exist.
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(k) = rest.find("](") {
                let after = &rest[k + 2..];
                let Some(end) = after.find(')') else { break };
                let target = after[..end].split('#').next().unwrap_or("");
                rest = &after[end..];
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                if !dir.join(target).exists() {
                    missing.push(format!("{}: {target}", place(&root, d, n)));
                }
            }
        }
    }
    all_found(
        checked,
        20,
        "links",
        &missing,
        "links to files that do not exist",
    );
}

/// The Rust file names of `text` given without a top-level directory (`mapped.rs`,
/// `tree/edit.rs`, `super::mapped` is not one): a comment's way of naming a file beside it.
fn rs_names_in(text: &str) -> Vec<String> {
    let is_name_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "_/".contains(c);
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts = is_name_char(chars[i])
            && (i == 0 || !(is_name_char(chars[i - 1]) || "-.:".contains(chars[i - 1])));
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < chars.len() && is_name_char(chars[j]) {
            j += 1;
        }
        let after_ext = j + 3;
        let is_rs = chars
            .get(j..after_ext)
            .is_some_and(|e| e == ['.', 'r', 's'])
            && chars
                .get(after_ext)
                .is_none_or(|&c| !(c.is_ascii_alphanumeric() || c == '_'));
        let token: String = chars[i..j].iter().collect();
        if is_rs && !token.starts_with('/') && !ROOTS.iter().any(|r| token.starts_with(r)) {
            out.push(format!("{token}.rs"));
        }
        i = j.max(i + 1);
    }
    out
}

/// Whether the Rust file `name` that a comment of `file` names without a top-level directory
/// is where a reader looks for it: beside `file`, in the folder of `file`'s module, beside
/// its parent module, or under `src/`; from outside `src/` (a test naming the module it
/// tests), also any file of `src/` of that name.
fn near(root: &Path, file: &Path, name: &str) -> bool {
    let dir = file.parent().unwrap();
    let module = file.with_extension("");
    let mut places = vec![
        dir.join(name),
        module.join(name),
        root.join("src").join(name),
    ];
    if let Some(up) = dir.parent() {
        places.push(up.join(name));
    }
    if places.iter().any(|p| p.exists()) {
        return true;
    }
    let in_src = file.starts_with(root.join("src"));
    let mut sources = Vec::new();
    walk(&root.join("src"), &mut sources);
    !in_src
        && sources
            .iter()
            .any(|s| s.to_string_lossy().ends_with(&format!("/{name}")))
}

#[test]
fn every_file_a_comment_names_by_its_name_is_beside_it() {
    let root = repo();
    let mut missing = Vec::new();
    let mut checked = 0;
    let rust = comments(&root, &["src", "tests", "benches", "fuzz"])
        .into_iter()
        .filter(|(f, ..)| f.extension().is_some_and(|e| e == "rs"));
    for (f, n, c) in rust {
        for name in rs_names_in(&c) {
            checked += 1;
            if !near(&root, &f, &name) {
                missing.push(format!("{}: {name}", place(&root, &f, n)));
            }
        }
    }
    all_found(
        checked,
        50,
        "file names",
        &missing,
        "comments name files that are neither beside them nor in their module's folder",
    );
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = repo();
    // Not BENCHMARKS.md: a record of each session, it names the files of the time (some
    // split or removed since) and experiments' scripts that were never kept.
    let mut docs = vec![root.join("README.md"), root.join("RELIABILITY.md")];
    walk(&root.join("docs"), &mut docs);
    let mut missing = Vec::new();
    let mut checked = 0;
    for d in docs
        .iter()
        .filter(|d| d.extension().is_some_and(|e| e == "md"))
    {
        let rel = d
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = fs::read_to_string(d).unwrap();
        for (n, line) in text.lines().enumerate() {
            for p in paths_in(line) {
                if OTHER_PROJECTS.contains(&(rel.as_str(), p.as_str())) {
                    continue;
                }
                checked += 1;
                // A document named by its bare file name may be the doc's neighbour in its folder.
                if !exists(&p) && !d.parent().unwrap().join(&p).exists() {
                    missing.push(format!("{}: {p}", place(&root, d, n)));
                }
            }
        }
    }
    all_found(
        checked,
        50,
        "paths",
        &missing,
        "documents name paths that do not exist",
    );
}

/// Fails when the scan checked `min` `what` or fewer (it is broken) or found any `missing`
/// (listed after `why`).
#[track_caller]
fn all_found(checked: usize, min: usize, what: &str, missing: &[String], why: &str) {
    assert!(
        checked > min,
        "only {checked} {what} found: the scan is broken"
    );
    assert!(missing.is_empty(), "{why}:\n{}", missing.join("\n"));
}

#[test]
fn the_path_scanner_finds_what_it_should() {
    assert_eq!(
        paths_in("see `docs/format/CHUNK.md` 1.5 and src/tree/*.rs, or BENCHMARKS.md."),
        ["docs/format/CHUNK.md", "src/tree/*.rs", "BENCHMARKS.md"]
    );
    assert!(paths_in("https://github.com/x/y/blob/main/docs/SEMANTICS.md").is_empty());
    assert_eq!(paths_in("(CONTAINER_NOTES 1.5)"), ["CONTAINER_NOTES"]);
    assert!(!exists("CONTAINER_NOTES"));
    assert!(exists("src/tree/*.rs"));
    assert!(!exists("docs/NO_SUCH_FILE.md"));
    assert!(!exists("src/nope*"));
    assert_eq!(
        rs_names_in("(`mapped.rs`, tree/edit.rs; src/tree.rs, a.b.rs, super::x.rs, lib.rsx)"),
        ["mapped.rs", "tree/edit.rs"]
    );
    let root = repo();
    let npy = root.join("src/tree/npy.rs");
    assert!(near(&root, &npy, "mapped.rs"), "in the module's folder");
    assert!(near(&root, &npy, "edit.rs"), "beside it");
    assert!(!near(&root, &npy, "no_such.rs"));
    let test = root.join("tests/it/tree.rs");
    assert!(near(&root, &test, "keep.rs"), "a test names a file of src/");
}
