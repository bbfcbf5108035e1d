//! Choosing the time grid for time series charts.
//!
//! A chart shows at most [`MAX_POINTS`] buckets across the run. For latency, a bucket is
//! never narrower than 1.5 probe intervals: narrower buckets would leave some empty
//! between two probes sent on time and draw gaps where nothing is missing. For
//! throughput, a bucket is never narrower than the typical transfer sample.

use std::time::Duration;

use bloatlab_stats::{FlowSeries, LatencySeries};

/// Most buckets across one chart.
pub const MAX_POINTS: u32 = 600;

/// The smallest bucket we draw.
const MIN_WIDTH: Duration = Duration::from_millis(1);

fn median(mut v: Vec<Duration>) -> Option<Duration> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

/// Median gap between consecutive probes (by send time) of a series.
pub fn probe_interval(series: &LatencySeries) -> Option<Duration> {
    let mut t: Vec<Duration> = series.samples.iter().map(|s| s.sent).collect();
    t.sort_unstable();
    median(
        t.windows(2)
            .map(|w| w[1] - w[0])
            .filter(|d| !d.is_zero())
            .collect(),
    )
}

/// Median length of a flow's transfer samples.
pub fn sample_length(flow: &FlowSeries) -> Option<Duration> {
    median(
        flow.samples
            .iter()
            .map(|s| s.end.saturating_sub(s.start))
            .filter(|d| !d.is_zero())
            .collect(),
    )
}

/// The bucket width for a run of length `span` whose data come every `natural`
/// (scaled by `factor`).
pub fn width(natural: Option<Duration>, factor: f64, span: Duration) -> Duration {
    let by_span = span / MAX_POINTS;
    let by_data = natural.map_or(Duration::ZERO, |n| n.mul_f64(factor));
    by_span.max(by_data).max(MIN_WIDTH)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_stats::{DelayKind, ProbeSample};

    #[test]
    fn latency_buckets_hold_at_least_one_probe_interval() {
        let ms = Duration::from_millis;
        let series = LatencySeries {
            name: "p".into(),
            kind: DelayKind::RoundTrip,
            samples: (0..100).map(|i| ProbeSample::lost(ms(10 * i))).collect(),
        };
        assert_eq!(probe_interval(&series), Some(ms(10)));
        // 1 s at 100 Hz: 15 ms buckets, not 1.7 ms.
        assert_eq!(width(probe_interval(&series), 1.5, ms(1000)), ms(15));
        // 70 s: 600 buckets of 116.67 ms.
        assert_eq!(
            width(Some(ms(10)), 1.5, Duration::from_secs(70)),
            Duration::from_nanos(116_666_666)
        );
        assert_eq!(width(None, 1.5, Duration::ZERO), ms(1));
    }
}
