//! Attribute edits through the view (read-write mounts): zarr-python, xarray and the
//! other Zarr writers change a node's attributes by writing its whole `zarr.json` anew
//! into a temp file of the same directory and renaming it over the old one. When the new
//! document differs from the one the view shows only in its `attributes`, they become the
//! node's `__attrs__` (its vlmeta, a group's carrier, a ctable's attributes) and are
//! committed at the rename, as a rename over `__attrs__` is; the view then shows them.
//!
//! Rules (`docs/ZARR.md`):
//! - **Only attributes change.** Every other member must be what the view shows (shape,
//!   data type, chunk grid, codecs, fill value, dimension names, ...), compared as JSON
//!   values: members' order and number spelling (`0` and `0.0`) do not matter. Two members
//!   are not compared: a group's `consolidated_metadata` (the view builds its own; zarr-python
//!   writes back the copy it read, and `consolidate_metadata` a fresh one) and an empty
//!   `storage_transformers` (zarr-python writes the default the view leaves out). Anything
//!   else is EPERM, logged with the members that differ, and nothing changes.
//! - **A new first dimension** in `shape` resizes the array (`resize.rs`), the new
//!   attributes in the resize's own commit.
//! - **The new attributes replace the old ones whole**, as a rename over `__attrs__` does;
//!   they must be a JSON object (EPERM otherwise). Attributes equal to the old ones change
//!   nothing (a rewrite of metadata a writer did not change, `consolidate_metadata`).
//! - **A node without a carrier** (the root group of a mount of one array, whose attributes
//!   are the array's) keeps `{}`: other attributes there are EPERM.
//! - **NaN and infinities** are read as zarr-python writes them, bare `NaN`, `Infinity` and
//!   `-Infinity` (Python's `json.dumps`, not strict JSON), and committed as float64 NaN and
//!   infinities: `__attrs__` shows them as the tags `{"__float__": "nan"}` (`"inf"`,
//!   `"-inf"`), python-blosc2 reads floats; the view writes them back bare, as zarr-python
//!   does (`json.rs`).
//! - **`_FillValue`** of a float or complex array is shown in xarray's spelling (`fill.rs`):
//!   written back as shown it keeps the source's own value, and xarray's spelling of another
//!   value is stored as the plain number it spells.
//! - **Strict JSON** (`-o zarr_strict_json`): the view shows those floats as the strings
//!   `"NaN"`, `"Infinity"`, `"-Infinity"`, so a string there may be a float of the source.
//!   Wherever the new attributes hold what the view showed at the same place (the same
//!   attribute, key and list index, at any depth), the source's own value stays: a float NaN
//!   the writer left is still a float NaN, and so is a float `1.0` a strict writer (JavaScript,
//!   Go) wrote back as `1`. Everything else is taken as written, with the mapping of
//!   `__attrs__`: a string is a string (`"NaN"` where the view showed no float NaN, such as
//!   a new attribute), a float NaN is written as the tag `{"__float__": "nan"}` (or a bare
//!   `NaN`, still read).
//! - A new document larger than twice the view's and 16 MiB is EFBIG (it is parsed whole),
//!   and so is one whose NaN and Infinity tokens, as tags, pass that.
//! - A failed commit leaves the source as it was, the temp file in place.

use serde_json::{Map, Value};

use super::super::{ROOT_INO, Tree, TreeError};
use super::geom::DataType;
use super::{DirKind, ZNode, fill, write::zarr_json_refused};
use crate::container::attrs::{FLOAT_TAG, NonFiniteFloat};

/// How many bytes a new `zarr.json` may hold beyond twice the view's document (the new
/// attributes): its JSON is parsed whole.
const MAX_NEW_ATTRS: usize = 16 << 20;

/// The members of a `zarr.json` that a rewrite of its attributes may leave different.
const NOT_COMPARED: &[&str] = &["attributes", "consolidated_metadata"];

