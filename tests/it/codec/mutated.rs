//! Mutated fixtures and hand-made chunks (proptest): no panic, and any `Ok` result has exactly
//! nbytes bytes.

use std::sync::OnceLock;

use b2fs::codec::{ChunkHeader, Decoder};
use proptest::prelude::*;

use super::fixtures;
use super::hand_made::one_stream_chunk;

/// Indices of the small fixtures (cheap to decode thousands of times).
fn small_indices() -> &'static [usize] {
    static I: OnceLock<Vec<usize>> = OnceLock::new();
    I.get_or_init(|| {
        fixtures()
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                let nbytes = f.col("nbytes").parse::<usize>().unwrap_or(usize::MAX);
                f.bytes.len() <= 64 * 1024 && nbytes <= 512 * 1024
            })
            .map(|(i, _)| i)
            .collect()
    })
}

#[derive(Debug, Clone)]
enum Mutation {
    /// Flip one bit at a (scaled) position.
    BitFlip(u32, u8),
    /// Set one byte at a (scaled) position.
    SetByte(u32, u8),
    /// Set one byte in the header/bstarts region.
    SetHead(u8, u8),
    /// Cut the chunk at a (scaled) length.
    Truncate(u32),
    /// Overwrite a 32-bit field at a 4-aligned offset in the first 128 bytes.
    Forge(u8, i32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let interesting = prop_oneof![
        Just(0i32),
        Just(1),
        Just(-1),
        Just(-255),
        Just(-256),
        Just(i32::MAX),
        Just(i32::MIN),
        Just(16),
        Just(32),
        0i32..70_000,
        any::<i32>(),
    ];
    prop_oneof![
        (any::<u32>(), 0u8..8).prop_map(|(p, b)| Mutation::BitFlip(p, b)),
        (any::<u32>(), any::<u8>()).prop_map(|(p, v)| Mutation::SetByte(p, v)),
        (0u8..64, any::<u8>()).prop_map(|(p, v)| Mutation::SetHead(p, v)),
        any::<u32>().prop_map(Mutation::Truncate),
        (0u8..32, interesting).prop_map(|(f, v)| Mutation::Forge(f, v)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    if n == 0 {
        return;
    }
    let scale = |p: u32| (p as usize) % n;
    match *m {
        Mutation::BitFlip(p, b) => bytes[scale(p)] ^= 1 << b,
        Mutation::SetByte(p, v) => bytes[scale(p)] = v,
        Mutation::SetHead(p, v) => {
            if (p as usize) < n {
                bytes[p as usize] = v;
            }
        }
        Mutation::Truncate(p) => bytes.truncate(scale(p)),
        Mutation::Forge(f, v) => {
            let off = 4 * f as usize;
            if off + 4 <= n {
                bytes[off..off + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
}

/// Decodes a mutated chunk every way; panics (the test failure) on a contract breach.
fn check_mutant(bytes: &[u8], window: (u32, u16)) {
    const LIMIT: usize = 4 << 20;
    let mut dec = Decoder::with_limit(LIMIT);
    let declared = ChunkHeader::parse(bytes).map(|h| h.nbytes).ok();
    if let Ok(out) = dec.decompress(bytes) {
        let n = declared.expect("Ok from a chunk whose header does not parse");
        assert_eq!(out.len(), n, "Ok result must have exactly nbytes bytes");
        assert!(n <= LIMIT);
    }
    let mut out = vec![0u8; window.1 as usize];
    if let Ok(k) = dec.decompress_range(bytes, window.0 as usize, &mut out) {
        assert!(k <= out.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 40_000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn mutated_fixtures_never_panic(
        pick in any::<prop::sample::Index>(),
        muts in prop::collection::vec(mutation(), 1..4),
        window in (any::<u32>(), any::<u16>()),
    ) {
        let idx = small_indices();
        if idx.is_empty() {
            return Ok(());
        }
        let f = &fixtures()[idx[pick.index(idx.len())]];
        let mut bytes = f.bytes.clone();
        for m in &muts {
            apply(&mut bytes, m);
        }
        let n = bytes.len().max(1) as u32;
        check_mutant(&bytes, (window.0 % (4 * n), window.1));
    }

    #[test]
    fn mutated_hand_made_chunks_never_panic(
        payload in prop::collection::vec(any::<u8>(), 0..64),
        csize in -300i32..80,
        flags in any::<u8>(),
        typesize in any::<u8>(),
        nbytes in 0i32..5000,
        blocksize in 0i32..5000,
        tail in prop::collection::vec(any::<u8>(), 0..16),
    ) {
        let mut c = one_stream_chunk(nbytes, csize, &payload);
        c[2] = flags;
        c[3] = typesize;
        c[8..12].copy_from_slice(&blocksize.to_le_bytes());
        c.extend_from_slice(&tail);
        let cb = c.len() as i32;
        c[12..16].copy_from_slice(&cb.to_le_bytes());
        check_mutant(&c, (0, 64));
    }
}
