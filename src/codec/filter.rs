//! The filter pipeline (section 3): forward and backward transforms of one block, slot by slot.
//!
//! This module owns [`Pipeline`] (validation of the six filter slots and the order in which the
//! transforms run, using the caller's buffers as ping-pong scratch), the run-time choice of SIMD
//! instruction set ([`SimdLevel`]) and the filter modules themselves:
//!
//! - [`shuffle`]: byte shuffle (id 1), SIMD twin in `shuffle_simd`;
//! - [`bitshuffle`]: bit shuffle (id 2), Blosc1 and Blosc2 block rules, SIMD twin in
//!   `bitshuffle_simd`;
//! - [`delta`]: XOR delta against block 0 (id 3);
//! - [`truncprec`]: precision truncation (id 4, encode only);
//! - [`bytedelta`]: bytedelta (id 35) and the old bytedelta (id 34), SIMD twin in
//!   `bytedelta_simd`.
//!
//! The safe twins (`shuffle`, `bitshuffle`, `delta`, `truncprec`, `bytedelta`) forbid unsafe code;
//! every `unsafe` block lives in the `*_simd` modules, which only exist on x86-64.

use std::sync::atomic::{AtomicU8, Ordering};

use super::CodecError;
use super::filter_id::{
    BITSHUFFLE, BYTEDELTA, BYTEDELTA_BUGGY, DELTA, NOFILTER, SHUFFLE, TRUNC_PREC,
};

pub mod bitshuffle;
pub mod bytedelta;
pub mod delta;
pub mod shuffle;
pub mod truncprec;

#[cfg(target_arch = "x86_64")]
mod bitshuffle_simd;
#[cfg(target_arch = "x86_64")]
mod bytedelta_simd;
#[cfg(target_arch = "x86_64")]
mod shuffle_simd;

pub use bitshuffle::BitshuffleRule;

/// The instruction set a filter kernel uses. Ordered: a level includes the ones below it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SimdLevel {
    /// Portable safe Rust.
    Scalar,
    /// x86-64 SSE2 (every x86-64 CPU has it).
    Sse2,
    /// x86-64 AVX2.
    Avx2,
}

static DETECTED: AtomicU8 = AtomicU8::new(0);

impl SimdLevel {
    fn code(self) -> u8 {
        match self {
            SimdLevel::Scalar => 1,
            SimdLevel::Sse2 => 2,
            SimdLevel::Avx2 => 3,
        }
    }

    /// The best level this CPU supports (detected once, then cached). The environment variable
    /// `B2FS_SIMD` (`scalar`, `sse2`, `avx2`) lowers it, e.g. for benchmarks.
    pub fn detect() -> SimdLevel {
        match DETECTED.load(Ordering::Relaxed) {
            1 => return SimdLevel::Scalar,
            2 => return SimdLevel::Sse2,
            3 => return SimdLevel::Avx2,
            _ => {}
        }
        let mut level = SimdLevel::Scalar;
        for l in [SimdLevel::Sse2, SimdLevel::Avx2] {
            if l.cpu_has() {
                level = l;
            }
        }
        if let Ok(v) = std::env::var("B2FS_SIMD") {
            let cap = match v.to_ascii_lowercase().as_str() {
                "scalar" | "none" | "0" => Some(SimdLevel::Scalar),
                "sse2" => Some(SimdLevel::Sse2),
                "avx2" => Some(SimdLevel::Avx2),
                _ => None,
            };
            if let Some(cap) = cap {
                level = level.min(cap);
            }
        }
        DETECTED.store(level.code(), Ordering::Relaxed);
        level
    }

