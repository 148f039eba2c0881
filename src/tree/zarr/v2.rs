//! The Zarr v2 view: every mount also shows, in the directory `zarr2/` of its root, the same
//! hierarchy as the Zarr v3 view `zarr/` (the same groups and arrays under the same names)
//! with Zarr v2 metadata, for the readers that read only v2 (zarr-python 2.x, the line
//! Python <= 3.10 stays on; netCDF-Java; cpp-zarr; zarr-js; R's Rarr and pizzarr).
//! `docs/ZARR.md` ("Zarr v2 view") is the user's contract.
//!
//! ```text
//! zarr2/.zgroup .zattrs .zmetadata   the root group; consolidated metadata of everything
//! zarr2/<array>/.zarray .zattrs      array: shape, chunks, dtype (NumPy typestr), no codecs
//! zarr2/<array>/0.1                  chunk objects: key separator ".", "0" for a 0-d array
//! zarr2/<group>/.zgroup .zattrs .zmetadata
//! ```
//!
//! What this module owns: the view's nodes ([`V2`]) and their inode numbers (tags 6 and 7 of
//! the v3 view's plan, `ino.rs`), lookups, listings, attributes, reads, and what the kernel
//! must forget after another writer. `v2/docs.rs` makes the metadata documents.
//!
//! What it reuses, so the two views never disagree: the v3 view's hierarchy (which native
//! directories are groups and arrays, their names, what is left out: `hierarchy.rs`), its
//! geometry (`Geom`: shape, chunk grid, dtype; never sharded here, `-o zarr_shards` or not)
//! and its chunk objects' bytes (`read.rs`, `Tree::zarr_read_object`: the decoded chunk in C
//! order, edge chunks padded to the full chunk, from the same caches), and its walk of the
//! hierarchy for consolidated metadata (`consolidated.rs`, `Tree::zarr_walk`).
//!
//! Read-only: every change under `zarr2/` (create, write, truncate, rename, mkdir, rmdir,
//! unlink, setxattr, chmod) is EROFS, on read-write mounts too (the hooks are in the tree's
//! write paths: they answer [`super::super::Entry::Zarr2`] with EROFS). Write through `zarr/`
//! or the native tree; this view shows the change at the next open.
//!
//! Its files never keep the kernel's page cache across opens (`Tree::keep_cache`), so a
//! commit or another writer's change shows at the next open with no per-chunk bookkeeping.

mod docs;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::ino::{PAYLOAD, TAG_SHIFT};
use super::{DirKind, GeomOf, ZARR_BASE, ZNode, read};
use crate::container::npy::Npy;
use crate::reader::{ArrayId, ReadData, ReadHint, window};
use crate::tree::attr::EntryKind;
use crate::tree::handle::Pinned;
use crate::tree::layout::{NodeKind, ROOT_INO};
use crate::tree::{Attr, Invalidation, Tree, TreeError};

/// The view's directory name, unless the mount root already has an entry of that name.
pub const VIEW: &str = "zarr2";
/// Its name when the root has a member called [`VIEW`] (and `zarr2_view_1`, ... after it).
pub const VIEW_MOVED: &str = "zarr2_view";

/// The tag of the view's root, directories and metadata files.
const TAG_NODE: u64 = 6;
/// The tag of its chunk objects.
const TAG_CHUNK: u64 = 7;
/// Where a node's kind starts in the payload (the native inode below it).
const KIND_SHIFT: u32 = 56;
/// Bits of an array id and of a chunk index in a chunk object's number.
const ARRAY_BITS: u32 = 23;
const INDEX_BITS: u32 = 32;

/// A metadata file of the v2 view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Meta {
    /// `.zgroup` (`{"zarr_format": 2}`), in groups.
    Zgroup,
    /// `.zarray`, in arrays.
    Zarray,
    /// `.zattrs`, in groups and arrays.
    Zattrs,
    /// `.zmetadata` (consolidated metadata of everything below), in groups.
    Zmetadata,
}

impl Meta {
    const ALL: [Meta; 4] = [Meta::Zgroup, Meta::Zarray, Meta::Zattrs, Meta::Zmetadata];

