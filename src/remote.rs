//! Remote sources: a contiguous frame (`.b2frame`, `.b2nd`) or `.b2z` store that lives in an
//! S3-compatible object store (`s3://bucket/key`) or behind a plain HTTP(S) URL, read with
//! ranged GETs as a [`crate::container::ByteSource`], so the container layer reads it exactly
//! as it reads a local file and nothing above it changes; a prefix of objects (sparse frames,
//! bcolz, `.b2d` stores, a directory of sources) and Caterva2 servers likewise, as a
//! [`crate::container::ByteTree`]. Remote mounts are read-only.
//!
//! This file holds what is always compiled: URL detection and the remote `-o` options. The
//! client itself is behind the `remote` cargo feature:
//! - `client`: the object store (`object_store` over reqwest + rustls with ring), one GET with
//!   its conditions (`If-Match` with the ETag seen at open, else `If-Unmodified-Since`), a
//!   deadline, bounded retries with backoff, and the classes of failure;
//! - `cache`: a byte-budgeted LRU of fetched compressed chunk extents, with single flight;
//! - `pool`: the reused buffers GET bodies are copied into as they arrive (one per extent),
//!   which go back to the pool when evicted, so a stream does not churn malloc;
//! - `plan`: the request plan. Open = 2 GETs in parallel (head and tail, no HEAD: the size
//!   comes from `Content-Range`); a chunk read = 1 GET of the whole compressed chunk (the
//!   container says where chunks lie, [`crate::container::ByteSource::chunk_extents`]);
//!   sequential chunk access prefetches with a doubling window capped in bytes;
//! - `disk`: the disk cache of those extents (`-o cache_dir=`), shared by processes, keyed
//!   by object and version, checked when read back, bounded with LRU eviction;
//! - `caterva2`: a Caterva2 server's root or directory (its listing API) as a collection
//!   whose datasets open through the same plan, on one shared runtime and login cookie;
//! - `prefix`: a prefix (`s3://bucket/dir/`, a sparse frame or bcolz root) as a
//!   [`crate::container::ByteTree`]: listed at open (and again when a followed mount looks
//!   for changes, `prefix/follow.rs`), its metadata objects fetched in parallel, each object
//!   read whole in one GET into the same kind of cache;
//! - `seq`: the sequential-access detection both plans share (which items to fetch ahead).
//!
//! Knows nothing of FUSE or the tree; of the container layer it knows only the `ByteSource`
//! and `ByteTree` traits it implements. No caller ever waits without a deadline: a read that
//! cannot get its bytes in time fails (EIO above), and a changed object (HTTP 412) fails every
//! later read of it, logged once naming the object, never mixing versions.

#[cfg(feature = "remote")]
mod cache;
#[cfg(feature = "remote")]
mod caterva2;
#[cfg(feature = "remote")]
mod client;
#[cfg(feature = "remote")]
mod disk;
#[cfg(feature = "remote")]
mod plan;
#[cfg(feature = "remote")]
mod pool;
#[cfg(feature = "remote")]
mod prefix;
#[cfg(feature = "remote")]
mod seq;

#[cfg(feature = "remote")]
pub use caterva2::{Caterva2, Caterva2Target, looks_like_caterva2, open_caterva2};
#[cfg(feature = "remote")]
pub use client::{RemoteError, RemoteErrorKind};
#[cfg(feature = "remote")]
pub use disk::{DiskCache, DiskStats};
#[cfg(feature = "remote")]
pub use plan::{RemoteObject, RemoteStats, open};
#[cfg(feature = "remote")]
pub use prefix::{RemotePrefix, open_prefix};

use std::time::Duration;

/// Whether `source` names a remote object (`s3://`, `http://`, `https://`) rather than a path.
pub fn is_url(source: &str) -> bool {
    ["s3://", "http://", "https://"]
        .iter()
        .any(|p| source.len() > p.len() && source[..p.len()].eq_ignore_ascii_case(p))
}

