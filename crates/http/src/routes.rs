//! The routes of the RPM test service (draft-ietf-ippm-responsiveness,
//! section "Test Endpoint Discovery" and network-quality/server's
//! SERVER_SPEC.md):
//!
//! | path | method | answer |
//! |------|--------|--------|
//! | `/.well-known/nq` (and `/api/v1/config`) | GET, HEAD | the config JSON, URLs built from the Host the client used |
//! | `/api/v1/large` | GET | [`LARGE_OBJECT_BYTES`] zero bytes (fewer under `--max-bytes`), streamed |
//! | `/api/v1/small` | GET | 1 byte |
//! | `/api/v1/upload` | POST, PUT | reads and discards the body, answers `{"received_bytes":N}` (413 over `--max-bytes`) |
//! | `/` and `/browser/*` | GET, HEAD | the browser test page and its assets ([`crate::browser`]), with a strict CSP |
//! | `/api/v1/browser` | GET, HEAD | the page's parameters: phases, grade table ([`crate::browser::params_json`]) |
//! | `/__down`, `/__up` | GET, POST, OPTIONS | Cloudflare's speed-test API ([`crate::cloudflare`]) |
//!
//! Never a redirect, never a content encoding (the client's
//! `Accept-Encoding` is ignored: bodies go as they are). Every response
//! carries `Cache-Control: no-store` so a proxy cannot answer for us.
//! The page and its assets are public (no permit key); the page passes its
//! own `?key=` on to the endpoints it measures with.

use crate::body::{LARGE_OBJECT_BYTES, LargeBody, Payload};
use crate::browser::{self, Asset};
use crate::budget::Charge;
use crate::cloudflare;
use crate::record::tcp::Dir;
use crate::service::Shared;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

pub const WELL_KNOWN: &str = "/.well-known/nq";
pub const CONFIG_ALIAS: &str = "/api/v1/config";
pub const LARGE: &str = "/api/v1/large";
pub const SMALL: &str = "/api/v1/small";
pub const UPLOAD: &str = "/api/v1/upload";

/// The header a client may send the `--permit-key` in.
pub const PERMIT_HEADER: &str = "x-bloatlab-permit-key";
/// The query parameter a client may send it in instead. A config fetched
/// with it carries it in every URL, so stock RPM clients (which only know
/// the config URL) pass it on every request.
pub const PERMIT_QUERY: &str = "key";

/// Seconds a client is told to wait after a 429.
pub const RETRY_AFTER_S: u32 = 5;

/// One connection's facts a route may need.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub local: SocketAddr,
    pub tls: bool,
    /// The connection's socket, for TCP_INFO while a request of it runs
    /// ([`crate::record::tcp`]).
    pub fd: std::os::fd::RawFd,
}

/// What a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    Config,
    Large,
    Small,
    Upload,
    /// The browser test page or one of its assets.
    Page(&'static Asset),
    /// The page's parameters.
    BrowserParams,
    /// Cloudflare's `/__down` and `/__up` ([`crate::cloudflare`]).
    CfDown,
    CfUp,
}

impl Route {
    /// The route at `path`, if any.
    pub fn at(path: &str) -> Option<Route> {
        match path {
            WELL_KNOWN | CONFIG_ALIAS => Some(Route::Config),
            LARGE => Some(Route::Large),
            SMALL => Some(Route::Small),
            UPLOAD => Some(Route::Upload),
            browser::PARAMS => Some(Route::BrowserParams),
            cloudflare::DOWN => Some(Route::CfDown),
            cloudflare::UP => Some(Route::CfUp),
            _ => Asset::at(path).map(Route::Page),
        }
    }

    fn allows(self, m: &Method) -> bool {
        match self {
            Route::Config | Route::Small | Route::Page(_) | Route::BrowserParams => {
                m == Method::GET || m == Method::HEAD
            }
            Route::Large => m == Method::GET,
            Route::Upload => m == Method::POST || m == Method::PUT,
            Route::CfDown => m == Method::GET || m == Method::OPTIONS,
            Route::CfUp => m == Method::POST || m == Method::OPTIONS,
        }
    }

    fn allow_header(self) -> &'static str {
        match self {
            Route::Config | Route::Small | Route::Page(_) | Route::BrowserParams => "GET, HEAD",
            Route::Large => "GET",
            Route::Upload => "POST, PUT",
            Route::CfDown => "GET, OPTIONS",
            Route::CfUp => "POST, OPTIONS",
        }
    }
}

