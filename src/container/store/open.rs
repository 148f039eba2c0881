//! Opening a collection: what [`open_any`] finds at a path (a single source, a store, or a
//! directory of sources) and a store's parts ([`open_store`], [`open_store_bytes`]): its
//! `embed.b2e` opened, its members or files and the estore's embedded entries keyed as
//! leaves (the rules are `store.rs`'s module doc, "Stores"). Nothing here opens a leaf.

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, OnceLock};

use super::embed::{Entry, Estore};
use super::{Collection, Form, Location, Opened, Shared, dir, keys, open_member, zip};
use crate::container::{Array, ContainerError};

/// Opens `path` as a single source ([`crate::container::open`]'s rules), a store (zip file or directory
/// with `embed.b2e`), or a directory of sources (any other directory).
///
/// # Errors
/// As [`crate::container::open`] for files; [`open_store`]'s errors for stores.
pub fn open_any(path: &Path) -> Result<Opened, ContainerError> {
    let meta = std::fs::metadata(path).map_err(|source| ContainerError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_file() && zip::looks_like_zip(path) || path.join("embed.b2e").is_file() {
        return open_store(path).map(Opened::Collection);
    }
    match crate::container::open(path) {
        Err(ContainerError::NotAContainer { .. }) if meta.is_dir() => {
            dir::open_frames(path).map(Opened::Collection)
        }
        other => other.map(Opened::Single),
    }
}

const LEAF_SUFFIXES: &[&str] = &[".b2nd", ".b2f", ".b2b"];

/// Opens a `.b2z` (zip with an `embed.b2e` member) or `.b2d` (directory with `embed.b2e`)
/// store.
///
/// # Errors
/// [`ContainerError::NotAContainer`] for a zip without `embed.b2e`;
/// [`ContainerError::Malformed`] for a damaged zip or estore; [`ContainerError::Io`].
pub fn open_store(path: &Path) -> Result<Collection, ContainerError> {
    let (form, zip, estore_array, files) = if path.is_dir() {
        let mut files = Vec::new();
        dir::walk_store(path, path, 0, &mut files)?;
        let e = Array::open_frame_at(&path.join("embed.b2e"), 0)?;
        (Form::Dir, None, e, files)
    } else {
        zip_parts(path, zip::ZipIndex::open(path)?)?
    };
    collection(path, (form, zip, estore_array, files), None)
}

/// Opens the `.b2z` store held by a byte source that is not a local file (a remote object):
/// the zip's central directory and every member are read through it, in place. Its path is
/// the byte source's name.
///
/// # Errors
/// As [`open_store`].
pub fn open_store_bytes(
    bytes: Arc<dyn crate::container::ByteSource>,
) -> Result<Collection, ContainerError> {
    let path = PathBuf::from(bytes.name());
    let parts = zip_parts(&path, zip::ZipIndex::open_bytes(bytes)?)?;
    collection(&path, parts, None)
}

type Parts = (Form, Option<zip::ZipIndex>, Array, Vec<(String, Location)>);

/// The parts of a zip store: its `embed.b2e` opened and its members as leaf locations.
fn zip_parts(path: &Path, z: zip::ZipIndex) -> Result<Parts, ContainerError> {
    let ei = z
        .find("embed.b2e")
        .ok_or_else(|| ContainerError::NotAContainer {
            path: path.to_path_buf(),
            why: "a zip file without an embed.b2e member is not a Blosc2 store".into(),
        })?;
    let e = open_member(&z, ei)?;
    let files = z
        .names()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            (
                n.clone(),
                Location::Member {
                    index: i,
                    name: n.clone(),
                },
            )
        })
        .collect();
    Ok((Form::Zip, Some(z), e, files))
}

/// The collection of a store's parts (`tree`: the remote prefix of a `.b2d` store).
pub(super) fn collection(
    path: &Path,
    (form, zip, estore_array, files): Parts,
    tree: Option<Arc<dyn crate::container::ByteTree>>,
) -> Result<Collection, ContainerError> {
    let estore = Estore::new(estore_array)?;
    let mut keyed: Vec<(String, Location)> = Vec::new();
    for (rel, loc) in files {
        if rel == "embed.b2e" {
            continue;
        }
        if let Some(stem) = LEAF_SUFFIXES.iter().find_map(|s| rel.strip_suffix(s)) {
            keyed.push((format!("/{stem}"), loc));
        }
    }
    let have: std::collections::HashSet<String> = keyed.iter().map(|(k, _)| k.clone()).collect();
    for (key, entry) in estore.entries() {
        let key = if key.starts_with('/') {
            key.clone()
        } else {
            format!("/{key}")
        };
        if have.contains(&key) {
            continue;
        }
        let loc = match entry {
            Entry::Range { offset, len } => Location::Embedded {
                offset: *offset,
                len: *len,
            },
            Entry::Reference(v) => Location::Reference(v.clone()),
        };
        keyed.push((key, loc));
    }
    let shared = Arc::new(Shared {
        path: path.to_path_buf(),
        zip,
        estore: Some(estore),
        scratch: OnceLock::new(),
        opened: AtomicUsize::new(0),
        tree,
    });
    let marker = shared.estore.as_ref().and_then(Estore::marker);
    let root = keys::build_tree(path, keyed, &shared);
    Ok(Collection {
        path: path.to_path_buf(),
        form,
        marker,
        root,
        shared,
    })
}
