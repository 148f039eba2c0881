//! The codecs inside a stream (section 4): BloscLZ (ours), LZ4/LZ4HC, zlib and zstd adapters.
//!
//! [`StreamDecoders`] owns the reusable decompression contexts (a zstd `DCtx`, a zlib inflater)
//! and decodes one stream into a caller-given slice that must come out exactly full.

pub mod blosclz;
pub mod blosclz_encode;
pub mod lz4;
pub mod lz4_encode;

use std::fmt;

use super::Codec;

#[cfg(test)]
mod tests {
    use super::copy_match;

    /// Every distance and length, with and without slack, against the byte-by-byte definition.
    #[test]
    fn copy_match_is_lz77_copy() {
        for dist in 1..40usize {
            for len in 0..100usize {
                for slack in [0usize, 3, 16, 40] {
                    let n = dist + len + slack;
                    let mut out: Vec<u8> = (0..n).map(|i| (i * 7 + 3) as u8).collect();
                    let mut want = out.clone();
                    for i in 0..len {
                        want[dist + i] = want[i];
                    }
                    copy_match(&mut out, dist, dist, len);
                    assert_eq!(
                        out[..dist + len],
                        want[..dist + len],
                        "dist {dist} len {len}"
                    );
                }
            }
        }
    }
}

/// Copies `len` bytes from `dist` bytes back to `op` inside `out`, with LZ77 semantics
/// (overlap repeats the pattern). The caller guarantees `1 <= dist <= op` and
/// `op + len <= out.len()`.
///
/// Short matches (<= 64 bytes) with 16 bytes of slack in the output are copied in fixed 16- or
/// 8-byte moves, each reading only bytes already final; they may write up to 15 bytes past
/// `len`, which later sequences rewrite (a stream must fill its output exactly).
#[inline(always)]
pub(crate) fn copy_match(out: &mut [u8], op: usize, dist: usize, len: usize) {
    let src = op - dist;
    if len <= 64 && out.len() - op >= len + 16 {
        if dist >= 16 {
            let mut i = 0;
            while i < len {
                out.copy_within(src + i..src + i + 16, op + i);
                i += 16;
            }
        } else if dist == 1 {
            let b = out[src];
            out[op..op + len].fill(b);
        } else if dist < 8 {
            // Period `dist` < 8: build 8 pattern bytes in a register and store them every
            // `step` bytes (the largest multiple of `dist` <= 8); no load depends on a store.
            // Byte loads: each lies inside one earlier store, so store forwarding works (an
            // 8-byte load spanning two fresh stores stalls).
            let mut seed = 0u64;
            for (k, &b) in out[src..op].iter().enumerate() {
                seed |= u64::from(b) << (8 * k);
            }
            let mut w = seed;
            let mut sh = 8 * dist;
            while sh < 64 {
                w |= seed << sh;
                sh += 8 * dist;
            }
            let w = w.to_le_bytes();
            let step = dist * (8 / dist);
            let mut i = 0;
            while i < len {
                out[op + i..op + i + 8].copy_from_slice(&w);
                i += step;
            }
        } else {
            // 8 <= dist < 16: 8-byte moves, each reading bytes already final.
            let mut i = 0;
            while i < len {
                out.copy_within(src + i..src + i + 8, op + i);
                i += 8;
            }
        }
    } else if dist >= len {
        out.copy_within(src..src + len, op);
    } else if dist == 1 {
        let b = out[src];
        out[op..op + len].fill(b);
    } else {
        // The written region from `src` is periodic with period `dist`, so a copy from `src`
        // of up to `op + done - src` bytes (a multiple of `dist` until the last) continues it.
        let mut done = 0;
        if dist < 8 && out.len() - op >= 80 {
            // Seed the first ~64 bytes with 8-byte pattern stores (instead of memmoves of 2,
            // 4, 8... bytes); `done` stays a multiple of `dist`.
            let mut seed = 0u64;
            for (k, &b) in out[src..op].iter().enumerate() {
                seed |= u64::from(b) << (8 * k);
            }
            let mut w = seed;
            let mut sh = 8 * dist;
            while sh < 64 {
                w |= seed << sh;
                sh += 8 * dist;
            }
            let w = w.to_le_bytes();
            let step = dist * (8 / dist);
            while done < 64 {
                out[op + done..op + done + 8].copy_from_slice(&w);
                done += step;
            }
            done = done.min(len);
        }
        while done < len {
            let n = (dist + done).min(len - done);
            out.copy_within(src..src + n, op + done);
            done += n;
        }
    }
}

