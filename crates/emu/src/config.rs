//! The configuration of one direction of an emulated link.
//!
//! A [`LinkConfig`] holds no seed: the same config with different seeds gives statistically
//! equivalent links, the same config with the same seed gives identical runs.

use crate::capacity::{Capacity, Schedule, parse_schedule};
use crate::qdisc::{Qdisc, QdiscConfig};
use crate::spec::{
    Probability, Problem, SpecError, format_time, parse_limit, parse_percent, parse_rate,
    parse_signed, parse_time,
};
use bloatlab_units::BitRate;
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

/// Link-layer framing applied when computing how long a packet occupies the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Framing {
    /// Bytes as they are (after overhead and MPU).
    #[default]
    None,
    /// ATM/AAL5: padded to whole 48-byte cell payloads, 53 bytes on the wire per cell
    /// (ADSL; tc-cake(8) `atm`, tc-stab(8) `linklayer atm`).
    Atm,
    /// PTM (VDSL2, ITU-T G.993.2 64/65-octet encapsulation): one extra byte per started 64 bytes.
    Ptm,
}

/// How many bytes a packet occupies on the emulated wire: tc-cake(8)'s overhead compensation
/// (`overhead`, `mpu`, `atm`/`ptm`), also netem's `rate RATE PACKETOVERHEAD`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Overhead {
    /// Bytes added to every IP packet (may be negative), e.g. 44 for report 4's "ATM + 44",
    /// 38 for Ethernet's preamble + header + FCS + interframe gap. Default 0.
    pub bytes: i32,
    /// Minimum packet unit: shorter packets are counted as this many bytes (after `bytes`). Default 0.
    pub mpu: u32,
    /// Cell framing. Default none.
    pub framing: Framing,
}

impl Overhead {
    /// Wire bytes for an IP packet of `len` bytes, in the order CAKE applies them: overhead,
    /// then MPU, then cell framing. Never less than 1.
    pub fn wire_bytes(&self, len: u64) -> u64 {
        let mut n = (len as i64 + i64::from(self.bytes)).max(1) as u64;
        n = n.max(u64::from(self.mpu));
        match self.framing {
            Framing::None => n,
            Framing::Atm => n.div_ceil(48) * 53,
            Framing::Ptm => n + n.div_ceil(64),
        }
    }
}

/// The random loss applied at the link's input, before the qdisc (as netem does).
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum LossModel {
    /// No random loss.
    #[default]
    None,
    /// Independent (Bernoulli) loss with this probability per packet (netem `loss random P`).
    Random {
        /// Loss probability per packet.
        p: Probability,
    },
    /// Gilbert-Elliott two-state bursty loss (netem `loss gemodel p r 1-h 1-k`; Gilbert 1960,
    /// Elliott 1963; the parameterisation of RFC 6534 §3.2 / netem's "GE" model).
    GilbertElliott {
        /// Probability of moving from the good to the bad state, per packet.
        p: Probability,
        /// Probability of moving from the bad to the good state, per packet.
        r: Probability,
        /// Loss probability in the bad state (netem's `1-h`). Default 100 %.
        loss_bad: Probability,
        /// Loss probability in the good state (netem's `1-k`). Default 0 %.
        loss_good: Probability,
    },
}

impl FromStr for LossModel {
    type Err = SpecError;
    /// netem's spellings: `0.5%`, `random 0.5%`, `gemodel 1% [10% [100% [0%]]]`, `none`.
    fn from_str(s: &str) -> Result<LossModel, SpecError> {
        let words: Vec<&str> = s.split_whitespace().collect();
        let named = |e: SpecError| SpecError::new("loss", s, e.problem);
        match words.as_slice() {
            [] => Err(SpecError::new("loss", s, Problem::MissingValue)),
            ["none"] => Ok(LossModel::None),
            [p] | ["random", p] => {
                let p = parse_percent(p).map_err(named)?;
                Ok(if p.get() == 0.0 {
                    LossModel::None
                } else {
                    LossModel::Random { p }
                })
            }
            ["gemodel", rest @ ..] if (1..=4).contains(&rest.len()) => {
                let get = |i: usize| {
                    rest.get(i)
                        .map(|w| parse_percent(w).map_err(named))
                        .transpose()
                };
                let p = get(0)?.unwrap_or(Probability::ZERO);
                // netem: r defaults to 1 - p.
                let r = get(1)?
                    .unwrap_or_else(|| Probability::new(1.0 - p.get()).unwrap_or(Probability::ONE));
                let loss_bad = get(2)?.unwrap_or(Probability::ONE);
                let loss_good = get(3)?.unwrap_or(Probability::ZERO);
                Ok(LossModel::GilbertElliott {
                    p,
                    r,
                    loss_bad,
                    loss_good,
                })
            }
            _ => Err(SpecError::new(
                "loss",
                s,
                Problem::UnknownName("P%, random P%, gemodel P% [R% [1-H% [1-K%]]], none".into()),
            )),
        }
    }
}

