//! What a Zarr writer's document for a new array declares (`create.rs` makes the array):
//! the b2nd it asks for (shape, data type among the view's, chunk shape, a block shape, the
//! fill value as one item, the attributes as the source stores them), and what the view keeps
//! of it while the mount lives ([`Declared`]: the compressor its chunk objects are written
//! with, the fill value, the `codecs` and `fill_value` members as written). Anything it cannot
//! keep exactly is an error naming it.

use serde_json::{Map, Value};

use super::{fill, geom};
use crate::container::write::NewArray;

/// Most chunks of a new array.
pub const MAX_NEW_ARRAY_CHUNKS: u64 = 1 << 16;
/// Most bytes of a new array's chunk.
pub const MAX_NEW_CHUNK_BYTES: u64 = 256 << 20;

/// Most bytes of a new array's block (python-blosc2 picks blocks of this order).
pub const BLOCK_BYTES: u64 = 256 << 10;

/// The compressor a writer declared after the `bytes` codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Compressor {
    None,
    Zstd,
    Gzip,
    Blosc,
}

/// What the writer of a new array declared that the view does not show: how its chunk
/// objects are encoded, and its fill value.
#[derive(Debug)]
pub(super) struct Declared {
    pub(super) compressor: Compressor,
    /// The document's `codecs` and `fill_value` members as written: a later document of
    /// the same writer (xarray rewrites it to set attributes) may hold them.
    pub(super) members: [(&'static str, Value); 2],
    /// One item of the fill value.
    pub(super) fill: Vec<u8>,
}

/// What the Zarr array metadata `doc` asks for, as a new b2nd and what its writer declared.
///
/// # Errors
/// Why it cannot be kept exactly.
pub(super) fn new_array(doc: &Value) -> Result<(NewArray, Declared), String> {
    let get = |k: &str| doc.get(k);
    if get("zarr_format") != Some(&Value::from(3)) {
        return Err("not a Zarr v3 document".into());
    }
    match get("node_type").and_then(Value::as_str) {
        Some("array") => {}
        Some("group") => return Err("a new group (only arrays are made)".into()),
        _ => return Err("no node_type".into()),
    }
    let dims = |v: Option<&Value>, what: &str| -> Result<Vec<u64>, String> {
        let list = v.and_then(Value::as_array).ok_or(format!("no {what}"))?;
        list.iter()
            .map(|x| x.as_u64().ok_or(format!("{what}: {x} is no length")))
            .collect()
    };
    let shape = dims(get("shape"), "shape")?;
    let grid = get("chunk_grid").ok_or("no chunk_grid")?;
    if grid.get("name").and_then(Value::as_str) != Some("regular") {
        return Err(format!("chunk grid {grid} (only \"regular\" is kept)"));
    }
    let chunks = dims(
        grid.get("configuration").and_then(|c| c.get("chunk_shape")),
        "chunk_shape",
    )?;
    if shape.is_empty() || chunks.len() != shape.len() {
        return Err(format!(
            "shape {shape:?} with chunks {chunks:?} (0-d arrays are not made)"
        ));
    }
    if shape.contains(&0) || chunks.contains(&0) {
        return Err(format!(
            "a zero length in shape {shape:?} or chunks {chunks:?}"
        ));
    }
    // Every chunk of the new file is written at once (and the fill chunk built whole).
    let count = shape
        .iter()
        .zip(&chunks)
        .try_fold(1u64, |n, (s, c)| n.checked_mul(s.div_ceil(*c)));
    if count.is_none_or(|n| n > MAX_NEW_ARRAY_CHUNKS) {
        return Err(format!(
            "shape {shape:?} in chunks {chunks:?}: more than {MAX_NEW_ARRAY_CHUNKS} chunks (make \
             it smaller, then grow it along its first axis)"
        ));
    }
    let keys = get("chunk_key_encoding").ok_or("no chunk_key_encoding")?;
    let sep = keys
        .get("configuration")
        .and_then(|c| c.get("separator"))
        .and_then(Value::as_str)
        .unwrap_or("/");
    if keys.get("name").and_then(Value::as_str) != Some("default") || sep != "/" {
        return Err(format!(
            "chunk key encoding {keys} (the view's keys are \"default\" with \"/\")"
        ));
    }
    match get("storage_transformers") {
        None | Some(Value::Null) => {}
        Some(Value::Array(a)) if a.is_empty() => {}
        Some(t) => return Err(format!("storage transformers {t}")),
    }
    let (typestr, dtype) = numpy_type(get("data_type").ok_or("no data_type")?)?;
    let itemsize = dtype.itemsize as usize;
    let chunk_bytes = chunks
        .iter()
        .try_fold(dtype.itemsize, |n, &c| n.checked_mul(c));
    if chunk_bytes.is_none_or(|n| n > MAX_NEW_CHUNK_BYTES) {
        return Err(format!(
            "chunks {chunks:?} of {typestr}: more than {} MiB each",
            MAX_NEW_CHUNK_BYTES >> 20
        ));
    }
    let compressor = codecs(get("codecs").ok_or("no codecs")?)?;
    let fill = fill_item(
        get("fill_value").unwrap_or(&Value::Null),
        &typestr,
        itemsize,
    )?;
    let attrs = match get("attributes") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(a) => return Err(format!("attributes {a} are no JSON object")),
    };
    if attrs.keys().any(|k| k.len() > 31) {
        return Err("an attribute name longer than 31 bytes".into());
    }
    let attrs = with_dims(attrs, get("dimension_names"), Some(shape.len()));
    let empty = Value::Object(Map::new());
    let attrs = fill::written(attrs, &empty, &empty, &dtype);
    let blocks = block_shape(&chunks, itemsize as u64);
    let spec = NewArray {
        shape,
        chunkshape: chunks,
        blockshape: blocks,
        dtype: typestr,
        itemsize,
        fill: fill.clone(),
        attrs: (!attrs.is_empty()).then_some(Value::Object(attrs)),
    };
    let members = [
        ("codecs", get("codecs").cloned().unwrap_or(Value::Null)),
        (
            "fill_value",
            get("fill_value").cloned().unwrap_or(Value::Null),
        ),
    ];
    Ok((
        spec,
        Declared {
            compressor,
            members,
            fill,
        },
    ))
}

/// `attrs` with `dimension_names` (a document's member: a list of strings, of `ndim` when
/// given) as `_ARRAY_DIMENSIONS` when they hold neither, as the view shows them back.
pub(super) fn with_dims(
    mut attrs: Map<String, Value>,
    names: Option<&Value>,
    ndim: Option<usize>,
) -> Map<String, Value> {
    if let Some(Value::Array(names)) = names {
        let all: Option<Vec<&str>> = names.iter().map(Value::as_str).collect();
        if let Some(all) = all.filter(|a| ndim.is_none_or(|n| a.len() == n))
            && !attrs.contains_key("_ARRAY_DIMENSIONS")
            && !attrs.contains_key("dimension_names")
        {
            attrs.insert("_ARRAY_DIMENSIONS".into(), Value::from(all));
        }
    }
    attrs
}

/// The NumPy type string of Zarr `data_type` `v` among the view's types, with the view's
/// [`geom::DataType`] of it (the one that shows it back the same).
fn numpy_type(v: &Value) -> Result<(String, geom::DataType), String> {
    let typestr = match v {
        Value::String(s) => match s.as_str() {
            "bool" => "|b1".to_owned(),
            "int8" => "|i1".into(),
            "uint8" => "|u1".into(),
            "int16" => "<i2".into(),
            "int32" => "<i4".into(),
            "int64" => "<i8".into(),
            "uint16" => "<u2".into(),
            "uint32" => "<u4".into(),
            "uint64" => "<u8".into(),
            "float16" => "<f2".into(),
            "float32" => "<f4".into(),
            "float64" => "<f8".into(),
            "complex64" => "<c8".into(),
            "complex128" => "<c16".into(),
            _ => return Err(format!("data type {v} (not one the view shows)")),
        },
        Value::Object(o) => {
            let conf = o.get("configuration");
            let get = |k: &str| conf.and_then(|c| c.get(k));
            match o.get("name").and_then(Value::as_str) {
                Some(kind @ ("numpy.datetime64" | "numpy.timedelta64")) => {
                    let unit = get("unit").and_then(Value::as_str).unwrap_or("");
                    let scale = get("scale_factor").and_then(Value::as_u64).unwrap_or(1);
                    let letter = if kind == "numpy.datetime64" { 'M' } else { 'm' };
                    match scale {
                        1 => format!("<{letter}8[{unit}]"),
                        n => format!("<{letter}8[{n}{unit}]"),
                    }
                }
                Some("fixed_length_utf32") => {
                    let bytes = get("length_bytes").and_then(Value::as_u64).unwrap_or(0);
                    format!("<U{}", bytes / 4)
                }
                _ => return Err(format!("data type {v} (not one the view shows)")),
            }
        }
        _ => return Err(format!("data type {v}")),
    };
    let (dtype, extra) = geom::data_type(&typestr).map_err(|e| format!("data type {v}: {e}"))?;
    if extra.is_some() || dtype.json != *v || dtype.itemsize == 0 {
        return Err(format!("data type {v} (the view would show another)"));
    }
    Ok((typestr, dtype))
}

/// The compressor of codec chain `v`: `bytes` (little-endian, or no endian for 1-byte
/// types), then at most one of `zstd`, `gzip`, `blosc`.
fn codecs(v: &Value) -> Result<Compressor, String> {
    let list = v.as_array().ok_or("codecs is no list")?;
    let name = |c: &Value| c.get("name").and_then(Value::as_str).map(str::to_owned);
    let Some(first) = list.first() else {
        return Err("no codecs".into());
    };
    if name(first).as_deref() != Some("bytes") {
        return Err(format!(
            "codec {first} first (only \"bytes\" then a compressor is kept)"
        ));
    }
    let endian = first
        .get("configuration")
        .and_then(|c| c.get("endian"))
        .and_then(Value::as_str);
    if endian.is_some_and(|e| e != "little") {
        return Err(format!("the bytes codec's endian {endian:?} (only little)"));
    }
    match list.get(1..).unwrap_or(&[]) {
        [] => Ok(Compressor::None),
        [c] => match name(c).as_deref() {
            Some("zstd") => Ok(Compressor::Zstd),
            Some("gzip") => Ok(Compressor::Gzip),
            Some("blosc") => Ok(Compressor::Blosc),
            _ => Err(format!("codec {c} (zstd, gzip and blosc are decoded)")),
        },
        more => Err(format!(
            "{} codecs after bytes (one compressor is decoded)",
            more.len()
        )),
    }
}

/// `data` decoded by `c` to exactly `want` bytes (never more allocated).
/// The chunk a chunk object of `want` raw bytes stands for, written by a writer that declared
/// `c`: the object itself when `c` is none; an object of exactly the raw size is raw, unless
/// it decodes by `c` to exactly `want` bytes (a compressed object can have the raw size; raw
/// bytes that happen to be a whole frame of `c` decoding to that size cannot be told apart).
pub(super) fn decode_object(
    c: Compressor,
    data: &[u8],
    want: usize,
) -> Result<std::borrow::Cow<'_, [u8]>, String> {
    if c == Compressor::None {
        return Ok(data.into());
    }
    if data.len() == want {
        return Ok(decode(c, data, want).map_or(data.into(), Into::into));
    }
    decode(c, data, want).map(Into::into)
}

