//! Starting and stopping the service. [`start`] binds the listeners and
//! builds the TLS configuration before it returns, so a busy port or a bad
//! certificate is an error at start, not a log line later; then a thread
//! runs a small multi-thread tokio runtime with one accept loop per listener.

use crate::caps::Table;
use crate::conn::{self, Admit};
use crate::error::HttpError;
use crate::stats::{Stats, StatsSnapshot};
use crate::tls::{Tls, TlsSource};
use bloatlab_engine::limits::Refusal;
use bloatlab_engine::rate_budget::SharedBudget;
use bloatlab_units::{BitRate, Bytes};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use std::time::Instant;

/// The server's caps as this service applies them (the same flags as the
/// iperf-compatible service; the two services count connections apart).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Caps {
    /// `--max-connections`: open connections in all.
    pub max_connections: usize,
    /// `--max-per-source`: open connections per IPv4 address or IPv6 /64.
    pub max_per_source: usize,
    /// `--max-duration`: a connection (and so any download or upload on it)
    /// ends this long after accept.
    pub max_duration: Duration,
    /// `--idle-timeout`: a connection without a byte moving this long ends.
    pub idle_timeout: Duration,
    /// `--handshake-timeout` and `--http-header-timeout`: the TLS handshake
    /// and the request heads must arrive within them ([`crate::deadlines`]).
    /// Not the iperf service's `--header-timeout`: see there why.
    pub deadlines: crate::deadlines::Limits,
    /// `--max-reverse-rate` and `--max-total-reverse-rate` (per source, in
    /// all): the large-object bytes of all connections from one source are
    /// held to the first rate, those of all sources together to the second
    /// ([`crate::budget`]; `None`: full speed; a per-source 0: downloads
    /// refused with 429).
    pub download_rate: Option<(BitRate, BitRate)>,
    /// `--max-rate` and `--max-total-rate`: the same budgets for upload
    /// bytes read (`None`: full speed; a per-source 0: uploads refused with
    /// 429).
    pub upload_rate: Option<(BitRate, BitRate)>,
    /// `--max-bytes`: the most one request moves. The large object is this
    /// long when it is under [`crate::body::LARGE_OBJECT_BYTES`]; a longer
    /// upload gets 413.
    pub max_bytes: Bytes,
}

/// What to serve, where.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Plain HTTP/1.1 and h2c (prior knowledge).
    pub http: Option<SocketAddr>,
    /// HTTPS: TLS 1.3, ALPN h2 and http/1.1.
    pub https: Option<SocketAddr>,
    /// The certificate for `https`.
    pub tls: TlsSource,
    pub caps: Caps,
    /// `--permit-key`: requests must carry it (header or `?key=`).
    pub permit_key: Option<String>,
    /// `--results-dir` and the browser tests' caps ([`crate::record`]).
    pub records: crate::record::RecordConfig,
}

/// What every connection task shares.
pub struct Shared {
    pub caps: Caps,
    pub permit_key: Option<String>,
    pub stats: Arc<Stats>,
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// The `--max-reverse-rate` budget every download charges.
    pub download_budget: Option<SharedBudget>,
    /// The `--max-rate` budget every upload charges.
    pub upload_budget: Option<SharedBudget>,
    /// The browser tests started and their caps.
    pub records: Arc<crate::record::Records>,
    admission: Table,
    /// Refused connections still open (reading their 429); at most
    /// `max_connections` of them, beyond that a refused one is just closed.
    refusing: AtomicUsize,
}