/// The distribution of the random part of the delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterDistribution {
    /// Uniform in `delay ± jitter` (netem without a distribution table).
    #[default]
    Uniform,
    /// Normal with mean `delay` and standard deviation `jitter`, cut at `delay ± 4·jitter`
    /// and at zero.
    Normal,
}

impl FromStr for JitterDistribution {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Self, SpecError> {
        match s {
            "uniform" => Ok(JitterDistribution::Uniform),
            "normal" => Ok(JitterDistribution::Normal),
            _ => Err(SpecError::new(
                "distribution",
                s,
                Problem::UnknownName("uniform, normal".into()),
            )),
        }
    }
}

/// One direction of a link: input -> loss -> qdisc -> serializer at `rate` -> delay line -> output.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LinkConfig {
    /// Serialization rate. `None` = unlimited (packets leave the qdisc as soon as they arrive).
    pub rate: Option<BitRate>,
    /// Per-packet wire overhead and framing used by the serializer.
    pub overhead: Overhead,
    /// One-way propagation delay added after serialization.
    #[serde(serialize_with = "crate::spec::ser_time")]
    pub delay: Duration,
    /// Random variation of the delay (see [`JitterDistribution`]). Zero = constant delay.
    #[serde(serialize_with = "crate::spec::ser_time")]
    pub jitter: Duration,
    /// Shape of the jitter.
    pub jitter_distribution: JitterDistribution,
    /// Let jitter reorder packets (netem's behaviour). Default false: delivery times are made
    /// monotonic, so a packet never overtakes an earlier one.
    pub allow_reorder: bool,
    /// Random loss before the qdisc.
    pub loss: LossModel,
    /// The queue discipline in front of the serializer.
    pub qdisc: QdiscConfig,
    /// Release each packet when its transmission slot *starts* instead of when it ends: a
    /// software token-bucket shaper (HTB, TBF, CAKE's shaper) in front of a faster wire, as a
    /// home router in front of its modem. The next packet still waits until the slot ends, so
    /// the rate is the same; what changes is that a packet reaches the next stage of a
    /// [`crate::Chain`] before its own slot has elapsed, so a small packet does not arrive on
    /// the heels of a large one there. Default false: a store-and-forward link, where a packet
    /// is delivered once its last bit is sent. Key `shaper`.
    pub shaper: bool,
    /// A rate that changes with time (`rate=schedule:...` or `rate=trace:FILE`, see
    /// [`crate::capacity`]); then `rate` holds its nominal rate ([`Capacity::nominal`]).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_display"
    )]
    pub capacity: Option<Capacity>,
    /// A delay that changes with time (`delay=schedule:0s/20ms,10s/200ms`); then `delay`
    /// holds its first step.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "ser_opt_delays"
    )]
    pub delay_schedule: Option<Arc<Schedule<Duration>>>,
}

fn ser_opt_display<S: serde::Serializer, T: fmt::Display>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(v),
        None => s.serialize_none(),
    }
}

fn ser_opt_delays<S: serde::Serializer>(
    v: &Option<Arc<Schedule<Duration>>>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.collect_str(&format_delays(v)),
        None => s.serialize_none(),
    }
}

