//! Aggregating probe times into responsiveness, draft-ietf-ippm-responsiveness-09
//! section 5.3.1 ("Aggregating the Measurements").
//!
//! Each of the four probe times (`tcp_f`, `tls_f`, `http_f` from foreign probes, `http_l`
//! from self probes) gets its own single-sided trimmed mean `TM` (the largest
//! `floor(trim · n)` samples dropped, [`bloatlab_stats::rpm::trimmed_mean`]). Then
//!
//! ```text
//! Foreign = 60000 / ((TM(tcp_f) + TM(tls_f) + TM(http_f)) / 3)     with TLS (5.3.1.1)
//! Foreign = 60000 / ((TM(tcp_f) + TM(http_f)) / 2)                 without TLS (5.3.1.2)
//! Loaded  = 60000 / TM(http_l)
//! RPM     = (Foreign + Loaded) / 2
//! ```
//!
//! Beside it, the same formula with the 90th percentile (Hyndman–Fan type 7) in place of
//! each `TM`: the "P90 RPM". goresponsiveness prints a P90-based figure, the draft's
//! DISCUSSION section notes that the 95th to 99th percentiles predict video calls better,
//! and the two differ most exactly when the delay distribution has a long tail (a bloated
//! queue that fills and drains). Showing both answers "why does tool X say otherwise".

use std::time::Duration;

use bloatlab_stats::quantile::quantile;
use bloatlab_stats::rpm::{rpm_from_rtt, trimmed_mean};

/// The four probe times of the draft, in its notation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeKind {
    /// TCP handshake of a foreign probe.
    TcpF,
    /// TLS handshake of a foreign probe, per TLS round trip.
    TlsF,
    /// The 1-byte GET on the foreign probe's new connection.
    HttpF,
    /// The 1-byte GET on a load-generating connection (self probe).
    HttpL,
}

impl ProbeKind {
    /// All four, in the draft's order.
    pub const ALL: [ProbeKind; 4] = [
        ProbeKind::TcpF,
        ProbeKind::TlsF,
        ProbeKind::HttpF,
        ProbeKind::HttpL,
    ];

    /// The draft's name: `tcp_f`, `tls_f`, `http_f`, `http_l`.
    pub fn name(self) -> &'static str {
        match self {
            ProbeKind::TcpF => "tcp_f",
            ProbeKind::TlsF => "tls_f",
            ProbeKind::HttpF => "http_f",
            ProbeKind::HttpL => "http_l",
        }
    }
}

/// Samples of each probe time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Samples {
    /// `tcp_f`.
    pub tcp_f: Vec<Duration>,
    /// `tls_f` (empty without TLS).
    pub tls_f: Vec<Duration>,
    /// `http_f`.
    pub http_f: Vec<Duration>,
    /// `http_l`.
    pub http_l: Vec<Duration>,
}

impl Samples {
    /// The samples of one kind.
    pub fn of(&self, k: ProbeKind) -> &[Duration] {
        match k {
            ProbeKind::TcpF => &self.tcp_f,
            ProbeKind::TlsF => &self.tls_f,
            ProbeKind::HttpF => &self.http_f,
            ProbeKind::HttpL => &self.http_l,
        }
    }
}

/// One aggregate (trimmed mean or P90) of each probe time; `tls_f` is `None` without TLS.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Parts {
    /// `tcp_f`.
    pub tcp_f: Duration,
    /// `tls_f`, `None` without TLS.
    pub tls_f: Option<Duration>,
    /// `http_f`.
    pub http_f: Duration,
    /// `http_l`.
    pub http_l: Duration,
}

/// Responsiveness from one statistic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Score {
    /// `(Foreign + Loaded) / 2`, round trips per minute.
    pub rpm: f64,
    /// `60000 / mean of the foreign parts`.
    pub foreign_rpm: f64,
    /// `60000 / http_l`.
    pub loaded_rpm: f64,
    /// The per-kind figures it came from.
    pub parts: Parts,
}

/// The draft's responsiveness (trimmed means) and the P90 figure beside it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Responsiveness {
    /// With single-sided trimmed means (the draft's number).
    pub trimmed: Score,
    /// With 90th percentiles.
    pub p90: Score,
    /// Samples per kind: `tcp_f`, `tls_f`, `http_f`, `http_l`.
    pub counts: [usize; 4],
}

fn score(parts: Parts) -> Option<Score> {
    let foreign = match parts.tls_f {
        Some(tls) => (parts.tcp_f + tls + parts.http_f) / 3,
        None => (parts.tcp_f + parts.http_f) / 2,
    };
    let foreign_rpm = rpm_from_rtt(foreign)?;
    let loaded_rpm = rpm_from_rtt(parts.http_l)?;
    Some(Score {
        rpm: (foreign_rpm + loaded_rpm) / 2.0,
        foreign_rpm,
        loaded_rpm,
        parts,
    })
}

fn parts_by(s: &Samples, f: impl Fn(&[Duration]) -> Option<Duration>) -> Option<Parts> {
    Some(Parts {
        tcp_f: f(&s.tcp_f)?,
        tls_f: if s.tls_f.is_empty() {
            None
        } else {
            Some(f(&s.tls_f)?)
        },
        http_f: f(&s.http_f)?,
        http_l: f(&s.http_l)?,
    })
}

