//! The record's routes:
//!
//! | path | method | answer |
//! |------|--------|--------|
//! | `/api/v1/browser/start?duration=S` | POST | `{"id", "token", "expires_in_s", "store"}`; 429 (with `Retry-After`) over a cap, 400 when the test would outlast `--browser-max-duration` |
//! | `/api/v1/browser/result?id=ID` + header `x-bloatlab-test-token` | POST | the page's result: 201 `{"id", "url"}` when stored, 200 with `"url": null` without `--results-dir`; 403 unknown id or wrong token, 409 used, 410 expired, 413 over `--browser-max-result`, 408 too slow, 400 malformed |
//! | `/result/ID` | GET, HEAD | the stored result as `bloatlab report`'s HTML |
//!
//! The start and result routes need the permit key when the server has one
//! (the page passes its `?key=` on); the result page does not: its id is
//! 64 random bits, known to whoever ran the test and whom they tell.

use super::ledger::{Refusal, TestId, Token};
use super::result::{Context, PageResult};
use crate::body::Payload;
use crate::routes::{self, ConnInfo};
use crate::service::Shared;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use sha2::Digest;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const START: &str = "/api/v1/browser/start";
pub const RESULT: &str = "/api/v1/browser/result";
/// The result page's prefix: `/result/ID`.
pub const RESULT_PAGE: &str = "/result/";
/// The header the result POST carries the test's token in.
pub const TOKEN_HEADER: &str = "x-bloatlab-test-token";
/// How long a result body may take to arrive, whatever its size.
pub const BODY_TIME: Duration = Duration::from_secs(30);
/// Time a page needs beyond its phases: waiting for the last probes (2 s)
/// and posting its result.
pub const SLACK: Duration = Duration::from_secs(15);

/// Whether `path` is one of this module's routes.
pub fn claims(path: &str) -> bool {
    path == START || path == RESULT || path.starts_with(RESULT_PAGE)
}

/// How long a test with loaded phases of `d` runs, start to result POST:
/// the page's schedule ([`crate::browser`]) plus [`SLACK`].
pub fn needs(d: Duration) -> Duration {
    let b = crate::browser::PHASES.iter().enumerate().map(|(i, p)| {
        let len = if p.loaded() {
            d
        } else {
            crate::browser::IDLE.min(d)
        };
        len + if i > 0 {
            crate::browser::SETTLE
        } else {
            Duration::ZERO
        }
    });
    b.sum::<Duration>() + SLACK
}

fn query<'a>(req: &'a Request<Incoming>, key: &str) -> Option<&'a str> {
    req.uri()
        .query()?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

fn json(status: StatusCode, v: serde_json::Value) -> Response<Payload> {
    let mut r = routes::text(status, format!("{v}\n"));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn refused(r: &Refusal) -> Response<Payload> {
    let status = match r {
        Refusal::Busy(_) | Refusal::Hourly { .. } => StatusCode::TOO_MANY_REQUESTS,
        Refusal::TooLong { .. } => StatusCode::BAD_REQUEST,
        Refusal::Unknown | Refusal::WrongToken => StatusCode::FORBIDDEN,
        Refusal::Used => StatusCode::CONFLICT,
        Refusal::Expired(_) => StatusCode::GONE,
    };
    let mut resp = routes::text(status, format!("{r}\n"));
    if let Some(wait) = r.retry_after() {
        resp.headers_mut().insert(
            header::RETRY_AFTER,
            HeaderValue::from(wait.as_secs().max(1)),
        );
    }
    resp
}

/// Answers a request for one of [`claims`]'s paths.
pub async fn handle(req: Request<Incoming>, shared: &Shared, conn: ConnInfo) -> Response<Payload> {
    let path = req.uri().path();
    let (allowed, allow): (bool, &'static str) = if path == START || path == RESULT {
        (req.method() == Method::POST, "POST")
    } else {
        (
            req.method() == Method::GET || req.method() == Method::HEAD,
            "GET, HEAD",
        )
    };
    if !allowed {
        let mut r = routes::text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static(allow));
        return r;
    }
    if let Some(id) = path.strip_prefix(RESULT_PAGE) {
        let id = id.to_owned();
        return result_page(shared, &id).await;
    }
    if !routes::permitted(&req, shared) {
        return routes::text(
            StatusCode::FORBIDDEN,
            "this server needs its permit key (header x-bloatlab-permit-key or ?key=)\n",
        );
    }
    if path == START {
        start(&req, shared, conn)
    } else {
        result(req, shared, conn).await
    }
}

fn random() -> std::io::Result<[u8; 24]> {
    let mut b = [0u8; 24];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b)
}

