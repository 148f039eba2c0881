//! The JSON metadata files of a bcolz root (`meta/sizes`, `meta/storage`, `__attrs__`,
//! `__rootdirs__`): read whole within [`MAX_JSON_LEN`], parse errors placed at their byte
//! offset, and the fields a carray needs, missing or mistyped ones reported as malformed.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::MAX_JSON_LEN;
use crate::container::ContainerError;
use crate::container::files::Files;
use crate::container::source::IoStats;

/// Converts a serde_json error into a file offset (from its line and column).
pub(super) fn json_offset(text: &[u8], e: &serde_json::Error) -> u64 {
    let mut line = 1usize;
    let mut off = 0usize;
    for (i, &b) in text.iter().enumerate() {
        if line == e.line() {
            off = i;
            break;
        }
        if b == b'\n' {
            line += 1;
            off = i + 1;
        }
    }
    (off + e.column().saturating_sub(1)) as u64
}

/// Reads and parses a JSON metadata file opened through `files` (whole file; bounded by its
/// real size).
pub(super) fn read_json_in(
    files: &Files,
    path: &Path,
    stats: &Arc<IoStats>,
) -> Result<Value, ContainerError> {
    let src = files.open(path, Arc::clone(stats))?;
    if src.len() > MAX_JSON_LEN {
        return Err(ContainerError::Malformed {
            path: path.to_path_buf(),
            what: "json".into(),
            offset: 0,
            why: format!(
                "{} bytes, more than the {MAX_JSON_LEN} a metadata file may have",
                src.len()
            ),
        });
    }
    let len = usize::try_from(src.len()).unwrap_or(usize::MAX);
    let text = src.read_at(0, len, "json")?;
    serde_json::from_slice(&text).map_err(|e| ContainerError::Malformed {
        path: path.to_path_buf(),
        what: "json".into(),
        offset: json_offset(&text, &e),
        why: e.to_string(),
    })
}

pub(super) fn field<'v>(
    obj: &'v Value,
    key: &str,
    path: &Path,
) -> Result<&'v Value, ContainerError> {
    obj.get(key).ok_or_else(|| ContainerError::Malformed {
        path: path.to_path_buf(),
        what: key.to_string(),
        offset: 0,
        why: format!("missing field {key:?}"),
    })
}

pub(super) fn non_negative(v: &Value, what: &str, path: &Path) -> Result<u64, ContainerError> {
    v.as_u64().ok_or_else(|| ContainerError::Malformed {
        path: path.to_path_buf(),
        what: what.to_string(),
        offset: 0,
        why: format!("{v} is not a non-negative integer"),
    })
}
