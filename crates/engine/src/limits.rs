//! What a peer may ask a server for, and how many connections it may hold.
//!
//! A server is meant to run where strangers can reach it (docs/security.md),
//! so every request is checked against [`ServerLimits`] before any state is
//! created, and TCP connections are admitted by [`Admission`] (a total cap
//! and a per-source cap, so one source cannot take every slot). Both are
//! sans-IO: the drivers pass what the header asks for and the source
//! address; the answer is a typed [`Refusal`] naming the cap and its option.
//!
//! A refused request gets iperf 2's refusal behaviour: TCP closes the
//! connection without an ack or data, UDP creates no flow and sends nothing,
//! and the server logs one (rate-limited) line.

use crate::config::Amount;
use crate::meter::MIN_PROGRESS_RATE;
use crate::rate_budget::DEFAULT_TOTAL_FACTOR;
use bloatlab_units::{BitRate, Bytes};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Default `--max-duration`: an hour-long soak test still runs.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(3600);
/// Default `--max-bytes` (`-n`): 1 TB (10^12 bytes).
pub const DEFAULT_MAX_BYTES: Bytes = Bytes(1_000_000_000_000);
/// Default `--max-streams` (`-P`): the most a bloatlab client asks for.
pub const DEFAULT_MAX_STREAMS: u32 = 128;
/// Default `--max-connections`: concurrent TCP connections in all.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;
/// Default `--max-per-source`: concurrent TCP connections from one source
/// (one IPv4 address or one IPv6 /64), enough for a `-P 128` client.
pub const DEFAULT_MAX_PER_SOURCE: usize = 128;
/// Default `--unverified-reverse-rate`: the fastest a server sends to a UDP
/// peer that did not prove it receives at its address (an iperf 2 client).
/// 0, refused: a forged source address would make the server a reflector
/// (issue 19: 164,445 datagrams from one 76-byte request); the operator
/// opts in with a rate.
pub const DEFAULT_UNVERIFIED_REVERSE_RATE: BitRate = BitRate(0);
/// Default `--unverified-reverse-time`: the longest such a test may run.
pub const DEFAULT_UNVERIFIED_REVERSE_TIME: Duration = Duration::from_secs(30);
/// Default `--max-source-time`: busy time one source gets (refilled over
/// [`crate::time_budget::SOURCE_TIME_WINDOW`]): two of the longest tests
/// `--max-duration` allows by default.
pub const DEFAULT_MAX_SOURCE_TIME: Duration = Duration::from_secs(2 * 3600);
/// A full TCP table with no source above its share evicts the slowest
/// connection at least this old whose average since it was admitted is
/// below [`crate::meter::MIN_PROGRESS_RATE`] (see [`Admission`]).
pub const EVICT_AGE: Duration = Duration::from_secs(10);

/// Caps on what one test may ask for (`bloatlab server` options).
#[derive(Debug, Clone, PartialEq)]
pub struct ServerLimits {
    /// `--max-duration`: longest `-t`; also the deadline of every test,
    /// `-n` ones included.
    pub max_duration: Duration,
    /// `--max-bytes`: largest `-n`.
    pub max_bytes: Bytes,
    /// `--max-streams`: largest `-P`.
    pub max_streams: u32,
    /// `--max-rate`: largest `-b` a client announces for the data it sends
    /// (UDP clients always announce it); also the receive budget of one
    /// source. `None`: no cap.
    pub max_rate: Option<BitRate>,
    /// `--max-total-rate`: the receive budget of all sources together
    /// (default: [`DEFAULT_TOTAL_FACTOR`] x `max_rate`).
    pub max_total_rate: Option<BitRate>,
    /// `--max-reverse-rate`: largest `-b` the server itself sends at
    /// (`-R`, `--full-duplex`). With a cap, an unpaced request is refused.
    /// Also the send budget of one source. `None`: no cap.
    pub max_reverse_rate: Option<BitRate>,
    /// `--max-total-reverse-rate`: the send budget of all sources together
    /// (default: [`DEFAULT_TOTAL_FACTOR`] x `max_reverse_rate`).
    pub max_total_reverse_rate: Option<BitRate>,
    /// `--max-source-time`: busy time one source gets per
    /// [`crate::time_budget::SOURCE_TIME_WINDOW`] (token bucket); zero: no
    /// budget.
    pub max_source_time: Duration,
    /// `--unverified-reverse-rate`: the largest rate sent to a UDP peer
    /// that did not pass the return-routability check; 0 refuses them all.
    pub unverified_reverse_rate: BitRate,
    /// `--unverified-reverse-time`: the longest such a test may run.
    pub unverified_reverse_time: Duration,
}

