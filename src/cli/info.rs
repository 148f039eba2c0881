//! `b2fs info`: what a mount of a source would show, without mounting: a one-screen summary
//! (kind, shape, dtype, chunking, sizes in human units with the compression ratio, codec and
//! filters, from the same `meta/` files a mount shows), the file tree with sizes (walked
//! through the same [`Tree`] a mount serves), and a chunk table per array (index, special
//! kind, codec, filters, nbytes, cbytes, ratio). `--json` gives the exact numbers.

use std::path::Path;

use serde_json::{Value, json};

use super::args::MountOptions;
use super::{Error, check_source};
use crate::codec::{self, Codec};
use crate::container::{self, Array, ChunkKind, Container};
use crate::reader::ReaderOptions;
use crate::tree::{EntryKind, ROOT_INO, Tree, TreeOptions, view};

/// One row of a chunk table.
fn chunk_row(array: &Array, index: usize) -> Value {
    let kind = match array.chunk_kind(index) {
        Ok(k) => kind_name(k),
        Err(e) => return json!({"index": index, "error": e.to_string()}),
    };
    let header = array
        .chunk_bytes(index)
        .map_err(|e| e.to_string())
        .and_then(|b| codec::chunk_info(&b).map_err(|e| e.to_string()));
    match header {
        Ok(h) => json!({
            "index": index,
            "kind": kind,
            "codec": Codec::from_compcode(h.compcode).map_or("user", Codec::name),
            "filters": h.filters,
            "nbytes": h.nbytes,
            "cbytes": h.cbytes,
        }),
        Err(e) => json!({"index": index, "kind": kind, "error": e}),
    }
}

fn kind_name(k: ChunkKind) -> &'static str {
    match k {
        ChunkKind::Regular => "regular",
        ChunkKind::Zeros => "zeros",
        ChunkKind::Nan => "nan",
        ChunkKind::Uninit => "uninit",
        ChunkKind::Value => "value",
    }
}

fn chunk_table(array: &Array) -> Vec<Value> {
    (0..array.nchunks()).map(|i| chunk_row(array, i)).collect()
}

/// Every path of the tree with its kind and size, depth first, in listing order.
fn walk(tree: &Tree, ino: u64, prefix: &str, out: &mut Vec<Value>) {
    let Ok(entries) = tree.readdir(ino, 0) else {
        return;
    };
    for e in entries.skip(2) {
        let path = format!("{prefix}{}", e.name);
        match e.kind {
            EntryKind::Directory => {
                out.push(json!({"path": format!("{path}/"), "type": "dir"}));
                walk(tree, e.ino, &format!("{path}/"), out);
            }
            EntryKind::File => {
                let size = tree.getattr(e.ino).map(|a| a.size).ok();
                out.push(json!({"path": path, "type": "file", "size": size}));
            }
        }
    }
}

