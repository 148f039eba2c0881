//! A bounds-checked msgpack cursor for the fixed structures of frames (header, metalayer
//! section, trailer, `b2nd`/`caterva` metalayers), with exact marker checks and the byte
//! offset of every failure.
//!
//! It does not decode arbitrary msgpack values into JSON (that is [`super::attrs`]) and it
//! knows no file paths: a [`Fault`] carries a file offset and the frame parser adds the path.
//!
//! See `docs/format/CONTAINERS.md` sections 1.2, 1.3, 1.6 and 4.3 for the exact widths C-Blosc2
//! writes (`d2`/`d3`/`cd`/`de`/`dc`/`c6`/`db`/`ce`). All multi-byte msgpack scalars are
//! big-endian.

/// Where and why a structure could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fault {
    /// The structure or field.
    pub what: String,
    /// Byte offset in the file.
    pub offset: u64,
    /// The reason.
    pub why: String,
}

impl Fault {
    /// A fault at `offset` in structure `what`.
    pub(crate) fn new(what: impl Into<String>, offset: u64, why: impl Into<String>) -> Fault {
        Fault {
            what: what.into(),
            offset,
            why: why.into(),
        }
    }
}

/// A read position inside a byte slice that lives at file offset `base`.
#[derive(Debug, Clone)]
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `buf`, whose first byte is at file offset `base`.
    pub(crate) fn new(buf: &'a [u8], base: u64) -> Cursor<'a> {
        Cursor { buf, pos: 0, base }
    }

    /// Moves to `pos` inside the slice (checked when the next read happens).
    pub(crate) fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// File offset of the current position.
    pub(crate) fn offset(&self) -> u64 {
        self.base.saturating_add(self.pos as u64)
    }

    /// A fault at the current position.
    pub(crate) fn fault(&self, what: &str, why: impl Into<String>) -> Fault {
        Fault::new(what, self.offset(), why)
    }

    /// Takes the next `n` bytes.
    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Fault> {
        let end = self.pos.checked_add(n);
        match end.and_then(|end| self.buf.get(self.pos..end)) {
            Some(bytes) => {
                self.pos += n;
                Ok(bytes)
            }
            None => Err(self.fault(
                what,
                format!(
                    "needs {n} bytes, only {} left",
                    self.buf.len().saturating_sub(self.pos)
                ),
            )),
        }
    }

    /// Takes `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Fault> {
        let bytes = self.take(N, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    /// The next byte.
    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, Fault> {
        Ok(self.array::<1>(what)?[0])
    }

    /// Requires the next byte to be `marker`.
    pub(crate) fn expect(&mut self, marker: u8, what: &str) -> Result<(), Fault> {
        let at = self.offset();
        let got = self.u8(what)?;
        if got == marker {
            Ok(())
        } else {
            Err(Fault::new(
                what,
                at,
                format!("expected msgpack marker 0x{marker:02x}, found 0x{got:02x}"),
            ))
        }
    }

    /// Big-endian u16.
    pub(crate) fn be_u16(&mut self, what: &str) -> Result<u16, Fault> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    /// Big-endian i16.
    pub(crate) fn be_i16(&mut self, what: &str) -> Result<i16, Fault> {
        Ok(i16::from_be_bytes(self.array(what)?))
    }

    /// Big-endian u32.
    pub(crate) fn be_u32(&mut self, what: &str) -> Result<u32, Fault> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    /// Big-endian i32.
    pub(crate) fn be_i32(&mut self, what: &str) -> Result<i32, Fault> {
        Ok(i32::from_be_bytes(self.array(what)?))
    }

    /// Big-endian i64.
    pub(crate) fn be_i64(&mut self, what: &str) -> Result<i64, Fault> {
        Ok(i64::from_be_bytes(self.array(what)?))
    }

    /// `d2` + int32.
    pub(crate) fn int32(&mut self, what: &str) -> Result<i32, Fault> {
        self.expect(0xd2, what)?;
        self.be_i32(what)
    }

    /// `d3` + int64.
    pub(crate) fn int64(&mut self, what: &str) -> Result<i64, Fault> {
        self.expect(0xd3, what)?;
        self.be_i64(what)
    }

    /// A positive fixint (`0x00..=0x7f`).
    pub(crate) fn pos_fixint(&mut self, what: &str) -> Result<u8, Fault> {
        let at = self.offset();
        let b = self.u8(what)?;
        if b < 0x80 {
            Ok(b)
        } else {
            Err(Fault::new(
                what,
                at,
                format!("expected a positive fixint, found 0x{b:02x}"),
            ))
        }
    }

    /// A fixarray header (`0x90..=0x9f`); returns its length.
    pub(crate) fn fixarray(&mut self, what: &str) -> Result<usize, Fault> {
        let at = self.offset();
        let b = self.u8(what)?;
        if b & 0xf0 == 0x90 {
            Ok(usize::from(b & 0x0f))
        } else {
            Err(Fault::new(
                what,
                at,
                format!("expected a msgpack fixarray, found 0x{b:02x}"),
            ))
        }
    }

    /// A metalayer name: a fixstr (`0b101xxxxx`), returned as bytes.
    pub(crate) fn fixstr(&mut self, what: &str) -> Result<&'a [u8], Fault> {
        let at = self.offset();
        let b = self.u8(what)?;
        if b & 0xe0 != 0xa0 {
            return Err(Fault::new(
                what,
                at,
                format!("expected a msgpack fixstr, found 0x{b:02x}"),
            ));
        }
        self.take(usize::from(b & 0x1f), what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_take_past_end_is_fault_with_offset() {
        let mut c = Cursor::new(&[1, 2, 3], 100);
        assert_eq!(c.u8("a").unwrap(), 1);
        let f = c.take(5, "field").unwrap_err();
        assert_eq!(f.offset, 101);
        assert_eq!(f.what, "field");
    }

    #[test]
    fn cursor_markers_are_exact() {
        let mut c = Cursor::new(&[0xd2, 0, 0, 0, 7, 0xd3, 0, 0, 0, 0, 0, 0, 0, 9], 0);
        assert_eq!(c.int32("x").unwrap(), 7);
        assert_eq!(c.int64("y").unwrap(), 9);
        let mut c = Cursor::new(&[0xd3, 0, 0, 0, 7], 10);
        let f = c.int32("x").unwrap_err();
        assert_eq!(f.offset, 10);
        assert!(f.why.contains("0xd2"));
    }

    #[test]
    fn cursor_fixstr_and_fixarray() {
        let mut c = Cursor::new(&[0xa4, b'b', b'2', b'n', b'd', 0x93], 0);
        assert_eq!(c.fixstr("n").unwrap(), b"b2nd");
        assert_eq!(c.fixarray("a").unwrap(), 3);
        let mut c = Cursor::new(&[0xc0], 0);
        assert!(c.fixstr("n").is_err());
    }
}
