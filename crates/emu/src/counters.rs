//! Per-direction counters and the sojourn-time histogram.
//!
//! Conservation, checked by the property tests after every operation:
//! `enqueued = dropped.total() + dequeued + backlog + in_transit`, in packets and in bytes.

use crate::spec::Limit;
use bloatlab_stats::histogram::{self, LogHistogram};
use bloatlab_units::Bytes;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A count of packets and their bytes (IP lengths).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PacketBytes {
    /// Packets.
    pub packets: u64,
    /// Bytes (sum of IP packet lengths, without link overhead).
    pub bytes: Bytes,
}

impl PacketBytes {
    /// Counts one packet of `len` bytes.
    pub fn add(&mut self, len: u64) {
        self.packets += 1;
        self.bytes.0 += len;
    }

    /// Uncounts one packet of `len` bytes.
    pub fn sub(&mut self, len: u64) {
        self.packets -= 1;
        self.bytes.0 -= len;
    }

    /// Would adding a packet of `len` bytes make this exceed `limit`?
    pub fn would_exceed(&self, limit: Limit, len: u64) -> bool {
        match limit {
            Limit::Packets(n) => self.packets + 1 > u64::from(n),
            Limit::Bytes(b) => self.bytes.0 + len > b.0,
        }
    }

    /// Does this exceed `limit`?
    pub fn exceeds(&self, limit: Limit) -> bool {
        match limit {
            Limit::Packets(n) => self.packets > u64::from(n),
            Limit::Bytes(b) => self.bytes.0 > b.0,
        }
    }

    /// Sum of two counts.
    pub fn plus(self, o: PacketBytes) -> PacketBytes {
        PacketBytes {
            packets: self.packets + o.packets,
            bytes: Bytes(self.bytes.0 + o.bytes.0),
        }
    }

    /// What was added since `earlier` (saturating: a counter never runs backwards, but a
    /// snapshot of another link must not underflow).
    pub fn since(self, earlier: PacketBytes) -> PacketBytes {
        PacketBytes {
            packets: self.packets.saturating_sub(earlier.packets),
            bytes: Bytes(self.bytes.0.saturating_sub(earlier.bytes.0)),
        }
    }
}

/// Drops, by who dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drops {
    /// The qdisc was full (packet, byte or memory limit; FQ's fattest-flow drops).
    pub overflow: PacketBytes,
    /// The AQM's control law (CoDel, PIE, COBALT/BLUE).
    pub aqm: PacketBytes,
    /// The loss model (random, Gilbert-Elliott).
    pub loss: PacketBytes,
}

impl Drops {
    /// All drops.
    pub fn total(&self) -> PacketBytes {
        self.overflow.plus(self.aqm).plus(self.loss)
    }

    /// Drops since `earlier`, by cause.
    pub fn since(&self, earlier: &Drops) -> Drops {
        Drops {
            overflow: self.overflow.since(earlier.overflow),
            aqm: self.aqm.since(earlier.aqm),
            loss: self.loss.since(earlier.loss),
        }
    }
}

/// Everything one direction of a link did. Serialises to JSON with units in the field names
/// where they are not types (`_ns`), and reads back what it wrote.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counters {
    /// Packets passed to `Link::enqueue`.
    pub enqueued: PacketBytes,
    /// Packets discarded, by whom.
    pub dropped: Drops,
    /// Packets marked CE instead of dropped (they are also counted in `dequeued` once delivered).
    pub ce_marked: PacketBytes,
    /// Packets returned by `Link::dequeue`.
    pub dequeued: PacketBytes,
    /// Packets waiting in the qdisc now.
    pub backlog: PacketBytes,
    /// Packets being serialized or propagating (left the qdisc, not yet delivered).
    pub in_transit: PacketBytes,
    /// Packets whose IP header could not be parsed; they were hashed to the default flow.
    pub unparsed: u64,
    /// Time from entering the qdisc to starting serialization, for every packet that left it.
    /// In [`crate::Chain::counters`]: per packet that left the chain, that time summed over
    /// every stage it crossed.
    pub sojourn: SojournHistogram,
}

impl Counters {
    /// What happened between the snapshot `earlier` and this one: cumulative counts as
    /// differences, `backlog` and `in_transit` as they are now, the sojourn histogram of the
    /// packets that left the qdisc in between.
    pub fn since(&self, earlier: &Counters) -> Counters {
        Counters {
            enqueued: self.enqueued.since(earlier.enqueued),
            dropped: self.dropped.since(&earlier.dropped),
            ce_marked: self.ce_marked.since(earlier.ce_marked),
            dequeued: self.dequeued.since(earlier.dequeued),
            backlog: self.backlog,
            in_transit: self.in_transit,
            unparsed: self.unparsed.saturating_sub(earlier.unparsed),
            sojourn: self.sojourn.since(&earlier.sojourn),
        }
    }
}

