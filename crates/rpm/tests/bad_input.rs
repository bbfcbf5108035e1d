//! The client against servers that break the draft's rules, each a small fake server on
//! loopback: every case must end with a clear error, never a number.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use bloatlab_rpm::client::{self, ClientError, Mode, Options, Protocol, Trust};
use bloatlab_rpm::{Params, RunError};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

type Body = http_body_util::combinators::BoxBody<Bytes, Infallible>;

fn full(b: impl Into<Bytes>) -> Body {
    use http_body_util::BodyExt;
    Full::new(b.into()).boxed()
}

/// How /large behaves.
#[derive(Debug, Clone, Copy)]
enum Large {
    /// 200 with a body of this many bytes, then its end.
    Short(u64),
    /// 200, some bytes, then nothing ever again.
    Stall,
}

/// A hyper server (HTTP/1.1 and h2c) on loopback with a config naming itself, a 1-byte
/// object and a misbehaving large object.
fn fake(rt: &tokio::runtime::Runtime, config: Option<String>, large: Large) -> SocketAddr {
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let config = config.unwrap_or_else(|| {
        format!(
            r#"{{"version":1,"urls":{{"large_download_url":"http://{addr}/large","small_download_url":"http://{addr}/small","upload_url":"http://{addr}/upload"}}}}"#
        )
    });
    rt.spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            let config = config.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let config = config.clone();
                    async move {
                        let body = match req.uri().path() {
                            "/.well-known/nq" => full(config),
                            "/small" => full("x"),
                            "/large" => match large {
                                Large::Short(n) => full(vec![0u8; n as usize]),
                                Large::Stall => {
                                    use http_body_util::BodyExt;
                                    Stall(false).boxed()
                                }
                            },
                            _ => full("?"),
                        };
                        Ok::<_, Infallible>(Response::new(body))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    addr
}

/// A body that yields one frame of 100 kB and then nothing, ever.
struct Stall(bool);

impl hyper::body::Body for Stall {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if self.0 {
            std::task::Poll::Pending
        } else {
            self.0 = true;
            std::task::Poll::Ready(Some(Ok(Frame::data(Bytes::from(vec![0u8; 100_000])))))
        }
    }
}

/// A raw HTTP/1.x server: for each request (kept alive), `answer(path)` gives the bytes
/// to write and whether to reset the connection after them.
fn raw(
    rt: &tokio::runtime::Runtime,
    answer: fn(&str, SocketAddr) -> (Vec<u8>, bool),
) -> SocketAddr {
    let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = vec![0u8; 4096];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match s.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                    buf.drain(..end + 4);
                    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
                    let (reply, reset) = answer(&path, addr);
                    if s.write_all(&reply).await.is_err() {
                        return;
                    }
                    if reset {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                        return;
                    }
                }
            });
        }
    });
    addr
}

fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn opts(url: &str, mode: Mode, protocol: Protocol) -> Options {
    Options {
        config_url: url.parse().unwrap(),
        params: Params {
            interval: Duration::from_millis(500),
            ..Params::default()
        },
        mode,
        protocol,
        trust: Trust::Insecure,
        duration: Duration::from_secs(20),
        permit_key: None,
        stall_timeout: Duration::from_secs(2),
    }
}

