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
use bloatlab_units::{BitRate, Bytes};
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// (UDP clients always announce it). `None`: no cap.
    pub max_rate: Option<BitRate>,
    /// `--max-reverse-rate`: largest `-b` the server itself sends at
    /// (`-R`, `--full-duplex`). With a cap, an unpaced request is refused.
    /// `None`: no cap.
    pub max_reverse_rate: Option<BitRate>,
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
            max_reverse_rate: None,
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

    /// The latest a test of `amount` may end, as an offset from its start:
    /// its own `-t` (or `--max-duration` for `-n`), never past the cap.
    pub fn deadline(&self, amount: Amount) -> Duration {
        match amount {
            Amount::Time(d) => d.min(self.max_duration),
            Amount::Bytes(_) => self.max_duration,
        }
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
#[derive(Debug, Clone)]
pub struct Admission {
    inner: Arc<Mutex<Counts>>,
    max_total: usize,
    max_per_source: usize,
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_source: HashMap<IpAddr, usize>,
}

/// One admitted connection's place (see [`Admission`]).
#[derive(Debug)]
pub struct Slot {
    inner: Arc<Mutex<Counts>>,
    source: IpAddr,
}

impl Admission {
    /// At most `max_total` connections, `max_per_source` from one source.
    pub fn new(max_total: usize, max_per_source: usize) -> Admission {
        Admission {
            inner: Arc::new(Mutex::new(Counts::default())),
            max_total: max_total.max(1),
            max_per_source: max_per_source.max(1),
        }
    }

    /// Admits a connection from `ip`, or says which cap it hit.
    pub fn admit(&self, ip: IpAddr) -> Result<Slot, Refusal> {
        let source = source_key(ip);
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if c.total >= self.max_total {
            return Err(Refusal::Connections {
                open: c.total,
                cap: self.max_total,
            });
        }
        let here = c.per_source.get(&source).copied().unwrap_or(0);
        if here >= self.max_per_source {
            return Err(Refusal::PerSource {
                open: here,
                cap: self.max_per_source,
            });
        }
        c.total += 1;
        *c.per_source.entry(source).or_insert(0) += 1;
        Ok(Slot {
            inner: Arc::clone(&self.inner),
            source,
        })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.inner.lock().map(|c| c.total).unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut c = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        c.total = c.total.saturating_sub(1);
        if let Some(n) = c.per_source.get_mut(&self.source) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                c.per_source.remove(&self.source);
            }
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

    #[test]
    fn admission_caps_total_and_per_source_and_frees_on_drop() {
        let a = Admission::new(3, 2);
        let x: IpAddr = [10, 0, 0, 1].into();
        let y: IpAddr = [10, 0, 0, 2].into();
        let s1 = a.admit(x).unwrap();
        let s2 = a.admit(x).unwrap();
        assert!(matches!(
            a.admit(x),
            Err(Refusal::PerSource { open: 2, cap: 2 })
        ));
        let s3 = a.admit(y).unwrap();
        assert!(matches!(
            a.admit(y),
            Err(Refusal::Connections { open: 3, cap: 3 })
        ));
        drop(s1);
        assert_eq!(a.open(), 2);
        let s4 = a.admit(x).unwrap();
        drop((s2, s3, s4));
        assert_eq!(a.open(), 0);
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
