//! Filter kernels alone (shuffle, bitshuffle, bytedelta, delta), GB/s at every SIMD level the
//! CPU has (scalar, SSE2, AVX2), then whole backward pipelines at the default level, as the
//! decoder runs them per block: thread CPU time, best of 5. No reference library runs the
//! filters alone, so the levels are compared with each other in the same run (BENCHMARKS.md,
//! "Filters alone").
//!
//! Run with:
//!
//! ```text
//! cargo bench --bench filters
//! ```
//!
//! `B2FS_SPEED_ONLY=unshuffle` keeps the kernels whose name contains the text;
//! `B2FS_SPEED_TS=3,12` sets the typesizes (default 4,8).

use b2fs::codec::filter::{
    BitshuffleRule, Pipeline, SimdLevel, bitshuffle, bytedelta, delta, shuffle,
};
use b2fs::codec::filter_id::{BITSHUFFLE, BYTEDELTA, DELTA, SHUFFLE};

/// Deterministic pseudo-random bytes (xorshift), mixed with runs so deltas are not all noise.
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if (x >> 60) < 4 {
                (i / 7) as u8
            } else {
                x as u8
            }
        })
        .collect()
}

/// Every SIMD level this CPU runs.
fn levels() -> Vec<SimdLevel> {
    SimdLevel::available()
}

fn main() {
    type Kernel = fn(SimdLevel, usize, &[u8], &mut [u8]);
    let kernels: [(&str, Kernel); 7] = [
        ("shuffle", |l, t, s, d| {
            shuffle::shuffle_with(l, t, s, d).unwrap()
        }),
        ("unshuffle", |l, t, s, d| {
            shuffle::unshuffle_with(l, t, s, d).unwrap()
        }),
        ("bitshuffle", |l, t, s, d| {
            bitshuffle::bitshuffle_with(l, t, s, d, BitshuffleRule::Blosc2).unwrap()
        }),
        ("bitunshuffle", |l, t, s, d| {
            bitshuffle::bitunshuffle_with(l, t, s, d, BitshuffleRule::Blosc2).unwrap()
        }),
        ("bytedelta_dec", |l, t, s, d| {
            bytedelta::decode_with(l, t, s, d).unwrap()
        }),
        ("bytedelta_enc", |_, t, s, d| {
            bytedelta::encode(t, s, d).unwrap()
        }),
        ("delta_dec_block0", |_, t, s, d| {
            delta::decode(t, s, d, None).unwrap()
        }),
    ];
    // B2FS_SPEED_ONLY=unshuffle restricts the kernels by name; B2FS_SPEED_TS=3,12 changes
    // the typesizes (default 4,8).
    let only = std::env::var("B2FS_SPEED_ONLY").ok();
    let typesizes: Vec<usize> = std::env::var("B2FS_SPEED_TS")
        .ok()
        .map(|v| v.split(',').filter_map(|x| x.parse().ok()).collect())
        .unwrap_or(vec![4, 8]);
    for size in [256 << 10, 4 << 20] {
        let src = bytes(size, 99);
        let mut dst = vec![0u8; size];
        for (name, k) in kernels {
            if !only.as_deref().is_none_or(|o| name.contains(o)) {
                continue;
            }
            for t in typesizes.clone() {
                let mut line = format!("{name:>14} ts={t} {:>5} KiB:", size >> 10);
                for level in levels() {
                    // Best of 5 runs of thread CPU time: the machine is shared.
                    let reps = ((64 << 20) / size).max(1);
                    k(level, t, &src, &mut dst);
                    let mut best = f64::MAX;
                    for _ in 0..5 {
                        let start = thread_cpu_secs();
                        for _ in 0..reps {
                            k(level, t, &src, &mut dst);
                        }
                        best = best.min(thread_cpu_secs() - start);
                    }
                    let gbs = (reps * size) as f64 / best / 1e9;
                    line += &format!("  {level:?} {gbs:6.2} GB/s");
                }
                eprintln!("{line}");
            }
        }
    }
    // Whole backward pipelines (default SIMD level), as the decoder runs them per block.
    let pipes: [(&str, [u8; 6]); 5] = [
        ("shuffle", [0, 0, 0, 0, 0, SHUFFLE]),
        ("bitshuffle", [0, 0, 0, 0, 0, BITSHUFFLE]),
        ("shuffle+bytedelta", [SHUFFLE, BYTEDELTA, 0, 0, 0, 0]),
        ("delta+shuffle", [0, 0, 0, 0, DELTA, SHUFFLE]),
        ("delta+shuffle blk1", [0, 0, 0, 0, DELTA, SHUFFLE]),
    ];
    for size in [256 << 10, 4 << 20] {
        let src = bytes(size, 5);
        let block0 = bytes(size, 6);
        let mut work = src.clone();
        let mut dst = vec![0u8; size];
        for t in typesizes.clone() {
            let mut line = format!("backward ts={t} {:>5} KiB:", size >> 10);
            for (name, f) in pipes {
                let p = Pipeline::new(f, [0; 6], t, 5).unwrap();
                let b0 = name.ends_with("blk1").then_some(&block0[..]);
                let reps = ((64 << 20) / size).max(1);
                let mut best = f64::MAX;
                for _ in 0..5 {
                    let mut spent = 0.0;
                    for _ in 0..reps {
                        work.copy_from_slice(&src);
                        let start = thread_cpu_secs();
                        p.backward(&mut work, &mut dst, b0).unwrap();
                        spent += thread_cpu_secs() - start;
                    }
                    best = best.min(spent);
                }
                let gbs = (reps * size) as f64 / best / 1e9;
                line += &format!("  {name} {gbs:.2}");
            }
            eprintln!("{line} GB/s");
        }
    }
}

/// CPU time of the calling thread, in seconds (the machine is shared, so wall time is noisy).
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0);
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
