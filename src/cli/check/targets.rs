//! The arrays a check walks ([`Target`]): a single array, a ctable's columns, every leaf of a
//! collection (opened; one that does not open is a structure problem, a reference to a remote
//! array is skipped), a store's `embed.b2e` and `__vlmeta__` carriers, nested stores.
//!
//! A leaf that is a local frame (a `.b2d` store's member file, a directory of sources'
//! frame file or sparse frame) and does not open is opened leniently, as a frame checked on
//! its own is (`crate::container::frame::lenient`): its damaged index, trailer or
//! vlmetalayers are structure problems named by its key ([`Report::lenient`]), and its chunks
//! are still checked (and salvaged).

use std::path::Path;

use super::{LenientLeaf, Problem, Report};
use crate::container::store::{Group, Location, Node};
use crate::container::{Array, Collection, Container, ContainerError, Opened};
use crate::error::display_chain;

/// One array to check.
#[derive(Debug)]
pub(in crate::cli) struct Target<'a> {
    /// The leaf key (`/a/b`), column name (`price`, `/t/price` in a collection), or `None` for
    /// a single array.
    pub label: Option<String>,
    /// The array.
    pub array: Held<'a>,
}

/// An array a [`Target`] checks: one of the opened source's, or a leaf's opened leniently
/// here (the collection caches only what opens strictly).
#[derive(Debug)]
pub(in crate::cli) enum Held<'a> {
    /// Part of the opened source.
    Borrowed(&'a Array),
    /// A collection leaf opened leniently.
    Owned(Box<Array>),
}

impl std::ops::Deref for Held<'_> {
    type Target = Array;

    fn deref(&self) -> &Array {
        match self {
            Held::Borrowed(a) => a,
            Held::Owned(a) => a,
        }
    }
}

/// The arrays of an opened source, and the problems met finding them (leaves that do not
/// open). Opens every leaf of a collection.
pub(in crate::cli) fn targets<'a>(opened: &'a Opened, report: &mut Report) -> Vec<Target<'a>> {
    let mut out = Vec::new();
    match opened {
        Opened::Single(c) => container_targets(c, None, &mut out),
        Opened::Collection(c) => collection_targets(c, "", &mut out, report),
    }
    out
}

fn container_targets<'a>(c: &'a Container, label: Option<&str>, out: &mut Vec<Target<'a>>) {
    match c {
        Container::Array(a) => out.push(Target {
            label: label.map(str::to_owned),
            array: Held::Borrowed(a),
        }),
        Container::Table(t) => {
            for (name, a) in &t.columns {
                out.push(Target {
                    label: Some(match label {
                        Some(l) => format!("{l}/{name}"),
                        None => name.clone(),
                    }),
                    array: Held::Borrowed(a),
                });
            }
        }
    }
}

fn collection_targets<'a>(
    c: &'a Collection,
    prefix: &str,
    out: &mut Vec<Target<'a>>,
    report: &mut Report,
) {
    if let Some(e) = c.estore_array() {
        out.push(Target {
            label: Some(format!("{prefix}/embed.b2e")),
            array: Held::Borrowed(e),
        });
    }
    group_targets(c.root(), prefix, out, report);
}

fn group_targets<'a>(g: &'a Group, prefix: &str, out: &mut Vec<Target<'a>>, report: &mut Report) {
    if let Some(carrier) = g.carrier() {
        let key = format!("{prefix}{}", carrier.key());
        match carrier.open() {
            Ok(c) => container_targets(c, Some(&key), out),
            Err(e) => report.structure.push(Problem {
                array: Some(key),
                reason: display_chain(&*e),
            }),
        }
    }
    for n in &g.children {
        match n {
            Node::Group(sub) => group_targets(sub, prefix, out, report),
            Node::Leaf(l) => {
                let key = format!("{prefix}{}", l.key());
                if let Location::Reference(v) = l.location() {
                    report.skipped.push(Problem {
                        array: Some(key),
                        reason: format!("a reference to a remote array ({v})"),
                    });
                    continue;
                }
                match l.open() {
                    Ok(c) => container_targets(c, Some(&key), out),
                    Err(e) => {
                        let local = match l.location() {
                            Location::File(p) | Location::Source(p) => Some(p.as_path()),
                            _ => None,
                        };
                        match local.and_then(|p| lenient_leaf(p, &key, report)) {
                            Some(Ok(a)) => out.push(Target {
                                label: Some(key),
                                array: Held::Owned(Box::new(a)),
                            }),
                            Some(Err(why)) => report.structure.push(Problem {
                                array: Some(key),
                                reason: why,
                            }),
                            None => report.structure.push(Problem {
                                array: Some(key),
                                reason: display_chain(&*e),
                            }),
                        }
                    }
                }
            }
            Node::Store(s) => {
                let name = format!("{prefix}{}/{}", g_key(g), n.name());
                collection_targets(s, &name, out, report);
            }
        }
    }
}

/// The group's key without its trailing `/` (the root is ``).
fn g_key(g: &Group) -> &str {
    g.key.trim_end_matches('/')
}

/// Leaf `key` at `path` (a local frame file or sparse frame), which does not open strictly,
/// opened leniently: its damaged parts go to `report` (as structure problems named by `key`,
/// and in [`Report::lenient`]) and the array is returned for its chunks to be checked; a
/// frame too damaged for that gives the lenient open's reason (it says where it stopped,
/// which the strict error does not). `None` when it is no frame, or opens strictly now
/// (another writer changed it meanwhile): the strict error stands.
fn lenient_leaf(path: &Path, key: &str, report: &mut Report) -> Option<Result<Array, String>> {
    if !path.is_file() && !path.join("chunks.b2frame").is_file() {
        return None;
    }
    match Array::open_frame_lenient(path) {
        Ok((a, damaged)) if !damaged.is_empty() => {
            for d in &damaged {
                report.structure.push(Problem {
                    array: Some(key.to_owned()),
                    reason: d.reason.clone(),
                });
            }
            report.lenient.push(LenientLeaf {
                key: key.to_owned(),
                damaged,
            });
            Some(Ok(a))
        }
        Ok(_) | Err(ContainerError::NotAContainer { .. }) => None,
        Err(e) => Some(Err(display_chain(&e))),
    }
}
