//! Extended attributes, read-only, in the spirit of DwarFS's `user.dwarfs.inodeinfo`: what a
//! chunk file is made of, and what the mount is, for `getfattr -d`.
//!
//! Every name is `user.b2fs.<key>` (the `user.` namespace is the one `getfattr -d` dumps and
//! any user may read); values are text, numbers in decimal. `user.b2fs.inodeinfo` holds all
//! the other keys of the inode as one JSON object, for scripts.
//!
//! ```text
//! data/NNNNNNNN.bin  index, codec, codec_id, filters, filters_ids, clevel, typesize,
//!                    blocksize, nbytes, cbytes, ratio, special, inodeinfo
//! the mount root     source, kind, inodeinfo (listed: what the data is);
//!                    version, writable, pid, cache_size, cache_bytes, cache_hits,
//!                    cache_loads, cache_hit_rate, walk_lead_pages, walk_lead_reached,
//!                    on a read-write mount edit_budget, edit_bytes,
//!                    edit_peak_bytes, edit_spilled_chunks, edit_spilled_bytes,
//!                    edit_spills, commit_memory, commit_peak_bytes,
//!                    commit_spilled_chunks, commit_spilled_bytes, on a passthrough mount backing_fills,
//!                    backing_files and backing_bytes, stats (JSON of all of these) and log
//!                    (the recent refusals and errors, see [`super::events`]): read by
//!                    name only, never listed
//! zarr/              zarr_omitted (the arrays the Zarr view leaves out, and why)
//! ```
//!
//! Issue 21: what describes the mounting process rather than the data (its pid, version,
//! mode and live cache counters) is not listed, so `cp -a`, `rsync -aX` and `getfattr -d`,
//! which copy or dump every listed `user.` attribute, do not copy a mount's counters onto
//! the copy as if they were the data's; `getfattr -n user.b2fs.cache_hits` still reads them.
//!
//! Chunk keys describe the chunk as stored (a buffered edit not yet committed is not
//! reflected); `clevel` comes from the source's own record (frame header, bcolz storage),
//! since chunk headers do not store it, and is absent when the source has none. Other files
//! and directories have no attributes.
//!
//! Setting or removing attributes is refused ([`refusal`]): POSIX ACLs
//! (`system.posix_acl_*`) and anything on a scratch file with EOPNOTSUPP, as a filesystem
//! without them answers, so that `sed -i` and editors, which copy the original's ACL to
//! their temp file, fall back to `chmod` silently; everything else as any other change
//! (`Tree::modify`: EROFS or EPERM).

use std::path::Path;

use serde_json::{Map, Value};

use super::backing::BackingStats;
use super::edit::EditStats;
use super::events::EventLog;
use super::names::{codec_name, filter_name};
use super::npy::Leads;
use super::{Entry, ROOT_INO, TreeError};
use crate::codec::{self, SpecialKind};
use crate::commit::CommitStats;
use crate::container::{Array, SourceKind};
use crate::reader::ArrayId;
use crate::reader::{CacheStats, ChunkStore};

/// The prefix of every attribute name.
pub const PREFIX: &str = "user.b2fs.";
/// The root attribute that holds the event log (not listed).
pub const LOG: &str = "user.b2fs.log";
/// The attribute of the Zarr view's directory that lists the arrays left out of it, as a
/// JSON object `{zarr path: why}`.
pub const ZARR_OMITTED: &str = "user.b2fs.zarr_omitted";

/// Why `setxattr`/`removexattr` of `name` fails with EOPNOTSUPP (`scratch`: on a scratch
/// file), or `None` when it is refused as any other change.
pub fn refusal(name: &str, scratch: bool) -> Option<String> {
    if name.starts_with("system.posix_acl_") {
        Some(format!("{name}: b2fs has no POSIX ACLs"))
    } else if scratch {
        Some(format!("{name}: scratch files hold no extended attributes"))
    } else {
        None
    }
}

