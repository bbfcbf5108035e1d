//! Queue disciplines: one small trait ([`QueueDiscipline`]), typed configs, explicit drop
//! reporting.
//!
//! A qdisc holds packets between the link's input and its serializer. It never reads a clock:
//! `now` is passed in, and it is the *virtual* time at which the link asks for its next packet
//! (the moment the previous packet finished serializing), not the time the driver woke up.
//! Every packet a qdisc discards goes through [`Sink::dropped`] with a reason, and every CE mark
//! through [`Sink::marked`]; nothing is inferred from sizes.

pub mod cake;
pub mod codel;
mod drr;
pub mod fifo;
pub mod fq_codel;
pub mod pie;

use crate::packet::FlowMeta;
use crate::spec::{Limit, Problem, SpecError};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// A packet inside the emulator, with what the qdiscs need to know about it.
#[derive(Debug)]
pub struct QueuedPacket {
    /// The IP packet (no link-layer header).
    pub data: Vec<u8>,
    /// When it entered the qdisc (virtual time), for sojourn times.
    pub enqueued_at: Duration,
    /// Flow identity, hashed once at the link's input.
    pub meta: FlowMeta,
    /// Time the packet already spent in the queues of earlier stages of a [`crate::Chain`]
    /// (zero at a chain's entry and for a single link), so the chain can report a packet's
    /// queueing from entry to exit.
    pub waited: Duration,
}

impl QueuedPacket {
    /// The packet's length in bytes.
    pub fn len(&self) -> u64 {
        self.data.len() as u64
    }

    /// True for a zero-length packet.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// Who discarded a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The qdisc was full (packet, byte or memory limit), including drops from the fattest flow.
    Overflow,
    /// The AQM decided to drop (CoDel, PIE, COBALT/BLUE).
    Aqm,
    /// The link's loss model (random or Gilbert-Elliott), before the qdisc.
    Loss,
}

/// Where a qdisc reports what it did to packets besides queueing them.
pub trait Sink {
    /// `pkt` was discarded at `now` for `reason`.
    fn dropped(&mut self, now: Duration, pkt: QueuedPacket, reason: DropReason);
    /// `pkt` was marked CE at `now` instead of being dropped (it stays in the stream).
    fn marked(&mut self, now: Duration, pkt: &QueuedPacket);
}

/// Packets and bytes held by a qdisc.
pub use crate::counters::PacketBytes as Backlog;

/// The contract every queue discipline implements.
pub trait QueueDiscipline: Send + fmt::Debug {
    /// Offers `pkt` at `now`. The qdisc either keeps it or reports it (or another packet it
    /// evicts instead) through `sink`.
    fn enqueue(&mut self, now: Duration, pkt: QueuedPacket, sink: &mut dyn Sink);

    /// Hands out the next packet to serialize at `now`, reporting AQM drops and marks through
    /// `sink`. `None` when empty (or when every queued packet was dropped).
    fn dequeue(&mut self, now: Duration, sink: &mut dyn Sink) -> Option<QueuedPacket>;

    /// What is queued.
    fn backlog(&self) -> Backlog;

    /// The earliest time the qdisc's own shaper lets the next packet go (CAKE's `bandwidth`).
    /// Qdiscs without a shaper return zero.
    fn ready_at(&self) -> Duration {
        Duration::ZERO
    }

    /// The link's rate changed ([`crate::Link::set_rate`]). Only a qdisc whose own shaper
    /// follows the link's rate cares; the others ignore it.
    fn set_link_rate(&mut self, _rate: Option<bloatlab_units::BitRate>) {}
}

/// The queue discipline kinds, by their tc names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Qdisc {
    /// Drop-tail FIFO limited in packets or bytes (tc's pfifo/bfifo).
    Fifo,
    /// CoDel, RFC 8289.
    Codel,
    /// FQ-CoDel, RFC 8290.
    FqCodel,
    /// PIE, RFC 8033.
    Pie,
    /// A CAKE-like shaper: COBALT, per-flow and per-host fairness, overhead compensation.
    Cake,
}