/// `schedule:0s/20ms,10s/200ms,20s/loop`, which [`LinkConfig::set`] reads back.
pub fn format_delays(v: &Schedule<Duration>) -> String {
    let mut out = String::from("schedule:");
    for (i, (at, d)) in v.steps().iter().enumerate() {
        let sep = if i == 0 { "" } else { "," };
        out += &format!("{sep}{}/{}", format_time(*at), format_time(*d));
    }
    if let Some(p) = v.period() {
        out += &format!(",{}/loop", format_time(p));
    }
    out
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate: None,
            overhead: Overhead::default(),
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            jitter_distribution: JitterDistribution::Uniform,
            allow_reorder: false,
            loss: LossModel::None,
            qdisc: QdiscConfig::default(),
            shaper: false,
            capacity: None,
            delay_schedule: None,
        }
    }
}

impl LinkConfig {
    /// Checks every field and their combinations. [`crate::Link::new`] calls this too.
    pub fn validate(&self) -> Result<(), SpecError> {
        if self.rate == Some(BitRate(0)) {
            return Err(SpecError::new("rate", "0", Problem::NotPositive));
        }
        let delay = self
            .delay_schedule
            .as_ref()
            .map_or(self.delay, |s| s.max().max(self.delay));
        if delay > Duration::from_secs(3600) {
            return Err(SpecError::new(
                "delay",
                format_time(delay),
                Problem::OutOfRange("at most 1 hour".into()),
            ));
        }
        if self.jitter > Duration::from_secs(3600) {
            return Err(SpecError::new(
                "jitter",
                format_time(self.jitter),
                Problem::OutOfRange("at most 1 hour".into()),
            ));
        }
        // What the delay line holds in flight: rate x (delay + the most jitter adds), bounded
        // (crate::link::MAX_IN_FLIGHT_BYTES) so that memory follows a link one could build.
        let rate = self.capacity.as_ref().map(Capacity::max).or(self.rate);
        if let Some(rate) = rate {
            let longest = delay + self.jitter * 4;
            let bytes = u128::from(rate.0) * longest.as_nanos() / 8 / 1_000_000_000;
            let max = u128::from(crate::link::MAX_IN_FLIGHT_BYTES.0);
            if bytes > max {
                return Err(SpecError::new(
                    "delay",
                    format_time(self.delay),
                    Problem::OutOfRange(format!(
                        "at this rate the delay line would hold {} MiB in flight (rate x \
                         (delay + 4 x jitter)), more than its {} MiB bound: lower the delay or \
                         the rate",
                        bytes >> 20,
                        max >> 20
                    )),
                ));
            }
        }
        if let LossModel::GilbertElliott { p, r, .. } = self.loss
            && p.get() > 0.0
            && r.get() == 0.0
        {
            return Err(SpecError::new(
                "loss",
                format!("gemodel {p} {r}"),
                Problem::Conflict("r = 0% would stay in the bad state forever".into()),
            ));
        }
        self.qdisc.validate()
    }