/// What a source says about itself beyond its chunks (for the attributes).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceInfo {
    /// `cframe`, `sframe`, `bcolz carray`, `bcolz ctable`, with `+b2nd`/`+caterva` for N-dim
    /// frames.
    pub kind: Option<String>,
    /// The compression level the source records (frame header, bcolz storage).
    pub clevel: Option<u8>,
}

impl SourceInfo {
    /// What `array` records.
    pub fn of(array: &Array) -> SourceInfo {
        let mut kind = match array.kind() {
            SourceKind::Cframe => "cframe",
            SourceKind::Sframe => "sframe",
            SourceKind::BcolzCarray => "bcolz carray",
            SourceKind::BcolzCtable => "bcolz ctable",
        }
        .to_owned();
        if let Some(ml) = array
            .metalayers()
            .iter()
            .find(|m| m.name == "b2nd" || m.name == "caterva")
        {
            kind.push('+');
            kind.push_str(&ml.name);
        }
        let clevel = match array.frame_info() {
            Some(f) => Some(f.codec_flags >> 4),
            None => array
                .bcolz_storage()
                .and_then(|s| s.pointer("/cparams/clevel"))
                .and_then(Value::as_u64)
                .and_then(|c| u8::try_from(c).ok()),
        };
        SourceInfo {
            kind: Some(kind),
            clevel,
        }
    }
}

/// The chunk cache as the root's attributes show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheView {
    /// The budget in bytes (`cache_size=`).
    pub budget: usize,
    /// Bytes held now.
    pub bytes: usize,
    /// The counters.
    pub stats: CacheStats,
}

/// What the attributes of one inode are computed from.
#[derive(Debug)]
pub enum Target<'a> {
    /// The mount root.
    Root {
        /// The source path (a ctable's directory, not a column's).
        source: Option<&'a Path>,
        /// What the first data set's source says about itself.
        info: SourceInfo,
        /// Whether edits are accepted.
        writable: bool,
        /// The chunk cache.
        cache: CacheView,
        /// The passthrough backing files, on a tree that backs files (`-o passthrough`).
        backing: Option<BackingStats>,
        /// The pages stored ahead of walks down a column of `array.npy`.
        leads: Leads,
        /// The pending chunk edits and what commits held, on a read-write tree.
        edits: Option<Box<(EditStats, CommitStats)>>,
        /// The recent refusals and errors.
        log: &'a EventLog,
    },
    /// Chunk `index` of `store`.
    Chunk {
        /// The array's store.
        store: &'a dyn ChunkStore,
        /// The chunk index.
        index: usize,
        /// The compression level the array's source records.
        clevel: Option<u8>,
    },
    /// Anything else: no attributes.
    Other,
}

impl<'a> Target<'a> {
    /// The root of a tree whose source is at `source` and says `info` about itself.
    pub fn root(
        source: Option<&'a Path>,
        info: SourceInfo,
        cache: CacheView,
        writable: bool,
        log: &'a EventLog,
    ) -> Target<'a> {
        Target::Root {
            source,
            info,
            writable,
            cache,
            backing: None,
            leads: Leads::default(),
            edits: None,
            log,
        }
    }

    /// This root, with the count of the pages stored ahead of walks down a column
    /// (`walk_lead_pages`, `walk_lead_reached`; see [`Leads`]).
    pub fn with_leads(mut self, counted: Leads) -> Target<'a> {
        if let Target::Root { leads, .. } = &mut self {
            *leads = counted;
        }
        self
    }

    /// This root, with what its pending chunk edits hold (`edit_budget`, `edit_bytes`,
    /// `edit_peak_bytes`, `edit_spilled_chunks`, `edit_spilled_bytes`, `edit_spills`; see
    /// [`EditStats`]) and what its commits held (`commit_memory`, `commit_peak_bytes`,
    /// `commit_spilled_chunks`, `commit_spilled_bytes`; see [`CommitStats`]).
    pub fn with_edits(mut self, stats: EditStats, commits: CommitStats) -> Target<'a> {
        if let Target::Root { edits, .. } = &mut self {
            *edits = Some(Box::new((stats, commits)));
        }
        self
    }

    /// This root, with the counters of its passthrough backing files (`backing_fills`,
    /// `backing_files`, `backing_bytes`; see [`BackingStats`]).
    pub fn with_backing(mut self, stats: BackingStats) -> Target<'a> {
        if let Target::Root { backing, .. } = &mut self {
            *backing = Some(stats);
        }
        self
    }
}

