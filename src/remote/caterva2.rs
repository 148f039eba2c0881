//! Caterva2 sources: a root, directory or dataset of a Caterva2 server (the Blosc
//! community's HTTP server of Blosc2 datasets), named by the URL its web UI shows
//! (`http(s)://HOST[:PORT][/PREFIX]/roots/ROOT[/PATH]`).
//!
//! The request plan:
//! - login (when a user is given): one `POST /auth/jwt/login` with the user and password as
//!   a form; the `c2subauth` cookie it sets goes on every later request; a request refused
//!   with 401 (the cookie expired, or the server restarted with another secret) logs in
//!   again once and is sent again (`session.rs`);
//! - a directory or root: one `GET /api/list/ROOT[/PATH]` (every file below it, recursively)
//!   is the whole listing. Datasets (`.b2nd`, `.b2frame`, `.b2f`) are leaves, opened on first
//!   access; `.b2z` stores are opened at listing time (2 GETs each, in parallel), so their
//!   members show; other files (`.b2` SChunks of uploaded files, HDF5) are not shown. The
//!   mount lists it again every `c2_relist` ([`ByteTree::relist`]: the same request; stores
//!   opened before are not opened again);
//! - a dataset: `GET /api/fetch/ROOT/PATH` answers the stored file, with byte ranges and an
//!   ETag, so it opens and reads through exactly the plan of an `https://` frame
//!   ([`super::plan`]): 2 GETs to open, one per chunk, prefetch, the disk cache. The server
//!   ignores `If-Match`: every answer's ETag is compared with the one seen at open instead
//!   (a dataset changed on the server fails its reads with EIO, never mixes versions).
//!
//! All the objects of one server share one store (HTTP client, connection pool, cookie), one
//! runtime, one request count and one extent cache (the `remote_cache` budget is the
//! mount's, not each dataset's).
//!
//! `api.rs` holds the HTTP side of the JSON API (the client, the login, a JSON `GET`, the
//! classes of HTTP failures), `session.rs` the login that outlives its cookie.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use object_store::ObjectStore;
use object_store::path::Path as StorePath;
use reqwest::header::{self, HeaderMap, HeaderValue};

use super::RemoteOptions;
use super::cache::ExtentCache;
use super::client::{Client, RemoteError, RemoteErrorKind, RemoteStats};
use super::plan::{RemoteObject, open_with};
use crate::container::{ByteSource, ByteTree, Relist};

mod api;
mod session;

use api::{api_client, credentials, err, get_json, login};

/// File names shown as datasets (leaves).
const DATASETS: &[&str] = &[".b2nd", ".b2frame", ".b2f"];
/// File names opened as stores.
const STORES: &[&str] = &[".b2z"];
/// The longest listing read (bytes of JSON).
const LIST_MAX: usize = 64 << 20;
/// The most files a listing may name.
const FILES_MAX: usize = 1 << 20;
/// Why a `.b2z` a server answers 500 for cannot be read (the server's bug, found in its
/// source: caterva2 2026.9.2's `/api/fetch` of a store reads its `vlmeta`, which a
/// python-blosc2 `DictStore` does not have; `/api/download` sends it whole but refuses
/// ranges).
const STORE_500: &str = "the server fails on this store (caterva2 2026.9.2 answers 500 to \
                         /api/fetch of a python-blosc2 DictStore .b2z: it reads a vlmeta \
                         DictStores do not have; TreeStore .b2z files work); it shows as a \
                         leaf whose open gives EIO";
/// The most `.b2z` stores opened at once at listing time.
const OPEN_PARALLEL: usize = 8;

/// Where a Caterva2 URL points, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    /// `http(s)://HOST[:PORT][/PREFIX]`, no trailing slash.
    base: String,
    /// `ROOT[/PATH]` (as the API names it), no leading or trailing slash.
    path: String,
}

/// Whether `url` looks like a Caterva2 web UI URL: a `roots` segment followed by a root
/// whose name starts with `@` (`/roots/@public/...`). Others need `-o caterva2`.
pub fn looks_like_caterva2(url: &str) -> bool {
    parse(url).is_some_and(|t| t.path.starts_with('@'))
}

