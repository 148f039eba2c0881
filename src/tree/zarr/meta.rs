//! The `zarr.json` documents of the view: arrays (from their [`Geom`]), groups, and the root
//! group with the hierarchy's consolidated metadata inline (the `consolidated_metadata`
//! member zarr-python 3 writes and xarray reads: kind `inline`, `must_understand` false,
//! keys are paths relative to the root, nested groups carry an empty `metadata`).

use serde_json::{Map, Value, json};

use super::geom::Geom;

/// The `zarr.json` object of an array of geometry `g`.
pub fn array(g: &Geom, attrs: &Value, dimension_names: &[String]) -> Value {
    let bytes = match g.dtype.endian {
        Some(e) => json!({"name": "bytes", "configuration": {"endian": e}}),
        None => json!({"name": "bytes"}),
    };
    json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": g.shape,
        "data_type": g.dtype.json,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": g.chunks}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": g.dtype.fill,
        "codecs": [codec(g, bytes)],
        "attributes": super::fill::shown(object(attrs), &g.dtype),
        "dimension_names": dimension_names,
    })
}

/// The array-to-bytes codec of geometry `g`: `bytes`, or for a sharded array the
/// `sharding_indexed` codec with `bytes` inside and for the index (at the end, no checksum).
fn codec(g: &Geom, bytes: Value) -> Value {
    match &g.shard {
        None => bytes,
        Some(s) => json!({
            "name": "sharding_indexed",
            "configuration": {
                "chunk_shape": s.inner,
                "codecs": [bytes],
                "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
                "index_location": "end",
            },
        }),
    }
}

/// The `zarr.json` object of a group with attributes `attrs`; `consolidated`: the flattened
/// metadata of everything below it (the root), or `Some(empty)` for a group listed inside
/// the root's.
pub fn group(attrs: &Value, consolidated: Option<Map<String, Value>>) -> Value {
    let mut m = Map::new();
    m.insert("zarr_format".into(), json!(3));
    m.insert("node_type".into(), json!("group"));
    m.insert("attributes".into(), object(attrs));
    if let Some(c) = consolidated {
        m.insert(
            "consolidated_metadata".into(),
            json!({"kind": "inline", "must_understand": false, "metadata": c}),
        );
    }
    Value::Object(m)
}

/// `attrs` when it is an object, else `{}`.
fn object(attrs: &Value) -> Value {
    match attrs {
        Value::Object(_) => attrs.clone(),
        _ => json!({}),
    }
}

/// Parses an `__attrs__` file's content (`{}` when it is not a JSON object).
pub fn parse_attrs(bytes: &[u8]) -> Value {
    match serde_json::from_slice::<Value>(bytes) {
        Ok(v @ Value::Object(_)) => v,
        _ => json!({}),
    }
}

#[cfg(test)]
mod tests {
    use super::super::geom::test_nd;
    use super::*;

    #[test]
    fn array_documents_have_every_member_readers_need() {
        let g = test_nd(&[10, 7], &[4, 4], &[2, 4], "'<i4'", 4);
        let dims = vec!["y".to_owned(), "x".to_owned()];
        let v = array(&g, &json!({"units": "m"}), &dims);
        assert_eq!(v["shape"], json!([10, 7]));
        assert_eq!(
            v["chunk_grid"]["configuration"]["chunk_shape"],
            json!([4, 4])
        );
        assert_eq!(
            v["codecs"],
            json!([{"name": "bytes", "configuration": {"endian": "little"}}])
        );
        assert_eq!(v["fill_value"], json!(0));
        assert_eq!(v["attributes"]["units"], "m");
        assert_eq!(v["dimension_names"], json!(["y", "x"]));
        let text = serde_json::to_string(&v).unwrap();
        assert!(
            text.starts_with("{\"zarr_format\":3,\"node_type\":\"array\""),
            "{text}"
        );
        let grp = group(&json!([1]), Some(Map::new()));
        assert_eq!(grp["attributes"], json!({}));
        assert_eq!(grp["consolidated_metadata"]["kind"], "inline");
        assert_eq!(grp["consolidated_metadata"]["must_understand"], false);
        assert!(
            group(&json!({}), None)
                .get("consolidated_metadata")
                .is_none()
        );
        assert_eq!(parse_attrs(b"not json"), json!({}));
    }
}