    /// Builds a config from `(key, value)` pairs as [`LinkConfig::set`] takes them, applying
    /// `qdisc` first whatever its position, so `limit` and qdisc parameters given before it are
    /// not reset. Validates the result.
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    ) -> Result<LinkConfig, SpecError> {
        let pairs: Vec<_> = pairs.into_iter().collect();
        let mut cfg = LinkConfig::default();
        for (k, v) in pairs.iter().filter(|(k, _)| *k == "qdisc") {
            cfg.set(k, *v)?;
        }
        for (k, v) in pairs.iter().filter(|(k, _)| *k != "qdisc") {
            cfg.set(k, *v)?;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Sets one field from its user spelling; `key` is the option name without dashes:
    /// `rate`, `delay`, `jitter`, `distribution` (`uniform`/`normal`), `reorder` (`on`/`off`),
    /// `loss`, `limit`, `qdisc` (replaces the qdisc with that kind's defaults, so set it before
    /// `limit` and qdisc parameters, or use [`LinkConfig::from_pairs`]), `overhead`, `mpu`,
    /// `framing` (`none`/`atm`/`ptm`), or any parameter of the current qdisc (`target`, `ecn`,
    /// ...; flags take `value = None`).
    pub fn set<'a>(&mut self, key: &str, value: Option<&'a str>) -> Result<(), SpecError> {
        let need =
            |v: Option<&'a str>| v.ok_or_else(|| SpecError::new(key, "", Problem::MissingValue));
        let named = |e: SpecError| e.for_field(key);
        match key {
            "rate" => {
                let v = need(value)?;
                match Capacity::parse(v) {
                    Some(c) => {
                        let c = c.map_err(named)?;
                        self.rate = Some(c.nominal());
                        self.capacity = Some(c);
                    }
                    None => {
                        self.rate = Some(parse_rate(v).map_err(named)?);
                        self.capacity = None;
                    }
                }
            }
            "delay" => {
                let v = need(value)?;
                match v.strip_prefix("schedule:") {
                    Some(steps) => {
                        let s = parse_schedule(key, steps, parse_time)?;
                        self.delay = s.at(Duration::ZERO);
                        self.delay_schedule = Some(Arc::new(s));
                    }
                    None => {
                        self.delay = parse_time(v).map_err(named)?;
                        self.delay_schedule = None;
                    }
                }
            }
            "jitter" => self.jitter = parse_time(need(value)?).map_err(named)?,
            "distribution" => self.jitter_distribution = need(value)?.parse().map_err(named)?,
            "reorder" => self.allow_reorder = on_off(key, need(value)?)?,
            // A bare `shaper` (a stage word) turns it on.
            "shaper" => self.shaper = value.map_or(Ok(true), |v| on_off(key, v))?,
            "loss" => self.loss = need(value)?.parse().map_err(named)?,
            "limit" => self
                .qdisc
                .set_limit(parse_limit(need(value)?).map_err(named)?),
            "qdisc" => {
                let kind: Qdisc = need(value)?.parse().map_err(named)?;
                if kind != self.qdisc.kind() {
                    self.qdisc = QdiscConfig::defaults(kind);
                }
            }
            "overhead" => self.overhead.bytes = parse_signed(key, need(value)?, -64..=256)? as i32,
            "mpu" => self.overhead.mpu = parse_signed(key, need(value)?, 0..=256)? as u32,
            "framing" => {
                self.overhead.framing = match need(value)? {
                    "none" | "noatm" => Framing::None,
                    "atm" => Framing::Atm,
                    "ptm" => Framing::Ptm,
                    v => {
                        return Err(SpecError::new(
                            key,
                            v,
                            Problem::UnknownName("none, atm, ptm".into()),
                        ));
                    }
                }
            }
            _ => self.qdisc.set(key, value)?,
        }
        Ok(())
    }
}

/// `on`/`off` (and their usual synonyms) for the boolean key `key`.
fn on_off(key: &str, value: &str) -> Result<bool, SpecError> {
    match value {
        "on" | "yes" | "true" | "1" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        v => Err(SpecError::new(
            key,
            v,
            Problem::UnknownName("on, off".into()),
        )),
    }
}