/// Splits `url` at its `roots` segment; a URL without one is a server's base (every root).
fn parse(url: &str) -> Option<Target> {
    let parsed = url::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return None;
    }
    let segments: Vec<String> = parsed
        .path_segments()?
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let origin = parsed.origin().ascii_serialization();
    let at = segments.iter().position(|s| s == "roots");
    let (prefix, path) = match at {
        Some(i) => (&segments[..i], segments[i + 1..].join("/")),
        None => (&segments[..], String::new()),
    };
    let mut base = origin;
    for p in prefix {
        base.push('/');
        base.push_str(p);
    }
    Some(Target { base, path })
}

/// `s` with its `%XX` escapes decoded (bytes that do not form UTF-8 are replaced).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a Caterva2 URL opened as.
#[derive(Debug)]
pub enum Caterva2Target {
    /// One dataset (`.b2nd`, `.b2frame`): a frame.
    Dataset(Arc<RemoteObject>),
    /// One `.b2z` store: a zip.
    Store(Arc<RemoteObject>),
    /// A root or directory: its datasets as a tree, and its `.b2z` stores opened (`(dir,
    /// object)`, `dir` relative to the directory).
    Dir(Arc<Caterva2>, Vec<(String, Arc<RemoteObject>)>),
}

/// A Caterva2 server's directory (or root, or every root): its datasets as a byte tree.
#[derive(Debug)]
pub struct Caterva2 {
    /// The URL as given (the tree's root).
    url: PathBuf,
    target: Target,
    /// Dataset names relative to the directory, sorted.
    names: Vec<String>,
    /// Every dataset and store name the server listed, sorted: what a later listing is
    /// compared with ([`ByteTree::relist`]).
    listed: Vec<String>,
    store: Arc<dyn ObjectStore>,
    /// The client of the API's JSON requests (the listings), with the login cookie.
    http: reqwest::Client,
    rt: Arc<tokio::runtime::Runtime>,
    opts: RemoteOptions,
    stats: Arc<RemoteStats>,
    cache: Arc<ExtentCache>,
    next: Arc<AtomicU64>,
    /// The `.b2z` stores opened so far, by name, shared by every listing of the mount: a
    /// store listed again is not opened again.
    stores: Arc<Mutex<HashMap<String, Arc<RemoteObject>>>>,
}

/// One listing of a Caterva2 directory, sorted by name.
struct Listing {
    /// Datasets (leaves).
    datasets: Vec<String>,
    /// `.b2z` stores.
    stores: Vec<String>,
    /// Files of other kinds, not shown.
    hidden: usize,
    /// The list requests made (one per root).
    requests: usize,
}

/// The URL path segments of `text` (`ROOT/dir/x.b2nd`), percent-encoded for a URL.
fn encode_path(text: &str) -> String {
    let mut u = url::Url::parse("http://x/").expect("a constant URL");
    if let Ok(mut s) = u.path_segments_mut() {
        s.extend(text.split('/').filter(|p| !p.is_empty()));
    }
    u.path().trim_start_matches('/').to_owned()
}

