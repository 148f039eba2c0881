//! The Caterva2 JSON API's HTTP side: the API client (timeouts, `ca_file`, no redirects), the
//! credentials to log in with, the login itself (its `c2subauth` cookie), a `GET` of a JSON
//! answer within a deadline and a size bound, and the classes of HTTP failures
//! ([`RemoteErrorKind`]). What is asked and when is the parent module's.

use std::time::Duration;

use reqwest::header::{self, HeaderMap};

use super::LIST_MAX;
use crate::remote::RemoteOptions;
use crate::remote::client::{RemoteError, RemoteErrorKind};

pub(super) fn err(kind: RemoteErrorKind, why: impl Into<String>) -> RemoteError {
    RemoteError::new(kind, why)
}

/// The class of an HTTP status of the API.
fn status_error(status: reqwest::StatusCode, what: &str) -> RemoteError {
    let kind = match status.as_u16() {
        401 | 403 => RemoteErrorKind::Denied,
        404 => RemoteErrorKind::NotFound,
        500..=599 => RemoteErrorKind::Network,
        _ => RemoteErrorKind::Protocol,
    };
    let hint = if kind == RemoteErrorKind::Denied {
        " (log in: -o c2_user=NAME,c2_password_file=FILE, or B2FS_CATERVA2_USER and \
         B2FS_CATERVA2_PASSWORD)"
    } else {
        ""
    };
    err(kind, format!("{what}: HTTP {status}{hint}"))
}

fn reqwest_error(e: reqwest::Error, what: &str) -> RemoteError {
    let mut why = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        let t = s.to_string();
        if !why.contains(&t) {
            why = format!("{why}: {t}");
        }
        src = s.source();
    }
    err(RemoteErrorKind::Network, format!("{what}: {why}"))
}

/// The user and password to log in with: `-o c2_user=` or `B2FS_CATERVA2_USER`, and the
/// first line of `-o c2_password_file=` or `B2FS_CATERVA2_PASSWORD`. `None`: anonymous.
pub(super) fn credentials(opts: &RemoteOptions) -> Result<Option<(String, String)>, RemoteError> {
    let user = opts
        .c2_user
        .clone()
        .or_else(|| std::env::var("B2FS_CATERVA2_USER").ok())
        .filter(|u| !u.is_empty());
    let Some(user) = user else {
        return Ok(None);
    };
    let password = match &opts.c2_password_file {
        Some(f) => std::fs::read_to_string(f)
            .map_err(|e| {
                err(
                    RemoteErrorKind::Config,
                    format!("c2_password_file {}: {e}", f.display()),
                )
            })?
            .lines()
            .next()
            .unwrap_or_default()
            .to_owned(),
        None => std::env::var("B2FS_CATERVA2_PASSWORD").map_err(|_| {
            err(
                RemoteErrorKind::Config,
                format!(
                    "user {user} has no password: give -o c2_password_file=FILE or \
                     B2FS_CATERVA2_PASSWORD"
                ),
            )
        })?,
    };
    Ok(Some((user, password)))
}

/// The API client (login, listing) of `opts`: timeouts, the `ca_file`, default `headers`.
pub(super) fn api_client(
    opts: &RemoteOptions,
    headers: HeaderMap,
) -> Result<reqwest::Client, RemoteError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder()
        .timeout(opts.timeout)
        .connect_timeout(opts.timeout.min(Duration::from_secs(5)))
        .redirect(reqwest::redirect::Policy::none())
        .default_headers(headers);
    if let Some(ca) = &opts.ca_file {
        let pem = std::fs::read(ca).map_err(|e| {
            err(
                RemoteErrorKind::Config,
                format!("ca_file {}: {e}", ca.display()),
            )
        })?;
        let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
            err(
                RemoteErrorKind::Config,
                format!("ca_file {}: {e}", ca.display()),
            )
        })?;
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    b.build()
        .map_err(|e| reqwest_error(e, "cannot make an HTTP client"))
}

/// Logs in at `base`: the `c2subauth` cookie's value.
pub(super) async fn login(
    http: &reqwest::Client,
    base: &str,
    user: &str,
    password: &str,
) -> Result<String, RemoteError> {
    let form = url::form_urlencoded::Serializer::new(String::new())
        .append_pair("username", user)
        .append_pair("password", password)
        .finish();
    let what = format!("{base}: login as {user}");
    let r = http
        .post(format!("{base}/auth/jwt/login"))
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(form)
        .send()
        .await
        .map_err(|e| reqwest_error(e, &what))?;
    let status = r.status();
    if status.as_u16() == 400 || status.as_u16() == 401 {
        return Err(err(
            RemoteErrorKind::Denied,
            format!("{what}: refused (HTTP {status}: wrong user or password)"),
        ));
    }
    if !status.is_success() {
        return Err(status_error(status, &what));
    }
    r.headers()
        .get_all(header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|c| {
            let (kv, _) = c.split_once(';').unwrap_or((c, ""));
            let (k, v) = kv.split_once('=')?;
            (k.trim() == "c2subauth").then(|| v.trim().to_owned())
        })
        .ok_or_else(|| {
            err(
                RemoteErrorKind::Protocol,
                format!("{what}: no c2subauth cookie"),
            )
        })
}

/// `GET url` within `deadline`: the body (at most [`LIST_MAX`] bytes) of a 2xx answer.
pub(super) async fn get_json(
    http: &reqwest::Client,
    url: &str,
    deadline: Duration,
) -> Result<serde_json::Value, RemoteError> {
    let fetch = async {
        let mut r = http
            .get(url)
            .send()
            .await
            .map_err(|e| reqwest_error(e, url))?;
        if !r.status().is_success() {
            return Err(status_error(r.status(), url));
        }
        let mut body = Vec::new();
        while let Some(piece) = r.chunk().await.map_err(|e| reqwest_error(e, url))? {
            if body.len() + piece.len() > LIST_MAX {
                return Err(err(
                    RemoteErrorKind::Protocol,
                    format!("{url}: an answer longer than {LIST_MAX} bytes"),
                ));
            }
            body.extend_from_slice(&piece);
        }
        serde_json::from_slice(&body)
            .map_err(|e| err(RemoteErrorKind::Protocol, format!("{url}: not JSON: {e}")))
    };
    tokio::time::timeout(deadline, fetch)
        .await
        .unwrap_or_else(|_| {
            Err(err(
                RemoteErrorKind::Network,
                format!("{url}: no answer within {:.1} s", deadline.as_secs_f64()),
            ))
        })
}
