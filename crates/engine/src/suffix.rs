//! iperf 2's number spellings: `-l 128K`, `-n 100M`, `-b 10m`, `-S 0x10`.
//!
//! Checked against the real iperf 2.1.8 binary: an **uppercase** suffix is
//! 1024-based and a **lowercase** one is 1000-based, for byte sizes *and* for
//! `-b` rates (`-b 1M` paces 1470-byte datagrams every 11215 us = 1 048 576
//! bit/s; `-b 1m` every 11760 us = 1 000 000 bit/s; `-l 1K` sends 1024-byte
//! datagrams, `-l 1k` 1000-byte ones).

use bloatlab_units::{BitRate, Bytes};
use std::time::Duration;

/// Why a value was rejected; the CLI adds the option name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SuffixError {
    #[error("`{0}` is not a number (expected e.g. 128K, 10m, 1.5G)")]
    NotANumber(String),
    #[error("`{0}` is not a duration (expected seconds, e.g. 10, 2.5, 10s, 500ms)")]
    NotADuration(String),
    #[error("`{0}` is negative")]
    Negative(String),
    #[error("`{0}` is too large")]
    TooLarge(String),
    #[error("`{0}` is not a TOS value (expected 0-255, 0x.., or a DSCP name like ef, af41, cs1)")]
    BadTos(String),
}

fn scaled(text: &str) -> Result<f64, SuffixError> {
    let t = text.trim();
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        Some('K') => (&t[..t.len() - 1], 1024.0),
        Some('M') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        Some('G') => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| SuffixError::NotANumber(text.to_owned()))?;
    if !v.is_finite() {
        return Err(SuffixError::NotANumber(text.to_owned()));
    }
    if v < 0.0 {
        return Err(SuffixError::Negative(text.to_owned()));
    }
    let out = v * mult;
    if out >= u64::MAX as f64 {
        return Err(SuffixError::TooLarge(text.to_owned()));
    }
    Ok(out)
}

/// A byte count such as `-l 128K` (131072) or `-n 100m` (100 000 000).
pub fn parse_bytes(text: &str) -> Result<Bytes, SuffixError> {
    Ok(Bytes(scaled(text)?.round() as u64))
}

/// A rate such as `-b 10m` (10 000 000 bit/s) or `-b 1M` (1 048 576 bit/s).
pub fn parse_rate(text: &str) -> Result<BitRate, SuffixError> {
    Ok(BitRate(scaled(text)?.round() as u64))
}