/// The root's keys that describe the mounting process, not the data: read by name, never
/// listed (see the module doc).
pub const LIVE: [&str; 23] = [
    "version",
    "writable",
    "pid",
    "cache_size",
    "cache_bytes",
    "cache_hits",
    "cache_loads",
    "cache_hit_rate",
    "backing_fills",
    "backing_files",
    "backing_bytes",
    "walk_lead_pages",
    "walk_lead_reached",
    "edit_budget",
    "edit_bytes",
    "edit_peak_bytes",
    "edit_spilled_chunks",
    "edit_spilled_bytes",
    "edit_spills",
    "commit_memory",
    "commit_peak_bytes",
    "commit_spilled_chunks",
    "commit_spilled_bytes",
];

/// The unlisted root attribute holding every root key (listed and [`LIVE`]) as one JSON
/// object.
pub const STATS: &str = "user.b2fs.stats";

/// The `name\0name\0...` list `listxattr` returns.
pub fn list(target: &Target) -> Vec<u8> {
    let mut out = Vec::new();
    let root = matches!(target, Target::Root { .. });
    let listed = pairs(target);
    let listed = listed.iter().filter(|(k, _)| !(root && LIVE.contains(k)));
    for (key, _) in listed {
        out.extend_from_slice(PREFIX.as_bytes());
        out.extend_from_slice(key.as_bytes());
        out.push(0);
    }
    out
}

/// The value of attribute `name`, or `None` (ENODATA) when the inode has no such attribute.
pub fn get(target: &Target, name: &str) -> Option<Vec<u8>> {
    if let (Target::Root { log, .. }, LOG) = (target, name) {
        return Some(log.render().into_bytes());
    }
    let key = name.strip_prefix(PREFIX)?;
    let all = pairs(target);
    if let (Target::Root { .. }, STATS) = (target, name) {
        return Some(json_of(all.iter().filter(|(k, _)| *k != "inodeinfo")).into_bytes());
    }
    all.into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.into_bytes())
}

/// `pairs` as one JSON object, numbers as numbers.
fn json_of<'p>(pairs: impl Iterator<Item = &'p (&'static str, String)>) -> String {
    let info: Map<String, Value> = pairs
        .map(|(k, s)| {
            let val = s
                .parse::<u64>()
                .map(Value::from)
                .unwrap_or_else(|_| Value::from(s.as_str()));
            ((*k).to_owned(), val)
        })
        .collect();
    Value::Object(info).to_string()
}