    /// Its file name.
    pub fn name(self) -> &'static str {
        match self {
            Meta::Zgroup => ".zgroup",
            Meta::Zarray => ".zarray",
            Meta::Zattrs => ".zattrs",
            Meta::Zmetadata => ".zmetadata",
        }
    }

    /// The metadata file called `name`: a member of that name (a source `.zattrs.b2nd` of a
    /// directory of sources is named after its stem) is not in the v2 view.
    pub(super) fn of(name: &str) -> Option<Meta> {
        Meta::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Whether a group (`false`: an array) has this file.
    fn in_group(self, group: bool) -> bool {
        match self {
            Meta::Zattrs => true,
            Meta::Zarray => !group,
            Meta::Zgroup | Meta::Zmetadata => group,
        }
    }

    fn code(self) -> u64 {
        match self {
            Meta::Zgroup => 2,
            Meta::Zarray => 3,
            Meta::Zattrs => 4,
            Meta::Zmetadata => 5,
        }
    }
}

/// A node of the v2 view (not checked against the tree).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V2 {
    /// `zarr2/`: the root group.
    Root,
    /// The group or array directory mirroring native directory `n` (the v3 view's
    /// `ZNode::Dir(n)`).
    Dir(u64),
    /// A metadata file of directory `n` (0: of the root group).
    Meta(u64, Meta),
    /// Chunk object `index` (C-order rank in the chunk grid) of `array`.
    Chunk {
        /// The array.
        array: ArrayId,
        /// The chunk.
        index: u64,
    },
}

impl V2 {
    /// Its inode number, or `None` when its numbers do not fit the plan.
    pub fn ino(self) -> Option<u64> {
        let node = |kind: u64, n: u64| {
            (n < 1 << KIND_SHIFT)
                .then_some(ZARR_BASE | (TAG_NODE << TAG_SHIFT) | kind << KIND_SHIFT | n)
        };
        match self {
            V2::Root => node(0, 0),
            V2::Dir(n) => node(1, n),
            V2::Meta(n, m) => node(m.code(), n),
            V2::Chunk { array, index } => {
                let fits = u64::from(array.0) < 1 << ARRAY_BITS && index < 1 << INDEX_BITS;
                fits.then_some(
                    ZARR_BASE | (TAG_CHUNK << TAG_SHIFT) | u64::from(array.0) << INDEX_BITS | index,
                )
            }
        }
    }

    /// The node inode number `ino` stands for (`None`: not one of this view).
    pub fn of(ino: u64) -> Option<V2> {
        if ino & ZARR_BASE == 0 {
            return None;
        }
        let payload = ino & PAYLOAD;
        match (ino & !ZARR_BASE) >> TAG_SHIFT {
            TAG_NODE => {
                let n = payload & ((1 << KIND_SHIFT) - 1);
                Some(match payload >> KIND_SHIFT {
                    0 if n == 0 => V2::Root,
                    1 => V2::Dir(n),
                    k => V2::Meta(n, Meta::ALL.into_iter().find(|m| m.code() == k)?),
                })
            }
            TAG_CHUNK if payload >> (ARRAY_BITS + INDEX_BITS) == 0 => Some(V2::Chunk {
                array: ArrayId((payload >> INDEX_BITS) as u32),
                index: payload & ((1 << INDEX_BITS) - 1),
            }),
            _ => None,
        }
    }
}

/// The v2 view's state in a tree.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// The view directory's name in the root (fixed at the first look).
    name: OnceLock<String>,
    /// Unsharded geometries, by array, under `-o zarr_shards` (without it the v3 view's
    /// are unsharded already and are used).
    geoms: Mutex<HashMap<ArrayId, (Arc<Npy>, GeomOf)>>,
}

/// The entries of a directory of the v2 view after `.` and `..`: named entries, then an
/// array's chunk keys (lazy: a million chunks cost only the entries taken).
#[derive(Debug, Clone)]
pub(crate) struct Listing {
    names: Vec<(u64, EntryKind, String)>,
    keys: Option<(ArrayId, Vec<u64>, u64)>,
}

impl Listing {
    /// Number of entries.
    pub(crate) fn len(&self) -> u64 {
        self.names.len() as u64 + self.keys.as_ref().map_or(0, |k| k.2)
    }

