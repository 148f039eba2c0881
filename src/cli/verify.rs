//! `b2fs verify SOURCE [--json]`: opens a source of any kind (local or remote), checks its
//! structure (what opening reads: header, metalayers, index, offsets, trailer, vlmeta, bcolz
//! metadata, a store's zip and `embed.b2e`; then every leaf of a collection; a frame,
//! contiguous or sparse, that does not open is opened leniently, [`lenient`], and so is such
//! a local leaf of a collection, `check/targets.rs`), decodes every
//! chunk on every core ([`super::check`]) and reports each damaged chunk with its array, index
//! and reason. Exit 0 when sound, [`super::EXIT_DAMAGED`] when damage was found, 3 when the
//! source is missing or not a container (`docs/VERIFY.md`).

use std::path::Path;

use serde_json::{Value, json};

use super::args::MountOptions;
use super::check::{self, Report};
use super::{Error, check_source};
use crate::container::frame::Damaged;
use crate::container::{self, Array, Container, ContainerError, Opened};
use crate::error::display_chain;

/// How opening a source went.
pub(super) enum Open {
    /// Opened.
    Opened(Box<Opened>),
    /// A container whose structure is too damaged to open (the reason).
    Damaged(String),
    /// A frame opened leniently, and the parts it did without
    /// ([`crate::container::frame::Damaged`]: index, trailer, vlmetalayers).
    Lenient(Box<Opened>, Vec<Damaged>),
}

/// A local frame (a contiguous frame file or a sparse frame's directory) that does not open
/// (`strict`), opened leniently: its chunks can still be checked (and salvaged) when only
/// its index, trailer or vlmetalayers are damaged. `None` when it is no such frame.
fn lenient(source: &Path, strict: &ContainerError) -> Option<Open> {
    if !source.is_file() && !source.join("chunks.b2frame").is_file() {
        return None;
    }
    // A zip (a `.b2z` store): no frame to open leniently; its own error says what is wrong
    // (a truncated one: its end record missing), not the frame's "no magic".
    if crate::container::store::zip::looks_like_zip(source) {
        return None;
    }
    match Array::open_frame_lenient(source) {
        Ok((a, damaged)) if !damaged.is_empty() => Some(Open::Lenient(
            Box::new(Opened::Single(Container::Array(a))),
            damaged,
        )),
        // It opens strictly now: changed meanwhile; the strict error stands.
        Ok(_) => Some(Open::Damaged(display_chain(strict))),
        // Not a frame: the strict error; a frame: the lenient one says why it stops.
        Err(ContainerError::NotAContainer { .. }) => None,
        Err(e) => Some(Open::Damaged(display_chain(&e))),
    }
}

/// Whether an open error means "not a container" (exit 3) rather than a damaged one.
fn not_a_container(e: &ContainerError) -> bool {
    matches!(
        e,
        ContainerError::NotAContainer { .. } | ContainerError::Unsupported { .. }
    )
}

/// Opens `source` (a path or URL) for checking: [`Open::Damaged`] for a recognised source
/// whose structure is broken.
///
/// # Errors
/// [`Error::SourcePath`] / [`Error::Source`] (exit 3) when it is missing or not a container;
/// [`Error::Remote`] for remote failures; [`Error::Usage`] for bad `-o` options.
pub(super) fn open(source: &Path, options: &[String]) -> Result<Open, Error> {
    let source_err = |e| Error::Source {
        path: source.to_path_buf(),
        source: e,
    };
    let res = match super::remote::as_url(source) {
        Some(url) => {
            let opts = MountOptions::parse(options).map_err(Error::Usage)?;
            match super::remote::open(url, &opts.remote) {
                Ok(o) => Ok(o),
                Err(Error::Source { source: e, .. }) => Err(e),
                Err(e) => return Err(e),
            }
        }
        None => {
            if !options.is_empty() {
                MountOptions::parse(options).map_err(Error::Usage)?;
            }
            check_source(source)?;
            container::open_any(source)
        }
    };
    match res {
        Ok(o) => Ok(Open::Opened(Box::new(o))),
        Err(e) if not_a_container(&e) => Err(source_err(e)),
        Err(e @ ContainerError::Io { .. }) => Err(source_err(e)),
        Err(e) => Ok(lenient(source, &e).unwrap_or_else(|| Open::Damaged(display_chain(&e)))),
    }
}

/// The kind of an opened source, as `info` names it.
pub(super) fn kind_name(o: &Opened) -> String {
    match o {
        Opened::Single(container::Container::Array(a)) => format!("{:?}", a.kind()),
        Opened::Single(container::Container::Table(_)) => "BcolzCtable".into(),
        Opened::Collection(c) => format!("collection ({:?})", c.form()),
    }
}

/// Checks an opened source on every core, listing at most `missing_listed` missing chunk
/// files per bcolz array as damaged chunks, and giving up over `give_up_over` damaged
/// chunks ([`check::check`]).
pub(super) fn check_opened(
    o: &Opened,
    progress: bool,
    missing_listed: usize,
    give_up_over: Option<u64>,
) -> Report {
    let mut report = Report::default();
    let targets = check::targets(o, &mut report);
    check::check(
        &targets,
        check::default_threads(),
        progress,
        missing_listed,
        give_up_over,
        &mut report,
    );
    report
}