const QDISC_NAMES: &str = "fifo, pfifo, bfifo, codel, fq_codel, pie, cake";

impl FromStr for Qdisc {
    type Err = SpecError;
    fn from_str(s: &str) -> Result<Qdisc, SpecError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fifo" | "pfifo" | "bfifo" | "droptail" => Ok(Qdisc::Fifo),
            "codel" => Ok(Qdisc::Codel),
            "fq_codel" | "fq-codel" | "fqcodel" => Ok(Qdisc::FqCodel),
            "pie" => Ok(Qdisc::Pie),
            "cake" => Ok(Qdisc::Cake),
            _ => Err(SpecError::new(
                "qdisc",
                s,
                Problem::UnknownName(QDISC_NAMES.into()),
            )),
        }
    }
}

impl fmt::Display for Qdisc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Qdisc::Fifo => "fifo",
            Qdisc::Codel => "codel",
            Qdisc::FqCodel => "fq_codel",
            Qdisc::Pie => "pie",
            Qdisc::Cake => "cake",
        })
    }
}

/// A qdisc with its typed parameters.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QdiscConfig {
    /// See [`fifo::FifoConfig`].
    Fifo(fifo::FifoConfig),
    /// See [`codel::CodelConfig`].
    Codel(codel::CodelConfig),
    /// See [`fq_codel::FqCodelConfig`].
    FqCodel(fq_codel::FqCodelConfig),
    /// See [`pie::PieConfig`].
    Pie(pie::PieConfig),
    /// See [`cake::CakeConfig`].
    Cake(cake::CakeConfig),
}

impl Default for QdiscConfig {
    fn default() -> Self {
        QdiscConfig::Fifo(fifo::FifoConfig::default())
    }
}

impl QdiscConfig {
    /// The kind with Linux's default parameters.
    pub fn defaults(kind: Qdisc) -> QdiscConfig {
        match kind {
            Qdisc::Fifo => QdiscConfig::Fifo(Default::default()),
            Qdisc::Codel => QdiscConfig::Codel(Default::default()),
            Qdisc::FqCodel => QdiscConfig::FqCodel(Default::default()),
            Qdisc::Pie => QdiscConfig::Pie(Default::default()),
            Qdisc::Cake => QdiscConfig::Cake(Default::default()),
        }
    }

    /// Which kind this is.
    pub fn kind(&self) -> Qdisc {
        match self {
            QdiscConfig::Fifo(_) => Qdisc::Fifo,
            QdiscConfig::Codel(_) => Qdisc::Codel,
            QdiscConfig::FqCodel(_) => Qdisc::FqCodel,
            QdiscConfig::Pie(_) => Qdisc::Pie,
            QdiscConfig::Cake(_) => Qdisc::Cake,
        }
    }

    /// Sets the queue limit (`--limit`), in packets or bytes.
    pub fn set_limit(&mut self, limit: Limit) {
        match self {
            QdiscConfig::Fifo(c) => c.limit = limit,
            QdiscConfig::Codel(c) => c.limit = limit,
            QdiscConfig::FqCodel(c) => c.limit = limit,
            QdiscConfig::Pie(c) => c.limit = limit,
            QdiscConfig::Cake(c) => c.limit = Some(limit),
        }
    }

    /// Does `key` name a flag (a parameter without a value, like `ecn`) for this kind?
    pub fn is_flag(&self, key: &str) -> bool {
        let k = key.to_ascii_lowercase();
        match self {
            QdiscConfig::Fifo(_) => false,
            QdiscConfig::Codel(_) | QdiscConfig::FqCodel(_) | QdiscConfig::Pie(_) => {
                matches!(k.as_str(), "ecn" | "noecn")
            }
            QdiscConfig::Cake(_) => cake::CakeConfig::is_flag(&k),
        }
    }

