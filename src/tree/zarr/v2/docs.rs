//! The metadata documents of the Zarr v2 view (the zarr-specs "v2.0" document, and
//! zarr-python 2's `.zmetadata` convention): `.zarray` from the v3 view's geometry,
//! `.zattrs` (an array's carry `_ARRAY_DIMENSIONS`, the dimension names the v3 view gives,
//! so xarray opens the group), `.zgroup`, and `.zmetadata` (every group's: the consolidated
//! metadata of everything below it, kept per generation in the v3 view's document cache).
//!
//! Choices, and why:
//! - `compressor`, `filters`: `null`; `order`: `"C"`; `dimension_separator`: `"."`. The
//!   chunk objects are the v3 view's, uncompressed C-order bytes.
//! - `dtype`: the NumPy type string of the v3 view's data type, with its byte order (`<f8`,
//!   `>i4`, `|b1`, `|u1`, `<M8[10s]`, `<U5`).
//! - `fill_value`: always `null`. xarray masks a v2 array's `fill_value` by default
//!   (`use_zarr_fill_value_as_mask`), so the zero the v3 view declares would turn every 0 of
//!   an int array into NaN (and make it float64); `null` keeps the data as stored, and keeps
//!   a source's own `_FillValue` attribute the one xarray masks with (xarray puts a non-null
//!   `fill_value` in its place). Every chunk object exists, so no reader fills a chunk.
//! - Attributes are the ones `__attrs__` shows, `_FillValue` as stored (the plain number
//!   zarr-python 2 and xarray write in v2), a float NaN or infinity spelled as in `zarr.json`
//!   (`NaN`, or `"NaN"` under `-o zarr_strict_json`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Map, Value, json};

use super::super::consolidated::Met;
use super::super::geom::{DataType, Geom};
use super::super::json::{V2Doc, v2_file};
use super::super::{DirKind, ZNode};
use super::{Meta, V2};
use crate::tree::layout::ROOT_INO;
use crate::tree::{Tree, TreeError};

