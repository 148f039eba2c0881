//! JSON -> msgpack: the smallest-width encoder behind [`super::json_to_msgpack`], writing what
//! python-blosc2 (`msgpack.packb(..., use_bin_type=True)`) writes.

use serde_json::Value;

use super::*;

fn json_err(pointer: &str, why: impl Into<String>) -> AttrsError {
    AttrsError::Json {
        pointer: pointer.to_string(),
        why: why.into(),
    }
}

fn put_len(out: &mut Vec<u8>, n: usize, m8: Option<u8>, m16: u8, m32: u8) -> Result<(), String> {
    if let (Some(m8), Ok(b)) = (m8, u8::try_from(n)) {
        out.extend([m8, b]);
    } else if let Ok(s) = u16::try_from(n) {
        out.push(m16);
        out.extend(s.to_be_bytes());
    } else if let Ok(l) = u32::try_from(n) {
        out.push(m32);
        out.extend(l.to_be_bytes());
    } else {
        return Err(format!("length {n} does not fit msgpack's 32 bits"));
    }
    Ok(())
}

fn put_str(out: &mut Vec<u8>, b: &[u8], p: &str) -> Result<(), AttrsError> {
    if b.len() < 32 {
        out.push(0xa0 | b.len() as u8);
    } else {
        put_len(out, b.len(), Some(0xd9), 0xda, 0xdb).map_err(|w| json_err(p, w))?;
    }
    out.extend_from_slice(b);
    Ok(())
}

fn put_bin(out: &mut Vec<u8>, b: &[u8], p: &str) -> Result<(), AttrsError> {
    put_len(out, b.len(), Some(0xc4), 0xc5, 0xc6).map_err(|w| json_err(p, w))?;
    out.extend_from_slice(b);
    Ok(())
}

fn put_array_len(out: &mut Vec<u8>, n: usize, p: &str) -> Result<(), AttrsError> {
    if n < 16 {
        out.push(0x90 | n as u8);
        Ok(())
    } else {
        put_len(out, n, None, 0xdc, 0xdd).map_err(|w| json_err(p, w))
    }
}

fn put_map_len(out: &mut Vec<u8>, n: usize, p: &str) -> Result<(), AttrsError> {
    if n < 16 {
        out.push(0x80 | n as u8);
        Ok(())
    } else {
        put_len(out, n, None, 0xde, 0xdf).map_err(|w| json_err(p, w))
    }
}

fn put_uint(out: &mut Vec<u8>, v: u64) {
    if v < 128 {
        out.push(v as u8);
    } else if let Ok(b) = u8::try_from(v) {
        out.extend([0xcc, b]);
    } else if let Ok(s) = u16::try_from(v) {
        out.push(0xcd);
        out.extend(s.to_be_bytes());
    } else if let Ok(w) = u32::try_from(v) {
        out.push(0xce);
        out.extend(w.to_be_bytes());
    } else {
        out.push(0xcf);
        out.extend(v.to_be_bytes());
    }
}

fn put_int(out: &mut Vec<u8>, v: i64) {
    if let Ok(u) = u64::try_from(v) {
        put_uint(out, u);
    } else if v >= -32 {
        out.push(v as u8);
    } else if let Ok(b) = i8::try_from(v) {
        out.push(0xd0);
        out.extend(b.to_be_bytes());
    } else if let Ok(s) = i16::try_from(v) {
        out.push(0xd1);
        out.extend(s.to_be_bytes());
    } else if let Ok(w) = i32::try_from(v) {
        out.push(0xd2);
        out.extend(w.to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend(v.to_be_bytes());
    }
}

fn put_ext(out: &mut Vec<u8>, ty: i8, payload: &[u8], p: &str) -> Result<(), AttrsError> {
    let fixed = match payload.len() {
        1 => Some(0xd4),
        2 => Some(0xd5),
        4 => Some(0xd6),
        8 => Some(0xd7),
        16 => Some(0xd8),
        _ => None,
    };
    match fixed {
        Some(m) => out.push(m),
        None => put_len(out, payload.len(), Some(0xc7), 0xc8, 0xc9).map_err(|w| json_err(p, w))?,
    }
    out.extend(ty.to_be_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// A float from a number or a non-finite name.
fn json_float(v: &Value, p: &str) -> Result<f64, AttrsError> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| json_err(p, "not a float")),
        Value::String(s) => {
            nonfinite_from_str(s).ok_or_else(|| json_err(p, format!("unknown float name {s:?}")))
        }
        Value::Object(_) => match single_tag(v) {
            Some((FLOAT_TAG, Value::String(s))) => nonfinite_from_str(s)
                .ok_or_else(|| json_err(p, format!("unknown float name {s:?}"))),
            _ => Err(json_err(p, "expected a number or a __float__ tag")),
        },
        _ => Err(json_err(p, "expected a number")),
    }
}

fn b64_arg<'v>(v: &'v Value, p: &str, tag: &str) -> Result<Vec<u8>, AttrsError> {
    let s: &'v str = v
        .as_str()
        .ok_or_else(|| json_err(p, format!("{tag}: expected a base64 string")))?;
    base64_decode(s).ok_or_else(|| json_err(p, format!("{tag}: invalid base64")))
}