/// Runs `b2fs info`.
pub(super) fn info(source: &Path, as_json: bool, options: &[String]) -> Result<(), Error> {
    let source_err = |e| Error::Source {
        path: source.to_path_buf(),
        source: e,
    };
    let container = match super::remote::as_url(source) {
        Some(url) => {
            let opts = MountOptions::parse(options).map_err(Error::Usage)?;
            match super::remote::open(url, &opts.remote)? {
                container::Opened::Single(c) => c,
                container::Opened::Collection(c) => {
                    collection_info(&c, as_json);
                    return Ok(());
                }
            }
        }
        None => {
            check_source(source)?;
            // One open, whose error is the kind's own: a truncated `.b2z` says its zip's
            // end record is missing, not that it is no frame (as a second, single-source
            // open of it said).
            match container::open_any(source).map_err(source_err)? {
                container::Opened::Collection(c) => {
                    collection_info(&c, as_json);
                    return Ok(());
                }
                container::Opened::Single(c) => c,
            }
        }
    };
    let (kind, tables) = match &container {
        Container::Array(a) => (
            format!("{:?}", a.kind()),
            vec![(String::new(), chunk_table(a))],
        ),
        Container::Table(t) => (
            "BcolzCtable".to_owned(),
            t.columns
                .iter()
                .map(|(name, a)| (format!("{name}/"), chunk_table(a)))
                .collect(),
        ),
    };
    let layout = view::layout(container).map_err(source_err)?;
    let tree = Tree::new(
        layout,
        TreeOptions {
            reader: ReaderOptions {
                cache_size: 0,
                prefetch_chunks: 0,
                ..ReaderOptions::default()
            },
            ..TreeOptions::default()
        },
    );
    let mut files = Vec::new();
    walk(&tree, ROOT_INO, "", &mut files);
    if as_json {
        let chunks: serde_json::Map<String, Value> = tables
            .into_iter()
            .map(|(prefix, rows)| (format!("{prefix}data/"), Value::Array(rows)))
            .collect();
        let doc = json!({
            "source": source.display().to_string(),
            "kind": kind,
            "files": files,
            "chunks": chunks,
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(());
    }
    print_summary(&tree, source, &kind, &tables);
    print_text(&files, &tables);
    Ok(())
}

/// The groups (with attributes) and leaves (with where they are) of a collection; no leaf is
/// opened.
fn collection_info(c: &container::Collection, as_json: bool) {
    use container::store::{Group, Location, Node};
    fn walk(g: &Group, groups: &mut Vec<Value>, leaves: &mut Vec<Value>) {
        let attrs = g
            .attrs()
            .unwrap_or_else(|e| json!({"error": e.to_string()}));
        groups.push(json!({"key": g.key, "attrs": attrs}));
        for n in &g.children {
            match n {
                Node::Group(sub) => walk(sub, groups, leaves),
                Node::Leaf(l) => {
                    let at = match l.location() {
                        Location::Member { name, .. } => format!("zip member {name}"),
                        Location::File(p) | Location::Source(p) => p.display().to_string(),
                        Location::TreeFile(rel) => format!("object {rel}"),
                        Location::TreeDir(rel) => format!("objects under {rel}/"),
                        Location::Embedded { offset, len } => {
                            format!("embed.b2e bytes {offset}..{}", offset + len)
                        }
                        Location::Reference(v) => format!("reference {v}"),
                        Location::Failed(_, why) => format!("error: {why}"),
                    };
                    leaves.push(json!({"key": l.key(), "at": at}));
                }
                Node::Store(s) => {
                    leaves.push(json!({"key": n.name(), "at": s.path().display().to_string()}));
                }
            }
        }
    }
    let (mut groups, mut leaves) = (Vec::new(), Vec::new());
    walk(c.root(), &mut groups, &mut leaves);
    let form = format!("{:?}", c.form());
    let marker = c.marker().map(|m| m.name());
    if as_json {
        let doc = json!({
            "source": c.path().display().to_string(),
            "kind": "collection",
            "form": form,
            "marker": marker,
            "groups": groups,
            "leaves": leaves,
        });
        println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return;
    }
    println!(
        "source: {} (collection: {form}, marker {})",
        c.path().display(),
        marker.unwrap_or("none")
    );
    for g in &groups {
        println!(
            "  group {:<38} attrs {}",
            g["key"].as_str().unwrap_or_default(),
            g["attrs"]
        );
    }
    for l in &leaves {
        println!(
            "  {:<44} {}",
            l["key"].as_str().unwrap_or_default(),
            l["at"].as_str().unwrap_or_default()
        );
    }
}

/// `1023 B`, `10.7 KiB`, `2.0 GiB` (powers of 1024).
pub(super) fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// `nbytes / cbytes` as `3.21x` (`-` without compressed bytes).
fn ratio(nbytes: u64, cbytes: u64) -> String {
    if cbytes == 0 {
        "-".to_owned()
    } else {
        format!("{:.2}x", nbytes as f64 / cbytes as f64)
    }
}

/// A JSON metadata file of the tree, by path (`meta/sizes`, `price/meta/storage`).
fn json_at(tree: &Tree, path: &str) -> Option<Value> {
    let mut ino = ROOT_INO;
    for name in path.split('/') {
        ino = tree.lookup(ino, name).ok()?.ino;
    }
    let size = tree.getattr(ino).ok()?.size;
    let fh = tree.open(ino, libc::O_RDONLY).ok()?;
    let data = tree.read(ino, fh, 0, u32::try_from(size).ok()?);
    let _ = tree.release(fh);
    serde_json::from_slice(&data.ok()?).ok()
}

/// A JSON value for people: strings without quotes.
fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The summary: what the source is, and per array its shape, chunking, sizes and codec.
fn print_summary(tree: &Tree, source: &Path, kind: &str, tables: &[(String, Vec<Value>)]) {
    println!("source:   {}", source.display());
    println!("kind:     {kind}");
    let (mut total_n, mut total_c) = (0u64, 0u64);
    for (prefix, rows) in tables {
        let sizes = json_at(tree, &format!("{prefix}meta/sizes")).unwrap_or_default();
        let storage = json_at(tree, &format!("{prefix}meta/storage")).unwrap_or_default();
        let (n, c) = (
            sizes["nbytes"].as_u64().unwrap_or(0),
            sizes["cbytes"].as_u64().unwrap_or(0),
        );
        total_n += n;
        total_c += c;
        let special = rows.iter().filter(|r| r["kind"] != "regular").count();
        let mut shape = format!(
            "shape {}, dtype {}",
            sizes["shape"],
            plain(&storage["dtype"])
        );
        match (storage.get("chunkshape"), storage.get("chunklen")) {
            (Some(cs), _) => shape.push_str(&format!(", chunkshape {cs}")),
            (None, Some(cl)) => shape.push_str(&format!(", chunklen {cl}")),
            (None, None) => {}
        }
        if let Some(bs) = storage.get("blockshape").filter(|b| !b.is_null()) {
            shape.push_str(&format!(", blockshape {bs}"));
        }
        let cp = &storage["cparams"];
        let filters: Vec<&str> = cp["filter_names"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|f| *f != "NOFILTER")
            .collect();
        let head = if prefix.is_empty() {
            String::new()
        } else {
            format!("column {}: ", prefix.trim_end_matches('/'))
        };
        println!("{head}{shape}");
        println!(
            "{head}{} chunks ({special} special), {} -> {} (ratio {})",
            rows.len(),
            human(n),
            human(c),
            ratio(n, c)
        );
        println!(
            "{head}codec {} clevel {}, filters {}",
            cp["codec"].as_str().unwrap_or("?"),
            cp["clevel"],
            if filters.is_empty() {
                "none".to_owned()
            } else {
                filters.join(",")
            }
        );
    }
    if tables.len() > 1 {
        println!(
            "total:    {} -> {} (ratio {})",
            human(total_n),
            human(total_c),
            ratio(total_n, total_c)
        );
    }
}

fn print_text(files: &[Value], tables: &[(String, Vec<Value>)]) {
    println!("tree:");
    // Chunk files are summarised per data directory; the chunk table lists them all.
    let mut i = 0;
    while i < files.len() {
        let path = files[i]["path"].as_str().unwrap_or_default();
        if path.ends_with("data/") {
            let n = files[i + 1..]
                .iter()
                .take_while(|f| {
                    f["path"]
                        .as_str()
                        .is_some_and(|p| p.starts_with(path) && p.ends_with(".bin"))
                })
                .count();
            let total: u64 = files[i + 1..i + 1 + n]
                .iter()
                .filter_map(|f| f["size"].as_u64())
                .sum();
            println!("  {path:<40} {n} chunk files, {}", human(total));
            i += 1 + n;
            continue;
        }
        match files[i]["size"].as_u64() {
            Some(size) => println!("  {path:<40} {:>12}", human(size)),
            None => println!("  {path}"),
        }
        i += 1;
    }
    for (prefix, rows) in tables {
        println!("chunks of {prefix}data/:");
        println!(
            "  {:>8}  {:<8} {:<8} {:<20} {:>12} {:>12} {:>8}",
            "index", "kind", "codec", "filters", "nbytes", "cbytes", "ratio"
        );
        for r in rows {
            if let Some(err) = r.get("error") {
                println!(
                    "  {:>8}  error: {}",
                    r["index"],
                    err.as_str().unwrap_or_default()
                );
                continue;
            }
            let (n, c) = (
                r["nbytes"].as_u64().unwrap_or(0),
                r["cbytes"].as_u64().unwrap_or(0),
            );
            println!(
                "  {:>8}  {:<8} {:<8} {:<20} {:>12} {:>12} {:>8}",
                r["index"].to_string(),
                r["kind"].as_str().unwrap_or_default(),
                r["codec"].as_str().unwrap_or_default(),
                r["filters"].to_string(),
                human(n),
                human(c),
                ratio(n, c)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_sizes_and_ratios() {
        assert_eq!(human(0), "0 B");
        assert_eq!(human(1023), "1023 B");
        assert_eq!(human(10944), "10.7 KiB");
        assert_eq!(human(3 << 30), "3.0 GiB");
        assert_eq!(ratio(10944, 8245), "1.33x");
        assert_eq!(ratio(5, 0), "-");
    }
}
