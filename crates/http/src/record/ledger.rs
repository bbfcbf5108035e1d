//! The browser tests the server has started, as a sans-IO core: who may
//! start one (the caps), which result POST belongs to which test (tokens),
//! and what the server saw of each test's load connections. It never reads
//! a clock or the random source: `now` and the random bytes are arguments,
//! so expiry, reuse and the hourly budget are tested on a virtual clock.
//!
//! A test is `Running` from [`Ledger::start`] until its result is accepted
//! ([`Ledger::finish`]: then `Done`, and the token cannot be used again) or
//! until `max_duration` has passed (then its token is expired). Entries are
//! forgotten [`REMEMBER`] after their deadline; a token after that is
//! unknown.

use super::tcp::{ConnKey, ConnTcp, TcpAgg};
use bloatlab_engine::limits::source_key;
use bloatlab_engine::tcpinfo::TcpInfoSample;
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The window of the per-source budget.
pub const HOUR: Duration = Duration::from_secs(3600);
/// How long a finished or expired test's entry is kept, so a late or
/// repeated POST is told "used" or "expired" rather than "unknown".
pub const REMEMBER: Duration = Duration::from_secs(600);
/// The most tests remembered at once (running, done or expired): a bound
/// on memory whatever the caps; over it a start is refused as busy.
pub const MAX_REMEMBERED: usize = 4096;

/// The caps on browser tests (flags `--browser-*`, docs/browser.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TestCaps {
    /// `--browser-tests-per-hour`: tests one source (IPv4 address or IPv6
    /// /64) may start in any hour.
    pub per_source_per_hour: u32,
    /// `--browser-max-tests`: tests running at once, all sources.
    pub concurrent: u32,
    /// `--browser-max-duration`: from start to result POST at most.
    pub max_duration: Duration,
    /// `--browser-max-result`: the most bytes a result POST may carry.
    pub max_result_bytes: u64,
}

impl Default for TestCaps {
    fn default() -> TestCaps {
        TestCaps {
            per_source_per_hour: 20,
            concurrent: 8,
            max_duration: Duration::from_secs(300),
            max_result_bytes: 1 << 20,
        }
    }
}

/// A test's public id (in `/result/ID` and the file name): 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TestId(pub u64);

impl std::fmt::Display for TestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl TestId {
    /// Exactly 16 lowercase hex digits, nothing else (it becomes a path).
    pub fn parse(s: &str) -> Option<TestId> {
        (s.len() == 16 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
            .then(|| u64::from_str_radix(s, 16).ok().map(TestId))
            .flatten()
    }
}

/// The secret that lets a result be posted: 32 hex digits, never shown in
/// the result URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(pub [u8; 16]);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<secret>)")
    }
}

impl std::fmt::Display for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl Token {
    pub fn parse(s: &str) -> Option<Token> {
        if s.len() != 32 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        let mut t = [0u8; 16];
        for (i, b) in t.iter_mut().enumerate() {
            *b = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(Token(t))
    }

    /// Compares without an early exit (the time taken tells nothing).
    fn matches(&self, other: &Token) -> bool {
        self.0
            .iter()
            .zip(other.0)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

/// Why a test was not started or a result not taken. The texts are shown
/// to the user as they are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "this server runs at most {0} browser tests at once (--browser-max-tests) and all are \
         in use; try again in a few minutes"
    )]
    Busy(u32),
    #[error(
        "your address has started {limit} tests in the last hour (--browser-tests-per-hour); \
         the next one can start in {} min", retry.as_secs().div_ceil(60)
    )]
    Hourly { limit: u32, retry: Duration },
    #[error(
        "this test would take about {needs} s, longer than this server allows \
         (--browser-max-duration {max} s); use a shorter ?duration="
    )]
    TooLong { needs: u64, max: u64 },
    #[error("no test with this id was started by this server (or it was forgotten)")]
    Unknown,
    #[error("the token does not belong to this test")]
    WrongToken,
    #[error("this test's result was already stored; a test's token works once")]
    Used,
    #[error("this test ran out of time (--browser-max-duration {0} s); its result is not stored")]
    Expired(u64),
}

impl Refusal {
    /// Seconds a refused client may wait before trying again, for the
    /// caps that pass (`Retry-After`).
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Refusal::Busy(_) => Some(Duration::from_secs(60)),
            Refusal::Hourly { retry, .. } => Some(*retry),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Done,
}

