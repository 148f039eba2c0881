//! The codecs inside a stream (section 4): BloscLZ (ours), LZ4/LZ4HC, zlib and zstd adapters.
//!
//! [`StreamDecoders`] owns the reusable decompression contexts (a zstd `DCtx`, a zlib inflater)
//! and decodes one stream into a caller-given slice that must come out exactly full.

pub mod blosclz;
pub mod blosclz_encode;

use std::fmt;

use super::Codec;

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
                let r = match dict {
                    Some(d) => lz4_flex::block::decompress_into_with_dict(input, out, d),
                    None => lz4_flex::block::decompress_into(input, out),
                };
                r.map_err(|e| format!("lz4: {e}"))?
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