/// Answers one request of an admitted connection.
pub async fn handle(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    conn: ConnInfo,
) -> Result<Response<Payload>, std::convert::Infallible> {
    shared.stats.requests.fetch_add(1, Ordering::Relaxed);
    Ok(route(req, &shared, conn).await)
}

/// Answers every request of a connection that is over a cap: 429 with
/// `Retry-After` (RFC 6585 section 4), and on HTTP/1.1 `Connection: close`.
pub async fn refuse(
    req: Request<Incoming>,
    shared: Arc<Shared>,
    why: String,
) -> Result<Response<Payload>, std::convert::Infallible> {
    shared.stats.requests.fetch_add(1, Ordering::Relaxed);
    let mut r = text(StatusCode::TOO_MANY_REQUESTS, format!("{why}\n"));
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
    if req.version() < hyper::Version::HTTP_2 {
        r.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if cloudflare::is_cf_path(req.uri().path()) {
        cloudflare::cors_headers(r.headers_mut());
    }
    Ok(r)
}

async fn route(req: Request<Incoming>, shared: &Shared, conn: ConnInfo) -> Response<Payload> {
    if crate::record::http::claims(req.uri().path()) {
        return crate::record::http::handle(req, shared, conn).await;
    }
    let Some(route) = Route::at(req.uri().path()) else {
        return text(StatusCode::NOT_FOUND, "no such path\n");
    };
    if !route.allows(req.method()) {
        let mut r = text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut().insert(
            header::ALLOW,
            HeaderValue::from_static(route.allow_header()),
        );
        return r;
    }
    if let Route::Page(asset) = route {
        return page(asset);
    }
    if let Some(r) = cloudflare::preflight(route, req.method()) {
        return r;
    }
    let query_key = req.uri().query().and_then(permit_from_query);
    if !permitted(&req, shared) {
        let mut r = text(
            StatusCode::FORBIDDEN,
            "this server needs its permit key (header x-bloatlab-permit-key or ?key=)\n",
        );
        if matches!(route, Route::CfDown | Route::CfUp) {
            cloudflare::cors_headers(r.headers_mut());
        }
        return r;
    }
    match route {
        Route::Config => {
            let Some(authority) = authority(&req, conn) else {
                return text(StatusCode::BAD_REQUEST, "bad Host header\n");
            };
            let key = shared.permit_key.as_ref().and(query_key.as_deref());
            let body = config_json(conn.tls, &authority, key);
            let mut r = respond(StatusCode::OK, Payload::full(body));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        Route::Small => respond(StatusCode::OK, Payload::full(Bytes::from_static(b"x"))),
        Route::Page(asset) => page(asset),
        Route::BrowserParams => {
            let body = browser::params_json(shared.caps.max_bytes.0);
            let mut r = respond(StatusCode::OK, Payload::full(body));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            r
        }
        Route::Large => {
            if shared.caps.download_rate.is_some_and(|(per, _)| per.0 == 0) {
                return too_many("downloads are off on this server (--max-reverse-rate 0)");
            }
            let charge = shared.download_budget.clone().map(|budget| Charge {
                budget,
                peer: conn.peer.ip(),
            });
            let len = LARGE_OBJECT_BYTES.min(shared.caps.max_bytes.0);
            let tracker = shared.records.track(req.uri().query(), conn, Dir::Down);
            let body = LargeBody::new(len, charge, Arc::clone(&shared.stats)).tracked(tracker);
            respond(StatusCode::OK, Payload::Large(body))
        }
        Route::Upload => sink(req, shared, conn).await,
        Route::CfDown => cloudflare::down(&req, shared, conn),
        Route::CfUp => cloudflare::up(req, shared, conn).await,
    }
}

/// Whether a request carries the server's permit key (header or `?key=`),
/// or the server has none.
pub(crate) fn permitted(req: &Request<Incoming>, shared: &Shared) -> bool {
    let Some(key) = &shared.permit_key else {
        return true;
    };
    let sent = req
        .headers()
        .get(PERMIT_HEADER)
        .map(|v| v.as_bytes().to_vec())
        .or_else(|| {
            req.uri()
                .query()
                .and_then(permit_from_query)
                .map(String::into_bytes)
        });
    sent.is_some_and(|s| same_key(&s, key.as_bytes()))
}

/// Reads an upload and drops every chunk as it arrives, so memory stays flat
/// whatever its size; each chunk is charged to the upload budget (the
/// client then meets TCP or HTTP/2 flow control, as from a slow link). More
/// than `--max-bytes` gets 413, at once when `Content-Length` says so.
pub(crate) async fn sink(
    req: Request<Incoming>,
    shared: &Shared,
    conn: ConnInfo,
) -> Response<Payload> {
    if shared.caps.upload_rate.is_some_and(|(per, _)| per.0 == 0) {
        return too_many("uploads are off on this server (--max-rate 0)");
    }
    let cap = shared.caps.max_bytes.0;
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > cap) {
        linger(req.into_body());
        return too_large(cap);
    }
    let charge = shared.upload_budget.clone().map(|budget| Charge {
        budget,
        peer: conn.peer.ip(),
    });
    // Nothing is read while the budget is in debt, so a burst of new
    // uploads does not each add a chunk to it.
    if let Some(wait) = charge.as_ref().and_then(|c| c.after(Instant::now(), 0)) {
        tokio::time::sleep(wait).await;
    }
    let mut tracker = shared.records.track(req.uri().query(), conn, Dir::Up);
    let mut body = req.into_body();
    let mut received: u64 = 0;
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            // The client reset or went away: nothing to answer.
            return text(StatusCode::BAD_REQUEST, "upload ended early\n");
        };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let n = data.len() as u64;
        if let Some(t) = &mut tracker {
            t.poll(Instant::now());
        }
        received += n;
        shared.stats.uploaded.fetch_add(n, Ordering::Relaxed);
        if received > cap {
            linger(body);
            return too_large(cap);
        }
        if let Some(wait) = charge.as_ref().and_then(|c| c.after(Instant::now(), n)) {
            tokio::time::sleep(wait).await;
        }
    }
    let mut r = respond(
        StatusCode::OK,
        Payload::full(format!("{{\"received_bytes\":{received}}}\n")),
    );
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// How long and how much of a refused upload's body [`linger`] still reads.
const LINGER_TIME: Duration = Duration::from_secs(2);
const LINGER_BYTES: u64 = 4 << 20;

