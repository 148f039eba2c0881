//! A Caterva2 login that outlives its cookie: the server's `c2subauth` cookie is a JWT that
//! expires (12 hours after the login in caterva2 2026.9.2, not configurable) or stops being
//! accepted when the server restarts with another secret. Every request of the mount's
//! object store carries the session's current cookie; a request answered 401 logs in again
//! with the stored user and password, once, and is sent again with the new cookie (requests
//! refused at the same moment share one login). A login that fails leaves the 401 to the
//! caller (EIO, logged with the reason).
//!
//! This is an [`HttpService`] wrapped around object_store's own reqwest client, so retries,
//! timeouts and the connection pool stay object_store's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use object_store::ClientOptions;
use object_store::client::{
    HttpClient, HttpConnector, HttpError, HttpRequest, HttpResponse, HttpService, ReqwestConnector,
};
use parking_lot::Mutex;
use reqwest::header::{self, HeaderValue};

/// A server's login: who, and the cookie of the latest login.
#[derive(Debug)]
pub(super) struct Session {
    base: String,
    user: String,
    password: String,
    /// The client that logs in (the API client, without a cookie).
    http: reqwest::Client,
    cookie: Mutex<HeaderValue>,
    /// Serialises logins (requests refused together share one).
    login: tokio::sync::Mutex<()>,
}

impl Session {
    /// A session whose first login gave `cookie` (the `Cookie` header value).
    pub(super) fn new(
        base: &str,
        user: &str,
        password: &str,
        http: reqwest::Client,
        cookie: HeaderValue,
    ) -> Arc<Session> {
        Arc::new(Session {
            base: base.to_owned(),
            user: user.to_owned(),
            password: password.to_owned(),
            http,
            cookie: Mutex::new(cookie),
            login: tokio::sync::Mutex::new(()),
        })
    }

    /// A cookie newer than `refused`: the one another request got meanwhile, or a new
    /// login's.
    async fn renew(&self, refused: &HeaderValue) -> Option<HeaderValue> {
        let _one = self.login.lock().await;
        let now = self.cookie.lock().clone();
        if now != *refused {
            return Some(now);
        }
        match super::api::login(&self.http, &self.base, &self.user, &self.password).await {
            Ok(c) => {
                let v = HeaderValue::from_str(&format!("c2subauth={c}")).ok()?;
                *self.cookie.lock() = v.clone();
                log::info!(
                    "{}: the server refused the login cookie (expired, or the server \
                     restarted): logged in again as {}",
                    self.base,
                    self.user
                );
                Some(v)
            }
            Err(e) => {
                log::warn!(
                    "{}: the server refused the login cookie and logging in again failed: {e}",
                    self.base
                );
                None
            }
        }
    }
}

/// The object store's connector: object_store's reqwest client, behind [`Renewing`].
#[derive(Debug)]
pub(super) struct Connector(pub(super) Arc<Session>);

impl HttpConnector for Connector {
    fn connect(&self, options: &ClientOptions) -> object_store::Result<HttpClient> {
        let inner = ReqwestConnector::default().connect(options)?;
        Ok(HttpClient::new(Renewing {
            inner,
            session: Arc::clone(&self.0),
        }))
    }
}

/// Sends each request with the session's cookie; on 401, renews it once and sends again.
#[derive(Debug)]
struct Renewing {
    inner: HttpClient,
    session: Arc<Session>,
}

/// `req` with `Cookie: cookie` (the body cloned: requests of a mount are GETs and HEADs).
fn with_cookie(req: &HttpRequest, cookie: &HeaderValue) -> HttpRequest {
    let mut r = HttpRequest::new(req.body().clone());
    *r.method_mut() = req.method().clone();
    *r.uri_mut() = req.uri().clone();
    *r.version_mut() = req.version();
    *r.headers_mut() = req.headers().clone();
    r.headers_mut().insert(header::COOKIE, cookie.clone());
    r
}

impl HttpService for Renewing {
    fn call<'a, 'b>(
        &'a self,
        req: HttpRequest,
    ) -> Pin<Box<dyn Future<Output = Result<HttpResponse, HttpError>> + Send + 'b>>
    where
        'a: 'b,
        Self: 'b,
    {
        Box::pin(async move {
            let used = self.session.cookie.lock().clone();
            let res = self.inner.execute(with_cookie(&req, &used)).await?;
            if res.status().as_u16() != 401 {
                return Ok(res);
            }
            match self.session.renew(&used).await {
                Some(fresh) => self.inner.execute(with_cookie(&req, &fresh)).await,
                None => Ok(res),
            }
        })
    }
}