/// Opens the Caterva2 URL `url` (see the module docs).
///
/// # Errors
/// The class and reason of the failure: a refused login or root (`Denied`), a missing root
/// or path (`NotFound`), an unreachable server (`Network`).
pub fn open_caterva2(url: &str, opts: &RemoteOptions) -> Result<Caterva2Target, RemoteError> {
    let target = parse(url).ok_or_else(|| {
        err(
            RemoteErrorKind::Config,
            "not a Caterva2 URL (http(s)://HOST[:PORT][/PREFIX]/roots/ROOT[/PATH])",
        )
    })?;
    let rt = super::client::runtime()?;
    let deadline = opts.deadline();
    // Login (when a user is given), then the cookie goes on every request (the object
    // store's through the session, which logs in again when the server refuses it).
    let mut headers = HeaderMap::new();
    let mut session = None;
    if let Some((user, password)) = credentials(opts)? {
        let http = api_client(opts, HeaderMap::new())?;
        let cookie = rt.block_on(async {
            tokio::time::timeout(deadline, login(&http, &target.base, &user, &password))
                .await
                .unwrap_or_else(|_| {
                    Err(err(
                        RemoteErrorKind::Network,
                        format!("{}: no answer to the login", target.base),
                    ))
                })
        })?;
        let v = HeaderValue::from_str(&format!("c2subauth={cookie}"))
            .map_err(|e| err(RemoteErrorKind::Protocol, format!("login cookie: {e}")))?;
        headers.insert(header::COOKIE, v.clone());
        session = Some(session::Session::new(
            &target.base,
            &user,
            &password,
            http,
            v,
        ));
        log::info!("{}: logged in as {user}", target.base);
    }
    let http = api_client(opts, headers.clone())?;
    let origin = url::Url::parse(&target.base)
        .map(|u| u.origin().ascii_serialization())
        .map_err(|e| err(RemoteErrorKind::Config, format!("bad URL: {e}")))?;
    let mut builder = object_store::http::HttpBuilder::new()
        .with_url(origin)
        .with_client_options(super::client::client_options(opts)?)
        .with_retry(super::client::retry_config(opts));
    if let Some(s) = session {
        builder = builder.with_http_connector(session::Connector(s));
    }
    let store: Arc<dyn ObjectStore> = Arc::new(
        builder
            .build()
            .map_err(|e| err(RemoteErrorKind::Config, e.to_string()))?,
    );
    let c2 = Caterva2 {
        url: PathBuf::from(url.trim_end_matches('/')),
        target,
        names: Vec::new(),
        listed: Vec::new(),
        store,
        http,
        rt,
        opts: opts.clone(),
        stats: Arc::new(RemoteStats::default()),
        cache: Arc::new(ExtentCache::new(opts.cache_bytes)),
        next: Arc::new(AtomicU64::new(0)),
        stores: Arc::default(),
    };
    let path = c2.target.path.clone();
    if DATASETS.iter().any(|s| path.ends_with(s)) {
        return c2.open("").map(Caterva2Target::Dataset);
    }
    if STORES.iter().any(|s| path.ends_with(s)) {
        return c2.open("").map(Caterva2Target::Store);
    }
    c2.list()
}

impl Caterva2 {
    /// The request counters of every object of the server.
    pub fn stats(&self) -> &RemoteStats {
        &self.stats
    }