impl Counters {
    /// `enqueued - (dropped + dequeued + backlog + in_transit)`, which must be zero.
    pub fn conservation_gap(&self) -> (i128, i128) {
        let out = self
            .dropped
            .total()
            .plus(self.dequeued)
            .plus(self.backlog)
            .plus(self.in_transit);
        (
            i128::from(self.enqueued.packets) - i128::from(out.packets),
            i128::from(self.enqueued.bytes.0) - i128::from(out.bytes.0),
        )
    }
}

/// Values up to 2^41 ns (about 37 minutes) are recorded without allocating.
const PREALLOCATED_NS: u64 = 1 << 41;

/// A histogram of durations: bloatlab's one streaming histogram
/// ([`bloatlab_stats::histogram`]: exact below 64 ns, then 32 sub-buckets per power of two;
/// nearest-rank percentiles within 1.6 %, exact minimum, maximum and mean). Recording is O(1)
/// and, below 37 minutes, allocation-free.
#[derive(Clone, PartialEq, Eq)]
pub struct SojournHistogram(LogHistogram);

impl Default for SojournHistogram {
    fn default() -> Self {
        SojournHistogram(LogHistogram::preallocated(PREALLOCATED_NS))
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl SojournHistogram {
    /// Records one sample.
    pub fn record(&mut self, d: Duration) {
        self.0.record(nanos(d));
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.0.count()
    }

    /// Smallest sample.
    pub fn min(&self) -> Option<Duration> {
        self.0.min().map(Duration::from_nanos)
    }

    /// Largest sample.
    pub fn max(&self) -> Option<Duration> {
        self.0.max().map(Duration::from_nanos)
    }

    /// Arithmetic mean (exact, not bucketed).
    pub fn mean(&self) -> Option<Duration> {
        self.0.mean().map(Duration::from_nanos)
    }

    /// The nearest-rank `q`-quantile (`q` in 0..=1), as docs/statistics.md §1b defines it.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        self.0.quantile(q).map(Duration::from_nanos)
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, o: &SojournHistogram) {
        self.0.merge(&o.0);
    }

    /// The samples recorded after the snapshot `earlier` of this histogram (see
    /// [`LogHistogram::since`]: extremes within one bucket, exact when the extreme is newest).
    pub fn since(&self, earlier: &SojournHistogram) -> SojournHistogram {
        SojournHistogram(self.0.since(&earlier.0))
    }

    /// The summary that is serialized.
    pub fn summary(&self) -> SojournSummary {
        let ns = |d: Option<Duration>| d.map(nanos);
        SojournSummary {
            count: self.count(),
            min_ns: ns(self.min()),
            mean_ns: ns(self.mean()),
            p50_ns: ns(self.quantile(0.5)),
            p90_ns: ns(self.quantile(0.9)),
            p99_ns: ns(self.quantile(0.99)),
            p999_ns: ns(self.quantile(0.999)),
            max_ns: ns(self.max()),
        }
    }
}

/// Percentiles of the sojourn time, in nanoseconds; `None` (JSON null) when there were no samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SojournSummary {
    /// Samples.
    pub count: u64,
    /// Smallest, exact.
    pub min_ns: Option<u64>,
    /// Mean, exact.
    pub mean_ns: Option<u64>,
    /// Median.
    pub p50_ns: Option<u64>,
    /// 90th percentile.
    pub p90_ns: Option<u64>,
    /// 99th percentile.
    pub p99_ns: Option<u64>,
    /// 99.9th percentile.
    pub p999_ns: Option<u64>,
    /// Largest, exact.
    pub max_ns: Option<u64>,
}

impl std::fmt::Debug for SojournHistogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.summary().fmt(f)
    }
}

/// The serialized form: the summary plus the non-empty buckets as `[index, count]` pairs of
/// the named bucketing `scheme` and the exact sum, so a reader can rebuild the histogram (and
/// subtract two snapshots).
#[derive(Serialize, Deserialize)]
struct SojournWire {
    #[serde(flatten)]
    summary: SojournSummary,
    /// u64, not u128: serde cannot buffer u128 inside a flattened struct (584 years of
    /// summed sojourn fit; more saturates).
    #[serde(default)]
    sum_ns: u64,
    /// Absent in files written before the histograms were unified: refused, since their
    /// bucket indices mean something else.
    #[serde(default)]
    scheme: String,
    #[serde(default)]
    buckets: Vec<(u32, u64)>,
}

