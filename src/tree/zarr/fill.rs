//! xarray's spelling of the `_FillValue` attribute (the CF convention's "this value means
//! missing") in the view's array documents, and its mapping back on an attribute edit.
//!
//! xarray (2026.9, `backends/zarr.py`, `FillValueCoder`) reads a Zarr v3 array's `_FillValue`
//! attribute by its data type: a float type's must be the base64 of the value as a
//! little-endian float64 (`struct.pack("<d", v)`, whatever the array's float width; NaN as
//! `AAAAAAAA+H8=`), a complex type's a list of two such strings (real, imaginary); anything
//! else fails to open the dataset. Integers and bools are read as plain numbers, so they are
//! shown as stored. Datetimes, timedeltas and strings have no spelling xarray reads at all
//! (it raises on any `_FillValue` there): left as stored.
//!
//! - **Shown** ([`shown`]): a float or complex array's `_FillValue` that is a number, a
//!   `__float__` or `__float32__` tag (a float of any kind), a number-like string
//!   (`"-9999"`), or for a complex type a `__complex__` tag or a pair of those, is shown in
//!   xarray's spelling (a real number of a complex array as `[re, 0]`), rounded to the
//!   array's float type first as xarray's encoder casts it (float32, float16). One xarray
//!   reads as it is (its own spelling) is shown as stored; any other (a bool, another string,
//!   a list, null) is left out of `zarr.json`, since xarray fails to open the whole dataset
//!   on it (a plain Zarr store holding one fails the same way). Other types' values are shown
//!   as stored. `__attrs__` always shows the stored value.
//! - **Written back** ([`written`]): in a new `zarr.json` renamed over the view's, a
//!   `_FillValue` equal to the one the view showed keeps the source's own value (its type too:
//!   an integer `-9999` stays one, so an unchanged document changes nothing); otherwise
//!   xarray's spelling (a string that is base64 of 8 bytes, or a pair of them for a complex
//!   type) is stored as the plain number it spells (a float, NaN and infinities as their
//!   `__float__` tags, a complex as its `__complex__` tag), so python-blosc2 reads a float.
//!   Any other value is stored as written. A document without `_FillValue` where the view
//!   left the source's out keeps the source's.

use serde_json::{Map, Value, json};

use super::geom::DataType;
use crate::container::attrs::{NonFiniteFloat, base64_decode, base64_encode};

/// The attribute xarray spells its own way.
pub const FILL_VALUE: &str = "_FillValue";

/// The kinds of data type whose `_FillValue` xarray reads in its own spelling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Float,
    Complex,
}

fn kind(dtype: &DataType) -> Option<Kind> {
    match dtype.json.as_str()? {
        "float16" | "float32" | "float64" => Some(Kind::Float),
        "complex64" | "complex128" => Some(Kind::Complex),
        _ => None,
    }
}

/// The float `v` holds as `__attrs__` shows it: a number, a `__float__` tag, or a
/// `__float32__` tag (a number or `nan`/`inf`/`-inf`).
fn float_of(v: &Value) -> Option<f64> {
    if let Some(f) = NonFiniteFloat::of_tag(v) {
        return Some(f.value());
    }
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Object(m) if m.len() == 1 => match m.get("__float32__")? {
            Value::Number(n) => n.as_f64(),
            Value::String(s) => NonFiniteFloat::parse(s).map(NonFiniteFloat::value),
            _ => None,
        },
        _ => None,
    }
}

/// xarray's spelling of float `f`: base64 of its little-endian float64 bytes.
fn spell(f: f64) -> Value {
    Value::String(base64_encode(&f.to_le_bytes()))
}

/// The float xarray's spelling `v` stands for, as `__attrs__` holds it (a number, or a
/// `__float__` tag).
fn unspell(v: &Value) -> Option<Value> {
    let bytes: [u8; 8] = base64_decode(v.as_str()?)?.try_into().ok()?;
    let f = f64::from_le_bytes(bytes);
    Some(match NonFiniteFloat::of(f) {
        Some(n) => n.tag(),
        None => json!(f),
    })
}

/// `f` rounded to the nearest float16 (ties to even; past the largest, 65504, from 65520 on:
/// an infinity), as a float64: numpy's `np.float16(f)`, which rounds a float64 directly
/// (not through float32, which could round twice).
fn round_to_f16(f: f64) -> f64 {
    let a = f.abs();
    if !a.is_finite() {
        return f;
    }
    if a >= 65520.0 {
        return f64::INFINITY.copysign(f);
    }
    // The spacing of float16 values around `a`: 2^-24 below 2^-14 (subnormals), else
    // 2^(exponent - 10) for 10 stored mantissa bits. `a / q` and the product are exact.
    let exp = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
    let q = 2f64.powi(exp.max(-14) - 10);
    ((a / q).round_ties_even() * q).copysign(f)
}

