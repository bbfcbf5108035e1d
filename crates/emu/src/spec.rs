//! User-facing spellings of link parameters, following tc(8).
//!
//! * Rates ([`parse_rate`]) use tc's suffix table (iproute2 `tc/tc_util.c`, `get_rate`):
//!   `bit`, `kbit`, `mbit`, `gbit`, `tbit` are **bits** per second with SI multipliers (1000);
//!   `kibit`, `mibit`, ... are binary (1024); `bps`, `kbps`, `mbps`, `gbps`, `tbps` are
//!   **bytes** per second (so `1mbps` is 8 Mbit/s), `kibps`, ... their binary forms. A bare number
//!   is bits per second. Suffixes are case-insensitive, as in tc.
//! * Times ([`parse_time`]) take `s`/`sec`/`secs`, `ms`/`msec`/`msecs`, `us`/`usec`/`usecs`,
//!   `ns`; a bare number is microseconds, as in tc.
//! * Sizes ([`parse_size`]) follow tc's `get_size`: `b` or bare = bytes, `k`/`kb` = 1024 B,
//!   `m`/`mb` = 1024² B, `g`/`gb` = 1024³ B, `kbit`/`mbit`/`gbit` = that many bits (binary).
//! * Limits ([`parse_limit`]): `1000p` (also `pkt`, `pkts`, `packets`, or a bare number, which is
//!   tc's `limit PACKETS`) or a size with a unit (`64kb`, `1mb`, `1500b`).
//! * Percentages ([`parse_percent`]): `0.5%` or a bare `0.5`, both meaning 0.5 %, as netem reads them.
//!
//! Every error is a [`SpecError`] whose `Display` names the field and the value, e.g.
//! `--rate: "0mbit" must be greater than zero`. Parsers fill in a generic field name
//! (`rate`, `time`, ...); callers that know the flag rename it with [`SpecError::for_field`].

use bloatlab_units::{BitRate, Bytes};
use std::fmt;
use std::time::Duration;

/// What was wrong with a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The value is not a number (or has no digits before its unit).
    NotANumber,
    /// The unit suffix is not one this field accepts.
    UnknownUnit(String),
    /// Zero where a positive value is required.
    NotPositive,
    /// A negative value where only non-negative values make sense.
    Negative,
    /// Outside the accepted range (the text says which).
    OutOfRange(String),
    /// Not one of the known names (the text lists them).
    UnknownName(String),
    /// A flag or key needs a value and got none.
    MissingValue,
    /// Two settings contradict each other (the text says how).
    Conflict(String),
    /// A composite value (a schedule, a trace file) is malformed; the text says where
    /// (step, or file and line) and what.
    Invalid(String),
}

/// An invalid link specification: which field, which value, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct SpecError {
    /// The field as the user wrote it (`--rate`, `target`, ...).
    pub field: String,
    /// The offending value, verbatim.
    pub value: String,
    /// What is wrong.
    pub problem: Problem,
}

impl SpecError {
    /// A new error for `field` = `value`.
    pub fn new(field: impl Into<String>, value: impl Into<String>, problem: Problem) -> Self {
        SpecError {
            field: field.into(),
            value: value.into(),
            problem,
        }
    }

    /// The same error, attributed to `field` (e.g. the CLI flag `--rate`).
    pub fn for_field(mut self, field: impl Into<String>) -> Self {
        self.field = field.into();
        self
    }
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {:?} {}", self.field, self.value, self.problem)
    }
}

/// What is wrong with a value, as a predicate ("is not a number"): callers that attribute
/// the error to their own field (a CLI flag) use it as it is.
impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::NotANumber => write!(f, "is not a number"),
            Problem::UnknownUnit(expected) => {
                write!(f, "has an unknown unit (expected {expected})")
            }
            Problem::NotPositive => write!(f, "must be greater than zero"),
            Problem::Negative => write!(f, "must not be negative"),
            Problem::OutOfRange(why) => write!(f, "is out of range ({why})"),
            Problem::UnknownName(known) => write!(f, "is not known (expected one of {known})"),
            Problem::MissingValue => write!(f, "needs a value"),
            Problem::Conflict(why) => write!(f, "conflicts with another setting ({why})"),
            Problem::Invalid(why) => write!(f, "is not valid ({why})"),
        }
    }
}

