//! Property tests of the filters: forward then backward is the identity, SIMD levels agree
//! with the scalar code, for any typesize and length proptest generates.

use super::*;
use proptest::prelude::*;

fn typesize() -> impl Strategy<Value = usize> {
    prop_oneof![1usize..=40, Just(64), Just(255)]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every available SIMD level gives the scalar twin's bytes.
    #[test]
    fn simd_equals_scalar(t in typesize(), src in proptest::collection::vec(any::<u8>(), 0..3000)) {
        let len = src.len();
        let mut want = vec![0; len];
        let mut got = vec![0; len];
        for level in levels() {
            shuffle::scalar::shuffle(t, &src, &mut want).unwrap();
            shuffle::shuffle_with(level, t, &src, &mut got).unwrap();
            prop_assert_eq!(&got, &want);
            shuffle::scalar::unshuffle(t, &src, &mut want).unwrap();
            shuffle::unshuffle_with(level, t, &src, &mut got).unwrap();
            prop_assert_eq!(&got, &want);
            for rule in [BitshuffleRule::Blosc1, BitshuffleRule::Blosc2] {
                bitshuffle::scalar::bitshuffle(t, &src, &mut want, rule).unwrap();
                bitshuffle::bitshuffle_with(level, t, &src, &mut got, rule).unwrap();
                prop_assert_eq!(&got, &want);
                bitshuffle::scalar::bitunshuffle(t, &src, &mut want, rule).unwrap();
                bitshuffle::bitunshuffle_with(level, t, &src, &mut got, rule).unwrap();
                prop_assert_eq!(&got, &want);
            }
            bytedelta::scalar::decode(t, &src, &mut want).unwrap();
            bytedelta::decode_with(level, t, &src, &mut got).unwrap();
            prop_assert_eq!(&got, &want);
        }
    }

    /// Random pipelines (DELTA only first, metas for SHUFFLE/BYTEDELTA) round-trip through
    /// forward and backward over a whole multi-block chunk, for both bitshuffle rules.
    #[test]
    fn pipelines_round_trip(
        t in typesize(),
        delta_first in any::<bool>(),
        slots in proptest::collection::vec(
            prop_oneof![Just(NOFILTER), Just(SHUFFLE), Just(BITSHUFFLE), Just(BYTEDELTA)], 5),
        metas in proptest::collection::vec(prop_oneof![Just(0u8), 1u8..=17], 6),
        version in prop_oneof![Just(2u8), Just(5u8)],
        input in proptest::collection::vec(any::<u8>(), 0..5000),
        blocksize in 1usize..3000,
    ) {
        let mut filters = [0u8; 6];
        filters[0] = if delta_first { DELTA } else { slots[0] };
        filters[1..].copy_from_slice(&slots);
        let mut meta = [0u8; 6];
        for i in 0..6 {
            if matches!(filters[i], SHUFFLE | BYTEDELTA) {
                meta[i] = metas[i];
            }
        }
        let p = Pipeline::new(filters, meta, t, version).unwrap();
        let got = chunk_round_trip(&p, &input, blocksize);
        prop_assert_eq!(got, input);
    }
}