/// The float a number-like string spells (`"-9999"`, `" 1e3 "`, `"nan"`; surrounding
/// whitespace allowed, as numpy's `np.float64("-9999")` reads it).
fn number_like(s: &str) -> Option<f64> {
    s.trim().parse().ok()
}

/// xarray's spelling of `_FillValue` value `v` for an array of a float or complex type
/// (`width`: its Zarr data type), `None` when `v` is no number (nor a number-like string, nor
/// for a complex type a pair of them or a `__complex__` tag). A float32 or float16
/// (complex64) array's value is rounded to that type first, as xarray's encoder casts a fill
/// value to the data's type (`dtype.type(v)`): its decoder compares the data with the
/// float64 it reads, so a value the type cannot hold (-9999.9) would mask nothing.
fn spelled(v: &Value, kind: Kind, width: Option<&str>) -> Option<Value> {
    let float_of = |v: &Value| {
        let f = match v {
            Value::String(s) => number_like(s),
            _ => float_of(v),
        };
        f.map(|f| match width {
            #[allow(clippy::cast_possible_truncation)]
            Some("float32" | "complex64") => f64::from(f as f32),
            Some("float16") => round_to_f16(f),
            _ => f,
        })
    };
    match kind {
        Kind::Float => float_of(v).map(spell),
        Kind::Complex => {
            let (re, im) = match v {
                Value::Object(m) => match m.get("__complex__") {
                    Some(Value::Array(p)) if m.len() == 1 && p.len() == 2 => {
                        (float_of(&p[0])?, float_of(&p[1])?)
                    }
                    _ => return None,
                },
                Value::Array(p) if p.len() == 2 => (float_of(&p[0])?, float_of(&p[1])?),
                _ => (float_of(v)?, 0.0),
            };
            Some(json!([spell(re), spell(im)]))
        }
    }
}

/// Whether xarray decodes `v` as a `_FillValue` of `kind` as it is: a string that is base64
/// of 8 bytes, a pair of them for a complex type.
fn xarray_reads(v: &Value, kind: Kind) -> bool {
    match (kind, v) {
        (Kind::Float, _) => unspell(v).is_some(),
        (Kind::Complex, Value::Array(p)) => p.len() == 2 && p.iter().all(|x| unspell(x).is_some()),
        _ => false,
    }
}

/// Whether `_FillValue` of an array of `dtype` is spelled or left out by the view (a float
/// or complex type): whether [`written`] may change a new document's attributes.
pub fn concerns(dtype: &DataType) -> bool {
    kind(dtype).is_some()
}

/// `attrs` (an array's, as `__attrs__` shows them) as the view's `zarr.json` shows them for
/// an array of `dtype`: a float or complex array's `_FillValue` in xarray's spelling when it
/// is a number (or a number-like string), as stored when xarray reads it so, and left out
/// otherwise (a bool, another string, a list, null: xarray fails to open the whole dataset
/// on one, and masks nothing without it).
pub fn shown(mut attrs: Value, dtype: &DataType) -> Value {
    let Some(kind) = kind(dtype) else {
        return attrs;
    };
    let Some(map) = attrs.as_object_mut() else {
        return attrs;
    };
    if let Some(v) = map.get_mut(FILL_VALUE) {
        if let Some(s) = spelled(v, kind, dtype.json.as_str()) {
            *v = s;
        } else if !xarray_reads(v, kind) {
            map.remove(FILL_VALUE);
        }
    }
    attrs
}

/// The new attributes `new` of an array of `dtype`, written over the view's `shown` ones
/// (the source's are `source`), as the source is to store them: `_FillValue` as the module
/// doc says.
pub fn written(
    mut new: Map<String, Value>,
    shown: &Value,
    source: &Value,
    dtype: &DataType,
) -> Map<String, Value> {
    let Some(kind) = kind(dtype) else {
        return new;
    };
    let Some(v) = new.get_mut(FILL_VALUE) else {
        // The view left the source's out: a document without it keeps it.
        if let (None, Some(own)) = (shown.get(FILL_VALUE), source.get(FILL_VALUE)) {
            new.insert(FILL_VALUE.to_owned(), own.clone());
        }
        return new;
    };
    if let (Some(was), Some(own)) = (shown.get(FILL_VALUE), source.get(FILL_VALUE))
        && super::attrs::same_json(v, was)
    {
        *v = own.clone();
        return new;
    }
    let plain = match (kind, &*v) {
        (Kind::Float, _) => unspell(v),
        (Kind::Complex, Value::Array(p)) if p.len() == 2 => unspell(&p[0])
            .zip(unspell(&p[1]))
            .map(|(re, im)| json!({"__complex__": [re, im]})),
        _ => None,
    };
    if let Some(plain) = plain {
        *v = plain;
    }
    new
}

