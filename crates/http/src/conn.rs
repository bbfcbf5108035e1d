//! One accepted connection: socket options, the TLS handshake, HTTP/1.1 or
//! HTTP/2 (by ALPN, or by the HTTP/2 preface on plain TCP: h2c with prior
//! knowledge), and the things that end it besides the peer:
//! `--max-duration` since accept, `--idle-timeout` without a byte moving,
//! the short life of a refused (429) connection, and the handshake and
//! request-head deadlines, which this driver only carries out: when they run
//! and which one passed is decided by [`crate::deadlines`].

use crate::body::Payload;
use crate::caps::Eviction;
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
use std::os::fd::{AsRawFd, RawFd};
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
    let (moved, eviction) = match &admit {
        Admit::Admitted(slot) => (Some(slot.progress()), slot.eviction()),
        Admit::Refused(_) => (None, Eviction::default()),
    };
    let activity = Arc::new(Activity::new(born, moved));
    let tls = shared.tls.clone().filter(|_| tls);
    let deadlines = Arc::new(Mutex::new(Deadlines::new(
        born,
        caps.deadlines,
        tls.is_some(),
    )));
    // Below TLS: the handshake's bytes count as the client's progress, and
    // the idle timeout sees every byte on the wire.
    let fd = stream.as_raw_fd();
    let io = Tracked::new(stream, Arc::clone(&activity));
    let Some(acceptor) = tls else {
        let watch = Watch {
            lifetime,
            activity,
            deadlines,
            fd,
            eviction,
        };
        return run(io, shared, info, admit, watch).await;
    };
    tokio::select! {
        r = acceptor.accept(io) => match r {
            Ok(s) => {
                lock(&deadlines).handshake_done(Instant::now());
                let left = lifetime.saturating_sub(born.elapsed());
                let watch = Watch {
                    lifetime: left,
                    activity,
                    deadlines,
                    fd,
                    eviction,
                };
                run(s, shared, info, admit, watch).await
            }
            Err(e) => tracing::debug!(%peer, "TLS handshake: {e}"),
        },
        cut = passed(&deadlines, |d, now| progress(d, now, &activity, fd)) => count(&shared, peer, cut),
        () = eviction.wait() => {
            shared.stats.evicted.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%peer, "connection evicted in the TLS handshake: its place went to a fairer claim");
        }
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
/// The client's progress in the handshake moves it too: `look` tells the
/// deadlines about it whenever one comes due, so a handshake that made
/// progress meanwhile sleeps on to its new deadline.
async fn passed(d: &Mutex<Deadlines>, look: impl Fn(&mut Deadlines, Instant)) -> Cut {
    loop {
        let next = {
            let mut d = lock(d);
            look(&mut d, Instant::now());
            d.next()
        };
        match next {
            Some((at, _)) => tokio::time::sleep_until(at.into()).await,
            None => std::future::pending::<()>().await,
        }
        let mut d = lock(d);
        let now = Instant::now();
        look(&mut d, now);
        if let Some(cut) = d.check(now) {
            return cut;
        }
    }
}

/// Tells the deadlines what a wait's progress is at `now`: when the
/// client's bytes last came, and whether our own bytes still wait for its
/// ACK or when it last sent one (TCP_INFO of `fd`). A syscall, made only
/// when a deadline comes due (and at each pass of the driver's loop).
fn progress(d: &mut Deadlines, now: Instant, activity: &Activity, fd: RawFd) {
    if !d.waiting() {
        return;
    }
    d.received(activity.last_read());
    match bloatlab_engine::tcpinfo::ack_wait(&fd) {
        Ok(w) => d.observed(now, w),
        Err(e) => tracing::debug!("TCP_INFO: {e}"),
    }
}

/// Counts a connection cut by a deadline, under its reason.
fn count(shared: &Shared, peer: SocketAddr, cut: Cut) {
    let n = match cut {
        c if c.in_handshake() => &shared.stats.cut_handshake,
        _ => &shared.stats.cut_request_head,
    };
    n.fetch_add(1, Ordering::Relaxed);
    tracing::debug!(%peer, "connection cut: {cut}");
}

/// What ends a connection besides the peer, once it serves HTTP: its time
/// left, its activity, its deadlines, and its socket for TCP_INFO.
struct Watch {
    lifetime: Duration,
    activity: Arc<Activity>,
    deadlines: Arc<Mutex<Deadlines>>,
    fd: RawFd,
    /// The table gave this connection's place to another (crate::caps).
    eviction: Eviction,
}

async fn run<S>(io: S, shared: Arc<Shared>, info: ConnInfo, admit: Admit, watch: Watch)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Watch {
        lifetime,
        activity,
        deadlines,
        fd,
        eviction,
    } = watch;
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
            () = eviction.wait() => {
                shared.stats.evicted.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(peer = %info.peer, "connection evicted: its place went to a fairer claim");
                break;
            }
            _ = &mut end => {
                tracing::debug!(peer = %info.peer, "connection reached its time limit");
                break;
            }
            // Made anew at every pass of the loop (at least every tick),
            // so a deadline that starts while none ran is seen.
            cut = passed(&deadlines, |d, now| progress(d, now, &activity, fd)) => {
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

/// When bytes last moved on a connection, for the idle timeout, and when
/// the client last sent any, for the handshake's progress.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    /// The slot's byte count (what keeps an admitted connection from being
    /// evicted as idle).
    progress: Option<bloatlab_engine::limits::Progress>,
    /// Milliseconds since `epoch` of the last byte read or written.
    last_ms: AtomicU64,
    /// Milliseconds since `epoch` of the last byte read.
    read_ms: AtomicU64,
}

impl Activity {
    fn new(epoch: Instant, progress: Option<bloatlab_engine::limits::Progress>) -> Activity {
        Activity {
            epoch,
            progress,
            last_ms: AtomicU64::new(0),
            read_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self, n: usize) {
        if let Some(p) = &self.progress {
            p.add(n as u64);
        }
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    fn touch_read(&self, n: usize) {
        if let Some(p) = &self.progress {
            p.add(n as u64);
        }
        let ms = self.epoch.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
        self.read_ms.store(ms, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// When a byte was last read (accept, if none was).
    fn last_read(&self) -> Instant {
        self.epoch + Duration::from_millis(self.read_ms.load(Ordering::Relaxed))
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
            this.activity.touch_read(buf.filled().len() - before);
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tracked<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, b: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.inner).poll_write(cx, b);
        if let Poll::Ready(Ok(n)) = r
            && n > 0
        {
            this.activity.touch(n);
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
        if let Poll::Ready(Ok(n)) = r
            && n > 0
        {
            this.activity.touch(n);
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