impl fmt::Display for LinkConfig {
    /// A compact one-line summary for logs: `rate 20 Mbit/s delay 40ms fq_codel`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.capacity, self.rate) {
            (Some(c), _) => write!(f, "rate {c}")?,
            (None, Some(r)) => write!(f, "rate {r}")?,
            (None, None) => write!(f, "rate unlimited")?,
        }
        match &self.delay_schedule {
            Some(s) => write!(f, " delay {}", format_delays(s))?,
            None => write!(f, " delay {:?}", self.delay)?,
        }
        if !self.jitter.is_zero() {
            write!(f, " jitter {:?}", self.jitter)?;
        }
        if self.loss != LossModel::None {
            write!(f, " loss {:?}", self.loss)?;
        }
        write!(f, " {}", self.qdisc.kind())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Limit;
    use bloatlab_units::Bytes;

    #[test]
    fn wire_bytes_with_atm_and_overhead() {
        // Report 4's "ATM + 44": a 1500-byte packet + 44 = 1544 -> 33 cells -> 1749 bytes.
        let o = Overhead {
            bytes: 44,
            mpu: 0,
            framing: Framing::Atm,
        };
        assert_eq!(o.wire_bytes(1500), 1749);
        // A 40-byte ACK + 44 = 84 -> 2 cells = 106 bytes: 2.65x its IP size.
        assert_eq!(o.wire_bytes(40), 106);
        let e = Overhead {
            bytes: 38,
            mpu: 84,
            framing: Framing::None,
        };
        assert_eq!(e.wire_bytes(1500), 1538);
        assert_eq!(e.wire_bytes(28), 84);
        assert_eq!(
            Overhead {
                bytes: 0,
                mpu: 0,
                framing: Framing::Ptm
            }
            .wire_bytes(1500),
            1524
        );
        assert_eq!(
            Overhead {
                bytes: -100,
                mpu: 0,
                framing: Framing::None
            }
            .wire_bytes(40),
            1
        );
        assert_eq!(Overhead::default().wire_bytes(1500), 1500);
    }

    #[test]
    fn loss_spellings() {
        assert_eq!("0%".parse::<LossModel>().unwrap(), LossModel::None);
        assert_eq!(
            "random 1%".parse::<LossModel>().unwrap(),
            LossModel::Random {
                p: Probability::new(0.01).unwrap()
            }
        );
        let LossModel::GilbertElliott {
            p,
            r,
            loss_bad,
            loss_good,
        } = "gemodel 1% 10%".parse().unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (p.get(), r.get(), loss_bad.get(), loss_good.get()),
            (0.01, 0.1, 1.0, 0.0)
        );
        let LossModel::GilbertElliott { r, .. } = "gemodel 1%".parse().unwrap() else {
            panic!()
        };
        assert_eq!(r.get(), 0.99);
        let e = "bursty 1%"
            .parse::<LossModel>()
            .unwrap_err()
            .for_field("--loss");
        assert!(
            e.to_string()
                .starts_with(r#"--loss: "bursty 1%" is not known"#),
            "{e}"
        );
        let e = "gemodel 1% 200%".parse::<LossModel>().unwrap_err();
        assert!(matches!(e.problem, Problem::OutOfRange(_)));
    }

    #[test]
    fn set_fields_from_cli_spellings() {
        let mut c = LinkConfig::default();
        c.set("rate", Some("20mbit")).unwrap();
        c.set("delay", Some("40ms")).unwrap();
        c.set("qdisc", Some("codel")).unwrap();
        c.set("limit", Some("64kb")).unwrap();
        c.set("ecn", None).unwrap();
        c.set("target", Some("3ms")).unwrap();
        assert_eq!(c.rate, Some(BitRate(20_000_000)));
        assert_eq!(c.delay, Duration::from_millis(40));
        let QdiscConfig::Codel(q) = &c.qdisc else {
            panic!()
        };
        assert_eq!(q.limit, Limit::Bytes(Bytes(65_536)));
        assert!(q.ecn);
        assert_eq!(q.target, Duration::from_millis(3));
        c.validate().unwrap();
        assert_eq!(c.to_string(), "rate 20 Mbit/s delay 40ms codel");

        let e = c.set("rate", Some("0mbit")).unwrap_err();
        assert_eq!(e.to_string(), r#"rate: "0mbit" must be greater than zero"#);
        let e = c.set("delay", Some("-1ms")).unwrap_err();
        assert_eq!(e.to_string(), r#"delay: "-1ms" must not be negative"#);
        let e = c.set("qdisc", Some("sfq")).unwrap_err();
        assert!(
            e.to_string().starts_with(r#"qdisc: "sfq" is not known"#),
            "{e}"
        );
        let e = c.set("delay", Some("40 parsecs")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(r#"delay: "40 parsecs" has an unknown unit"#),
            "{e}"
        );
        c.set("interval", Some("2ms")).unwrap();
        assert!(matches!(
            c.validate().unwrap_err().problem,
            Problem::Conflict(_)
        ));
    }

    #[test]
    fn from_pairs_applies_qdisc_first() {
        let c = LinkConfig::from_pairs([
            ("limit", Some("100p")),
            ("ecn", None),
            ("qdisc", Some("codel")),
            ("rate", Some("10mbit")),
        ])
        .unwrap();
        let QdiscConfig::Codel(q) = &c.qdisc else {
            panic!()
        };
        assert_eq!(q.limit, Limit::Packets(100));
        assert!(q.ecn);
        let e =
            LinkConfig::from_pairs([("qdisc", Some("fifo")), ("target", Some("5ms"))]).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"qdisc parameter: "target" is not known (expected one of the parameters of fifo: limit)"#
        );
    }
}
