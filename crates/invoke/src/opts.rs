//! Option value parsers shared by the commands (`client`, `server`, `ping`,
//! `test`, `rpm`), with iperf 2's spellings (see `bloatlab_engine::suffix`): one
//! function per kind of value. A kind only one command reads is parsed beside its
//! flags: `rpm`'s durations with units and percentages ([`crate::rpm::duration`],
//! also `test --rpm-interval`'s, [`crate::rpm::percent`]), `ping`'s interval and
//! loss bound, `test`'s markings and ECN mode, `lab up`'s tc-style values, and
//! `autorate`'s times and rate pairs. clap names the option in its error message
//! and the binary exits with status 2.

use bloatlab_engine::config::OutputFormat;
use bloatlab_engine::config::{BitRate, Bytes};
use bloatlab_engine::suffix;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

pub fn bytes(s: &str) -> Result<Bytes, String> {
    suffix::parse_bytes(s).map_err(|e| e.to_string())
}

pub fn nonzero_bytes(s: &str) -> Result<Bytes, String> {
    match bytes(s)? {
        Bytes(0) => Err(format!("`{s}` must be greater than zero")),
        b => Ok(b),
    }
}

pub fn rate(s: &str) -> Result<BitRate, String> {
    suffix::parse_rate(s).map_err(|e| e.to_string())
}

pub fn seconds(s: &str) -> Result<Duration, String> {
    suffix::parse_seconds(s).map_err(|e| e.to_string())
}

pub fn positive_seconds(s: &str) -> Result<Duration, String> {
    match seconds(s)? {
        d if d.is_zero() => Err(format!("`{s}` must be greater than zero")),
        d => Ok(d),
    }
}

pub fn tos(s: &str) -> Result<u8, String> {
    suffix::parse_tos(s).map_err(|e| e.to_string())
}

/// `-y C` (iperf 2 accepts `c` and `C`).
pub fn report_style(s: &str) -> Result<OutputFormat, String> {
    match s {
        "c" | "C" => Ok(OutputFormat::Csv),
        _ => Err(format!(
            "`{s}` is not a report style (only C, CSV, is supported)"
        )),
    }
}

/// `--near-congestion=w`: a weight in [0, 100]. iperf 2.1.8 accepts 0
/// (`atof(optarg) >= 0.0`, Settings.cpp): no pause, TCP_INFO after every write.
pub fn weight(s: &str) -> Result<f64, String> {
    let w: f64 = s.parse().map_err(|_| format!("`{s}` is not a number"))?;
    if w.is_finite() && (0.0..=100.0).contains(&w) {
        Ok(w)
    } else {
        Err(format!("`{s}` must be in [0, 100]"))
    }
}

/// `-B host[:port]`: an address to bind (port 0 = any).
pub fn bind(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.parse::<SocketAddr>() {
        return Ok(a);
    }
    s.trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 0))
        .map_err(|_| format!("`{s}` is not an IP address (optionally with :port)"))
}

/// `--permit-key=KEY`: 4 to 128 bytes, as iperf 2 requires.
pub fn permit_key(s: &str) -> Result<String, String> {
    bloatlab_wire::permit_key::validate(s.as_bytes())
        .map(|()| s.to_owned())
        .map_err(|_| {
            format!(
                "a permit key must be {} to {} characters (got {})",
                bloatlab_wire::permit_key::MIN_LEN,
                bloatlab_wire::permit_key::MAX_LEN,
                s.len()
            )
        })
}

/// The variable `client` and `ping` read the key from when `--permit-key` is not given:
/// `bloatlab test` passes it to its children this way, because a command line is
/// world-readable in /proc/PID/cmdline and an environment is not.
pub const PERMIT_KEY_ENV: &str = "BLOATLAB_PERMIT_KEY";

/// The key in [`PERMIT_KEY_ENV`], checked as `--permit-key` is (unset or empty: none).
pub fn permit_key_env() -> Result<Option<String>, crate::UsageError> {
    match std::env::var(PERMIT_KEY_ENV) {
        Ok(k) if !k.is_empty() => permit_key(&k)
            .map(Some)
            .map_err(|e| crate::UsageError::new(format!("${PERMIT_KEY_ENV}: {e}"))),
        Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
        Err(std::env::VarError::NotUnicode(_)) => Err(crate::UsageError::new(format!(
            "${PERMIT_KEY_ENV}: a permit key must be text (printable ASCII)"
        ))),
    }
}

/// The server's `--permit-key[=KEY]`: an empty value (the option without
/// `=KEY`) asks for a generated key.
pub fn server_permit_key(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Ok(String::new())
    } else {
        permit_key(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_parse_with_iperf_spellings() {
        assert_eq!(bytes("128K").unwrap(), Bytes(131_072));
        assert!(nonzero_bytes("0").is_err());
        assert_eq!(rate("10m").unwrap(), BitRate(10_000_000));
        assert_eq!(report_style("C").unwrap(), OutputFormat::Csv);
        assert!(report_style("J").is_err());
        // iperf 2.1.8 keeps a weight of 0 (no pause); negative and garbage are refused.
        assert_eq!(weight("0"), Ok(0.0));
        assert!(weight("-0.1").is_err() && weight("x").is_err());
        assert_eq!(weight("0.4").unwrap(), 0.4);
        assert_eq!(bind("127.0.0.1").unwrap(), "127.0.0.1:0".parse().unwrap());
        assert_eq!(bind("[::1]:5000").unwrap(), "[::1]:5000".parse().unwrap());
        assert!(bind("nope").is_err());
        assert!(positive_seconds("0").is_err());
        assert!(permit_key("abc").is_err() && permit_key(&"k".repeat(129)).is_err());
        assert_eq!(permit_key("abcd").unwrap(), "abcd");
        assert_eq!(server_permit_key("").unwrap(), "");
        assert!(server_permit_key("abc").is_err());
    }
}
