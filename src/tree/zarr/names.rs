//! Names in the Zarr view: what the view's directory is called, what a single source's array
//! is called, which native names a Zarr hierarchy cannot hold, and the made-up dimension
//! names.

use serde_json::Value;

/// The view's directory name, unless the mount root already has an entry of that name.
pub const VIEW: &str = "zarr";
/// The view's directory name when the root has a member called [`VIEW`] (a collection's):
/// the member keeps its name, the view moves here (and `view_1`, ... if that is taken too).
pub const VIEW_MOVED: &str = "zarr_view";

/// The name of a view's directory (`view`, else `moved`, `moved_1`, ...) in a root whose
/// entries are `taken`: the v3 view's ([`VIEW`], [`VIEW_MOVED`]) and the v2 view's.
pub fn view_name(view: &str, moved: &str, taken: &dyn Fn(&str) -> bool) -> String {
    if !taken(view) {
        return view.into();
    }
    let mut name = moved.to_owned();
    let mut k = 0;
    while taken(&name) {
        k += 1;
        name = format!("{moved}_{k}");
    }
    name
}

/// The array name of a single source at `path`: the file name without its last suffix; a
/// directory's (bcolz) whole name; a URL's last path segment by the same rule.
pub fn stem(path: &std::path::Path, is_dir: bool) -> String {
    let name = match (is_dir, path.file_stem()) {
        (false, Some(s)) => s,
        _ => path.file_name().unwrap_or_default(),
    };
    let name = name.to_string_lossy().into_owned();
    if name.is_empty() || name == "." || name == ".." {
        "array".into()
    } else {
        name
    }
}

/// Why native name `name` cannot be a Zarr node name (`None`: it can): names starting with
/// `__` are reserved by Zarr v3, and `zarr.json` and `c` would be confused with an array's
/// own entries.
pub fn refused(name: &str) -> Option<&'static str> {
    if name.starts_with("__") {
        Some("names starting with \"__\" are reserved in Zarr v3")
    } else if name == "zarr.json" {
        Some("\"zarr.json\" is the metadata document's name")
    } else {
        None
    }
}

/// The dimension names of array `name` of `ndim` dimensions with attributes `attrs`: the
/// attributes' `_ARRAY_DIMENSIONS` (xarray's) or `dimension_names` when it is a list of
/// `ndim` distinct strings; else `first` (a ctable's shared row dimension) for the first
/// dimension, and `<name>_dim<k>` for the others.
pub fn dimension_names(name: &str, ndim: usize, attrs: &Value, first: Option<&str>) -> Vec<String> {
    for key in ["_ARRAY_DIMENSIONS", "dimension_names"] {
        if let Some(Value::Array(v)) = attrs.get(key) {
            let names: Vec<String> = v
                .iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect();
            let distinct = names
                .iter()
                .enumerate()
                .all(|(i, n)| !names[..i].contains(n));
            if names.len() == ndim && v.len() == ndim && distinct {
                return names;
            }
        }
    }
    (0..ndim)
        .map(|k| match (k, first) {
            (0, Some(f)) => f.to_owned(),
            _ => format!("{name}_dim{k}"),
        })
        .collect()
}

/// The row dimension a ctable's columns share: `row`, or `row_1`, ... when a column has that
/// name.
pub fn row_dimension(columns: &[&str]) -> String {
    let mut name = "row".to_owned();
    let mut k = 0;
    while columns.contains(&name.as_str()) {
        k += 1;
        name = format!("row_{k}");
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::path::Path;

    #[test]
    fn names_follow_the_documented_rules() {
        assert_eq!(stem(Path::new("/d/temp.b2nd"), false), "temp");
        assert_eq!(stem(Path::new("/d/a.tar.b2frame"), false), "a.tar");
        assert_eq!(stem(Path::new("/d/x.bcolz"), true), "x.bcolz");
        assert_eq!(stem(Path::new("s3://bucket/dir/obs.b2nd"), false), "obs");
        let name = |taken: &dyn Fn(&str) -> bool| view_name(VIEW, VIEW_MOVED, taken);
        assert_eq!(name(&|n| n == "nothing"), "zarr");
        assert_eq!(name(&|n| n == "zarr"), "zarr_view");
        assert_eq!(name(&|n| n == "zarr" || n == "zarr_view"), "zarr_view_1");
        assert_eq!(
            view_name("zarr2", "zarr2_view", &|n| n == "zarr2"
                || n == "zarr2_view"),
            "zarr2_view_1"
        );
        assert!(refused("__index__").is_some());
        assert!(refused("zarr.json").is_some());
        assert!(refused("_x").is_none() && refused("c").is_none());
        assert_eq!(row_dimension(&["a", "row"]), "row_1");
    }

    #[test]
    fn dimension_names_come_from_attributes_when_they_fit() {
        let a = json!({"_ARRAY_DIMENSIONS": ["y", "x"]});
        assert_eq!(dimension_names("t", 2, &a, None), ["y", "x"]);
        assert_eq!(
            dimension_names("t", 3, &a, None),
            ["t_dim0", "t_dim1", "t_dim2"]
        );
        let dup = json!({"_ARRAY_DIMENSIONS": ["y", "y"], "dimension_names": ["a", "b"]});
        assert_eq!(dimension_names("t", 2, &dup, None), ["a", "b"]);
        let mixed = json!({"dimension_names": ["a", 1]});
        assert_eq!(
            dimension_names("t", 2, &mixed, Some("row")),
            ["row", "t_dim1"]
        );
    }
}