/// The options of a remote source (`-o` of `b2fs mount`, `b2fs info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// `endpoint=URL`: the S3 endpoint (path-style requests; `http://` allowed).
    pub endpoint: Option<String>,
    /// `region=NAME`: the S3 region (else `AWS_REGION`/`AWS_DEFAULT_REGION`, else us-east-1).
    pub region: Option<String>,
    /// `no_sign_request`: anonymous S3 access (no credentials, unsigned requests).
    pub no_sign_request: bool,
    /// `remote_cache=SIZE`: the budget of fetched compressed chunk bytes kept in memory.
    pub cache_bytes: usize,
    /// `remote_timeout=SECS`: the deadline of one request attempt.
    pub timeout: Duration,
    /// `remote_retries=N`: retries of a failed request (5xx, reset, timeout), with backoff.
    pub retries: usize,
    /// `ca_file=PATH`: PEM certificates trusted for HTTPS besides the system's (which
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR` replace, as for OpenSSL).
    pub ca_file: Option<std::path::PathBuf>,
    /// `cache_dir=DIR`: keep fetched compressed chunks on disk there (shared by mounts).
    pub cache_dir: Option<std::path::PathBuf>,
    /// `cache_dir_size=SIZE`: the bound of the disk cache, in bytes.
    pub cache_dir_size: u64,
    /// `caterva2`: the URL is a Caterva2 server's root, directory or dataset.
    pub caterva2: bool,
    /// `c2_user=NAME`: log in to the Caterva2 server as this user (else
    /// `B2FS_CATERVA2_USER`).
    pub c2_user: Option<String>,
    /// `c2_password_file=PATH`: the Caterva2 password is this file's first line (else
    /// `B2FS_CATERVA2_PASSWORD`).
    pub c2_password_file: Option<std::path::PathBuf>,
    /// `remote_recheck=SECS`: how often a mounted remote frame (one object, or an opened
    /// dataset of a Caterva2 directory) is asked whether it changed on the server, to open it
    /// again when it did (`None`, `0`: never).
    pub remote_recheck: Option<Duration>,
    /// `c2_relist=SECS`: how often a mounted Caterva2 root or directory is listed again to
    /// show datasets added and hide those removed since (`None`, `c2_relist=0`: never).
    pub c2_relist: Option<Duration>,
}

/// How often a mounted Caterva2 directory is listed again by default: one small request every
/// 10 s of an idle mount, and a new dataset shows within about that long.
pub const C2_RELIST: Duration = Duration::from_secs(10);

/// How often a mounted remote frame is asked whether it changed, by default: one GET of one
/// byte every 10 s, and a replaced object shows within about that long.
pub const REMOTE_RECHECK: Duration = Duration::from_secs(10);

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            endpoint: None,
            region: None,
            no_sign_request: false,
            cache_bytes: 256 << 20,
            timeout: Duration::from_secs(10),
            retries: 3,
            ca_file: None,
            cache_dir: None,
            cache_dir_size: 4 << 30,
            caterva2: false,
            c2_user: None,
            c2_password_file: None,
            c2_relist: Some(C2_RELIST),
            remote_recheck: Some(REMOTE_RECHECK),
        }
    }
}

impl RemoteOptions {
    /// The longest a read may wait for its bytes: every attempt, and the backoff between them.
    pub fn deadline(&self) -> Duration {
        let attempts = u32::try_from(self.retries + 1).unwrap_or(u32::MAX);
        self.timeout
            .saturating_mul(attempts)
            .saturating_add(Duration::from_secs(2))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_told_from_paths() {
        for u in ["s3://b/k.b2nd", "http://h/x", "HTTPS://h/x.b2frame"] {
            assert!(is_url(u), "{u}");
        }
        for p in ["/data/x.b2nd", "s3:/b", "x.b2nd", "http://", "s3"] {
            assert!(!is_url(p), "{p}");
        }
    }
}
