//! Partial chunk reads (`chunk_read_at`) against whole-chunk decodes, for every fixture kind.

use super::*;

// ---------------------------------------------------------------------------------------------
// Partial chunk reads (chunk_read_at)

/// Every array of every fixture kind: contiguous and sparse frames, b2nd/caterva, bcolz
/// carrays and ctable columns.
fn all_fixture_arrays() -> Vec<(String, Array)> {
    let mut out = Vec::new();
    for (path, _) in frame_sidecars() {
        out.push((path.display().to_string(), open_array(&path)));
    }
    for kind in ["carray", "ctable"] {
        for (path, _) in bcolz_sidecars(kind) {
            match container::open(&path).unwrap() {
                Container::Array(a) => out.push((path.display().to_string(), a)),
                Container::Table(t) => {
                    for (name, a) in t.columns {
                        out.push((format!("{}/{name}", path.display()), a));
                    }
                }
            }
        }
    }
    out
}

/// SplitMix64, for deterministic windows.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[test]
fn container_chunk_read_at_matches_chunk_bytes_for_every_fixture_kind() {
    let mut st = 1u64;
    let mut kinds = std::collections::BTreeSet::new();
    let mut windows = 0usize;
    for (name, a) in all_fixture_arrays() {
        for i in 0..a.nchunks() {
            let full = a.chunk_bytes(i).unwrap().into_owned();
            let special = a.frame_index_entry(i).is_some_and(|e| e < 0);
            let mut probe = [0u8; 1];
            let stored = a.chunk_read_at(i, 0, &mut probe, None).unwrap();
            assert_eq!(stored, !special, "{name} chunk {i}: stored bytes or not");
            if !stored {
                continue;
            }
            kinds.insert(format!("{:?}", a.kind()));
            let n = full.len() as u64;
            let mut spans: Vec<(u64, u64)> = vec![(0, n), (0, 16.min(n)), (n - 1, 1), (0, 0)];
            for _ in 0..8 {
                let off = splitmix(&mut st) % n;
                let len = splitmix(&mut st) % (n - off + 1);
                spans.push((off, len));
            }
            for (off, len) in spans {
                let mut buf = vec![0xA5u8; len as usize];
                let ok = a.chunk_read_at(i, off, &mut buf, None);
                assert!(
                    matches!(ok, Ok(true)),
                    "{name} chunk {i} [{off}, +{len}): {ok:?}"
                );
                assert_eq!(
                    buf,
                    &full[off as usize..(off + len) as usize],
                    "{name} chunk {i} [{off}, +{len})"
                );
                windows += 1;
            }
            // Windows reaching past the chunk are errors, not panics or short reads.
            for (off, len) in [
                (n, 1),
                (n - 1, 2),
                (0, n + 1),
                (u64::MAX, 1),
                (u64::MAX - 1, 4),
            ] {
                let mut buf = vec![0u8; len as usize];
                let r = a.chunk_read_at(i, off, &mut buf, None);
                assert!(
                    matches!(r, Err(ContainerError::ChunkWindow { .. })),
                    "{name} chunk {i} [{off}, +{len}): {r:?}"
                );
            }
        }
        let mut buf = [0u8; 4];
        let r = a.chunk_read_at(a.nchunks(), 0, &mut buf, None);
        assert!(
            matches!(r, Err(ContainerError::NoSuchChunk { .. })),
            "{name}: {r:?}"
        );
    }
    for kind in ["Cframe", "Sframe", "BcolzCarray"] {
        assert!(
            kinds.contains(kind),
            "no stored chunk of kind {kind} tested: {kinds:?}"
        );
    }
    assert!(windows > 500, "{windows}");
}
