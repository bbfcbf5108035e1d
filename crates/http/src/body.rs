//! Response bodies: a small fixed one, and the large object, streamed from
//! one static buffer (nothing is allocated per chunk), charged to the
//! download budget when the rate is capped ([`crate::budget`]), and counted
//! into the service's statistics.

use crate::budget::Charge;
use crate::stats::Stats;
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Instant;

/// Bytes per chunk handed to hyper: large enough that an HTTP/1.1 write is
/// one big syscall, small enough that a capped rate paces smoothly.
pub const CHUNK: usize = 64 * 1024;
static ZEROS: [u8; CHUNK] = [0; CHUNK];

/// The declared size of the large object: 64 GiB. The draft and
/// network-quality/server ask for at least 8 GB; 64 GiB outlasts any RPM run
/// (about 20 s) even at 10 Gbit/s, and a declared length lets a client tell
/// a complete object from one cut short (by `--max-duration`, say).
pub const LARGE_OBJECT_BYTES: u64 = 64 << 30;

/// A response body.
#[derive(Debug)]
pub enum Payload {
    /// A small body sent in one frame (config JSON, the 1-byte object,
    /// error texts); `None` once sent or for an empty body.
    Full(Option<Bytes>),
    /// The large object.
    Large(LargeBody),
}

impl Payload {
    pub fn full(b: impl Into<Bytes>) -> Payload {
        let b = b.into();
        Payload::Full((!b.is_empty()).then_some(b))
    }
}

/// The large object's body: `remaining` zero bytes, each chunk charged to
/// `charge` (the download budget) when the rate is capped.
#[derive(Debug)]
pub struct LargeBody {
    remaining: u64,
    charge: Option<Charge>,
    /// No chunk sent yet: the first one waits while the budget is in debt,
    /// so a burst of new connections does not each add a chunk of debt.
    first: bool,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    stats: Arc<Stats>,
    /// Samples the connection's TCP_INFO for a browser test's record.
    tracker: Option<crate::record::tcp::Tracker>,
}

impl LargeBody {
    pub fn new(len: u64, charge: Option<Charge>, stats: Arc<Stats>) -> LargeBody {
        LargeBody {
            remaining: len,
            charge,
            first: true,
            sleep: None,
            stats,
            tracker: None,
        }
    }

    /// Samples TCP_INFO into a browser test's record as chunks go out.
    pub fn tracked(mut self, tracker: Option<crate::record::tcp::Tracker>) -> LargeBody {
        self.tracker = tracker;
        self
    }
}

impl Body for Payload {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Payload::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Payload::Large(l) => l.poll_chunk(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Payload::Full(b) => b.is_none(),
            Payload::Large(l) => l.remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Payload::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Payload::Large(l) => SizeHint::with_exact(l.remaining),
        }
    }
}

impl LargeBody {
    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        if std::mem::take(&mut self.first) {
            self.sleep = self
                .charge
                .as_ref()
                .and_then(|c| c.after(Instant::now(), 0))
                .map(|wait| Box::pin(tokio::time::sleep(wait)));
        }
        if let Some(sleep) = &mut self.sleep {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.sleep = None;
        }
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        let n = self.remaining.min(CHUNK as u64) as usize;
        self.remaining -= n as u64;
        self.stats.downloaded.fetch_add(n as u64, Ordering::Relaxed);
        if let Some(t) = &mut self.tracker {
            t.poll(Instant::now());
        }
        if let Some(wait) = self
            .charge
            .as_ref()
            .and_then(|c| c.after(Instant::now(), n as u64))
        {
            self.sleep = Some(Box::pin(tokio::time::sleep(wait)));
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&ZEROS[..n])))))
    }
}

use std::future::Future;
