//! NumPy plain type strings: `[<>|=]?<kind><size>[unit]` (`<f8`, `|b1`, `|S3`, `<U3`, `|V7`,
//! `<M8[ns]`, `<m8[25s]`), `?`, and NumPy's names of native types (`int32`, `float64`, `bool`,
//! `datetime64[ns]`: what bcolz records), canonicalised to `dtype.str` as NumPy writes it:
//! `|` for one-byte numbers, booleans, `S` and `V`; `<` unless `>` was given (no prefix means
//! little-endian: every multi-byte type string python writes has an explicit order); datetime
//! units with a count of 1 written without it. Sizes NumPy does not have are refused.

use super::dtype::MAX_ITEMSIZE;

fn too_big() -> String {
    format!("itemsize exceeds {MAX_ITEMSIZE}")
}

/// The canonical byte-order character of a type of `kind` and `size` given `order`.
fn order_char(kind: char, size: u64, order: Option<char>) -> char {
    let orderless = matches!(kind, 'S' | 'V') || (size == 1 && matches!(kind, 'b' | 'i' | 'u'));
    if orderless {
        '|'
    } else if order == Some('>') {
        '>'
    } else {
        '<'
    }
}

/// `[<count>unit]` as NumPy writes it (count 1 omitted), or "" for generic.
fn datetime_unit(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Ok(String::new());
    }
    let inner = s
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or("bad datetime unit")?;
    let split = inner
        .find(|c: char| !c.is_ascii_digit())
        .ok_or("datetime unit without a unit")?;
    let (count, unit) = inner.split_at(split);
    let unit = match unit {
        "Y" | "M" | "W" | "D" | "h" | "m" | "s" | "ms" | "us" | "ns" | "ps" | "fs" | "as" => unit,
        "\u{3bc}s" => "us",
        _ => return Err(format!("unknown datetime unit {unit:?}")),
    };
    let count: u64 = if count.is_empty() {
        1
    } else {
        count.parse().map_err(|_| "bad datetime unit count")?
    };
    if count == 0 || count > u64::from(i32::MAX as u32) {
        return Err("bad datetime unit count".into());
    }
    Ok(if count == 1 {
        format!("[{unit}]")
    } else {
        format!("[{count}{unit}]")
    })
}

/// NumPy's names of native types (`dtype.name`, what bcolz records).
fn named(s: &str) -> Option<(char, u64, &str)> {
    let (base, rest) = match s.find('[') {
        Some(i) => s.split_at(i),
        None => (s, ""),
    };
    let (kind, size) = match base {
        "bool" => ('b', 1),
        "int8" => ('i', 1),
        "int16" => ('i', 2),
        "int32" => ('i', 4),
        "int64" => ('i', 8),
        "uint8" => ('u', 1),
        "uint16" => ('u', 2),
        "uint32" => ('u', 4),
        "uint64" => ('u', 8),
        "float16" => ('f', 2),
        "float32" => ('f', 4),
        "float64" => ('f', 8),
        "float128" | "longdouble" => ('f', 16),
        "complex64" => ('c', 8),
        "complex128" => ('c', 16),
        "complex256" | "clongdouble" => ('c', 32),
        "datetime64" => ('M', 8),
        "timedelta64" => ('m', 8),
        _ => return None,
    };
    if !rest.is_empty() && !matches!(kind, 'M' | 'm') {
        return None;
    }
    Some((kind, size, rest))
}

/// Parses a plain type string: `(NumPy's canonical dtype.str, itemsize)`.
pub(crate) fn parse(s: &str) -> Result<(String, u64), String> {
    let refuse = || format!("unsupported dtype {s:?}");
    if s == "?" {
        return Ok(("|b1".into(), 1));
    }
    let (kind, size, unit, order) = if let Some((k, n, unit)) = named(s) {
        (k, n, unit, None)
    } else {
        let mut chars = s.chars();
        let mut c = chars.next().ok_or_else(refuse)?;
        let order = if matches!(c, '<' | '>' | '|' | '=') {
            let o = c;
            c = chars.next().ok_or_else(refuse)?;
            Some(o)
        } else {
            None
        };
        let rest = chars.as_str();
        let digits_end = rest
            .find(|ch: char| !ch.is_ascii_digit())
            .unwrap_or(rest.len());
        let (digits, unit) = rest.split_at(digits_end);
        if digits.len() > 12 || (digits.len() > 1 && digits.starts_with('0')) {
            return Err(refuse());
        }
        let n: Option<u64> = digits.parse().ok();
        let (kind, size) = match (c, n) {
            ('?', None) => ('b', 1),
            ('b', Some(1)) => ('b', 1),
            ('i' | 'u', Some(n @ (1 | 2 | 4 | 8))) => (c, n),
            ('f', Some(n @ (2 | 4 | 8 | 16))) => (c, n),
            ('c', Some(n @ (8 | 16 | 32))) => (c, n),
            ('M' | 'm', None | Some(8)) => (c, 8),
            ('S' | 'V', Some(n)) if n > 0 => (c, n),
            ('U', Some(n)) if n > 0 => ('U', n.checked_mul(4).ok_or_else(too_big)?),
            _ => return Err(refuse()),
        };
        (kind, size, unit, order)
    };
    let unit = if matches!(kind, 'M' | 'm') {
        datetime_unit(unit)?
    } else if unit.is_empty() {
        String::new()
    } else {
        return Err(refuse());
    };
    if size > MAX_ITEMSIZE {
        return Err(too_big());
    }
    let digits = if kind == 'U' { size / 4 } else { size };
    Ok((
        format!("{}{kind}{digits}{unit}", order_char(kind, size, order)),
        size,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_canonicalise_like_numpy() {
        // Pairs printed by numpy 2.4: np.dtype(s).str, itemsize.
        for (s, want, size) in [
            ("<f4", "<f4", 4),
            ("|i1", "|i1", 1),
            (">u1", "|u1", 1),
            ("=f8", "<f8", 8),
            ("|i4", "<i4", 4),
            ("b1", "|b1", 1),
            ("?", "|b1", 1),
            ("<S3", "|S3", 3),
            ("|U2", "<U2", 8),
            (">U2", ">U2", 8),
            ("<M8[ns]", "<M8[ns]", 8),
            ("M8[1s]", "<M8[s]", 8),
            ("<m8[25s]", "<m8[25s]", 8),
            ("<M8", "<M8", 8),
            ("|V7", "|V7", 7),
            ("int32", "<i4", 4),
            ("bool", "|b1", 1),
            ("complex128", "<c16", 16),
            ("datetime64[ns]", "<M8[ns]", 8),
            ("timedelta64[s]", "<m8[s]", 8),
        ] {
            assert_eq!(parse(s), Ok((want.to_string(), size)), "{s}");
        }
        for bad in [
            "",
            "O",
            "|O",
            "object",
            "T",
            "S0",
            "U0",
            "V",
            "f3",
            "i3",
            "b2",
            "<i4x",
            "int32[ns]",
            "M8[xs]",
            "M8[0s]",
            "M8[",
            "S01",
            "S99999999999999",
            "<",
            "float",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
