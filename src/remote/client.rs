//! The object store client: builds an `object_store` store for an `s3://` or `http(s)://`
//! URL, issues one ranged GET with the object's pin (`If-Match` with the ETag seen at open,
//! or `If-Unmodified-Since` with its Last-Modified when the server sends no ETag), under a
//! deadline, with `object_store`'s bounded retries and backoff, and sorts failures into the
//! classes the command line reports.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path as StorePath;
use object_store::{
    BackoffConfig, ClientOptions, GetOptions, GetRange, ObjectMeta, ObjectStore, RetryConfig,
};

use super::RemoteOptions;
use super::pool::{BufPool, PoolBuf};

/// What kind of failure a remote operation met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteErrorKind {
    /// The URL or options are unusable (bad URL, bad endpoint).
    Config,
    /// The object does not exist (404).
    NotFound,
    /// Access was refused (401, 403; also a wrong region or signature).
    Denied,
    /// The object changed since it was opened (412 on the pinned ETag).
    Changed,
    /// The endpoint cannot be reached, timed out, or keeps failing (5xx).
    Network,
    /// The server answered something unusable (no range support, wrong range, short body).
    Protocol,
}

/// A failed remote operation: its class and a one-line reason.
#[derive(Debug, Clone)]
pub struct RemoteError {
    /// The class.
    pub kind: RemoteErrorKind,
    /// Why, in one line.
    pub why: String,
}

impl fmt::Display for RemoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.why)
    }
}

impl std::error::Error for RemoteError {}

impl RemoteError {
    pub(crate) fn new(kind: RemoteErrorKind, why: impl Into<String>) -> RemoteError {
        RemoteError {
            kind,
            why: why.into(),
        }
    }

    /// An I/O error for a read (the container layer turns it into EIO).
    pub(crate) fn into_io(self) -> std::io::Error {
        std::io::Error::other(self)
    }
}

/// Sorts an `object_store` error into a class, with the innermost reason in one line.
fn classify(e: object_store::Error) -> RemoteError {
    use object_store::Error as E;
    let chain = one_line(&e);
    let kind = match &e {
        E::NotFound { .. } => RemoteErrorKind::NotFound,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => RemoteErrorKind::Denied,
        E::Precondition { .. } => RemoteErrorKind::Changed,
        _ => {
            let l = chain.to_ascii_lowercase();
            if has_status(&l, "403") || l.contains("forbidden") || l.contains("access denied") {
                RemoteErrorKind::Denied
            } else if has_status(&l, "301") || l.contains("authorizationheadermalformed") {
                // S3's answer to a request signed for the wrong region.
                RemoteErrorKind::Denied
            } else if l.contains("range request not supported")
                || l.contains("unexpected range")
                || has_status(&l, "416")
            {
                RemoteErrorKind::Protocol
            } else {
                RemoteErrorKind::Network
            }
        }
    };
    RemoteError::new(kind, chain)
}

/// Whether `text` holds the HTTP status `code` as a number of its own: not a part of a longer
/// number, a duration (`in 301.739us`) or a port.
fn has_status(text: &str, code: &str) -> bool {
    let b = text.as_bytes();
    text.match_indices(code).any(|(i, _)| {
        let before = i.checked_sub(1).map(|j| b[j]);
        let after = b.get(i + code.len()).copied();
        let free_before =
            !matches!(before, Some(c) if c.is_ascii_digit() || c == b'.' || c == b':');
        let free_after = !matches!(after, Some(c) if c.is_ascii_alphanumeric() || c == b'.');
        free_before && free_after
    })
}

/// An error and its sources, joined with `: `, without repeats, on one line.
fn one_line(e: &dyn std::error::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&dyn std::error::Error> = Some(e);
    while let Some(err) = cur {
        let s = err.to_string().replace('\n', " ");
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
        cur = err.source();
    }
    parts.join(": ")
}

/// Counters of one remote object's requests.
#[derive(Debug, Default)]
pub struct RemoteStats {
    requests: AtomicU64,
    bytes: AtomicU64,
    failures: AtomicU64,
    prefetches: AtomicU64,
    disk_hits: AtomicU64,
}

impl RemoteStats {
    /// GET requests issued (each a ranged GET; `object_store`'s internal retries of one
    /// request are not counted again).
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Body bytes received.
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Requests that failed (after their retries).
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::Relaxed)
    }

    /// GETs started ahead of any read, by a sequential prefetch (counted in
    /// [`RemoteStats::requests`] too).
    pub fn prefetches(&self) -> u64 {
        self.prefetches.load(Ordering::Relaxed)
    }

    /// Extents and objects read from the disk cache instead of fetched.
    pub fn disk_hits(&self) -> u64 {
        self.disk_hits.load(Ordering::Relaxed)
    }

    /// Counts one read from the disk cache.
    pub(crate) fn count_disk_hit(&self) {
        self.disk_hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one prefetch GET.
    pub(crate) fn count_prefetch(&self) {
        self.prefetches.fetch_add(1, Ordering::Relaxed);
    }
}