/// The NumPy type string of Zarr v3 data type `dt` (with its byte order: `|` for one-byte
/// types); `None` for a type the v3 view never shows.
pub fn typestr(dt: &DataType) -> Option<String> {
    let order = match dt.endian {
        Some("big") => '>',
        Some(_) => '<',
        None => '|',
    };
    let body = match &dt.json {
        Value::String(name) => match name.as_str() {
            "bool" => "b1".to_owned(),
            "int8" => "i1".to_owned(),
            "int16" => "i2".to_owned(),
            "int32" => "i4".to_owned(),
            "int64" => "i8".to_owned(),
            "uint8" => "u1".to_owned(),
            "uint16" => "u2".to_owned(),
            "uint32" => "u4".to_owned(),
            "uint64" => "u8".to_owned(),
            "float16" => "f2".to_owned(),
            "float32" => "f4".to_owned(),
            "float64" => "f8".to_owned(),
            "complex64" => "c8".to_owned(),
            "complex128" => "c16".to_owned(),
            _ => return None,
        },
        Value::Object(o) => {
            let conf = o.get("configuration")?;
            match o.get("name")?.as_str()? {
                n @ ("numpy.datetime64" | "numpy.timedelta64") => {
                    let kind = if n == "numpy.datetime64" { 'M' } else { 'm' };
                    let unit = conf.get("unit")?.as_str()?;
                    let scale = conf.get("scale_factor")?.as_u64()?;
                    match scale {
                        1 => format!("{kind}8[{unit}]"),
                        s => format!("{kind}8[{s}{unit}]"),
                    }
                }
                "fixed_length_utf32" => format!("U{}", conf.get("length_bytes")?.as_u64()? / 4),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(format!("{order}{body}"))
}

/// The `.zarray` object of an array of geometry `g` (keys sorted, as zarr-python 2 writes).
pub fn zarray(g: &Geom) -> Value {
    let dtype = typestr(&g.dtype).unwrap_or_else(|| format!("|V{}", g.dtype.itemsize));
    json!({
        "chunks": g.chunks,
        "compressor": null,
        "dimension_separator": ".",
        "dtype": dtype,
        "fill_value": null,
        "filters": null,
        "order": "C",
        "shape": g.shape,
        "zarr_format": 2,
    })
}

/// An array's `.zattrs` object: its attributes (`{}` if they are no object) with
/// `_ARRAY_DIMENSIONS` set to `dims`.
pub fn array_attrs(attrs: &Value, dims: &[String]) -> Value {
    let mut m = match attrs {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    m.insert("_ARRAY_DIMENSIONS".into(), json!(dims));
    Value::Object(m)
}

/// A group's `.zattrs` object: its attributes, `{}` if they are no object.
fn group_attrs(attrs: &Value) -> Value {
    match attrs {
        Value::Object(_) => attrs.clone(),
        _ => json!({}),
    }
}

impl Tree {
    /// The content of v2 metadata file `v` now.
    ///
    /// # Errors
    /// [`TreeError::NotFound`] for no metadata file; EIO when attributes cannot be read or a
    /// collection leaf does not open.
    pub(crate) fn zarr2_doc(&self, v: V2) -> Result<Arc<[u8]>, TreeError> {
        let V2::Meta(n, m) = v else {
            return Err(TreeError::NotFound);
        };
        let floats = self.zarr_non_finite();
        let (doc, kind) = match m {
            Meta::Zgroup => (json!({"zarr_format": 2}), V2Doc::Other),
            Meta::Zmetadata => return self.zarr2_consolidated(n),
            Meta::Zattrs if n == 0 => (group_attrs(&self.zarr2_root_attrs()?), V2Doc::Attrs),
            Meta::Zattrs | Meta::Zarray => match self.zarr_dir_kind(n)? {
                DirKind::Array(a) => {
                    let g = self.zarr2_geom(a, None).map_err(|_| TreeError::NotFound)?;
                    match m {
                        Meta::Zarray => (zarray(&g), V2Doc::Other),
                        _ => {
                            let attrs = self.zarr_attrs(n)?;
                            let dims = self.zarr_dimension_names(n, &g, &attrs);
                            (array_attrs(&attrs, &dims), V2Doc::Attrs)
                        }
                    }
                }
                DirKind::Group if m == Meta::Zattrs => {
                    (group_attrs(&self.zarr_attrs(n)?), V2Doc::Attrs)
                }
                DirKind::Group => return Err(TreeError::NotFound),
            },
        };
        Ok(v2_file(&doc, kind, floats).into())
    }

    /// The root group's attributes: none when the mount is one array (the root group only
    /// holds it), else the root's (a ctable's, a collection's).
    fn zarr2_root_attrs(&self) -> Result<Value, TreeError> {
        match self.root_is_array() {
            true => Ok(json!({})),
            false => self.zarr_attrs(ROOT_INO),
        }
    }

    /// The `.zmetadata` of group directory `n` (0: the root), from the cache when built in
    /// this generation: `.zgroup` and `.zattrs` of the group, then of everything below it
    /// keyed by paths relative to it, as zarr-python 2's `consolidate_metadata` writes.
    fn zarr2_consolidated(&self, n: u64) -> Result<Arc<[u8]>, TreeError> {
        let key = V2::Meta(n, Meta::Zmetadata)
            .ino()
            .ok_or(TreeError::NotFound)?;
        let generation = self.zarr.generation.load(Ordering::Relaxed);
        if let Some(bytes) = self.zarr.group_json.lock().get(key, generation) {
            return Ok(bytes);
        }
        let started = std::time::Instant::now();
        // Once before every leaf below is opened (lookups follow at most every 50 ms).
        self.follow_source();
        let (z, attrs, base) = match n {
            0 => (ZNode::Root, self.zarr2_root_attrs()?, String::new()),
            n => match self.zarr_dir_kind(n)? {
                DirKind::Group => (ZNode::Dir(n), self.zarr_attrs(n)?, self.zarr_path(n)),
                DirKind::Array(_) => return Err(TreeError::NotFound),
            },
        };
        let mut meta = Map::new();
        meta.insert(".zgroup".into(), json!({"zarr_format": 2}));
        meta.insert(".zattrs".into(), group_attrs(&attrs));
        let mut emit = |path: &str, met: Met<'_>| match met {
            // A member named like a metadata file is not in the v2 view (`Meta::of`).
            _ if path.split('/').any(|p| Meta::of(p).is_some()) => {}
            Met::Array(n, g, attrs) => {
                let dims = self.zarr_dimension_names(n, g, attrs);
                meta.insert(format!("{path}/.zarray"), zarray(g));
                meta.insert(format!("{path}/.zattrs"), array_attrs(attrs, &dims));
            }
            Met::Group(attrs) => {
                meta.insert(format!("{path}/.zgroup"), json!({"zarr_format": 2}));
                meta.insert(format!("{path}/.zattrs"), group_attrs(attrs));
            }
        };
        self.zarr_walk(z, &base, "", &mut emit, &mut true);
        let nodes = meta.len() / 2 - 1;
        let doc = json!({"metadata": meta, "zarr_consolidated_format": 1});
        let bytes: Arc<[u8]> = v2_file(&doc, V2Doc::Consolidated, self.zarr_non_finite()).into();
        log::info!(
            "{}: consolidated metadata of {nodes} nodes built in {:.1} ms",
            self.zarr2_path_of(key),
            started.elapsed().as_secs_f64() * 1e3
        );
        self.zarr
            .group_json
            .lock()
            .insert(key, generation, bytes.clone());
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::geom::test_nd;
    use super::*;

    #[test]
    fn typestrs_carry_the_byte_order_of_every_type_the_v3_view_shows() {
        let cases = [
            ("|b1", "|b1"),
            ("|i1", "|i1"),
            ("<i2", "<i2"),
            (">i4", ">i4"),
            ("<u8", "<u8"),
            ("<f2", "<f2"),
            (">f8", ">f8"),
            ("<c16", "<c16"),
            ("<M8[ns]", "<M8[ns]"),
            ("<M8[10s]", "<M8[10s]"),
            (">m8[D]", ">m8[D]"),
            ("<U5", "<U5"),
            ("|V8", "|u1"),
        ];
        for (numpy, v2) in cases {
            let (dt, _) = super::super::super::geom::data_type(numpy).unwrap();
            assert_eq!(typestr(&dt).as_deref(), Some(v2), "{numpy}");
        }
    }

    #[test]
    fn zarray_documents_have_what_the_v2_spec_requires() {
        let g = test_nd(&[10, 7], &[4, 4], &[2, 4], "'<i4'", 4);
        let z = zarray(&g);
        assert_eq!(
            z,
            json!({"chunks": [4, 4], "compressor": null, "dimension_separator": ".",
                   "dtype": "<i4", "fill_value": null, "filters": null, "order": "C",
                   "shape": [10, 7], "zarr_format": 2})
        );
        let a = array_attrs(
            &json!({"units": "m", "_ARRAY_DIMENSIONS": ["z"]}),
            &["y".into(), "x".into()],
        );
        assert_eq!(a, json!({"units": "m", "_ARRAY_DIMENSIONS": ["y", "x"]}));
        assert_eq!(
            array_attrs(&json!([1]), &[]),
            json!({"_ARRAY_DIMENSIONS": []})
        );
    }
}
