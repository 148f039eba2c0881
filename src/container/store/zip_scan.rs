//! The members of a zip whose central directory cannot be read (a `.b2z` cut short: a copy or
//! download interrupted; the members come first and the central directory last), found by
//! walking their *local* headers from the start of the file, for `b2fs salvage` only (every
//! other caller reads the central directory, `zip.rs`).
//!
//! The walk stops at the first bytes that are not a local header (the central directory, or
//! damage), at a header cut short, at a member whose size its local header does not give, and
//! after a member written with a data descriptor (flag bit 3: where the next one starts is a
//! guess). A member whose
//! data the file holds only in part is returned with what it holds ([`Found::held`]). Names
//! are returned only when they are safe to extract below a directory (relative, no `..`, no
//! empty or `.` parts, no backslash, no NUL); any other name stops the walk, since what
//! follows is then no zip python-blosc2 wrote.

use std::path::Path;

use crate::container::ContainerError;

/// A member found by its local header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// Its name in the zip (`g/b.b2nd`).
    pub name: String,
    /// Its compression method (0: stored; python-blosc2 writes no other).
    pub method: u16,
    /// Where its data starts in the file.
    pub offset: u64,
    /// Its data's length, as its local header says (compressed, for a compressed member).
    pub len: u64,
    /// How many of those bytes the file holds (`len`, or fewer for the member cut short).
    pub held: u64,
    /// The CRC-32 its local header records (of the uncompressed data).
    pub crc32: u32,
}

impl Found {
    /// Whether the file holds all of its data.
    pub fn whole(&self) -> bool {
        self.held == self.len
    }
}

const LOCAL: u32 = 0x0403_4b50;
const LOCAL_LEN: usize = 30;

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default())
}

/// Whether `name` can be extracted below a directory as it is.
fn safe_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with('/')
        && !name.contains(['\\', '\0'])
        && name
            .split('/')
            .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// The sizes of a ZIP64 extra field (`extra`) for the 32-bit fields that are `0xFFFFFFFF`:
/// (uncompressed, compressed), each `None` when not given.
fn zip64_sizes(extra: &[u8], usize32: u32, csize32: u32) -> (Option<u64>, Option<u64>) {
    let mut at = 0;
    while at + 4 <= extra.len() {
        let (id, size) = (u16_at(extra, at), usize::from(u16_at(extra, at + 2)));
        let body = &extra[at + 4..extra.len().min(at + 4 + size)];
        if id == 0x0001 {
            let mut p = 0;
            let mut take = |wanted: bool| {
                (wanted && p + 8 <= body.len()).then(|| {
                    p += 8;
                    u64_at(body, p - 8)
                })
            };
            let u = take(usize32 == u32::MAX);
            let c = take(csize32 == u32::MAX);
            return (u, c);
        }
        at += 4 + size;
    }
    (None, None)
}