/// What every GET of an object is conditional on: the version seen at open.
#[derive(Debug, Clone, Default)]
pub(crate) struct Pin {
    pub(crate) etag: Option<String>,
    pub(crate) meta: Option<ObjectMeta>,
}

impl Pin {
    fn apply(&self, opts: &mut GetOptions) {
        match (&self.etag, &self.meta) {
            (Some(etag), _) => opts.if_match = Some(etag.clone()),
            (None, Some(meta)) => opts.if_unmodified_since = Some(meta.last_modified),
            (None, None) => {}
        }
    }
}

/// One object: its store, its path in the store, and the runtime its requests run on (the
/// store and the runtime may be shared with other objects of the same server).
#[derive(Debug, Clone)]
pub(crate) struct Client {
    pub(crate) url: String,
    /// What names the object for the disk cache: its URL, with the endpoint of an S3 one.
    pub(crate) identity: String,
    store: Arc<dyn ObjectStore>,
    path: StorePath,
    pub(crate) rt: Arc<tokio::runtime::Runtime>,
    /// The deadline of one GET, retries included.
    pub(crate) deadline: Duration,
    pub(crate) stats: Arc<RemoteStats>,
}

/// A successful GET: the body (in the parts asked), where it is, and the object's metadata.
pub(crate) struct Got {
    pub(crate) range: Range<u64>,
    pub(crate) meta: ObjectMeta,
    pub(crate) parts: Vec<Bytes>,
}

impl Got {
    /// The body of a GET asked in one part.
    pub(crate) fn bytes(&self) -> Bytes {
        self.parts.first().cloned().unwrap_or_default()
    }
}

/// Copies a body, as its pieces arrive, into one buffer per length of `lens` (from `pool`,
/// else of no pool): exactly that many bytes, or a `Protocol` error naming `range`.
async fn read_body(
    mut body: futures_util::stream::BoxStream<'static, object_store::Result<Bytes>>,
    lens: &[usize],
    pool: Option<&Arc<BufPool>>,
    range: &Range<u64>,
) -> Result<Vec<Bytes>, RemoteError> {
    use futures_util::StreamExt;
    let new = |len: usize| match pool {
        Some(p) => p.take(len),
        None => PoolBuf::unpooled(len),
    };
    let mut parts = Vec::with_capacity(lens.len());
    let mut cur: Option<PoolBuf> = None;
    let mut received = 0usize;
    let bad = |what: &str, n: usize| {
        RemoteError::new(
            RemoteErrorKind::Protocol,
            format!(
                "{what} body: {n} bytes for the range {}..{}",
                range.start, range.end
            ),
        )
    };
    while let Some(piece) = body.next().await {
        let piece = piece.map_err(classify)?;
        let mut rest: &[u8] = &piece;
        received += rest.len();
        while !rest.is_empty() {
            let want = match lens.get(parts.len()) {
                Some(&w) => w,
                None => return Err(bad("long", received)),
            };
            let buf = cur.get_or_insert_with(|| new(want));
            let n = (want - buf.len()).min(rest.len());
            buf.push(&rest[..n]);
            rest = &rest[n..];
            if buf.len() == want {
                parts.push(cur.take().map(PoolBuf::freeze).unwrap_or_default());
            }
        }
    }
    // Parts of no bytes (an empty object) are complete; anything else missing is short.
    while let Some(&0) = lens.get(parts.len()) {
        parts.push(Bytes::new());
    }
    if cur.is_some() || parts.len() < lens.len() {
        return Err(bad("short", received));
    }
    Ok(parts)
}

fn config(why: String) -> RemoteError {
    RemoteError::new(RemoteErrorKind::Config, why)
}

/// The HTTP client options of `opts`: timeouts, plain HTTP allowed, the `ca_file`.
pub(crate) fn client_options(opts: &RemoteOptions) -> Result<ClientOptions, RemoteError> {
    // reqwest is built without a TLS crypto provider (no aws-lc): install ring's, once.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut client_opts = ClientOptions::new()
        .with_timeout(opts.timeout)
        .with_connect_timeout(opts.timeout.min(Duration::from_secs(5)))
        .with_allow_http(true);
    if let Some(ca) = &opts.ca_file {
        let pem =
            std::fs::read(ca).map_err(|e| config(format!("ca_file {}: {e}", ca.display())))?;
        let certs = object_store::Certificate::from_pem_bundle(&pem)
            .map_err(|e| config(format!("ca_file {}: {}", ca.display(), one_line(&e))))?;
        if certs.is_empty() {
            return Err(config(format!("ca_file {}: no certificate", ca.display())));
        }
        for c in certs {
            client_opts = client_opts.with_root_certificate(c);
        }
    }
    Ok(client_opts)
}

