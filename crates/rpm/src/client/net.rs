//! One client connection, each step timed on its own (the draft's `tcp_f`, `tls_f`):
//! our own `TcpStream::connect`, then tokio-rustls, then hyper's low-level
//! `client::conn::{http1, http2}::handshake` over it. The connection's hyper task is
//! aborted when the [`Connected`] (its [`Task`]) is dropped.
//!
//! Requests carry `Accept-Encoding: identity` (the draft requires it for the large object;
//! we send it on every request) and, when given, the permit key header of a bloatlab
//! server. HTTP/2 requests carry the absolute URL (hyper makes `:scheme` and
//! `:authority` of it); HTTP/1.1 requests the path and a `Host` header. Self probes never
//! set a priority (hyper sends no PRIORITY frames and no `Priority` header).

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, Uri, Version, header};
use http_body::{Body, Frame};
use hyper::body::Incoming;
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// The header a bloatlab server reads its permit key from.
pub const PERMIT_HEADER: &str = bloatlab_http::routes::PERMIT_HEADER;

/// What the client sends TCP_NOTSENT_LOWAT to on its own sockets (the draft, section
/// 6.1.1, asks test endpoints to keep their unsent backlog small; the server uses the
/// same value).
pub const NOTSENT_LOWAT: u32 = bloatlab_http::conn::NOTSENT_LOWAT;

/// Most bytes of a stream hyper buffers before the socket takes them (its default is
/// 400 KiB: two seconds at a 1.5 Mbit/s share of a loaded link).
pub const H2_SEND_BUFFER: usize = 64 * 1024;

/// HTTP/2 or HTTP/1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/2 (ALPN `h2` over TLS; prior knowledge without TLS).
    H2,
    /// HTTP/1.1.
    H1,
}

impl Protocol {
    /// `h2` or `http/1.1`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H2 => "h2",
            Protocol::H1 => "http/1.1",
        }
    }
}

/// Where and how to connect.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The address connected to.
    pub addr: SocketAddr,
    /// The URLs' host: TLS server name.
    pub host: String,
    /// TLS configuration (with the ALPN for `protocol`), `None` for plain HTTP.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// HTTP version.
    pub protocol: Protocol,
    /// Sent in [`PERMIT_HEADER`] on every request.
    pub permit_key: Option<String>,
}

/// A connection failure, as text for the user.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NetError(pub String);

/// Aborts a spawned task when dropped.
#[derive(Debug)]
pub struct Task(pub JoinHandle<()>);

impl Drop for Task {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A request sender of either version.
#[derive(Debug)]
pub enum Sender {
    /// HTTP/1.1: one request at a time.
    H1(http1::SendRequest<ReqBody>),
    /// HTTP/2: cloneable, many streams.
    H2(http2::SendRequest<ReqBody>),
}

impl Sender {
    /// Another handle on an HTTP/2 connection (self probes use it); `None` on HTTP/1.1,
    /// where a connection carries one request at a time.
    pub fn h2_handle(&self) -> Option<Sender> {
        match self {
            Sender::H1(_) => None,
            Sender::H2(s) => Some(Sender::H2(s.clone())),
        }
    }