    /// Whether this CPU can run kernels of this level (ignores `B2FS_SIMD`).
    pub fn cpu_has(self) -> bool {
        match self {
            SimdLevel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Sse2 => std::arch::is_x86_feature_detected!("sse2"),
            #[cfg(target_arch = "x86_64")]
            SimdLevel::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// Every level this CPU supports, lowest first (what differential tests iterate over).
    pub fn available() -> Vec<SimdLevel> {
        [SimdLevel::Scalar, SimdLevel::Sse2, SimdLevel::Avx2]
            .into_iter()
            .filter(|l| l.cpu_has())
            .collect()
    }
}

/// The `OutputSize` error when two buffers that must have the same length do not.
pub(crate) fn check_len(src: usize, dst: usize) -> Result<(), CodecError> {
    if src == dst {
        Ok(())
    } else {
        Err(CodecError::OutputSize {
            expected: src,
            actual: dst,
        })
    }
}

/// A human name for a filter id, as used in [`CodecError::UnsupportedFilter`].
pub fn filter_name(id: u8) -> &'static str {
    match id {
        NOFILTER => "none",
        SHUFFLE => "shuffle",
        BITSHUFFLE => "bitshuffle",
        DELTA => "delta",
        TRUNC_PREC => "trunc_prec",
        5..=31 => "reserved",
        32 => "ndcell",
        33 => "ndmean",
        BYTEDELTA_BUGGY => "bytedelta_buggy",
        BYTEDELTA => "bytedelta",
        36 => "int_trunc",
        37..=159 => "registered plugin",
        _ => "user",
    }
}

/// The validated filter pipeline of one chunk (section 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pipeline {
    /// Filter id per slot (slot 5 zeroed for version 3).
    pub filters: [u8; 6],
    /// Filter parameter per slot (slot 5 zeroed for version 3).
    pub filters_meta: [u8; 6],
    /// The chunk header's typesize byte.
    pub typesize: usize,
    /// The chunk's version byte (selects the bitshuffle block rule).
    pub version: u8,
}

/// One step of a planned pipeline run.
#[derive(Debug, Clone, Copy)]
enum Step {
    Shuffle(usize),
    Bitshuffle,
    Delta,
    TruncPrec(u8),
    Bytedelta(usize),
    BytedeltaBuggy(usize),
}

impl Step {
    /// Whether the backward transform can run in place (and so need not flip buffers).
    fn in_place_backward(self) -> bool {
        matches!(
            self,
            Step::Delta | Step::Bytedelta(_) | Step::BytedeltaBuggy(_)
        )
    }
}

impl Pipeline {
    /// Validates the six slots. Unknown, reserved, plugin and user ids are refused with
    /// [`CodecError::UnsupportedFilter`] naming the slot; a typesize of 0 is a bad header.
    /// Version 3 chunks ignore slot 5 (C-Blosc2 zeroes it and its meta).
    pub fn new(
        filters: [u8; 6],
        filters_meta: [u8; 6],
        typesize: usize,
        version: u8,
    ) -> Result<Pipeline, CodecError> {
        let mut filters = filters;
        let mut filters_meta = filters_meta;
        if version == 3 {
            filters[5] = 0;
            filters_meta[5] = 0;
        }
        if typesize == 0 {
            return Err(CodecError::BadHeader {
                what: "typesize 0".to_string(),
            });
        }
        for (slot, &id) in filters.iter().enumerate() {
            match id {
                NOFILTER | SHUFFLE | BITSHUFFLE | DELTA | TRUNC_PREC | BYTEDELTA_BUGGY
                | BYTEDELTA => {}
                _ => {
                    return Err(CodecError::UnsupportedFilter {
                        id,
                        name: filter_name(id),
                        slot,
                    });
                }
            }
        }
        Ok(Pipeline {
            filters,
            filters_meta,
            typesize,
            version,
        })
    }

    /// The bitshuffle block rule of this chunk version (section 3.3).
    pub fn bitshuffle_rule(&self) -> BitshuffleRule {
        BitshuffleRule::for_version(self.version)
    }

    /// The step of slot `i`, `Ok(None)` for an empty slot or one that is the identity, an
    /// error for an id this build does not run (only reachable when the public fields were
    /// set without [`Pipeline::new`]). `decode` leaves out TRUNC_PREC (nothing to undo).
    fn step(&self, i: usize, decode: bool) -> Result<Option<Step>, CodecError> {
        let meta = self.filters_meta[i];
        let grouped = if meta != 0 {
            usize::from(meta)
        } else {
            self.typesize
        };
        Ok(match self.filters[i] {
            SHUFFLE if grouped > 1 => Some(Step::Shuffle(grouped)),
            BITSHUFFLE => Some(Step::Bitshuffle),
            DELTA => Some(Step::Delta),
            TRUNC_PREC if !decode => Some(Step::TruncPrec(meta)),
            BYTEDELTA => Some(Step::Bytedelta(grouped)),
            BYTEDELTA_BUGGY => Some(Step::BytedeltaBuggy(grouped)),
            NOFILTER | SHUFFLE | TRUNC_PREC => None,
            id => {
                return Err(CodecError::UnsupportedFilter {
                    id,
                    name: filter_name(id),
                    slot: i,
                });
            }
        })
    }