/// The listed attributes of `target`: (key without prefix, value), `inodeinfo` last.
fn pairs(target: &Target) -> Vec<(&'static str, String)> {
    let mut v = match target {
        Target::Root {
            source,
            info,
            writable,
            cache,
            backing,
            leads,
            edits,
            ..
        } => {
            let stats = cache.stats;
            let lookups = stats.hits + stats.loads;
            let rate = if lookups == 0 {
                "n/a".to_owned()
            } else {
                format!("{:.3}", stats.hits as f64 / lookups as f64)
            };
            let source = source.map_or(String::new(), |p| p.display().to_string());
            let mut v = vec![("source", source)];
            if let Some(k) = &info.kind {
                v.push(("kind", k.clone()));
            }
            v.extend([
                ("version", env!("CARGO_PKG_VERSION").to_owned()),
                ("writable", if *writable { "yes" } else { "no" }.to_owned()),
                ("pid", std::process::id().to_string()),
                ("cache_size", cache.budget.to_string()),
                ("cache_bytes", cache.bytes.to_string()),
                ("cache_hits", stats.hits.to_string()),
                ("cache_loads", stats.loads.to_string()),
                ("cache_hit_rate", rate),
                ("walk_lead_pages", leads.pages.to_string()),
                ("walk_lead_reached", leads.reached.to_string()),
            ]);
            if let Some(b) = backing {
                v.extend([
                    ("backing_fills", b.fills.to_string()),
                    ("backing_files", b.files.to_string()),
                    ("backing_bytes", b.bytes.to_string()),
                ]);
            }
            if let Some(b) = edits {
                let (e, c) = &**b;
                v.extend([
                    ("edit_budget", e.budget.to_string()),
                    ("edit_bytes", e.memory.to_string()),
                    ("edit_peak_bytes", e.peak_memory.to_string()),
                    ("edit_spilled_chunks", e.spilled_chunks.to_string()),
                    ("edit_spilled_bytes", e.spilled_bytes.to_string()),
                    ("edit_spills", e.spills.to_string()),
                    ("commit_memory", c.memory.to_string()),
                    ("commit_peak_bytes", c.peak_bytes.to_string()),
                    ("commit_spilled_chunks", c.spilled_chunks.to_string()),
                    ("commit_spilled_bytes", c.spilled_bytes.to_string()),
                ]);
            }
            v
        }
        Target::Chunk {
            store,
            index,
            clevel,
        } => chunk_pairs(*store, *index, *clevel),
        Target::Other => Vec::new(),
    };
    if !v.is_empty() {
        // The root's inodeinfo holds what is listed; `stats` holds everything.
        let root = matches!(target, Target::Root { .. });
        let info = json_of(v.iter().filter(|(k, _)| !(root && LIVE.contains(k))));
        v.push(("inodeinfo", info));
    }
    v
}

/// The keys of chunk `index`, from its header (only the header bytes are read where the
/// store allows); none when the header cannot be read (reads of the file say why).
fn chunk_pairs(
    store: &dyn ChunkStore,
    index: usize,
    clevel: Option<u8>,
) -> Vec<(&'static str, String)> {
    let mut head = [0u8; codec::MAX_OVERHEAD];
    let header = match store.chunk_read_at(index, 0, &mut head, None) {
        Ok(true) => codec::chunk_info(&head).ok(),
        _ => None,
    };
    let header = header.or_else(|| {
        let bytes = store.chunk_bytes(index).ok()?;
        codec::chunk_info(&bytes).ok()
    });
    let Some(h) = header else {
        return Vec::new();
    };
    let active: Vec<u8> = h.filters.iter().copied().filter(|&f| f != 0).collect();
    let filters = if active.is_empty() {
        "NOFILTER".to_owned()
    } else {
        active
            .iter()
            .map(|&f| filter_name(f))
            .collect::<Vec<_>>()
            .join(",")
    };
    let special = match h.special() {
        SpecialKind::None => "no",
        SpecialKind::Zeros => "zeros",
        SpecialKind::Nan => "nan",
        SpecialKind::Value => "value",
        SpecialKind::Uninit => "uninit",
    };
    let mut v = vec![
        ("index", index.to_string()),
        ("codec", codec_name(h.compcode)),
        ("codec_id", h.compcode.to_string()),
        ("filters", filters),
        (
            "filters_ids",
            h.filters
                .iter()
                .map(u8::to_string)
                .collect::<Vec<_>>()
                .join(","),
        ),
    ];
    if let Some(c) = clevel {
        v.push(("clevel", c.to_string()));
    }
    let ratio = if h.cbytes == 0 {
        0.0
    } else {
        h.nbytes as f64 / h.cbytes as f64
    };
    v.extend([
        ("typesize", h.typesize.to_string()),
        ("blocksize", h.blocksize.to_string()),
        ("nbytes", h.nbytes.to_string()),
        ("cbytes", h.cbytes.to_string()),
        ("ratio", format!("{ratio:.2}")),
        ("special", special.to_owned()),
    ]);
    v
}