    /// Entry `k`.
    pub(crate) fn get(&self, k: u64) -> Option<(u64, EntryKind, String)> {
        let named = self.names.len() as u64;
        if k < named {
            return self.names.get(k as usize).cloned();
        }
        let (array, grid, count) = self.keys.as_ref()?;
        let index = k - named;
        if index >= *count {
            return None;
        }
        let ino = V2::Chunk {
            array: *array,
            index,
        }
        .ino()?;
        Some((ino, EntryKind::File, chunk_key(grid, index)))
    }
}

/// The v2 key of chunk `index` (C-order rank) of grid `grid`: its coordinates joined by
/// `.`; `0` for a 0-d array.
pub fn chunk_key(grid: &[u64], index: u64) -> String {
    if grid.is_empty() {
        return "0".into();
    }
    let mut parts = vec![String::new(); grid.len()];
    let mut rest = index;
    for (d, part) in parts.iter_mut().enumerate().rev() {
        let across = grid[d].max(1);
        *part = (rest % across).to_string();
        rest /= across;
    }
    parts.join(".")
}

/// The chunk index `key` names in grid `grid`, if any (canonical decimals only, one per
/// dimension, each inside the grid).
pub fn parse_chunk_key(grid: &[u64], key: &str) -> Option<u64> {
    if grid.is_empty() {
        return (key == "0").then_some(0);
    }
    let mut index = 0u64;
    let mut parts = key.split('.');
    for &across in grid {
        let i = read::parse_key(parts.next()?).filter(|&i| i < across)?;
        index = index.checked_mul(across)?.checked_add(i)?;
    }
    parts.next().is_none().then_some(index)
}

impl Tree {
    /// Whether the kernel must not keep `ino`'s name or attributes past the reply: a v2
    /// chunk object (`0.1`) is named by its rank in the chunk grid, so another writer's
    /// change of the grid gives an old name another chunk (or another size) while the
    /// kernel's entry cache still held it for a read-only mount's long timeout (review,
    /// session 31). A lookup per chunk object read costs a round trip; reading one costs more.
    pub fn name_follows_geometry(&self, ino: u64) -> bool {
        matches!(V2::of(ino), Some(V2::Chunk { .. }))
    }

    /// The name of the v2 view's directory in the root.
    pub(crate) fn zarr2_name(&self) -> &str {
        self.zarr
            .v2
            .name
            .get_or_init(|| self.view_dir_name(VIEW, VIEW_MOVED, "Zarr v2 view"))
    }

    /// The inode of the v2 view's directory.
    pub(crate) fn zarr2_root_ino(&self) -> u64 {
        V2::Root.ino().unwrap_or(ZARR_BASE)
    }

    /// The unsharded geometry of `array`'s NPY view `npy` (`None`: the current one).
    pub(crate) fn zarr2_geom(
        &self,
        array: ArrayId,
        npy: Option<Arc<Npy>>,
    ) -> Result<Arc<super::Geom>, String> {
        if !self.options.zarr_shards {
            return self.zarr_geom(array, npy);
        }
        let npy = npy
            .or_else(|| self.npy_view(array))
            .ok_or_else(|| super::NO_NPY.to_owned())?;
        let mut geoms = self.zarr.v2.geoms.lock();
        match geoms.get(&array) {
            Some((seen, g)) if Arc::ptr_eq(seen, &npy) => g.clone(),
            _ => {
                let g = super::Geom::of(&npy).map(Arc::new);
                geoms.insert(array, (npy, g.clone()));
                g
            }
        }
    }

    /// What the v2 node of inode `ino` is, when it exists now.
    pub(crate) fn zarr2_entry(&self, ino: u64) -> Option<V2> {
        V2::of(ino).filter(|&v| self.zarr2_exists(v))
    }

    /// Whether `v` stands for something that exists now.
    fn zarr2_exists(&self, v: V2) -> bool {
        match v {
            V2::Root => true,
            V2::Meta(0, m) => m.in_group(true),
            V2::Dir(n) => self.zarr_exists(ZNode::Dir(n)),
            V2::Meta(n, m) => {
                self.zarr_exists(ZNode::Dir(n))
                    && match self.zarr_dir_kind(n) {
                        Ok(kind) => m.in_group(kind == DirKind::Group),
                        // A leaf that does not open: its files give its error.
                        Err(_) => m == Meta::Zattrs,
                    }
            }
            V2::Chunk { array, index } => {
                array.index() < self.reader.arrays()
                    && self
                        .zarr2_geom(array, None)
                        .is_ok_and(|g| index < g.nchunks())
            }
        }
    }