    /// Whether decoding has nothing to undo: every slot is empty, TRUNC_PREC, or a SHUFFLE
    /// whose group size is 1.
    pub fn is_noop_backward(&self) -> bool {
        (0..6).all(|i| matches!(self.step(i, true), Ok(None)))
    }

    /// The group size of the one byte shuffle that decoding undoes, when that is all it does:
    /// `Some(t)` when every slot is empty or TRUNC_PREC except SHUFFLE slots of which exactly
    /// one has a group size `t > 1`, `Some(1)` when there is nothing to undo, `None`
    /// otherwise. Then any part of a decoded block is [`shuffle::unshuffle_range`] of the
    /// filtered block.
    pub fn shuffle_only(&self) -> Option<usize> {
        let mut only = 1;
        for i in 0..6 {
            match self.step(i, true) {
                Ok(None) => {}
                Ok(Some(Step::Shuffle(t))) if only == 1 => only = t,
                _ => return None,
            }
        }
        Some(only)
    }

    /// Whether some slot is DELTA (then block 0 must be decoded before the others).
    pub fn has_delta(&self) -> bool {
        self.filters.contains(&DELTA)
    }

    /// Undoes the pipeline on one block (slots 5 -> 0). `src` holds the filtered block and is
    /// clobbered (used as scratch); the result goes to `dst`, which must have the same length.
    /// `block0` is `None` when this is block 0 of the chunk, otherwise the fully decoded block 0
    /// (read only by DELTA, which needs it at least as long as this block's whole words).
    pub fn backward(
        &self,
        src: &mut [u8],
        dst: &mut [u8],
        block0: Option<&[u8]>,
    ) -> Result<(), CodecError> {
        check_len(src.len(), dst.len())?;
        let mut steps = [Step::Delta; 6];
        let mut n = 0;
        for i in (0..6).rev() {
            if let Some(s) = self.step(i, true)? {
                steps[n] = s;
                n += 1;
            }
        }
        let steps = &steps[..n];
        let flips = steps.iter().filter(|s| !s.in_place_backward()).count();
        // With an even number of buffer flips the data would end in `src`: run the first
        // in-place-capable step out of place instead (if there is one), else copy at the end.
        let mut spare_flip = flips % 2 == 0;
        let mut in_src = true;
        for &step in steps {
            let flip = !step.in_place_backward() || std::mem::take(&mut spare_flip);
            if flip {
                let (from, to): (&[u8], &mut [u8]) = if in_src {
                    (&*src, &mut *dst)
                } else {
                    (&*dst, &mut *src)
                };
                self.backward_step(step, from, to, block0)?;
                in_src = !in_src;
            } else {
                let buf: &mut [u8] = if in_src { &mut *src } else { &mut *dst };
                self.backward_in_place(step, buf, block0)?;
            }
        }
        if in_src {
            dst.copy_from_slice(src);
        }
        Ok(())
    }

    fn backward_step(
        &self,
        step: Step,
        from: &[u8],
        to: &mut [u8],
        block0: Option<&[u8]>,
    ) -> Result<(), CodecError> {
        match step {
            Step::Shuffle(t) => shuffle::unshuffle(t, from, to),
            Step::Bitshuffle => {
                bitshuffle::bitunshuffle(self.typesize, from, to, self.bitshuffle_rule())
            }
            Step::Delta => delta::decode(self.typesize, from, to, block0),
            Step::TruncPrec(_) => {
                to.copy_from_slice(from);
                Ok(())
            }
            Step::Bytedelta(t) => bytedelta::decode(t, from, to),
            Step::BytedeltaBuggy(t) => bytedelta::decode_buggy(t, from, to),
        }
    }

    fn backward_in_place(
        &self,
        step: Step,
        buf: &mut [u8],
        block0: Option<&[u8]>,
    ) -> Result<(), CodecError> {
        match step {
            Step::Delta => delta::decode_in_place(self.typesize, buf, block0),
            Step::Bytedelta(t) => {
                bytedelta::decode_in_place(t, buf);
                Ok(())
            }
            Step::BytedeltaBuggy(t) => {
                bytedelta::decode_buggy_in_place(t, buf);
                Ok(())
            }
            // Not reached: only the steps above are planned in place.
            _ => Err(CodecError::InvalidParams(
                "filter cannot run in place".to_string(),
            )),
        }
    }

