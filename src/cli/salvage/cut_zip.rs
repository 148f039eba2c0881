//! Salvage of a `.b2z` store whose zip cannot be opened (cut short: a copy or download
//! interrupted, which loses the central directory written last): its members are found by
//! their local headers ([`crate::container::store::zip_scan`]) and extracted into a
//! directory, which the ordinary salvage then checks and repairs like any `.b2d` store or
//! directory of sources (a member cut short is a truncated frame, opened leniently). When
//! `embed.b2e` (the embedded values and the attributes) came out whole the directory is a
//! `.b2d` store and DEST is packed back into a `.b2z` ([`pack`]); otherwise DEST is the
//! directory of the member files, which b2fs mounts and python-blosc2 reads file by file.

use std::io::Write;
use std::path::Path;

use super::{Error, other, space};
use crate::container::store::zip_scan;

/// What the extraction found.
pub(super) struct Extracted {
    /// Whether `embed.b2e` came out whole (the directory is a `.b2d` store).
    pub store: bool,
    /// What was lost, one line each (the command names them and exits 1).
    pub lost: Vec<String>,
}

/// Extracts the members of the zip `zip` (whose central directory cannot be read: `why`)
/// found by their local headers into the new directory `dir`, saying on stderr what it
/// found; `source` names the zip in messages. Checks first that the extraction and what the
/// salvage then writes fit in `parent` (DEST's directory).
///
/// # Errors
/// When no member is found, when they do not fit, or on I/O errors.
pub(super) fn extract(
    zip: &Path,
    dir: &Path,
    parent: &Path,
    source: &Path,
    why: &str,
) -> Result<Extracted, Error> {
    let cerr = |e| other(crate::error::display_chain(&e));
    let (found, stop) = zip_scan::scan(zip).map_err(cerr)?;
    if found.is_empty() {
        return Err(other(format!(
            "cannot salvage '{}': its structure is damaged: {why}; and no member was found by \
             its local header{}",
            source.display(),
            stop.map(|s| format!(" ({s})")).unwrap_or_default()
        )));
    }
    let held: u64 = found.iter().map(|m| m.held).sum();
    let whole_estore = found.iter().any(|m| m.name == "embed.b2e" && m.whole());
    space::check(parent, &space::extraction(held, whole_estore), source)?;
    eprintln!(
        "b2fs salvage: {}: the zip cannot be opened ({why}): {} members found by their local \
         headers",
        source.display(),
        found.len()
    );
    let io = |p: &Path, e: std::io::Error| Error::Other {
        what: format!("extracting '{}'", p.display()),
        source: Some(e),
    };
    std::fs::create_dir(dir).map_err(|e| io(dir, e))?;
    let file = std::fs::File::open(zip).map_err(|e| io(zip, e))?;
    let mut lost = Vec::new();
    // python-blosc2 writes `embed.b2e` last: a file that ends right after it lost only its
    // central directory.
    let ends_after_estore = found
        .last()
        .is_some_and(|m| m.name == "embed.b2e" && m.whole());
    match stop {
        Some(_) if ends_after_estore => {}
        Some(s) => lost.push(format!("the zip past where its walk stopped: {s}")),
        None => {}
    }
    let mut store = false;
    for m in &found {
        if m.method != 0 {
            lost.push(format!(
                "{}: a compressed member (method {}), not extracted",
                m.name, m.method
            ));
            continue;
        }
        if m.name == "embed.b2e" && !m.whole() {
            // Its lost chunks would come back as zeros: embedded values that read wrong.
            lost.push(format!(
                "embed.b2e: cut short ({} of {} bytes): the embedded values and the \
                 attributes are lost",
                m.held, m.len
            ));
            continue;
        }
        let to = dir.join(&m.name);
        if to.symlink_metadata().is_ok() {
            lost.push(format!(
                "{}: a second member of that name, not extracted",
                m.name
            ));
            continue;
        }
        if let Some(up) = to.parent() {
            std::fs::create_dir_all(up).map_err(|e| io(up, e))?;
        }
        let mut out = std::fs::File::create_new(&to).map_err(|e| io(&to, e))?;
        let mut crc = flate2::Crc::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < m.held {
            use std::os::unix::fs::FileExt;
            let n = usize::try_from(m.held - at).map_or(buf.len(), |r| r.min(buf.len()));
            file.read_exact_at(&mut buf[..n], m.offset + at)
                .map_err(|e| io(zip, e))?;
            crc.update(&buf[..n]);
            out.write_all(&buf[..n]).map_err(|e| io(&to, e))?;
            at += n as u64;
        }
        if !m.whole() {
            eprintln!(
                "b2fs salvage: {}: cut short, {} of its {} bytes are there",
                m.name, m.held, m.len
            );
        } else if crc.sum() != m.crc32 {
            lost.push(format!(
                "{}: its CRC-32 is not the one its local header records: some of its bytes \
                 changed (its chunks are checked one by one, but a changed byte in a sound \
                 chunk's data may not show)",
                m.name
            ));
        }
        store |= m.name == "embed.b2e";
    }
    if !store && !lost.iter().any(|l| l.starts_with("embed.b2e")) {
        lost.push(
            "embed.b2e: not found (it is written last): the embedded values and the \
             attributes are lost; DEST is a directory of the member files"
                .into(),
        );
    }
    Ok(Extracted { store, lost })
}

/// Packs the files below directory `dir` into a new zip at `to` (stored, as python-blosc2
/// writes a `.b2z`; names relative with `/`, in sorted order but `embed.b2e` last, where
/// python-blosc2 puts it and where a later salvage of a cut copy looks for it), fsynced.
///
/// # Errors
/// On I/O errors.
pub(super) fn pack(dir: &Path, to: &Path) -> Result<(), Error> {
    let io = |p: &Path, e: std::io::Error| Error::Other {
        what: format!("packing '{}'", p.display()),
        source: Some(e),
    };
    let zerr = |e: ::zip::result::ZipError| other(format!("packing '{}': {e}", to.display()));
    let mut files = Vec::new();
    list(dir, "", &mut files).map_err(|e| io(dir, e))?;
    files.sort_by_key(|n| (n == "embed.b2e", n.clone()));
    let out = std::fs::File::create_new(to).map_err(|e| io(to, e))?;
    let mut w = ::zip::ZipWriter::new(out);
    for name in &files {
        let path = dir.join(name);
        let mut data = std::fs::File::open(&path).map_err(|e| io(&path, e))?;
        let len = data.metadata().map_err(|e| io(&path, e))?.len();
        let opts = ::zip::write::SimpleFileOptions::default()
            .compression_method(::zip::CompressionMethod::Stored)
            .large_file(len >= 1 << 31);
        w.start_file(name.as_str(), opts).map_err(zerr)?;
        std::io::copy(&mut data, &mut w).map_err(|e| io(to, e))?;
    }
    let out = w.finish().map_err(zerr)?;
    out.sync_all().map_err(|e| io(to, e))
}

/// The files below `dir` as names relative to the top (`prefix` the part so far).
fn list(dir: &Path, prefix: &str, out: &mut Vec<String>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
        if entry.file_type()?.is_dir() {
            list(&entry.path(), &format!("{name}/"), out)?;
        } else {
            out.push(name);
        }
    }
    Ok(())
}
