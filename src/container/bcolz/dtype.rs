//! The NumPy dtype strings bcolz writes in `meta/storage` (`str(numpy_dtype)`), and the sizes
//! they imply: the itemsize, and the typesize bcolz passes to Blosc.

/// Size facts derived from a NumPy dtype string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DtypeInfo {
    /// `np.dtype(s).itemsize`.
    pub itemsize: usize,
    /// The typesize bcolz passes to Blosc: the itemsize, except `S` -> 1, `U` -> 4, and sizes
    /// over 255 -> 1.
    pub blosc_typesize: usize,
}

/// Parses the dtype strings bcolz writes (`str(numpy_dtype)`: `int32`, `float64`, `bool`,
/// `|S3`, `<U3`, `datetime64[ns]`, `>i4`, ...). `None` for `object`, structured dtypes and
/// anything unknown.
pub fn dtype_info(s: &str) -> Option<DtypeInfo> {
    let s = s.trim();
    let named = |n: usize| {
        Some(DtypeInfo {
            itemsize: n,
            blosc_typesize: n,
        })
    };
    let base = s.split('[').next().unwrap_or(s);
    match base {
        "bool" | "int8" | "uint8" => return named(1),
        "int16" | "uint16" | "float16" => return named(2),
        "int32" | "uint32" | "float32" => return named(4),
        "int64" | "uint64" | "float64" | "complex64" | "datetime64" | "timedelta64" => {
            return named(8);
        }
        "complex128" | "float128" | "longdouble" => return named(16),
        "complex256" | "clongdouble" => return named(32),
        _ => {}
    }
    let t = base.trim_start_matches(['<', '>', '|', '=']);
    let mut chars = t.chars();
    let kind = chars.next()?;
    let digits = chars.as_str();
    let n: usize = if digits.is_empty() {
        match kind {
            '?' | 'b' | 'B' => 1,
            _ => return None,
        }
    } else {
        digits.parse().ok()?
    };
    let (itemsize, ts) = match kind {
        'b' | '?' | 'i' | 'u' | 'f' | 'c' | 'M' | 'm' => (n, n),
        'S' | 'a' => (n, 1),
        'U' => (n.checked_mul(4)?, 4),
        'V' => (n, n),
        _ => return None,
    };
    Some(DtypeInfo {
        itemsize,
        blosc_typesize: if ts > 255 { 1 } else { ts },
    })
}