    /// Number of datasets listed.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no dataset was listed.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The API path of `rel` (relative to the directory).
    fn api_path(&self, rel: &str) -> String {
        [self.target.path.as_str(), rel]
            .iter()
            .filter(|p| !p.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join("/")
    }

    /// Opens dataset `rel` through `GET /api/fetch/...` (the plan of an HTTP frame).
    fn open(&self, rel: &str) -> Result<Arc<RemoteObject>, RemoteError> {
        let api = self.api_path(rel);
        let url = format!("{}/api/fetch/{}", self.target.base, encode_path(&api));
        let mut parts: Vec<&str> = Vec::new();
        let base_path = url::Url::parse(&self.target.base)
            .map(|u| u.path().to_owned())
            .unwrap_or_default();
        parts.extend(base_path.split('/').filter(|p| !p.is_empty()));
        parts.extend(["api", "fetch"]);
        parts.extend(api.split('/').filter(|p| !p.is_empty()));
        let path: StorePath = parts.into_iter().collect();
        let client = Client::of_store(
            &url,
            Arc::clone(&self.store),
            path,
            Arc::clone(&self.rt),
            &self.opts,
            Arc::clone(&self.stats),
        );
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        open_with(client, &self.opts, Some((Arc::clone(&self.cache), n))).map_err(|mut e| {
            if STORES.iter().any(|s| api.ends_with(s)) && e.why.contains("500") {
                e.why = format!("{}: {STORE_500}", e.why);
            }
            e
        })
    }

    /// Reads the directory's listing: one request (one per root for a server's base URL).
    fn listing(&self) -> Result<Listing, RemoteError> {
        let deadline = self.opts.deadline();
        let base = &self.target.base;
        let http = &self.http;
        // A server's base URL: every root, each listed.
        let roots: Vec<String> = if self.target.path.is_empty() {
            let v = self
                .rt
                .block_on(get_json(http, &format!("{base}/api/roots"), deadline))?;
            v.as_object()
                .map(|o| o.keys().cloned().collect())
                .unwrap_or_default()
        } else {
            vec![String::new()]
        };
        let mut all: Vec<String> = Vec::new();
        for root in &roots {
            let api = self.api_path(root);
            let url = format!("{base}/api/list/{}", encode_path(&api));
            let v = self.rt.block_on(get_json(http, &url, deadline))?;
            let list = v
                .as_array()
                .ok_or_else(|| err(RemoteErrorKind::Protocol, format!("{url}: not a JSON list")))?;
            for name in list.iter().filter_map(|n| n.as_str()) {
                if all.len() >= FILES_MAX {
                    return Err(err(
                        RemoteErrorKind::Protocol,
                        format!("{url}: more than {FILES_MAX} files"),
                    ));
                }
                let rel = if root.is_empty() {
                    name.to_owned()
                } else {
                    format!("{root}/{name}")
                };
                all.push(rel);
            }
        }
        let mut out = Listing {
            datasets: Vec::new(),
            stores: Vec::new(),
            hidden: 0,
            requests: roots.len() + usize::from(self.target.path.is_empty()),
        };
        for rel in all {
            let bad = rel
                .split('/')
                .any(|p| p.is_empty() || p == "." || p == "..");
            if bad {
                log::warn!("{}: {rel:?} not shown (bad path)", self.url.display());
            } else if DATASETS.iter().any(|s| rel.ends_with(s)) {
                out.datasets.push(rel);
            } else if STORES.iter().any(|s| rel.ends_with(s)) {
                out.stores.push(rel);
            } else {
                out.hidden += 1;
            }
        }
        out.datasets.sort();
        out.stores.sort();
        Ok(out)
    }

    /// This directory as `listing` shows it: its datasets as the tree's names, its stores
    /// opened (those opened before are not opened again; one that fails to open is a leaf
    /// whose open fails, logged again then).
    fn with_listing(&self, listing: &Listing) -> (Caterva2, Vec<(String, Arc<RemoteObject>)>) {
        let known = self.stores.lock().clone();
        // Opened again: stores not opened yet, and those that changed on the server since.
        let fresh: Vec<String> = listing
            .stores
            .iter()
            .filter(|r| known.get(*r).is_none_or(|o| o.byte_source().changed()))
            .cloned()
            .collect();
        let opened = self.open_stores(&fresh);
        let mut names = listing.datasets.clone();
        let mut shown = Vec::new();
        for (rel, r) in fresh.into_iter().zip(opened) {
            match r {
                Ok(o) => {
                    // Asked whether it changed on the server as a `.b2z` mounted alone is
                    // (`remote_recheck`); the mount then lists the directory again.
                    if let Some(every) = self.opts.remote_recheck {
                        o.follow_every(every, &self.opts);
                    }
                    self.stores.lock().insert(rel, o);
                }
                Err(e) => {
                    log::warn!("{}: {rel}: {e}", self.url.display());
                    names.push(rel);
                }
            }
        }
        let stores = self.stores.lock();
        for rel in &listing.stores {
            if let Some(o) = stores.get(rel) {
                shown.push((rel.clone(), Arc::clone(o)));
            }
        }
        names.sort();
        let mut listed: Vec<String> = listing
            .datasets
            .iter()
            .chain(&listing.stores)
            .cloned()
            .collect();
        listed.sort();
        let c2 = Caterva2 {
            url: self.url.clone(),
            target: self.target.clone(),
            names,
            listed,
            store: Arc::clone(&self.store),
            http: self.http.clone(),
            rt: Arc::clone(&self.rt),
            opts: self.opts.clone(),
            stats: Arc::clone(&self.stats),
            cache: Arc::clone(&self.cache),
            next: Arc::clone(&self.next),
            stores: Arc::clone(&self.stores),
        };
        (c2, shown)
    }

    /// Lists the directory (one request) and opens its `.b2z` stores.
    fn list(self) -> Result<Caterva2Target, RemoteError> {
        let t0 = std::time::Instant::now();
        let listing = self.listing()?;
        let listed = self.stats.requests();
        let (c2, shown) = self.with_listing(&listing);
        log::info!(
            "{}: {} datasets and {} stores listed with {} requests ({} more to open the \
             stores), {} other files not shown, in {:.1} ms",
            c2.url.display(),
            c2.names.len(),
            shown.len(),
            listing.requests,
            c2.stats.requests() - listed,
            listing.hidden,
            t0.elapsed().as_secs_f64() * 1e3
        );
        Ok(Caterva2Target::Dir(Arc::new(c2), shown))
    }

    /// Opens the stores `rels`, [`OPEN_PARALLEL`] at a time.
    fn open_stores(&self, rels: &[String]) -> Vec<Result<Arc<RemoteObject>, RemoteError>> {
        let mut out = Vec::with_capacity(rels.len());
        for batch in rels.chunks(OPEN_PARALLEL) {
            std::thread::scope(|s| {
                let handles: Vec<_> = batch
                    .iter()
                    .map(|r| s.spawn(move || self.open(r)))
                    .collect();
                for h in handles {
                    out.push(h.join().unwrap_or_else(|_| {
                        Err(err(RemoteErrorKind::Protocol, "store open panicked"))
                    }));
                }
            });
        }
        out
    }
}

impl ByteTree for Caterva2 {
    fn root(&self) -> &Path {
        &self.url
    }

