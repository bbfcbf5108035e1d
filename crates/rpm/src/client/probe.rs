//! The two probes of draft-ietf-ippm-responsiveness-09 section 5.3 and the load
//! connections they measure, as tokio tasks that report to the session's event loop.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use http::{Method, Uri, header};
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::net::{self, Endpoint, NetError, ReqBody, Sender};
use crate::run::{ConnId, Direction, ProbeId, Timing};

/// What a task tells the event loop.
#[derive(Debug)]
pub enum Event {
    /// A load connection's transfer started.
    LoadReady(ConnId),
    /// A load connection ended (it never ends well: the objects are endless).
    LoadFailed(ConnId, String),
    /// A probe completed.
    ProbeDone(ProbeId, Timing),
    /// A probe failed.
    ProbeFailed(ProbeId, String),
}

/// What the event loop shares with a load connection's task.
#[derive(Debug, Default)]
pub struct LoadShared {
    /// Download: body bytes received. Upload: bytes handed to the connection (the
    /// goodput is read from TCP_INFO instead, see [`LoadShared::goodput`]).
    pub bytes: Arc<AtomicU64>,
    /// The socket, for TCP_INFO.
    pub fd: OnceLock<OwnedFd>,
    /// An HTTP/2 handle for self probes.
    pub h2: Mutex<Option<Sender>>,
}

impl LoadShared {
    /// Goodput bytes so far, counted by the kernel so that neither our socket buffers nor
    /// a moment without CPU for this process shift bytes between intervals: a download's
    /// bytes received in order (`tcpi_bytes_received`, read by us or not yet), an
    /// upload's bytes the server acknowledged (`tcpi_bytes_acked`). Without those (a
    /// kernel before 4.1), a download's body bytes read.
    pub fn goodput(&self, direction: Direction) -> u64 {
        let fd = self.fd.get();
        let kernel = match direction {
            Direction::Download => {
                fd.and_then(|fd| bloatlab_engine::tcpinfo::bytes_received(fd).ok().flatten())
            }
            Direction::Upload => fd
                .and_then(|fd| bloatlab_engine::tcpinfo::sample(fd).ok())
                .and_then(|t| t.bytes_acked),
        };
        match (kernel, direction) {
            (Some(b), _) => b,
            (None, Direction::Download) => self.bytes.load(Ordering::Relaxed),
            (None, Direction::Upload) => 0,
        }
    }

    /// The HTTP/1.1 stand-in for a self probe (section 5.3: "the TCP stack estimated
    /// round-trip-time can be used as a proxy"): an upload's smoothed RTT (`tcpi_rtt`), a
    /// download's receiver estimate (`tcpi_rcv_rtt`, as a receiving socket's `tcpi_rtt`
    /// only follows the few bytes it sends).
    pub fn tcp_rtt(&self, direction: Direction) -> Option<Duration> {
        let fd = self.fd.get()?;
        let rtt = bloatlab_engine::tcpinfo::sample(fd).ok()?.rtt;
        let rcv = bloatlab_engine::tcpinfo::sample_receiver(fd)
            .ok()?
            .rcv_rtt_us
            .map(Duration::from_micros);
        let v = match direction {
            Direction::Download => rcv.unwrap_or(rtt),
            Direction::Upload => rtt,
        };
        (!v.is_zero()).then_some(v)
    }
}

/// The declared length of a response, for messages.
fn declared(r: &http::Response<hyper::body::Incoming>) -> String {
    r.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .map(|v| format!(" of the {v} it declared"))
        .unwrap_or_default()
}

/// Runs one load connection until it fails (which ends the run) or the task is aborted.
pub async fn load(
    ep: Endpoint,
    conn: ConnId,
    direction: Direction,
    url: Uri,
    shared: Arc<LoadShared>,
    events: mpsc::Sender<Event>,
) {
    let why = match load_inner(&ep, conn, direction, &url, &shared, &events).await {
        Ok(never) => match never {},
        Err(e) => e.0,
    };
    tracing::debug!(
        conn = conn.0,
        direction = direction.name(),
        why,
        "load connection ended"
    );
    let _ = events.send(Event::LoadFailed(conn, why)).await;
}

enum Never {}

