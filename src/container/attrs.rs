//! The reversible mapping between msgpack (frame metalayers and vlmetalayers, as python-blosc2
//! writes them) and JSON (what b2fs shows in `__attrs__` and metalayer files).
//!
//! This module is pure: bytes in, JSON out and back. It knows nothing of frames or files.
//!
//! See `docs/format/CONTAINERS.md` section 4.1 (python-blosc2 conventions: `use_bin_type`, tuples as
//! arrays starting with `"__tuple__"`, ext types 42-46).
//!
//! # The mapping
//!
//! Plain values map one to one:
//!
//! | msgpack | JSON |
//! | --- | --- |
//! | nil, true/false | `null`, `true`/`false` |
//! | int (any width; always within i64/u64) | integer number |
//! | float64, finite | number with a fraction or exponent (`1.0`, never `1`) |
//! | str (valid UTF-8) | string |
//! | array | array |
//! | map whose keys are all distinct strings | object, keys in stored order |
//!
//! What JSON lacks becomes an object with exactly **one** reserved key (a "tag"):
//!
//! | msgpack | JSON |
//! | --- | --- |
//! | bin | `{"__bytes__": "<base64>"}` |
//! | str that is not UTF-8 | `{"__str__": "<base64>"}` |
//! | array whose first item is the str `"__tuple__"` (a python tuple) | `{"__tuple__": [items after the marker]}` |
//! | float64 NaN / +inf / -inf | `{"__float__": "nan"}` / `"inf"` / `"-inf"` (on input `"NaN"`, `"Infinity"`, `"-Infinity"` are accepted too) |
//! | float32 | `{"__float32__": number or "nan"/"inf"/"-inf"}` |
//! | map with a non-string or repeated key, or a one-entry map whose key is a tag | `{"__map__": [[key, value], ...]}` |
//! | ext 44 with 16 bytes (complex: two BE float64) | `{"__complex__": [re, im]}` (each a number or a `__float__` tag) |
//! | ext 45 holding one msgpack array (python `set`) | `{"__set__": [...]}` |
//! | ext 46 holding one msgpack map (numpy array: `dtype`, `shape`, `data`) | `{"__ndarray__": {...}}` (the map, mapped recursively; `data` becomes a `__bytes__` tag) |
//! | any other ext (42 embedded cframe, 43 reference, timestamps, ...) | `{"__ext__": [type, "<base64>"]}` |
//! | a top-level content that is not exactly one msgpack value | `{"__raw__": "<base64>"}` |
//!
//! The names follow the JSON encoding of the fixture sidecars (`tests/data/README.md`), except
//! that a generic ext is one key with a `[type, base64]` pair.
//!
//! Tags are: `__bytes__`, `__str__`, `__tuple__`, `__float__`, `__float32__`, `__map__`,
//! `__complex__`, `__set__`, `__ndarray__`, `__ext__`, `__raw__`. A JSON object is read as a
//! tag only when it has exactly one key and that key is a tag; a real msgpack map of that
//! shape is written as `__map__`, so decoding is unambiguous. base64 is the standard alphabet
//! with `=` padding.
//!
//! python-blosc2 4.14 unpacks with msgpack's `strict_map_key`: it rejects maps whose keys are
//! not str or bytes, so a `__map__` with integer keys is readable by b2fs but not by python.
//!
//! Ext 45/46 payloads become `__set__`/`__ndarray__` only when re-encoding them gives the same
//! bytes; otherwise they stay `__ext__`.
//!
//! # Reversibility
//!
//! [`json_to_msgpack`] writes what python-blosc2 writes (`msgpack.packb(...,
//! use_bin_type=True)`): smallest int widths (positive ints unsigned, negative signed), float64
//! as `cb`, str8/bin8 where they fit, fix/16/32-bit containers, fixext where the payload has 1,
//! 2, 4, 8 or 16 bytes. Hence `json_to_msgpack(msgpack_to_json(b)) == b` byte for byte for every
//! content written with smallest encodings (all python-blosc2 output); for other encodings the
//! value is the same and only the widths change. JSON numbers that are neither i64/u64 nor f64
//! cannot occur (serde_json parses larger integers as f64).

mod decode;
mod encode;
#[cfg(test)]
mod tests;

use base64::Engine as _;
use serde_json::{Map, Number, Value};
use thiserror::Error;

use decode::Decoder;
use encode::encode;

/// The reserved one-key object names of the mapping.
pub const TAGS: [&str; 11] = [
    "__bytes__",
    "__str__",
    "__tuple__",
    FLOAT_TAG,
    "__float32__",
    "__map__",
    "__complex__",
    "__set__",
    "__ndarray__",
    "__ext__",
    "__raw__",
];

/// Deepest nesting of arrays/maps/ext payloads accepted (deeper input is rejected, so hostile
/// input cannot exhaust the stack).
pub const MAX_DEPTH: usize = 256;

/// Why msgpack could not be mapped to JSON or back.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AttrsError {
    /// The msgpack bytes are not one well-formed value.
    #[error("msgpack at byte {offset}: {why}")]
    Msgpack {
        /// Byte offset inside the content.
        offset: usize,
        /// The reason.
        why: String,
    },
    /// A JSON value cannot be written as msgpack (a malformed tag).
    #[error("json value at {pointer}: {why}")]
    Json {
        /// JSON pointer of the value.
        pointer: String,
        /// The reason.
        why: String,
    },
}

