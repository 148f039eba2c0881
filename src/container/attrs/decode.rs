//! msgpack -> JSON: the strict one-value decoder behind [`super::msgpack_to_json`].

use serde_json::{Map, Value};

use super::*;

pub(super) struct Decoder<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
}

impl Decoder<'_> {
    pub(super) fn err(&self, why: impl Into<String>) -> AttrsError {
        AttrsError::Msgpack {
            offset: self.pos,
            why: why.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&[u8], AttrsError> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(self.err(format!("length {n} exceeds the {left} bytes left")));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn be<const N: usize>(&mut self) -> Result<[u8; N], AttrsError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }

    fn len_of(&mut self, width: usize) -> Result<usize, AttrsError> {
        Ok(match width {
            1 => usize::from(self.be::<1>()?[0]),
            2 => usize::from(u16::from_be_bytes(self.be()?)),
            _ => u32::from_be_bytes(self.be()?) as usize,
        })
    }

    pub(super) fn value(&mut self, depth: usize) -> Result<Value, AttrsError> {
        if depth > MAX_DEPTH {
            return Err(self.err(format!("nesting deeper than {MAX_DEPTH}")));
        }
        let m = self.be::<1>()?[0];
        Ok(match m {
            0x00..=0x7f => Value::from(m),
            0x80..=0x8f => self.map(usize::from(m & 0x0f), depth)?,
            0x90..=0x9f => self.array(usize::from(m & 0x0f), depth)?,
            0xa0..=0xbf => self.str(usize::from(m & 0x1f))?,
            0xc0 => Value::Null,
            0xc1 => return Err(self.err("reserved marker 0xc1")),
            0xc2 => Value::Bool(false),
            0xc3 => Value::Bool(true),
            0xc4..=0xc6 => {
                let n = self.len_of(1 << (m - 0xc4))?;
                let b = self.take(n)?;
                tag("__bytes__", Value::String(base64_encode(b)))
            }
            0xc7..=0xc9 => {
                let n = self.len_of(1 << (m - 0xc7))?;
                self.ext(n, depth)?
            }
            0xca => {
                let f = f32::from_be_bytes(self.be()?);
                let inner = match float_to_json(f64::from(f)) {
                    Value::Object(mut o) => o.remove(FLOAT_TAG).unwrap_or(Value::Null),
                    other => other,
                };
                tag("__float32__", inner)
            }
            0xcb => float_to_json(f64::from_be_bytes(self.be()?)),
            0xcc => Value::from(self.be::<1>()?[0]),
            0xcd => Value::from(u16::from_be_bytes(self.be()?)),
            0xce => Value::from(u32::from_be_bytes(self.be()?)),
            0xcf => Value::from(u64::from_be_bytes(self.be()?)),
            0xd0 => Value::from(i8::from_be_bytes(self.be()?)),
            0xd1 => Value::from(i16::from_be_bytes(self.be()?)),
            0xd2 => Value::from(i32::from_be_bytes(self.be()?)),
            0xd3 => Value::from(i64::from_be_bytes(self.be()?)),
            0xd4..=0xd8 => self.ext(1 << (m - 0xd4), depth)?,
            0xd9..=0xdb => {
                let n = self.len_of(1 << (m - 0xd9))?;
                self.str(n)?
            }
            0xdc | 0xdd => {
                let n = self.len_of(if m == 0xdc { 2 } else { 4 })?;
                self.array(n, depth)?
            }
            0xde | 0xdf => {
                let n = self.len_of(if m == 0xde { 2 } else { 4 })?;
                self.map(n, depth)?
            }
            0xe0..=0xff => Value::from(i8::from_be_bytes([m])),
        })
    }

    fn str(&mut self, n: usize) -> Result<Value, AttrsError> {
        let b = self.take(n)?;
        Ok(match std::str::from_utf8(b) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => tag("__str__", Value::String(base64_encode(b))),
        })
    }

    fn check_count(&self, n: usize, what: &str) -> Result<(), AttrsError> {
        // Every element takes at least one byte: a count larger than the bytes left is a lie
        // (and would otherwise drive a huge allocation).
        let left = self.buf.len() - self.pos;
        if n > left {
            Err(self.err(format!("{what} of {n} items but only {left} bytes left")))
        } else {
            Ok(())
        }
    }

    fn array(&mut self, n: usize, depth: usize) -> Result<Value, AttrsError> {
        self.check_count(n, "array")?;
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(self.value(depth + 1)?);
        }
        if items.first().and_then(Value::as_str) == Some("__tuple__") {
            items.remove(0);
            return Ok(tag("__tuple__", Value::Array(items)));
        }
        Ok(Value::Array(items))
    }

    fn map(&mut self, n: usize, depth: usize) -> Result<Value, AttrsError> {
        self.check_count(n.saturating_mul(2), "map")?;
        let mut pairs = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.value(depth + 1)?;
            let v = self.value(depth + 1)?;
            pairs.push((k, v));
        }
        let all_str = pairs.iter().all(|(k, _)| k.is_string());
        let mut obj = Map::with_capacity(n);
        if all_str {
            for (k, v) in &pairs {
                if let Value::String(k) = k {
                    obj.insert(k.clone(), v.clone());
                }
            }
        }
        let ambiguous = obj.len() == 1 && single_tag(&Value::Object(obj.clone())).is_some();
        if all_str && obj.len() == n && !ambiguous {
            return Ok(Value::Object(obj));
        }
        let list = pairs
            .into_iter()
            .map(|(k, v)| Value::Array(vec![k, v]))
            .collect();
        Ok(tag("__map__", Value::Array(list)))
    }

    fn ext(&mut self, n: usize, depth: usize) -> Result<Value, AttrsError> {
        let ty = i8::from_be_bytes(self.be()?);
        let payload = self.take(n)?;
        let generic = || Value::Array(vec![Value::from(ty), Value::String(base64_encode(payload))]);
        match ty {
            44 if payload.len() == 16 => {
                let mut re = [0u8; 8];
                let mut im = [0u8; 8];
                re.copy_from_slice(&payload[..8]);
                im.copy_from_slice(&payload[8..]);
                let (re, im) = (f64::from_be_bytes(re), f64::from_be_bytes(im));
                // A NaN with a payload other than the canonical one would not round-trip.
                let exact = |f: f64| !f.is_nan() || f.to_bits() == f64::NAN.to_bits();
                if !(exact(re) && exact(im)) {
                    return Ok(tag("__ext__", generic()));
                }
                let pair = vec![float_to_json(re), float_to_json(im)];
                Ok(tag("__complex__", Value::Array(pair)))
            }
            45 | 46 => {
                let mut inner = Decoder {
                    buf: payload,
                    pos: 0,
                };
                let decoded = inner.value(depth + 1);
                let whole = inner.pos == payload.len();
                let want_kind = |v: &Value| match ty {
                    45 => v.is_array(),
                    _ => v.is_object(),
                };
                if let Ok(v) = decoded {
                    // Only a canonical payload may become a typed tag (byte-exact round trip).
                    let canonical = whole
                        && want_kind(&v)
                        && json_to_msgpack(&v).is_ok_and(|b| b.as_slice() == payload);
                    if canonical {
                        let name = if ty == 45 { "__set__" } else { "__ndarray__" };
                        return Ok(tag(name, v));
                    }
                }
                Ok(tag("__ext__", generic()))
            }
            _ => Ok(tag("__ext__", generic())),
        }
    }
}
