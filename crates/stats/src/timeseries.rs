//! Helpers for plotting honestly.
//!
//! * Buckets with no data are `None`, never interpolated and never zero, so a plot can
//!   leave a gap instead of drawing a line across missing samples (crusader #41, flent
//!   #265).
//! * [`time_weighted_mean`] averages a piecewise-constant series over the time it
//!   covers. It is the number to print next to a throughput plot; the *peak of a moving
//!   average* (crusader's summary) is not, because it depends on the window and picks
//!   the luckiest moment.

use std::time::Duration;

use bloatlab_units::{BitRate, Bytes};

use crate::latency::LatencySeries;
use crate::quantile::mean;
use crate::throughput::{FlowSeries, prorated};

/// Most buckets a single call will produce (guards against a nanosecond width over an
/// hour-long run allocating gigabytes).
pub const MAX_BUCKETS: u64 = 10_000_000;

/// Why a bucket grid could not be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BucketError {
    /// The bucket width was zero.
    #[error("bucket width must be positive")]
    ZeroWidth,
    /// `end` was not after `start`.
    #[error("empty range: start {start:?}, end {end:?}")]
    EmptyRange {
        /// Range start.
        start: Duration,
        /// Range end.
        end: Duration,
    },
    /// More than [`MAX_BUCKETS`] buckets.
    #[error("{count} buckets requested, at most {MAX_BUCKETS} allowed")]
    TooMany {
        /// How many the range and width would need.
        count: u128,
    },
}

/// The bucket starts for `[start, end)` in steps of `width`; the last bucket may extend
/// past `end` (it is still `width` long).
pub fn bucket_starts(
    start: Duration,
    end: Duration,
    width: Duration,
) -> Result<Vec<Duration>, BucketError> {
    if width.is_zero() {
        return Err(BucketError::ZeroWidth);
    }
    if end <= start {
        return Err(BucketError::EmptyRange { start, end });
    }
    let count = (end - start).as_nanos().div_ceil(width.as_nanos());
    if count > u128::from(MAX_BUCKETS) {
        return Err(BucketError::TooMany { count });
    }
    // count <= MAX_BUCKETS, and every start is below `end`, so no overflow.
    Ok((0..count as u32).map(|i| start + width * i).collect())
}

/// One bucket of a latency series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LatencyBucket {
    /// Bucket start (offset from the run start).
    pub start: Duration,
    /// Mean delay of the probes sent in the bucket that arrived; `None` if none did
    /// (no probe sent, or all lost): draw a gap.
    pub mean: Option<Duration>,
    /// Largest such delay.
    pub max: Option<Duration>,
    /// Probes sent in the bucket.
    pub sent: u32,
    /// Of those, lost: draw a loss marker.
    pub lost: u32,
}

/// Buckets a latency series by send time over `[start, end)`.
pub fn bucketize_latency(
    series: &LatencySeries,
    start: Duration,
    end: Duration,
    width: Duration,
) -> Result<Vec<LatencyBucket>, BucketError> {
    let starts = bucket_starts(start, end, width)?;
    let mut delays: Vec<Vec<Duration>> = vec![Vec::new(); starts.len()];
    let mut buckets: Vec<LatencyBucket> = starts
        .iter()
        .map(|&s| LatencyBucket {
            start: s,
            mean: None,
            max: None,
            sent: 0,
            lost: 0,
        })
        .collect();
    for s in &series.samples {
        if s.sent < start || s.sent >= end {
            continue;
        }
        // Index < count because sent < end; fits usize because count <= MAX_BUCKETS.
        let i = ((s.sent - start).as_nanos() / width.as_nanos()) as usize;
        let b = &mut buckets[i];
        b.sent = b.sent.saturating_add(1);
        match s.delay() {
            Some(d) => delays[i].push(d),
            None => b.lost = b.lost.saturating_add(1),
        }
    }
    for (b, d) in buckets.iter_mut().zip(&delays) {
        b.mean = mean(d);
        b.max = d.iter().max().copied();
    }
    Ok(buckets)
}

/// One bucket of a throughput series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateBucket {
    /// Bucket start.
    pub start: Duration,
    /// Bytes moved within the bucket divided by the time in the bucket that samples
    /// cover; `None` if no sample covers any of it.
    pub rate: Option<BitRate>,
}

/// Buckets one flow's transfer samples over `[start, end)`.
pub fn bucketize_flow(
    flow: &FlowSeries,
    start: Duration,
    end: Duration,
    width: Duration,
) -> Result<Vec<RateBucket>, BucketError> {
    let starts = bucket_starts(start, end, width)?;
    Ok(starts
        .iter()
        .map(|&a| {
            let b = a + width;
            let (mut bytes, mut covered) = (Bytes(0), Duration::ZERO);
            for s in &flow.samples {
                let (by, c) = prorated(s, a, b);
                bytes = bytes.saturating_add(by);
                covered = covered.saturating_add(c);
            }
            let covered = covered.min(width);
            RateBucket {
                start: a,
                rate: (!covered.is_zero()).then(|| BitRate::from_transfer(bytes, covered)),
            }
        })
        .collect())
}

/// Adds several flows' buckets (same grid) into a per-direction or total series. A
/// bucket is `None` only if it is `None` in every input; otherwise missing inputs are
/// left out of the sum, and `complete` says whether all were present.
pub fn sum_rate_buckets(series: &[Vec<RateBucket>]) -> Vec<(RateBucket, bool)> {
    let len = series.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .map(|i| {
            let cells: Vec<Option<&RateBucket>> = series.iter().map(|s| s.get(i)).collect();
            let start = cells
                .iter()
                .flatten()
                .map(|b| b.start)
                .next()
                .unwrap_or_default();
            let present: Vec<BitRate> = cells.iter().flatten().filter_map(|b| b.rate).collect();
            let complete = present.len() == series.len();
            let rate = (!present.is_empty())
                .then(|| BitRate(present.iter().fold(0u64, |a, r| a.saturating_add(r.0))));
            (RateBucket { start, rate }, complete)
        })
        .collect()
}

