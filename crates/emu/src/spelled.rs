//! Link values parsed once, kept with the spelling they were given in.
//!
//! A command line (`bloatlab lab up --rate 20mbit`) parses each value with the parser of its
//! kind ([`TcValue`]) as soon as it is read, so a bad value is refused naming its option. The
//! typed value then travels as a [`Spelled`]: it shows (and serialises) as the user wrote it,
//! so a status line echoes `20mbit` rather than a reformatted `20 Mbit/s`, and reading it back
//! from JSON goes through the same parser.

use crate::config::{LinkConfig, LossModel};
use crate::qdisc::{Qdisc, QdiscConfig};
use crate::spec::{Limit, Problem, SpecError, format_time, parse_limit, parse_rate, parse_time};
use bloatlab_units::BitRate;
use std::fmt;
use std::time::Duration;

/// A value with a tc-style spelling and one parser for it.
pub trait TcValue: Sized {
    /// Parses the user's spelling; errors name the field and the value.
    fn parse_tc(text: &str) -> Result<Self, SpecError>;

    /// Parses a spelling read back from storage (a lab's state file), which was checked with
    /// [`TcValue::parse_tc`] when it was stored. The same by default; a value that names a
    /// file (`trace:FILE`) reads back even when the file has gone since, so a lab can still
    /// be shown and taken down (whoever builds a link from it parses the text again).
    fn parse_stored(text: &str) -> Result<Self, SpecError> {
        Self::parse_tc(text)
    }
}

impl TcValue for BitRate {
    fn parse_tc(text: &str) -> Result<Self, SpecError> {
        parse_rate(text)
    }
}

impl TcValue for Duration {
    fn parse_tc(text: &str) -> Result<Self, SpecError> {
        parse_time(text)
    }
}

impl TcValue for Limit {
    fn parse_tc(text: &str) -> Result<Self, SpecError> {
        parse_limit(text)
    }
}

impl TcValue for LossModel {
    fn parse_tc(text: &str) -> Result<Self, SpecError> {
        text.parse()
    }
}

impl TcValue for Qdisc {
    fn parse_tc(text: &str) -> Result<Self, SpecError> {
        text.parse()
    }
}

/// A parsed value and the text it was parsed from.
#[derive(Debug, Clone, PartialEq)]
pub struct Spelled<T> {
    value: T,
    text: String,
}

impl<T: TcValue> Spelled<T> {
    /// Parses `text` with `T`'s parser.
    pub fn parse(text: &str) -> Result<Self, SpecError> {
        Ok(Spelled {
            value: T::parse_tc(text)?,
            text: text.to_string(),
        })
    }
}

impl<T> Spelled<T> {
    /// The parsed value.
    pub fn get(&self) -> &T {
        &self.value
    }

    /// The spelling, verbatim.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The spellings of `values` joined by `sep` (`target=5ms ecn`).
    pub fn join(values: &[Spelled<T>], sep: &str) -> String {
        let texts: Vec<&str> = values.iter().map(Spelled::text).collect();
        texts.join(sep)
    }
}

/// Values built in code get the shortest exact spelling, which parses back to them.
impl From<Duration> for Spelled<Duration> {
    fn from(d: Duration) -> Self {
        Spelled {
            value: d,
            text: format_time(d),
        }
    }
}

impl From<BitRate> for Spelled<BitRate> {
    fn from(r: BitRate) -> Self {
        let text = [
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
        ]
        .into_iter()
        .find(|&(k, _)| r.0 != 0 && r.0.is_multiple_of(k))
        .map_or_else(|| format!("{}bit", r.0), |(k, u)| format!("{}{u}", r.0 / k));
        Spelled { value: r, text }
    }
}

impl From<Limit> for Spelled<Limit> {
    fn from(l: Limit) -> Self {
        Spelled {
            value: l,
            text: l.to_string(),
        }
    }
}

impl From<Qdisc> for Spelled<Qdisc> {
    fn from(q: Qdisc) -> Self {
        Spelled {
            value: q,
            text: q.to_string(),
        }
    }
}

impl<T> fmt::Display for Spelled<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl<T: TcValue> std::str::FromStr for Spelled<T> {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        Spelled::parse(s)
    }
}

/// Serialises as the spelling: `"20mbit"`.
impl<T> serde::Serialize for Spelled<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

/// Reads a spelling and parses it again ([`TcValue::parse_stored`]), refusing what the
/// parser refuses.
impl<'de, T: TcValue> serde::Deserialize<'de> for Spelled<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        let value = T::parse_stored(&text).map_err(serde::de::Error::custom)?;
        Ok(Spelled { value, text })
    }
}