/// Reads and discards the rest of a refused upload for a bounded time and
/// amount, then drops it (hyper then closes an HTTP/1.1 connection and resets
/// an HTTP/2 stream). An HTTP/1.1 client without `Expect: 100-continue` is
/// still writing its body when the 413 goes out; closing at once would reset
/// the connection under it, and most clients then report a broken pipe
/// instead of our answer. nginx's lingering close does the same.
pub(crate) fn linger(mut body: Incoming) {
    tokio::spawn(async move {
        let mut read = 0u64;
        let drain = async {
            while read < LINGER_BYTES {
                match body.frame().await {
                    Some(Ok(f)) => read += f.data_ref().map_or(0, |d| d.len() as u64),
                    _ => break,
                }
            }
        };
        let _ = tokio::time::timeout(LINGER_TIME, drain).await;
    });
}

/// 413 for an upload over `--max-bytes` (RFC 9110 section 15.5.14); the
/// rest of the body is read only by [`linger`].
fn too_large(cap: u64) -> Response<Payload> {
    text(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("an upload may be at most {cap} bytes on this server (--max-bytes)\n"),
    )
}

/// The draft's config (section "Test Endpoint Discovery"): `version` and
/// `urls` with `large_download_url`, `small_download_url`, `upload_url`, plus
/// the older `*_https_*` names deployed clients still read (as
/// network-quality/server's nginx example serves them).
pub fn config_json(tls: bool, authority: &str, key: Option<&str>) -> String {
    let scheme = if tls { "https" } else { "http" };
    let url = |path: &str| match key {
        Some(k) => format!("{scheme}://{authority}{path}?{PERMIT_QUERY}={k}"),
        None => format!("{scheme}://{authority}{path}"),
    };
    let (large, small, upload) = (url(LARGE), url(SMALL), url(UPLOAD));
    let v = serde_json::json!({
        "version": 1,
        "urls": {
            "large_download_url": large,
            "small_download_url": small,
            "upload_url": upload,
            "large_https_download_url": large,
            "small_https_download_url": small,
            "https_upload_url": upload,
        }
    });
    let mut s = v.to_string();
    s.push('\n');
    s
}

/// The authority the client addressed: `:authority` (HTTP/2) or `Host`
/// (HTTP/1.1), checked to be a plain host[:port] so nothing else can be
/// reflected into the URLs; without either (HTTP/1.0), our own address.
fn authority(req: &Request<Incoming>, conn: ConnInfo) -> Option<String> {
    let raw = match req.uri().authority() {
        Some(a) => Some(a.as_str().to_string()),
        None => match req.headers().get(header::HOST) {
            Some(h) => Some(h.to_str().ok()?.to_string()),
            None => None,
        },
    };
    match raw {
        Some(a) => valid_authority(&a).then_some(a),
        None => Some(conn.local.to_string()),
    }
}