impl Default for ServerLimits {
    fn default() -> Self {
        ServerLimits {
            max_duration: DEFAULT_MAX_DURATION,
            max_bytes: DEFAULT_MAX_BYTES,
            max_streams: DEFAULT_MAX_STREAMS,
            max_rate: None,
            max_total_rate: None,
            max_reverse_rate: None,
            max_total_reverse_rate: None,
            max_source_time: DEFAULT_MAX_SOURCE_TIME,
            unverified_reverse_rate: DEFAULT_UNVERIFIED_REVERSE_RATE,
            unverified_reverse_time: DEFAULT_UNVERIFIED_REVERSE_TIME,
        }
    }
}

/// What a test header asks for, in the terms the caps use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ask {
    /// `-t` or `-n`.
    pub amount: Amount,
    /// `-P`.
    pub streams: u32,
    /// The announced `-b`; `None` when unpaced or not announced.
    pub rate: Option<BitRate>,
    /// The server sends (`-R`, `--full-duplex`).
    pub server_sends: bool,
    /// The client sends (forward, `--full-duplex`): `--max-rate` applies.
    pub client_sends: bool,
    /// The peer proved it receives at its address (always true on TCP,
    /// where the handshake proves it; UDP: the cookie check).
    pub verified: bool,
}

/// Why a request was refused: names the cap and the option that sets it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("asks for -t {asked:?}, above --max-duration {cap:?}")]
    Duration { asked: Duration, cap: Duration },
    #[error("asks for -n {asked}, above --max-bytes {cap}")]
    Bytes { asked: Bytes, cap: Bytes },
    #[error("asks for -P {asked}, above --max-streams {cap}")]
    Streams { asked: u32, cap: u32 },
    #[error("announces -b {asked}, above --max-rate {cap}")]
    Rate { asked: BitRate, cap: BitRate },
    #[error("asks the server to send at {asked}, above --max-reverse-rate {cap}")]
    ReverseRate { asked: String, cap: BitRate },
    #[error(
        "asks an unverified UDP peer to be sent {what}, above --unverified-reverse-{option} \
         (iperf 2 clients cannot prove they receive at their address)"
    )]
    Unverified { what: String, option: &'static str },
    #[error("too many connections ({open} open, --max-connections {cap})")]
    Connections { open: usize, cap: usize },
    #[error("too many connections from this source ({open} open, --max-per-source {cap})")]
    PerSource { open: usize, cap: usize },
    #[error(
        "too many tests from this source ({open} connections running one, --max-streams {cap})"
    )]
    StreamsOpen { open: usize, cap: usize },
    #[error("too many UDP flows from this source ({open} open, --max-streams {cap})")]
    FlowsOpen { open: usize, cap: usize },
    #[error("this source used its test time (--max-source-time {cap:?} per {window:?}); try later")]
    SourceTime { cap: Duration, window: Duration },
}

impl ServerLimits {
    /// Checks one request against the caps (sans-IO).
    pub fn check(&self, ask: &Ask) -> Result<(), Refusal> {
        match ask.amount {
            Amount::Time(d) if d > self.max_duration => {
                return Err(Refusal::Duration {
                    asked: d,
                    cap: self.max_duration,
                });
            }
            Amount::Bytes(b) if b > self.max_bytes => {
                return Err(Refusal::Bytes {
                    asked: b,
                    cap: self.max_bytes,
                });
            }
            _ => {}
        }
        if ask.streams > self.max_streams {
            return Err(Refusal::Streams {
                asked: ask.streams,
                cap: self.max_streams,
            });
        }
        if let (Some(cap), Some(r)) = (self.max_rate, ask.rate)
            && ask.client_sends
            && r > cap
        {
            return Err(Refusal::Rate { asked: r, cap });
        }
        if !ask.server_sends {
            return Ok(());
        }
        if let Some(cap) = self.max_reverse_rate {
            match ask.rate {
                Some(r) if r <= cap => {}
                Some(r) => {
                    return Err(Refusal::ReverseRate {
                        asked: r.to_string(),
                        cap,
                    });
                }
                None => {
                    return Err(Refusal::ReverseRate {
                        asked: "full speed (no -b)".into(),
                        cap,
                    });
                }
            }
        }
        if !ask.verified {
            let cap = self.unverified_reverse_rate;
            if ask.rate.is_none_or(|r| r > cap) {
                let asked = ask.rate.map_or("unpaced".into(), |r| format!("{r}"));
                return Err(Refusal::Unverified {
                    what: if cap.0 == 0 {
                        format!(
                            "{asked} (off unless the operator opts in with \
                             --unverified-reverse-rate RATE)"
                        )
                    } else {
                        format!("{asked} (cap {cap})")
                    },
                    option: "rate",
                });
            }
            let too_long = match ask.amount {
                Amount::Time(d) => d > self.unverified_reverse_time,
                // -n at the capped rate must also end within the time cap.
                Amount::Bytes(b) => cap
                    .transmit_time(b)
                    .is_none_or(|t| t > self.unverified_reverse_time),
            };
            if too_long {
                return Err(Refusal::Unverified {
                    what: format!("for longer than {:?}", self.unverified_reverse_time),
                    option: "time",
                });
            }
        }
        Ok(())
    }