impl Tree {
    /// `data`, the new content of `zarr.json` `z` (inode `t`), renamed over it: when only
    /// its attributes differ from the view's document, they are written to the node's
    /// `__attrs__` and committed.
    ///
    /// # Errors
    /// [`TreeError::NotPermitted`] (EPERM, logged) for any other change, attributes that
    /// are not an object, or attributes of a node that has none of its own;
    /// [`TreeError::TooBig`] (EFBIG) for a document past the bound ([`MAX_NEW_ATTRS`]); the
    /// carrier's refusals ([`TreeError::ReadOnly`] for a read-only one); commit errors.
    pub(super) fn zarr_json_replace(&self, t: u64, z: ZNode, data: &[u8]) -> Result<(), TreeError> {
        let path = self.zarr_path_of(t);
        let refuse = |why: String| {
            log::warn!("{path}: {why}: refused (EPERM), nothing changed");
            zarr_json_refused()
        };
        let doc = self.zarr_json(z)?;
        // Parsing takes several times a document's size: bounded before it.
        let most = doc.len().saturating_mul(2).saturating_add(MAX_NEW_ATTRS);
        if data.len() > most {
            log::warn!(
                "{path}: a new zarr.json of {} bytes: refused (EFBIG)",
                data.len()
            );
            return Err(TreeError::TooBig(format!(
                "a new zarr.json holds at most {most} bytes (this one's twice and {} MiB for \
                 new attributes), not {}",
                MAX_NEW_ATTRS >> 20,
                data.len()
            )));
        }
        let shown: Value = parse_json_floats(&doc, usize::MAX)
            .map_err(|e| refuse(format!("the view's own document does not parse ({e})")))?;
        let new: Value = match parse_json_floats(data, most) {
            Ok(v) => v,
            Err(Parsed::TooBig) => {
                log::warn!("{path}: a new zarr.json with too many NaN/Infinity: refused (EFBIG)");
                return Err(TreeError::TooBig(format!(
                    "a new zarr.json whose NaN and Infinity tokens, as the tags __attrs__ \
                     holds, pass {most} bytes"
                )));
            }
            Err(e) => return Err(refuse(format!("the new content is not JSON ({e})"))),
        };
        // An array made through the view: its writer's codecs and fill value stand.
        let shown = self.zarr_declared_shown(z, shown, &new);
        // A refused shape change takes back the chunk removals that came before it.
        let wanted = super::undo::wanted_shape(&new, &shown);
        let res = self.zarr_json_apply(z, &path, shown, new);
        if let (Err(_), Some(wanted), ZNode::Json(n)) = (&res, &wanted, z)
            && let Ok(DirKind::Array(array)) = self.zarr_dir_kind(n)
        {
            self.zarr_take_back_unlinks(array, wanted, &path);
        }
        res
    }

