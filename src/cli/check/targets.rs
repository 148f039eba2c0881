//! The arrays a check walks ([`Target`]): a single array, a ctable's columns, every leaf of a
//! collection (opened; one that does not open is a structure problem, a reference to a remote
//! array is skipped), a store's `embed.b2e` and `__vlmeta__` carriers, nested stores.

use super::{Problem, Report};
use crate::container::store::{Group, Location, Node};
use crate::container::{Array, Collection, Container, Opened};
use crate::error::display_chain;

/// One array to check.
#[derive(Debug)]
pub(in crate::cli) struct Target<'a> {
    /// The leaf key (`/a/b`), column name (`price`, `/t/price` in a collection), or `None` for
    /// a single array.
    pub label: Option<String>,
    /// The array.
    pub array: &'a Array,
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
            array: a,
        }),
        Container::Table(t) => {
            for (name, a) in &t.columns {
                out.push(Target {
                    label: Some(match label {
                        Some(l) => format!("{l}/{name}"),
                        None => name.clone(),
                    }),
                    array: a,
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
            array: e,
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
                    Err(e) => report.structure.push(Problem {
                        array: Some(key),
                        reason: display_chain(&*e),
                    }),
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
