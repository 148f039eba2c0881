//! The remote part of the command line: the `-o` options of remote sources (parsed into
//! [`RemoteOptions`]) and opening a URL source for `mount` and `info` (one-line errors with
//! their exit codes: 3 for an object that is missing, refused or not a container, 6 for an
//! endpoint that cannot be reached or keeps failing).

use std::time::Duration;

use super::Error;
use super::args::parse_size;
use crate::container::Opened;
use crate::remote::RemoteOptions;

/// The source argument as a URL, when it is one.
pub fn as_url(source: &std::path::Path) -> Option<&str> {
    source.to_str().filter(|s| crate::remote::is_url(s))
}

/// Opens the source at `url` (a frame, a `.b2z` store, or a prefix holding a sparse frame, a
/// bcolz root or a `.b2d` store), logging how many requests that took.
///
/// # Errors
/// [`Error::Remote`] with the class's exit code (3: the object is missing, refused or not
/// readable by ranges; 6: the endpoint cannot be reached or keeps failing), or
/// [`Error::Source`] when the object is not a container.
#[cfg(feature = "remote")]
pub fn open(url: &str, opts: &RemoteOptions) -> Result<Opened, Error> {
    use crate::remote::{RemoteError, RemoteErrorKind as K};
    let remote_err = |e: RemoteError| Error::Remote {
        url: url.to_owned(),
        code: match e.kind {
            K::Network => super::EXIT_NETWORK,
            K::Config => super::EXIT_USAGE,
            K::NotFound | K::Denied | K::Protocol => super::EXIT_SOURCE,
            K::Changed => super::EXIT_OTHER,
        },
        why: e.why,
    };
    let source_err = |e| Error::Source {
        path: url.into(),
        source: e,
    };
    if opts.caterva2 || crate::remote::looks_like_caterva2(url) {
        return open_caterva2(url, opts).map_err(|e| match e {
            Caterva2Error::Remote(e) => remote_err(e),
            Caterva2Error::Source(e) => source_err(e),
        });
    }
    // A prefix (a sparse frame or bcolz root): a URL ending in '/', or a URL that names no
    // object but has objects under it. S3 answers a GET of a prefix with 404; a WebDAV
    // server (the listing an HTTP prefix needs: PROPFIND) answers a GET of a collection with
    // 405, which the client reports as not found too. A plain web server cannot list: there
    // the object's own error is the one to report, not the failed listing's.
    let is_s3 = url
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("s3://"));
    let object = if url.ends_with('/') {
        Err(None)
    } else {
        match crate::remote::open(url, opts) {
            Ok(o) => Ok(o),
            Err(e) if e.kind == K::NotFound => Err(Some(e)),
            Err(e) => return Err(remote_err(e)),
        }
    };
    let object = match object {
        Ok(o) => o,
        Err(not_found) => {
            let prefix = match crate::remote::open_prefix(url, opts) {
                Ok(p) => p,
                Err(e) => {
                    return Err(match not_found {
                        Some(_) if is_s3 && e.kind != K::NotFound => remote_err(e),
                        Some(first) => {
                            log::debug!("{url}: not an object; as a prefix: {}", e.why);
                            remote_err(first)
                        }
                        None => remote_err(e),
                    });
                }
            };
            if let Some(every) = opts.remote_recheck {
                prefix.follow_every(every, opts);
            }
            let tree = prefix.byte_tree();
            // A `.b2d` store (embed.b2e at the root), a sparse frame or bcolz root, else a
            // directory of sources.
            let opened = if tree.file("embed.b2e").is_some() {
                let store = crate::container::store::dir::open_store_tree(tree);
                Opened::Collection(store.map_err(source_err)?)
            } else {
                match crate::container::open_tree(tree) {
                    Ok(c) => Opened::Single(c),
                    Err(single @ crate::container::ContainerError::NotAContainer { .. }) => {
                        let (tree, stores) = prefix.sources(opts).map_err(|mut e| {
                            // Neither one source nor a directory of them: say both.
                            if e.kind == K::NotFound {
                                e.why = format!("{}; as one source: {single}", e.why);
                            }
                            remote_err(e)
                        })?;
                        Opened::Collection(crate::container::store::dir::open_listed(tree, stores))
                    }
                    Err(e) => return Err(source_err(e)),
                }
            };
            log::info!(
                "{url}: container opened with {} requests ({} bytes) for {} objects",
                prefix.stats().requests(),
                prefix.stats().bytes(),
                prefix.len()
            );
            return Ok(opened);
        }
    };
    let bytes = object.byte_source();
    let mut magic = [0u8; 4];
    let zip = bytes.len() >= 4
        && bytes.read_exact_at(0, &mut magic).is_ok()
        && (magic == *b"PK\x03\x04" || magic == *b"PK\x05\x06");
    if let Some(every) = opts.remote_recheck {
        object.follow_every(every, opts);
    }
    let opened = if zip {
        Opened::Collection(crate::container::store::open_store_bytes(bytes).map_err(source_err)?)
    } else {
        Opened::Single(crate::container::open_bytes(bytes).map_err(source_err)?)
    };
    log::info!(
        "{url}: container opened with {} requests ({} bytes)",
        object.stats().requests(),
        object.stats().bytes()
    );
    Ok(opened)
}