/// Responsiveness of `samples`, trimming the largest `trim` fraction of each kind.
/// `None` unless there is at least one foreign and one self probe (and no aggregate is
/// zero, which cannot be turned into a rate).
pub fn responsiveness(samples: &Samples, trim: f64) -> Option<Responsiveness> {
    let trimmed = score(parts_by(samples, |x| trimmed_mean(x, trim))?)?;
    let p90 = score(parts_by(samples, |x| quantile(x, 0.9).ok())?)?;
    Some(Responsiveness {
        trimmed,
        p90,
        counts: ProbeKind::ALL.map(|k| samples.of(k).len()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn tls_case_averages_three_foreign_parts_then_the_two_rpms() {
        // tcp 20, tls 20, http 20 ms: foreign 3000 RPM; self 200 ms: 300; RPM 1650.
        let s = Samples {
            tcp_f: vec![ms(20)],
            tls_f: vec![ms(20)],
            http_f: vec![ms(20)],
            http_l: vec![ms(200)],
        };
        let r = responsiveness(&s, 0.05).unwrap();
        assert_eq!(r.trimmed.foreign_rpm, 3000.0);
        assert_eq!(r.trimmed.loaded_rpm, 300.0);
        assert_eq!(r.trimmed.rpm, 1650.0);
        assert_eq!(r.counts, [1, 1, 1, 1]);
        // Unequal parts: (10 + 20 + 30) / 3 = 20 ms -> 3000.
        let s = Samples {
            tcp_f: vec![ms(10)],
            tls_f: vec![ms(20)],
            http_f: vec![ms(30)],
            http_l: vec![ms(60)],
        };
        let r = responsiveness(&s, 0.05).unwrap();
        assert_eq!(r.trimmed.foreign_rpm, 3000.0);
        assert_eq!(r.trimmed.rpm, (3000.0 + 1000.0) / 2.0);
    }

    #[test]
    fn tcp_only_case_weighs_two_foreign_parts_and_never_a_zero_tls() {
        // (40 + 80) / 2 = 60 ms -> 1000 RPM; a zero tls_f would have given 1500.
        let s = Samples {
            tcp_f: vec![ms(40)],
            tls_f: vec![],
            http_f: vec![ms(80)],
            http_l: vec![ms(100)],
        };
        let r = responsiveness(&s, 0.05).unwrap();
        assert_eq!(r.trimmed.foreign_rpm, 1000.0);
        assert_eq!(r.trimmed.parts.tls_f, None);
        assert_eq!(r.trimmed.rpm, (1000.0 + 600.0) / 2.0);
    }

    #[test]
    fn each_kind_is_trimmed_on_its_own() {
        // 20 self probes: 19 of 100 ms and one of 10 s; the trim drops the 10 s one
        // (floor(0.05 * 20) = 1): TM = 100 ms. Pooled with the 20 foreign samples of
        // 10 ms, a single trimmed mean over 40 samples would drop two and keep the 10 s.
        let mut l = vec![ms(100); 19];
        l.push(ms(10_000));
        let s = Samples {
            tcp_f: vec![ms(10); 20],
            tls_f: vec![ms(10); 20],
            http_f: vec![ms(10); 20],
            http_l: l,
        };
        let r = responsiveness(&s, 0.05).unwrap();
        assert_eq!(r.trimmed.parts.http_l, ms(100));
        assert_eq!(r.trimmed.loaded_rpm, 600.0);
        assert_eq!(r.trimmed.rpm, (6000.0 + 600.0) / 2.0);
        // P90 of 19 x 100 ms + 10 s: type 7, h = 0.9 * 19 = 17.1 -> 100 ms.
        assert_eq!(r.p90.parts.http_l, ms(100));
    }

    #[test]
    fn p90_differs_from_the_trimmed_mean_on_a_long_tail() {
        // 1..=100 ms: the trim drops floor(0.05 * 100) = 5 samples (96..=100), the mean
        // of 1..=95 is 48 ms; P90 (type 7) = 1 + 0.9 * 99 = 90.1 ms.
        let x: Vec<Duration> = (1..=100).map(ms).collect();
        let s = Samples {
            tcp_f: x.clone(),
            tls_f: x.clone(),
            http_f: x.clone(),
            http_l: x,
        };
        let r = responsiveness(&s, 0.05).unwrap();
        assert_eq!(r.trimmed.parts.tcp_f, ms(48));
        assert_eq!(r.trimmed.rpm, 1250.0);
        assert_eq!(r.p90.parts.tcp_f, Duration::from_micros(90_100));
        assert!((r.p90.rpm - 60_000.0 / 90.1).abs() < 1e-6, "{}", r.p90.rpm);
    }

    #[test]
    fn no_samples_of_a_needed_kind_gives_none() {
        let s = Samples {
            tcp_f: vec![ms(10)],
            tls_f: vec![ms(10)],
            http_f: vec![ms(10)],
            http_l: vec![],
        };
        assert_eq!(responsiveness(&s, 0.05), None);
        assert_eq!(responsiveness(&Samples::default(), 0.05), None);
        // A zero aggregate cannot be a rate.
        let z = Samples {
            tcp_f: vec![Duration::ZERO],
            tls_f: vec![],
            http_f: vec![Duration::ZERO],
            http_l: vec![ms(1)],
        };
        assert_eq!(responsiveness(&z, 0.05), None);
    }
}
