//! The names python-blosc2 gives codec and filter ids (`blosc2.Codec.ZSTD.name`,
//! `blosc2.Filter.SHUFFLE.name`), for `meta/storage` and the extended attributes. Ids
//! python-blosc2 has no name for are shown as `CODEC_<id>` / `FILTER_<id>`.

use crate::codec::{Codec, filter_id};

/// python-blosc2's name for codec id `compcode` (`ZSTD`; plugins `ZFP_ACC`, `NDLZ`, ...).
pub fn codec_name(compcode: u8) -> String {
    if let Some(c) = Codec::from_compcode(compcode) {
        return c.name().to_ascii_uppercase();
    }
    let plugin = match compcode {
        32 => "NDLZ",
        33 => "ZFP_ACC",
        34 => "ZFP_PREC",
        35 => "ZFP_RATE",
        36 => "OPENHTJ2K",
        37 => "GROK",
        38 => "OPENZL",
        39 => "J2K",
        40 => "HTJ2K",
        _ => return format!("CODEC_{compcode}"),
    };
    plugin.to_owned()
}

/// python-blosc2's name for filter id `id` (`SHUFFLE`; `NOFILTER` for an empty slot).
pub fn filter_name(id: u8) -> String {
    let name = match id {
        filter_id::NOFILTER => "NOFILTER",
        filter_id::SHUFFLE => "SHUFFLE",
        filter_id::BITSHUFFLE => "BITSHUFFLE",
        filter_id::DELTA => "DELTA",
        filter_id::TRUNC_PREC => "TRUNC_PREC",
        32 => "NDCELL",
        33 => "NDMEAN",
        filter_id::BYTEDELTA => "BYTEDELTA",
        36 => "INT_TRUNC",
        _ => return format!("FILTER_{id}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_python_blosc2() {
        assert_eq!(codec_name(0), "BLOSCLZ");
        assert_eq!(codec_name(2), "LZ4HC");
        assert_eq!(codec_name(5), "ZSTD");
        assert_eq!(codec_name(33), "ZFP_ACC");
        assert_eq!(codec_name(200), "CODEC_200");
        assert_eq!(filter_name(0), "NOFILTER");
        assert_eq!(filter_name(2), "BITSHUFFLE");
        assert_eq!(filter_name(35), "BYTEDELTA");
        assert_eq!(filter_name(34), "FILTER_34");
    }
}