/// Why a Caterva2 source did not open.
#[cfg(feature = "remote")]
enum Caterva2Error {
    Remote(crate::remote::RemoteError),
    Source(crate::container::ContainerError),
}

/// Opens a Caterva2 root, directory or dataset: a dataset as a single source, a `.b2z` as
/// a store, a directory as a collection of its datasets and stores.
#[cfg(feature = "remote")]
fn open_caterva2(url: &str, opts: &RemoteOptions) -> Result<Opened, Caterva2Error> {
    use crate::container::store;
    use crate::remote::Caterva2Target as T;
    let opened = match crate::remote::open_caterva2(url, opts).map_err(Caterva2Error::Remote)? {
        T::Dataset(o) => {
            if let Some(every) = opts.remote_recheck {
                o.follow_every(every, opts);
            }
            Opened::Single(
                crate::container::open_bytes(o.byte_source()).map_err(Caterva2Error::Source)?,
            )
        }
        T::Store(o) => {
            if let Some(every) = opts.remote_recheck {
                o.follow_every(every, opts);
            }
            Opened::Collection(
                store::open_store_bytes(o.byte_source()).map_err(Caterva2Error::Source)?,
            )
        }
        T::Dir(c2, objects) => {
            log::info!(
                "{url}: {} datasets, {} stores, {} requests so far",
                c2.len(),
                objects.len(),
                c2.stats().requests()
            );
            let stores = objects
                .into_iter()
                .map(|(rel, o)| (rel, o.byte_source()))
                .collect();
            Opened::Collection(store::dir::open_listed(c2, stores))
        }
    };
    Ok(opened)
}

/// Without the `remote` feature a URL is a usage error.
///
/// # Errors
/// Always [`Error::Usage`].
#[cfg(not(feature = "remote"))]
pub fn open(url: &str, _opts: &RemoteOptions) -> Result<Opened, Error> {
    Err(Error::Usage(format!(
        "{url}: this b2fs was built without the 'remote' feature"
    )))
}

/// The value of an interval option (`remote_recheck`, `c2_relist`): seconds up to a day,
/// `0` for never (`None`).
fn interval(key: &str, v: &str) -> Result<Option<Duration>, String> {
    let secs: f64 = v
        .parse()
        .ok()
        .filter(|s: &f64| (0.0..=86400.0).contains(s))
        .ok_or_else(|| format!("option '{key}': expected seconds, got '{v}'"))?;
    Ok((secs > 0.0).then(|| Duration::from_secs_f64(secs)))
}