pub(super) fn encode(
    v: &Value,
    out: &mut Vec<u8>,
    p: &mut String,
    depth: usize,
) -> Result<(), AttrsError> {
    if depth > MAX_DEPTH {
        return Err(json_err(p, format!("nesting deeper than {MAX_DEPTH}")));
    }
    match v {
        Value::Null => out.push(0xc0),
        Value::Bool(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                put_uint(out, u);
            } else if let Some(i) = n.as_i64() {
                put_int(out, i);
            } else {
                let f = n
                    .as_f64()
                    .ok_or_else(|| json_err(p, "number out of range"))?;
                out.push(0xcb);
                out.extend(f.to_be_bytes());
            }
        }
        Value::String(s) => put_str(out, s.as_bytes(), p)?,
        Value::Array(items) => {
            if items.first().and_then(Value::as_str) == Some("__tuple__") {
                // python-blosc2 would read it back as a tuple without the marker.
                return Err(json_err(
                    p,
                    "a list starting with \"__tuple__\" is a tuple in python-blosc2; write {\"__tuple__\": [...]}",
                ));
            }
            put_array_len(out, items.len(), p)?;
            encode_items(items, out, p, depth)?;
        }
        Value::Object(m) => {
            if let Some((t, arg)) = single_tag(v) {
                return encode_tag(t, arg, out, p, depth);
            }
            put_map_len(out, m.len(), p)?;
            for (k, item) in m {
                put_str(out, k.as_bytes(), p)?;
                let len = p.len();
                p.push('/');
                p.push_str(&k.replace('~', "~0").replace('/', "~1"));
                encode(item, out, p, depth + 1)?;
                p.truncate(len);
            }
        }
    }
    Ok(())
}

fn encode_items(
    items: &[Value],
    out: &mut Vec<u8>,
    p: &mut String,
    depth: usize,
) -> Result<(), AttrsError> {
    for (i, item) in items.iter().enumerate() {
        let len = p.len();
        p.push_str(&format!("/{i}"));
        encode(item, out, p, depth + 1)?;
        p.truncate(len);
    }
    Ok(())
}

fn encode_tag(
    t: &str,
    arg: &Value,
    out: &mut Vec<u8>,
    p: &mut String,
    depth: usize,
) -> Result<(), AttrsError> {
    let here = format!("{p}/{t}");
    match t {
        "__bytes__" => put_bin(out, &b64_arg(arg, &here, t)?, &here)?,
        "__str__" => put_str(out, &b64_arg(arg, &here, t)?, &here)?,
        "__tuple__" => {
            let items = arg
                .as_array()
                .ok_or_else(|| json_err(&here, "__tuple__: expected an array"))?;
            put_array_len(out, items.len() + 1, &here)?;
            put_str(out, b"__tuple__", &here)?;
            p.push_str("/__tuple__");
            encode_items(items, out, p, depth)?;
            p.truncate(p.len() - "/__tuple__".len());
        }
        FLOAT_TAG => {
            let f = json_float(arg, &here)?;
            out.push(0xcb);
            out.extend(f.to_be_bytes());
        }
        "__float32__" => {
            let f = json_float(arg, &here)?;
            out.push(0xca);
            out.extend((f as f32).to_be_bytes());
        }
        "__map__" => {
            let pairs = arg
                .as_array()
                .ok_or_else(|| json_err(&here, "__map__: expected an array of pairs"))?;
            put_map_len(out, pairs.len(), &here)?;
            for (i, pair) in pairs.iter().enumerate() {
                let kv = pair
                    .as_array()
                    .filter(|kv| kv.len() == 2)
                    .ok_or_else(|| json_err(&here, format!("__map__: item {i} is not a pair")))?;
                let len = p.len();
                p.push_str(&format!("/__map__/{i}"));
                encode_items(kv, out, p, depth)?;
                p.truncate(len);
            }
        }
        "__complex__" => {
            let pair = arg
                .as_array()
                .filter(|a| a.len() == 2)
                .ok_or_else(|| json_err(&here, "__complex__: expected [re, im]"))?;
            let mut payload = Vec::with_capacity(16);
            for x in pair {
                payload.extend(json_float(x, &here)?.to_be_bytes());
            }
            put_ext(out, 44, &payload, &here)?;
        }
        "__set__" | "__ndarray__" => {
            let (ty, ok) = if t == "__set__" {
                (45, arg.is_array())
            } else {
                (46, arg.is_object())
            };
            if !ok {
                return Err(json_err(&here, format!("{t}: wrong argument type")));
            }
            let mut payload = Vec::new();
            let len = p.len();
            p.push('/');
            p.push_str(t);
            encode(arg, &mut payload, p, depth + 1)?;
            p.truncate(len);
            put_ext(out, ty, &payload, &here)?;
        }
        "__ext__" => {
            let pair = arg
                .as_array()
                .filter(|a| a.len() == 2)
                .ok_or_else(|| json_err(&here, "__ext__: expected [type, base64]"))?;
            let ty = pair[0]
                .as_i64()
                .and_then(|t| i8::try_from(t).ok())
                .ok_or_else(|| json_err(&here, "__ext__: type must be an integer -128..127"))?;
            put_ext(out, ty, &b64_arg(&pair[1], &here, t)?, &here)?;
        }
        _ => {
            return Err(json_err(
                &here,
                "__raw__ is only valid as the whole content",
            ));
        }
    }
    Ok(())
}
