//! Cloudflare's speed-test API ([`crate::cloudflare`]) through the whole
//! service over loopback: `/__down?bytes=N` over HTTP/1.1 and HTTP/2, plain
//! and TLS, bad `bytes`, the `--max-bytes` cap, `/__up`, the CORS and timing
//! headers the npm package `@cloudflare/speedtest` needs, the preflight, and
//! the permit key in the query.

use super::*;
use crate::cloudflare::{DOWN, UP};

fn upload(addr: SocketAddr, path: &str, len: u64) -> Request<Payload> {
    Request::post(format!("http://{addr}{path}"))
        .header("host", addr.to_string())
        .header("content-type", "text/plain;charset=UTF-8")
        .header("origin", "http://127.0.0.1:1")
        .body(Payload::Large(LargeBody::new(
            len,
            None,
            Arc::new(crate::stats::Stats::default()),
        )))
        .unwrap()
}

/// The headers a cross-origin page needs to read the answer, its
/// `Server-Timing` and its Resource Timing entry.
fn assert_cors_and_timing(r: &Response<hyper::body::Incoming>, what: &str) {
    let h = r.headers();
    assert_eq!(h["access-control-allow-origin"], "*", "{what}");
    assert_eq!(h["timing-allow-origin"], "*", "{what}");
    assert_eq!(
        h["access-control-expose-headers"], "Server-Timing, Retry-After",
        "{what}"
    );
    let st = h["server-timing"].to_str().unwrap();
    let dur = st
        .strip_prefix("cfRequestDuration;dur=")
        .and_then(|d| d.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("{what}: server-timing {st:?}"));
    // The server's own share, not the transfer's: well under 50 ms even on a busy machine.
    assert!((0.0..50.0).contains(&dur), "{what}: {st}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn down_sends_n_bytes_and_up_sinks_with_cors_and_server_timing() {
    let pki = Pki::new();
    let svc = serve(caps(), &pki, None);
    for t in TRANSPORTS {
        let (tls, addr, what) = (t.tls, t.addr(&svc), t.what());
        let mut c = t.connect(&svc, &pki).await;
        for n in [0u64, 1, 100_000, 1_000_000] {
            let r = c
                .send(get(addr, &format!("{DOWN}?measId=123&bytes={n}"), tls))
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{what} {n}");
            assert_eq!(r.headers()["content-length"], n.to_string().as_str());
            assert_eq!(r.headers()["cache-control"], "no-store");
            assert_cors_and_timing(&r, &what);
            let b = body(r).await;
            assert_eq!(b.len() as u64, n, "{what}");
            assert!(b.iter().all(|&x| x == 0));
        }
    }
    let addr = svc.http_addr.unwrap();
    for h2 in [false, true] {
        let mut c = Client::connect(addr, h2, None).await;
        let r = c.send(upload(addr, UP, 1_000_000)).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "h2={h2}");
        assert_cors_and_timing(&r, "up");
        let v: serde_json::Value = serde_json::from_slice(&body(r).await).unwrap();
        assert_eq!(v["received_bytes"], 1_000_000);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bytes_get_400_naming_the_problem_and_the_cap_applies() {
    let pki = Pki::new();
    let svc = serve(
        Caps {
            max_bytes: bloatlab_units::Bytes(1_000_000),
            ..caps()
        },
        &pki,
        None,
    );
    let addr = svc.http_addr.unwrap();
    let mut c = Client::connect(addr, false, None).await;
    for (q, says) in [
        ("", "needs ?bytes=N"),
        ("?bytes=", "bad ?bytes=\"\""),
        ("?bytes=-5", "bad ?bytes=\"-5\""),
        ("?bytes=1e6", "whole number"),
        ("?bytes=1000001", "--max-bytes"),
        ("?bytes=18446744073709551616", "bad ?bytes="),
    ] {
        let r = c
            .send(get(addr, &format!("{DOWN}{q}"), false))
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{q}");
        // A page on another origin can read why.
        assert_eq!(r.headers()["access-control-allow-origin"], "*", "{q}");
        let text = String::from_utf8_lossy(&body(r).await).into_owned();
        assert!(text.contains(says), "{q}: {text}");
    }
    // Exactly the cap is fine; an upload over it is refused as on /api/v1/upload.
    let r = c
        .send(get(addr, &format!("{DOWN}?bytes=1000000"), false))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await.len(), 1_000_000);
    let mut c = Client::connect(addr, false, None).await;
    let r = c.send(upload(addr, UP, 1_000_001)).await.unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    // Wrong methods: 405 with what is allowed.
    let mut c = Client::connect(addr, false, None).await;
    let r = c.send(get(addr, UP, false)).await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "POST, OPTIONS");
    let _ = body(r).await;
    let r = c.send(upload(addr, DOWN, 10)).await.unwrap();
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.headers()["allow"], "GET, OPTIONS");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_is_answered_and_the_permit_key_goes_in_the_query() {
    let pki = Pki::new();
    let svc = serve(caps(), &pki, Some("s3cretKey"));
    let addr = svc.http_addr.unwrap();
    let mut c = Client::connect(addr, false, None).await;
    for path in [DOWN, UP] {
        let pre = Request::options(format!("http://{addr}{path}"))
            .header("host", addr.to_string())
            .header("origin", "http://127.0.0.1:1")
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .body(Payload::full(Bytes::new()))
            .unwrap();
        let r = c.send(pre).await.unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT, "{path}");
        let h = r.headers();
        assert_eq!(h["access-control-allow-origin"], "*");
        assert!(
            h["access-control-allow-methods"]
                .to_str()
                .unwrap()
                .contains("POST")
        );
        assert!(
            h["access-control-allow-headers"]
                .to_str()
                .unwrap()
                .contains("content-type")
        );
        let _ = body(r).await;
    }
    // Refused without the key, and readable by a page on another origin: without
    // CORS on the 403 the page would see only a network error.
    let r = c
        .send(get(addr, &format!("{DOWN}?bytes=10"), false))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    let _ = body(r).await;
    let r = c.send(upload(addr, UP, 10)).await.unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert_eq!(r.headers()["access-control-allow-origin"], "*");
    let _ = body(r).await;
    // Other routes' refusals stay without it (they are not cross-origin APIs).
    let r = c
        .send(get(addr, crate::routes::LARGE, false))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    assert!(!r.headers().contains_key("access-control-allow-origin"));
    let _ = body(r).await;
    let r = c
        .send(get(addr, &format!("{DOWN}?key=s3cretKey&bytes=10"), false))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(body(r).await.len(), 10);
    let r = c
        .send(upload(addr, &format!("{UP}?key=s3cretKey&measId=1"), 1000))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_a_cap_gets_a_429_a_page_can_read() {
    let pki = Pki::new();
    let svc = serve(
        Caps {
            max_per_source: 1,
            ..caps()
        },
        &pki,
        None,
    );
    let addr = svc.http_addr.unwrap();
    let mut held = Client::connect(addr, true, None).await;
    let r = held
        .send(get(addr, &format!("{DOWN}?bytes=1"), false))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let _ = body(r).await;
    for (path, h2) in [(DOWN, false), (UP, true)] {
        let mut c = Client::connect(addr, h2, None).await;
        let req = if path == UP {
            upload(addr, UP, 10)
        } else {
            get(addr, &format!("{DOWN}?bytes=10"), false)
        };
        let r = c.send(req).await.unwrap();
        assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS, "{path}");
        let h = r.headers();
        assert_eq!(h["retry-after"], "5", "{path}");
        assert_eq!(h["access-control-allow-origin"], "*", "{path}");
        assert!(
            h["access-control-expose-headers"]
                .to_str()
                .unwrap()
                .contains("Retry-After"),
            "{path}"
        );
        let _ = body(r).await;
    }
    // The same refusal on a route that is not a cross-origin API has no CORS.
    let mut c = Client::connect(addr, false, None).await;
    let r = c
        .send(get(addr, crate::routes::SMALL, false))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(!r.headers().contains_key("access-control-allow-origin"));
}
