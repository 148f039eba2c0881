//! The chunk header: Blosc1's 16 bytes and Blosc2's 32-byte extended header (sections 1.1-1.5),
//! parsed with the reader checks C-Blosc2 does, and written back.

/// The special-value kind of a Blosc2 chunk (blosc2_flags bits 4-6, section 2.7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpecialKind {
    /// A regular chunk (or memcpyed).
    None,
    /// All zeros.
    Zeros,
    /// All NaN (typesize 4 or 8).
    Nan,
    /// One element repeated; the element follows the header.
    Value,
    /// Uninitialised contents (b2fs returns zeros).
    Uninit,
}

/// Every field of a chunk header, as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Format version (2 = Blosc1, 3-6 = Blosc2).
    pub version: u8,
    /// Codec stream format version.
    pub versionlz: u8,
    /// Flags byte (section 1.2).
    pub flags: u8,
    /// Element size in bytes as stored (1..255).
    pub typesize: u8,
    /// Uncompressed size.
    pub nbytes: usize,
    /// Block size as stored (number of blocks for VL-block chunks).
    pub blocksize: usize,
    /// Total chunk size including the header.
    pub cbytes: usize,
    /// Filter ids per pipeline slot (Blosc1 headers: derived from the flags).
    pub filters: [u8; 6],
    /// Filter parameter per slot.
    pub filters_meta: [u8; 6],
    /// Codec id (header byte 0x16; for Blosc1 derived from the flags).
    pub compcode: u8,
    /// Codec parameter (plugins).
    pub compcode_meta: u8,
    /// blosc2_flags2 (bit 0: VL blocks).
    pub flags2: u8,
    /// blosc2_flags (dict, lazy, special kind).
    pub blosc2_flags: u8,
}
