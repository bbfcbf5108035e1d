//! One accepted connection: socket options, the TLS handshake, HTTP/1.1 or
//! HTTP/2 (by ALPN, or by the HTTP/2 preface on plain TCP: h2c with prior
//! knowledge), and the things that end it besides the peer:
//! `--max-duration` since accept, `--idle-timeout` without a byte moving,
//! the short life of a refused (429) connection, and the handshake and
//! request-head deadlines, which this driver only carries out: when they run
//! and which one passed is decided by [`crate::deadlines`].

use crate::body::Payload;
use crate::deadlines::{Cut, Deadlines, Proto};
use crate::routes::{self, ConnInfo};
use crate::service::Shared;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// TCP_NOTSENT_LOWAT on test connections, as the draft recommends for its
/// test endpoints: keep little unsent data in the socket buffer, so a probe
/// on a loaded connection (a self probe) waits behind little of our own
/// queue and the latency measured is the network's.
pub const NOTSENT_LOWAT: u32 = 16 * 1024;

/// How long a refused connection may stay to read its 429.
pub const REFUSED_LIFETIME: Duration = Duration::from_secs(5);

/// HTTP/2 flow-control windows we grant the client for uploads (RFC 9113
/// section 6.9). They bound what one connection can make us buffer when a
/// sink is paced: connection window per connection at most.
pub const H2_STREAM_WINDOW: u32 = 2 << 20;
pub const H2_CONN_WINDOW: u32 = 4 << 20;
pub const H2_MAX_STREAMS: u32 = 100;

/// Whether this connection was admitted or is over a cap (and why).
#[derive(Debug)]
pub enum Admit {
    Admitted(crate::caps::Slot),
    Refused(String),
}

/// Serves one connection to its end.
pub async fn serve(stream: TcpStream, shared: Arc<Shared>, tls: bool, admit: Admit) {
    let (Ok(peer), Ok(local)) = (stream.peer_addr(), stream.local_addr()) else {
        return;
    };
    let sock = socket2::SockRef::from(&stream);
    // Read back: what counts is the value in effect, not the call's success.
    match sock
        .set_tcp_notsent_lowat(NOTSENT_LOWAT)
        .and_then(|()| sock.tcp_notsent_lowat())
    {
        Ok(v) if v == NOTSENT_LOWAT => {
            shared.stats.lowat_set.fetch_add(1, Ordering::Relaxed);
        }
        Ok(v) => tracing::debug!(%peer, "TCP_NOTSENT_LOWAT reads back {v}"),
        Err(e) => tracing::debug!(%peer, "TCP_NOTSENT_LOWAT: {e}"),
    }
    // Small responses (probes) go out at once.
    let _ = stream.set_nodelay(true);
    let info = ConnInfo {
        peer,
        local,
        tls,
        fd: std::os::fd::AsRawFd::as_raw_fd(&stream),
    };
    let caps = shared.caps;
    let lifetime = match admit {
        Admit::Admitted(_) => caps.max_duration,
        Admit::Refused(_) => REFUSED_LIFETIME,
    };
    let born = Instant::now();
    let activity = Arc::new(Activity::new(born));
    let tls = shared.tls.clone().filter(|_| tls);
    let deadlines = Arc::new(Mutex::new(Deadlines::new(
        born,
        caps.deadlines,
        tls.is_some(),
    )));
    let Some(acceptor) = tls else {
        let io = Tracked::new(stream, Arc::clone(&activity));
        return run(io, shared, info, admit, lifetime, activity, deadlines).await;
    };
    tokio::select! {
        r = acceptor.accept(stream) => match r {
            Ok(s) => {
                lock(&deadlines).handshake_done(Instant::now());
                let io = Tracked::new(s, Arc::clone(&activity));
                let left = lifetime.saturating_sub(born.elapsed());
                run(io, shared, info, admit, left, activity, deadlines).await
            }
            Err(e) => tracing::debug!(%peer, "TLS handshake: {e}"),
        },
        cut = passed(&deadlines) => count(&shared, peer, cut),
        // A refused connection's 5 s (or a --max-duration shorter than the
        // handshake deadline) bound the handshake too.
        _ = tokio::time::sleep(lifetime) => {
            tracing::debug!(%peer, "connection reached its time limit in the TLS handshake");
        }
    }
}

/// Locks a connection's deadlines. Each update is one step, so the state
/// stays sound even if a task panicked while holding the lock.
fn lock(d: &Mutex<Deadlines>) -> MutexGuard<'_, Deadlines> {
    d.lock().unwrap_or_else(|e| e.into_inner())
}