/// Seconds as iperf writes them (`-t 2.5`, `-i 0.5`).
pub fn parse_seconds(text: &str) -> Result<Duration, SuffixError> {
    // iperf 2 takes bare seconds; `s` and `ms` are accepted too, because every other
    // duration bloatlab takes (`rpm --interval`, lab delays) is written with a unit.
    // No `m`: next to byte sizes (10m = 10 Mbit) it would read as minutes or mega.
    let t = text.trim();
    let (num, scale) = match t.strip_suffix("ms") {
        Some(n) => (n, 1e-3),
        None => (t.strip_suffix('s').unwrap_or(t), 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| SuffixError::NotADuration(text.to_owned()))?;
    if !v.is_finite() {
        return Err(SuffixError::NotADuration(text.to_owned()));
    }
    if v < 0.0 {
        return Err(SuffixError::Negative(text.to_owned()));
    }
    Duration::try_from_secs_f64(v * scale).map_err(|_| SuffixError::TooLarge(text.to_owned()))
}

/// `-S`: decimal, `0x` hex, leading-`0` octal (as iperf's `strtol(.., 0)`), or
/// a DSCP/precedence name that iperf 2 accepts (shifted into the TOS byte).
pub fn parse_tos(text: &str) -> Result<u8, SuffixError> {
    let t = text.trim();
    let bad = || SuffixError::BadTos(text.to_owned());
    let lower = t.to_ascii_lowercase();
    let dscp = |d: u8| Ok(d << 2);
    match lower.as_str() {
        "ef" => return dscp(46),
        "va" => return dscp(44),
        "le" => return dscp(1),
        "af11" => return dscp(10),
        "af12" => return dscp(12),
        "af13" => return dscp(14),
        "af21" => return dscp(18),
        "af22" => return dscp(20),
        "af23" => return dscp(22),
        "af31" => return dscp(26),
        "af32" => return dscp(28),
        "af33" => return dscp(30),
        "af41" => return dscp(34),
        "af42" => return dscp(36),
        "af43" => return dscp(38),
        _ => {}
    }
    if let Some(n) = lower.strip_prefix("cs") {
        let n: u8 = n.parse().map_err(|_| bad())?;
        return if n <= 7 { dscp(n << 3) } else { Err(bad()) };
    }
    let v = if let Some(h) = lower.strip_prefix("0x") {
        u32::from_str_radix(h, 16)
    } else if lower.len() > 1 && lower.starts_with('0') {
        u32::from_str_radix(&lower[1..], 8)
    } else {
        lower.parse::<u32>()
    }
    .map_err(|_| bad())?;
    u8::try_from(v).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_suffixes_match_iperf2() {
        assert_eq!(parse_bytes("128K").unwrap(), Bytes(131_072));
        assert_eq!(parse_bytes("1k").unwrap(), Bytes(1000));
        assert_eq!(parse_bytes("100M").unwrap(), Bytes(104_857_600));
        assert_eq!(parse_bytes("2g").unwrap(), Bytes(2_000_000_000));
        assert_eq!(parse_bytes("1.5K").unwrap(), Bytes(1536));
        assert_eq!(parse_bytes("1470").unwrap(), Bytes(1470));
    }

    #[test]
    fn rate_suffixes_match_iperf2_binary() {
        assert_eq!(parse_rate("10m").unwrap(), BitRate(10_000_000));
        assert_eq!(parse_rate("1M").unwrap(), BitRate(1_048_576));
        assert_eq!(parse_rate("3g").unwrap(), BitRate(3_000_000_000));
    }

    #[test]
    fn garbage_is_rejected_with_the_text() {
        assert_eq!(
            parse_bytes("abc"),
            Err(SuffixError::NotANumber("abc".into()))
        );
        assert_eq!(parse_rate("-5m"), Err(SuffixError::Negative("-5m".into())));
        assert!(parse_bytes("1e30G").is_err());
        assert!(parse_bytes("").is_err());
        assert!(parse_seconds("nan").is_err());
        assert!(parse_seconds("-1").is_err());
    }

    #[test]
    fn seconds_accept_fractions() {
        assert_eq!(parse_seconds("2.5").unwrap(), Duration::from_millis(2500));
    }

    #[test]
    fn seconds_take_an_s_or_ms_unit_and_say_what_they_expect() {
        assert_eq!(parse_seconds("8s").unwrap(), Duration::from_secs(8));
        assert_eq!(parse_seconds("1.5 s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_seconds("500ms").unwrap(), Duration::from_millis(500));
        for bad in ["8m", "10min", "s", "ms", "1h", "nan", "infs"] {
            let e = parse_seconds(bad).unwrap_err();
            assert_eq!(e, SuffixError::NotADuration(bad.to_owned()), "{bad}");
            assert!(e.to_string().contains("not a duration"), "{e}");
        }
        assert_eq!(
            parse_seconds("-2s").unwrap_err(),
            SuffixError::Negative("-2s".to_owned())
        );
    }

    #[test]
    fn tos_spellings() {
        assert_eq!(parse_tos("0x10").unwrap(), 0x10);
        assert_eq!(parse_tos("16").unwrap(), 16);
        assert_eq!(parse_tos("020").unwrap(), 16);
        assert_eq!(parse_tos("ef").unwrap(), 0xb8);
        assert_eq!(parse_tos("af41").unwrap(), 0x88);
        assert_eq!(parse_tos("cs1").unwrap(), 0x20);
        assert!(parse_tos("256").is_err());
        assert!(parse_tos("zz").is_err());
    }
}