    /// Sets one tc-style parameter: `set("target", Some("5ms"))`, `set("ecn", None)`.
    /// Errors name the parameter and the value.
    pub fn set(&mut self, key: &str, value: Option<&str>) -> Result<(), SpecError> {
        let k = key.to_ascii_lowercase();
        if self.is_flag(&k) {
            if let Some(v) = value {
                return Err(SpecError::new(
                    key,
                    v,
                    Problem::Conflict("this flag takes no value".into()),
                ));
            }
        } else if value.is_none() {
            return Err(SpecError::new(key, "", Problem::MissingValue));
        }
        let v = value.unwrap_or("");
        let named = |e: SpecError| e.for_field(key);
        let result = match self {
            QdiscConfig::Fifo(c) => c.set(&k, v),
            QdiscConfig::Codel(c) => c.set(&k, v),
            QdiscConfig::FqCodel(c) => c.set(&k, v),
            QdiscConfig::Pie(c) => c.set(&k, v),
            QdiscConfig::Cake(c) => c.set(&k, v),
        };
        match result {
            Ok(true) => Ok(()),
            Ok(false) => Err(SpecError::new(
                "qdisc parameter",
                key,
                Problem::UnknownName(format!(
                    "the parameters of {}: {}",
                    self.kind(),
                    self.param_names()
                )),
            )),
            Err(e) => Err(named(e)),
        }
    }

    /// Applies tc-style words: `["target", "5ms", "interval", "100ms", "ecn"]`.
    pub fn apply_words<'a>(
        &mut self,
        words: impl IntoIterator<Item = &'a str>,
    ) -> Result<(), SpecError> {
        let mut it = words.into_iter();
        while let Some(key) = it.next() {
            if self.is_flag(key) {
                self.set(key, None)?;
            } else {
                let value = it
                    .next()
                    .ok_or_else(|| SpecError::new(key, "", Problem::MissingValue))?;
                self.set(key, Some(value))?;
            }
        }
        Ok(())
    }

    /// The parameter names this kind accepts, for error messages and help.
    pub fn param_names(&self) -> &'static str {
        match self {
            QdiscConfig::Fifo(_) => "limit",
            QdiscConfig::Codel(_) => "limit, target, interval, ce_threshold, ecn, noecn",
            QdiscConfig::FqCodel(_) => {
                "limit, flows, quantum, target, interval, memory_limit, drop_batch, ce_threshold, ecn, noecn"
            }
            QdiscConfig::Pie(_) => "limit, target, tupdate, max_burst, alpha, beta, ecn, noecn",
            QdiscConfig::Cake(_) => cake::CakeConfig::PARAM_NAMES,
        }
    }

    /// Checks the parameters against each other.
    pub fn validate(&self) -> Result<(), SpecError> {
        match self {
            QdiscConfig::Fifo(_) => Ok(()),
            QdiscConfig::Codel(c) => c.validate(),
            QdiscConfig::FqCodel(c) => c.validate(),
            QdiscConfig::Pie(c) => c.validate(),
            QdiscConfig::Cake(c) => c.validate(),
        }
    }

    /// Builds the qdisc. `seed` drives its randomness (PIE's and BLUE's drop decisions).
    pub(crate) fn build(
        &self,
        seed: u64,
        link_rate: Option<bloatlab_units::BitRate>,
    ) -> Box<dyn QueueDiscipline> {
        match self {
            QdiscConfig::Fifo(c) => Box::new(fifo::Fifo::new(c.clone())),
            QdiscConfig::Codel(c) => Box::new(codel::Codel::new(c.clone())),
            QdiscConfig::FqCodel(c) => Box::new(fq_codel::FqCodel::new(c.clone())),
            QdiscConfig::Pie(c) => Box::new(pie::Pie::new(c.clone(), seed)),
            QdiscConfig::Cake(c) => Box::new(cake::Cake::new(c.clone(), seed, link_rate)),
        }
    }
}