    /// [`Tree::zarr_json_replace`] of the parsed documents: `new` over `shown`.
    fn zarr_json_apply(
        &self,
        z: ZNode,
        path: &str,
        shown: Value,
        new: Value,
    ) -> Result<(), TreeError> {
        let refuse = |why: String| {
            log::warn!("{path}: {why}: refused (EPERM), nothing changed");
            zarr_json_refused()
        };
        let (Value::Object(new), Value::Object(shown)) = (new, shown) else {
            return Err(refuse("the new content is not a JSON object".into()));
        };
        let mut differ = differing_members(&shown, &new);
        // A resize (`resize.rs`) carries the new attributes in its own commit.
        let resize = differ == ["shape"];
        if resize {
            differ.clear();
        }
        if !differ.is_empty() {
            // Named up to a few (a hostile document may differ in a million).
            let more = differ.len().saturating_sub(8);
            let mut named = differ[..differ.len().min(8)]
                .iter()
                .map(|k| format!("\"{k}\""))
                .collect::<Vec<_>>()
                .join(", ");
            if more > 0 {
                named.push_str(&format!(" and {more} more"));
            }
            return Err(refuse(format!(
                "members other than \"attributes\" differ ({named}); only attributes can be \
                 changed through the Zarr view"
            )));
        }
        let empty = Value::Object(Map::new());
        // Taken out of the document (which only its shape is read from after this): a copy
        // of a 16 MiB document's attributes would cost the daemon as much again.
        let mut new = new;
        let attrs = new.remove("attributes").unwrap_or_else(|| empty.clone());
        let Value::Object(attrs) = attrs else {
            return Err(refuse("\"attributes\" is not a JSON object".into()));
        };
        let attrs = Value::Object(self.zarr_declared_dims(z, &new, attrs));
        let same = same_json(&attrs, shown.get("attributes").unwrap_or(&empty));
        let mut carrier = match (same, self.zarr_attrs_carrier(z)) {
            (true, _) => None,
            (false, Some(c)) => Some(c),
            (false, None) => {
                return Err(refuse(
                    "this group has no attributes of its own (the root group of a mount of \
                     one array: the array's attributes are in its own zarr.json)"
                        .into(),
                ));
            }
        };
        // xarray's spelling of `_FillValue` (`fill.rs`) is stored as the plain value it
        // spells; left as the view showed it (or out, where the view left it out), the
        // source's own stays.
        let attrs = match (&carrier, self.zarr_json_dtype(z), attrs) {
            (Some(_), Some(dtype), Value::Object(m)) if fill::concerns(&dtype) => {
                let source = self.zarr_source_attrs(z)?;
                let was = shown.get("attributes").unwrap_or(&empty);
                let mapped = Value::Object(fill::written(m, was, &source, &dtype));
                if same_json(&mapped, &source) {
                    carrier = None;
                }
                mapped
            }
            (_, _, attrs) => attrs,
        };
        // Under strict JSON a string may stand for a float of the source: what the writer
        // left as the view showed it keeps the source's value; when that is all of them
        // (a tag written for a float the view showed as a string), nothing changes.
        let attrs = match (&carrier, self.options.zarr_strict_json) {
            (Some(_), true) => {
                let source = self.zarr_source_attrs(z)?;
                let kept = keep_shown(attrs, &source);
                if same_json(&kept, &source) {
                    carrier = None;
                }
                kept
            }
            _ => attrs,
        };
        let attrs = &attrs;
        if resize {
            // The new attributes, if any, go in the resize's own commit.
            return self.zarr_resize(z, path, &shown, &new, carrier.map(|c| (c, attrs)));
        }
        let Some(carrier) = carrier else {
            return Ok(());
        };
        self.replace_attrs(carrier, super::super::view::json_file(attrs))?;
        log::info!("{path}: attributes written to {}", self.path_of(carrier));
        Ok(())
    }

    /// The attributes of Zarr node `z` (`RootJson` or `Json`) as its `__attrs__` shows them
    /// (tags for what JSON lacks, such as `{"__float__": "nan"}`).
    fn zarr_source_attrs(&self, z: ZNode) -> Result<Value, TreeError> {
        match z {
            ZNode::Json(n) => self.zarr_attrs(n),
            _ => self.zarr_attrs(ROOT_INO),
        }
    }

    /// The data type of the array whose `zarr.json` is `z`, if it is an array's.
    fn zarr_json_dtype(&self, z: ZNode) -> Option<DataType> {
        let ZNode::Json(n) = z else {
            return None;
        };
        let Ok(DirKind::Array(array)) = self.zarr_dir_kind(n) else {
            return None;
        };
        self.zarr_geom(array, None).ok().map(|g| g.dtype.clone())
    }

    /// The `__attrs__` file holding the attributes of Zarr node `z` (`RootJson` or `Json`),
    /// if it has one.
    fn zarr_attrs_carrier(&self, z: ZNode) -> Option<u64> {
        let n = match z {
            ZNode::RootJson if self.root_is_array() => return None,
            ZNode::RootJson => ROOT_INO,
            ZNode::Json(n) => n,
            _ => return None,
        };
        self.zarr_attrs_file(n)
    }
}

