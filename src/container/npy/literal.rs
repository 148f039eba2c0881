//! The Python literals of NumPy dtype strings: a bounded, panic-free parser for the subset
//! `str(dtype)` produces (strings, non-negative integers, `True`/`False`/`None`, lists, tuples,
//! dicts), and `repr` of a `str` as CPython writes it (for field names in an NPY header).
//!
//! Input is hostile (a dtype string from a file): the parser refuses more than
//! [`MAX_LITERAL_LEN`] bytes, nesting deeper than [`MAX_DEPTH`], and anything outside the
//! subset, with the byte offset of the fault. It never panics and allocates at most a small
//! multiple of the input length.

/// Longest dtype string parsed (real ones are at most a few KiB).
pub const MAX_LITERAL_LEN: usize = 1 << 20;

/// Deepest nesting of lists/tuples/dicts accepted (a dtype nested 10 levels deep is ~20).
pub const MAX_DEPTH: usize = 64;

/// A parsed Python literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Lit {
    /// `'...'` or `"..."`.
    Str(String),
    /// A non-negative decimal integer.
    Int(u64),
    /// `True` / `False`.
    Bool(bool),
    /// `None`.
    None,
    /// `[...]`.
    List(Vec<Lit>),
    /// `(...)`.
    Tuple(Vec<Lit>),
    /// `{...}`, keys in input order.
    Dict(Vec<(Lit, Lit)>),
}

impl Lit {
    /// The items of a list or a tuple.
    pub(crate) fn items(&self) -> Option<&[Lit]> {
        match self {
            Lit::List(v) | Lit::Tuple(v) => Some(v),
            _ => None,
        }
    }
}

/// Parses `text` as one Python literal (surrounding whitespace allowed).
pub(crate) fn parse(text: &str) -> Result<Lit, String> {
    if text.len() > MAX_LITERAL_LEN {
        return Err(format!(
            "{} bytes, more than the {MAX_LITERAL_LEN} accepted",
            text.len()
        ));
    }
    let mut p = Parser {
        s: text.as_bytes(),
        text,
        pos: 0,
    };
    let v = p.value(0)?;
    p.ws();
    if p.pos != p.s.len() {
        return Err(p.err("trailing characters"));
    }
    Ok(v)
}

struct Parser<'a> {
    s: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn err(&self, why: &str) -> String {
        format!("{why} at offset {}", self.pos)
    }

    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.s.get(self.pos) {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn value(&mut self, depth: usize) -> Result<Lit, String> {
        if depth > MAX_DEPTH {
            return Err(self.err("nested too deep"));
        }
        self.ws();
        match self.peek() {
            Some(b'\'' | b'"') => self.string().map(Lit::Str),
            Some(b'0'..=b'9') => self.int().map(Lit::Int),
            Some(b'[') => self.seq(b']', depth).map(|(v, _)| Lit::List(v)),
            Some(b'(') => {
                let (v, comma) = self.seq(b')', depth)?;
                // `(x)` is x itself; `(x,)` is a 1-tuple.
                if v.len() == 1 && !comma {
                    Ok(v.into_iter().next().unwrap_or(Lit::None))
                } else {
                    Ok(Lit::Tuple(v))
                }
            }
            Some(b'{') => self.dict(depth),
            Some(b'A'..=b'Z' | b'a'..=b'z' | b'_') => {
                let start = self.pos;
                while let Some(b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'_') = self.peek() {
                    self.pos += 1;
                }
                match &self.s[start..self.pos] {
                    b"True" => Ok(Lit::Bool(true)),
                    b"False" => Ok(Lit::Bool(false)),
                    b"None" => Ok(Lit::None),
                    _ => {
                        self.pos = start;
                        Err(self.err("a name that is not a literal"))
                    }
                }
            }
            Some(_) => Err(self.err("unexpected character")),
            None => Err(self.err("unexpected end")),
        }
    }

    fn int(&mut self) -> Result<u64, String> {
        let mut v: u64 = 0;
        let start = self.pos;
        while let Some(d @ b'0'..=b'9') = self.peek() {
            v = v
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(d - b'0')))
                .ok_or_else(|| self.err("integer overflows u64"))?;
            self.pos += 1;
        }
        if self.pos - start > 1 && self.s[start] == b'0' {
            return Err(self.err("leading zero in an integer"));
        }
        if let Some(b'.' | b'e' | b'E' | b'x' | b'j' | b'_') = self.peek() {
            return Err(self.err("not a plain decimal integer"));
        }
        Ok(v)
    }

    /// Items up to `close`; returns whether the last item was followed by a comma.
    fn seq(&mut self, close: u8, depth: usize) -> Result<(Vec<Lit>, bool), String> {
        self.pos += 1;
        let mut out = Vec::new();
        let mut comma = false;
        loop {
            self.ws();
            if self.peek() == Some(close) {
                self.pos += 1;
                return Ok((out, comma));
            }
            if !out.is_empty() && !comma {
                return Err(self.err("expected ',' or a closing bracket"));
            }
            out.push(self.value(depth + 1)?);
            self.ws();
            comma = self.peek() == Some(b',');
            if comma {
                self.pos += 1;
            }
        }
    }

    fn dict(&mut self, depth: usize) -> Result<Lit, String> {
        self.pos += 1;
        let mut out = Vec::new();
        let mut comma = true;
        loop {
            self.ws();
            if self.peek() == Some(b'}') {
                self.pos += 1;
                return Ok(Lit::Dict(out));
            }
            if !comma {
                return Err(self.err("expected ',' or '}'"));
            }
            let k = self.value(depth + 1)?;
            self.ws();
            if self.peek() != Some(b':') {
                return Err(self.err("expected ':'"));
            }
            self.pos += 1;
            let v = self.value(depth + 1)?;
            out.push((k, v));
            self.ws();
            comma = self.peek() == Some(b',');
            if comma {
                self.pos += 1;
            }
        }
    }

    fn hex(&mut self, n: usize) -> Result<char, String> {
        let digits = self
            .text
            .get(self.pos..self.pos + n)
            .ok_or_else(|| self.err("truncated escape"))?;
        let v = u32::from_str_radix(digits, 16).map_err(|_| self.err("bad hex escape"))?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(self.err("bad hex escape"));
        }
        self.pos += n;
        char::from_u32(v).ok_or_else(|| self.err("escape is not a character"))
    }

    fn string(&mut self) -> Result<String, String> {
        let quote = self.s[self.pos];
        self.pos += 1;
        let mut out = String::new();
        loop {
            let rest = self.text.get(self.pos..).unwrap_or("");
            let Some(c) = rest.chars().next() else {
                return Err(self.err("unterminated string"));
            };
            self.pos += c.len_utf8();
            match c {
                _ if c as u32 == u32::from(quote) => return Ok(out),
                '\n' | '\r' => return Err(self.err("newline inside a string")),
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(self.err("unterminated string"));
                    };
                    self.pos += 1;
                    let ch = match e {
                        b'\\' => '\\',
                        b'\'' => '\'',
                        b'"' => '"',
                        b'n' => '\n',
                        b't' => '\t',
                        b'r' => '\r',
                        b'a' => '\x07',
                        b'b' => '\x08',
                        b'f' => '\x0c',
                        b'v' => '\x0b',
                        b'0' => '\0',
                        b'x' => self.hex(2)?,
                        b'u' => self.hex(4)?,
                        b'U' => self.hex(8)?,
                        _ => {
                            self.pos -= 1;
                            return Err(self.err("unsupported escape"));
                        }
                    };
                    out.push(ch);
                }
                _ => out.push(c),
            }
        }
    }
}

