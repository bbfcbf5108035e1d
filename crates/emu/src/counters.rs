//! Per-direction counters and the sojourn-time histogram.
//!
//! Conservation, checked by the property tests after every operation:
//! `enqueued = dropped.total() + dequeued + backlog + in_transit`, in packets and in bytes.

use crate::spec::Limit;
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

/// Sub-buckets per power of two: values are kept to within 1/64 (1.6 %) of their true value.
const SUB_BITS: u32 = 6;
const SUB: u64 = 1 << SUB_BITS;
/// Values at or above 2^41 ns (about 37 minutes) land in the last bucket.
const MAX_EXP: u32 = 41;
const BUCKETS: usize = ((MAX_EXP - SUB_BITS + 1) as usize) * SUB as usize + SUB as usize;

/// A log-linear histogram of durations (HDR-style: exact below 128 ns, then 64 sub-buckets per
/// power of two). Recording is O(1) and allocation-free; the bucket array is allocated once.
#[derive(Clone)]
pub struct SojournHistogram {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
}

impl Default for SojournHistogram {
    fn default() -> Self {
        SojournHistogram {
            buckets: vec![0; BUCKETS],
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }
}

fn bucket_of(ns: u64) -> usize {
    let v = ns.min((1u64 << MAX_EXP) - 1);
    if v < 2 * SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // v in [2^e, 2^(e+1)), e >= SUB_BITS + 1
    let shift = e - SUB_BITS;
    (shift as usize) * SUB as usize + (v >> shift) as usize
}

/// The lowest value and the width of bucket `i`.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB {
        return (i, 1);
    }
    let shift = i / SUB - 1;
    let m = i - shift * SUB;
    (m << shift, 1 << shift)
}

impl SojournHistogram {
    /// Records one sample.
    pub fn record(&mut self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(ns)] += 1;
        self.count += 1;
        self.sum_ns += u128::from(ns);
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Smallest sample.
    pub fn min(&self) -> Option<Duration> {
        (self.count > 0).then(|| Duration::from_nanos(self.min_ns))
    }

    /// Largest sample.
    pub fn max(&self) -> Option<Duration> {
        (self.count > 0).then(|| Duration::from_nanos(self.max_ns))
    }

    /// Arithmetic mean (exact, not bucketed).
    pub fn mean(&self) -> Option<Duration> {
        (self.count > 0)
            .then(|| Duration::from_nanos((self.sum_ns / u128::from(self.count)) as u64))
    }

    /// The nearest-rank `q`-quantile (`q` in 0..=1): the smallest sample such that at least
    /// `ceil(q·n)` samples are at or below it, reported as the middle of its bucket (within 1.6 %),
    /// clamped to the exact min and max.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        if rank >= self.count {
            return self.max();
        }
        if rank == 1 {
            return self.min();
        }
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let (low, width) = bucket_range(i);
                let mid = low + (width - 1) / 2;
                return Some(Duration::from_nanos(mid.clamp(self.min_ns, self.max_ns)));
            }
        }
        self.max()
    }

    /// Adds another histogram's samples.
    pub fn merge(&mut self, o: &SojournHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
        self.count += o.count;
        self.sum_ns += o.sum_ns;
        self.min_ns = self.min_ns.min(o.min_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
    }

    /// The samples recorded after the snapshot `earlier` of this histogram: bucket counts
    /// subtracted. The exact minimum and maximum of those samples are not known; they are
    /// taken as the edges of the lowest and highest non-empty buckets, within the whole
    /// histogram's exact minimum and maximum (so within 1.6 %, and exact when the extreme
    /// sample is the newest).
    pub fn since(&self, earlier: &SojournHistogram) -> SojournHistogram {
        let mut out = SojournHistogram::default();
        for (i, (a, b)) in self.buckets.iter().zip(&earlier.buckets).enumerate() {
            let n = a.saturating_sub(*b);
            if n == 0 {
                continue;
            }
            out.buckets[i] = n;
            out.count += n;
            let (low, width) = bucket_range(i);
            out.min_ns = out.min_ns.min(low.max(self.min_ns));
            out.max_ns = out.max_ns.max((low + width - 1).min(self.max_ns));
        }
        out.sum_ns = self.sum_ns.saturating_sub(earlier.sum_ns);
        out
    }

    /// The summary that is serialized.
    pub fn summary(&self) -> SojournSummary {
        let ns = |d: Option<Duration>| d.map(|d| d.as_nanos() as u64);
        SojournSummary {
            count: self.count,
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

/// The serialized form: the summary plus the non-empty buckets as `[index, count]` pairs
/// and the exact sum, so a reader can rebuild the histogram (and subtract two snapshots).
#[derive(Serialize, Deserialize)]
struct SojournWire {
    #[serde(flatten)]
    summary: SojournSummary,
    /// u64, not u128: serde cannot buffer u128 inside a flattened struct (584 years of
    /// summed sojourn fit; more saturates).
    #[serde(default)]
    sum_ns: u64,
    #[serde(default)]
    buckets: Vec<(u32, u64)>,
}

impl Serialize for SojournHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        SojournWire {
            summary: self.summary(),
            sum_ns: u64::try_from(self.sum_ns).unwrap_or(u64::MAX),
            buckets: self
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(i, n)| (i as u32, *n))
                .collect(),
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for SojournHistogram {
    /// Reads what [`Serialize`] wrote; bucket indices out of range are an error, counts that
    /// disagree with `count` are taken from the buckets.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = SojournWire::deserialize(d)?;
        let mut h = SojournHistogram::default();
        for (i, n) in w.buckets {
            let slot = h.buckets.get_mut(i as usize).ok_or_else(|| {
                serde::de::Error::custom(format!("sojourn bucket {i} out of range"))
            })?;
            *slot += n;
            h.count += n;
        }
        if h.count > 0 {
            h.min_ns = w.summary.min_ns.unwrap_or(0);
            h.max_ns = w.summary.max_ns.unwrap_or(u64::MAX);
        }
        h.sum_ns = u128::from(w.sum_ns);
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_cover_values() {
        let mut last = 0;
        for v in (0..100_000u64).chain([1 << 20, (1 << 30) + 12345, u64::MAX / 2]) {
            let i = bucket_of(v);
            assert!(i < BUCKETS);
            let (low, width) = bucket_range(i);
            let vv = v.min((1 << MAX_EXP) - 1);
            assert!(
                low <= vv && vv < low + width,
                "v={v} i={i} low={low} width={width}"
            );
            assert!(i >= last || v > 100_000);
            last = i;
            // Relative width at most 1/64.
            assert!(width == 1 || (width as f64) / (low as f64) <= 1.0 / 64.0 + 1e-12);
        }
    }

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
        assert!((max - 1000.0).abs() / 1000.0 <= 1.0 / 64.0, "max {max} us");
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