/// One started test.
#[derive(Debug)]
pub struct Entry {
    pub id: TestId,
    token: Token,
    /// The client's address (any connection of the test must come from its
    /// source to be counted).
    pub peer: IpAddr,
    pub started: Instant,
    pub deadline: Instant,
    state: State,
    /// The server's TCP_INFO of the test's load connections.
    pub tcp: TcpAgg,
}

/// A started test as the page learns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    pub id: TestId,
    pub token: Token,
    pub deadline: Instant,
}

/// The tests, the per-source start times and the caps.
#[derive(Debug)]
pub struct Ledger {
    caps: TestCaps,
    tests: HashMap<TestId, Entry>,
    /// Start times in the last hour, per source (oldest first).
    starts: HashMap<IpAddr, VecDeque<Instant>>,
}

impl Ledger {
    pub fn new(caps: TestCaps) -> Ledger {
        Ledger {
            caps,
            tests: HashMap::new(),
            starts: HashMap::new(),
        }
    }

    pub fn caps(&self) -> TestCaps {
        self.caps
    }

    /// Starts a test for `peer` that expects to run `needs` (the page's
    /// schedule), with 24 random bytes for its id and token; or says which
    /// cap refuses it.
    pub fn start(
        &mut self,
        now: Instant,
        peer: IpAddr,
        needs: Duration,
        random: [u8; 24],
    ) -> Result<Ticket, Refusal> {
        self.prune(now);
        if needs > self.caps.max_duration {
            return Err(Refusal::TooLong {
                needs: needs.as_secs(),
                max: self.caps.max_duration.as_secs(),
            });
        }
        let running = self.running(now);
        if running >= self.caps.concurrent as usize || self.tests.len() >= MAX_REMEMBERED {
            return Err(Refusal::Busy(self.caps.concurrent));
        }
        let limit = self.caps.per_source_per_hour;
        let starts = self.starts.entry(source_key(peer)).or_default();
        if starts.len() >= limit as usize {
            let retry = starts
                .front()
                .map_or(HOUR, |&t| (t + HOUR).saturating_duration_since(now));
            return Err(Refusal::Hourly { limit, retry });
        }
        let mut id_bytes = [0u8; 8];
        id_bytes.copy_from_slice(&random[..8]);
        let mut token = [0u8; 16];
        token.copy_from_slice(&random[8..]);
        let id = TestId(u64::from_le_bytes(id_bytes));
        if self.tests.contains_key(&id) {
            // 2^-64: the caller's random source is broken; refuse rather
            // than mix two tests.
            return Err(Refusal::Busy(self.caps.concurrent));
        }
        starts.push_back(now);
        let deadline = now + self.caps.max_duration;
        let ticket = Ticket {
            id,
            token: Token(token),
            deadline,
        };
        self.tests.insert(
            id,
            Entry {
                id,
                token: ticket.token.clone(),
                peer,
                started: now,
                deadline,
                state: State::Running,
                tcp: TcpAgg::default(),
            },
        );
        Ok(ticket)
    }

    /// Checks a result POST's id and token before its body is read.
    pub fn check(&self, now: Instant, id: TestId, token: &Token) -> Result<&Entry, Refusal> {
        let e = self.tests.get(&id).ok_or(Refusal::Unknown)?;
        if !e.token.matches(token) {
            return Err(Refusal::WrongToken);
        }
        if e.state == State::Done {
            return Err(Refusal::Used);
        }
        if now > e.deadline {
            return Err(Refusal::Expired(self.caps.max_duration.as_secs()));
        }
        Ok(e)
    }

    /// Takes a test's result: checks again (another POST may have come in
    /// between), marks it done, and returns what the server saw of it.
    pub fn finish(&mut self, now: Instant, id: TestId, token: &Token) -> Result<Finished, Refusal> {
        self.check(now, id, token)?;
        let e = self.tests.get_mut(&id).ok_or(Refusal::Unknown)?;
        e.state = State::Done;
        Ok(Finished {
            peer: e.peer,
            started: e.started,
            tcp: std::mem::take(&mut e.tcp),
        })
    }

    /// Tests running now (not done, deadline not passed).
    pub fn running(&self, now: Instant) -> usize {
        self.tests
            .values()
            .filter(|e| e.state == State::Running && now <= e.deadline)
            .count()
    }