impl super::Tree {
    /// The extended attribute `name` of `ino` (this module); `Ok(None)`: no such attribute.
    ///
    /// # Errors
    /// [`TreeError::NotFound`] for unknown inodes.
    pub fn getxattr(&self, ino: u64, name: &str) -> Result<Option<Vec<u8>>, TreeError> {
        let view = ino == self.zarr_root_ino() || ino == self.zarr2_root_ino();
        if view && name == ZARR_OMITTED {
            return Ok(Some(self.zarr_omitted()));
        }
        Ok(get(&self.xattr_target(ino)?, name))
    }

    /// The `\0`-terminated names of `ino`'s extended attributes (this module).
    ///
    /// # Errors
    /// [`TreeError::NotFound`] for unknown inodes.
    pub fn listxattr(&self, ino: u64) -> Result<Vec<u8>, TreeError> {
        if ino == self.zarr_root_ino() || ino == self.zarr2_root_ino() {
            return Ok(format!("{ZARR_OMITTED}\0").into_bytes());
        }
        Ok(list(&self.xattr_target(ino)?))
    }

    /// `setxattr`/`removexattr` of `name` on `ino`: always refused ([`refusal`]).
    ///
    /// # Errors
    /// Always: [`TreeError::Unsupported`] (EOPNOTSUPP) for ACLs and scratch files, else as
    /// [`super::Tree::refusal`].
    pub fn set_xattr(&self, ino: u64, name: &str) -> Result<(), TreeError> {
        let scratch = matches!(self.entry(ino)?, Entry::Scratch);
        match refusal(name, scratch) {
            Some(why) if self.options.writable => Err(TreeError::Unsupported(why)),
            _ => Err(self.refusal(ino, "setxattr/removexattr")),
        }
    }

    fn xattr_target(&self, ino: u64) -> Result<Target<'_>, TreeError> {
        Ok(match self.entry(ino)? {
            Entry::Chunk(id) if id.index < self.reader.nchunks(id.array) => {
                let store = self.reader.store(id.array);
                let clevel = self.source_info(id.array).clevel;
                Target::Chunk {
                    store,
                    index: id.index,
                    clevel,
                }
            }
            Entry::Dir(..) if ino == ROOT_INO => self.xattr_root(),
            _ => Target::Other,
        })
    }

    fn xattr_root(&self) -> Target<'_> {
        let (budget, bytes, stats) = (
            self.options.reader.cache_size,
            self.cache_bytes(),
            self.cache_stats(),
        );
        let cache = CacheView {
            budget,
            bytes,
            stats,
        };
        // A collection's root describes the collection, not whichever leaf was opened first.
        let (source, info) = match self.mounted.collection_path() {
            Some(p) => (Some(p), SourceInfo::default()),
            None => {
                let first =
                    (self.reader.arrays() > 0).then(|| self.reader.store(ArrayId(0)).path());
                (self.mounted.table().or(first), self.source_info(ArrayId(0)))
            }
        };
        let mut root = Target::root(source, info, cache, self.options.writable, &self.events)
            .with_leads(self.walk_leads());
        if self.options.writable {
            root = root.with_edits(self.edit_stats(), self.commit_stats());
        }
        match self.backs_files() {
            true => root.with_backing(self.backing_stats()),
            false => root,
        }
    }

    /// What array `array`'s source records about itself (none for synthetic stores).
    fn source_info(&self, array: ArrayId) -> SourceInfo {
        let live = self.live(array);
        live.map(|l| SourceInfo::of(&l.get())).unwrap_or_default()
    }
}