    /// Sends a request once the connection can take it.
    pub async fn send(
        &mut self,
        req: Request<ReqBody>,
    ) -> Result<Response<Incoming>, hyper::Error> {
        match self {
            Sender::H1(s) => {
                s.ready().await?;
                s.send_request(req).await
            }
            Sender::H2(s) => {
                s.ready().await?;
                s.send_request(req).await
            }
        }
    }
}

/// A connected, handshaken connection.
#[derive(Debug)]
pub struct Connected {
    /// Sends requests.
    pub sender: Sender,
    /// A duplicate of the socket's descriptor, for TCP_INFO.
    pub fd: OwnedFd,
    /// TCP handshake time (`tcp_f`).
    pub tcp: Duration,
    /// TLS handshake time per TLS round trip (`tls_f`); `None` without TLS.
    pub tls: Option<Duration>,
    /// `TLSv1.3` or `TLSv1.2`; `None` without TLS.
    pub tls_version: Option<&'static str>,
    /// The connection's driver task.
    pub task: Task,
}

trait AsyncIo: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> AsyncIo for T {}

/// TCP connect, TLS handshake (checking ALPN), HTTP handshake.
pub async fn connect(ep: &Endpoint) -> Result<Connected, NetError> {
    let t0 = Instant::now();
    let stream = TcpStream::connect(ep.addr)
        .await
        .map_err(|e| NetError(format!("connecting to {}: {e}", ep.addr)))?;
    let tcp = t0.elapsed();
    let _ = stream.set_nodelay(true);
    let _ = socket2::SockRef::from(&stream).set_tcp_notsent_lowat(NOTSENT_LOWAT);
    let fd = stream
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| NetError(format!("duplicating the socket: {e}")))?;
    let (io, tls, tls_version): (Box<dyn AsyncIo>, _, _) = match &ep.tls {
        None => (Box::new(stream), None, None),
        Some(config) => {
            let name = rustls::pki_types::ServerName::try_from(ep.host.clone())
                .map_err(|e| NetError(format!("`{}` is not a TLS server name: {e}", ep.host)))?;
            let t1 = Instant::now();
            let s = tokio_rustls::TlsConnector::from(Arc::clone(config))
                .connect(name, stream)
                .await
                .map_err(|e| {
                    NetError(format!("TLS handshake with {} ({}): {e}", ep.host, ep.addr))
                })?;
            let elapsed = t1.elapsed();
            let conn = s.get_ref().1;
            // RFC 8446: a full TLS 1.3 handshake takes one round trip before the client
            // can send data; TLS 1.2 (RFC 5246) takes two.
            let (version, trips) = match conn.protocol_version() {
                Some(rustls::ProtocolVersion::TLSv1_2) => ("TLSv1.2", 2),
                _ => ("TLSv1.3", 1),
            };
            let alpn = conn.alpn_protocol().map(<[u8]>::to_vec);
            let want: &[u8] = match ep.protocol {
                Protocol::H2 => b"h2",
                Protocol::H1 => b"http/1.1",
            };
            // A server without ALPN speaks HTTP/1.1 (RFC 7301 section 3.2: no protocol
            // agreed means the default one of the port).
            let agreed = alpn.as_deref().unwrap_or(b"http/1.1");
            if agreed != want {
                return Err(NetError(match ep.protocol {
                    Protocol::H2 => format!(
                        "{} did not agree to HTTP/2 (ALPN: {}); the draft's test runs over HTTP/2, use --h1 to test over HTTP/1.1",
                        ep.host,
                        String::from_utf8_lossy(agreed)
                    ),
                    Protocol::H1 => format!(
                        "{} did not agree to HTTP/1.1 (ALPN: {})",
                        ep.host,
                        String::from_utf8_lossy(agreed)
                    ),
                }));
            }
            (Box::new(s), Some(elapsed / trips), Some(version))
        }
    };
    let io = TokioIo::new(io);
    let (sender, task) = match ep.protocol {
        Protocol::H2 => {
            // Little of our own upload data waits in hyper's send buffer, so a self probe
            // on an upload connection queues behind the network, not behind us (the
            // draft's section 6.1.1 on HTTP/2-layer queues); windows large enough for a
            // download to fill a long fat path.
            let (s, conn) = http2::Builder::new(TokioExecutor::new())
                .initial_stream_window_size(4 << 20)
                .initial_connection_window_size(16 << 20)
                .max_send_buf_size(H2_SEND_BUFFER)
                .handshake(io)
                .await
                .map_err(|e| NetError(format!("HTTP/2 handshake with {}: {e}", ep.addr)))?;
            (
                Sender::H2(s),
                tokio::spawn(async move {
                    let _ = conn.await;
                }),
            )
        }
        Protocol::H1 => {
            let (s, conn) = http1::handshake(io)
                .await
                .map_err(|e| NetError(format!("HTTP/1.1 handshake with {}: {e}", ep.addr)))?;
            (
                Sender::H1(s),
                tokio::spawn(async move {
                    let _ = conn.await;
                }),
            )
        }
    };
    Ok(Connected {
        sender,
        fd,
        tcp,
        tls,
        tls_version,
        task: Task(task),
    })
}