/// Splits `"20.5mbit"` into `(20.5, "mbit")`. The number must be finite.
fn split_number<'a>(field: &str, s: &'a str) -> Result<(f64, &'a str), SpecError> {
    let t = s.trim();
    let end = t
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || ((c == '-' || c == '+') && i == 0)))
        .map_or(t.len(), |(i, _)| i);
    // Scientific notation (1e6) is not tc's and invites mistakes with units like "e"; refuse it
    // by treating 'e' as the start of a (then unknown) unit.
    let (num, unit) = t.split_at(end);
    let v: f64 = num
        .parse()
        .map_err(|_| SpecError::new(field, s, Problem::NotANumber))?;
    if !v.is_finite() {
        return Err(SpecError::new(field, s, Problem::NotANumber));
    }
    Ok((v, unit.trim()))
}

const RATE_UNITS: &[(&str, f64)] = &[
    ("", 1.0),
    ("bit", 1.0),
    ("kbit", 1e3),
    ("mbit", 1e6),
    ("gbit", 1e9),
    ("tbit", 1e12),
    ("kibit", 1024.0),
    ("mibit", 1024.0 * 1024.0),
    ("gibit", 1024.0 * 1024.0 * 1024.0),
    ("tibit", 1024.0 * 1024.0 * 1024.0 * 1024.0),
    ("bps", 8.0),
    ("kbps", 8e3),
    ("mbps", 8e6),
    ("gbps", 8e9),
    ("tbps", 8e12),
    ("kibps", 8.0 * 1024.0),
    ("mibps", 8.0 * 1024.0 * 1024.0),
    ("gibps", 8.0 * 1024.0 * 1024.0 * 1024.0),
    ("tibps", 8.0 * 1024.0 * 1024.0 * 1024.0 * 1024.0),
];

/// Parses a rate as tc does (`20mbit` = 20 000 000 bit/s; `1mbps` = 1 000 000 **bytes**/s).
/// Zero and negative rates are refused: an unlimited link is spelt by leaving the rate out.
pub fn parse_rate(s: &str) -> Result<BitRate, SpecError> {
    const FIELD: &str = "rate";
    let (v, unit) = split_number(FIELD, s)?;
    let scale = RATE_UNITS
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|&(_, k)| k)
        .ok_or_else(|| {
            SpecError::new(
                FIELD,
                s,
                Problem::UnknownUnit(
                    "bit, kbit, mbit, gbit, tbit, kibit.., bps, kbps, mbps, gbps (bytes/s)".into(),
                ),
            )
        })?;
    if v < 0.0 {
        return Err(SpecError::new(FIELD, s, Problem::Negative));
    }
    let bits = (v * scale).round();
    if bits < 1.0 {
        return Err(SpecError::new(FIELD, s, Problem::NotPositive));
    }
    if bits > u64::MAX as f64 {
        return Err(SpecError::new(
            FIELD,
            s,
            Problem::OutOfRange("too large".into()),
        ));
    }
    Ok(BitRate(bits as u64))
}

const TIME_UNITS: &[(&str, f64)] = &[
    ("", 1e3),
    ("s", 1e9),
    ("sec", 1e9),
    ("secs", 1e9),
    ("ms", 1e6),
    ("msec", 1e6),
    ("msecs", 1e6),
    ("us", 1e3),
    ("usec", 1e3),
    ("usecs", 1e3),
    ("ns", 1.0),
    ("nsec", 1.0),
    ("nsecs", 1.0),
];

/// Parses a non-negative time as tc does (`40ms`, `1.5s`, `250us`; a bare number is µs).
pub fn parse_time(s: &str) -> Result<Duration, SpecError> {
    const FIELD: &str = "time";
    let (v, unit) = split_number(FIELD, s)?;
    let scale = TIME_UNITS
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|&(_, k)| k)
        .ok_or_else(|| SpecError::new(FIELD, s, Problem::UnknownUnit("s, ms, us, ns".into())))?;
    if v < 0.0 {
        return Err(SpecError::new(FIELD, s, Problem::Negative));
    }
    let ns = (v * scale).round();
    // About 584 years; anything near it is a typo.
    if ns > 1e18 {
        return Err(SpecError::new(
            FIELD,
            s,
            Problem::OutOfRange("at most 10^9 s".into()),
        ));
    }
    Ok(Duration::from_nanos(ns as u64))
}

/// Formats a duration in the shortest exact tc spelling (`5ms`, `100us`, `1s`, `1500ns`), which
/// [`parse_time`] reads back to the same value.
pub fn format_time(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        "0s".into()
    } else if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// serde helper: a duration as its tc spelling (`"5ms"`), so JSON carries its unit.
pub fn ser_time<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_time(*d))
}

/// serde helper for `Option<Duration>`: `null` or `"5ms"`.
pub fn ser_opt_time<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&format_time(*d)),
        None => s.serialize_none(),
    }
}