/// Whether CPython's `str.isprintable` holds for `c`, when b2fs can tell without Unicode
/// tables: exactly for ASCII and Latin-1, and for other characters only when they are
/// alphanumeric (letters and digits are printable in every Unicode version). `None`: unknown.
fn printable(c: char) -> Option<bool> {
    match c as u32 {
        0..=0x1f | 0x7f => Some(false),
        0x20..=0x7e => Some(true),
        0x80..=0xa0 | 0xad => Some(false),
        0xa1..=0xff => Some(true),
        _ if c.is_alphanumeric() => Some(true),
        _ => None,
    }
}

/// `repr(s)` as CPython 3 writes it (quote choice, escapes), or `None` when `s` holds a
/// character whose printability b2fs cannot decide (non-Latin-1 and not alphanumeric): the
/// caller then refuses the dtype rather than risk a header numpy would write differently.
pub(crate) fn repr_str(s: &str) -> Option<String> {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            _ if c == quote => {
                out.push('\\');
                out.push(c);
            }
            _ => match printable(c)? {
                true => out.push(c),
                false => out.push_str(&format!("\\x{:02x}", c as u32)),
            },
        }
    }
    out.push(quote);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_dtype_subset() {
        let v = parse("[('a', '<i4'), ('b', 'S3', (2,)), (('t', 'n'), 'u1')]").unwrap();
        let items = v.items().unwrap();
        assert_eq!(items.len(), 3);
        assert_eq!(
            items[1],
            Lit::Tuple(vec![
                Lit::Str("b".into()),
                Lit::Str("S3".into()),
                Lit::Tuple(vec![Lit::Int(2)])
            ])
        );
        let d = parse("{'names': ['x'], 'aligned': True, 'titles': [None]}").unwrap();
        assert!(matches!(d, Lit::Dict(ref kv) if kv.len() == 3));
        assert_eq!(parse("(5)").unwrap(), Lit::Int(5));
        assert_eq!(parse("()").unwrap(), Lit::Tuple(vec![]));
        assert_eq!(
            parse(r#"'a\'b\x41\u00e9\n'"#).unwrap(),
            Lit::Str("a'bA\u{e9}\n".into())
        );
    }

    #[test]
    fn hostile_literals_are_errors() {
        for bad in [
            "",
            "[",
            "[1 2]",
            "'abc",
            "01",
            "1.5",
            "-1",
            "foo",
            "{'a' 1}",
            "[,]",
            "(,)",
            "99999999999999999999999",
            "'\\q'",
            "'\\x4'",
            "'\\ud800'",
            "[1]]",
            "{1: }",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let deep = "[".repeat(10_000) + &"]".repeat(10_000);
        assert!(parse(&deep).unwrap_err().contains("deep"));
        let long = "'".to_string() + &"a".repeat(MAX_LITERAL_LEN) + "'";
        assert!(parse(&long).is_err());
    }

    #[test]
    fn repr_matches_cpython() {
        // Expected values printed by CPython 3.11 `repr`.
        assert_eq!(repr_str("abc").unwrap(), "'abc'");
        assert_eq!(repr_str("it's").unwrap(), "\"it's\"");
        assert_eq!(repr_str("a'\"b").unwrap(), "'a\\'\"b'");
        assert_eq!(repr_str("\\\n\x01\x7f").unwrap(), "'\\\\\\n\\x01\\x7f'");
        assert_eq!(
            repr_str("\u{e9}\u{80}\u{a0}\u{65e5}").unwrap(),
            "'\u{e9}\\x80\\xa0\u{65e5}'"
        );
        assert_eq!(repr_str("\u{2028}"), None);
    }
}
