//! bcolz ctable roots: `__rootdirs__` names the columns (each one plain name, listed once),
//! each a carray directory directly under the root, and the table's own `__attrs__`.

use std::path::{Component, Path};
use std::sync::Arc;

use serde_json::Value;

use super::Carray;
use super::json::{field, read_json_in};
use crate::container::ContainerError;
use crate::container::files::Files;
use crate::container::source::IoStats;

/// Validates a `__rootdirs__` column name: one plain path component.
pub(super) fn column_name_ok(name: &str) -> bool {
    let mut comps = Path::new(name).components();
    matches!(comps.next(), Some(Component::Normal(_)))
        && comps.next().is_none()
        && !name.contains(['/', '\\', '\0'])
}

/// Opens a ctable root (its files read through `files`): `(attrs, [(name, column)])` in
/// `__rootdirs__` order.
pub(crate) fn open_ctable_in(
    files: &Files,
    root: &Path,
    stats: &Arc<IoStats>,
) -> Result<(Value, Vec<(String, Carray)>), ContainerError> {
    let rd_path = root.join("__rootdirs__");
    let rootdirs = read_json_in(files, &rd_path, stats)?;
    let names_v = field(&rootdirs, "names", &rd_path)?;
    let names = names_v
        .as_array()
        .ok_or_else(|| ContainerError::Malformed {
            path: rd_path.clone(),
            what: "names".into(),
            offset: 0,
            why: format!("{names_v} is not a list"),
        })?;
    let mut columns = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let name =
            n.as_str()
                .filter(|s| column_name_ok(s))
                .ok_or_else(|| ContainerError::Malformed {
                    path: rd_path.clone(),
                    what: format!("names[{i}]"),
                    offset: 0,
                    why: format!("{n} is not a plain column name"),
                })?;
        if columns.iter().any(|(c, _): &(String, Carray)| c == name) {
            return Err(ContainerError::Malformed {
                path: rd_path.clone(),
                what: format!("names[{i}]"),
                offset: 0,
                why: format!("column {name:?} listed twice"),
            });
        }
        let col = Carray::open_in(files, &root.join(name), Arc::clone(stats))?;
        columns.push((name.to_string(), col));
    }
    let attrs_path = root.join("__attrs__");
    let attrs = if files.exists(&attrs_path) {
        read_json_in(files, &attrs_path, stats)?
    } else {
        Value::Object(Default::default())
    };
    Ok((attrs, columns))
}