pub(super) fn decode(c: Compressor, data: &[u8], want: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let out = match c {
        Compressor::None => return Err("not raw".into()),
        Compressor::Zstd => {
            let mut d = zstd::stream::read::Decoder::new(data).map_err(|e| e.to_string())?;
            let mut out = Vec::with_capacity(want);
            (&mut d)
                .take(want as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| e.to_string())?;
            out
        }
        Compressor::Gzip => {
            let mut out = Vec::with_capacity(want);
            flate2::read::GzDecoder::new(data)
                .take(want as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|e| e.to_string())?;
            out
        }
        Compressor::Blosc => {
            // The header says how much it decodes to: checked before anything is allocated.
            let h = crate::codec::chunk_info(data).map_err(|e| e.to_string())?;
            if h.nbytes != want {
                return Err(format!("a Blosc chunk of {} bytes, not {want}", h.nbytes));
            }
            crate::codec::decompress(data).map_err(|e| e.to_string())?
        }
    };
    match out.len() == want {
        true => Ok(out),
        false => Err(format!("{} bytes, not {want}", out.len())),
    }
}

/// One item of Zarr fill value `v` of NumPy type `typestr` (`itemsize` bytes, little-endian).
fn fill_item(v: &Value, typestr: &str, itemsize: usize) -> Result<Vec<u8>, String> {
    let kind = typestr.as_bytes().get(1).copied().unwrap_or(b' ');
    let bad = || Err(format!("fill value {v} for {typestr}"));
    let float = |v: &Value| -> Option<f64> {
        match v {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => match s.as_str() {
                "NaN" => Some(f64::NAN),
                "Infinity" => Some(f64::INFINITY),
                "-Infinity" => Some(f64::NEG_INFINITY),
                _ => None,
            },
            _ => None,
        }
    };
    let float_bytes = |f: f64| -> Option<Vec<u8>> {
        match itemsize {
            8 => Some(f.to_le_bytes().to_vec()),
            4 if (f as f32) as f64 == f || f.is_nan() => Some((f as f32).to_le_bytes().to_vec()),
            2 => half(f).map(|h| h.to_le_bytes().to_vec()),
            _ => None,
        }
    };
    let out = match (kind, v) {
        (b'b', Value::Bool(b)) => Some(vec![u8::from(*b)]),
        (b'i' | b'M' | b'm', Value::Number(n)) => n
            .as_i64()
            .map(|x| x.to_le_bytes()[..itemsize].to_vec())
            .filter(|b| {
                let back = sign_extend(b);
                n.as_i64() == Some(back)
            }),
        (b'M' | b'm', Value::String(s)) if s == "NaT" => Some(i64::MIN.to_le_bytes().to_vec()),
        (b'u', Value::Number(n)) => n
            .as_u64()
            .filter(|&x| itemsize == 8 || x < 1u64 << (8 * itemsize))
            .map(|x| x.to_le_bytes()[..itemsize].to_vec()),
        (b'f', _) => float(v).and_then(float_bytes),
        (b'c', Value::Array(p)) if p.len() == 2 => {
            let half_size = itemsize / 2;
            let part = |x: &Value| {
                float(x).and_then(|f| match half_size {
                    8 => Some(f.to_le_bytes().to_vec()),
                    4 if (f as f32) as f64 == f || f.is_nan() => {
                        Some((f as f32).to_le_bytes().to_vec())
                    }
                    _ => None,
                })
            };
            part(&p[0]).zip(part(&p[1])).map(|(mut a, b)| {
                a.extend(b);
                a
            })
        }
        (b'U', Value::String(s)) if s.is_empty() => Some(vec![0; itemsize]),
        _ => None,
    };
    match out {
        Some(b) if b.len() == itemsize => Ok(b),
        _ => bad(),
    }
}