#[cfg(test)]
mod tests {
    use super::super::geom::data_type;
    use super::*;

    fn dt(typestr: &str) -> DataType {
        data_type(typestr).unwrap().0
    }

    /// Values numpy's `float(np.float16(v))` gives (numpy 2.4).
    #[test]
    fn float16_rounding_is_numpys() {
        for (v, want) in [
            (-9999.9, -10000.0),
            (0.1, 0.099_975_585_937_5),
            (1.0 / 3.0, 0.333_251_953_125),
            (65504.0, 65504.0),
            (65519.99, 65504.0),
            (65520.0, f64::INFINITY),
            (-1e6, f64::NEG_INFINITY),
            // Ties to even: 2049 lies between 2048 and 2050.
            (2049.0, 2048.0),
            (2051.0, 2052.0),
            // Subnormals (steps of 2^-24), and below half of the smallest: zero.
            (1e-7, 1.192_092_895_507_812_5e-7),
            (2.9e-8, 0.0),
            (3.0e-8, 5.960_464_477_539_063e-8),
            (6.1e-5, 6.097_555_160_522_461e-5),
        ] {
            assert_eq!(round_to_f16(v), want, "{v}");
        }
        assert!(round_to_f16(f64::NAN).is_nan());
        assert_eq!(round_to_f16(-0.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(
            shown(json!({"_FillValue": -9999.9}), &dt("<f2"))["_FillValue"],
            spell(-10000.0)
        );
    }

    /// The spellings are the ones Python's `base64.standard_b64encode(struct.pack("<d", v))`
    /// gives (computed with CPython 3).
    #[test]
    fn floats_are_spelled_as_xarray_reads_them_and_read_back() {
        let f8 = dt("<f8");
        let attrs = json!({"_FillValue": -9999.0, "units": "K"});
        let s = shown(attrs.clone(), &f8);
        assert_eq!(s, json!({"_FillValue": "AAAAAICHw8A=", "units": "K"}));
        // float32 arrays too (xarray packs a float64 whatever the width), integers stored on
        // float arrays, and NaN.
        assert_eq!(
            shown(json!({"_FillValue": 1}), &dt("<f4"))["_FillValue"],
            "AAAAAAAA8D8="
        );
        // A value float32 cannot hold is rounded to float32 for a float32 (complex64) array,
        // as xarray's encoder casts it (CPython: `struct.pack("<d", np.float32(-9999.9))`),
        // and kept whole for a float64 one.
        let v = json!({"_FillValue": -9999.9});
        assert_eq!(shown(v.clone(), &dt("<f4"))["_FillValue"], "AAAAQPOHw8A=");
        assert_eq!(shown(v.clone(), &f8)["_FillValue"], "MzMzM/OHw8A=");
        assert_eq!(
            shown(v, &dt("<c8"))["_FillValue"],
            json!(["AAAAQPOHw8A=", "AAAAAAAAAAA="])
        );
        let nan = json!({"_FillValue": {"__float__": "nan"}});
        assert_eq!(shown(nan.clone(), &dt("<f2"))["_FillValue"], "AAAAAAAA+H8=");
        let f32 = json!({"_FillValue": {"__float32__": "-inf"}});
        assert_eq!(shown(f32.clone(), &f8)["_FillValue"], "AAAAAAAA8P8=");
        // As stored: integers and bools (xarray reads them plain), datetimes, xarray's own
        // spelling.
        for (a, t) in [
            (json!({"_FillValue": -9999}), "<i2"),
            (json!({"_FillValue": true}), "|b1"),
            (json!({"_FillValue": "x"}), "<i4"),
            (json!({"_FillValue": 0}), "<M8[s]"),
            (json!({"fill": 1.0}), "<f8"),
            (json!({"_FillValue": "AAAAAICHw8A="}), "<f4"),
            (
                json!({"_FillValue": ["AAAAAICHw8A=", "AAAAAAAAAAA="]}),
                "<c8",
            ),
        ] {
            assert_eq!(shown(a.clone(), &dt(t)), a, "{t}");
        }
        // A number-like string on a float (complex) array: the number it spells.
        for (v, t, want) in [
            (json!("-9999"), "<f8", json!("AAAAAICHw8A=")),
            (json!(" -9999.9 "), "<f4", json!("AAAAQPOHw8A=")),
            (json!("nan"), "<f2", json!("AAAAAAAA+H8=")),
            (json!("1"), "<c16", json!(["AAAAAAAA8D8=", "AAAAAAAAAAA="])),
            (
                json!([1, "nan"]),
                "<c16",
                json!(["AAAAAAAA8D8=", "AAAAAAAA+H8="]),
            ),
        ] {
            let a = shown(json!({"_FillValue": v, "units": "K"}), &dt(t));
            assert_eq!(a, json!({"_FillValue": want, "units": "K"}), "{v} {t}");
        }
        // Left out where xarray reads no such value (it fails to open the dataset): a bool,
        // another string, a list, null, an object.
        for (v, t) in [
            (json!(true), "<f8"),
            (json!(false), "<f4"),
            (json!("x"), "<f8"),
            (json!("AAAA"), "<f8"),
            (json!([1.0]), "<f8"),
            (json!(null), "<f2"),
            (json!({"a": 1}), "<f8"),
            (json!([1.0, 2.0, 3.0]), "<c8"),
            (json!({"__complex__": [1.0]}), "<c16"),
        ] {
            let a = shown(json!({"_FillValue": v, "units": "K"}), &dt(t));
            assert_eq!(a, json!({"units": "K"}), "{v} {t}");
        }
        // Complex: a pair; a real number is the real part.
        let c = json!({"_FillValue": {"__complex__": [1.0, {"__float__": "nan"}]}});
        assert_eq!(
            shown(c.clone(), &dt("<c16"))["_FillValue"],
            json!(["AAAAAAAA8D8=", "AAAAAAAA+H8="])
        );
        assert_eq!(
            shown(json!({"_FillValue": 1.0}), &dt("<c8"))["_FillValue"],
            json!(["AAAAAAAA8D8=", "AAAAAAAAAAA="])
        );

        // Back: unchanged keeps the source's own (an integer stays one); a new spelling is
        // the plain float; anything else as written.
        let source = json!({"_FillValue": -9999});
        let showed = shown(source.clone(), &f8);
        let obj = |v: Value| v.as_object().unwrap().clone();
        let back = written(obj(showed.clone()), &showed, &source, &f8);
        assert!(back["_FillValue"].is_i64());
        let back = written(
            obj(json!({"_FillValue": "AAAAAAAA+H8="})),
            &showed,
            &source,
            &f8,
        );
        assert_eq!(back["_FillValue"], json!({"__float__": "nan"}));
        let back = written(
            obj(json!({"_FillValue": "AAAAAICHw8A="})),
            &json!({}),
            &json!({}),
            &f8,
        );
        assert_eq!(back["_FillValue"], json!(-9999.0));
        assert!(back["_FillValue"].is_f64());
        for kept in [json!(2.5), json!("not base64"), json!("AAAA")] {
            let back = written(
                obj(json!({"_FillValue": kept.clone()})),
                &showed,
                &source,
                &f8,
            );
            assert_eq!(back["_FillValue"], kept);
        }
        // Left out by the view: a document without it keeps the source's; a new one is
        // stored as for any other.
        let source = json!({"_FillValue": true, "units": "K"});
        let showed = shown(source.clone(), &f8);
        let back = written(obj(json!({"units": "m"})), &showed, &source, &f8);
        assert_eq!(
            Value::Object(back),
            json!({"_FillValue": true, "units": "m"})
        );
        let back = written(
            obj(json!({"_FillValue": "AAAAAICHw8A="})),
            &showed,
            &source,
            &f8,
        );
        assert_eq!(Value::Object(back), json!({"_FillValue": -9999.0}));
        // A number-like string written back as shown stays the string.
        let source = json!({"_FillValue": "-9999"});
        let showed = shown(source.clone(), &f8);
        let back = written(obj(showed.clone()), &showed, &source, &f8);
        assert_eq!(Value::Object(back), source);
        let back = written(
            obj(json!({"_FillValue": ["AAAAAAAA8D8=", "AAAAAAAA+H8="]})),
            &json!({}),
            &json!({}),
            &dt("<c16"),
        );
        assert_eq!(back["_FillValue"], c["_FillValue"]);
        // An integer array's is never touched.
        let back = written(
            obj(json!({"_FillValue": "AAAAAICHw8A="})),
            &json!({}),
            &json!({}),
            &dt("<i4"),
        );
        assert_eq!(back["_FillValue"], "AAAAAICHw8A=");
    }
}