/// Maps one complete msgpack value to JSON (strict: trailing bytes, truncation, reserved
/// markers and nesting deeper than [`MAX_DEPTH`] are errors).
///
/// # Errors
///
/// [`AttrsError::Msgpack`] with the byte offset and reason.
pub fn msgpack_to_json(bytes: &[u8]) -> Result<Value, AttrsError> {
    let mut d = Decoder { buf: bytes, pos: 0 };
    let v = d.value(0)?;
    if d.pos != bytes.len() {
        return Err(d.err(format!(
            "{} trailing bytes after the value",
            bytes.len() - d.pos
        )));
    }
    Ok(v)
}

/// Maps a stored content (metalayer or vlmetalayer) to JSON: one msgpack value as
/// [`msgpack_to_json`], anything else as `{"__raw__": "<base64>"}`. Never fails.
pub fn content_to_json(bytes: &[u8]) -> Value {
    msgpack_to_json(bytes).unwrap_or_else(|_| tag("__raw__", Value::String(base64_encode(bytes))))
}

/// Maps JSON back to msgpack, the inverse of [`msgpack_to_json`] / [`content_to_json`] (a
/// top-level `__raw__` tag yields its bytes unchanged).
///
/// # Errors
///
/// [`AttrsError::Json`] for a malformed tag (bad base64, wrong arity, a nested `__raw__`) and
/// for a JSON list whose first item is the string `"__tuple__"` (python-blosc2 would read it as
/// a tuple; such a value has no faithful msgpack form under its conventions).
pub fn json_to_msgpack(value: &Value) -> Result<Vec<u8>, AttrsError> {
    if let Some(Value::String(b64)) = single_tag(value)
        .filter(|(k, _)| *k == "__raw__")
        .map(|t| t.1)
    {
        return base64_decode(b64).ok_or_else(|| AttrsError::Json {
            pointer: String::new(),
            why: "__raw__: invalid base64".into(),
        });
    }
    let mut out = Vec::new();
    encode(value, &mut out, &mut String::new(), 0)?;
    Ok(out)
}

fn tag(name: &str, v: Value) -> Value {
    let mut m = Map::with_capacity(1);
    m.insert(name.to_string(), v);
    Value::Object(m)
}

/// `Some((tag, value))` when `v` is an object with exactly one key and that key is a tag.
fn single_tag(v: &Value) -> Option<(&str, &Value)> {
    match v {
        Value::Object(m) if m.len() == 1 => {
            let (k, v) = m.iter().next()?;
            TAGS.contains(&k.as_str()).then_some((k.as_str(), v))
        }
        _ => None,
    }
}

/// The tag of a float NaN or infinity: `{"__float__": "nan"}`.
pub const FLOAT_TAG: &str = "__float__";

/// A float NaN or infinity, which JSON lacks. The one owner of their spellings: the tag
/// `{"__float__": "nan"}` (`"inf"`, `"-inf"`: [`NonFiniteFloat::name`]) the mapping writes,
/// and the tokens `NaN`, `Infinity`, `-Infinity` ([`NonFiniteFloat::token`]) Python's
/// `json.dumps` writes (zarr-python's metadata; the Zarr view's documents), accepted in a
/// tag too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonFiniteFloat {
    /// NaN.
    Nan,
    /// Positive infinity.
    Infinity,
    /// Negative infinity.
    NegInfinity,
}

impl NonFiniteFloat {
    /// Every one, in this order.
    pub const ALL: [NonFiniteFloat; 3] = [Self::Nan, Self::Infinity, Self::NegInfinity];

    /// The one `f` is, if it is not finite.
    pub fn of(f: f64) -> Option<Self> {
        match f {
            _ if f.is_nan() => Some(Self::Nan),
            f64::INFINITY => Some(Self::Infinity),
            f64::NEG_INFINITY => Some(Self::NegInfinity),
            _ => None,
        }
    }

    /// Its value.
    pub fn value(self) -> f64 {
        match self {
            Self::Nan => f64::NAN,
            Self::Infinity => f64::INFINITY,
            Self::NegInfinity => f64::NEG_INFINITY,
        }
    }

    /// Its name in a tag: `nan`, `inf`, `-inf`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Nan => "nan",
            Self::Infinity => "inf",
            Self::NegInfinity => "-inf",
        }
    }

    /// Its token in Python's JSON: `NaN`, `Infinity`, `-Infinity`.
    pub fn token(self) -> &'static str {
        match self {
            Self::Nan => "NaN",
            Self::Infinity => "Infinity",
            Self::NegInfinity => "-Infinity",
        }
    }

    /// The one named `s`, by its name or its token.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == s || f.token() == s)
    }

    /// Its tag, `{"__float__": "nan"}`.
    pub fn tag(self) -> Value {
        tag(FLOAT_TAG, Value::String(self.name().into()))
    }

    /// The one tag `v` (an object of the one member `__float__`, by name or token) holds.
    pub fn of_tag(v: &Value) -> Option<Self> {
        match single_tag(v) {
            Some((FLOAT_TAG, Value::String(s))) => Self::parse(s),
            _ => None,
        }
    }
}

fn float_to_json(f: f64) -> Value {
    match NonFiniteFloat::of(f) {
        Some(n) => n.tag(),
        None => Number::from_f64(f).map_or(Value::Null, Value::Number),
    }
}

fn nonfinite_from_str(s: &str) -> Option<f64> {
    NonFiniteFloat::parse(s).map(NonFiniteFloat::value)
}

/// Standard base64 with `=` padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes standard base64 (canonical: `=` padding where the length needs it, no whitespace,
/// unused bits of the last symbol zero). `None` when invalid.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    base64::engine::general_purpose::STANDARD.decode(s).ok()
}