fn run(o: &Options) -> Result<client::Report, ClientError> {
    client::run(o, &AtomicBool::new(false), |_| {})
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn a_config_without_urls_is_refused() {
    let rt = runtime();
    let a = fake(&rt, Some(r#"{"version":1}"#.into()), Large::Short(1));
    let e = run(&opts(
        &format!("http://{a}/.well-known/nq"),
        Mode::Concurrent,
        Protocol::H2,
    ))
    .unwrap_err();
    assert!(matches!(e, ClientError::Config(_)), "{e}");
    assert!(e.to_string().contains("no test URLs"), "{e}");
}

#[test]
fn a_config_with_urls_on_different_hosts_is_refused() {
    let rt = runtime();
    let a = fake(
        &rt,
        Some(
            r#"{"version":1,"urls":{"large_download_url":"http://127.0.0.1:9/l","small_download_url":"http://127.0.0.1:9/s","upload_url":"http://127.0.0.2:9/u"}}"#
                .into(),
        ),
        Large::Short(1),
    );
    let e = run(&opts(
        &format!("http://{a}/.well-known/nq"),
        Mode::Concurrent,
        Protocol::H2,
    ))
    .unwrap_err();
    assert!(e.to_string().contains("different hosts"), "{e}");
}

/// The error of a session against a raw server that answers every request the same.
fn config_error(answer: fn(&str, SocketAddr) -> (Vec<u8>, bool)) -> String {
    let rt = runtime();
    let a = raw(&rt, answer);
    run(&opts(
        &format!("http://{a}/.well-known/nq"),
        Mode::Concurrent,
        Protocol::H2,
    ))
    .unwrap_err()
    .to_string()
}

#[test]
fn a_redirect_is_refused_naming_its_target() {
    let e = config_error(|_, _| {
        (
            b"HTTP/1.1 301 Moved Permanently\r\nLocation: https://elsewhere.example/.well-known/nq\r\nContent-Length: 0\r\n\r\n".to_vec(),
            false,
        )
    });
    assert!(
        e.contains("redirects") && e.contains("elsewhere.example"),
        "{e}"
    );
}

#[test]
fn an_http_1_0_server_is_refused() {
    let e = config_error(|_, _| {
        (
            b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"version\":1}".to_vec(),
            true,
        )
    });
    assert!(e.contains("HTTP/1.0"), "{e}");
}

#[test]
fn a_large_object_that_ends_early_ends_the_run_with_an_error() {
    let rt = runtime();
    let a = fake(&rt, None, Large::Short(1000));
    for protocol in [Protocol::H2, Protocol::H1] {
        let e = run(&opts(
            &format!("http://{a}/.well-known/nq"),
            Mode::DownloadOnly,
            protocol,
        ))
        .unwrap_err();
        assert!(
            matches!(e, ClientError::Run(_, RunError::LoadFailed { .. })),
            "{protocol:?}: {e}"
        );
        let e = e.to_string();
        assert!(e.contains("ended after 1000 bytes"), "{e}");
    }
}

#[test]
fn a_stalled_load_connection_ends_the_run_with_an_error() {
    let rt = runtime();
    let a = fake(&rt, None, Large::Stall);
    let t = Instant::now();
    let e = run(&opts(
        &format!("http://{a}/.well-known/nq"),
        Mode::DownloadOnly,
        Protocol::H2,
    ))
    .unwrap_err();
    assert!(
        matches!(e, ClientError::Run(_, RunError::LoadStalled { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("stalled"), "{e}");
    // The 2 s stall timeout, not the 20 s duration.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[test]
fn a_reset_load_connection_ends_the_run_with_an_error() {
    let rt = runtime();
    // Config and small object as they should be; the large object's connection is reset
    // after its headers and a few bytes.
    let a = raw(&rt, |path, addr| match path {
        "/.well-known/nq" => (
            ok(&format!(
                r#"{{"version":1,"urls":{{"large_download_url":"http://{addr}/large","small_download_url":"http://{addr}/small","upload_url":"http://{addr}/upload"}}}}"#
            )),
            false,
        ),
        "/small" => (ok("x"), false),
        _ => (
            b"HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n0123456789".to_vec(),
            true,
        ),
    });
    let e = run(&opts(
        &format!("http://{a}/.well-known/nq"),
        Mode::DownloadOnly,
        Protocol::H1,
    ))
    .unwrap_err();
    assert!(
        matches!(e, ClientError::Run(_, RunError::LoadFailed { .. })),
        "{e}"
    );
    let e = e.to_string();
    assert!(
        e.contains("download load connection") && e.contains("broke after 10 bytes"),
        "{e}"
    );
}

/// A certificate made for another name, written as PEM.
fn other_cert() -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("bloatlab-rpm-cert-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["other.example".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, cert.pem()).unwrap();
    std::fs::write(&k, key.serialize_pem()).unwrap();
    (dir, c, k)
}

#[test]
fn a_certificate_that_does_not_match_is_refused() {
    let (dir, cert, key) = other_cert();
    let svc = bloatlab_http::start(bloatlab_http::HttpConfig {
        http: None,
        https: Some("127.0.0.1:0".parse().unwrap()),
        tls: bloatlab_http::TlsSource::Files {
            cert: cert.clone(),
            key,
        },
        caps: bloatlab_http::Caps {
            max_connections: 64,
            max_per_source: 64,
            max_duration: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            deadlines: bloatlab_http::deadlines::Limits::default(),
            download_rate: None,
            upload_rate: None,
            max_bytes: bloatlab_units::Bytes(1 << 40),
        },
        permit_key: None,
        records: Default::default(),
    })
    .unwrap();
    let url = format!("https://{}/.well-known/nq", svc.https_addr.unwrap());
    // Its own CA, but the name in the URL (127.0.0.1) is not the certificate's.
    let mut o = opts(&url, Mode::DownloadOnly, Protocol::H2);
    o.trust = Trust::Ca(cert.clone());
    let e = run(&o).unwrap_err().to_string();
    assert!(e.contains("not valid for name"), "{e}");
    // A pinned fingerprint that is not the server's.
    o.trust = Trust::Fingerprint("AB:".repeat(31) + "AB");
    let e = run(&o).unwrap_err().to_string();
    assert!(e.contains("not the pinned"), "{e}");
    // The system's CAs do not know a self-signed certificate.
    if std::path::Path::new("/etc/ssl/certs/ca-certificates.crt").exists() {
        o.trust = Trust::System;
        let e = run(&o).unwrap_err().to_string();
        assert!(e.contains("TLS handshake"), "{e}");
    }
    drop(svc);
    std::fs::remove_dir_all(dir).unwrap();
}