async fn load_inner(
    ep: &Endpoint,
    conn: ConnId,
    direction: Direction,
    url: &Uri,
    shared: &LoadShared,
    events: &mpsc::Sender<Event>,
) -> Result<Never, NetError> {
    let c = net::connect(ep).await?;
    let _ = shared.fd.set(c.fd);
    if let Ok(mut h) = shared.h2.lock() {
        *h = c.sender.h2_handle();
    }
    let mut sender = c.sender;
    let _task = c.task;
    match direction {
        Direction::Download => {
            let resp = get(ep, &mut sender, url).await?;
            let _ = events.send(Event::LoadReady(conn)).await;
            let length = declared(&resp);
            let mut body = resp.into_body();
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(|e| {
                    NetError(format!(
                        "GET {url}: the transfer broke after {} bytes: {e}",
                        shared.bytes.load(Ordering::Relaxed)
                    ))
                })?;
                if let Some(d) = frame.data_ref() {
                    shared.bytes.fetch_add(d.len() as u64, Ordering::Relaxed);
                }
            }
            Err(NetError(format!(
                "GET {url}: the large object ended after {} bytes{length}; a test server's large object must outlast the test (the draft asks for at least 8 GB)",
                shared.bytes.load(Ordering::Relaxed)
            )))
        }
        Direction::Upload => {
            let req = net::request(
                ep,
                Method::POST,
                url,
                ReqBody::Endless(Arc::clone(&shared.bytes)),
            )?;
            let _ = events.send(Event::LoadReady(conn)).await;
            match sender.send(req).await {
                Ok(resp) => Err(NetError(format!(
                    "POST {url}: the server answered {} while the upload was still running",
                    resp.status()
                ))),
                Err(e) => Err(NetError(format!(
                    "POST {url}: the upload broke after {} bytes: {e}",
                    shared.bytes.load(Ordering::Relaxed)
                ))),
            }
        }
    }
}

/// A GET with an empty body whose response passed [`net::check_response`].
async fn get(
    ep: &Endpoint,
    sender: &mut Sender,
    url: &Uri,
) -> Result<http::Response<hyper::body::Incoming>, NetError> {
    let req = net::request(ep, Method::GET, url, ReqBody::Empty)?;
    let resp = sender
        .send(req)
        .await
        .map_err(|e| NetError(format!("GET {url}: {e}")))?;
    net::check_response(url, &resp)?;
    Ok(resp)
}

/// GETs the small object on `sender`, returning the time from the request to the last
/// byte of the response.
pub async fn get_small(
    ep: &Endpoint,
    sender: &mut Sender,
    url: &Uri,
) -> Result<Duration, NetError> {
    let t = Instant::now();
    let resp = get(ep, sender, url).await?;
    net::read_to_end(url, resp.into_body(), 1 << 20).await?;
    Ok(t.elapsed())
}

/// A foreign probe: a new connection (`tcp_f`, `tls_f`) and a GET of the small object
/// on it (`http_f`).
pub async fn foreign(ep: Endpoint, probe: ProbeId, url: Uri, events: mpsc::Sender<Event>) {
    let result = async {
        let mut c = net::connect(&ep).await?;
        let http = get_small(&ep, &mut c.sender, &url).await?;
        Ok::<_, NetError>(Timing::Foreign {
            tcp: c.tcp,
            tls: c.tls,
            http,
        })
    }
    .await;
    tracing::debug!(probe = probe.0, ?result, "foreign probe");
    let _ = events
        .send(match result {
            Ok(t) => Event::ProbeDone(probe, t),
            Err(e) => Event::ProbeFailed(probe, e.0),
        })
        .await;
}

/// A self probe: a GET of the small object as one more HTTP/2 stream on a load
/// connection, without any priority.
pub async fn on_load(
    ep: Endpoint,
    probe: ProbeId,
    mut sender: Sender,
    url: Uri,
    events: mpsc::Sender<Event>,
) {
    let result = get_small(&ep, &mut sender, &url).await;
    tracing::debug!(probe = probe.0, ?result, "self probe");
    let _ = events
        .send(match result {
            Ok(http) => Event::ProbeDone(probe, Timing::SelfProbe { http }),
            Err(e) => Event::ProbeFailed(probe, e.0),
        })
        .await;
}