/// Like [`parse_time`] but zero is refused (intervals, targets).
pub fn parse_positive_time(s: &str) -> Result<Duration, SpecError> {
    let d = parse_time(s)?;
    if d.is_zero() {
        return Err(SpecError::new("time", s, Problem::NotPositive));
    }
    Ok(d)
}

/// A probability in `[0, 1]`, parsed from a percentage.
#[derive(
    Debug, Clone, Copy, PartialEq, PartialOrd, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct Probability(f64);

impl Probability {
    /// Zero probability.
    pub const ZERO: Probability = Probability(0.0);
    /// Certainty.
    pub const ONE: Probability = Probability(1.0);

    /// `p` as a fraction in `[0, 1]`; `None` outside that range or for NaN.
    pub fn new(p: f64) -> Option<Probability> {
        (0.0..=1.0).contains(&p).then_some(Probability(p))
    }

    /// The fraction in `[0, 1]`.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl fmt::Display for Probability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}%", self.0 * 100.0)
    }
}

/// Parses a percentage (`0.5%`, or `0.5` meaning the same, as netem reads it) into a
/// [`Probability`]. Values outside 0..=100 % are refused.
pub fn parse_percent(s: &str) -> Result<Probability, SpecError> {
    const FIELD: &str = "percent";
    let (v, unit) = split_number(FIELD, s)?;
    if !(unit.is_empty() || unit == "%") {
        return Err(SpecError::new(FIELD, s, Problem::UnknownUnit("%".into())));
    }
    if v < 0.0 {
        return Err(SpecError::new(FIELD, s, Problem::Negative));
    }
    Probability::new(v / 100.0)
        .ok_or_else(|| SpecError::new(FIELD, s, Problem::OutOfRange("0% to 100%".into())))
}

const SIZE_UNITS: &[(&str, f64)] = &[
    ("", 1.0),
    ("b", 1.0),
    ("k", 1024.0),
    ("kb", 1024.0),
    ("m", 1024.0 * 1024.0),
    ("mb", 1024.0 * 1024.0),
    ("g", 1024.0 * 1024.0 * 1024.0),
    ("gb", 1024.0 * 1024.0 * 1024.0),
    ("kbit", 1024.0 / 8.0),
    ("mbit", 1024.0 * 1024.0 / 8.0),
    ("gbit", 1024.0 * 1024.0 * 1024.0 / 8.0),
];

/// Parses a size as tc's `get_size` does (`64kb` = 65 536 B; a bare number is bytes).
pub fn parse_size(s: &str) -> Result<Bytes, SpecError> {
    const FIELD: &str = "size";
    let (v, unit) = split_number(FIELD, s)?;
    let scale = SIZE_UNITS
        .iter()
        .find(|(u, _)| u.eq_ignore_ascii_case(unit))
        .map(|&(_, k)| k)
        .ok_or_else(|| {
            SpecError::new(
                FIELD,
                s,
                Problem::UnknownUnit("b, kb, mb, gb, kbit, mbit, gbit".into()),
            )
        })?;
    if v < 0.0 {
        return Err(SpecError::new(FIELD, s, Problem::Negative));
    }
    let b = (v * scale).round();
    if b > 1e15 {
        return Err(SpecError::new(
            FIELD,
            s,
            Problem::OutOfRange("at most 10^15 bytes".into()),
        ));
    }
    Ok(Bytes(b as u64))
}

/// A queue limit: in packets (tc's `limit N`) or in bytes (bfifo's `limit SIZE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// At most this many packets queued.
    Packets(u32),
    /// At most this many bytes (IP packet lengths) queued.
    Bytes(Bytes),
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limit::Packets(n) => write!(f, "{n}p"),
            Limit::Bytes(b) => write!(f, "{}b", b.0),
        }
    }
}

/// The largest queue limit in packets: the emulator queues in memory, and a
/// million full-size packets is already 1.5 GB (a 10 Gbit/s link's 1.2 s).
pub const MAX_LIMIT_PACKETS: u32 = 1_000_000;
/// The largest queue limit in bytes (1 GiB).
pub const MAX_LIMIT_BYTES: Bytes = Bytes(1 << 30);

