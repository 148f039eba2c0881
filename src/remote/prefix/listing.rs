//! What a listing of a prefix says: its objects (name, size, modification time, ETag), sorted
//! by name; the chunk objects in reading order (by directory, then chunk number); which
//! objects are chunk data (fetched on demand) and which metadata (fetched at open); whether
//! two listings name the same versions (a followed prefix that moved); the names under a
//! directory (one range of the sorted listing).

use std::time::{Duration, SystemTime};

use object_store::path::Path as StorePath;

use super::super::client::{Client, Pin, RemoteError};

/// The most objects a prefix may hold (a million-chunk sparse frame).
const MAX_OBJECTS: usize = 1 << 20;

/// One listed object.
#[derive(Debug)]
pub(super) struct Listed {
    /// Its name relative to the prefix (`meta/sizes`).
    pub(super) rel: String,
    pub(super) path: StorePath,
    pub(super) url: String,
    pub(super) size: u64,
    pub(super) mtime: SystemTime,
    pub(super) pin: Pin,
}

/// The chunk objects in reading order: by directory, then by chunk number (`__10.blp` after
/// `__9.blp`, which the listing's name order puts before `__2.blp`).
#[derive(Debug, Default)]
pub(super) struct Chunks {
    /// Object numbers, in reading order.
    pub(super) order: Vec<usize>,
    /// Each object's position in `order` (`usize::MAX`: not a numbered chunk object).
    pub(super) pos: Vec<usize>,
    /// The directory (one array's chunks) of each position, numbered.
    pub(super) group: Vec<u32>,
}

impl Chunks {
    pub(super) fn of(objects: &[Listed]) -> Chunks {
        let mut numbered: Vec<(&str, u64, usize)> = objects
            .iter()
            .enumerate()
            .filter_map(|(i, o)| chunk_number(&o.rel).map(|(dir, n)| (dir, n, i)))
            .collect();
        numbered.sort_unstable();
        let mut c = Chunks {
            pos: vec![usize::MAX; objects.len()],
            ..Chunks::default()
        };
        let mut g = 0u32;
        for (p, &(dir, _, i)) in numbered.iter().enumerate() {
            if p > 0 && numbered[p - 1].0 != dir {
                g += 1;
            }
            c.order.push(i);
            c.pos[i] = p;
            c.group.push(g);
        }
        c
    }
}

/// The directory and number of a chunk object: `DIR/0000002A.chunk` (hex, a sparse frame's)
/// or `DIR/__42.blp` (decimal, bcolz's).
pub(super) fn chunk_number(rel: &str) -> Option<(&str, u64)> {
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    let n = if let Some(hex) = name.strip_suffix(".chunk") {
        u64::from_str_radix(hex, 16).ok()?
    } else {
        crate::container::bcolz::chunks::chunk_file_index(name)? as u64
    };
    Some((dir, n))
}

/// The objects under the client's prefix, sorted by name, each page of the listing given
/// `patience`.
pub(super) fn listed(
    client: &Client,
    root_url: &str,
    patience: Duration,
) -> Result<Vec<Listed>, RemoteError> {
    let metas = client.list_within(MAX_OBJECTS, patience)?;
    let base = client.path().as_ref().to_owned();
    let mut objects: Vec<Listed> = metas
        .into_iter()
        .filter_map(|m| {
            let rel = m
                .location
                .as_ref()
                .strip_prefix(base.as_str())?
                .strip_prefix('/')?
                .to_owned();
            let mtime = SystemTime::UNIX_EPOCH
                + Duration::from_millis(u64::try_from(m.last_modified.timestamp_millis()).ok()?);
            Some(Listed {
                url: format!("{root_url}/{rel}"),
                rel,
                path: m.location.clone(),
                size: m.size,
                mtime,
                pin: Pin {
                    etag: m.e_tag.clone(),
                    meta: Some(m),
                },
            })
        })
        .collect();
    objects.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(objects)
}

/// Whether two listings name the same versions: the same names and sizes, and the same
/// ETags (modification times when the server gives none).
pub(super) fn same_listing(a: &[Listed], b: &[Listed]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.rel == y.rel
                && x.size == y.size
                && match (&x.pin.etag, &y.pin.etag) {
                    (Some(p), Some(q)) => p == q,
                    _ => x.mtime == y.mtime,
                }
        })
}

/// Whether the object named `rel` is fetched on demand, not at open: chunk data, or a leaf
/// frame of a `.b2d` store (opened when first used).
pub(super) fn is_chunk_data(rel: &str) -> bool {
    [".chunk", ".blp", ".b2nd", ".b2f", ".b2b"]
        .iter()
        .any(|s| rel.ends_with(s))
}

/// The items of `sorted` (sorted by `name`) whose name starts with `prefix`: one range, found
/// by two binary searches (the names before it sort below `prefix`, those after it above
/// every name it starts).
pub(super) fn sorted_under<'a, T>(
    sorted: &'a [T],
    name: impl Fn(&T) -> &str,
    prefix: &str,
) -> &'a [T] {
    let start = sorted.partition_point(|o| name(o) < prefix);
    let end = sorted.partition_point(|o| name(o) < prefix || name(o).starts_with(prefix));
    &sorted[start..end]
}