fn start(req: &Request<Incoming>, shared: &Shared, conn: ConnInfo) -> Response<Payload> {
    let (min, max) = (crate::browser::MIN_DURATION, crate::browser::MAX_DURATION);
    let d = match query(req, "duration") {
        None => crate::browser::DEFAULT_DURATION,
        Some(v) => match v.parse::<u64>().map(Duration::from_secs) {
            Ok(d) if (min..=max).contains(&d) => d,
            _ => {
                return routes::text(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "duration must be whole seconds from {} to {}\n",
                        min.as_secs(),
                        max.as_secs()
                    ),
                );
            }
        },
    };
    let Ok(rnd) = random() else {
        return routes::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the server cannot read /dev/urandom\n",
        );
    };
    let now = Instant::now();
    let ticket = shared
        .records
        .ledger()
        .start(now, conn.peer.ip(), needs(d), rnd);
    match ticket {
        Ok(t) => json(
            StatusCode::OK,
            serde_json::json!({
                "id": t.id.to_string(),
                "token": t.token.to_string(),
                "expires_in_s": t.deadline.saturating_duration_since(now).as_secs(),
                "store": shared.records.dir.is_some(),
            }),
        ),
        Err(r) => refused(&r),
    }
}

/// Why a body was not read whole.
enum BodyCut {
    Over(u64),
    Slow,
    Broken,
}

/// Reads a body of at most `cap` bytes within [`BODY_TIME`]; more is
/// refused as soon as it is seen (at once when `Content-Length` says so),
/// so no upload can make the server hold more than `cap`.
async fn read_capped(req: Request<Incoming>, cap: u64) -> Result<Vec<u8>, BodyCut> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let mut body = req.into_body();
    if declared.is_some_and(|n| n > cap) {
        routes::linger(body);
        return Err(BodyCut::Over(cap));
    }
    let mut buf = Vec::with_capacity(declared.unwrap_or(0).min(cap) as usize);
    let deadline = tokio::time::Instant::now() + BODY_TIME;
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(BodyCut::Slow),
            Ok(None) => return Ok(buf),
            Ok(Some(Err(_))) => return Err(BodyCut::Broken),
            Ok(Some(Ok(f))) => f,
        };
        if let Some(d) = frame.data_ref() {
            if buf.len() as u64 + d.len() as u64 > cap {
                routes::linger(body);
                return Err(BodyCut::Over(cap));
            }
            buf.extend_from_slice(d);
        }
    }
}

async fn result(req: Request<Incoming>, shared: &Shared, conn: ConnInfo) -> Response<Payload> {
    let id = query(&req, "id").and_then(TestId::parse);
    let token = req
        .headers()
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(Token::parse);
    let (Some(id), Some(token)) = (id, token) else {
        return routes::text(
            StatusCode::BAD_REQUEST,
            format!(
                "a result needs ?id= (16 hex digits) and the header {TOKEN_HEADER} \
                 (32 hex digits) from {START}\n"
            ),
        );
    };
    // The token first: a POST of no started test is refused before a byte
    // of its body is read.
    if let Err(r) = shared.records.ledger().check(Instant::now(), id, &token) {
        return refused(&r);
    }
    let caps = shared.records.ledger().caps();
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = match read_capped(req, caps.max_result_bytes).await {
        Ok(b) => b,
        Err(BodyCut::Over(cap)) => {
            return routes::text(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "a result may be at most {cap} bytes on this server (--browser-max-result)\n"
                ),
            );
        }
        Err(BodyCut::Slow) => {
            return routes::text(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the result did not arrive within {} s\n",
                    BODY_TIME.as_secs()
                ),
            );
        }
        Err(BodyCut::Broken) => {
            return routes::text(StatusCode::BAD_REQUEST, "the result ended early\n");
        }
    };
    let limit_ms = caps.max_duration.as_secs_f64() * 1e3;
    let page = match PageResult::parse(&body, limit_ms) {
        Ok(p) => p,
        Err(e) => return routes::text(StatusCode::BAD_REQUEST, format!("{e}\n")),
    };
    let finished = match shared.records.ledger().finish(Instant::now(), id, &token) {
        Ok(f) => f,
        Err(r) => return refused(&r),
    };
    let started_ago = finished.started.elapsed();
    let start_time = jiff::Timestamp::now()
        .checked_sub(jiff::SignedDuration::try_from(started_ago).unwrap_or_default())
        .unwrap_or_else(|_| jiff::Timestamp::now());
    let mut file = super::result::to_results(
        &page,
        &Context {
            id,
            finished: &finished,
            start_time,
            local: conn.local,
            user_agent,
        },
    );
    match bloatlab_results::Derived::compute(&file.raw) {
        Ok(d) => file.derived = Some(d),
        Err(e) => return routes::text(StatusCode::BAD_REQUEST, format!("the result's {e}\n")),
    }
    let Some(dir) = shared.records.dir.clone() else {
        return json(
            StatusCode::OK,
            serde_json::json!({"id": id.to_string(), "url": null}),
        );
    };
    let path = file_of(&dir, id);
    let saved = tokio::task::spawn_blocking(move || bloatlab_results::save(&path, &file)).await;
    match saved {
        Ok(Ok(())) => json(
            StatusCode::CREATED,
            serde_json::json!({"id": id.to_string(), "url": format!("{RESULT_PAGE}{id}")}),
        ),
        Ok(Err(e)) => {
            tracing::error!("storing browser test {id}: {e}");
            routes::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the server could not store the result (its log says why)\n",
            )
        }
        Err(e) => {
            tracing::error!("storing browser test {id}: {e}");
            routes::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the server could not store the result\n",
            )
        }
    }
}