    /// The receive budget (per source, in all), if `--max-rate` or
    /// `--max-total-rate` is set.
    pub fn receive_budget(&self) -> Option<(BitRate, BitRate)> {
        budget_pair(self.max_rate, self.max_total_rate)
    }

    /// The send budget (per source, in all), if `--max-reverse-rate` or
    /// `--max-total-reverse-rate` is set.
    pub fn send_budget(&self) -> Option<(BitRate, BitRate)> {
        budget_pair(self.max_reverse_rate, self.max_total_reverse_rate)
    }

    /// The latest a test of `amount` may end, as an offset from its start:
    /// its own `-t` (or `--max-duration` for `-n`), never past the cap.
    pub fn deadline(&self, amount: Amount) -> Duration {
        match amount {
            Amount::Time(d) => d.min(self.max_duration),
            Amount::Bytes(_) => self.max_duration,
        }
    }
}

/// A per-source rate and a total one: the total defaults to
/// [`DEFAULT_TOTAL_FACTOR`] times the per-source rate; a total alone is
/// also every source's cap.
fn budget_pair(per: Option<BitRate>, total: Option<BitRate>) -> Option<(BitRate, BitRate)> {
    match (per, total) {
        (Some(p), t) => Some((
            p,
            t.unwrap_or(BitRate(p.0.saturating_mul(DEFAULT_TOTAL_FACTOR))),
        )),
        (None, Some(t)) => Some((t, t)),
        (None, None) => None,
    }
}

/// The source a per-source cap counts: an IPv4 address, or the /64 of an
/// IPv6 address (one host usually owns a whole /64).
pub fn source_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return IpAddr::V4(v4);
            }
            let s = v6.segments();
            IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
        }
    }
}

/// Counts open TCP connections, in all and per source; hands out a
/// [`Slot`] that gives its place back when dropped (every exit path).
///
/// **Fairness.** When every slot is taken, a newcomer whose source holds
/// fewer connections than the source holding most (by two or more)
/// takes the place of that source's oldest connection: its `on_evict`
/// closer runs and its slot is free at once. So a few addresses that fill
/// the table (issue 19, attack 3: 256 stalled connections from 2 addresses)
/// cannot keep a new source out; they only lose their oldest connections to
/// it. A source alone never evicts (a `-P` client's own streams are safe
/// from each other), and two sources with the same share do not take turns.
///
/// **Progress.** When no source holds more than its share (256 sources at
/// one connection each, each sending a byte now and then), the newcomer
/// takes the place of the slowest connection among those at least
/// [`EVICT_AGE`] old that moved less than
/// [`crate::meter::MIN_PROGRESS_RATE`] on average since they were
/// admitted: each connection's owner counts its bytes in its [`Progress`].
/// A running test moves far more (our `-b 1k` sends 125 B/s); a young
/// connection, a real newcomer's included, is safe for its first
/// [`EVICT_AGE`]; a trickle cannot hold a slot against a newcomer.
#[derive(Clone)]
pub struct Admission {
    inner: Arc<Mutex<Counts>>,
    max_total: usize,
    max_per_source: usize,
    max_streams: usize,
}