/// The token of a `__float__` tag (`NaN`, `Infinity`, `-Infinity`), if `v` is one.
fn bare_float(v: &Value) -> Option<&'static str> {
    NonFiniteFloat::of_tag(v).map(NonFiniteFloat::token)
}

/// Why [`parse_json_floats`] failed.
#[derive(Debug)]
pub(super) enum Parsed {
    /// Not JSON (with NaN and Infinity).
    Json(serde_json::Error),
    /// The text with its tokens replaced by tags would pass the bound.
    TooBig,
}

impl std::fmt::Display for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Parsed::Json(e) => e.fmt(f),
            Parsed::TooBig => f.write_str("too large"),
        }
    }
}

/// Parses JSON as zarr-python writes it (Python's `json.dumps` with `allow_nan`): the bare
/// tokens `NaN`, `Infinity` and `-Infinity` outside strings are read as the tags
/// `__attrs__` holds for such floats (`{"__float__": "nan"}`, `"inf"`, `"-inf"`:
/// `src/container/attrs.rs`), which commit as float64 NaN and infinities. The text with the
/// tags in place may hold at most `most` bytes (each token grows to 19-20 bytes).
pub(super) fn parse_json_floats(data: &[u8], most: usize) -> Result<Value, Parsed> {
    let mut out: Option<Vec<u8>> = None;
    let (mut in_string, mut escaped) = (false, false);
    let (mut i, mut copied) = (0, 0);
    while let Some(&b) = data.get(i) {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        let rest = &data[i..];
        let found = NonFiniteFloat::ALL
            .into_iter()
            .find(|f| rest.starts_with(f.token().as_bytes()));
        let Some(f) = found else {
            i += 1;
            continue;
        };
        let o = out.get_or_insert_with(|| Vec::with_capacity(data.len().saturating_add(64)));
        o.extend_from_slice(&data[copied..i]);
        for part in ["{\"", FLOAT_TAG, "\":\"", f.name(), "\"}"] {
            o.extend_from_slice(part.as_bytes());
        }
        if o.len() > most {
            return Err(Parsed::TooBig);
        }
        i += f.token().len();
        copied = i;
    }
    let text = match &mut out {
        Some(o) => {
            o.extend_from_slice(&data[copied..]);
            if o.len() > most {
                return Err(Parsed::TooBig);
            }
            &o[..]
        }
        None => data,
    };
    serde_json::from_slice(text).map_err(Parsed::Json)
}

/// `new`, a value written over `source` as the strict view showed it (`-o zarr_strict_json`:
/// a float NaN or infinity as the string `"NaN"`, `"Infinity"`, `"-Infinity"`), with every
/// part that reads as the view showed the source at the same place (object key, list index,
/// at any depth) replaced by the source's own: a float the writer left stays a float (the
/// string it showed as, or an integer a strict writer wrote a whole float as: `1` for
/// `1.0`, equal by value). Everything else as written. Linear in `new` (its depth is
/// serde_json's, at most 128).
fn keep_shown(new: Value, source: &Value) -> Value {
    match (new, source) {
        (Value::String(s), _) if bare_float(source) == Some(s.as_str()) => source.clone(),
        (Value::Object(new), Value::Object(old)) => Value::Object(
            new.into_iter()
                .map(|(k, v)| {
                    let v = match old.get(&k) {
                        Some(o) => keep_shown(v, o),
                        None => v,
                    };
                    (k, v)
                })
                .collect(),
        ),
        (Value::Array(new), Value::Array(old)) => {
            // A float the writer moved within the list (an item removed or inserted before
            // it) is matched by its spelling when the old list holds that float and no
            // string spelled so: the string can only be the float the view showed.
            let moved: Vec<Option<&Value>> = NonFiniteFloat::ALL
                .iter()
                .map(|f| {
                    let string = old.iter().any(|o| o.as_str() == Some(f.token()));
                    let float = old.iter().find(|o| bare_float(o) == Some(f.token()));
                    float.filter(|_| !string)
                })
                .collect();
            let relocated = |v: Value| -> Value {
                let at = NonFiniteFloat::ALL
                    .iter()
                    .position(|f| v.as_str() == Some(f.token()));
                match at {
                    Some(at) => moved[at].cloned().unwrap_or(v),
                    None => v,
                }
            };
            Value::Array(
                new.into_iter()
                    .enumerate()
                    .map(|(i, v)| {
                        relocated(match old.get(i) {
                            Some(o) => keep_shown(v, o),
                            None => v,
                        })
                    })
                    .collect(),
            )
        }
        (new @ Value::Number(_), Value::Number(_)) if same_json(&new, source) => source.clone(),
        (new, _) => new,
    }
}

