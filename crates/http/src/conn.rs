//! One accepted connection: socket options, the TLS handshake, HTTP/1.1 or
//! HTTP/2 (by ALPN, or by the HTTP/2 preface on plain TCP: h2c with prior
//! knowledge), and the three things that end it besides the peer:
//! `--max-duration` since accept, `--idle-timeout` without a byte moving,
//! and the short life of a refused (429) connection.

use crate::routes::{self, ConnInfo};
use crate::service::Shared;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
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
    let info = ConnInfo { peer, local, tls };
    let caps = shared.caps;
    let lifetime = match admit {
        Admit::Admitted(_) => caps.max_duration,
        Admit::Refused(_) => REFUSED_LIFETIME,
    };
    let born = Instant::now();
    let activity = Arc::new(Activity::new(born));
    if let Some(acceptor) = shared.tls.clone().filter(|_| tls) {
        let handshake = tokio::time::timeout(caps.header_timeout, acceptor.accept(stream));
        match handshake.await {
            Ok(Ok(s)) => {
                let io = Tracked::new(s, Arc::clone(&activity));
                run(
                    io,
                    shared,
                    info,
                    admit,
                    lifetime.saturating_sub(born.elapsed()),
                    activity,
                )
                .await
            }
            Ok(Err(e)) => tracing::debug!(%peer, "TLS handshake: {e}"),
            Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
        }
    } else {
        let io = Tracked::new(stream, Arc::clone(&activity));
        run(io, shared, info, admit, lifetime, activity).await
    }
}

async fn run<S>(
    io: Tracked<S>,
    shared: Arc<Shared>,
    info: ConnInfo,
    admit: Admit,
    lifetime: Duration,
    activity: Arc<Activity>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let caps = shared.caps;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(caps.header_timeout)
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
    let svc = service_fn(move |req| {
        let shared = Arc::clone(&shared2);
        let why = why.clone();
        async move {
            match why {
                None => routes::handle(req, shared, info).await,
                Some(why) => routes::refuse(req, shared, why).await,
            }
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