/// `DIR/ID.json`.
pub fn file_of(dir: &Path, id: TestId) -> PathBuf {
    dir.join(format!("{id}.json"))
}

/// The CSP of a result page: nothing but its own inline style sheet, by
/// hash (the report is self-contained: inline CSS and SVG, no scripts).
pub fn result_csp(html: &str) -> String {
    let css = html
        .split_once("<style>")
        .and_then(|(_, rest)| rest.split_once("</style>"))
        .map_or("", |(css, _)| css);
    let hash = base64(&sha2::Sha256::digest(css.as_bytes()));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src data:; base-uri 'none'; \
         form-action 'none'; frame-ancestors 'none'"
    )
}

/// Standard base64 with padding (RFC 4648 section 4), for a CSP hash.
fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut s = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

async fn result_page(shared: &Shared, id: &str) -> Response<Payload> {
    let Some(dir) = shared.records.dir.clone() else {
        return routes::text(
            StatusCode::NOT_FOUND,
            "this server keeps no results (it runs without --results-dir)\n",
        );
    };
    let Some(id) = TestId::parse(id) else {
        return routes::text(StatusCode::NOT_FOUND, "no such result\n");
    };
    let path = file_of(&dir, id);
    let Ok(_permit) = shared.records.renders.acquire().await else {
        return routes::text(StatusCode::INTERNAL_SERVER_ERROR, "rendering failed\n");
    };
    let rendered = tokio::task::spawn_blocking(move || -> Result<Option<String>, String> {
        if !path.exists() {
            return Ok(None);
        }
        let file = bloatlab_results::load(&path).map_err(|e| e.to_string())?;
        let run = bloatlab_report::Run::new(id.to_string(), file).map_err(|e| e.to_string())?;
        bloatlab_report::html::render(&[run])
            .map(Some)
            .map_err(|e| e.to_string())
    })
    .await;
    let html = match rendered {
        Ok(Ok(Some(h))) => h,
        Ok(Ok(None)) => return routes::text(StatusCode::NOT_FOUND, "no such result\n"),
        Ok(Err(e)) => {
            tracing::error!("result {id}: {e}");
            return routes::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the stored result cannot be shown (the server's log says why)\n",
            );
        }
        Err(_) => return routes::text(StatusCode::INTERNAL_SERVER_ERROR, "rendering failed\n"),
    };
    let csp = result_csp(&html);
    let mut r = routes::text(StatusCode::OK, Bytes::from(html));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    // A CSP that is no header value would be our bug (it is ASCII we format); then the
    // strictest policy stands in, so the page shows unstyled rather than unprotected.
    let csp = HeaderValue::from_str(&csp).unwrap_or(HeaderValue::from_static("default-src 'none'"));
    routes::page_headers(h, csp);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors() {
        for (i, o) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(i.as_bytes()), o, "{i}");
        }
    }

    #[test]
    fn the_result_csp_allows_only_the_pages_own_style_sheet() {
        let csp = result_csp("<html><style>body{}</style><svg></svg>");
        // sha256("body{}"), base64.
        let want = base64(&sha2::Sha256::digest(b"body{}"));
        assert!(csp.contains(&format!("style-src 'sha256-{want}'")), "{csp}");
        assert!(csp.starts_with("default-src 'none'"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
    }

    #[test]
    fn a_test_needs_its_phases_and_slack() {
        // 5 s idle, 3 x 10 s loaded, 3 x 1 s settle, 15 s slack.
        assert_eq!(needs(Duration::from_secs(10)), Duration::from_secs(53));
        // A 2 s test's idle phase is 2 s too.
        assert_eq!(needs(Duration::from_secs(2)), Duration::from_secs(26));
        assert!(!claims("/api/v1/browser") && claims("/result/x") && claims(START));
    }
}