/// Largest dictionary section a chunk may carry (section 5.2).
pub const MAX_DICT_SIZE: usize = 32 * 1024;

/// Reusable decompression contexts, created on first use and kept between streams and chunks.
#[derive(Default)]
pub struct StreamDecoders {
    zstd: Option<zstd::bulk::Decompressor<'static>>,
    /// Whether the zstd context currently holds a dictionary.
    zstd_has_dict: bool,
    zlib: Option<flate2::Decompress>,
}

impl fmt::Debug for StreamDecoders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamDecoders")
            .field("zstd", &self.zstd.is_some())
            .field("zstd_has_dict", &self.zstd_has_dict)
            .field("zlib", &self.zlib.is_some())
            .finish()
    }
}

impl StreamDecoders {
    /// Contexts are created lazily; this allocates nothing.
    pub fn new() -> Self {
        Self::default()
    }

    fn zstd_ctx(&mut self) -> Result<&mut zstd::bulk::Decompressor<'static>, String> {
        if self.zstd.is_none() {
            let ctx = zstd::bulk::Decompressor::new()
                .map_err(|e| format!("zstd: cannot create a context: {e}"))?;
            self.zstd = Some(ctx);
        }
        self.zstd
            .as_mut()
            .ok_or_else(|| "zstd: no context".to_string())
    }

    /// Loads the chunk's zstd dictionary into the context, or clears a previous one. Call once
    /// per chunk before decoding its zstd streams.
    pub fn prepare_zstd(&mut self, dict: Option<&[u8]>) -> Result<(), String> {
        match dict {
            Some(d) => {
                self.zstd_ctx()?
                    .set_dictionary(d)
                    .map_err(|e| format!("zstd: bad dictionary: {e}"))?;
                self.zstd_has_dict = true;
            }
            None if self.zstd_has_dict => {
                self.zstd_ctx()?
                    .set_dictionary(&[])
                    .map_err(|e| format!("zstd: cannot clear the dictionary: {e}"))?;
                self.zstd_has_dict = false;
            }
            None => {}
        }
        Ok(())
    }

    /// Decodes one codec stream `input` into `out`, which it must fill exactly. `dict` is the
    /// chunk's dictionary section (LZ4 uses it as the bytes preceding the output; zstd's was
    /// loaded by [`prepare_zstd`](Self::prepare_zstd)). The error is a reason without context;
    /// the caller adds block and stream.
    pub fn decode(
        &mut self,
        codec: Codec,
        input: &[u8],
        out: &mut [u8],
        dict: Option<&[u8]>,
    ) -> Result<(), String> {
        let expected = out.len();
        let produced = match codec {
            Codec::BloscLz => return blosclz::decompress(input, out).map_err(|e| e.to_string()),
            Codec::Lz4 | Codec::Lz4Hc => {
                return lz4::decompress(input, out, dict.unwrap_or_default())
                    .map_err(|e| e.to_string());
            }
            Codec::Zstd => self
                .zstd_ctx()?
                .decompress_to_buffer(input, out)
                .map_err(|e| format!("zstd: {e}"))?,
            Codec::Zlib => {
                let z = self
                    .zlib
                    .get_or_insert_with(|| flate2::Decompress::new(true));
                z.reset(true);
                let status = z
                    .decompress(input, out, flate2::FlushDecompress::Finish)
                    .map_err(|e| format!("zlib: {e}"))?;
                if status != flate2::Status::StreamEnd {
                    return Err(format!(
                        "zlib: stream does not end within {expected} bytes of output"
                    ));
                }
                usize::try_from(z.total_out()).unwrap_or(usize::MAX)
            }
            Codec::Snappy => return Err("snappy streams are not supported".to_string()),
        };
        if produced != expected {
            return Err(format!(
                "{} stream decodes to {produced} bytes, expected {expected}",
                codec.name()
            ));
        }
        Ok(())
    }
}
