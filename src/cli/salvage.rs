//! `b2fs salvage SOURCE DEST`: a copy of SOURCE, of the same kind, in which every chunk that
//! decodes is kept byte for byte (copied as stored, never re-encoded) and every damaged chunk
//! ([`super::check`]) is replaced by a chunk of zeros of its size, through the ordinary
//! write-back ([`crate::container::write`]).
//!
//! Order: check SOURCE; copy it (file or directory tree) to a hidden temporary beside DEST;
//! commit the zero chunks and the `b2fs_salvage` attribute into the copy (frames: vlmeta;
//! bcolz: `__attrs__`; a ctable: its root `__attrs__`; a store: each damaged leaf's own
//! attributes); compact a contiguous frame (the replaced chunks leave dead space); then
//! claim DEST atomically (a hard link for a file, an exclusive `mkdir` replaced by `rename`
//! for a directory), so an existing DEST is never overwritten. A remote frame or `.b2z` is
//! first downloaded to the temporary. On failure the temporary is removed.
//!
//! A `.b2z` whose zip does not open (cut short) is salvaged from its members found by their
//! local headers, extracted into a directory (`cut_zip.rs`).
//!
//! A frame (contiguous or sparse) whose index, trailer or vlmetalayers are damaged is opened
//! leniently ([`crate::container::frame::lenient`]) and rebuilt by the commit ([`rebuild`]),
//! as is such a frame that is a leaf of a `.b2d` store or a directory of sources (its copy
//! in DEST, [`rebuild_frame`]).
//!
//! Not salvaged (the command fails, DEST is not written): a source whose structure cannot be
//! opened (leniently either), and a damaged chunk whose size is unknown. A store whose `embed.b2e` or some leaf
//! is damaged beyond opening is written with that part as it was, and the command fails
//! after naming it.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use serde_json::{Value, json};

use super::Error;
use super::check::{self, Damage, Report};
use super::verify::{self, Open};

mod cut_zip;
mod space;
use crate::codec::{self, CParams, Codec};
use crate::container::frame::Damaged;
use crate::container::store::{Group, Leaf, Location, Node};
use crate::container::write::{self, Edit};
use crate::container::{self, Array, ChunkKind, Collection, Container, Opened, SourceKind};
use crate::error::display_chain;

/// The attribute key salvage records the damaged chunks under.
pub const SALVAGE_KEY: &str = "b2fs_salvage";

fn other(what: impl Into<String>) -> Error {
    Error::Other {
        what: what.into(),
        source: None,
    }
}

fn cerr(e: container::ContainerError) -> Error {
    other(display_chain(&e))
}