/// Parses a limit: `1000p`/`1000pkts`/`1000` (packets) or `64kb`/`1mb`/`1500b` (bytes).
/// A zero limit is refused (the queue could never hold a packet).
pub fn parse_limit(s: &str) -> Result<Limit, SpecError> {
    const FIELD: &str = "limit";
    let (v, unit) = split_number(FIELD, s)?;
    let is_packets = unit.is_empty()
        || ["p", "pkt", "pkts", "packet", "packets"]
            .iter()
            .any(|u| u.eq_ignore_ascii_case(unit));
    if is_packets {
        if v < 0.0 {
            return Err(SpecError::new(FIELD, s, Problem::Negative));
        }
        if v.fract() != 0.0 {
            return Err(SpecError::new(
                FIELD,
                s,
                Problem::OutOfRange("a whole number of packets".into()),
            ));
        }
        if v < 1.0 {
            return Err(SpecError::new(FIELD, s, Problem::NotPositive));
        }
        if v > f64::from(MAX_LIMIT_PACKETS) {
            return Err(SpecError::new(
                FIELD,
                s,
                Problem::OutOfRange(format!("at most {MAX_LIMIT_PACKETS} packets")),
            ));
        }
        return Ok(Limit::Packets(v as u32));
    }
    let b = parse_size(s).map_err(|e| {
        let problem = match e.problem {
            Problem::UnknownUnit(_) => Problem::UnknownUnit("p (packets), b, kb, mb, gb".into()),
            p => p,
        };
        SpecError::new(FIELD, s, problem)
    })?;
    if b.0 == 0 {
        return Err(SpecError::new(FIELD, s, Problem::NotPositive));
    }
    if b > MAX_LIMIT_BYTES {
        return Err(SpecError::new(
            FIELD,
            s,
            Problem::OutOfRange(format!("at most {} bytes (1gb)", MAX_LIMIT_BYTES.0)),
        ));
    }
    Ok(Limit::Bytes(b))
}

/// Parses a whole number within `range` (flows, quantum, ...).
pub fn parse_count(
    field: &str,
    s: &str,
    range: std::ops::RangeInclusive<u64>,
) -> Result<u64, SpecError> {
    let v: u64 = s.trim().parse().map_err(|_| {
        let problem = if s.trim().starts_with('-') {
            Problem::Negative
        } else {
            Problem::NotANumber
        };
        SpecError::new(field, s, problem)
    })?;
    if !range.contains(&v) {
        return Err(SpecError::new(
            field,
            s,
            Problem::OutOfRange(format!("{} to {}", range.start(), range.end())),
        ));
    }
    Ok(v)
}