/// A constant value over `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Start.
    pub start: Duration,
    /// End; an `end` before `start` gives the segment no weight.
    pub end: Duration,
    /// The value (any unit; NaN segments are skipped).
    pub value: f64,
}

/// `Σ value·length / Σ length` over the segments (gaps between them carry no weight).
/// `None` if no segment has positive length and a non-NaN value.
pub fn time_weighted_mean(segments: &[Segment]) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for s in segments {
        let w = s.end.saturating_sub(s.start).as_secs_f64();
        if w > 0.0 && !s.value.is_nan() {
            num += s.value * w;
            den += w;
        }
    }
    (den > 0.0).then(|| num / den)
}

/// The time-weighted mean rate of a bucketed throughput series, ignoring `None`
/// buckets (each bucket weighs `width`).
pub fn mean_rate(buckets: &[RateBucket], width: Duration) -> Option<BitRate> {
    let segs: Vec<Segment> = buckets
        .iter()
        .filter_map(|b| {
            b.rate.map(|r| Segment {
                start: b.start,
                end: b.start + width,
                value: r.bits_per_sec_f64(),
            })
        })
        .collect();
    time_weighted_mean(&segs).map(|v| BitRate(v.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::latency::{DelayKind, ProbeSample};
    use crate::throughput::{Direction, TransferSample};

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn latency_buckets_leave_gaps_open() {
        let series = LatencySeries {
            name: "p".into(),
            kind: DelayKind::RoundTrip,
            samples: vec![
                ProbeSample::received(ms(10), ms(20)),
                ProbeSample::received(ms(90), ms(40)),
                // bucket [100, 200): nothing sent
                ProbeSample::lost(ms(210)), // bucket [200, 300): all lost
                ProbeSample::received(ms(399), ms(7)),
                ProbeSample::received(ms(400), ms(99)), // at `end`: excluded
            ],
        };
        let b = bucketize_latency(&series, Duration::ZERO, ms(400), ms(100)).unwrap();
        assert_eq!(b.len(), 4);
        assert_eq!(
            (b[0].mean, b[0].max, b[0].sent),
            (Some(ms(30)), Some(ms(40)), 2)
        );
        assert_eq!((b[1].mean, b[1].sent, b[1].lost), (None, 0, 0));
        assert_eq!((b[2].mean, b[2].sent, b[2].lost), (None, 1, 1));
        assert_eq!(b[3].mean, Some(ms(7)));
    }

    #[test]
    fn bucket_errors() {
        assert_eq!(
            bucket_starts(ms(0), ms(10), Duration::ZERO),
            Err(BucketError::ZeroWidth)
        );
        assert!(matches!(
            bucket_starts(ms(10), ms(10), ms(1)),
            Err(BucketError::EmptyRange { .. })
        ));
        assert!(matches!(
            bucket_starts(
                Duration::ZERO,
                Duration::from_secs(3600),
                Duration::from_nanos(1)
            ),
            Err(BucketError::TooMany { .. })
        ));
        // A partial last bucket still gets a slot.
        assert_eq!(
            bucket_starts(ms(0), ms(250), ms(100)).unwrap(),
            vec![ms(0), ms(100), ms(200)]
        );
    }

    #[test]
    fn flow_buckets_and_time_weighted_mean() {
        // 1 s of 1 MB, then nothing reported for 1 s, then 1 s of 3 MB.
        let flow = FlowSeries {
            name: "d".into(),
            direction: Direction::Down,
            samples: vec![
                TransferSample {
                    start: ms(0),
                    end: ms(1000),
                    bytes: Bytes(1_000_000),
                },
                TransferSample {
                    start: ms(2000),
                    end: ms(3000),
                    bytes: Bytes(3_000_000),
                },
            ],
        };
        let w = ms(500);
        let b = bucketize_flow(&flow, Duration::ZERO, ms(3000), w).unwrap();
        let rates: Vec<Option<u64>> = b.iter().map(|x| x.rate.map(|r| r.0)).collect();
        assert_eq!(
            rates,
            [
                Some(8_000_000),
                Some(8_000_000),
                None,
                None,
                Some(24_000_000),
                Some(24_000_000)
            ]
        );
        // The gap is not averaged in as zero: (8 + 24) / 2 = 16 Mbit/s.
        assert_eq!(mean_rate(&b, w), Some(BitRate(16_000_000)));
        let sum = sum_rate_buckets(&[b.clone(), b]);
        assert_eq!(sum[0].0.rate, Some(BitRate(16_000_000)));
        assert!(sum[0].1);
        assert_eq!(sum[2].0.rate, None);
    }

    #[test]
    fn time_weighted_mean_is_not_peak_of_moving_average() {
        // 9 s at 10, 1 s at 100: time-weighted mean 19, while a 1 s moving average peaks at 100.
        let segs = [
            Segment {
                start: ms(0),
                end: ms(9000),
                value: 10.0,
            },
            Segment {
                start: ms(9000),
                end: ms(10000),
                value: 100.0,
            },
            Segment {
                start: ms(10000),
                end: ms(11000),
                value: f64::NAN,
            },
            Segment {
                start: ms(5),
                end: ms(1),
                value: 1e9,
            },
        ];
        assert!((time_weighted_mean(&segs).unwrap() - 19.0).abs() < 1e-9);
        assert_eq!(time_weighted_mean(&[]), None);
    }
}
