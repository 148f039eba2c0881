//! What a check found ([`Report`]): damaged chunks, missing bcolz chunk files, structures that
//! cannot be read, leaves skipped, and the JSON form `verify --json` prints.

use std::ops::Range;

use serde_json::{Value, json};

/// A damaged chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    /// The array's label (`Target::label`).
    pub array: Option<String>,
    /// The chunk index.
    pub chunk: usize,
    /// Why it cannot be read back.
    pub reason: String,
    /// Whether its chunk file is missing (a bcolz `.blp`; also in [`Report::missing`]).
    pub missing: bool,
}

/// A structure that cannot be read (a leaf that does not open, a whole source).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The leaf key or array label; `None` for the source itself.
    pub array: Option<String>,
    /// Why.
    pub reason: String,
}

/// A collection leaf opened leniently (its index, trailer or vlmetalayers damaged; each is
/// also in [`Report::structure`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LenientLeaf {
    /// The leaf's key (its `Target::label`).
    pub key: String,
    /// The parts the open did without.
    pub damaged: Vec<crate::container::frame::Damaged>,
}

/// The chunk files a bcolz array lacks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The array's label (`Target::label`).
    pub array: Option<String>,
    /// Chunks its metadata declares.
    pub declared: u64,
    /// Chunks without a file (each is also a damaged chunk).
    pub count: u64,
    /// The missing chunks as runs of indices, the first [`MISSING_RUNS`](super::MISSING_RUNS) of them.
    pub runs: Vec<Range<usize>>,
}

/// What a check found.
#[derive(Debug, Default)]
pub struct Report {
    /// Arrays checked.
    pub arrays: usize,
    /// Chunks checked (read and decoded, or special): a bcolz chunk whose file is missing is
    /// not checked, it is counted in [`Report::missing`] ([`Report::missing_chunks`]).
    pub chunks: u64,
    /// Chunks stored as special index entries (no bytes to decode).
    pub special: u64,
    /// Uncompressed bytes of the chunks decoded.
    pub decoded_bytes: u64,
    /// Damaged chunks, in array order then chunk order (at most [`MAX_LISTED`](super::MAX_LISTED)).
    pub damaged: Vec<Damage>,
    /// Damaged chunks in all, listed or not.
    pub damaged_count: u64,
    /// bcolz arrays with missing chunk files, in array order.
    pub missing: Vec<Missing>,
    /// Structures that cannot be read.
    pub structure: Vec<Problem>,
    /// Leaves not checked, and why (references to remote arrays).
    pub skipped: Vec<Problem>,
    /// Collection leaves opened leniently (their damaged parts are in `structure` too).
    pub lenient: Vec<LenientLeaf>,
    /// Whether the check stopped early, its damaged chunks over the caller's limit
    /// (`damaged_count` is then a lower bound).
    pub gave_up: bool,
}

impl Report {
    /// Whether nothing is damaged.
    pub fn sound(&self) -> bool {
        self.damaged_count == 0 && self.structure.is_empty()
    }

    /// Chunks declared but not checked because their bcolz chunk file is missing (each is
    /// also a damaged chunk).
    pub fn missing_chunks(&self) -> u64 {
        self.missing.iter().map(|m| m.count).sum()
    }

    /// The JSON form `verify --json` prints (without `source` and `kind`).
    pub fn to_json(&self) -> serde_json::Map<String, Value> {
        let mut m = serde_json::Map::new();
        m.insert("sound".into(), json!(self.sound()));
        m.insert("arrays".into(), json!(self.arrays));
        m.insert("chunks".into(), json!(self.chunks));
        m.insert("missing_chunks".into(), json!(self.missing_chunks()));
        m.insert("special_chunks".into(), json!(self.special));
        m.insert("decoded_bytes".into(), json!(self.decoded_bytes));
        m.insert("damaged_chunks".into(), json!(self.damaged_count));
        m.insert(
            "damaged_listed".into(),
            json!(self.damaged.len() as u64 == self.damaged_count),
        );
        m.insert(
            "damaged".into(),
            Value::Array(self.damaged.iter().map(damage_json).collect()),
        );
        let problems = |v: &[Problem]| {
            Value::Array(
                v.iter()
                    .map(|p| json!({"array": p.array, "reason": p.reason}))
                    .collect(),
            )
        };
        m.insert(
            "missing".into(),
            Value::Array(
                self.missing
                    .iter()
                    .map(|x| {
                        json!({
                            "array": x.array,
                            "declared_chunks": x.declared,
                            "missing_chunks": x.count,
                            "runs": x.runs.iter().map(|r| [r.start, r.end - 1]).collect::<Vec<_>>(),
                        })
                    })
                    .collect(),
            ),
        );
        m.insert("structure".into(), problems(&self.structure));
        m.insert("skipped".into(), problems(&self.skipped));
        m
    }
}

/// `{"array": ..., "chunk": N, "reason": ...}`.
pub fn damage_json(d: &Damage) -> Value {
    json!({"array": d.array, "chunk": d.chunk, "reason": d.reason})
}