/// Applies one `-o` option to `o` if it is a remote one: `Ok(true)` when it was, `Ok(false)`
/// when `key` is not a remote option.
///
/// # Errors
/// A message naming the option when its value is missing or malformed.
pub fn set_option(o: &mut RemoteOptions, key: &str, value: Option<&str>) -> Result<bool, String> {
    let need = || value.ok_or_else(|| format!("option '{key}' needs a value ({key}=...)"));
    match key {
        "endpoint" => {
            let v = need()?;
            if !v.starts_with("http://") && !v.starts_with("https://") {
                return Err(format!(
                    "option 'endpoint': expected an http(s) URL, got '{v}'"
                ));
            }
            o.endpoint = Some(v.to_owned());
        }
        "region" => o.region = Some(need()?.to_owned()),
        "no_sign_request" => {
            if value.is_some() {
                return Err("option 'no_sign_request' takes no value".into());
            }
            o.no_sign_request = true;
        }
        "remote_cache" => {
            let v = need()?;
            o.cache_bytes =
                parse_size(v).ok_or_else(|| format!("option 'remote_cache': bad size '{v}'"))?;
        }
        "remote_timeout" => {
            let v = need()?;
            let secs: f64 = v
                .parse()
                .ok()
                .filter(|s: &f64| *s > 0.0 && *s <= 3600.0)
                .ok_or_else(|| format!("option 'remote_timeout': expected seconds, got '{v}'"))?;
            o.timeout = Duration::from_secs_f64(secs);
        }
        "remote_recheck" => o.remote_recheck = interval(key, need()?)?,
        "c2_relist" => o.c2_relist = interval(key, need()?)?,
        "remote_retries" => {
            let v = need()?;
            o.retries = v
                .parse()
                .ok()
                .filter(|n| *n <= 20)
                .ok_or_else(|| format!("option 'remote_retries': expected 0..20, got '{v}'"))?;
        }
        "ca_file" => {
            // Absolute: the daemon does not run where the command was typed.
            let v = need()?;
            o.ca_file = Some(std::path::absolute(v).unwrap_or_else(|_| v.into()));
        }
        "cache_dir" => {
            let v = need()?;
            o.cache_dir = Some(std::path::absolute(v).unwrap_or_else(|_| v.into()));
        }
        "cache_dir_size" => {
            let v = need()?;
            o.cache_dir_size = parse_size(v).filter(|&n| n >= 1 << 20).ok_or_else(|| {
                format!("option 'cache_dir_size': expected a size of 1M or more, got '{v}'")
            })? as u64;
        }
        "caterva2" => {
            if value.is_some() {
                return Err("option 'caterva2' takes no value".into());
            }
            o.caterva2 = true;
        }
        "c2_user" => o.c2_user = Some(need()?.to_owned()),
        "c2_password_file" => {
            let v = need()?;
            o.c2_password_file = Some(std::path::absolute(v).unwrap_or_else(|_| v.into()));
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// The options of `o` that differ from the defaults, as `-o` items (none when none do).
pub fn to_arg(o: &RemoteOptions) -> Vec<String> {
    let d = RemoteOptions::default();
    let mut v = Vec::new();
    if let Some(e) = &o.endpoint {
        v.push(format!("endpoint={e}"));
    }
    if let Some(r) = &o.region {
        v.push(format!("region={r}"));
    }
    if o.no_sign_request {
        v.push("no_sign_request".into());
    }
    if o.cache_bytes != d.cache_bytes {
        v.push(format!("remote_cache={}", o.cache_bytes));
    }
    if o.timeout != d.timeout {
        v.push(format!("remote_timeout={}", o.timeout.as_secs_f64()));
    }
    if o.retries != d.retries {
        v.push(format!("remote_retries={}", o.retries));
    }
    if let Some(ca) = &o.ca_file {
        v.push(format!("ca_file={}", ca.display()));
    }
    if let Some(d) = &o.cache_dir {
        v.push(format!("cache_dir={}", d.display()));
    }
    if o.cache_dir_size != d.cache_dir_size {
        v.push(format!("cache_dir_size={}", o.cache_dir_size));
    }
    if o.caterva2 {
        v.push("caterva2".into());
    }
    if let Some(u) = &o.c2_user {
        v.push(format!("c2_user={u}"));
    }
    if let Some(f) = &o.c2_password_file {
        v.push(format!("c2_password_file={}", f.display()));
    }
    if o.remote_recheck != d.remote_recheck {
        let secs = o.remote_recheck.map_or(0.0, |t| t.as_secs_f64());
        v.push(format!("remote_recheck={secs}"));
    }
    if o.c2_relist != d.c2_relist {
        let secs = o.c2_relist.map_or(0.0, |t| t.as_secs_f64());
        v.push(format!("c2_relist={secs}"));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_options_round_trip_and_refuse_bad_values() {
        let mut o = RemoteOptions::default();
        for (k, v) in [
            ("endpoint", Some("http://127.0.0.1:9000")),
            ("region", Some("eu-west-1")),
            ("no_sign_request", None),
            ("remote_cache", Some("64M")),
            ("remote_timeout", Some("0.5")),
            ("remote_retries", Some("0")),
            ("ca_file", Some("/etc/b2fs/ca.pem")),
            ("cache_dir", Some("/var/cache/b2fs")),
            ("cache_dir_size", Some("2G")),
            ("caterva2", None),
            ("c2_user", Some("me@example.com")),
            ("c2_password_file", Some("/etc/b2fs/c2pass")),
            ("c2_relist", Some("2.5")),
            ("remote_recheck", Some("4")),
        ] {
            assert_eq!(set_option(&mut o, k, v), Ok(true), "{k}");
        }
        assert_eq!(o.c2_relist, Some(Duration::from_millis(2500)));
        assert_eq!(o.remote_recheck, Some(Duration::from_secs(4)));
        assert_eq!(o.cache_bytes, 64 << 20);
        assert_eq!(o.timeout, Duration::from_millis(500));
        let mut back = RemoteOptions::default();
        for a in to_arg(&o) {
            let (k, v) = match a.split_once('=') {
                Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
                None => (a.clone(), None),
            };
            assert_eq!(set_option(&mut back, &k, v.as_deref()), Ok(true));
        }
        assert_eq!(back, o);
        assert_eq!(set_option(&mut o, "cache_size", Some("1M")), Ok(false));
        for (k, v) in [
            ("endpoint", Some("ftp://x")),
            ("endpoint", None),
            ("no_sign_request", Some("1")),
            ("remote_cache", Some("lots")),
            ("remote_timeout", Some("0")),
            ("remote_retries", Some("99")),
            ("cache_dir_size", Some("1K")),
            ("caterva2", Some("yes")),
            ("c2_user", None),
            ("c2_relist", Some("-1")),
            ("remote_recheck", Some("soon")),
            ("c2_relist", None),
        ] {
            assert!(set_option(&mut o, k, v).is_err(), "{k}={v:?}");
        }
        let mut off = RemoteOptions::default();
        assert_eq!(set_option(&mut off, "c2_relist", Some("0")), Ok(true));
        assert_eq!(off.c2_relist, None, "0: never listed again");
        let mut back = RemoteOptions::default();
        for a in to_arg(&off) {
            let (k, v) = a.split_once('=').unwrap();
            set_option(&mut back, k, Some(v)).unwrap();
        }
        assert_eq!(
            back.c2_relist, None,
            "c2_relist=0 survives the daemon's round trip"
        );
        assert!(to_arg(&RemoteOptions::default()).is_empty());
    }
}