    /// Whether `v` is a directory.
    pub(crate) fn zarr2_is_dir(&self, v: V2) -> bool {
        matches!(v, V2::Root | V2::Dir(_))
    }

    /// The attributes of v2 inode `ino` (`v`).
    pub(crate) fn zarr2_getattr(&self, ino: u64, v: V2) -> Result<Attr, TreeError> {
        match v {
            V2::Root => Ok(self.dir_attr(ino, 2)),
            V2::Dir(n) => {
                // A collection leaf is not opened by a stat (1 = "count unknown").
                let nlink = match self.node(n).map(|x| &x.kind) {
                    Some(NodeKind::Leaf(l)) if !l.built.tried() => 1,
                    _ => 2,
                };
                Ok(self.dir_attr(ino, nlink))
            }
            _ => Ok(self.attr(ino, EntryKind::File, self.zarr2_size(v)?, 1)),
        }
    }

    /// The size of v2 file `v` now (0 for metadata that cannot be made: its open gives its
    /// error, as in the v3 view).
    pub(crate) fn zarr2_size(&self, v: V2) -> Result<u64, TreeError> {
        match v {
            V2::Chunk { array, .. } => self
                .zarr2_geom(array, None)
                .map(|g| g.object_len)
                .map_err(|_| TreeError::NotFound),
            V2::Meta(..) => match self.zarr2_doc(v) {
                Ok(doc) => Ok(doc.len() as u64),
                Err(TreeError::Unavailable(_)) => Ok(0),
                Err(e) => Err(e),
            },
            V2::Root | V2::Dir(_) => Ok(0),
        }
    }

    /// The entry `name` of v2 directory `parent` (`v`). The v3 view's `zarr.json` is ENOENT
    /// at once (zarr-python 3 probes it first), without opening anything.
    pub(crate) fn zarr2_lookup(&self, parent: u64, v: V2, name: &str) -> Result<Attr, TreeError> {
        let (n, z) = match v {
            V2::Root => (0, ZNode::Root),
            V2::Dir(n) => (n, ZNode::Dir(n)),
            _ => return Err(TreeError::NotADirectory(parent)),
        };
        if name == "zarr.json" {
            return Err(TreeError::NotFound);
        }
        let child = match Meta::of(name) {
            Some(m) => V2::Meta(n, m),
            None => match v {
                V2::Dir(n) => match self.zarr_dir_kind(n)? {
                    DirKind::Array(array) => {
                        let g = self
                            .zarr2_geom(array, None)
                            .map_err(|_| TreeError::NotFound)?;
                        let index = parse_chunk_key(&g.grid, name).ok_or(TreeError::NotFound)?;
                        V2::Chunk { array, index }
                    }
                    DirKind::Group => self.zarr2_member(z, name)?,
                },
                _ => self.zarr2_member(z, name)?,
            },
        };
        if !self.zarr2_exists(child) {
            return Err(TreeError::NotFound);
        }
        let ino = child.ino().ok_or(TreeError::NotFound)?;
        self.zarr2_getattr(ino, child)
    }

    /// Member `name` of the group the v3 view shows as `z` (its arrays and groups only).
    fn zarr2_member(&self, z: ZNode, name: &str) -> Result<V2, TreeError> {
        match self.zarr_child(z, name)? {
            Some(ZNode::Dir(c)) => Ok(V2::Dir(c)),
            _ => Err(TreeError::NotFound),
        }
    }

    /// The parent of v2 directory `v` (for `..`).
    fn zarr2_parent(&self, v: V2) -> u64 {
        let root = self.zarr2_root_ino();
        match v {
            V2::Root => ROOT_INO,
            V2::Dir(ROOT_INO) => root,
            V2::Dir(n) => match self.node(n).map(|x| x.parent) {
                Some(ROOT_INO) | None => root,
                Some(p) => V2::Dir(p).ino().unwrap_or(root),
            },
            _ => root,
        }
    }