/// A host (name, IPv4, bracketed IPv6) with an optional port, no userinfo.
pub fn valid_authority(a: &str) -> bool {
    let Ok(parsed) = a.parse::<hyper::http::uri::Authority>() else {
        return false;
    };
    !a.is_empty()
        && !a.contains('@')
        && parsed.as_str() == a
        && a.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-.:[]_".contains(&b))
}

/// The `key` parameter of a query, kept as sent (it goes back into URLs
/// verbatim) when it is URL-safe; anything else is not our key.
fn permit_from_query(q: &str) -> Option<String> {
    q.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == PERMIT_QUERY)
        .map(|(_, v)| v.to_string())
        .filter(|v| {
            v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        })
}

/// Compares without an early exit, so the time taken does not tell how
/// much of a guess was right.
fn same_key(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn respond(status: StatusCode, body: Payload) -> Response<Payload> {
    let mut r = Response::new(body);
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    r
}

/// The headers every HTML page the server renders carries: its content security policy,
/// no MIME sniffing, no referrer, no framing.
pub(crate) fn page_headers(h: &mut hyper::HeaderMap, csp: HeaderValue) {
    h.insert(header::CONTENT_SECURITY_POLICY, csp);
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// The page or one of its assets, with headers that keep it to itself: the
/// CSP ([`browser::CSP`]), no MIME sniffing, no referrer, no framing, and
/// cross-origin isolation (COOP + COEP), which also gives its scripts the
/// finest timer the browser offers.
fn page(asset: &'static Asset) -> Response<Payload> {
    let mut r = respond(StatusCode::OK, Payload::full(asset.bytes()));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    page_headers(h, HeaderValue::from_static(browser::CSP));
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-embedder-policy",
        HeaderValue::from_static("require-corp"),
    );
    r
}

pub(crate) fn text(status: StatusCode, msg: impl Into<Bytes>) -> Response<Payload> {
    let mut r = respond(status, Payload::full(msg));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

pub(crate) fn too_many(why: &str) -> Response<Payload> {
    let mut r = text(StatusCode::TOO_MANY_REQUESTS, format!("{why}\n"));
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_S));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_has_the_draft_and_legacy_names_on_the_clients_host() {
        let v: serde_json::Value =
            serde_json::from_str(&config_json(true, "nq.example:8443", None)).unwrap();
        assert_eq!(v["version"], 1);
        let u = &v["urls"];
        assert_eq!(
            u["large_download_url"],
            "https://nq.example:8443/api/v1/large"
        );
        assert_eq!(
            u["small_download_url"],
            "https://nq.example:8443/api/v1/small"
        );
        assert_eq!(u["upload_url"], "https://nq.example:8443/api/v1/upload");
        assert_eq!(u["large_https_download_url"], u["large_download_url"]);
        assert_eq!(u["small_https_download_url"], u["small_download_url"]);
        assert_eq!(u["https_upload_url"], u["upload_url"]);
        let v: serde_json::Value =
            serde_json::from_str(&config_json(false, "[::1]:80", Some("k3y"))).unwrap();
        assert_eq!(
            v["urls"]["upload_url"],
            "http://[::1]:80/api/v1/upload?key=k3y"
        );
    }

    #[test]
    fn only_plain_authorities_are_reflected_into_urls() {
        for ok in ["localhost", "127.0.0.1:8443", "[::1]:443", "nq.example.com"] {
            assert!(valid_authority(ok), "{ok}");
        }
        for bad in ["", "user@host", "a b", "host/path", "host\"x", "h%41st"] {
            assert!(!valid_authority(bad), "{bad}");
        }
    }

    #[test]
    fn permit_key_is_read_from_the_query_only_when_url_safe() {
        assert_eq!(
            permit_from_query("a=1&key=abcDEF12"),
            Some("abcDEF12".into())
        );
        assert_eq!(permit_from_query("key=a%22b"), None);
        assert_eq!(permit_from_query("nokey"), None);
        assert!(
            same_key(b"abcd", b"abcd") && !same_key(b"abcd", b"abce") && !same_key(b"a", b"ab")
        );
    }

    #[test]
    fn routes_and_methods() {
        assert_eq!(Route::at(WELL_KNOWN), Some(Route::Config));
        assert_eq!(Route::at("/api/v1/large/"), None);
        assert!(Route::Upload.allows(&Method::POST) && !Route::Upload.allows(&Method::GET));
        assert!(!Route::Large.allows(&Method::POST));
    }
}