    fn file(&self, rel: &str) -> Option<Arc<dyn ByteSource>> {
        self.open_file(rel).ok()
    }

    fn open_file(&self, rel: &str) -> std::io::Result<Arc<dyn ByteSource>> {
        if self
            .names
            .binary_search_by(|n| n.as_str().cmp(rel))
            .is_err()
        {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{rel} is not one of the datasets listed"),
            ));
        }
        match self.open(rel) {
            Ok(o) => {
                // Asked whether it changed on the server as a dataset mounted alone is
                // (`remote_recheck`); the mount then opens it again through the listing.
                if let Some(every) = self.opts.remote_recheck {
                    o.follow_every(every, &self.opts);
                }
                Ok(o.byte_source())
            }
            Err(e) => Err(e.into_io()),
        }
    }

    fn is_dir(&self, rel: &str) -> bool {
        let dir = format!("{}/", rel.trim_end_matches('/'));
        self.names.iter().any(|n| n.starts_with(&dir))
    }

    fn names(&self) -> Vec<String> {
        self.names.clone()
    }

    fn relist_every(&self) -> Option<Duration> {
        self.opts.c2_relist
    }

    fn relist(&self) -> std::io::Result<Relist> {
        let listing = self.listing().map_err(RemoteError::into_io)?;
        let same = listing.datasets.len() + listing.stores.len() == self.listed.len()
            && listing
                .datasets
                .iter()
                .chain(&listing.stores)
                .all(|n| self.listed.binary_search(n).is_ok());
        if same {
            return Ok(Relist::Unchanged);
        }
        let (c2, shown) = self.with_listing(&listing);
        log::info!(
            "{}: listed again: {} datasets and {} stores (were {} names)",
            self.url.display(),
            listing.datasets.len(),
            listing.stores.len(),
            self.listed.len()
        );
        let stores = shown
            .into_iter()
            .map(|(rel, o)| (rel, o.byte_source()))
            .collect();
        Ok(Relist::Changed(Arc::new(c2), stores))
    }

    /// The directory listed again (one request) with its changed `.b2z` stores opened again
    /// (the others kept): after one of them changed on the server.
    fn reopen(&self) -> Option<std::io::Result<Relist>> {
        let listing = match self.listing() {
            Ok(l) => l,
            Err(e) => return Some(Err(e.into_io())),
        };
        let (c2, shown) = self.with_listing(&listing);
        let stores = shown
            .into_iter()
            .map(|(rel, o)| (rel, o.byte_source()))
            .collect();
        Some(Ok(Relist::Changed(Arc::new(c2), stores)))
    }
}

#[cfg(test)]
mod tests;