    /// Applies the pipeline to one block (slots 0 -> 5). `src` is the original block, the
    /// result goes to `dst` (same length), `scratch` must hold at least `src.len()` bytes.
    /// `delta_ref` is the start of the original chunk input, the DELTA reference for blocks
    /// other than block 0 (section 3.4); `is_block0` says whether this is block 0.
    /// BYTEDELTA_BUGGY (34) is refused: writers must emit id 35.
    pub fn forward(
        &self,
        src: &[u8],
        dst: &mut [u8],
        scratch: &mut [u8],
        delta_ref: &[u8],
        is_block0: bool,
    ) -> Result<(), CodecError> {
        check_len(src.len(), dst.len())?;
        let len = src.len();
        let scratch = scratch
            .get_mut(..len)
            .ok_or(CodecError::InvalidParams(format!(
                "filter scratch has fewer than {len} bytes"
            )))?;
        let mut steps = [Step::Delta; 6];
        let mut n = 0;
        for i in 0..6 {
            if let Some(s) = self.step(i, false)? {
                if let Step::BytedeltaBuggy(_) = s {
                    return Err(CodecError::UnsupportedFilter {
                        id: BYTEDELTA_BUGGY,
                        name: "bytedelta_buggy (decode only)",
                        slot: i,
                    });
                }
                steps[n] = s;
                n += 1;
            }
        }
        if n == 0 {
            dst.copy_from_slice(src);
            return Ok(());
        }
        let reference = if is_block0 { None } else { Some(delta_ref) };
        // Every forward step runs out of place; start in whichever buffer makes the last step
        // land in `dst`.
        let mut to_dst = n % 2 == 1;
        let (first, rest) = steps[..n].split_at(1);
        {
            let to: &mut [u8] = if to_dst { &mut *dst } else { &mut *scratch };
            self.forward_step(first[0], src, to, reference)?;
        }
        for &step in rest {
            let (from, to): (&[u8], &mut [u8]) = if to_dst {
                (&*dst, &mut *scratch)
            } else {
                (&*scratch, &mut *dst)
            };
            self.forward_step(step, from, to, reference)?;
            to_dst = !to_dst;
        }
        Ok(())
    }