impl std::fmt::Debug for Admission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admission")
            .field("open", &self.open())
            .field("max_total", &self.max_total)
            .field("max_per_source", &self.max_per_source)
            .field("max_streams", &self.max_streams)
            .finish()
    }
}

/// What closes an evicted connection (the driver's socket shutdown).
type Closer = Box<dyn FnOnce() + Send>;

/// The bytes a connection moved since it was admitted (shared by its
/// owner, which counts them, and the [`Admission`] table, which reads them
/// to evict the slowest).
#[derive(Debug, Clone)]
pub struct Progress {
    admitted: Instant,
    bytes: Arc<AtomicU64>,
}

impl Progress {
    fn new(admitted: Instant) -> Progress {
        Progress {
            admitted,
            bytes: Arc::new(AtomicU64::new(0)),
        }
    }

    /// `n` more bytes moved.
    pub fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes per second since admission, at `now`, if at least
    /// [`EVICT_AGE`] old (younger ones are not judged).
    fn rate(&self, now: Instant) -> Option<f64> {
        let age = now.saturating_duration_since(self.admitted);
        (age >= EVICT_AGE).then(|| self.bytes.load(Ordering::Relaxed) as f64 / age.as_secs_f64())
    }
}

struct Held {
    close: Closer,
    progress: Progress,
}

#[derive(Default)]
struct Counts {
    next: u64,
    total: usize,
    /// Per source: its connections by id in admission order (oldest first).
    per_source: HashMap<IpAddr, std::collections::BTreeMap<u64, Held>>,
    /// Per source: connections past their test header (`--max-streams`).
    streams: HashMap<IpAddr, usize>,
}

impl Counts {
    fn held(&self, source: &IpAddr) -> usize {
        self.per_source.get(source).map_or(0, |m| m.len())
    }

    /// The source and id of the connection to evict for a newcomer from a
    /// source holding `here`, if any (see [`Admission`]).
    fn victim(&self, here: usize, now: Instant) -> Option<(IpAddr, u64)> {
        // The source holding most (ties: the smallest key, so the choice
        // does not depend on hash order), if it holds two more.
        let most = self
            .per_source
            .iter()
            .map(|(k, m)| (m.len(), std::cmp::Reverse(*k)))
            .max();
        if let Some((n, std::cmp::Reverse(k))) = most
            && n >= here + 2
        {
            return Some((k, *self.per_source.get(&k)?.first_key_value()?.0));
        }
        // Else the slowest connection old enough to judge, if below the
        // minimum progress (ties: the oldest).
        self.per_source
            .iter()
            .flat_map(|(k, m)| {
                m.iter()
                    .filter_map(move |(id, h)| Some((h.progress.rate(now)?, *id, *k)))
            })
            .filter(|(rate, _, _)| *rate < MIN_PROGRESS_RATE as f64)
            .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)))
            .map(|(_, id, k)| (k, id))
    }
}

/// One admitted connection's place (see [`Admission`]).
pub struct Slot {
    inner: Arc<Mutex<Counts>>,
    source: IpAddr,
    id: u64,
    max_streams: usize,
    /// Counted in `Counts::streams` (after [`Slot::start_test`]).
    streaming: bool,
    progress: Progress,
}

impl std::fmt::Debug for Slot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot")
            .field("source", &self.source)
            .field("id", &self.id)
            .finish()
    }
}

impl Admission {
    /// At most `max_total` connections, `max_per_source` from one source,
    /// and `max_streams` tests (connections past their header) from one
    /// source (`--max-streams`, which counts connections, not the `-P` a
    /// header claims).
    pub fn new(max_total: usize, max_per_source: usize, max_streams: usize) -> Admission {
        Admission {
            inner: Arc::new(Mutex::new(Counts::default())),
            max_total: max_total.max(1),
            max_per_source: max_per_source.max(1),
            max_streams: max_streams.max(1),
        }
    }