/// Runs `b2fs salvage`.
pub(super) fn salvage(source: &Path, dest: &Path, options: &[String]) -> Result<(), Error> {
    if dest.symlink_metadata().is_ok() {
        return Err(other(format!(
            "'{}' exists: salvage never overwrites (choose a new DEST)",
            dest.display()
        )));
    }
    let name = dest
        .file_name()
        .ok_or_else(|| Error::Usage(format!("DEST '{}' has no file name", dest.display())))?;
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let tmp = parent.join(format!(
        ".{}.b2fs-salvage-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _cleanup = Cleanup(tmp.clone());
    let download = parent.join(format!(
        ".{}.b2fs-download-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _cleanup_download = Cleanup(download.clone());
    let mut local = match super::remote::as_url(source) {
        Some(url) => {
            fetch(url, options, &download)?;
            download.clone()
        }
        None => source.to_path_buf(),
    };
    let damaged = |reason: String| {
        other(format!(
            "cannot salvage '{}': its structure is damaged: {reason}",
            source.display()
        ))
    };
    // A `.b2z` whose zip does not open (cut short): its members, found by their local
    // headers, are extracted into a directory salvaged in its place (`cut_zip.rs`).
    let extract = parent.join(format!(
        ".{}.b2fs-extract-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _cleanup_extract = Cleanup(extract.clone());
    let mut cut = None;
    let (opened, lenient) = match verify::open(&local, options)? {
        Open::Opened(o) => (o, Vec::new()),
        Open::Lenient(o, damaged) => (o, damaged),
        // Only a zip that does not open: one that opens with a damaged `embed.b2e` or member
        // is refused as any damaged store is.
        Open::Damaged(reason)
            if container::store::zip::looks_like_zip(&local)
                && container::store::zip::ZipIndex::open(&local).is_err() =>
        {
            cut = Some(cut_zip::extract(
                &local, &extract, &parent, source, &reason,
            )?);
            local = extract.clone();
            match verify::open(&local, options)? {
                Open::Opened(o) => (o, Vec::new()),
                Open::Lenient(o, damaged) => (o, damaged),
                Open::Damaged(reason) => return Err(damaged(reason)),
            }
        }
        Open::Damaged(reason) => return Err(damaged(reason)),
    };
    // More damaged chunks than salvage replaces: the check stops as soon as it knows (before
    // decoding anything when the missing bcolz chunk files alone are too many).
    let limit = check::MAX_LISTED as u64;
    let report = verify::check_opened(&opened, true, check::MAX_LISTED, Some(limit));
    if report.gave_up || report.damaged_count > report.damaged.len() as u64 {
        return Err(other(too_many(source, &report)));
    }
    let zeros = ZeroChunks::default();
    let need = space::needed(&opened, &local, &report, &zeros, source)?;
    drop(opened);
    space::check(&parent, &need, source)?;
    for d in &lenient {
        let fate = if d.recovered { "rebuilt" } else { "lost" };
        eprintln!("b2fs salvage: {} ({fate} in DEST)", d.reason);
    }
    for d in &report.damaged {
        eprintln!(
            "b2fs salvage: chunk {} of {}: damaged, written as zeros: {}",
            d.chunk,
            check::label(&d.array),
            d.reason
        );
    }
    if cut.is_some() {
        // The extraction is already a copy of its own, beside DEST.
        std::fs::rename(&local, &tmp).map_err(|e| Error::Other {
            what: format!("moving '{}'", local.display()),
            source: Some(e),
        })?;
    } else {
        copy_tree(&local, &tmp)?;
    }
    let mut unsalvaged = if lenient.is_empty() {
        apply(&tmp, source, &report, &zeros)?
    } else {
        rebuild(&tmp, source, &report, &zeros, &lenient)?
    };
    match cut {
        // The store came out whole enough: DEST is a `.b2z` again.
        Some(c) if c.store => {
            let packed = parent.join(format!(
                ".{}.b2fs-pack-{}",
                name.to_string_lossy(),
                std::process::id()
            ));
            let _cleanup_packed = Cleanup(packed.clone());
            cut_zip::pack(&tmp, &packed)?;
            claim(&packed, dest)?;
            unsalvaged.extend(c.lost);
        }
        Some(c) => {
            claim(&tmp, dest)?;
            unsalvaged.extend(c.lost);
        }
        None => claim(&tmp, dest)?,
    }
    // Every damaged chunk is listed here (more are refused above), missing ones included.
    let declared = report.chunks + report.missing_chunks();
    eprintln!(
        "b2fs salvage: {} -> {}: {} of {declared} chunks kept, {} replaced by zeros ({} of \
         them missing chunk files)",
        source.display(),
        dest.display(),
        declared - report.damaged.len() as u64,
        report.damaged.len(),
        report.missing_chunks()
    );
    if unsalvaged.is_empty() {
        Ok(())
    } else {
        Err(other(format!(
            "'{}' written, but these parts could not be salvaged and are as in SOURCE: {}",
            dest.display(),
            unsalvaged.join("; ")
        )))
    }
}

/// Why a source with more damaged chunks than salvage replaces is refused: one line, naming
/// the bcolz array whose `meta/sizes` declares far more chunks than it has files, if any.
fn too_many(source: &Path, report: &Report) -> String {
    let base = format!(
        "cannot salvage '{}': {}{} damaged chunks, more than the {} salvage replaces",
        source.display(),
        if report.gave_up { "at least " } else { "" },
        report.damaged_count,
        check::MAX_LISTED
    );
    match report.missing.iter().max_by_key(|m| m.count) {
        Some(m) if m.count > check::MAX_LISTED as u64 => format!(
            "{base}: {} has {} chunk files of the {} its meta/sizes declares (is meta/sizes \
             damaged?)",
            check::label(&m.array),
            m.declared - m.count,
            m.declared
        ),
        _ => base,
    }
}

/// Removes a temporary file or directory when dropped (nothing when it is gone).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        match self.0.symlink_metadata() {
            Ok(m) if m.is_dir() => {
                let _ = std::fs::remove_dir_all(&self.0);
            }
            Ok(_) => {
                let _ = std::fs::remove_file(&self.0);
            }
            Err(_) => {}
        }
    }
}

/// What a salvage copies at `path`: a file (`Some(its length)`; a symbolic link to a file
/// counts as that file) or a directory (`None`). A symbolic link to a directory is refused:
/// following it could loop for ever (`data/x -> ..`), and no container holds one.
///
/// # Errors
/// When `path` cannot be read, or is a symbolic link to a directory.
pub(super) fn copied_node(path: &Path) -> Result<Option<u64>, Error> {
    let io = |e: std::io::Error| Error::Other {
        what: format!("reading '{}'", path.display()),
        source: Some(e),
    };
    let own = std::fs::symlink_metadata(path).map_err(io)?;
    let meta = if own.file_type().is_symlink() {
        std::fs::metadata(path).map_err(io)?
    } else {
        own.clone()
    };
    if meta.is_file() {
        return Ok(Some(meta.len()));
    }
    if own.file_type().is_symlink() {
        return Err(other(format!(
            "'{}' is a symbolic link to a directory: not copied (it could loop)",
            path.display()
        )));
    }
    Ok(None)
}

/// Copies a file, or a directory tree (files and directories; a symbolic link to a file is
/// copied as the file, one to a directory refused: [`copied_node`]).
fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    let io = |p: &Path, e: std::io::Error| Error::Other {
        what: format!("copying '{}'", p.display()),
        source: Some(e),
    };
    if copied_node(from)?.is_some() {
        std::fs::copy(from, to).map_err(|e| io(from, e))?;
        return Ok(());
    }
    std::fs::create_dir(to).map_err(|e| io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| io(from, e))? {
        let entry = entry.map_err(|e| io(from, e))?;
        copy_tree(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

/// Moves the finished temporary to `dest`, never replacing an existing `dest`.
fn claim(tmp: &Path, dest: &Path) -> Result<(), Error> {
    let fail = |e: std::io::Error| Error::Other {
        what: format!("cannot create '{}'", dest.display()),
        source: Some(e),
    };
    if tmp.is_dir() {
        // An exclusive mkdir claims the name; rename replaces the empty directory.
        std::fs::create_dir(dest).map_err(fail)?;
        if let Err(e) = std::fs::rename(tmp, dest) {
            let _ = std::fs::remove_dir(dest);
            return Err(fail(e));
        }
    } else {
        std::fs::hard_link(tmp, dest).map_err(fail)?;
        let _ = std::fs::remove_file(tmp);
    }
    Ok(())
}

/// The attributes `attrs` plus the salvage record of `damaged` (and of the damaged parts of
/// a frame's structure, when there are).
fn with_record(attrs: &Value, source: &Path, damaged: &[&Damage], structure: &[Damaged]) -> Value {
    let mut obj = attrs.as_object().cloned().unwrap_or_default();
    let mut record = json!({
        "source": source.display().to_string(),
        "damaged": damaged.iter().map(|d| check::damage_json(d)).collect::<Vec<_>>(),
    });
    if !structure.is_empty() {
        record["structure"] = structure.iter().map(|d| json!(d.reason)).collect();
    }
    obj.insert(SALVAGE_KEY.into(), record);
    Value::Object(obj)
}

/// Salvages the copy at `tmp` of a frame opened leniently (`structure`: its damaged index,
/// trailer or vlmetalayers): one commit of the zero chunks and the record writes a new index
/// and trailer (the commit locates the chunks as the lenient open did): after the old ones
/// in a contiguous frame, which compaction then drops; a sparse frame's commit writes its
/// `chunks.b2frame` anew. Returns the parts whose content is lost (attributes).
fn rebuild(
    tmp: &Path,
    source: &Path,
    report: &Report,
    zeros: &ZeroChunks,
    structure: &[Damaged],
) -> Result<Vec<String>, Error> {
    let damaged: Vec<&Damage> = report.damaged.iter().collect();
    rebuild_frame(tmp, source, &damaged, zeros, structure)?;
    Ok(structure
        .iter()
        .filter(|d| !d.recovered)
        .map(|d| d.reason.clone())
        .collect())
}

/// Rebuilds the damaged frame at `path` (a copy; `structure`: what its lenient open did
/// without): one commit of the chunks of zeros for `damaged` and of the record writes its
/// new index and trailer; a contiguous frame is then compacted.
fn rebuild_frame(
    path: &Path,
    source: &Path,
    damaged: &[&Damage],
    zeros: &ZeroChunks,
    structure: &[Damaged],
) -> Result<(), Error> {
    let (a, _) = Array::open_frame_lenient(path).map_err(cerr)?;
    let mut edit = array_edit(&a, source, damaged, false, zeros)?;
    edit.attrs = Some(with_record(a.attrs(), source, damaged, structure));
    write::commit(&a, &edit).map_err(cerr)?;
    let contiguous = a.kind() == SourceKind::Cframe;
    drop(a);
    if contiguous {
        write::compact(path, &mut |_, _| {}).map_err(cerr)?;
    }
    Ok(())
}

/// The size of slot `index` of `a`.
///
/// # Errors
/// When it is unknown (the chunk cannot be replaced), saying which chunk.
pub(super) fn slot_nbytes(a: &Array, index: usize) -> Result<usize, Error> {
    a.chunk_nbytes(index).map_err(|e| {
        other(format!(
            "chunk {index} of '{}': its size is unknown, it cannot be replaced: {}",
            a.path().display(),
            display_chain(&e)
        ))
    })
}

/// The chunks of zeros of one salvage, encoded once per format, size and typesize: the
/// space check measures them ([`space::needed`]) and the commit writes the same bytes. Each
/// is built in the time of its output ([`codec::compress_zeros`]: a bcolz chunk of 2 GiB of
/// zeros is about 8 MiB, encoded from one block).
#[derive(Default)]
pub(super) struct ZeroChunks(std::cell::RefCell<std::collections::HashMap<ZeroKey, Rc<Vec<u8>>>>);

/// Which chunk of zeros: (bcolz, its size, its typesize).
type ZeroKey = (bool, usize, usize);

impl ZeroChunks {
    /// A chunk of zeros for slot `index` of `a`, in the source's chunk format.
    ///
    /// # Errors
    /// When the slot's size is unknown, or the chunk cannot be encoded.
    pub(super) fn for_slot(&self, a: &Array, index: usize) -> Result<Rc<Vec<u8>>, Error> {
        let nbytes = slot_nbytes(a, index)?;
        let ts = a.typesize();
        let ts = if (1..=255).contains(&ts) { ts } else { 1 };
        let bcolz = a.kind() == SourceKind::BcolzCarray;
        if let Some(c) = self.0.borrow().get(&(bcolz, nbytes, ts)) {
            return Ok(c.clone());
        }
        let chunk = Rc::new(if bcolz {
            codec::compress_zeros(nbytes, &CParams::blosc1(Codec::BloscLz, 5, ts, 1))
                .map_err(|e| other(format!("encoding a chunk of zeros: {e}")))?
        } else {
            container::frame::special_chunk(ChunkKind::Zeros, nbytes, ts as u32, 0)
        });
        self.0
            .borrow_mut()
            .insert((bcolz, nbytes, ts), chunk.clone());
        Ok(chunk)
    }
}

/// The edit replacing `damaged` chunks of `a` by `zeros` and recording them in its
/// attributes.
fn array_edit(
    a: &Array,
    source: &Path,
    damaged: &[&Damage],
    attrs: bool,
    zeros: &ZeroChunks,
) -> Result<Edit, Error> {
    let mut edit = Edit::default();
    for d in damaged {
        edit.updates
            .push((d.chunk, zeros.for_slot(a, d.chunk)?.as_ref().clone().into()));
    }
    if attrs {
        edit.attrs = Some(with_record(a.attrs(), source, damaged, &[]));
    }
    Ok(edit)
}

/// Commits the salvage into the copy at `tmp`; returns the parts that could not be salvaged.
fn apply(
    tmp: &Path,
    source: &Path,
    report: &Report,
    zeros: &ZeroChunks,
) -> Result<Vec<String>, Error> {
    // A leaf opened leniently is rebuilt below: what its index held is recovered, what its
    // damaged vlmetalayers held is lost (and named).
    let recovered = |p: &check::Problem| {
        report.lenient.iter().any(|l| {
            p.array.as_deref() == Some(l.key.as_str())
                && l.damaged
                    .iter()
                    .any(|d| d.recovered && d.reason == p.reason)
        })
    };
    let mut unsalvaged: Vec<String> = report
        .structure
        .iter()
        .filter(|p| !recovered(p))
        .map(|p| format!("{}: {}", p.array.as_deref().unwrap_or("(source)"), p.reason))
        .collect();
    if report.damaged.is_empty() && report.lenient.is_empty() {
        return Ok(unsalvaged);
    }
    let opened = container::open_any(tmp).map_err(cerr)?;
    match opened {
        Opened::Single(Container::Array(a)) => {
            let damaged: Vec<&Damage> = report.damaged.iter().collect();
            write::commit(&a, &array_edit(&a, source, &damaged, true, zeros)?).map_err(cerr)?;
            if a.kind() == SourceKind::Cframe {
                drop(a);
                write::compact(tmp, &mut |_, _| {}).map_err(cerr)?;
            }
        }
        Opened::Single(Container::Table(t)) => {
            salvage_table(&t, None, source, report, zeros)?;
        }
        Opened::Collection(_) => {
            drop(opened);
            salvage_collection(tmp, source, report, &mut unsalvaged, zeros)?;
        }
    }
    Ok(unsalvaged)
}

/// Commits the zero chunks of a ctable's damaged columns (labels `prefix/col` or `col`) and
/// the record in its root `__attrs__`.
fn salvage_table(
    t: &container::Table,
    prefix: Option<&str>,
    source: &Path,
    report: &Report,
    zeros: &ZeroChunks,
) -> Result<(), Error> {
    let mut all = Vec::new();
    for (name, a) in &t.columns {
        let label = match prefix {
            Some(p) => format!("{p}/{name}"),
            None => name.clone(),
        };
        let damaged: Vec<&Damage> = report
            .damaged
            .iter()
            .filter(|d| d.array.as_deref() == Some(&label))
            .collect();
        if damaged.is_empty() {
            continue;
        }
        write::commit(a, &array_edit(a, source, &damaged, false, zeros)?).map_err(cerr)?;
        all.extend(damaged);
    }
    if !all.is_empty() {
        write::commit_table_attrs(t, &with_record(&t.attrs, source, &all, &[])).map_err(cerr)?;
    }
    Ok(())
}

/// Every leaf (and `__vlmeta__` carrier) of a collection with its label as [`check`] gives
/// it, and the collection it belongs to (nested stores included).
fn labelled_leaves<'a>(
    c: &'a Collection,
    prefix: &str,
    out: &mut Vec<(String, &'a Collection, &'a Leaf)>,
) {
    fn group<'a>(
        c: &'a Collection,
        g: &'a Group,
        prefix: &str,
        out: &mut Vec<(String, &'a Collection, &'a Leaf)>,
    ) {
        if let Some(carrier) = g.carrier() {
            out.push((format!("{prefix}{}", carrier.key()), c, carrier));
        }
        for n in &g.children {
            match n {
                Node::Group(sub) => group(c, sub, prefix, out),
                Node::Leaf(l) => out.push((format!("{prefix}{}", l.key()), c, l)),
                Node::Store(s) => {
                    let name = format!("{prefix}{}/{}", g.key.trim_end_matches('/'), n.name());
                    labelled_leaves(s, &name, out);
                }
            }
        }
    }
    group(c, c.root(), prefix, out);
}

/// Salvages the damaged leaves of the collection copied at `tmp`, one leaf per reopening
/// (a `.b2z` commit rewrites the whole zip).
fn salvage_collection(
    tmp: &Path,
    source: &Path,
    report: &Report,
    unsalvaged: &mut Vec<String>,
    zeros: &ZeroChunks,
) -> Result<(), Error> {
    let mut pending: Vec<&str> = Vec::new();
    let leaves_damaged = report
        .damaged
        .iter()
        .map(|d| d.array.as_deref().unwrap_or_default());
    for l in leaves_damaged.chain(report.lenient.iter().map(|l| l.key.as_str())) {
        if !pending.contains(&l) {
            pending.push(l);
        }
    }
    let mut done: Vec<String> = Vec::new();
    loop {
        let opened = container::open_any(tmp).map_err(cerr)?;
        let Opened::Collection(c) = &opened else {
            return Err(other("the copied store no longer opens as a store"));
        };
        let mut leaves = Vec::new();
        labelled_leaves(c, "", &mut leaves);
        // The next leaf with damage in it (its own label, or one of its columns).
        let next = leaves.iter().find(|(label, _, _)| {
            !done.contains(label)
                && pending.iter().any(|p| {
                    *p == label.as_str()
                        || p.strip_prefix(label.as_str())
                            .is_some_and(|r| r.starts_with('/'))
                })
        });
        let Some((label, store, leaf)) = next else {
            break;
        };
        done.push(label.clone());
        let damaged: Vec<&Damage> = report
            .damaged
            .iter()
            .filter(|d| d.array.as_deref() == Some(label.as_str()))
            .collect();
        let lenient = report.lenient.iter().find(|l| l.key == *label);
        match (leaf.open(), lenient, leaf.location()) {
            (Ok(Container::Array(a)), _, _) => {
                let edit = array_edit(a, source, &damaged, true, zeros)?;
                write::commit_member(store, leaf, &edit).map_err(cerr)?;
            }
            (Ok(Container::Table(t)), _, _) => {
                salvage_table(t, Some(label), source, report, zeros)?;
            }
            // A local frame the check opened leniently: its copy is rebuilt in place (a
            // file of DEST's own, no store lock or zip to go through).
            (Err(_), Some(l), Location::File(path) | Location::Source(path)) => {
                for d in &l.damaged {
                    let fate = if d.recovered { "rebuilt" } else { "lost" };
                    eprintln!("b2fs salvage: {label}: {} ({fate} in DEST)", d.reason);
                }
                rebuild_frame(path, source, &damaged, zeros, &l.damaged)?;
            }
            (Err(e), _, _) => unsalvaged.push(format!("{label}: {}", display_chain(&*e))),
        }
    }
    for p in pending {
        let covered = done.iter().any(|l| {
            p == l
                || p.strip_prefix(l.as_str())
                    .is_some_and(|r| r.starts_with('/'))
        });
        if !covered {
            unsalvaged.push(format!(
                "{p}: damaged chunks not rewritten (not a stored leaf)"
            ));
        }
    }
    Ok(())
}

/// Downloads the remote object at `url` (a frame or `.b2z`) to `to`.
#[cfg(feature = "remote")]
fn fetch(url: &str, options: &[String], to: &Path) -> Result<(), Error> {
    use std::io::Write;
    let opts = super::args::MountOptions::parse(options).map_err(Error::Usage)?;
    if url.ends_with('/') {
        return Err(Error::Usage(format!(
            "{url}: salvage of a remote prefix (sparse frame, bcolz, .b2d): copy it locally first"
        )));
    }
    let object = crate::remote::open(url, &opts.remote).map_err(|e| Error::Remote {
        url: url.to_owned(),
        code: super::EXIT_SOURCE,
        why: e.why,
    })?;
    let bytes = object.byte_source();
    let io = |e: std::io::Error| Error::Other {
        what: format!("downloading '{url}'"),
        source: Some(e),
    };
    let mut file = std::fs::File::create(to).map_err(io)?;
    let mut buf = vec![0u8; 8 << 20];
    let mut at = 0u64;
    while at < bytes.len() {
        let n = (bytes.len() - at).min(buf.len() as u64) as usize;
        bytes.read_exact_at(at, &mut buf[..n]).map_err(io)?;
        file.write_all(&buf[..n]).map_err(io)?;
        at += n as u64;
    }
    file.sync_all().map_err(io)
}

/// Without the `remote` feature a URL is a usage error.
#[cfg(not(feature = "remote"))]
fn fetch(url: &str, _options: &[String], _to: &Path) -> Result<(), Error> {
    Err(Error::Usage(format!(
        "{url}: this b2fs was built without the 'remote' feature"
    )))
}