/// The members of `shown` and `new` that differ, but those [`NOT_COMPARED`] and an empty
/// `storage_transformers` (the default, which the view leaves out).
fn differing_members(shown: &Map<String, Value>, new: &Map<String, Value>) -> Vec<String> {
    let defaulted = |m: &Map<String, Value>, k: &str| match m.get(k) {
        Some(Value::Array(a)) if a.is_empty() && k == "storage_transformers" => None,
        other => other.cloned(),
    };
    let mut keys: Vec<&String> = shown.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| !NOT_COMPARED.contains(&k.as_str()))
        .filter(|k| match (defaulted(shown, k), defaulted(new, k)) {
            (Some(a), Some(b)) => !same_json(&a, &b),
            (None, None) => false,
            _ => true,
        })
        .cloned()
        .collect()
}

/// JSON equality with numbers compared by value (`0` equals `0.0`), as two writers may
/// spell the same fill value differently.
pub(super) fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.is_f64(), y.is_f64()) {
            (false, false) => x == y,
            (true, true) => x.as_f64() == y.as_f64(),
            // An integer equals a float only when the float holds it exactly.
            _ => {
                let (int, float) = if x.is_f64() { (y, x) } else { (x, y) };
                let exact = |f: f64| {
                    f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 && {
                        let i = f as i128;
                        int.as_i64()
                            .map(i128::from)
                            .or(int.as_u64().map(i128::from))
                            == Some(i)
                    }
                };
                float.as_f64().is_some_and(exact)
            }
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_compare_by_value_and_members_by_name() {
        assert!(same_json(&json!(0), &json!(0.0)));
        assert!(same_json(
            &json!({"a": [1, 2.5], "b": "NaN"}),
            &json!({"b": "NaN", "a": [1.0, 2.5]})
        ));
        assert!(!same_json(&json!(1), &json!(2)));
        assert!(!same_json(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
        assert!(!same_json(&json!([1]), &json!([1, 1])));
        assert!(!same_json(&json!("0"), &json!(0)));
        // Not equal by rounding: 2^53 + 1 is no float.
        assert!(!same_json(
            &json!(9_007_199_254_740_993_u64),
            &json!(9_007_199_254_740_992.0)
        ));
        assert!(same_json(&json!(-3), &json!(-3.0)));
        assert!(!same_json(&json!(1), &json!(1.5)));
    }

    #[test]
    fn bare_nan_and_infinities_parse_as_float_tags_outside_strings_only() {
        let v = parse_json_floats(
            br#"{"a": NaN, "b": [Infinity, -Infinity, 1.5], "s": "NaN \" Infinity", "n": -1}"#,
            1 << 20,
        )
        .unwrap();
        assert_eq!(
            v,
            json!({"a": {"__float__": "nan"}, "b": [{"__float__": "inf"},
                {"__float__": "-inf"}, 1.5], "s": "NaN \" Infinity", "n": -1})
        );
        assert!(matches!(
            parse_json_floats(b"[NaN, NaN]", 30),
            Err(Parsed::TooBig)
        ));
        assert!(matches!(
            parse_json_floats(b"[NaNa]", 1 << 20),
            Err(Parsed::Json(_))
        ));
        let text = super::super::json::zarr_json_file(&v, super::super::json::NonFinite::Bare);
        assert_eq!(parse_json_floats(&text, 1 << 20).unwrap(), v);
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("\"a\": NaN,") && text.contains("-Infinity"),
            "{text}"
        );
        assert!(text.contains(r#""s": "NaN \" Infinity""#), "{text}");
    }

    #[test]
    fn strict_writes_keep_the_source_where_they_hold_what_the_view_showed() {
        let nan = json!({"__float__": "nan"});
        let source = json!({
            "fill": nan.clone(), "label": "NaN", "range": [nan.clone(), 5.0],
            "hot": {"__float__": "inf"}, "scale": 1.0, "n": 3,
            "pair": {"__complex__": [nan.clone(), 0.0]}, "deep": {"a": [{"b": nan.clone()}]},
        });
        let written = json!({
            "fill": "NaN", "label": "NaN", "range": ["NaN", 6.0], "hot": "-Infinity",
            "scale": 1, "n": 3.0, "pair": {"__complex__": ["NaN", 2.0]},
            "deep": {"a": [{"b": "NaN", "c": "NaN"}, "NaN"]}, "new": "NaN", "tagged": nan.clone(),
        });
        let kept = keep_shown(written, &source);
        assert_eq!(
            kept,
            json!({
                // Left as shown: the source's float NaN, and its string "NaN".
                "fill": nan.clone(), "label": "NaN",
                // Changed attributes keep what they hold as shown, at the same index.
                "range": [nan.clone(), 6.0],
                // Changed: the string as written (a float is written as the tag).
                "hot": "-Infinity",
                // A whole float written as an integer stays the source's float; an integer
                // written as a float stays the integer (equal by value).
                "scale": 1.0, "n": 3,
                "pair": {"__complex__": [nan.clone(), 2.0]},
                "deep": {"a": [{"b": nan.clone(), "c": "NaN"}, "NaN"]},
                "new": "NaN", "tagged": nan,
            })
        );
        assert!(kept["scale"].is_f64() && kept["n"].is_u64());
        // A float moved within its list (an item before it removed, one inserted) stays the
        // float; where the old list also holds the string "NaN", the string is taken.
        let source = json!({"flags": ["a", nan.clone()], "mix": ["NaN", nan.clone()],
            "inf": [1.0, {"__float__": "-inf"}]});
        let written = json!({"flags": ["NaN"], "mix": ["NaN"], "inf": [0, 1.0, "-Infinity"]});
        assert_eq!(
            keep_shown(written, &source),
            json!({"flags": [nan.clone()], "mix": ["NaN"],
                "inf": [0, 1.0, {"__float__": "-inf"}]})
        );
    }

    #[test]
    fn only_attributes_consolidated_metadata_and_empty_transformers_may_differ() {
        let shown = json!({"shape": [2, 3], "fill_value": 0.0, "attributes": {}});
        let shown = shown.as_object().unwrap();
        let same = json!({"shape": [2, 3], "fill_value": 0, "attributes": {"a": 1},
            "storage_transformers": [], "consolidated_metadata": {"kind": "inline"}});
        assert!(differing_members(shown, same.as_object().unwrap()).is_empty());
        let resized = json!({"shape": [4, 3], "fill_value": 0.0, "storage_transformers": [1]});
        assert_eq!(
            differing_members(shown, resized.as_object().unwrap()),
            ["shape", "storage_transformers"]
        );
        let dropped = json!({"fill_value": 0.0});
        assert_eq!(
            differing_members(shown, dropped.as_object().unwrap()),
            ["shape"]
        );
    }
}