impl Serialize for SojournHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SojournWire {
            summary: self.summary(),
            sum_ns: u64::try_from(self.0.sum()).unwrap_or(u64::MAX),
            scheme: histogram::SCHEME.to_string(),
            buckets: self
                .0
                .buckets()
                .map(|b| (b.index as u32, b.count))
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for SojournHistogram {
    /// Reads what [`Serialize`] wrote; an unknown scheme, bucket indices out of range or
    /// extremes outside the buckets are an error.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let w = SojournWire::deserialize(d)?;
        if w.scheme != histogram::SCHEME && !(w.buckets.is_empty() && w.summary.count == 0) {
            return Err(D::Error::custom(format!(
                "sojourn histogram scheme {:?} is not {:?} (written by another bloatlab version; \
                 restart the lab)",
                w.scheme,
                histogram::SCHEME
            )));
        }
        let extremes = w.summary.min_ns.zip(w.summary.max_ns);
        let buckets = w.buckets.into_iter().map(|(i, n)| (u64::from(i), n));
        let mut h = LogHistogram::from_parts(buckets, extremes, u128::from(w.sum_ns))
            .map_err(|e| D::Error::custom(format!("sojourn histogram: {e}")))?;
        if h.count() > 0 {
            let mut full = LogHistogram::preallocated(PREALLOCATED_NS);
            full.merge(&h);
            h = full;
        }
        Ok(SojournHistogram(h))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_match_known_answers() {
        let mut h = SojournHistogram::default();
        assert_eq!(h.quantile(0.5), None);
        // 1..=100 µs: nearest-rank p50 is 50 µs, p99 is 99 µs, p100 is 100 µs.
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us));
        }
        let within = |got: Duration, want_us: f64| {
            let g = got.as_nanos() as f64 / 1000.0;
            assert!(
                (g - want_us).abs() / want_us <= 1.0 / 64.0,
                "got {g} µs, want {want_us}"
            );
        };
        within(h.quantile(0.5).unwrap(), 50.0);
        within(h.quantile(0.99).unwrap(), 99.0);
        assert_eq!(h.quantile(1.0).unwrap(), Duration::from_micros(100));
        assert_eq!(h.quantile(0.0).unwrap(), Duration::from_micros(1));
        assert_eq!(h.mean().unwrap(), Duration::from_nanos(50_500));
        assert_eq!(h.count(), 100);
        // Small values are exact.
        let mut s = SojournHistogram::default();
        for ns in [3u64, 5, 7] {
            s.record(Duration::from_nanos(ns));
        }
        assert_eq!(s.quantile(0.5).unwrap(), Duration::from_nanos(5));
        let j = serde_json::to_value(&s).unwrap();
        assert_eq!(j["p50_ns"], 5);
        assert_eq!(j["count"], 3);
    }

    #[test]
    fn histogram_round_trips_through_json() {
        let mut h = SojournHistogram::default();
        for us in [1u64, 7, 300, 4_000, 4_000, 90_000] {
            h.record(Duration::from_micros(us));
        }
        let back: SojournHistogram =
            serde_json::from_value(serde_json::to_value(&h).unwrap()).unwrap();
        assert_eq!(back.summary(), h.summary());
        let bad = serde_json::json!({"count": 1, "buckets": [[999_999, 1]]});
        assert!(serde_json::from_value::<SojournHistogram>(bad).is_err());
    }

    #[test]
    fn since_keeps_only_the_newer_samples() {
        let mut h = SojournHistogram::default();
        for _ in 0..100 {
            h.record(Duration::from_millis(200)); // a bloated FIFO before the run
        }
        let before = h.clone();
        for us in 1..=100u64 {
            h.record(Duration::from_micros(us * 10)); // 10 us .. 1 ms during the run
        }
        let d = h.since(&before);
        assert_eq!(d.count(), 100);
        let p50 = d.quantile(0.5).unwrap().as_nanos() as f64 / 1e3;
        assert!((p50 - 500.0).abs() / 500.0 <= 1.0 / 64.0, "p50 {p50} us");
        let max = d.max().unwrap().as_nanos() as f64 / 1e3;
        assert!(
            (1000.0..=1000.0 * (1.0 + 1.0 / 32.0)).contains(&max),
            "max {max} us"
        );
        assert_eq!(d.min(), Some(Duration::from_micros(10)));
        assert_eq!(d.mean(), Some(Duration::from_nanos(505_000)));
        assert_eq!(h.since(&h).count(), 0);
        assert_eq!(h.since(&h).quantile(0.5), None);
    }

    #[test]
    fn counters_since_subtract_and_keep_the_current_backlog() {
        let mut a = Counters::default();
        a.enqueued.add(1000);
        a.dropped.aqm.add(1000);
        let mut b = a.clone();
        b.enqueued.add(1500);
        b.enqueued.add(1500);
        b.ce_marked.add(1500);
        b.dropped.overflow.add(1500);
        b.backlog.add(1500);
        let d = b.since(&a);
        assert_eq!(d.enqueued.packets, 2);
        assert_eq!(d.dropped.aqm.packets, 0);
        assert_eq!(d.dropped.overflow.bytes, Bytes(1500));
        assert_eq!(d.ce_marked.packets, 1);
        assert_eq!(d.backlog.packets, 1);
        let back: Counters = serde_json::from_value(serde_json::to_value(&b).unwrap()).unwrap();
        assert_eq!(back.dropped, b.dropped);
    }
}