/// Little-endian signed bytes `b` (1 to 8) as an `i64`.
fn sign_extend(b: &[u8]) -> i64 {
    let mut full = [0u8; 8];
    full[..b.len()].copy_from_slice(b);
    let shift = 64 - 8 * b.len() as u32;
    (i64::from_le_bytes(full) << shift) >> shift
}

/// `f` as a float16, when it is exactly one of the values kept (zero, NaN, infinities).
fn half(f: f64) -> Option<u16> {
    match f {
        _ if f.is_nan() => Some(0x7e00),
        f64::INFINITY => Some(0x7c00),
        f64::NEG_INFINITY => Some(0xfc00),
        _ if f == 0.0 && f.is_sign_negative() => Some(0x8000),
        _ if f == 0.0 => Some(0),
        _ => None,
    }
}

/// The largest divisor of `n` (at least 1) that is at most `limit`.
fn largest_divisor_within(n: u64, limit: u64) -> u64 {
    (1..=limit.min(n))
        .rev()
        .find(|k| n.is_multiple_of(*k))
        .unwrap_or(1)
}

/// A block shape for chunks `chunks` of `itemsize`-byte items: slabs of the chunk along its
/// first axes (python-blosc2's kind), of at most [`BLOCK_BYTES`], each length dividing the
/// chunk's (the new array's chunks are made unpadded: a b2nd chunk is padded to whole
/// blocks).
fn block_shape(chunks: &[u64], itemsize: u64) -> Vec<u64> {
    let mut block = chunks.to_vec();
    for d in 0..block.len() {
        let rest: u64 = block[d + 1..]
            .iter()
            .product::<u64>()
            .saturating_mul(itemsize);
        if rest.saturating_mul(block[d]) <= BLOCK_BYTES {
            break;
        }
        block[d] = largest_divisor_within(block[d], (BLOCK_BYTES / rest.max(1)).max(1));
        if rest.saturating_mul(block[d]) <= BLOCK_BYTES {
            break;
        }
    }
    block
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(dtype: &str, fill: Value, codecs: Value) -> Value {
        json!({"zarr_format": 3, "node_type": "array", "shape": [10, 6], "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [4, 3]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill, "codecs": codecs, "attributes": {"_FillValue": "AAAAAAAA+H8="},
            "dimension_names": ["x", "y"], "storage_transformers": []})
    }

    #[test]
    fn a_compressed_object_of_the_raw_size_is_decoded_not_taken_as_raw() {
        // A zstd object exactly as long as the chunk: the compressed frame, then a skippable
        // frame (magic 0x184D2A50, length, bytes) that pads it, which decoders pass over.
        let want = 4096;
        let raw: Vec<u8> = (0..want).map(|i| (i % 7) as u8).collect();
        let mut z = zstd::bulk::compress(&raw, 3).unwrap();
        let pad = want - z.len() - 8;
        z.extend_from_slice(&0x184D_2A50u32.to_le_bytes());
        z.extend_from_slice(&(pad as u32).to_le_bytes());
        z.resize(want, 0xAB);
        let got = decode_object(Compressor::Zstd, &z, want).unwrap();
        assert!(got == raw, "the zstd object was taken as raw bytes");
        // Raw bytes of the chunk's size are raw; with no codec declared, anything is.
        assert!(decode_object(Compressor::Zstd, &raw, want).unwrap() == raw);
        assert!(decode_object(Compressor::None, &z, want).unwrap() == z);
        // An object of another size must decode to the chunk.
        assert!(decode_object(Compressor::Zstd, &z[..want - 1], want).is_err());
    }

    #[test]
    fn what_zarr_python_and_xarray_declare_is_kept_and_the_rest_refused() {
        let zstd = json!([{"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "zstd", "configuration": {"level": 0, "checksum": false}}]);
        let (spec, d) = new_array(&doc("float64", json!("NaN"), zstd.clone())).unwrap();
        assert_eq!(spec.dtype, "<f8");
        assert_eq!(d.compressor, Compressor::Zstd);
        assert!(f64::from_le_bytes(d.fill.clone().try_into().unwrap()).is_nan());
        let attrs = spec.attrs.unwrap();
        assert_eq!(attrs["_ARRAY_DIMENSIONS"], json!(["x", "y"]));
        assert_eq!(attrs["_FillValue"], json!({"__float__": "nan"}));
        assert_eq!(spec.blockshape, vec![4, 3]);
        let (spec, _) = new_array(&doc("int16", json!(-7), zstd.clone())).unwrap();
        assert_eq!(spec.fill, (-7i16).to_le_bytes().to_vec());
        for (dtype, fill, codecs) in [
            ("int8", json!(300), zstd.clone()),
            ("float16", json!(1.5), zstd.clone()),
            ("float64", json!(0), json!([{"name": "sharding_indexed"}])),
            (
                "float64",
                json!(0),
                json!([{"name": "bytes", "configuration": {"endian": "big"}}]),
            ),
            (
                "float64",
                json!(0),
                json!([{"name": "bytes"}, {"name": "crc32c"}]),
            ),
            ("string", json!(""), zstd.clone()),
        ] {
            assert!(new_array(&doc(dtype, fill, codecs)).is_err(), "{dtype}");
        }
        // Too many chunks, too large a chunk: refused before anything is allocated.
        let mut many = doc("int8", json!(0), zstd.clone());
        many["shape"] = json!([1u64 << 40, 6]);
        assert!(new_array(&many).unwrap_err().contains("chunks"));
        many["shape"] = json!([10, 6]);
        many["chunk_grid"]["configuration"]["chunk_shape"] = json!([1u64 << 20, 1u64 << 10]);
        assert!(new_array(&many).unwrap_err().contains("MiB"));
        let mut group = doc("int8", json!(0), zstd);
        group["node_type"] = json!("group");
        assert!(new_array(&group).is_err());
    }

    #[test]
    fn blocks_are_slabs_within_the_bound() {
        // Blocks divide the chunk (a b2nd chunk is padded to whole blocks otherwise, and
        // the new array's chunks are made unpadded).
        assert_eq!(block_shape(&[1000, 1000], 8), vec![25, 1000]);
        assert_eq!(block_shape(&[10, 6], 8), vec![10, 6]);
        assert_eq!(block_shape(&[4, 100_000], 8), vec![1, 25000]);
        assert_eq!(block_shape(&[250, 500], 8), vec![50, 500]);
        assert_eq!(block_shape(&[1009, 1024], 8), vec![1, 1024]);
    }

    #[test]
    fn declared_codecs_decode_to_the_raw_size_only() {
        let raw: Vec<u8> = (0..4096u32).flat_map(|x| x.to_le_bytes()).collect();
        let z = zstd::bulk::compress(&raw, 3).unwrap();
        assert_eq!(decode(Compressor::Zstd, &z, raw.len()).unwrap(), raw);
        assert!(decode(Compressor::Zstd, &z, raw.len() - 1).is_err());
        let mut g = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        std::io::Write::write_all(&mut g, &raw).unwrap();
        let g = g.finish().unwrap();
        assert_eq!(decode(Compressor::Gzip, &g, raw.len()).unwrap(), raw);
        assert!(decode(Compressor::Gzip, b"junk", 4).is_err());
    }
}
