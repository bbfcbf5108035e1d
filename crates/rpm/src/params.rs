//! The test parameters of draft-ietf-ippm-responsiveness-09, section 5.2 ("Test
//! Parameters"), with the draft's defaults.
//!
//! | name | field | default | where the draft uses it |
//! |------|-------|---------|-------------------------|
//! | MAD | [`Params::mad`] | 4 intervals | 5.3.1 (probes of the last MAD intervals), 5.4 (moving average, stability) |
//! | ID  | [`Params::interval`] | 5 s | 5.4 ("For the current draft the interval is defined as 5 seconds") |
//! | TMP | [`Params::trim`] | 95 % kept (the largest 5 % dropped) | 5.3.1 (single-sided trimmed mean) |
//! | SDT | [`Params::stdev_tolerance`] | 5 % | 5.4 (stability) |
//! | INP | [`Params::initial_connections`] | 1 | 5.4 |
//! | INC | [`Params::connections_per_interval`] | 1 | 5.4 |
//! | MNP | [`Params::max_connections`] | 16 | 5.1.1, 5.2 |
//! | MPS | [`Params::max_probes_per_second`] | 100 | 5.3 |
//! | PTC | [`Params::probe_capacity`] | 5 % | 5.3 |
//!
//! ID: draft-08 and earlier said 1 s; draft-09 changed it to 5 s ("pending further
//! investigation"). networkQuality, goresponsiveness and Cloudflare's `mach` run with 1 s,
//! which makes their runs about five times shorter; `--interval 1s` does the same here.
//!
//! MPS: the draft reads three ways ("not more than MPS probes per ID" in 5.3, "a new
//! foreign and self probe every 1/MPS seconds" in 5.4, and "300 KB per second" for the
//! defaults, which is 50 foreign probes of 5000 bytes and 50 self probes of 1000 bytes).
//! We take the parameter's name, "maximum probes per second", and the byte figure: at
//! most MPS probes of both kinds together per second, so MPS/2 pairs.

use std::time::Duration;

/// Bytes a foreign probe costs on the wire (TCP and TLS handshakes, request, response),
/// the draft's estimate in section 5.3.
pub const FOREIGN_PROBE_BYTES: u64 = 5000;
/// Bytes a self probe costs (request and response on an open connection), section 5.3.
pub const SELF_PROBE_BYTES: u64 = 1000;

/// The draft's parameters. Build with [`Params::default`] and change fields; check with
/// [`Params::validate`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    /// MAD: intervals in a moving average and in the stability window.
    pub mad: usize,
    /// ID: the interval at which the algorithm re-evaluates stability.
    pub interval: Duration,
    /// TMP as the fraction of the largest samples dropped (0.05 = "95 % trimmed mean").
    pub trim: f64,
    /// SDT: stable when the standard deviation of the last MAD values is below this
    /// fraction of the current one.
    pub stdev_tolerance: f64,
    /// INP: load-generating connections at the start (per direction).
    pub initial_connections: usize,
    /// INC: connections added at each interval (per direction).
    pub connections_per_interval: usize,
    /// MNP: most load-generating connections (per direction).
    pub max_connections: usize,
    /// MPS: most probes per second, both kinds together.
    pub max_probes_per_second: u32,
    /// PTC: most share of the measured capacity the probes may use.
    pub probe_capacity: f64,
}

impl Default for Params {
    fn default() -> Params {
        Params {
            mad: 4,
            interval: Duration::from_secs(5),
            trim: 0.05,
            stdev_tolerance: 0.05,
            initial_connections: 1,
            connections_per_interval: 1,
            max_connections: 16,
            max_probes_per_second: 100,
            probe_capacity: 0.05,
        }
    }
}

/// A parameter out of its range.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{name} {value} is out of range: {range}")]
pub struct ParamError {
    /// The draft's name of the parameter.
    pub name: &'static str,
    /// The value given, as text.
    pub value: String,
    /// What is accepted.
    pub range: &'static str,
}

impl Params {
    /// Checks every parameter's range.
    pub fn validate(&self) -> Result<(), ParamError> {
        let bad = |name, value: String, range| Err(ParamError { name, value, range });
        if !(2..=100).contains(&self.mad) {
            return bad("MAD", self.mad.to_string(), "2 to 100 intervals");
        }
        if self.interval < Duration::from_millis(100) || self.interval > Duration::from_secs(60) {
            return bad("ID", format!("{:?}", self.interval), "100 ms to 60 s");
        }
        if !(0.0..0.5).contains(&self.trim) {
            return bad(
                "TMP",
                format!("{}", 1.0 - self.trim),
                "more than 50 % up to 100 % kept",
            );
        }
        if !(self.stdev_tolerance > 0.0 && self.stdev_tolerance < 1.0) {
            return bad(
                "SDT",
                self.stdev_tolerance.to_string(),
                "more than 0 and less than 100 %",
            );
        }
        if !(1..=256).contains(&self.max_connections) {
            return bad("MNP", self.max_connections.to_string(), "1 to 256");
        }
        if self.initial_connections == 0 || self.initial_connections > self.max_connections {
            return bad("INP", self.initial_connections.to_string(), "1 to MNP");
        }
        if self.connections_per_interval > self.max_connections {
            return bad("INC", self.connections_per_interval.to_string(), "0 to MNP");
        }
        if !(2..=10_000).contains(&self.max_probes_per_second) {
            return bad("MPS", self.max_probes_per_second.to_string(), "2 to 10000");
        }
        if !(self.probe_capacity > 0.0 && self.probe_capacity <= 1.0) {
            return bad(
                "PTC",
                self.probe_capacity.to_string(),
                "more than 0 up to 100 %",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_drafts() {
        let p = Params::default();
        assert_eq!(p.mad, 4);
        assert_eq!(p.interval, Duration::from_secs(5));
        assert_eq!(p.trim, 0.05);
        assert_eq!(p.stdev_tolerance, 0.05);
        assert_eq!((p.initial_connections, p.connections_per_interval), (1, 1));
        assert_eq!(p.max_connections, 16);
        assert_eq!(p.max_probes_per_second, 100);
        assert_eq!(p.probe_capacity, 0.05);
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn out_of_range_values_name_the_parameter() {
        let p = Params {
            mad: 1,
            ..Params::default()
        };
        assert_eq!(p.validate().unwrap_err().name, "MAD");
        let p = Params {
            trim: 0.5,
            ..Params::default()
        };
        assert_eq!(p.validate().unwrap_err().name, "TMP");
        let p = Params {
            probe_capacity: 0.0,
            ..Params::default()
        };
        assert_eq!(p.validate().unwrap_err().name, "PTC");
        let p = Params {
            stdev_tolerance: f64::NAN,
            ..Params::default()
        };
        assert_eq!(p.validate().unwrap_err().name, "SDT");
        let p = Params {
            max_connections: 0,
            ..Params::default()
        };
        assert_eq!(p.validate().unwrap_err().name, "MNP");
    }
}
