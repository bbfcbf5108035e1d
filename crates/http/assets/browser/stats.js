// The page's statistics, with the definitions of bloatlab's Rust statistics
// (crate bloatlab-stats), on round trips in whole nanoseconds so that the
// arithmetic matches theirs exactly:
//
// * quantile: linear interpolation between closest ranks (Hyndman and Fan
//   type 7, numpy's default), as quantile::quantile_sorted: h = (n - 1) q,
//   Q = x[floor h] + round((h - floor h) (x[floor h + 1] - x[floor h])).
// * mean: rounded to the nearest nanosecond, as quantile::mean.
// * probe RPM: 60 s over the trimmed mean that drops the largest
//   floor(trim n) samples, as rpm::Rpm::from_loaded_rtts.
// * induced latency: loaded median minus idle median, zero if it fell, as
//   grade::InducedLatency::increase.
// * the grade of a run: the mean (truncated to whole nanoseconds) of the
//   loaded phases' induced latencies, looked up in the grade table the server
//   sends (grade::BLOAT_GRADES: a grade applies strictly below its bound), as
//   `bloatlab test` grades (suite::run).
//
// A test in crates/cli/tests/it/browser_page.rs runs these functions in a
// browser and compares them with the Rust ones on the same samples.
'use strict';

(function (global) {
  const NS_PER_MS = 1e6;

  function sortedCopy(xs) {
    return xs.slice().sort(function (a, b) { return a - b; });
  }

  // The q-quantile of integer nanoseconds in any order; null without samples.
  function quantile(xs, q) {
    if (!(q >= 0 && q <= 1)) {
      throw new RangeError('quantile ' + q + ' is not in [0, 1]');
    }
    if (xs.length === 0) {
      return null;
    }
    const s = sortedCopy(xs);
    const h = (s.length - 1) * q;
    const lo = Math.floor(h);
    const frac = h - lo;
    const base = s[lo];
    if (lo + 1 >= s.length) {
      return base;
    }
    const gap = s[lo + 1] - base;
    return base + Math.min(gap, Math.round(frac * gap));
  }

  // The mean rounded to the nearest nanosecond; null without samples.
  function mean(xs) {
    if (xs.length === 0) {
      return null;
    }
    let total = 0;
    for (const x of xs) {
      total += x;
    }
    return Math.floor((total + Math.floor(xs.length / 2)) / xs.length);
  }

  // The single-sided trimmed mean: the largest floor(trim n) dropped.
  function trimmedMean(xs, trim) {
    if (!(trim >= 0 && trim < 1) || xs.length === 0) {
      return null;
    }
    const s = sortedCopy(xs);
    const drop = Math.floor(trim * s.length);
    return mean(s.slice(0, s.length - drop));
  }

  // Round trips per minute of a trimmed-mean round trip; null for none or 0.
  function probeRpm(xs, trim) {
    const tm = trimmedMean(xs, trim);
    return tm ? 60e9 / tm : null;
  }

  // Loaded median minus idle median, saturating at zero; null if either is.
  function induced(idleMedian, loadedMedian) {
    if (idleMedian === null || loadedMedian === null) {
      return null;
    }
    return Math.max(0, loadedMedian - idleMedian);
  }

  // The grade of an increase in ns on the server's table
  // ({below_ms: [[grade, bound_ms], ...], otherwise: grade}).
  function grade(increaseNs, table) {
    for (const row of table.below_ms) {
      if (increaseNs < Math.round(row[1] * NS_PER_MS)) {
        return row[0];
      }
    }
    return table.otherwise;
  }

  // The grade of a run: idle round trips and one array of round trips per
  // loaded phase. bloatlab's rule (bloatlab_stats::grade): the grade of the
  // worst loaded phase, the one whose median rose most over the idle median
  // (the first of equals), never a mean over phases. `phase` is its index in
  // loadedPhases. Null when there is no idle median or no loaded one.
  function gradeRun(idle, loadedPhases, table) {
    const idleMedian = quantile(idle, 0.5);
    let worst = null;
    loadedPhases.forEach(function (xs, i) {
      const inc = induced(idleMedian, quantile(xs, 0.5));
      if (inc !== null && (worst === null || inc > worst.increase)) {
        worst = { increase: inc, phase: i };
      }
    });
    if (worst === null) {
      return null;
    }
    return { increase: worst.increase, phase: worst.phase, grade: grade(worst.increase, table) };
  }

  global.bloatlabStats = {
    quantile: quantile,
    mean: mean,
    trimmedMean: trimmedMean,
    probeRpm: probeRpm,
    induced: induced,
    grade: grade,
    gradeRun: gradeRun,
  };
})(window);