/// Resolves once the core says a deadline has passed, with which one; never
/// while none runs. The deadline may move (a request comes, a response
/// ends) while this sleeps: callers that can move it create this future
/// anew on a short tick, so a wait that starts is seen within that tick.
async fn passed(d: &Mutex<Deadlines>) -> Cut {
    loop {
        let next = lock(d).next();
        match next {
            Some((at, _)) => tokio::time::sleep_until(at.into()).await,
            None => std::future::pending::<()>().await,
        }
        if let Some(cut) = lock(d).check(Instant::now()) {
            return cut;
        }
    }
}

/// Counts a connection cut by a deadline, under its reason.
fn count(shared: &Shared, peer: SocketAddr, cut: Cut) {
    let n = match cut {
        Cut::Handshake => &shared.stats.cut_handshake,
        Cut::RequestHead => &shared.stats.cut_request_head,
    };
    n.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(%peer, "connection cut: {cut}");
}

async fn run<S>(
    io: Tracked<S>,
    shared: Arc<Shared>,
    info: ConnInfo,
    admit: Admit,
    lifetime: Duration,
    activity: Arc<Activity>,
    deadlines: Arc<Mutex<Deadlines>>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let caps = shared.caps;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        // Ours (crate::deadlines) instead, counted; hyper's would also
        // default to 30 s once a timer is set.
        .header_read_timeout(None)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .initial_stream_window_size(H2_STREAM_WINDOW)
        .initial_connection_window_size(H2_CONN_WINDOW);
    let io = TokioIo::new(io);
    // The slot (if any) lives as long as this function: released on every path.
    let (slot, why) = match admit {
        Admit::Admitted(slot) => (Some(slot), None),
        Admit::Refused(why) => (None, Some(why)),
    };
    let shared2 = Arc::clone(&shared);
    let deadlines2 = Arc::clone(&deadlines);
    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
        let shared = Arc::clone(&shared2);
        let why = why.clone();
        let proto = if req.version() == hyper::Version::HTTP_2 {
            Proto::Http2
        } else {
            Proto::Http1
        };
        lock(&deadlines2).request_started(Instant::now(), proto);
        // Made before the handler runs: a handler dropped half-way (the
        // connection ended) still reports the request done.
        let done = Done(Arc::clone(&deadlines2));
        async move {
            let r = match why {
                None => routes::handle(req, shared, info).await,
                Some(why) => routes::refuse(req, shared, why).await,
            };
            r.map(|r| r.map(|inner| Watched { inner, _done: done }))
        }
    });
    let conn = builder.serve_connection(io, svc);
    tokio::pin!(conn);
    let end = tokio::time::sleep(lifetime);
    tokio::pin!(end);
    let mut tick = tokio::time::interval(Duration::from_millis(250).min(caps.idle_timeout));
    loop {
        tokio::select! {
            r = &mut conn => {
                if let Err(e) = r {
                    tracing::debug!(peer = %info.peer, "connection: {e}");
                }
                break;
            }
            _ = &mut end => {
                tracing::debug!(peer = %info.peer, "connection reached its time limit");
                break;
            }
            // Made anew at every pass of the loop (at least every tick),
            // so a deadline that starts while none ran is seen.
            cut = passed(&deadlines) => {
                count(&shared, info.peer, cut);
                break;
            }
            _ = tick.tick() => {
                if activity.idle_for() >= caps.idle_timeout {
                    tracing::debug!(peer = %info.peer, "connection idle too long");
                    break;
                }
            }
        }
    }
    // Dropping `conn` closes the socket (an abortive end for a body in flight:
    // the client sees its download or upload cut, as the caps mean).
    drop(slot);
}

/// Tells the deadlines a request is done when dropped: with its response
/// body, which hyper drops once the body is sent or the connection ends.
#[derive(Debug)]
struct Done(Arc<Mutex<Deadlines>>);

impl Drop for Done {
    fn drop(&mut self) {
        lock(&self.0).request_finished(Instant::now());
    }
}

/// A response body carrying its request's [`Done`].
#[derive(Debug)]
struct Watched {
    inner: Payload,
    _done: Done,
}

impl Body for Watched {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// When bytes last moved on a connection, for the idle timeout.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    /// Milliseconds since `epoch` of the last byte read or written.
    last_ms: AtomicU64,
}

impl Activity {
    fn new(epoch: Instant) -> Activity {
        Activity {
            epoch,
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }
}

/// A stream that notes every byte moved in an [`Activity`].
#[derive(Debug)]
pub struct Tracked<S> {
    inner: S,
    activity: Arc<Activity>,
}

impl<S> Tracked<S> {
    fn new(inner: S, activity: Arc<Activity>) -> Tracked<S> {
        Tracked { inner, activity }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tracked<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.activity.touch();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, b);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        if matches!(r, Poll::Ready(Ok(n)) if n > 0) {
            this.activity.touch();
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
