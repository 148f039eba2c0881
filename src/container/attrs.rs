//! The reversible mapping between msgpack (frame metalayers and vlmetalayers, as python-blosc2
//! writes them) and JSON (what b2fs shows in `__attrs__` and metalayer files).
//!
//! This module is pure: bytes in, JSON out and back. It knows nothing of frames or files.
//!
//! See `CONTAINER_NOTES.md` section 4.1 (python-blosc2 conventions: `use_bin_type`, tuples as
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

use serde_json::{Map, Number, Value};
use thiserror::Error;

/// The reserved one-key object names of the mapping.
pub const TAGS: [&str; 11] = [
    "__bytes__",
    "__str__",
    "__tuple__",
    "__float__",
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

fn float_to_json(f: f64) -> Value {
    if f.is_nan() {
        tag("__float__", Value::String("nan".into()))
    } else if f.is_infinite() {
        let s = if f > 0.0 { "inf" } else { "-inf" };
        tag("__float__", Value::String(s.into()))
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

fn nonfinite_from_str(s: &str) -> Option<f64> {
    match s {
        "nan" | "NaN" => Some(f64::NAN),
        "inf" | "Infinity" => Some(f64::INFINITY),
        "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
        _ => None,
    }
}

struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Decoder<'_> {
    fn err(&self, why: impl Into<String>) -> AttrsError {
        AttrsError::Msgpack {
            offset: self.pos,
            why: why.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], AttrsError> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(self.err(format!("length {n} exceeds the {left} bytes left")));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], AttrsError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn len_of(&mut self, width: usize) -> Result<usize, AttrsError> {
        Ok(match width {
            1 => usize::from(self.be::<1>()?[0]),
            2 => usize::from(u16::from_be_bytes(self.be()?)),
            _ => u32::from_be_bytes(self.be()?) as usize,
        })
    }

    fn value(&mut self, depth: usize) -> Result<Value, AttrsError> {
        if depth > MAX_DEPTH {
            return Err(self.err(format!("nesting deeper than {MAX_DEPTH}")));
        }
        let m = self.be::<1>()?[0];
        Ok(match m {
            0x00..=0x7f => Value::from(m),
            0x80..=0x8f => self.map(usize::from(m & 0x0f), depth)?,
            0x90..=0x9f => self.array(usize::from(m & 0x0f), depth)?,
            0xa0..=0xbf => self.str(usize::from(m & 0x1f))?,
            0xc0 => Value::Null,
            0xc1 => return Err(self.err("reserved marker 0xc1")),
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.len_of(1 << (m - 0xc4))?;
                let b = self.take(n)?;
                tag("__bytes__", Value::String(base64_encode(b)))
            }
            0xc7..=0xc9 => {
                let n = self.len_of(1 << (m - 0xc7))?;
                self.ext(n, depth)?
            }
            0xca => {
                let f = f32::from_be_bytes(self.be()?);
                let inner = match float_to_json(f64::from(f)) {
                    Value::Object(mut o) => o.remove("__float__").unwrap_or(Value::Null),
                    other => other,
                };
                tag("__float32__", inner)
            }
            0xcb => float_to_json(f64::from_be_bytes(self.be()?)),
            0xcc => Value::from(self.be::<1>()?[0]),
            0xcd => Value::from(u16::from_be_bytes(self.be()?)),
            0xce => Value::from(u32::from_be_bytes(self.be()?)),
            0xcf => Value::from(u64::from_be_bytes(self.be()?)),
            0xd0 => Value::from(i8::from_be_bytes(self.be()?)),
            0xd1 => Value::from(i16::from_be_bytes(self.be()?)),
            0xd2 => Value::from(i32::from_be_bytes(self.be()?)),
            0xd3 => Value::from(i64::from_be_bytes(self.be()?)),
            0xd4..=0xd8 => self.ext(1 << (m - 0xd4), depth)?,
            0xd9..=0xdb => {
                let n = self.len_of(1 << (m - 0xd9))?;
                self.str(n)?
            }
            0xdc | 0xdd => {
                let n = self.len_of(if m == 0xdc { 2 } else { 4 })?;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.len_of(if m == 0xde { 2 } else { 4 })?;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::from(i8::from_be_bytes([m])),
        })
    }

    fn str(&mut self, n: usize) -> Result<Value, AttrsError> {
        let b = self.take(n)?;
        Ok(match std::str::from_utf8(b) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => tag("__str__", Value::String(base64_encode(b))),
        })
    }

    fn check_count(&self, n: usize, what: &str) -> Result<(), AttrsError> {
        // Every element takes at least one byte: a count larger than the bytes left is a lie
        // (and would otherwise drive a huge allocation).
        let left = self.buf.len() - self.pos;
        if n > left {
            Err(self.err(format!("{what} of {n} items but only {left} bytes left")))
        } else {
            Ok(())
        }
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, AttrsError> {
        self.check_count(n, "array")?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        if items.first().and_then(Value::as_str) == Some("__tuple__") {
            items.remove(0);
            return Ok(tag("__tuple__", Value::Array(items)));
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, AttrsError> {
        self.check_count(n.saturating_mul(2), "map")?;
        let mut pairs = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            pairs.push((k, v));
        }
        let all_str = pairs.iter().all(|(k, _)| k.is_string());
        let mut obj = Map::with_capacity(n);
        if all_str {
            for (k, v) in &pairs {
                if let Value::String(k) = k {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
        let ambiguous = obj.len() == 1 && single_tag(&Value::Object(obj.clone())).is_some();
        if all_str && obj.len() == n && !ambiguous {
            return Ok(Value::Object(obj));
        }
        let list = pairs
            .into_iter()
            .map(|(k, v)| Value::Array(vec![k, v]))
            .collect();
        Ok(tag("__map__", Value::Array(list)))
    }

    fn ext(&mut self, n: usize, depth: usize) -> Result<Value, AttrsError> {
        let ty = i8::from_be_bytes(self.be()?);
        let payload = self.take(n)?;
        let generic = || Value::Array(vec![Value::from(ty), Value::String(base64_encode(payload))]);
        match ty {
            44 if payload.len() == 16 => {
                let mut re = [0u8; 8];
                let mut im = [0u8; 8];
                re.copy_from_slice(&payload[..8]);
                im.copy_from_slice(&payload[8..]);
                let (re, im) = (f64::from_be_bytes(re), f64::from_be_bytes(im));
                // A NaN with a payload other than the canonical one would not round-trip.
                let exact = |f: f64| !f.is_nan() || f.to_bits() == f64::NAN.to_bits();
                if !(exact(re) && exact(im)) {
                    return Ok(tag("__ext__", generic()));
                }
                let pair = vec![float_to_json(re), float_to_json(im)];
                Ok(tag("__complex__", Value::Array(pair)))
            }
            45 | 46 => {
                let mut inner = Decoder {
                    buf: payload,
                    pos: 0,
                };
                let decoded = inner.value(depth + 1);
                let whole = inner.pos == payload.len();
                let want_kind = |v: &Value| match ty {
                    45 => v.is_array(),
                    _ => v.is_object(),
                };
                if let Ok(v) = decoded {
                    // Only a canonical payload may become a typed tag (byte-exact round trip).
                    let canonical = whole
                        && want_kind(&v)
                        && json_to_msgpack(&v).is_ok_and(|b| b.as_slice() == payload);
                    if canonical {
                        let name = if ty == 45 { "__set__" } else { "__ndarray__" };
                        return Ok(tag(name, v));
                    }
                }
                Ok(tag("__ext__", generic()))
            }
            _ => Ok(tag("__ext__", generic())),
        }
    }
}

fn json_err(pointer: &str, why: impl Into<String>) -> AttrsError {
    AttrsError::Json {
        pointer: pointer.to_string(),
        why: why.into(),
    }
}

fn put_len(out: &mut Vec<u8>, n: usize, m8: Option<u8>, m16: u8, m32: u8) -> Result<(), String> {
    if let (Some(m8), Ok(b)) = (m8, u8::try_from(n)) {
        out.extend([m8, b]);
    } else if let Ok(s) = u16::try_from(n) {
        out.push(m16);
        out.extend(s.to_be_bytes());
    } else if let Ok(l) = u32::try_from(n) {
        out.push(m32);
        out.extend(l.to_be_bytes());
    } else {
        return Err(format!("length {n} does not fit msgpack's 32 bits"));
    }
    Ok(())
}

fn put_str(out: &mut Vec<u8>, b: &[u8], p: &str) -> Result<(), AttrsError> {
    if b.len() < 32 {
        out.push(0xa0 | b.len() as u8);
    } else {
        put_len(out, b.len(), Some(0xd9), 0xda, 0xdb).map_err(|w| json_err(p, w))?;
    }
    out.extend_from_slice(b);
    Ok(())
}

fn put_bin(out: &mut Vec<u8>, b: &[u8], p: &str) -> Result<(), AttrsError> {
    put_len(out, b.len(), Some(0xc4), 0xc5, 0xc6).map_err(|w| json_err(p, w))?;
    out.extend_from_slice(b);
    Ok(())
}

fn put_array_len(out: &mut Vec<u8>, n: usize, p: &str) -> Result<(), AttrsError> {
    if n < 16 {
        out.push(0x90 | n as u8);
        Ok(())
    } else {
        put_len(out, n, None, 0xdc, 0xdd).map_err(|w| json_err(p, w))
    }
}

fn put_map_len(out: &mut Vec<u8>, n: usize, p: &str) -> Result<(), AttrsError> {
    if n < 16 {
        out.push(0x80 | n as u8);
        Ok(())
    } else {
        put_len(out, n, None, 0xde, 0xdf).map_err(|w| json_err(p, w))
    }
}

fn put_uint(out: &mut Vec<u8>, v: u64) {
    if v < 128 {
        out.push(v as u8);
    } else if let Ok(b) = u8::try_from(v) {
        out.extend([0xcc, b]);
    } else if let Ok(s) = u16::try_from(v) {
        out.push(0xcd);
        out.extend(s.to_be_bytes());
    } else if let Ok(w) = u32::try_from(v) {
        out.push(0xce);
        out.extend(w.to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend(v.to_be_bytes());
    }
}

fn put_int(out: &mut Vec<u8>, v: i64) {
    if let Ok(u) = u64::try_from(v) {
        put_uint(out, u);
    } else if v >= -32 {
        out.push(v as u8);
    } else if let Ok(b) = i8::try_from(v) {
        out.push(0xd0);
        out.extend(b.to_be_bytes());
    } else if let Ok(s) = i16::try_from(v) {
        out.push(0xd1);
        out.extend(s.to_be_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xd2);
        out.extend(w.to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend(v.to_be_bytes());
    }
}

fn put_ext(out: &mut Vec<u8>, ty: i8, payload: &[u8], p: &str) -> Result<(), AttrsError> {
    let fixed = match payload.len() {
        1 => Some(0xd4),
        2 => Some(0xd5),
        4 => Some(0xd6),
        8 => Some(0xd7),
        16 => Some(0xd8),
        _ => None,
    };
    match fixed {
        Some(m) => out.push(m),
        None => put_len(out, payload.len(), Some(0xc7), 0xc8, 0xc9).map_err(|w| json_err(p, w))?,
    }
    out.extend(ty.to_be_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// A float from a number or a non-finite name.
fn json_float(v: &Value, p: &str) -> Result<f64, AttrsError> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| json_err(p, "not a float")),
        Value::String(s) => {
            nonfinite_from_str(s).ok_or_else(|| json_err(p, format!("unknown float name {s:?}")))
        }
        Value::Object(_) => match single_tag(v) {
            Some(("__float__", Value::String(s))) => nonfinite_from_str(s)
                .ok_or_else(|| json_err(p, format!("unknown float name {s:?}"))),
            _ => Err(json_err(p, "expected a number or a __float__ tag")),
        },
        _ => Err(json_err(p, "expected a number")),
    }
}

fn b64_arg<'v>(v: &'v Value, p: &str, tag: &str) -> Result<Vec<u8>, AttrsError> {
    let s: &'v str = v
        .as_str()
        .ok_or_else(|| json_err(p, format!("{tag}: expected a base64 string")))?;
    base64_decode(s).ok_or_else(|| json_err(p, format!("{tag}: invalid base64")))
}

fn encode(v: &Value, out: &mut Vec<u8>, p: &mut String, depth: usize) -> Result<(), AttrsError> {
    if depth > MAX_DEPTH {
        return Err(json_err(p, format!("nesting deeper than {MAX_DEPTH}")));
    }
    match v {
        Value::Null => out.push(0xc0),
        Value::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                put_uint(out, u);
            } else if let Some(i) = n.as_i64() {
                put_int(out, i);
            } else {
                let f = n
                    .as_f64()
                    .ok_or_else(|| json_err(p, "number out of range"))?;
                out.push(0xcb);
                out.extend(f.to_be_bytes());
            }
        }
        Value::String(s) => put_str(out, s.as_bytes(), p)?,
        Value::Array(items) => {
            if items.first().and_then(Value::as_str) == Some("__tuple__") {
                // python-blosc2 would read it back as a tuple without the marker.
                return Err(json_err(
                    p,
                    "a list starting with \"__tuple__\" is a tuple in python-blosc2; write {\"__tuple__\": [...]}",
                ));
            }
            put_array_len(out, items.len(), p)?;
            encode_items(items, out, p, depth)?;
        }
        Value::Object(m) => {
            if let Some((t, arg)) = single_tag(v) {
                return encode_tag(t, arg, out, p, depth);
            }
            put_map_len(out, m.len(), p)?;
            for (k, item) in m {
                put_str(out, k.as_bytes(), p)?;
                let len = p.len();
                p.push('/');
                p.push_str(&k.replace('~', "~0").replace('/', "~1"));
                encode(item, out, p, depth + 1)?;
                p.truncate(len);
            }
        }
    }
    Ok(())
}

fn encode_items(
    items: &[Value],
    out: &mut Vec<u8>,
    p: &mut String,
    depth: usize,
) -> Result<(), AttrsError> {
    for (i, item) in items.iter().enumerate() {
        let len = p.len();
        p.push_str(&format!("/{i}"));
        encode(item, out, p, depth + 1)?;
        p.truncate(len);
    }
    Ok(())
}

fn encode_tag(
    t: &str,
    arg: &Value,
    out: &mut Vec<u8>,
    p: &mut String,
    depth: usize,
) -> Result<(), AttrsError> {
    let here = format!("{p}/{t}");
    match t {
        "__bytes__" => put_bin(out, &b64_arg(arg, &here, t)?, &here)?,
        "__str__" => put_str(out, &b64_arg(arg, &here, t)?, &here)?,
        "__tuple__" => {
            let items = arg
                .as_array()
                .ok_or_else(|| json_err(&here, "__tuple__: expected an array"))?;
            put_array_len(out, items.len() + 1, &here)?;
            put_str(out, b"__tuple__", &here)?;
            p.push_str("/__tuple__");
            encode_items(items, out, p, depth)?;
            p.truncate(p.len() - "/__tuple__".len());
        }
        "__float__" => {
            let f = json_float(arg, &here)?;
            out.push(0xcb);
            out.extend(f.to_be_bytes());
        }
        "__float32__" => {
            let f = json_float(arg, &here)?;
            out.push(0xca);
            out.extend((f as f32).to_be_bytes());
        }
        "__map__" => {
            let pairs = arg
                .as_array()
                .ok_or_else(|| json_err(&here, "__map__: expected an array of pairs"))?;
            put_map_len(out, pairs.len(), &here)?;
            for (i, pair) in pairs.iter().enumerate() {
                let kv = pair
                    .as_array()
                    .filter(|kv| kv.len() == 2)
                    .ok_or_else(|| json_err(&here, format!("__map__: item {i} is not a pair")))?;
                let len = p.len();
                p.push_str(&format!("/__map__/{i}"));
                encode_items(kv, out, p, depth)?;
                p.truncate(len);
            }
        }
        "__complex__" => {
            let pair = arg
                .as_array()
                .filter(|a| a.len() == 2)
                .ok_or_else(|| json_err(&here, "__complex__: expected [re, im]"))?;
            let mut payload = Vec::with_capacity(16);
            for x in pair {
                payload.extend(json_float(x, &here)?.to_be_bytes());
            }
            put_ext(out, 44, &payload, &here)?;
        }
        "__set__" | "__ndarray__" => {
            let (ty, ok) = if t == "__set__" {
                (45, arg.is_array())
            } else {
                (46, arg.is_object())
            };
            if !ok {
                return Err(json_err(&here, format!("{t}: wrong argument type")));
            }
            let mut payload = Vec::new();
            let len = p.len();
            p.push('/');
            p.push_str(t);
            encode(arg, &mut payload, p, depth + 1)?;
            p.truncate(len);
            put_ext(out, ty, &payload, &here)?;
        }
        "__ext__" => {
            let pair = arg
                .as_array()
                .filter(|a| a.len() == 2)
                .ok_or_else(|| json_err(&here, "__ext__: expected [type, base64]"))?;
            let ty = pair[0]
                .as_i64()
                .and_then(|t| i8::try_from(t).ok())
                .ok_or_else(|| json_err(&here, "__ext__: type must be an integer -128..127"))?;
            put_ext(out, ty, &b64_arg(&pair[1], &here, t)?, &here)?;
        }
        _ => {
            return Err(json_err(
                &here,
                "__raw__ is only valid as the whole content",
            ));
        }
    }
    Ok(())
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with `=` padding.
pub fn base64_encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                s.push(char::from(B64[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                s.push('=');
            }
        }
    }
    s
}

/// Decodes standard base64 (padding required when the length is not a multiple of 4 bytes of
/// output; whitespace not allowed). `None` when invalid.
pub fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let b = s.as_bytes();
    if b.len() % 4 != 0 {
        return None;
    }
    let mut out = Vec::with_capacity(b.len() / 4 * 3);
    let groups = b.len() / 4;
    for (gi, g) in b.chunks(4).enumerate() {
        let mut n = 0u32;
        let mut pad = 0;
        for (i, &c) in g.iter().enumerate() {
            let v = match c {
                b'A'..=b'Z' => c - b'A',
                b'a'..=b'z' => c - b'a' + 26,
                b'0'..=b'9' => c - b'0' + 52,
                b'+' => 62,
                b'/' => 63,
                b'=' if gi + 1 == groups && i >= 2 => {
                    pad += 1;
                    0
                }
                _ => return None,
            };
            if pad > 0 && c != b'=' {
                return None;
            }
            n = n << 6 | u32::from(v);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..4 - pad]);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn rt(bytes: &[u8]) -> Value {
        let v = msgpack_to_json(bytes).unwrap();
        assert_eq!(json_to_msgpack(&v).unwrap(), bytes, "round trip of {v}");
        v
    }

    #[test]
    fn base64_known_vectors() {
        for (raw, enc) in [
            (&b""[..], ""),
            (b"f", "Zg=="),
            (b"fo", "Zm8="),
            (b"foo", "Zm9v"),
            (b"foob", "Zm9vYg=="),
            (b"\xff\xfe\x00", "//4A"),
        ] {
            assert_eq!(base64_encode(raw), enc);
            assert_eq!(base64_decode(enc).unwrap(), raw);
        }
        assert!(base64_decode("Zg=").is_none());
        assert!(base64_decode("Z===").is_none());
        assert!(base64_decode("Zg=a").is_none());
    }

    #[test]
    fn attrs_scalars_round_trip() {
        assert_eq!(rt(&[0xa5, b'h', b'e', b'l', b'l', b'o']), json!("hello"));
        assert_eq!(rt(&[0x05]), json!(5));
        assert_eq!(rt(&[0xcc, 200]), json!(200));
        assert_eq!(rt(&[0xff]), json!(-1));
        assert_eq!(rt(&[0xd0, 0x80]), json!(-128));
        assert_eq!(rt(&[0xd1, 0xff, 0x7f]), json!(-129));
        assert_eq!(
            rt(&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            json!(u64::MAX)
        );
        let mut pi = vec![0xcb];
        pi.extend(std::f64::consts::PI.to_be_bytes());
        assert_eq!(rt(&pi), json!(std::f64::consts::PI));
        let mut one = vec![0xcb];
        one.extend(1.0f64.to_be_bytes());
        let v = rt(&one);
        assert_eq!(serde_json::to_string(&v).unwrap(), "1.0");
        let mut nan = vec![0xcb];
        nan.extend(f64::NAN.to_be_bytes());
        assert_eq!(rt(&nan), json!({"__float__": "nan"}));
        let mut inf = vec![0xcb];
        inf.extend(f64::NEG_INFINITY.to_be_bytes());
        assert_eq!(rt(&inf), json!({"__float__": "-inf"}));
        let mut f32v = vec![0xca];
        f32v.extend(1.5f32.to_be_bytes());
        assert_eq!(rt(&f32v), json!({"__float32__": 1.5}));
        assert_eq!(rt(&[0xc0]), Value::Null);
        assert_eq!(rt(&[0xc3]), json!(true));
    }

    #[test]
    fn attrs_python_tuple_and_bytes() {
        // (1, 2) as python-blosc2 packs it.
        let mut t = vec![0x93, 0xa9];
        t.extend(b"__tuple__");
        t.extend([0x01, 0x02]);
        assert_eq!(rt(&t), json!({"__tuple__": [1, 2]}));
        assert_eq!(rt(&[0xc4, 2, 0xff, 0x00]), json!({"__bytes__": "/wA="}));
        assert_eq!(rt(&[0xa2, 0xff, 0xfe]), json!({"__str__": "//4="}));
    }

    #[test]
    fn attrs_maps_and_ambiguity() {
        assert_eq!(rt(&[0x81, 0xa1, b'k', 0x92, 1, 2]), json!({"k": [1, 2]}));
        // {1: 2} has a non-string key.
        assert_eq!(rt(&[0x81, 0x01, 0x02]), json!({"__map__": [[1, 2]]}));
        // A real map {"__bytes__": 1} must not read back as a bin.
        let mut m = vec![0x81, 0xa9];
        m.extend(b"__bytes__");
        m.push(0x01);
        assert_eq!(rt(&m), json!({"__map__": [["__bytes__", 1]]}));
        // Repeated keys are kept.
        assert_eq!(
            rt(&[0x82, 0xa1, b'a', 1, 0xa1, b'a', 2]),
            json!({"__map__": [["a", 1], ["a", 2]]})
        );
    }

    #[test]
    fn attrs_ext_types() {
        // np.arange(3, int16) as python-blosc2 packs it (CONTAINER_NOTES 4.1).
        let mut nd = vec![0xc7, 0x25, 0x2e, 0x83, 0xa5];
        nd.extend(b"dtype");
        nd.extend([0x81, 0xa3]);
        nd.extend(b"str");
        nd.push(0xa3);
        nd.extend(b"<i2");
        nd.push(0xa5);
        nd.extend(b"shape");
        nd.extend([0x91, 0x03, 0xa4]);
        nd.extend(b"data");
        nd.extend([0xc4, 0x06, 0, 0, 1, 0, 2, 0]);
        assert_eq!(
            rt(&nd),
            json!({"__ndarray__": {"dtype": {"str": "<i2"}, "shape": [3], "data": {"__bytes__": "AAABAAIA"}}})
        );
        let mut c = vec![0xd8, 44];
        c.extend(1.0f64.to_be_bytes());
        c.extend((-2.5f64).to_be_bytes());
        assert_eq!(rt(&c), json!({"__complex__": [1.0, -2.5]}));
        assert_eq!(rt(&[0xc7, 3, 45, 0x92, 1, 2]), json!({"__set__": [1, 2]}));
        assert_eq!(rt(&[0xd4, 42, 7]), json!({"__ext__": [42, "Bw=="]}));
        // A non-canonical set payload stays a generic ext.
        assert_eq!(
            rt(&[0xc7, 3, 45, 0xdc, 0, 0]),
            json!({"__ext__": [45, "3AAA"]})
        );
    }

    #[test]
    fn attrs_hostile_lengths_are_errors() {
        // str32 of 4 GiB - 1 with 2 bytes of data.
        let e = msgpack_to_json(&[0xdb, 0xff, 0xff, 0xff, 0xff, b'a', b'b']).unwrap_err();
        assert!(matches!(e, AttrsError::Msgpack { offset: 5, .. }), "{e}");
        assert!(msgpack_to_json(&[0xdd, 0xff, 0xff, 0xff, 0xff, 1]).is_err());
        assert!(msgpack_to_json(&[0xdf, 0xff, 0xff, 0xff, 0xff, 1, 1]).is_err());
        assert!(msgpack_to_json(&[0xc9, 0xff, 0xff, 0xff, 0xff, 1]).is_err());
        assert!(msgpack_to_json(&[0xc1]).is_err());
        assert!(msgpack_to_json(&[]).is_err());
        assert!(msgpack_to_json(&[0x01, 0x02]).is_err());
        let deep = vec![0x91; 100_000];
        assert!(msgpack_to_json(&deep).is_err());
        assert_eq!(content_to_json(&[0x01, 0x02]), json!({"__raw__": "AQI="}));
        assert_eq!(
            json_to_msgpack(&json!({"__raw__": "AQI="})).unwrap(),
            [1, 2]
        );
    }

    /// A msgpack value, encoded by the independent `rmp` encoder (smallest widths, like
    /// python's msgpack).
    #[derive(Debug, Clone)]
    enum Mp {
        Nil,
        Bool(bool),
        Uint(u64),
        Sint(i64),
        F64(f64),
        F32(f32),
        Str(String),
        BadStr(Vec<u8>),
        Bin(Vec<u8>),
        Arr(Vec<Mp>),
        Map(Vec<(Mp, Mp)>),
        Ext(i8, Vec<u8>),
    }

    fn rmp_encode(v: &Mp, out: &mut Vec<u8>) {
        use rmp::encode as e;
        match v {
            Mp::Nil => e::write_nil(out).unwrap(),
            Mp::Bool(b) => e::write_bool(out, *b).unwrap(),
            Mp::Uint(u) => drop(e::write_uint(out, *u).unwrap()),
            Mp::Sint(i) => drop(e::write_sint(out, *i).unwrap()),
            Mp::F64(f) => e::write_f64(out, *f).unwrap(),
            Mp::F32(f) => e::write_f32(out, *f).unwrap(),
            Mp::Str(s) => e::write_str(out, s).unwrap(),
            Mp::BadStr(b) => {
                e::write_str_len(out, b.len() as u32).unwrap();
                out.extend_from_slice(b);
            }
            Mp::Bin(b) => e::write_bin(out, b).unwrap(),
            Mp::Arr(items) => {
                e::write_array_len(out, items.len() as u32).unwrap();
                items.iter().for_each(|i| rmp_encode(i, out));
            }
            Mp::Map(pairs) => {
                e::write_map_len(out, pairs.len() as u32).unwrap();
                for (k, v) in pairs {
                    rmp_encode(k, out);
                    rmp_encode(v, out);
                }
            }
            Mp::Ext(ty, data) => {
                e::write_ext_meta(out, data.len() as u32, *ty).unwrap();
                out.extend_from_slice(data);
            }
        }
    }

    fn mp() -> impl Strategy<Value = Mp> {
        let float = prop_oneof![
            any::<f64>().prop_filter("canonical NaN", |f| !f.is_nan()),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(-0.0),
        ];
        let leaf = prop_oneof![
            Just(Mp::Nil),
            any::<bool>().prop_map(Mp::Bool),
            any::<u64>().prop_map(Mp::Uint),
            (i64::MIN..0).prop_map(Mp::Sint),
            (0u64..300).prop_map(Mp::Uint),
            (-300i64..0).prop_map(Mp::Sint),
            float.prop_map(Mp::F64),
            any::<f32>()
                .prop_filter("canonical NaN", |f| !f.is_nan())
                .prop_map(Mp::F32),
            prop_oneof![
                ".{0,40}",
                Just("__tuple__".to_string()),
                Just("__bytes__".to_string()),
                Just("__map__".to_string()),
                "x{30,300}",
            ]
            .prop_map(Mp::Str),
            proptest::collection::vec(0x80u8..0xc0, 1..4).prop_map(Mp::BadStr),
            proptest::collection::vec(any::<u8>(), 0..300).prop_map(Mp::Bin),
            (any::<i8>(), proptest::collection::vec(any::<u8>(), 0..20))
                .prop_map(|(t, d)| Mp::Ext(t, d)),
            (40i8..47, proptest::collection::vec(any::<u8>(), 16..=16))
                .prop_map(|(t, d)| Mp::Ext(t, d)),
        ];
        leaf.prop_recursive(4, 64, 20, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..20).prop_map(Mp::Arr),
                proptest::collection::vec((inner.clone(), inner.clone()), 0..18).prop_map(Mp::Map),
                (prop_oneof![Just(45i8), Just(46i8)], inner.clone()).prop_map(|(t, v)| {
                    let mut b = Vec::new();
                    rmp_encode(&v, &mut b);
                    Mp::Ext(t, b)
                }),
                proptest::collection::vec(inner, 0..5).prop_map(|mut v| {
                    v.insert(0, Mp::Str("__tuple__".into()));
                    Mp::Arr(v)
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

        /// msgpack -> JSON -> msgpack is the identity on canonically encoded values, and the
        /// JSON survives a trip through its text form.
        #[test]
        fn attrs_msgpack_json_round_trip(v in mp()) {
            let mut bytes = Vec::new();
            rmp_encode(&v, &mut bytes);
            let json = msgpack_to_json(&bytes).unwrap();
            prop_assert_eq!(json_to_msgpack(&json).unwrap(), bytes.clone());
            let text = serde_json::to_string(&json).unwrap();
            let back: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(json_to_msgpack(&back).unwrap(), bytes);
        }

        /// Arbitrary bytes never panic the decoder.
        #[test]
        fn attrs_arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(v) = msgpack_to_json(&b) {
                let _ = json_to_msgpack(&v);
            }
            let _ = content_to_json(&b);
        }
    }

    #[test]
    fn attrs_json_side_errors() {
        assert!(json_to_msgpack(&json!({"__bytes__": "!!"})).is_err());
        assert!(json_to_msgpack(&json!({"__complex__": [1.0]})).is_err());
        assert!(json_to_msgpack(&json!([{"__raw__": "AA=="}])).is_err());
        assert!(json_to_msgpack(&json!({"__ext__": [300, "AA=="]})).is_err());
        let e = json_to_msgpack(&json!({"a": [1, ["__tuple__", 2]]})).unwrap_err();
        assert!(e.to_string().contains("/a/1"), "{e}");
        // Not a tag: two keys.
        assert_eq!(
            json_to_msgpack(&json!({"__bytes__": 1, "x": 2})).unwrap()[0],
            0x82
        );
    }
}