/// The retries of `opts`: bounded, with backoff, within [`RemoteOptions::deadline`].
pub(crate) fn retry_config(opts: &RemoteOptions) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: opts.retries,
        retry_timeout: opts.deadline(),
    }
}

/// The runtime requests run on: two worker threads.
pub(crate) fn runtime() -> Result<Arc<tokio::runtime::Runtime>, RemoteError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("b2fs-remote")
        .enable_all()
        .build()
        .map(Arc::new)
        .map_err(|e| config(format!("cannot start the I/O runtime: {e}")))
}

/// The store path of a URL's path (a prefix's without its last slash).
pub(crate) fn store_path(parsed: &url::Url) -> Result<StorePath, RemoteError> {
    let key = parsed.path().trim_start_matches('/');
    if key.is_empty() {
        return Err(config("the URL names no object".into()));
    }
    StorePath::from_url_path(key.trim_end_matches('/')).map_err(|e| config(e.to_string()))
}

impl Client {
    /// A client for `url` (`s3://bucket/key`, `http(s)://host/path`).
    pub(crate) fn new(url: &str, opts: &RemoteOptions) -> Result<Client, RemoteError> {
        let parsed = url::Url::parse(url).map_err(|e| config(format!("bad URL: {e}")))?;
        let path = store_path(&parsed)?;
        let client_opts = client_options(opts)?;
        let deadline = opts.deadline();
        let retry = retry_config(opts);
        let store: Arc<dyn ObjectStore> = match parsed.scheme().to_ascii_lowercase().as_str() {
            "s3" => {
                let bucket = parsed
                    .host_str()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| config("no bucket in the s3:// URL".into()))?;
                let mut b = object_store::aws::AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .with_client_options(client_opts)
                    .with_retry(retry);
                if let Some(e) = &opts.endpoint {
                    b = b.with_endpoint(e).with_virtual_hosted_style_request(false);
                }
                let region = opts.region.clone().or_else(|| {
                    std::env::var("AWS_REGION")
                        .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
                        .ok()
                });
                if let Some(r) = region {
                    b = b.with_region(r);
                }
                if opts.no_sign_request {
                    b = b.with_skip_signature(true);
                }
                Arc::new(b.build().map_err(|e| config(one_line(&e)))?)
            }
            "http" | "https" => {
                let origin = parsed.origin().ascii_serialization();
                let b = object_store::http::HttpBuilder::new()
                    .with_url(origin)
                    .with_client_options(client_opts)
                    .with_retry(retry);
                Arc::new(b.build().map_err(|e| config(one_line(&e)))?)
            }
            other => return Err(config(format!("unsupported scheme '{other}'"))),
        };
        let identity = match &opts.endpoint {
            Some(e) if parsed.scheme().eq_ignore_ascii_case("s3") => format!("{e} {url}"),
            _ => url.to_owned(),
        };
        Ok(Client {
            url: url.to_owned(),
            identity,
            store,
            path,
            rt: runtime()?,
            deadline,
            stats: Arc::new(RemoteStats::default()),
        })
    }

    /// A client for the object at `path` of `store` (named `url`), on `rt`, counting in
    /// `stats`: an object of a server whose store and runtime are shared.
    pub(crate) fn of_store(
        url: &str,
        store: Arc<dyn ObjectStore>,
        path: StorePath,
        rt: Arc<tokio::runtime::Runtime>,
        opts: &RemoteOptions,
        stats: Arc<RemoteStats>,
    ) -> Client {
        Client {
            url: url.to_owned(),
            identity: url.to_owned(),
            store,
            path,
            rt,
            deadline: opts.deadline(),
            stats,
        }
    }

    /// One GET of `range` under `pin`, within [`Client::deadline`], its body in one buffer of
    /// no pool. The body must be exactly the range the server says it sent.
    pub(crate) fn get(
        &self,
        range: GetRange,
        pin: &Pin,
    ) -> impl Future<Output = Result<Got, RemoteError>> + Send + 'static {
        self.get_at(&self.path, range, pin, None)
    }

    /// A client for the object `rel` of this prefix's client (named `url`, at `path` of the
    /// same store), sharing its connections, runtime and counters.
    pub(crate) fn for_object(&self, rel: &str, url: &str, path: StorePath) -> Client {
        Client {
            url: url.to_owned(),
            identity: format!("{}/{rel}", self.identity.trim_end_matches('/')),
            store: Arc::clone(&self.store),
            path,
            rt: Arc::clone(&self.rt),
            deadline: self.deadline,
            stats: Arc::clone(&self.stats),
        }
    }

    /// The object's path in the store (a prefix's path without its last slash).
    pub(crate) fn path(&self) -> &StorePath {
        &self.path
    }

    /// [`Client::get`] of the object at `path` of the same store; with `split`, the body is
    /// copied as it arrives into one buffer of the pool per part length (which must add up to
    /// the range), else into one buffer of no pool.
    pub(crate) fn get_at(
        &self,
        path: &StorePath,
        range: GetRange,
        pin: &Pin,
        split: Option<(Vec<usize>, Arc<BufPool>)>,
    ) -> impl Future<Output = Result<Got, RemoteError>> + Send + 'static {
        let mut opts = GetOptions {
            range: Some(range),
            ..GetOptions::default()
        };
        pin.apply(&mut opts);
        let store = Arc::clone(&self.store);
        let path = path.clone();
        let stats = Arc::clone(&self.stats);
        let deadline = self.deadline;
        let etag = pin.etag.clone();
        async move {
            stats.requests.fetch_add(1, Ordering::Relaxed);
            let fetch = async {
                let r = store.get_opts(&path, opts).await.map_err(classify)?;
                // A server that ignores If-Match (Caterva2's) still tells by its ETag.
                if let (Some(want), Some(got)) = (&etag, &r.meta.e_tag)
                    && want != got
                {
                    return Err(RemoteError::new(
                        RemoteErrorKind::Changed,
                        format!("ETag {got}, not the {want} seen at open"),
                    ));
                }
                let range = r.range.clone();
                let meta = r.meta.clone();
                let total = usize::try_from(range.end.saturating_sub(range.start))
                    .map_err(|_| RemoteError::new(RemoteErrorKind::Protocol, "range too long"))?;
                let (lens, pool) = match split {
                    Some((lens, pool)) => (lens, Some(pool)),
                    None => (vec![total], None),
                };
                if lens.iter().sum::<usize>() != total {
                    return Err(RemoteError::new(
                        RemoteErrorKind::Protocol,
                        format!(
                            "the range {}..{} is not the one asked",
                            range.start, range.end
                        ),
                    ));
                }
                let parts = read_body(r.into_stream(), &lens, pool.as_ref(), &range).await?;
                stats.bytes.fetch_add(total as u64, Ordering::Relaxed);
                Ok::<_, RemoteError>(Got { range, meta, parts })
            };
            let got = match tokio::time::timeout(deadline, fetch).await {
                Ok(r) => r,
                Err(_) => Err(RemoteError::new(
                    RemoteErrorKind::Network,
                    format!("no answer within {:.1} s", deadline.as_secs_f64()),
                )),
            };
            if got.is_err() {
                stats.failures.fetch_add(1, Ordering::Relaxed);
            }
            got
        }
    }

    /// Lists every object under the prefix `self.path/` (S3 ListObjectsV2, one request per
    /// page of up to 1,000 keys), each page within `deadline` (at open the read deadline;
    /// the follower's question, one attempt's `remote_timeout`); at most `limit` objects.
    pub(crate) fn list_within(
        &self,
        limit: usize,
        deadline: Duration,
    ) -> Result<Vec<ObjectMeta>, RemoteError> {
        use futures_util::StreamExt;
        let mut stream = self.store.list(Some(&self.path));
        let stats = Arc::clone(&self.stats);
        self.rt.block_on(async move {
            let mut out = Vec::new();
            // One request per page: counted when a page's first entry (or its end) arrives.
            stats.requests.fetch_add(1, Ordering::Relaxed);
            loop {
                let next = match tokio::time::timeout(deadline, stream.next()).await {
                    Ok(n) => n,
                    Err(_) => {
                        stats.failures.fetch_add(1, Ordering::Relaxed);
                        return Err(RemoteError::new(
                            RemoteErrorKind::Network,
                            format!("no listing within {:.1} s", deadline.as_secs_f64()),
                        ));
                    }
                };
                match next {
                    None => return Ok(out),
                    Some(Err(e)) => {
                        stats.failures.fetch_add(1, Ordering::Relaxed);
                        return Err(classify(e));
                    }
                    Some(Ok(meta)) => {
                        if out.len() >= limit {
                            return Err(RemoteError::new(
                                RemoteErrorKind::Protocol,
                                format!("more than {limit} objects under the prefix"),
                            ));
                        }
                        out.push(meta);
                        if out.len() % 1000 == 0 {
                            stats.requests.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod status_tests {
    use super::has_status;

    #[test]
    fn statuses_are_numbers_of_their_own_not_durations() {
        assert!(has_status("client error with status 403 forbidden", "403"));
        assert!(has_status("http status 301 moved permanently", "301"));
        assert!(!has_status("error performing get in 301.739\u{b5}s", "301"));
        assert!(!has_status("connect to 127.0.0.1:4031 refused", "403"));
        assert!(!has_status("took 1403 ms", "403"));
    }
}