/// Runs `b2fs verify`.
pub(super) fn verify(source: &Path, as_json: bool, options: &[String]) -> Result<(), Error> {
    let (kind, report) = match open(source, options)? {
        Open::Opened(o) => (
            kind_name(&o),
            check_opened(&o, true, check::MISSING_LISTED, None),
        ),
        Open::Lenient(o, damaged) => {
            let mut r = check_opened(&o, true, check::MISSING_LISTED, None);
            r.structure.splice(0..0, damaged.into_iter().map(problem));
            (kind_name(&o), r)
        }
        Open::Damaged(reason) => {
            let mut r = Report::default();
            r.structure.push(check::Problem {
                array: None,
                reason,
            });
            ("damaged".to_owned(), r)
        }
    };
    // Temp files of interrupted commits: not damage (nothing reads them), but disk space.
    let (leftovers, cut) = match super::remote::as_url(source) {
        Some(_) => (Vec::new(), false),
        None => container::leftover::leftovers(source),
    };
    if as_json {
        let mut doc = serde_json::Map::new();
        doc.insert("source".into(), json!(source.display().to_string()));
        doc.insert("kind".into(), json!(kind));
        doc.extend(report.to_json());
        let listed: Vec<String> = leftovers.iter().map(|p| p.display().to_string()).collect();
        doc.insert("leftovers".into(), json!(listed));
        doc.insert("leftovers_cut".into(), json!(cut));
        println!(
            "{}",
            serde_json::to_string_pretty(&Value::Object(doc)).unwrap_or_default()
        );
    } else {
        print_text(source, &kind, &report);
        print_leftovers(&leftovers, cut);
    }
    if report.sound() {
        Ok(())
    } else {
        Err(Error::Damaged(format!(
            "{}: {} damaged chunks{}, {} damaged structures",
            source.display(),
            report.damaged_count,
            missing_part(&report),
            report.structure.len()
        )))
    }
}

/// ` (N of them missing)` when chunk files are missing, else nothing.
fn missing_part(r: &Report) -> String {
    match r.missing_chunks() {
        0 => String::new(),
        n => format!(" ({n} of them missing)"),
    }
}

/// A damaged part of a leniently opened frame as a damaged structure of the source.
pub(super) fn problem(d: Damaged) -> check::Problem {
    check::Problem {
        array: None,
        reason: d.reason,
    }
}

/// Leftover temp files the text report names (`--json` lists them all).
const LEFTOVERS_SHOWN: usize = 20;

/// The text report's lines on temp files of interrupted commits (`leftovers`; `cut`: the
/// search stopped early).
fn print_leftovers(leftovers: &[std::path::PathBuf], cut: bool) {
    for p in leftovers.iter().take(LEFTOVERS_SHOWN) {
        println!("leftover: {}", p.display());
    }
    if leftovers.len() > LEFTOVERS_SHOWN {
        println!(
            "leftover: ... and {} more",
            leftovers.len() - LEFTOVERS_SHOWN
        );
    }
    if !leftovers.is_empty() {
        println!(
            "          (temp files of interrupted b2fs commits: not part of the source, safe to \
             remove while no b2fs mount or compact writes it)"
        );
    }
    if cut {
        println!(
            "leftover: the search for them stopped after {} directory entries",
            container::leftover::MAX_WALKED
        );
    }
}

/// Runs of missing chunks the text report shows per array (`--json` has more).
const MISSING_RUNS_SHOWN: usize = 10;

fn print_text(source: &Path, kind: &str, r: &Report) {
    println!("source:   {}", source.display());
    println!("kind:     {kind}");
    println!(
        "checked:  {} arrays, {} chunks ({} special), {} decoded",
        r.arrays,
        r.chunks,
        r.special,
        super::info::human(r.decoded_bytes)
    );
    if r.missing_chunks() > 0 {
        println!(
            "missing:  {} chunks (their chunk files are not there: not checked)",
            r.missing_chunks()
        );
    }
    for p in &r.skipped {
        println!(
            "skipped:  {}: {}",
            p.array.as_deref().unwrap_or("-"),
            p.reason
        );
    }
    for p in &r.structure {
        println!(
            "DAMAGED structure {}: {}",
            p.array.as_deref().unwrap_or("(source)"),
            p.reason
        );
    }
    for m in &r.missing {
        let runs: Vec<String> = m
            .runs
            .iter()
            .take(MISSING_RUNS_SHOWN)
            .map(|g| match g.len() {
                1 => g.start.to_string(),
                _ => format!("{}-{}", g.start, g.end - 1),
            })
            .collect();
        let more = if m.runs.len() > MISSING_RUNS_SHOWN
            || m.count > m.runs.iter().map(|g| g.len() as u64).sum()
        {
            ", ..."
        } else {
            ""
        };
        println!(
            "MISSING  {} of {} chunk files of {}: chunks {}{more}",
            m.count,
            m.declared,
            check::label(&m.array),
            runs.join(", ")
        );
    }
    // Missing chunks are summed up above, one line per array.
    for d in r.damaged.iter().filter(|d| !d.missing) {
        println!(
            "DAMAGED chunk {} of {}: {}",
            d.chunk,
            check::label(&d.array),
            d.reason
        );
    }
    let missing: u64 = r.missing.iter().map(|m| m.count).sum();
    let shown = r.damaged.iter().filter(|d| !d.missing).count() as u64;
    if shown + missing < r.damaged_count {
        println!(
            "... and {} more damaged chunks (not listed)",
            r.damaged_count - shown - missing
        );
    }
    if r.sound() {
        println!("result:   sound");
    } else {
        println!(
            "result:   DAMAGED ({} chunks{}, {} structures)",
            r.damaged_count,
            missing_part(r),
            r.structure.len()
        );
    }
}