    /// Whether a connection from `peer` may be counted as `id`'s load.
    pub fn tracks(&self, now: Instant, id: TestId, peer: IpAddr) -> bool {
        self.tests.get(&id).is_some_and(|e| {
            e.state == State::Running && now <= e.deadline && source_key(e.peer) == source_key(peer)
        })
    }

    /// One TCP_INFO sample of a load connection of test `id`.
    pub fn sample(&mut self, now: Instant, id: TestId, conn: ConnKey, s: &TcpInfoSample) {
        if let Some(e) = self.tests.get_mut(&id)
            && e.state == State::Running
        {
            let at = now.saturating_duration_since(e.started);
            e.tcp.add(conn, at, s);
        }
    }

    /// Forgets what is past remembering, and start times older than an hour.
    fn prune(&mut self, now: Instant) {
        self.tests.retain(|_, e| now <= e.deadline + REMEMBER);
        self.starts.retain(|_, q| {
            while q.front().is_some_and(|&t| now >= t + HOUR) {
                q.pop_front();
            }
            !q.is_empty()
        });
    }
}

/// What [`Ledger::finish`] hands to the writer.
#[derive(Debug)]
pub struct Finished {
    pub peer: IpAddr,
    pub started: Instant,
    pub tcp: TcpAgg,
}