    /// The listing of v2 directory `v` (inode `ino`) and its parent's inode.
    ///
    /// # Errors
    /// [`TreeError::NotFound`], [`TreeError::NotADirectory`], EIO for a leaf that cannot be
    /// opened.
    pub(crate) fn zarr2_listing(&self, ino: u64, v: V2) -> Result<(u64, Listing), TreeError> {
        let (n, z) = match v {
            V2::Root => (0, ZNode::Root),
            V2::Dir(n) => (n, ZNode::Dir(n)),
            _ => return Err(TreeError::NotADirectory(ino)),
        };
        let meta = |m: Meta| {
            V2::Meta(n, m)
                .ino()
                .map(|i| (i, EntryKind::File, m.name().to_owned()))
        };
        let array = match v {
            V2::Dir(n) => match self.zarr_dir_kind(n)? {
                DirKind::Array(a) => Some(a),
                DirKind::Group => None,
            },
            _ => None,
        };
        let listing = match array {
            Some(a) => {
                let g = self.zarr2_geom(a, None).map_err(|_| TreeError::NotFound)?;
                Listing {
                    names: [Meta::Zarray, Meta::Zattrs]
                        .into_iter()
                        .filter_map(meta)
                        .collect(),
                    keys: Some((a, g.grid.clone(), g.nchunks())),
                }
            }
            None => {
                let mut names: Vec<_> = [Meta::Zgroup, Meta::Zattrs, Meta::Zmetadata]
                    .into_iter()
                    .filter_map(meta)
                    .collect();
                for (name, child) in self.zarr_children(z)? {
                    if let ZNode::Dir(c) = child
                        && Meta::of(&name).is_none()
                        && let Some(i) = V2::Dir(c).ino()
                    {
                        names.push((i, EntryKind::Directory, name));
                    }
                }
                Listing { names, keys: None }
            }
        };
        Ok((self.zarr2_parent(v), listing))
    }

    /// What a read-only descriptor of v2 file `v` reads: the metadata of now, or the
    /// chunk's version and the NPY view of now (as the v3 view's chunk objects).
    pub(crate) fn zarr2_pin(&self, v: V2, p: &mut Pinned) {
        match v {
            V2::Meta(..) => p.content = self.zarr2_doc(v).ok(),
            V2::Chunk { array, index } => self.zarr_pin(
                ZNode::Chunks {
                    array,
                    level: 0,
                    index,
                },
                p,
            ),
            V2::Root | V2::Dir(_) => {}
        }
    }

    /// Up to `size` bytes of v2 file `v` (inode `ino`) from `offset`: a chunk object is the
    /// v3 view's bytes of the same chunk (unsharded).
    pub(crate) fn zarr2_read(
        &self,
        ino: u64,
        v: V2,
        (offset, size): (u64, u32),
        hint: ReadHint,
        pinned: Option<&Pinned>,
    ) -> Result<ReadData, TreeError> {
        match v {
            V2::Chunk { array, index } => {
                let npy = pinned.and_then(|p| p.npy.clone());
                let g = self
                    .zarr2_geom(array, npy)
                    .map_err(|_| TreeError::NotFound)?;
                self.zarr_read_object(ino, (&g, array, index), (offset, size), hint, pinned)
            }
            V2::Meta(..) => {
                let bytes = self.zarr2_doc(v)?;
                let r = window(bytes.len(), offset, size);
                Ok(ReadData::Fixed(bytes, r))
            }
            V2::Root | V2::Dir(_) => Err(TreeError::IsADirectory(ino)),
        }
    }

    /// The arrays an open of `v` shows (for following other writers at the open); `None`:
    /// every array (a group's metadata, whose consolidated metadata shows all below it).
    pub(crate) fn zarr2_arrays(&self, v: V2) -> Option<Vec<ArrayId>> {
        match v {
            V2::Chunk { array, .. } => Some(vec![array]),
            V2::Meta(n, Meta::Zarray | Meta::Zattrs) if n != 0 => match self.zarr_dir_kind(n) {
                Ok(DirKind::Array(a)) => Some(vec![a]),
                _ => None,
            },
            _ => None,
        }
    }