/// One queue discipline (or link) parameter as tc names it: `target=5ms`, or a bare flag
/// such as `ecn`. Parsing checks that some qdisc kind (or the link itself: `overhead`, `mpu`,
/// `framing`, ...) accepts it; whether the chosen kind does depends on the qdisc it is given
/// with, which [`LinkConfig::set`] checks when the two meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QdiscParam {
    /// The parameter's name, trimmed.
    pub key: String,
    /// Its value, trimmed; `None` for a flag.
    pub value: Option<String>,
}

const KINDS: [Qdisc; 5] = [
    Qdisc::Fifo,
    Qdisc::Codel,
    Qdisc::FqCodel,
    Qdisc::Pie,
    Qdisc::Cake,
];

impl TcValue for QdiscParam {
    fn parse_tc(text: &str) -> Result<Self, SpecError> {
        let (key, value) = match text.split_once('=') {
            Some((k, v)) => (k.trim(), Some(v.trim())),
            None => (text.trim(), None),
        };
        // The first value error any kind reports; a kind that does not know the key says so
        // with the field `qdisc parameter`.
        let mut value_error = None;
        for kind in KINDS {
            let mut cfg = LinkConfig {
                qdisc: QdiscConfig::defaults(kind),
                ..LinkConfig::default()
            };
            match cfg.set(key, value) {
                Ok(()) => {
                    return Ok(QdiscParam {
                        key: key.to_string(),
                        value: value.map(str::to_string),
                    });
                }
                Err(e) if e.field == "qdisc parameter" => {}
                Err(e) => {
                    value_error.get_or_insert(e);
                }
            }
        }
        Err(value_error.unwrap_or_else(|| {
            SpecError::new(
                "qdisc parameter",
                key,
                Problem::UnknownName(
                    "the parameters of fifo, codel, fq_codel, pie and cake, or the link's \
                     overhead, mpu, framing, distribution, reorder, shaper"
                        .into(),
                ),
            )
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_keep_their_spelling_and_round_trip_through_json() {
        let r: Spelled<BitRate> = "20mbit".parse().unwrap();
        assert_eq!((*r.get(), r.text()), (BitRate(20_000_000), "20mbit"));
        assert_eq!(r.to_string(), "20mbit");
        let json = serde_json::to_string(&r).unwrap();
        assert_eq!(json, r#""20mbit""#);
        let back: Spelled<BitRate> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let e = serde_json::from_str::<Spelled<Duration>>(r#""5q""#).unwrap_err();
        assert!(e.to_string().contains("unknown unit"), "{e}");
        let l: Spelled<LossModel> = "gemodel 1% 10%".parse().unwrap();
        assert!(matches!(l.get(), LossModel::GilbertElliott { .. }));
        assert_eq!(
            Spelled::join(
                &[
                    "ecn".parse::<Spelled<QdiscParam>>().unwrap(),
                    "target=5ms".parse().unwrap()
                ],
                " "
            ),
            "ecn target=5ms"
        );
    }

    #[test]
    fn values_built_in_code_spell_exactly() {
        for (rate, text) in [
            (BitRate(20_000_000), "20mbit"),
            (BitRate(8_500_000), "8500kbit"),
            (BitRate(1_000_000_000), "1gbit"),
            (BitRate(1_234_567), "1234567bit"),
        ] {
            let s = Spelled::from(rate);
            assert_eq!(s.text(), text);
            assert_eq!(Spelled::<BitRate>::parse(text).unwrap(), s);
        }
        let d = Spelled::from(Duration::from_micros(250));
        assert_eq!(d.text(), "250us");
        assert_eq!(Spelled::<Duration>::parse("250us").unwrap(), d);
        for l in [
            Limit::Packets(100),
            Limit::Bytes(bloatlab_units::Bytes(1500)),
        ] {
            assert_eq!(
                Spelled::<Limit>::parse(Spelled::from(l).text())
                    .unwrap()
                    .get(),
                &l
            );
        }
        assert_eq!(Spelled::from(Qdisc::FqCodel).text(), "fq_codel");
    }

    #[test]
    fn qdisc_params_are_checked_against_every_kind() {
        let p: Spelled<QdiscParam> = " target = 5ms".parse().unwrap();
        assert_eq!(p.get().key, "target");
        assert_eq!(p.get().value.as_deref(), Some("5ms"));
        assert_eq!(p.text(), " target = 5ms");
        let p: Spelled<QdiscParam> = "ecn".parse().unwrap();
        assert_eq!(p.get().value, None);
        for ok in [
            "flows=1024",
            "overhead=44",
            "framing=atm",
            "triple-isolate",
            "limit=100p",
        ] {
            assert!(ok.parse::<Spelled<QdiscParam>>().is_ok(), "{ok}");
        }
        let e = "target=-1ms".parse::<Spelled<QdiscParam>>().unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.problem.clone()),
            ("target", Problem::Negative)
        );
        let e = "bogus=1".parse::<Spelled<QdiscParam>>().unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.value.as_str()),
            ("qdisc parameter", "bogus")
        );
        assert!(matches!(e.problem, Problem::UnknownName(_)));
    }
}