impl Finished {
    /// The load connections, in the order first seen.
    pub fn connections(&self) -> &[(ConnKey, ConnTcp)] {
        self.tcp.connections()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn rnd(n: u8) -> [u8; 24] {
        [n; 24]
    }

    fn caps() -> TestCaps {
        TestCaps {
            per_source_per_hour: 3,
            concurrent: 2,
            max_duration: Duration::from_secs(100),
            max_result_bytes: 1000,
        }
    }

    const S: Duration = Duration::from_secs(30);

    #[test]
    fn a_token_works_once_and_only_for_its_test() {
        let t0 = Instant::now();
        let mut l = Ledger::new(caps());
        let a = l.start(t0, ip("192.0.2.1"), S, rnd(1)).unwrap();
        let b = l.start(t0, ip("192.0.2.1"), S, rnd(2)).unwrap();
        assert_eq!(a.id.to_string().len(), 16);
        assert_eq!(TestId::parse(&a.id.to_string()), Some(a.id));
        assert_eq!(Token::parse(&a.token.to_string()), Some(a.token.clone()));
        let t = t0 + Duration::from_secs(20);
        assert_eq!(
            l.finish(t, a.id, &b.token).unwrap_err(),
            Refusal::WrongToken
        );
        assert_eq!(
            l.finish(t, TestId(7), &a.token).unwrap_err(),
            Refusal::Unknown
        );
        l.finish(t, a.id, &a.token).unwrap();
        assert_eq!(l.finish(t, a.id, &a.token).unwrap_err(), Refusal::Used);
        assert_eq!(l.running(t), 1);
    }

    #[test]
    fn a_token_expires_with_the_max_duration_and_is_forgotten_later() {
        let t0 = Instant::now();
        let mut l = Ledger::new(caps());
        let a = l.start(t0, ip("192.0.2.1"), S, rnd(1)).unwrap();
        let at = |s| t0 + Duration::from_secs(s);
        l.check(at(100), a.id, &a.token).unwrap();
        assert_eq!(l.running(at(100)), 1);
        assert_eq!(
            l.finish(at(101), a.id, &a.token).unwrap_err(),
            Refusal::Expired(100)
        );
        // An expired test holds no slot.
        assert_eq!(l.running(at(101)), 0);
        // Remembered for REMEMBER after its deadline, then unknown.
        l.start(at(100 + 600), ip("192.0.2.9"), S, rnd(5)).unwrap();
        assert_eq!(
            l.check(at(700), a.id, &a.token).unwrap_err(),
            Refusal::Expired(100)
        );
        l.start(at(701), ip("192.0.2.9"), S, rnd(6)).unwrap();
        assert_eq!(
            l.check(at(701), a.id, &a.token).unwrap_err(),
            Refusal::Unknown
        );
    }

    #[test]
    fn concurrent_tests_are_capped_and_a_finished_one_frees_its_slot() {
        let t0 = Instant::now();
        let mut l = Ledger::new(caps());
        let a = l.start(t0, ip("192.0.2.1"), S, rnd(1)).unwrap();
        l.start(t0, ip("192.0.2.2"), S, rnd(2)).unwrap();
        assert_eq!(
            l.start(t0, ip("192.0.2.3"), S, rnd(3)).unwrap_err(),
            Refusal::Busy(2)
        );
        l.finish(t0, a.id, &a.token).unwrap();
        l.start(t0, ip("192.0.2.3"), S, rnd(3)).unwrap();
    }

    #[test]
    fn the_hourly_budget_is_per_source_and_slides() {
        let mut c = caps();
        c.concurrent = 100;
        let t0 = Instant::now();
        let mut l = Ledger::new(c);
        let at = |s| t0 + Duration::from_secs(s);
        for (i, s) in [0, 600, 1200].into_iter().enumerate() {
            l.start(at(s), ip("2001:db8::1"), S, rnd(i as u8)).unwrap();
        }
        // Same /64, another address: the same source.
        let err = l.start(at(1800), ip("2001:db8::2"), S, rnd(9)).unwrap_err();
        assert_eq!(
            err,
            Refusal::Hourly {
                limit: 3,
                retry: Duration::from_secs(1800)
            }
        );
        assert_eq!(err.retry_after(), Some(Duration::from_secs(1800)));
        assert!(err.to_string().contains("in 30 min"), "{err}");
        // Another source is not affected.
        l.start(at(1800), ip("2001:db8:1::1"), S, rnd(10)).unwrap();
        // An hour after the first start, one more.
        l.start(at(3600), ip("2001:db8::2"), S, rnd(11)).unwrap();
        assert!(l.start(at(3601), ip("2001:db8::2"), S, rnd(12)).is_err());
    }

    #[test]
    fn memory_stays_bounded_however_many_sources_come() {
        let mut c = caps();
        c.concurrent = u32::MAX;
        let t0 = Instant::now();
        let mut l = Ledger::new(c);
        for i in 0..MAX_REMEMBERED as u32 {
            let mut r = [0u8; 24];
            r[..4].copy_from_slice(&i.to_le_bytes());
            l.start(t0, IpAddr::from(i.to_be_bytes()), S, r).unwrap();
        }
        let e = l.start(t0, ip("198.51.100.1"), S, [9; 24]).unwrap_err();
        assert!(matches!(e, Refusal::Busy(_)), "{e}");
        // Once the old ones are forgotten, tests start again.
        l.start(
            t0 + Duration::from_secs(701),
            ip("198.51.100.1"),
            S,
            [9; 24],
        )
        .unwrap();
    }

    #[test]
    fn a_test_longer_than_the_cap_is_refused_before_it_counts() {
        let t0 = Instant::now();
        let mut l = Ledger::new(caps());
        let err = l
            .start(t0, ip("192.0.2.1"), Duration::from_secs(101), rnd(1))
            .unwrap_err();
        assert_eq!(
            err,
            Refusal::TooLong {
                needs: 101,
                max: 100
            }
        );
        for i in 0..2 {
            l.start(t0, ip("192.0.2.1"), S, rnd(i)).unwrap();
        }
    }

    #[test]
    fn load_connections_count_only_from_the_tests_source_while_it_runs() {
        let t0 = Instant::now();
        let mut l = Ledger::new(caps());
        let a = l.start(t0, ip("192.0.2.1"), S, rnd(1)).unwrap();
        assert!(l.tracks(t0, a.id, ip("192.0.2.1")));
        assert!(!l.tracks(t0, a.id, ip("192.0.2.2")));
        assert!(!l.tracks(t0, TestId(1), ip("192.0.2.1")));
        assert!(!l.tracks(t0 + Duration::from_secs(101), a.id, ip("192.0.2.1")));
        l.finish(t0, a.id, &a.token).unwrap();
        assert!(!l.tracks(t0, a.id, ip("192.0.2.1")));
    }

    #[test]
    fn ids_and_tokens_parse_only_in_their_exact_form() {
        for bad in [
            "",
            "0123",
            "0123456789abcdeg",
            "0123456789ABCDEF",
            "../../etc/passwd",
        ] {
            assert_eq!(TestId::parse(bad), None, "{bad}");
        }
        assert_eq!(TestId::parse("00000000000000ff"), Some(TestId(255)));
        assert!(Token::parse("zz").is_none());
        assert!(Token::parse(&"a".repeat(32)).is_some());
        assert!(Token::parse(&"é".repeat(16)).is_none());
    }
}
