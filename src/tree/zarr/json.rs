//! The text of the view's `zarr.json` documents: the layout of every JSON file of the tree
//! (`view::json_file`), with a float NaN or infinity, which `__attrs__` shows as the tag
//! `{"__float__": "nan"}` (`"inf"`, `"-inf"`; [`NonFiniteFloat`]), spelled as zarr-python
//! writes its metadata or as strict JSON ([`NonFinite`]). Where a tag is a float and where
//! it is not is the `zarr.json` schema's: a document's own `attributes` member is the
//! attribute map (a single attribute named `__float__` is no tag), any deeper one an
//! attribute's value; a root's `consolidated_metadata` holds, under `metadata`, documents.

use serde_json::Value;

use super::super::view::{Spelling, json_file_spelled};
use crate::container::attrs::NonFiniteFloat;

/// How the Zarr view's `zarr.json` documents spell a float NaN or infinity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NonFinite {
    /// The bare tokens `NaN`, `Infinity`, `-Infinity`, as zarr-python writes its metadata
    /// (Python's `json.dumps` with `allow_nan`): zarr-python, xarray and Dask read floats;
    /// not strict JSON (the default).
    Bare,
    /// The strings `"NaN"`, `"Infinity"`, `"-Infinity"`, as Zarr v3 spells non-finite fill
    /// values: strict JSON (RFC 8259) that every parser reads (`-o zarr_strict_json`).
    Strings,
}

/// [`view::json_file`](super::super::view::json_file) for a `zarr.json` of the Zarr view:
/// a float NaN or infinity (a `__float__` tag anywhere but as the `attributes` map itself)
/// spelled as `floats` says.
pub fn zarr_json_file(v: &Value, floats: NonFinite) -> Vec<u8> {
    json_file_spelled(v, Place::Doc(floats))
}

/// What a document of the Zarr v2 view (`v2.rs`) is, for where its floats are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum V2Doc {
    /// A `.zattrs`: the attribute map itself.
    Attrs,
    /// `.zarray`, `.zgroup`: no attributes.
    Other,
    /// `.zmetadata`: `metadata` maps keys to documents, those ending in `.zattrs` maps of
    /// attributes.
    Consolidated,
}

/// The text of a document of the Zarr v2 view: a float NaN or infinity (a `__float__` tag
/// wherever an attribute's value is) spelled as `floats` says, as in `zarr.json`.
pub fn v2_file(v: &Value, doc: V2Doc, floats: NonFinite) -> Vec<u8> {
    let place = match doc {
        V2Doc::Attrs => Place::Attributes(floats),
        V2Doc::Other => Place::Value(floats),
        V2Doc::Consolidated => Place::V2Consolidated(floats),
    };
    json_file_spelled(v, place)
}

/// Where a value sits in a `zarr.json` document.
#[derive(Clone, Copy)]
enum Place {
    /// A value: a tag is a float, written as a token.
    Value(NonFinite),
    /// A map of attribute names (a document's `attributes`): its members are values.
    Attributes(NonFinite),
    /// A document (or an entry of consolidated metadata): its own `attributes` member is
    /// the attribute map.
    Doc(NonFinite),
    /// A document's `consolidated_metadata`, whose `metadata` holds entries.
    Consolidated(NonFinite),
    /// The `metadata` of consolidated metadata: each member a document.
    Entries(NonFinite),
    /// A v2 `.zmetadata`, whose `metadata` holds v2 documents.
    V2Consolidated(NonFinite),
    /// Its `metadata`: members named `.zattrs` or `.../.zattrs` are attribute maps.
    V2Entries(NonFinite),
}

impl Place {
    fn floats(self) -> NonFinite {
        match self {
            Place::Value(f)
            | Place::Attributes(f)
            | Place::Doc(f)
            | Place::Consolidated(f)
            | Place::Entries(f)
            | Place::V2Consolidated(f)
            | Place::V2Entries(f) => f,
        }
    }
}

impl Spelling for Place {
    fn spell(self, v: &Value) -> Option<String> {
        let Place::Value(floats) = self else {
            return None;
        };
        let token = NonFiniteFloat::of_tag(v)?.token();
        Some(match floats {
            NonFinite::Bare => token.to_string(),
            NonFinite::Strings => format!("\"{token}\""),
        })
    }

    fn member(self, key: &str) -> Self {
        match (self, key) {
            (Place::Doc(f), "attributes") => Place::Attributes(f),
            (Place::Doc(f), "consolidated_metadata") => Place::Consolidated(f),
            (Place::Consolidated(f), "metadata") => Place::Entries(f),
            (Place::Entries(f), _) => Place::Doc(f),
            (Place::V2Consolidated(f), "metadata") => Place::V2Entries(f),
            (Place::V2Entries(f), k) if k == ".zattrs" || k.ends_with("/.zattrs") => {
                Place::Attributes(f)
            }
            _ => Place::Value(self.floats()),
        }
    }

    fn item(self) -> Self {
        Place::Value(self.floats())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bare(v: &Value) -> String {
        String::from_utf8(zarr_json_file(v, NonFinite::Bare)).unwrap()
    }

    #[test]
    fn bare_floats_are_values_never_the_attribute_map_itself() {
        let nan = json!({"__float__": "nan"});
        let doc = json!({
            "attributes": nan.clone(),
            "consolidated_metadata": {"metadata": {"a": {"attributes": {"x": nan.clone()}}}},
            "fill": {"__float__": "-inf"},
        });
        let text = bare(&doc);
        // A single attribute named `__float__` stays an attribute.
        assert!(
            text.contains("\"attributes\": {\n    \"__float__\": \"nan\""),
            "{text}"
        );
        assert!(text.contains("\"x\": NaN"), "{text}");
        assert!(text.contains("\"fill\": -Infinity"), "{text}");
        assert!(!text.contains("\"attributes\": NaN"), "{text}");
        // Strict: the same places as strings, and the whole document parses strictly.
        let strict = zarr_json_file(&doc, NonFinite::Strings);
        let v: Value = serde_json::from_slice(&strict).unwrap();
        assert_eq!(v["attributes"], nan);
        assert_eq!(
            v["consolidated_metadata"]["metadata"]["a"]["attributes"]["x"],
            "NaN"
        );
        assert_eq!(v["fill"], "-Infinity");
        assert_eq!(strict.len(), text.len() + 4, "two tokens quoted");
        // An attribute that is itself named `attributes` is a value like any other: its
        // float is a token (only the document's own member, and its consolidated entries',
        // are attribute maps).
        let named = json!({"attributes": {"attributes": nan.clone(), "m": {"attributes": nan}}});
        assert_eq!(bare(&named).matches(": NaN").count(), 2, "{}", bare(&named));
        // Lists of tags: each item a token.
        let listed = json!({"attributes": {"r": [nan.clone(), {"__float__": "inf"}, 1]}});
        assert!(bare(&listed).contains("NaN,\n") && bare(&listed).contains("Infinity,\n"));
    }
}
