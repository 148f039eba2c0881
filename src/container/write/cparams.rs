//! The compression parameters of the chunks a commit adds: what the source's existing chunks
//! use ([`chunk_cparams`]), so that new chunks read like old ones to python-blosc2, C-Blosc2
//! and bcolz.
//!
//! Knows chunk headers and the frame header / bcolz `storage` defaults only; the caller
//! compresses with the result ([`crate::codec::compress`]). Spec: `docs/format/CONTAINERS.md`
//! 1.2 (the frame header's codec and filter fields), 4.3 (b2nd blockshape) and 5 (bcolz
//! `storage.cparams`).

use serde_json::Value;

use super::unsupported;
use crate::codec::filter_id::{NOFILTER, TRUNC_PREC};
use crate::codec::{Blocksize, CParams, ChunkFormat, ChunkHeader, Codec, SplitMode};
use crate::container::frame::FrameInfo;
use crate::container::{Array, ContainerError, Inner};

/// Compression parameters for new chunks: what the existing chunks use, read from the header
/// of the first regular chunk whose header is readable (codec, filters, filters_meta,
/// typesize; split from the dont-split flag; blocksize: the chunk's for b2nd/caterva arrays,
/// whose blocks are the blockshape, automatic otherwise). clevel is not stored in chunk
/// headers: it comes from the frame header (codec_flags high nibble) or the bcolz
/// `storage.cparams.clevel`. Frames get [`ChunkFormat::Blosc2`], bcolz
/// [`ChunkFormat::Blosc1`]. Without a regular chunk the frame header's defaults (bcolz:
/// `storage.cparams`) are used.
///
/// New chunks never use the lossy TRUNC_PREC filter, whatever the old ones and the frame
/// header name: a file system keeps the bytes written (a chunk file written whole reads back
/// the same), and every chunk names its own filters, so python-blosc2 reads them as they are.
/// This also keeps a header that parses but lies (one flipped byte makes a shuffle slot
/// TRUNC_PREC) from making new chunks lose precision.
///
/// A frame's first readable header is checked against the frame header: when its codec or
/// typesize is not the frame's (a flipped byte in a header that still parses), new chunks
/// take the frame header's defaults instead, so that they are compressed as the frame says
/// its chunks are (logged once per call, that is once per commit).
///
/// # Errors
///
/// A chunk header that cannot be read or names a codec b2fs cannot encode.
pub fn chunk_cparams(array: &Array) -> Result<CParams, ContainerError> {
    let path = array.path();
    let first = array.first_regular_header()?;
    let header_codec = |h: &ChunkHeader| {
        h.codec()
            .map_err(|e| unsupported(path, format!("new chunks for this source: {e}")))
    };
    match &array.inner {
        Inner::Frame(f) => {
            let info = f.info();
            let clevel = info.clevel().min(9);
            let first = first.filter(|h| match frame_disagrees(h, info) {
                None => true,
                Some(what) => {
                    log::warn!(
                        "{}: the first readable chunk header says {what}: new chunks use the \
                         frame header's parameters",
                        path.display()
                    );
                    false
                }
            });
            let mut p = match &first {
                Some(h) => CParams {
                    format: ChunkFormat::Blosc2,
                    codec: header_codec(h)?,
                    clevel,
                    typesize: usize::from(h.typesize.max(1)),
                    filters: h.filters,
                    filters_meta: h.filters_meta,
                    splitmode: if h.dont_split() {
                        SplitMode::Never
                    } else {
                        SplitMode::Always
                    },
                    blocksize: Blocksize::Auto,
                    allow_special: true,
                },
                None => CParams {
                    format: ChunkFormat::Blosc2,
                    codec: Codec::from_compcode(info.compcode())
                        .filter(|c| *c != Codec::Snappy)
                        .ok_or_else(|| {
                            unsupported(path, format!("codec {} for new chunks", info.compcode()))
                        })?,
                    clevel,
                    typesize: chunk_typesize(info),
                    filters: info.filters,
                    filters_meta: info.filters_meta,
                    splitmode: match info.other_flags & 3 {
                        0 => SplitMode::Always,
                        1 => SplitMode::Never,
                        _ => SplitMode::Auto,
                    },
                    blocksize: Blocksize::Auto,
                    allow_special: true,
                },
            };
            if let Some(nd) = array.nd_meta() {
                // b2nd chunks are laid out in blocks of blockshape: keep that blocksize.
                let items: u64 = nd.blockshape.iter().product();
                let bs = items.saturating_mul(u64::from(info.typesize));
                let bs = match &first {
                    Some(h) => h.blocksize,
                    None => usize::try_from(bs).unwrap_or(0),
                };
                p.blocksize = Blocksize::explicit_or_auto(bs, p.typesize);
            }
            for (f, meta) in p.filters.iter_mut().zip(p.filters_meta.iter_mut()) {
                if *f == TRUNC_PREC {
                    (*f, *meta) = (NOFILTER, 0);
                }
            }
            Ok(p)
        }
        Inner::Bcolz(c) => {
            let cp = c.storage().get("cparams");
            let clevel = cp
                .and_then(|v| v.get("clevel"))
                .and_then(Value::as_u64)
                .unwrap_or(5)
                .min(9) as u8;
            let cname = cp.and_then(|v| v.get("cname")).and_then(Value::as_str);
            match &first {
                Some(h) => Ok(CParams {
                    format: ChunkFormat::Blosc1,
                    // A Blosc1 header says "lz4" for LZ4HC too; storage names the codec.
                    codec: match (header_codec(h)?, cname) {
                        (Codec::Lz4, Some("lz4hc")) => Codec::Lz4Hc,
                        (c, _) => c,
                    },
                    clevel,
                    typesize: usize::from(h.typesize.max(1)),
                    filters: h.filters,
                    filters_meta: [0; 6],
                    splitmode: SplitMode::ForwardCompat,
                    blocksize: Blocksize::Auto,
                    allow_special: false,
                }),
                None => {
                    let name = cname.unwrap_or("blosclz");
                    let codec = Codec::from_name(name)
                        .filter(|c| *c != Codec::Snappy)
                        .ok_or_else(|| unsupported(path, format!("codec {name:?}")))?;
                    let filter = match cp.and_then(|v| v.get("shuffle")) {
                        Some(Value::Bool(true)) => 1,
                        Some(v) => v.as_u64().unwrap_or(1).min(2) as u8,
                        None => 1,
                    };
                    let ts = crate::container::bcolz::dtype_info(c.dtype())
                        .map_or(1, |d| d.blosc_typesize);
                    Ok(CParams::blosc1(codec, clevel, ts.max(1), filter))
                }
            }
        }
    }
}

/// The typesize a chunk of the frame names: the frame's, or 1 for types over 255 bytes (as
/// C-Blosc2 stores them).
fn chunk_typesize(info: &FrameInfo) -> usize {
    usize::try_from(info.typesize)
        .ok()
        .filter(|ts| (1..=255).contains(ts))
        .unwrap_or(1)
}

/// How chunk header `h` disagrees with the frame header `info` on the codec or the typesize
/// (`None` when it agrees, or when the frame header names no codec b2fs encodes and so has no
/// better answer).
fn frame_disagrees(h: &ChunkHeader, info: &FrameInfo) -> Option<String> {
    let frame_codec = Codec::from_compcode(info.compcode()).filter(|c| *c != Codec::Snappy)?;
    let chunk_codec = h.codec().ok();
    if chunk_codec != Some(frame_codec) {
        let said = chunk_codec.map_or("a codec b2fs cannot encode", Codec::name);
        return Some(format!("{said}, the frame header {}", frame_codec.name()));
    }
    let (chunk_ts, frame_ts) = (usize::from(h.typesize.max(1)), chunk_typesize(info));
    (chunk_ts != frame_ts)
        .then(|| format!("typesize {chunk_ts}, the frame header {}", info.typesize))
}
