//! Unit tests of the msgpack <-> JSON mapping.

use super::*;
use proptest::prelude::*;
use serde_json::json;

fn rt(bytes: &[u8]) -> Value {
    let v = msgpack_to_json(bytes).unwrap();
    assert_eq!(json_to_msgpack(&v).unwrap(), bytes, "round trip of {v}");
    v
}

#[test]
fn base64_known_vectors() {
    for (raw, enc) in [
        (&b""[..], ""),
        (b"f", "Zg=="),
        (b"fo", "Zm8="),
        (b"foo", "Zm9v"),
        (b"foob", "Zm9vYg=="),
        (b"\xff\xfe\x00", "//4A"),
    ] {
        assert_eq!(base64_encode(raw), enc);
        assert_eq!(base64_decode(enc).unwrap(), raw);
    }
    assert!(base64_decode("Zg=").is_none());
    assert!(base64_decode("Z===").is_none());
    assert!(base64_decode("Zg=a").is_none());
}

#[test]
fn attrs_scalars_round_trip() {
    assert_eq!(rt(&[0xa5, b'h', b'e', b'l', b'l', b'o']), json!("hello"));
    assert_eq!(rt(&[0x05]), json!(5));
    assert_eq!(rt(&[0xcc, 200]), json!(200));
    assert_eq!(rt(&[0xff]), json!(-1));
    assert_eq!(rt(&[0xd0, 0x80]), json!(-128));
    assert_eq!(rt(&[0xd1, 0xff, 0x7f]), json!(-129));
    assert_eq!(
        rt(&[0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        json!(u64::MAX)
    );
    let mut pi = vec![0xcb];
    pi.extend(std::f64::consts::PI.to_be_bytes());
    assert_eq!(rt(&pi), json!(std::f64::consts::PI));
    let mut one = vec![0xcb];
    one.extend(1.0f64.to_be_bytes());
    let v = rt(&one);
    assert_eq!(serde_json::to_string(&v).unwrap(), "1.0");
    let mut nan = vec![0xcb];
    nan.extend(f64::NAN.to_be_bytes());
    assert_eq!(rt(&nan), json!({"__float__": "nan"}));
    let mut inf = vec![0xcb];
    inf.extend(f64::NEG_INFINITY.to_be_bytes());
    assert_eq!(rt(&inf), json!({"__float__": "-inf"}));
    let mut f32v = vec![0xca];
    f32v.extend(1.5f32.to_be_bytes());
    assert_eq!(rt(&f32v), json!({"__float32__": 1.5}));
    assert_eq!(rt(&[0xc0]), Value::Null);
    assert_eq!(rt(&[0xc3]), json!(true));
}

#[test]
fn attrs_python_tuple_and_bytes() {
    // (1, 2) as python-blosc2 packs it.
    let mut t = vec![0x93, 0xa9];
    t.extend(b"__tuple__");
    t.extend([0x01, 0x02]);
    assert_eq!(rt(&t), json!({"__tuple__": [1, 2]}));
    assert_eq!(rt(&[0xc4, 2, 0xff, 0x00]), json!({"__bytes__": "/wA="}));
    assert_eq!(rt(&[0xa2, 0xff, 0xfe]), json!({"__str__": "//4="}));
}

#[test]
fn attrs_maps_and_ambiguity() {
    assert_eq!(rt(&[0x81, 0xa1, b'k', 0x92, 1, 2]), json!({"k": [1, 2]}));
    // {1: 2} has a non-string key.
    assert_eq!(rt(&[0x81, 0x01, 0x02]), json!({"__map__": [[1, 2]]}));
    // A real map {"__bytes__": 1} must not read back as a bin.
    let mut m = vec![0x81, 0xa9];
    m.extend(b"__bytes__");
    m.push(0x01);
    assert_eq!(rt(&m), json!({"__map__": [["__bytes__", 1]]}));
    // Repeated keys are kept.
    assert_eq!(
        rt(&[0x82, 0xa1, b'a', 1, 0xa1, b'a', 2]),
        json!({"__map__": [["a", 1], ["a", 2]]})
    );
}

#[test]
fn attrs_ext_types() {
    // np.arange(3, int16) as python-blosc2 packs it (docs/format/CONTAINERS.md 4.1).
    let mut nd = vec![0xc7, 0x25, 0x2e, 0x83, 0xa5];
    nd.extend(b"dtype");
    nd.extend([0x81, 0xa3]);
    nd.extend(b"str");
    nd.push(0xa3);
    nd.extend(b"<i2");
    nd.push(0xa5);
    nd.extend(b"shape");
    nd.extend([0x91, 0x03, 0xa4]);
    nd.extend(b"data");
    nd.extend([0xc4, 0x06, 0, 0, 1, 0, 2, 0]);
    assert_eq!(
        rt(&nd),
        json!({"__ndarray__": {"dtype": {"str": "<i2"}, "shape": [3], "data": {"__bytes__": "AAABAAIA"}}})
    );
    let mut c = vec![0xd8, 44];
    c.extend(1.0f64.to_be_bytes());
    c.extend((-2.5f64).to_be_bytes());
    assert_eq!(rt(&c), json!({"__complex__": [1.0, -2.5]}));
    assert_eq!(rt(&[0xc7, 3, 45, 0x92, 1, 2]), json!({"__set__": [1, 2]}));
    assert_eq!(rt(&[0xd4, 42, 7]), json!({"__ext__": [42, "Bw=="]}));
    // A non-canonical set payload stays a generic ext.
    assert_eq!(
        rt(&[0xc7, 3, 45, 0xdc, 0, 0]),
        json!({"__ext__": [45, "3AAA"]})
    );
}

#[test]
fn attrs_hostile_lengths_are_errors() {
    // str32 of 4 GiB - 1 with 2 bytes of data.
    let e = msgpack_to_json(&[0xdb, 0xff, 0xff, 0xff, 0xff, b'a', b'b']).unwrap_err();
    assert!(matches!(e, AttrsError::Msgpack { offset: 5, .. }), "{e}");
    assert!(msgpack_to_json(&[0xdd, 0xff, 0xff, 0xff, 0xff, 1]).is_err());
    assert!(msgpack_to_json(&[0xdf, 0xff, 0xff, 0xff, 0xff, 1, 1]).is_err());
    assert!(msgpack_to_json(&[0xc9, 0xff, 0xff, 0xff, 0xff, 1]).is_err());
    assert!(msgpack_to_json(&[0xc1]).is_err());
    assert!(msgpack_to_json(&[]).is_err());
    assert!(msgpack_to_json(&[0x01, 0x02]).is_err());
    let deep = vec![0x91; 100_000];
    assert!(msgpack_to_json(&deep).is_err());
    assert_eq!(content_to_json(&[0x01, 0x02]), json!({"__raw__": "AQI="}));
    assert_eq!(
        json_to_msgpack(&json!({"__raw__": "AQI="})).unwrap(),
        [1, 2]
    );
}

/// A msgpack value, encoded by the independent `rmp` encoder (smallest widths, like
/// python's msgpack).
#[derive(Debug, Clone)]
enum Mp {
    Nil,
    Bool(bool),
    Uint(u64),
    Sint(i64),
    F64(f64),
    F32(f32),
    Str(String),
    BadStr(Vec<u8>),
    Bin(Vec<u8>),
    Arr(Vec<Mp>),
    Map(Vec<(Mp, Mp)>),
    Ext(i8, Vec<u8>),
}

fn rmp_encode(v: &Mp, out: &mut Vec<u8>) {
    use rmp::encode as e;
    match v {
        Mp::Nil => e::write_nil(out).unwrap(),
        Mp::Bool(b) => e::write_bool(out, *b).unwrap(),
        Mp::Uint(u) => drop(e::write_uint(out, *u).unwrap()),
        Mp::Sint(i) => drop(e::write_sint(out, *i).unwrap()),
        Mp::F64(f) => e::write_f64(out, *f).unwrap(),
        Mp::F32(f) => e::write_f32(out, *f).unwrap(),
        Mp::Str(s) => e::write_str(out, s).unwrap(),
        Mp::BadStr(b) => {
            e::write_str_len(out, b.len() as u32).unwrap();
            out.extend_from_slice(b);
        }
        Mp::Bin(b) => e::write_bin(out, b).unwrap(),
        Mp::Arr(items) => {
            e::write_array_len(out, items.len() as u32).unwrap();
            items.iter().for_each(|i| rmp_encode(i, out));
        }
        Mp::Map(pairs) => {
            e::write_map_len(out, pairs.len() as u32).unwrap();
            for (k, v) in pairs {
                rmp_encode(k, out);
                rmp_encode(v, out);
            }
        }
        Mp::Ext(ty, data) => {
            e::write_ext_meta(out, data.len() as u32, *ty).unwrap();
            out.extend_from_slice(data);
        }
    }
}

fn mp() -> impl Strategy<Value = Mp> {
    let float = prop_oneof![
        any::<f64>().prop_filter("canonical NaN", |f| !f.is_nan()),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(-0.0),
    ];
    let leaf = prop_oneof![
        Just(Mp::Nil),
        any::<bool>().prop_map(Mp::Bool),
        any::<u64>().prop_map(Mp::Uint),
        (i64::MIN..0).prop_map(Mp::Sint),
        (0u64..300).prop_map(Mp::Uint),
        (-300i64..0).prop_map(Mp::Sint),
        float.prop_map(Mp::F64),
        any::<f32>()
            .prop_filter("canonical NaN", |f| !f.is_nan())
            .prop_map(Mp::F32),
        prop_oneof![
            ".{0,40}",
            Just("__tuple__".to_string()),
            Just("__bytes__".to_string()),
            Just("__map__".to_string()),
            "x{30,300}",
        ]
        .prop_map(Mp::Str),
        proptest::collection::vec(0x80u8..0xc0, 1..4).prop_map(Mp::BadStr),
        proptest::collection::vec(any::<u8>(), 0..300).prop_map(Mp::Bin),
        (any::<i8>(), proptest::collection::vec(any::<u8>(), 0..20))
            .prop_map(|(t, d)| Mp::Ext(t, d)),
        (40i8..47, proptest::collection::vec(any::<u8>(), 16..=16))
            .prop_map(|(t, d)| Mp::Ext(t, d)),
    ];
    leaf.prop_recursive(4, 64, 20, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..20).prop_map(Mp::Arr),
            proptest::collection::vec((inner.clone(), inner.clone()), 0..18).prop_map(Mp::Map),
            (prop_oneof![Just(45i8), Just(46i8)], inner.clone()).prop_map(|(t, v)| {
                let mut b = Vec::new();
                rmp_encode(&v, &mut b);
                Mp::Ext(t, b)
            }),
            proptest::collection::vec(inner, 0..5).prop_map(|mut v| {
                v.insert(0, Mp::Str("__tuple__".into()));
                Mp::Arr(v)
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    /// msgpack -> JSON -> msgpack is the identity on canonically encoded values, and the
    /// JSON survives a trip through its text form.
    #[test]
    fn attrs_msgpack_json_round_trip(v in mp()) {
        let mut bytes = Vec::new();
        rmp_encode(&v, &mut bytes);
        let json = msgpack_to_json(&bytes).unwrap();
        prop_assert_eq!(json_to_msgpack(&json).unwrap(), bytes.clone());
        let text = serde_json::to_string(&json).unwrap();
        let back: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(json_to_msgpack(&back).unwrap(), bytes);
    }

    /// Arbitrary bytes never panic the decoder.
    #[test]
    fn attrs_arbitrary_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(v) = msgpack_to_json(&b) {
            let _ = json_to_msgpack(&v);
        }
        let _ = content_to_json(&b);
    }
}

#[test]
fn attrs_json_side_errors() {
    assert!(json_to_msgpack(&json!({"__bytes__": "!!"})).is_err());
    assert!(json_to_msgpack(&json!({"__complex__": [1.0]})).is_err());
    assert!(json_to_msgpack(&json!([{"__raw__": "AA=="}])).is_err());
    assert!(json_to_msgpack(&json!({"__ext__": [300, "AA=="]})).is_err());
    let e = json_to_msgpack(&json!({"a": [1, ["__tuple__", 2]]})).unwrap_err();
    assert!(e.to_string().contains("/a/1"), "{e}");
    // Not a tag: two keys.
    assert_eq!(
        json_to_msgpack(&json!({"__bytes__": 1, "x": 2})).unwrap()[0],
        0x82
    );
}