    /// What the kernel must forget of the v2 view after another writer changed the source:
    /// its directories and metadata files (sizes and listings change). Chunk objects keep
    /// no page cache across opens, and their size changes only with the chunk shape.
    pub(crate) fn zarr2_invalidations(&self) -> Vec<Invalidation> {
        let mut out: Vec<Invalidation> = [V2::Root]
            .into_iter()
            .chain(Meta::ALL.into_iter().map(|m| V2::Meta(0, m)))
            .filter_map(V2::ino)
            .map(Invalidation::Inode)
            .collect();
        for n in self.zarr_mirrored_dirs() {
            let files = [Meta::Zarray, Meta::Zattrs, Meta::Zmetadata].map(|m| V2::Meta(n, m));
            out.extend(
                std::iter::once(V2::Dir(n))
                    .chain(files)
                    .filter_map(V2::ino)
                    .map(Invalidation::Inode),
            );
        }
        out
    }

    /// The path of v2 inode `ino` from the mount root, for messages.
    pub(crate) fn zarr2_path_of(&self, ino: u64) -> String {
        let view = format!("/{}", self.zarr2_name());
        let join = |n: u64, rest: &str| {
            let p = if n == 0 {
                String::new()
            } else {
                self.zarr_path(n)
            };
            let p = if p.is_empty() { p } else { format!("/{p}") };
            format!("{view}{p}{rest}")
        };
        match V2::of(ino) {
            Some(V2::Root) | None => view,
            Some(V2::Dir(n)) => join(n, ""),
            Some(V2::Meta(n, m)) => join(n, &format!("/{}", m.name())),
            Some(V2::Chunk { array, index }) => {
                let data = crate::tree::events::data_dir_of(&self.nodes, array);
                let n = self.node(data).map_or(ROOT_INO, |x| x.parent);
                let key = match self.zarr2_geom(array, None) {
                    Ok(g) => chunk_key(&g.grid, index),
                    Err(_) => index.to_string(),
                };
                join(n, &format!("/{key}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_stay_apart_from_the_v3_view() {
        let nodes = [
            V2::Root,
            V2::Dir(1),
            V2::Dir((1 << KIND_SHIFT) - 1),
            V2::Meta(0, Meta::Zgroup),
            V2::Meta(7, Meta::Zmetadata),
            V2::Meta(7, Meta::Zarray),
            V2::Chunk {
                array: ArrayId((1 << ARRAY_BITS) - 1),
                index: (1 << INDEX_BITS) - 1,
            },
            V2::Chunk {
                array: ArrayId(0),
                index: 0,
            },
        ];
        let mut seen = std::collections::HashSet::new();
        for v in nodes {
            let ino = v.ino().unwrap();
            assert!(super::super::is_zarr(ino));
            assert_eq!(ZNode::of(ino), None, "{v:?} is no v3 node");
            assert_eq!(V2::of(ino), Some(v));
            assert!(seen.insert(ino));
        }
        for z in [
            ZNode::Root,
            ZNode::RootJson,
            ZNode::Dir(3),
            ZNode::Pending(2),
        ] {
            assert_eq!(V2::of(z.ino().unwrap()), None);
        }
        assert_eq!(V2::Dir(1 << KIND_SHIFT).ino(), None);
        let too_big = V2::Chunk {
            array: ArrayId(1 << ARRAY_BITS),
            index: 0,
        };
        assert_eq!(too_big.ino(), None);
        assert_eq!(
            V2::of(ZARR_BASE | (TAG_NODE << TAG_SHIFT) | 9 << KIND_SHIFT),
            None
        );
        assert_eq!(V2::of(5), None);
    }

    #[test]
    fn chunk_keys_are_dotted_c_order_coordinates() {
        let grid = [3, 4];
        assert_eq!(chunk_key(&grid, 0), "0.0");
        assert_eq!(chunk_key(&grid, 5), "1.1");
        assert_eq!(chunk_key(&grid, 11), "2.3");
        assert_eq!(chunk_key(&[], 0), "0");
        for k in 0..12 {
            assert_eq!(parse_chunk_key(&grid, &chunk_key(&grid, k)), Some(k));
        }
        for bad in ["3.0", "0.4", "0", "0.0.0", "00.1", "1.", ".1", "a.b", "1/1"] {
            assert_eq!(parse_chunk_key(&grid, bad), None, "{bad}");
        }
        assert_eq!(parse_chunk_key(&[], "0"), Some(0));
        assert_eq!(parse_chunk_key(&[], "1"), None);
        assert_eq!(parse_chunk_key(&[5], "4"), Some(4));
    }
}