    /// Admits a connection from `ip` at `now`, or says which cap it hit.
    /// When the table is full, a fairer claim or an idle connection makes
    /// room (see the type's docs): the victim's `on_evict` runs. `on_evict`
    /// runs at most once, only if this connection is evicted later.
    pub fn admit(
        &self,
        now: Instant,
        ip: IpAddr,
        on_evict: impl FnOnce() + Send + 'static,
    ) -> Result<Slot, Refusal> {
        let source = source_key(ip);
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let here = c.held(&source);
        if here >= self.max_per_source {
            return Err(Refusal::PerSource {
                open: here,
                cap: self.max_per_source,
            });
        }
        if c.total >= self.max_total {
            let Some((v, id)) = c.victim(here, now) else {
                return Err(Refusal::Connections {
                    open: c.total,
                    cap: self.max_total,
                });
            };
            if let Some(m) = c.per_source.get_mut(&v)
                && let Some(held) = m.remove(&id)
            {
                if m.is_empty() {
                    c.per_source.remove(&v);
                }
                c.total -= 1;
                (held.close)();
            }
        }
        let id = c.next;
        c.next += 1;
        c.total += 1;
        let progress = Progress::new(now);
        c.per_source.entry(source).or_default().insert(
            id,
            Held {
                close: Box::new(on_evict),
                progress: progress.clone(),
            },
        );
        Ok(Slot {
            inner: Arc::clone(&self.inner),
            source,
            id,
            max_streams: self.max_streams,
            streaming: false,
            progress,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.inner.lock().map(|c| c.total).unwrap_or(0)
    }
}

impl Slot {
    /// The handle its owner counts moved bytes in.
    pub fn progress(&self) -> Progress {
        self.progress.clone()
    }

    /// The connection's header asked for a test: count it as one of its
    /// source's streams, or refuse it past `--max-streams` (what the
    /// header's `-P` claims does not matter; connections do).
    pub fn start_test(&mut self) -> Result<(), Refusal> {
        if self.streaming {
            return Ok(());
        }
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let n = c.streams.entry(self.source).or_insert(0);
        if *n >= self.max_streams {
            let open = *n;
            if open == 0 {
                c.streams.remove(&self.source);
            }
            return Err(Refusal::StreamsOpen {
                open,
                cap: self.max_streams,
            });
        }
        *n += 1;
        self.streaming = true;
        Ok(())
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if self.streaming
            && let Some(n) = c.streams.get_mut(&self.source)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.streams.remove(&self.source);
            }
        }
        // An evicted connection's place was given back when it was evicted.
        if let Some(m) = c.per_source.get_mut(&self.source)
            && m.remove(&self.id).is_some()
        {
            if m.is_empty() {
                c.per_source.remove(&self.source);
            }
            c.total = c.total.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(amount: Amount) -> Ask {
        Ask {
            amount,
            streams: 1,
            rate: None,
            server_sends: false,
            client_sends: true,
            verified: true,
        }
    }

    #[test]
    fn defaults_accept_an_ordinary_test_and_refuse_what_is_above_a_cap() {
        let l = ServerLimits::default();
        assert_eq!(l.check(&ask(Amount::Time(Duration::from_secs(10)))), Ok(()));
        let long = l.check(&ask(Amount::Time(Duration::from_secs(3601))));
        assert!(matches!(long, Err(Refusal::Duration { .. })), "{long:?}");
        assert!(long.unwrap_err().to_string().contains("--max-duration"));
        let big = l.check(&ask(Amount::Bytes(Bytes(DEFAULT_MAX_BYTES.0 + 1))));
        assert!(matches!(big, Err(Refusal::Bytes { .. })));
        let mut many = ask(Amount::default());
        many.streams = 129;
        assert!(matches!(l.check(&many), Err(Refusal::Streams { .. })));
    }

    #[test]
    fn rate_caps_apply_to_what_is_announced_and_unpaced_reverse_is_refused_under_a_cap() {
        let l = ServerLimits {
            max_rate: Some(BitRate(1_000_000)),
            max_reverse_rate: Some(BitRate(5_000_000)),
            ..ServerLimits::default()
        };
        let mut a = ask(Amount::default());
        a.rate = Some(BitRate(2_000_000));
        assert!(matches!(l.check(&a), Err(Refusal::Rate { .. })));
        a.rate = None; // not announced (TCP forward): nothing to check
        assert_eq!(l.check(&a), Ok(()));
        let l = ServerLimits {
            max_reverse_rate: Some(BitRate(5_000_000)),
            ..ServerLimits::default()
        };
        a.server_sends = true;
        a.client_sends = false;
        assert!(matches!(l.check(&a), Err(Refusal::ReverseRate { .. })));
        a.rate = Some(BitRate(5_000_000));
        assert_eq!(l.check(&a), Ok(()));
        a.rate = Some(BitRate(5_000_001));
        assert!(matches!(l.check(&a), Err(Refusal::ReverseRate { .. })));
    }

    #[test]
    fn unverified_peers_get_only_a_slow_short_reverse_test() {
        // Opted in (the default is off, below).
        let l = ServerLimits {
            unverified_reverse_rate: BitRate(10_000_000),
            ..ServerLimits::default()
        };
        let mut a = ask(Amount::Time(Duration::from_secs(10)));
        a.server_sends = true;
        a.verified = false;
        a.rate = Some(BitRate(2_000_000));
        assert_eq!(l.check(&a), Ok(()));
        a.rate = Some(BitRate(10_000_001));
        assert!(matches!(
            l.check(&a),
            Err(Refusal::Unverified { option: "rate", .. })
        ));
        a.rate = None;
        assert!(matches!(
            l.check(&a),
            Err(Refusal::Unverified { option: "rate", .. })
        ));
        a.rate = Some(BitRate(1_000_000));
        a.amount = Amount::Time(Duration::from_secs(31));
        assert!(matches!(
            l.check(&a),
            Err(Refusal::Unverified { option: "time", .. })
        ));
        // 10 Mbit/s x 30 s = 37.5 MB: a -n above that would outlast the cap.
        a.amount = Amount::Bytes(Bytes(37_500_000));
        assert_eq!(l.check(&a), Ok(()));
        a.amount = Amount::Bytes(Bytes(37_500_001));
        assert!(l.check(&a).is_err());
        // The default refuses every unverified reverse test, and says how
        // to opt in.
        let off = ServerLimits::default();
        a.amount = Amount::Time(Duration::from_secs(1));
        a.rate = Some(BitRate(1));
        let e = off.check(&a).unwrap_err().to_string();
        assert!(e.contains("opts in with --unverified-reverse-rate"), "{e}");
    }

    #[test]
    fn every_test_has_a_deadline() {
        let l = ServerLimits::default();
        assert_eq!(
            l.deadline(Amount::Time(Duration::from_secs(5))),
            Duration::from_secs(5)
        );
        assert_eq!(l.deadline(Amount::Bytes(Bytes(1))), DEFAULT_MAX_DURATION);
    }

    fn nop() {}

    #[test]
    fn admission_caps_total_and_per_source_and_frees_on_drop() {
        let a = Admission::new(3, 2, 8);
        let x: IpAddr = [10, 0, 0, 1].into();
        let y: IpAddr = [10, 0, 0, 2].into();
        let s1 = a.admit(Instant::now(), x, nop).unwrap();
        let s2 = a.admit(Instant::now(), x, nop).unwrap();
        assert!(matches!(
            a.admit(Instant::now(), x, nop),
            Err(Refusal::PerSource { open: 2, cap: 2 })
        ));
        let s3 = a.admit(Instant::now(), y, nop).unwrap();
        // Full, and no source holds two more than y: refused, not evicted.
        assert!(matches!(
            a.admit(Instant::now(), y, nop),
            Err(Refusal::Connections { open: 3, cap: 3 })
        ));
        drop(s1);
        assert_eq!(a.open(), 2);
        let s4 = a.admit(Instant::now(), x, nop).unwrap();
        drop((s2, s3, s4));
        assert_eq!(a.open(), 0);
    }

    #[test]
    fn a_full_table_gives_a_new_source_the_oldest_place_of_the_source_holding_most() {
        // Attack 3 in small: two sources fill every slot; a third still gets in.
        let a = Admission::new(6, 4, 8);
        let x: IpAddr = [10, 0, 0, 1].into();
        let y: IpAddr = [10, 0, 0, 2].into();
        let real: IpAddr = [10, 0, 0, 3].into();
        let closed = Arc::new(Mutex::new(Vec::new()));
        let mut held = Vec::new();
        for (i, ip) in [x, x, x, x, y, y].into_iter().enumerate() {
            let c = Arc::clone(&closed);
            held.push(
                a.admit(Instant::now(), ip, move || c.lock().unwrap().push(i))
                    .unwrap(),
            );
        }
        assert_eq!(a.open(), 6);
        // x holds its per-source cap; it cannot evict anyone anyway (it is
        // the largest).
        assert!(matches!(
            a.admit(Instant::now(), x, nop),
            Err(Refusal::PerSource { .. })
        ));
        let r1 = a.admit(Instant::now(), real, nop).unwrap();
        assert_eq!(*closed.lock().unwrap(), vec![0], "x's oldest goes first");
        assert_eq!(a.open(), 6, "the evicted place is free at once");
        let r2 = a.admit(Instant::now(), real, nop).unwrap();
        assert_eq!(*closed.lock().unwrap(), vec![0, 1]);
        // Now x 2, y 2, real 2: equal shares do not take turns.
        assert!(matches!(
            a.admit(Instant::now(), real, nop),
            Err(Refusal::Connections { .. })
        ));
        // The evicted slots' own drops do not free a second place.
        drop(held.remove(0));
        drop(held.remove(0));
        assert_eq!(a.open(), 6);
        drop((r1, r2, held));
        assert_eq!(a.open(), 0);
        assert_eq!(
            closed.lock().unwrap().len(),
            2,
            "only evicted ones were closed"
        );
    }

    #[test]
    fn a_full_table_of_single_connections_gives_a_newcomer_the_slowest_place() {
        // Issue 19 audit: 256 sources (IPv6 /64s) at one connection each,
        // each sending a byte now and then, locked real clients out, since
        // nobody held two more than the newcomer.
        let a = Admission::new(4, 4, 8);
        let t0 = Instant::now();
        let closed = Arc::new(Mutex::new(Vec::new()));
        let mut held = Vec::new();
        for i in 0..4u8 {
            let c = Arc::clone(&closed);
            let ip: IpAddr = format!("2001:db8:{i}::1").parse().unwrap();
            held.push(a.admit(t0, ip, move || c.lock().unwrap().push(i)).unwrap());
        }
        // 0 is a real test (1 MB so far); 1-3 trickle a byte now and then.
        held[0].progress().add(1_000_000);
        for (s, n) in held[1..].iter().zip([30, 5, 900]) {
            s.progress().add(n);
        }
        let real: IpAddr = "2001:db8:99::1".parse().unwrap();
        // Younger than EVICT_AGE: nobody is judged yet.
        let t9 = t0 + Duration::from_secs(9);
        assert!(matches!(
            a.admit(t9, real, nop),
            Err(Refusal::Connections { .. })
        ));
        // At 10 s: 3 B/s, 0.5 B/s and 90 B/s trickles; the slowest goes.
        let t10 = t0 + EVICT_AGE;
        let r = a.admit(t10, real, nop).unwrap();
        assert_eq!(*closed.lock().unwrap(), vec![2], "the slowest connection");
        assert_eq!(a.open(), 4);
        // The newcomer is young, so safe; the next slowest goes next, and
        // the real test never.
        let _r2 = a.admit(t10, real, nop).unwrap();
        let _r3 = a.admit(t10, real, nop).unwrap();
        assert_eq!(*closed.lock().unwrap(), vec![2, 1, 3]);
        assert!(matches!(
            a.admit(t10 + Duration::from_secs(5), real, nop),
            Err(Refusal::Connections { .. })
        ));
        drop((r, held));
    }

    #[test]
    fn max_streams_counts_connections_running_a_test_per_source() {
        // Issue 19: 10 connections each claiming -P 1 against --max-streams 4.
        let a = Admission::new(64, 64, 4);
        let x: IpAddr = [10, 0, 0, 1].into();
        let y: IpAddr = [10, 0, 0, 2].into();
        let mut slots: Vec<Slot> = (0..10)
            .map(|_| a.admit(Instant::now(), x, nop).unwrap())
            .collect();
        let served = slots
            .iter_mut()
            .map(|s| s.start_test())
            .filter(Result::is_ok)
            .count();
        assert_eq!(served, 4);
        let mut other = a.admit(Instant::now(), y, nop).unwrap();
        assert_eq!(
            other.start_test(),
            Ok(()),
            "another source has its own budget"
        );
        // A finished test gives its stream back.
        slots.remove(0);
        let mut next = a.admit(Instant::now(), x, nop).unwrap();
        assert_eq!(next.start_test(), Ok(()));
        assert!(matches!(
            a.admit(Instant::now(), x, nop).unwrap().start_test(),
            Err(Refusal::StreamsOpen { open: 4, cap: 4 })
        ));
    }

    #[test]
    fn ipv6_sources_count_per_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::7".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(source_key(a), source_key(b));
        assert_ne!(source_key(a), source_key(c));
        let m: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(source_key(m), IpAddr::from([10, 0, 0, 1]));
    }
}