/// A request for `url` on a connection of `protocol`.
pub fn request(
    ep: &Endpoint,
    method: Method,
    url: &Uri,
    body: ReqBody,
) -> Result<Request<ReqBody>, NetError> {
    let target = match ep.protocol {
        Protocol::H2 => url.clone(),
        Protocol::H1 => url
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned())
            .parse()
            .map_err(|e| NetError(format!("bad URL {url}: {e}")))?,
    };
    let mut b = Request::builder()
        .method(method)
        .uri(target)
        .header(header::ACCEPT_ENCODING, "identity")
        .header(
            header::USER_AGENT,
            concat!("bloatlab/", env!("CARGO_PKG_VERSION")),
        );
    if ep.protocol == Protocol::H1 {
        b = b.header(
            header::HOST,
            url.authority().map_or("", |a| a.as_str()).to_owned(),
        );
    }
    if matches!(body, ReqBody::Endless(_)) {
        b = b.header(header::CONTENT_TYPE, "application/octet-stream");
    }
    if let Some(k) = &ep.permit_key {
        b = b.header(PERMIT_HEADER, k.as_str());
    }
    b.body(body)
        .map_err(|e| NetError(format!("building a request for {url}: {e}")))
}

/// Checks what every response must be: HTTP/1.1 or later, 200, no content encoding.
pub fn check_response(url: &Uri, r: &Response<Incoming>) -> Result<(), NetError> {
    if r.version() < Version::HTTP_11 {
        return Err(NetError(format!(
            "{url}: the server answered with HTTP/1.0; the test needs HTTP/1.1 or HTTP/2"
        )));
    }
    let status = r.status();
    if status.is_redirection() {
        let to = r
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("nowhere");
        return Err(NetError(format!(
            "{url}: the server redirects ({status}) to {to}; test endpoints must answer directly, use the final URL"
        )));
    }
    if status != StatusCode::OK {
        let retry = r
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .map(|v| format!(" (Retry-After: {v})"))
            .unwrap_or_default();
        return Err(NetError(format!(
            "{url}: the server answered {status}{retry}"
        )));
    }
    if let Some(enc) = r.headers().get(header::CONTENT_ENCODING) {
        let enc = enc.to_str().unwrap_or("?");
        if !enc.eq_ignore_ascii_case("identity") {
            return Err(NetError(format!(
                "{url}: the server encoded the response ({enc}) although asked for identity"
            )));
        }
    }
    Ok(())
}

/// Reads a body to its end, returning its length (at most `limit` bytes are accepted).
pub async fn read_to_end(url: &Uri, mut body: Incoming, limit: u64) -> Result<Vec<u8>, NetError> {
    use http_body_util::BodyExt;
    let mut out = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| NetError(format!("{url}: reading the response: {e}")))?;
        if let Some(d) = frame.data_ref() {
            if out.len() as u64 + d.len() as u64 > limit {
                return Err(NetError(format!(
                    "{url}: the response is longer than {limit} bytes"
                )));
            }
            out.extend_from_slice(d);
        }
    }
    Ok(out)
}

/// A request body: nothing, or the endless upload.
#[derive(Debug)]
pub enum ReqBody {
    /// No body.
    Empty,
    /// Zeros without end, 64 KiB a frame; counts the bytes handed to hyper.
    Endless(Arc<AtomicU64>),
}

static ZEROS: [u8; 64 * 1024] = [0; 64 * 1024];

impl Body for ReqBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.get_mut() {
            ReqBody::Empty => Poll::Ready(None),
            ReqBody::Endless(n) => {
                n.fetch_add(ZEROS.len() as u64, Ordering::Relaxed);
                Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&ZEROS)))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self, ReqBody::Empty)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        match self {
            ReqBody::Empty => http_body::SizeHint::with_exact(0),
            ReqBody::Endless(_) => http_body::SizeHint::default(),
        }
    }
}
