//! Cloudflare's speed-test API (issue 21, deliverable 3), so that the npm
//! package `@cloudflare/speedtest` can be pointed at a bloatlab server with
//! its `downloadApiUrl` / `uploadApiUrl` options:
//!
//! | path | method | answer |
//! |------|--------|--------|
//! | `/__down?bytes=N` | GET | N zero bytes (0 for its latency probes), at most `--max-bytes` |
//! | `/__up` | POST | reads and discards the body, as `/api/v1/upload` |
//! | both | OPTIONS | a CORS preflight answer |
//!
//! What the package reads (dist/speedtest.js of version 1.14): the status,
//! the body, the `Server-Timing` header's `cfRequestDuration;dur=MS` (the
//! server's own time, which it takes off the time to first byte to get the
//! network's round trip), and the request's Resource Timing entry. It sends
//! other query parameters (`measId`, `during`) that change nothing here. A
//! page on another origin can read the header only when CORS exposes it,
//! and the timing entry is all zeros unless `Timing-Allow-Origin` lets it
//! see it: so every answer here carries `Access-Control-Allow-Origin: *`,
//! `Access-Control-Expose-Headers: Server-Timing` and
//! `Timing-Allow-Origin: *`. Nothing is credentialed (no cookies), so `*`
//! gives nothing away. The permit key, when the server has one, goes in the
//! URLs' query (`downloadApiUrl: "https://host/__down?key=K"`: the package
//! keeps a URL's own parameters).

use crate::body::{LargeBody, Payload};
use crate::budget::Charge;
use crate::routes::{ConnInfo, Route, text, too_many};
use crate::service::Shared;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use std::sync::Arc;
use std::time::Instant;

pub const DOWN: &str = "/__down";
pub const UP: &str = "/__up";

/// Why a `bytes` parameter is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BytesError {
    Missing,
    NotANumber(String),
    OverCap { asked: u64, cap: u64 },
}

impl std::fmt::Display for BytesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BytesError::Missing => write!(f, "/__down needs ?bytes=N (N bytes of body, 0 or more)"),
            BytesError::NotANumber(s) => write!(
                f,
                "bad ?bytes={s:?}: give the body's length as a whole number of bytes, 0 or more"
            ),
            BytesError::OverCap { asked, cap } => write!(
                f,
                "?bytes={asked} is more than this server sends in one response ({cap} bytes, --max-bytes)"
            ),
        }
    }
}

/// The body length a `/__down` query asks for: its first `bytes`
/// parameter, decimal digits only, at most `cap`.
pub fn down_bytes(query: Option<&str>, cap: u64) -> Result<u64, BytesError> {
    let raw = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "bytes")
        .map(|(_, v)| v)
        .ok_or(BytesError::Missing)?;
    let shown = || raw.chars().take(40).collect::<String>();
    if raw.is_empty() || raw.len() > 20 || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(BytesError::NotANumber(shown()));
    }
    let n: u64 = raw.parse().map_err(|_| BytesError::NotANumber(shown()))?;
    if n > cap {
        return Err(BytesError::OverCap { asked: n, cap });
    }
    Ok(n)
}

/// The CORS answer to a preflight of either route; `None` for any other
/// method or route. Preflights carry no permit key (browsers send no
/// credentials or custom headers with them), so they are answered before
/// the key is checked; the request that follows is checked as usual.
pub fn preflight(route: Route, method: &Method) -> Option<Response<Payload>> {
    if method != Method::OPTIONS || !matches!(route, Route::CfDown | Route::CfUp) {
        return None;
    }
    let mut r = Response::new(Payload::full(bytes::Bytes::new()));
    *r.status_mut() = StatusCode::NO_CONTENT;
    let h = r.headers_mut();
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, OPTIONS"),
    );
    // Content-Type for an upload sent as a Blob or ArrayBuffer, the permit
    // key header for a page that sends the key that way.
    h.insert(
        header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static("content-type, x-bloatlab-permit-key"),
    );
    h.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("600"),
    );
    Some(r)
}