/// Parses a signed whole number of bytes within `range` (cake's `overhead`, which may be negative).
pub fn parse_signed(
    field: &str,
    s: &str,
    range: std::ops::RangeInclusive<i64>,
) -> Result<i64, SpecError> {
    let v: i64 = s
        .trim()
        .parse()
        .map_err(|_| SpecError::new(field, s, Problem::NotANumber))?;
    if !range.contains(&v) {
        return Err(SpecError::new(
            field,
            s,
            Problem::OutOfRange(format!("{} to {}", range.start(), range.end())),
        ));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_follow_tc_bits_and_bytes() {
        assert_eq!(parse_rate("20mbit").unwrap(), BitRate(20_000_000));
        assert_eq!(parse_rate("20Mbit").unwrap(), BitRate(20_000_000));
        assert_eq!(parse_rate("1.5gbit").unwrap(), BitRate(1_500_000_000));
        assert_eq!(parse_rate("100kbit").unwrap(), BitRate(100_000));
        assert_eq!(parse_rate("512").unwrap(), BitRate(512));
        assert_eq!(parse_rate("512bit").unwrap(), BitRate(512));
        // bps family is bytes per second.
        assert_eq!(parse_rate("1mbps").unwrap(), BitRate(8_000_000));
        assert_eq!(parse_rate("125kbps").unwrap(), BitRate(1_000_000));
        assert_eq!(parse_rate("10bps").unwrap(), BitRate(80));
        // Binary forms.
        assert_eq!(parse_rate("1kibit").unwrap(), BitRate(1024));
        assert_eq!(parse_rate("1Mibit").unwrap(), BitRate(1_048_576));
        assert_eq!(parse_rate("1kibps").unwrap(), BitRate(8192));
    }

    #[test]
    fn rate_errors_name_field_and_value() {
        let e = parse_rate("0mbit").unwrap_err().for_field("--rate");
        assert_eq!(
            e.to_string(),
            r#"--rate: "0mbit" must be greater than zero"#
        );
        let e = parse_rate("20mbits").unwrap_err();
        assert!(matches!(e.problem, Problem::UnknownUnit(_)));
        assert!(
            e.to_string()
                .starts_with(r#"rate: "20mbits" has an unknown unit"#),
            "{e}"
        );
        assert_eq!(parse_rate("-5mbit").unwrap_err().problem, Problem::Negative);
        assert_eq!(parse_rate("mbit").unwrap_err().problem, Problem::NotANumber);
        assert_eq!(parse_rate("").unwrap_err().problem, Problem::NotANumber);
        assert_eq!(
            parse_rate("1e6bit").unwrap_err().problem,
            Problem::UnknownUnit(
                "bit, kbit, mbit, gbit, tbit, kibit.., bps, kbps, mbps, gbps (bytes/s)".into()
            )
        );
        assert_eq!(
            parse_rate("0.1bit").unwrap_err().problem,
            Problem::NotPositive
        );
    }

    #[test]
    fn times_follow_tc() {
        assert_eq!(parse_time("40ms").unwrap(), Duration::from_millis(40));
        assert_eq!(parse_time("40msec").unwrap(), Duration::from_millis(40));
        assert_eq!(parse_time("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_time("250us").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_time("250").unwrap(), Duration::from_micros(250));
        assert_eq!(parse_time("0").unwrap(), Duration::ZERO);
        let e = parse_time("-5ms").unwrap_err().for_field("--delay");
        assert_eq!(e.to_string(), r#"--delay: "-5ms" must not be negative"#);
        assert!(matches!(
            parse_time("5 minutes").unwrap_err().problem,
            Problem::UnknownUnit(_)
        ));
        assert_eq!(
            parse_positive_time("0ms").unwrap_err().problem,
            Problem::NotPositive
        );
    }

    #[test]
    fn percents_limits_sizes() {
        assert_eq!(parse_percent("0.5%").unwrap().get(), 0.005);
        assert_eq!(parse_percent("0.5").unwrap().get(), 0.005);
        assert_eq!(parse_percent("100%").unwrap().get(), 1.0);
        assert!(matches!(
            parse_percent("101%").unwrap_err().problem,
            Problem::OutOfRange(_)
        ));
        assert_eq!(parse_percent("-1%").unwrap_err().problem, Problem::Negative);
        assert_eq!(parse_size("64kb").unwrap(), Bytes(65_536));
        assert_eq!(parse_size("1mb").unwrap(), Bytes(1_048_576));
        assert_eq!(parse_size("1500").unwrap(), Bytes(1500));
        assert_eq!(parse_limit("1000p").unwrap(), Limit::Packets(1000));
        assert_eq!(parse_limit("1000").unwrap(), Limit::Packets(1000));
        assert_eq!(parse_limit("64kb").unwrap(), Limit::Bytes(Bytes(65_536)));
        assert_eq!(parse_limit("1mb").unwrap(), Limit::Bytes(Bytes(1_048_576)));
        assert_eq!(parse_limit("1500b").unwrap(), Limit::Bytes(Bytes(1500)));
        assert_eq!(parse_limit("0p").unwrap_err().problem, Problem::NotPositive);
        // Queue memory is bounded: the issue's 4294967295p and 10^15 bytes are refused.
        assert_eq!(parse_limit("1000000p").unwrap(), Limit::Packets(1_000_000));
        assert!(matches!(
            parse_limit("1000001p").unwrap_err().problem,
            Problem::OutOfRange(_)
        ));
        assert!(matches!(
            parse_limit("4294967295p").unwrap_err().problem,
            Problem::OutOfRange(_)
        ));
        assert_eq!(parse_limit("1gb").unwrap(), Limit::Bytes(MAX_LIMIT_BYTES));
        let e = parse_limit("1000000000000000b").unwrap_err();
        assert!(matches!(e.problem, Problem::OutOfRange(_)), "{e:?}");
        assert!(
            e.for_field("--limit")
                .to_string()
                .contains("at most 1073741824 bytes")
        );
        assert!(matches!(
            parse_limit("1.5p").unwrap_err().problem,
            Problem::OutOfRange(_)
        ));
        let e = parse_limit("10 furlongs").unwrap_err().for_field("--limit");
        assert!(
            e.to_string()
                .starts_with(r#"--limit: "10 furlongs" has an unknown unit"#),
            "{e}"
        );
    }

    #[test]
    fn counts_and_signed() {
        assert_eq!(parse_count("flows", "1024", 1..=65536).unwrap(), 1024);
        assert_eq!(
            parse_count("flows", "-1", 1..=65536).unwrap_err().problem,
            Problem::Negative
        );
        assert!(matches!(
            parse_count("flows", "0", 1..=65536).unwrap_err().problem,
            Problem::OutOfRange(_)
        ));
        assert_eq!(parse_signed("overhead", "-4", -64..=256).unwrap(), -4);
    }
}
