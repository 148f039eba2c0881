//! `b2fs info`: what a mount of a source would show, without mounting: the file tree with
//! sizes (walked through the same [`Tree`] a mount serves), the metadata files, and a chunk
//! table per array (index, special kind, codec, filters, nbytes, cbytes).

use std::path::Path;

use serde_json::{Value, json};

use super::args::MountOptions;
use super::{Error, check_source};
use crate::codec::{self, Codec};
use crate::container::{self, Array, ChunkKind, Container};
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
            super::remote::open(url, &opts.remote)?
        }
        None => {
            check_source(source)?;
            if let Ok(container::Opened::Collection(c)) = container::open_any(source) {
                collection_info(&c, as_json);
                return Ok(());
            }
            container::open(source).map_err(source_err)?
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
            cache_size: 0,
            prefetch_chunks: 0,
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
    print_text(source, &kind, &files, &tables);
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

fn print_text(source: &Path, kind: &str, files: &[Value], tables: &[(String, Vec<Value>)]) {
    println!("source: {} ({kind})", source.display());
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
            println!("  {path:<40} {n} chunk files, {total} bytes");
            i += 1 + n;
            continue;
        }
        match files[i]["size"].as_u64() {
            Some(size) => println!("  {path:<40} {size:>12}"),
            None => println!("  {path}"),
        }
        i += 1;
    }
    for (prefix, rows) in tables {
        println!("chunks of {prefix}data/:");
        println!(
            "  {:>8}  {:<8} {:<8} {:<20} {:>12} {:>12}",
            "index", "kind", "codec", "filters", "nbytes", "cbytes"
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
            println!(
                "  {:>8}  {:<8} {:<8} {:<20} {:>12} {:>12}",
                r["index"].to_string(),
                r["kind"].as_str().unwrap_or_default(),
                r["codec"].as_str().unwrap_or_default(),
                r["filters"].to_string(),
                r["nbytes"].to_string(),
                r["cbytes"].to_string()
            );
        }
    }
}