impl std::fmt::Debug for Shared {
    // TlsAcceptor has no Debug; the rest is what a log would want.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("caps", &self.caps)
            .field("permit_key", &self.permit_key.as_ref().map(|_| "<set>"))
            .field("tls", &self.tls.is_some())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A running service. Dropping it stops the service.
#[derive(Debug)]
pub struct Service {
    /// The bound plain-HTTP address (the real port when 0 was asked for).
    pub http_addr: Option<SocketAddr>,
    pub https_addr: Option<SocketAddr>,
    /// SHA-256 fingerprint of the HTTPS certificate, `AB:CD:...`.
    pub fingerprint: Option<String>,
    /// The certificate was made at start.
    pub self_signed: bool,
    stats: Arc<Stats>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Listen backlog: a burst of RPM clients opens up to 16 connections each.
const BACKLOG: i32 = 1024;

/// Binds, prepares TLS and starts serving.
pub fn start(cfg: HttpConfig) -> Result<Service, HttpError> {
    let tls = match cfg.https {
        Some(_) => Some(Tls::new(&cfg.tls)?),
        None => None,
    };
    let http = cfg.http.map(|a| bind("http", a)).transpose()?;
    let https = cfg.https.map(|a| bind("https", a)).transpose()?;
    let local = |l: &Option<std::net::TcpListener>| l.as_ref().and_then(|l| l.local_addr().ok());
    let (http_addr, https_addr) = (local(&http), local(&https));
    let stats = Arc::new(Stats::default());
    let shared = Arc::new(Shared {
        caps: cfg.caps,
        permit_key: cfg.permit_key,
        stats: Arc::clone(&stats),
        tls: tls
            .as_ref()
            .map(|t| tokio_rustls::TlsAcceptor::from(Arc::clone(&t.config))),
        download_budget: cfg
            .caps
            .download_rate
            .map(|(per, all)| SharedBudget::new(per, all)),
        upload_budget: cfg
            .caps
            .upload_rate
            .map(|(per, all)| SharedBudget::new(per, all)),
        records: Arc::new(crate::record::Records::new(cfg.records)),
        admission: Table::new(cfg.caps.max_connections, cfg.caps.max_per_source),
        refusing: AtomicUsize::new(0),
    });
    // Two workers: the machine the lab runs on is small, and one core
    // saturates a loopback link with 64 KiB chunks.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bloatlab-http")
        .enable_all()
        .build()
        .map_err(HttpError::Runtime)?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("bloatlab-http-main".into())
        .spawn(move || {
            rt.block_on(async move {
                let mut loops = tokio::task::JoinSet::new();
                for (listener, tls) in [(http, false), (https, true)] {
                    let Some(l) = listener else { continue };
                    match tokio::net::TcpListener::from_std(l) {
                        Ok(l) => {
                            loops.spawn(accept_loop(l, Arc::clone(&shared), tls));
                        }
                        Err(e) => tracing::error!("HTTP listener: {e}"),
                    }
                }
                let _ = stop_rx.await;
                loops.abort_all();
            });
            // Connections still open are dropped (closed) with the runtime.
            rt.shutdown_timeout(Duration::from_secs(1));
        })
        .map_err(HttpError::Runtime)?;
    Ok(Service {
        http_addr,
        https_addr,
        fingerprint: tls.as_ref().map(|t| t.fingerprint.clone()),
        self_signed: tls.as_ref().is_some_and(|t| t.self_signed),
        stats,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

impl Service {
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// False once the service's thread has ended (it only ends when the
    /// service is dropped, or if its runtime failed).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn bind(flag: &'static str, addr: SocketAddr) -> Result<std::net::TcpListener, HttpError> {
    let err = |source| HttpError::Bind { flag, addr, source };
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )
    .map_err(err)?;
    sock.set_reuse_address(true).map_err(err)?;
    sock.bind(&addr.into()).map_err(err)?;
    sock.listen(BACKLOG).map_err(err)?;
    sock.set_nonblocking(true).map_err(err)?;
    Ok(sock.into())
}

async fn accept_loop(listener: tokio::net::TcpListener, shared: Arc<Shared>, tls: bool) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                // Out of descriptors and the like: wait instead of spinning.
                tracing::warn!("HTTP accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let admit = match shared.admission.take(Instant::now(), peer.ip()) {
            Ok(slot) => {
                shared.stats.accepted.fetch_add(1, Ordering::Relaxed);
                let open = shared.admission.open() as u64;
                shared.stats.peak_open.fetch_max(open, Ordering::Relaxed);
                Admit::Admitted(slot)
            }
            Err(hit) => {
                shared.stats.refused.fetch_add(1, Ordering::Relaxed);
                let busy = shared.refusing.fetch_add(1, Ordering::Relaxed);
                if busy >= shared.caps.max_connections {
                    shared.refusing.fetch_sub(1, Ordering::Relaxed);
                    drop(stream);
                    continue;
                }
                Admit::Refused(refusal_text(hit))
            }
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            let refused = matches!(admit, Admit::Refused(_));
            conn::serve(stream, Arc::clone(&shared), tls, admit).await;
            if refused {
                shared.refusing.fetch_sub(1, Ordering::Relaxed);
            }
        });
    }
}

fn refusal_text(hit: Refusal) -> String {
    // The cap by its flag, as the 429 body always said it.
    let cap = match hit {
        Refusal::Connections { cap, .. } => format!("--max-connections ({cap}) reached"),
        Refusal::PerSource { cap, .. } => {
            format!("--max-per-source ({cap}) reached for this source")
        }
        other => other.to_string(),
    };
    format!("server busy: {cap}; retry later")
}