    fn forward_step(
        &self,
        step: Step,
        from: &[u8],
        to: &mut [u8],
        reference: Option<&[u8]>,
    ) -> Result<(), CodecError> {
        match step {
            Step::Shuffle(t) => shuffle::shuffle(t, from, to),
            Step::Bitshuffle => {
                bitshuffle::bitshuffle(self.typesize, from, to, self.bitshuffle_rule())
            }
            Step::Delta => delta::encode(self.typesize, from, to, reference),
            Step::TruncPrec(meta) => truncprec::trunc_prec(self.typesize, meta, from, to),
            Step::Bytedelta(t) => bytedelta::encode(t, from, to),
            Step::BytedeltaBuggy(_) => Err(CodecError::InvalidParams(
                "bytedelta 34 is decode only".to_string(),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 7 + i / 5) as u8).collect()
    }

    #[test]
    fn names_of_refused_ids() {
        assert_eq!(filter_name(32), "ndcell");
        assert_eq!(filter_name(33), "ndmean");
        assert_eq!(filter_name(36), "int_trunc");
        assert_eq!(filter_name(7), "reserved");
        assert_eq!(filter_name(161), "user");
        let err = Pipeline::new([0, 0, 0, 36, 0, 0], [0; 6], 4, 5).unwrap_err();
        assert_eq!(
            err,
            CodecError::UnsupportedFilter {
                id: 36,
                name: "int_trunc",
                slot: 3
            }
        );
    }

    /// A pipeline built with unknown ids through its public fields is refused at run time.
    #[test]
    fn hand_built_pipeline_with_unknown_id_is_refused() {
        let p = Pipeline {
            filters: [0, 0, 0, 0, 0, 200],
            filters_meta: [0; 6],
            typesize: 4,
            version: 5,
        };
        assert!(!p.is_noop_backward());
        let mut a = data(64);
        let mut b = vec![0; 64];
        assert!(matches!(
            p.backward(&mut a, &mut b, None),
            Err(CodecError::UnsupportedFilter {
                id: 200,
                slot: 5,
                ..
            })
        ));
        let mut s = vec![0; 64];
        assert!(p.forward(&a, &mut b, &mut s, &a, true).is_err());
    }

    #[test]
    fn simd_level_detection_is_cached_and_consistent() {
        let a = SimdLevel::detect();
        assert_eq!(a, SimdLevel::detect());
        assert!(a.cpu_has());
        assert!(SimdLevel::available().contains(&SimdLevel::Scalar));
    }

    /// Every combination of in-place and out-of-place steps ends in `dst` and inverts
    /// `forward` (the buffer-flip planning of `backward`).
    #[test]
    fn backward_planning_parities() {
        let ids = [NOFILTER, SHUFFLE, BITSHUFFLE, BYTEDELTA, DELTA];
        let input = data(1000);
        for a in ids {
            for b in ids {
                for c in ids {
                    // DELTA only in front of the others (the placement writers use).
                    if (b == DELTA && a != NOFILTER) || (c == DELTA && (a | b) != NOFILTER) {
                        continue;
                    }
                    let p = Pipeline::new([a, b, c, 0, 0, 0], [0; 6], 4, 5).unwrap();
                    let mut enc = vec![0; 1000];
                    let mut scratch = vec![0; 1000];
                    p.forward(&input, &mut enc, &mut scratch, &input, true)
                        .unwrap();
                    let mut out = vec![0xEE; 1000];
                    p.backward(&mut enc, &mut out, None).unwrap();
                    assert_eq!(out, input, "{a} {b} {c}");
                }
            }
        }
    }

    #[test]
    fn empty_and_tiny_blocks() {
        for len in 0..20 {
            for ts in [1, 2, 4, 8, 16, 255] {
                let p = Pipeline::new([DELTA, SHUFFLE, BITSHUFFLE, BYTEDELTA, 0, 0], [0; 6], ts, 5)
                    .unwrap();
                let input = data(len);
                let mut enc = vec![0; len];
                let mut scratch = vec![0; len];
                p.forward(&input, &mut enc, &mut scratch, &input, true)
                    .unwrap();
                let mut out = vec![0; len];
                p.backward(&mut enc, &mut out, None).unwrap();
                assert_eq!(out, input);
            }
        }
    }

    /// Odd typesizes (0, huge) and mismatched buffers give errors or identity, never panics.
    #[test]
    fn odd_inputs_do_not_panic() {
        let src = data(777);
        let mut dst = vec![0; 777];
        let mut short = vec![0; 776];
        for t in [0usize, 1, 3, 254, 255, 256, 1000, usize::MAX] {
            for level in SimdLevel::available() {
                shuffle::shuffle_with(level, t, &src, &mut dst).unwrap();
                shuffle::unshuffle_with(level, t, &src, &mut dst).unwrap();
                for rule in [BitshuffleRule::Blosc1, BitshuffleRule::Blosc2] {
                    bitshuffle::bitshuffle_with(level, t, &src, &mut dst, rule).unwrap();
                    bitshuffle::bitunshuffle_with(level, t, &src, &mut dst, rule).unwrap();
                    assert!(bitshuffle::bitshuffle_with(level, t, &src, &mut short, rule).is_err());
                }
                bytedelta::decode_with(level, t, &src, &mut dst).unwrap();
                assert!(shuffle::shuffle_with(level, t, &src, &mut short).is_err());
                assert!(shuffle::unshuffle_with(level, t, &src, &mut short).is_err());
                assert!(bytedelta::decode_with(level, t, &src, &mut short).is_err());
            }
            bytedelta::encode(t, &src, &mut dst).unwrap();
            bytedelta::decode_buggy(t, &src, &mut dst).unwrap();
            delta::encode(t, &src, &mut dst, None).unwrap();
            delta::decode(t, &src, &mut dst, Some(&src)).unwrap();
            assert!(delta::decode(t, &src, &mut dst, Some(&src[..8])).is_err() || t == 0);
            assert!(truncprec::trunc_prec(t, 10, &src, &mut dst).is_err());
            assert!(bytedelta::encode(t, &src, &mut short).is_err());
        }
    }
}