/// `GET /__down?bytes=N`.
pub fn down(req: &Request<Incoming>, shared: &Shared, conn: ConnInfo) -> Response<Payload> {
    let start = Instant::now();
    let cap = shared.caps.max_bytes.0;
    let n = match down_bytes(req.uri().query(), cap) {
        Ok(n) => n,
        Err(e) => return cors(text(StatusCode::BAD_REQUEST, format!("{e}\n")), start),
    };
    if n > 0 && shared.caps.download_rate.is_some_and(|(per, _)| per.0 == 0) {
        return cors(
            too_many("downloads are off on this server (--max-reverse-rate 0)"),
            start,
        );
    }
    let charge = shared.download_budget.clone().map(|budget| Charge {
        budget,
        peer: conn.peer.ip(),
    });
    let body = LargeBody::new(n, charge, Arc::clone(&shared.stats));
    let mut r = Response::new(Payload::Large(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    r.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Said even for 0 bytes (hyper leaves an empty HTTP/2 body without it): the
    // package compares the Resource Timing size with what it asked for.
    r.headers_mut()
        .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    cors(r, start)
}

/// `POST /__up`: the upload sink of `/api/v1/upload` (same caps). Its
/// `Server-Timing` starts when the sink has read the body: the server's own
/// share, not the upload's (which the package measures as time to first
/// byte).
pub async fn up(req: Request<Incoming>, shared: &Shared, conn: ConnInfo) -> Response<Payload> {
    let r = crate::routes::sink(req, shared, conn).await;
    cors(r, Instant::now())
}

/// Adds the CORS and timing headers every answer of these routes carries,
/// `Server-Timing` measured from `since`.
fn cors(mut r: Response<Payload>, since: Instant) -> Response<Payload> {
    cors_headers(r.headers_mut());
    if let Ok(v) = HeaderValue::from_str(&server_timing(since.elapsed())) {
        r.headers_mut().insert("server-timing", v);
    }
    r
}

/// The headers that let a page on another origin read an answer of these
/// routes: its status and body, `Server-Timing`, `Retry-After` (on a 429)
/// and its Resource Timing entry. Refusals carry them too (a missing permit
/// key, a connection over a cap): without them the page sees only a network
/// error and cannot tell the user why.
pub(crate) fn cors_headers(h: &mut header::HeaderMap) {
    h.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    h.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static("Server-Timing, Retry-After"),
    );
    h.insert("timing-allow-origin", HeaderValue::from_static("*"));
}

/// Whether `path` is one of these routes (refusals elsewhere add
/// [`cors_headers`] to theirs).
pub(crate) fn is_cf_path(path: &str) -> bool {
    path == DOWN || path == UP
}

/// `cfRequestDuration;dur=MS` with microseconds, the name and form the
/// package parses (`/cfReq(?:uest)?Dur(?:ation)?;\s*dur=([0-9.]+)/`).
pub fn server_timing(d: std::time::Duration) -> String {
    format!("cfRequestDuration;dur={:.3}", d.as_secs_f64() * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_parameter_digits_only_within_the_cap() {
        assert_eq!(down_bytes(Some("bytes=0"), 10), Ok(0));
        assert_eq!(down_bytes(Some("measId=7&bytes=10&during=x"), 10), Ok(10));
        assert_eq!(down_bytes(Some("bytes=1&bytes=99"), 10), Ok(1));
        assert_eq!(down_bytes(None, 10), Err(BytesError::Missing));
        assert_eq!(down_bytes(Some("byte=1"), 10), Err(BytesError::Missing));
        for bad in [
            "",
            "-1",
            "+1",
            "1e6",
            "0x10",
            " 1",
            "1.0",
            "99999999999999999999",
        ] {
            assert_eq!(
                down_bytes(Some(&format!("bytes={bad}")), u64::MAX),
                Err(BytesError::NotANumber(bad.into())),
                "{bad}"
            );
        }
        assert_eq!(
            down_bytes(Some("bytes=11"), 10),
            Err(BytesError::OverCap { asked: 11, cap: 10 })
        );
        let msg = BytesError::OverCap { asked: 11, cap: 10 }.to_string();
        assert!(msg.contains("--max-bytes") && msg.contains("11"), "{msg}");
    }

    #[test]
    fn server_timing_is_what_the_package_parses() {
        let s = server_timing(std::time::Duration::from_micros(1_234));
        assert_eq!(s, "cfRequestDuration;dur=1.234");
    }
}