/// The members of the zip at `path` found by their local headers (module doc), and why the
/// walk stopped when it stopped for another reason than the central directory (or a member
/// cut short): bytes that are no local header, a size it cannot know, or the end of the file
/// right after a member.
///
/// # Errors
/// When the file cannot be read.
pub fn scan(path: &Path) -> Result<(Vec<Found>, Option<String>), ContainerError> {
    let io = |source| ContainerError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let read = |at: u64, n: usize| -> Result<Vec<u8>, ContainerError> {
        use std::os::unix::fs::FileExt;
        let n = n.min(usize::try_from(len.saturating_sub(at)).unwrap_or(usize::MAX));
        let mut buf = vec![0; n];
        file.read_exact_at(&mut buf, at).map_err(io)?;
        Ok(buf)
    };
    let mut found = Vec::new();
    let mut at = 0u64;
    // Each member takes at least a local header: bounded by the file, whatever it claims.
    while at < len {
        let head = read(at, LOCAL_LEN)?;
        if head.len() < 4 || u32_at(&head, 0) != LOCAL {
            let why = (head.len() >= 4 && u32_at(&head, 0) != 0x0201_4b50).then(|| {
                format!("bytes at offset {at} are not a local header: the walk stops there")
            });
            return Ok((found, why));
        }
        if head.len() < LOCAL_LEN {
            return Ok((
                found,
                Some(format!("a local header cut short at offset {at}")),
            ));
        }
        let (flags, method) = (u16_at(&head, 6), u16_at(&head, 8));
        let crc32 = u32_at(&head, 14);
        let (csize32, usize32) = (u32_at(&head, 18), u32_at(&head, 22));
        let (name_len, extra_len) = (u16_at(&head, 26), u16_at(&head, 28));
        let names = read(
            at + LOCAL_LEN as u64,
            usize::from(name_len) + usize::from(extra_len),
        )?;
        if names.len() < usize::from(name_len) + usize::from(extra_len) {
            return Ok((
                found,
                Some(format!("a local header cut short at offset {at}")),
            ));
        }
        let (name, extra) = names.split_at(usize::from(name_len));
        // A directory entry (`g/`, which `zip -r` writes; python-blosc2 writes none): no data.
        if csize32 == 0
            && name.ends_with(b"/")
            && std::str::from_utf8(name).is_ok_and(|n| safe_name(n.trim_end_matches('/')))
        {
            at += LOCAL_LEN as u64 + u64::from(name_len) + u64::from(extra_len);
            continue;
        }
        let Some(name) = std::str::from_utf8(name).ok().filter(|n| safe_name(n)) else {
            return Ok((
                found,
                Some(format!(
                    "the member at offset {at} has a name that cannot be extracted safely"
                )),
            ));
        };
        let (_, c64) = zip64_sizes(extra, usize32, csize32);
        let csize = match (csize32, c64) {
            (u32::MAX, Some(c)) => c,
            (u32::MAX, None) => {
                return Ok((
                    found,
                    Some(format!("{name}: its local header gives no size (ZIP64)")),
                ));
            }
            (c, _) => u64::from(c),
        };
        if flags & 0x8 != 0 && csize == 0 {
            return Ok((
                found,
                Some(format!(
                    "{name}: written with a data descriptor, its local header gives no size"
                )),
            ));
        }
        let offset = at + LOCAL_LEN as u64 + u64::from(name_len) + u64::from(extra_len);
        let held = csize.min(len.saturating_sub(offset));
        found.push(Found {
            name: name.to_owned(),
            method,
            offset,
            len: csize,
            held,
            crc32,
        });
        if held < csize {
            return Ok((found, None));
        }
        if flags & 0x8 != 0 {
            // A data descriptor follows, in one of three shapes: where the next member
            // starts is a guess, and python-blosc2 writes none.
            return Ok((
                found,
                Some(format!(
                    "{name}: written with a data descriptor: the walk stops after it"
                )),
            ));
        }
        at = offset + csize;
    }
    // The end of the file, with no central directory after the last member: members after
    // it, if any, are gone with the central directory.
    let last = found.last().map_or_else(String::new, |f| f.name.clone());
    Ok((
        found,
        Some(format!(
            "the file ends after member {last}, where the central directory should follow: \
             members after it, if there were any, are lost"
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_would_leave_the_directory_are_not_safe() {
        for bad in [
            "", "/a", "a/../b", "..", "a//b", "./a", "a\\b", "a/", "a\0b",
        ] {
            assert!(!safe_name(bad), "{bad:?}");
        }
        for good in ["a.b2nd", "g/b.b2nd", "embed.b2e", "x.y/z"] {
            assert!(safe_name(good), "{good:?}");
        }
    }

    /// A zip the `zip` crate writes with a directory entry (as `zip -r` does) and stored
    /// members, cut in its second member: the walk passes the directory entry, returns the
    /// first member whole and the second with the bytes there are, and says nothing stopped it
    /// (the cut member ends it).
    #[test]
    fn a_cut_zip_is_walked_past_directory_entries() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.zip");
        let mut w = ::zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let opts = ::zip::write::SimpleFileOptions::default()
            .compression_method(::zip::CompressionMethod::Stored);
        w.add_directory("g/", opts).unwrap();
        w.start_file("g/a.b2nd", opts).unwrap();
        w.write_all(&[7u8; 1000]).unwrap();
        w.start_file("b.b2nd", opts).unwrap();
        w.write_all(&[9u8; 1000]).unwrap();
        w.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let b = bytes.windows(6).position(|x| x == b"b.b2nd").unwrap();
        std::fs::write(&path, &bytes[..b + 6 + 500]).unwrap();
        let (found, why) = scan(&path).unwrap();
        let names: Vec<&str> = found.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["g/a.b2nd", "b.b2nd"], "{why:?}");
        assert!(found[0].whole());
        let mut crc = flate2::Crc::new();
        crc.update(&[7u8; 1000]);
        assert_eq!(found[0].crc32, crc.sum());
        assert_eq!(found[0].len, 1000);
        assert!(!found[1].whole());
        assert!(
            found[1].held < 1000 && found[1].held > 400,
            "{:?}",
            found[1]
        );
        assert_eq!(why, None);
    }

    #[test]
    fn zip64_sizes_read_only_the_fields_that_overflow() {
        let mut extra = vec![0x01, 0x00, 16, 0];
        extra.extend(7u64.to_le_bytes());
        extra.extend(9u64.to_le_bytes());
        assert_eq!(zip64_sizes(&extra, u32::MAX, u32::MAX), (Some(7), Some(9)));
        assert_eq!(zip64_sizes(&extra, 5, u32::MAX), (None, Some(7)));
        assert_eq!(zip64_sizes(&extra[..6], u32::MAX, u32::MAX), (None, None));
    }
}