/// Parses `ecn`/`noecn` flags into a bool; used by the AQM configs.
pub(crate) fn ecn_flag(key: &str) -> Option<bool> {
    match key {
        "ecn" => Some(true),
        "noecn" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A sink that counts.
    #[derive(Debug, Default)]
    pub struct Recorder {
        pub overflow_drops: u64,
        pub aqm_drops: u64,
        pub marks: u64,
    }

    impl Sink for Recorder {
        fn dropped(&mut self, _now: Duration, _pkt: QueuedPacket, reason: DropReason) {
            match reason {
                DropReason::Overflow => self.overflow_drops += 1,
                DropReason::Aqm => self.aqm_drops += 1,
                DropReason::Loss => unreachable!("qdiscs never report loss-model drops"),
            }
        }
        fn marked(&mut self, _now: Duration, _pkt: &QueuedPacket) {
            self.marks += 1;
        }
    }

    /// A UDP packet 10.0.0.1:port -> 10.0.0.100:5001 of `len` bytes enqueued at `t`.
    pub fn udp(port: u16, len: usize, t: Duration) -> QueuedPacket {
        udp_hosts([10, 0, 0, 1], 100, port, len, t)
    }

    /// A UDP packet src:port -> 10.0.0.dst:5001.
    pub fn udp_hosts(src: [u8; 4], dst: u8, port: u16, len: usize, t: Duration) -> QueuedPacket {
        let data = crate::packet::tests::ipv4_udp(src, [10, 0, 0, dst], port, 5001, 0, len);
        QueuedPacket {
            meta: FlowMeta::of(&data, 42),
            data,
            enqueued_at: t,
            waited: Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_units::Bytes;

    #[test]
    fn qdisc_names() {
        assert_eq!("fq_codel".parse::<Qdisc>().unwrap(), Qdisc::FqCodel);
        assert_eq!("CAKE".parse::<Qdisc>().unwrap(), Qdisc::Cake);
        assert_eq!("bfifo".parse::<Qdisc>().unwrap(), Qdisc::Fifo);
        let e = "red".parse::<Qdisc>().unwrap_err().for_field("--qdisc");
        assert_eq!(
            e.to_string(),
            r#"--qdisc: "red" is not known (expected one of fifo, pfifo, bfifo, codel, fq_codel, pie, cake)"#
        );
        for q in [
            Qdisc::Fifo,
            Qdisc::Codel,
            Qdisc::FqCodel,
            Qdisc::Pie,
            Qdisc::Cake,
        ] {
            assert_eq!(q.to_string().parse::<Qdisc>().unwrap(), q);
        }
    }

    #[test]
    fn tc_words_set_typed_params() {
        let mut c = QdiscConfig::defaults(Qdisc::FqCodel);
        c.apply_words(
            "target 2ms interval 50ms flows 256 quantum 300 memory_limit 4mb noecn".split(' '),
        )
        .unwrap();
        let QdiscConfig::FqCodel(f) = &c else {
            panic!()
        };
        assert_eq!(f.target, Duration::from_millis(2));
        assert_eq!(f.interval, Duration::from_millis(50));
        assert_eq!(f.flows, 256);
        assert_eq!(f.quantum, Bytes(300));
        assert_eq!(f.memory_limit, Bytes(4 << 20));
        assert!(!f.ecn);
        let e = c.apply_words(["target", "-1ms"]).unwrap_err();
        assert_eq!(e.to_string(), r#"target: "-1ms" must not be negative"#);
        let e = c.apply_words(["tupdate", "1ms"]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(r#"qdisc parameter: "tupdate" is not known"#),
            "{e}"
        );
        let e = c.apply_words(["target"]).unwrap_err();
        assert_eq!(e.to_string(), r#"target: "" needs a value"#);
    }
}
