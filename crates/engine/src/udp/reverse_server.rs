//! The server's half of a reverse (`-R`) UDP test: a thread that sends the
//! client's requested `-t`/`-n` at its `-b` with its `-l`, from the
//! listening socket (a `dup` of it, `sendmmsg` with the client's address),
//! so the datagrams come from the port the client is connected to.
//!
//! As in iperf 2.1.8 (README 5.10, wire/w12) every datagram carries the
//! header with upper `NOUDPFIN` (plus `TRIPTIME` and the server's start
//! time if the client asked for trip times), and the test ends with one
//! FIN datagram (negative id) and no AckFIN exchange.
//! [`ReverseSenders`] is the server driver's set of these threads (also
//! used for the sending half of `--full-duplex`).

use super::UdpError;
use super::clock::Mono;
use super::datagram::{Template, reverse_header_repr, stamp};
use super::json;
use super::mmsg::SendBatch;
use super::report::Reporter;
use super::report::{Event, ServerOutcome};
use super::sender::{SendOutcome, SendPlan, StreamTx, send_stream};
use super::server::{ReverseStart, ServerCore};
use crate::config::{Amount, OutputFormat};
use crate::limits::{ServerLimits, source_key};
use crate::meter::Meter;
use crate::rate_budget::SharedBudget;
use crate::time_budget::SharedTimeBudget;
use bloatlab_metrics::udp_send::UdpSendStats;
use bloatlab_os::clock::realtime_now;
use bloatlab_units::BitRate;
use bloatlab_wire::{Amount as WireAmount, Rate};
use std::collections::HashMap;
use std::net::{IpAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::thread::JoinHandle;
use std::time::Duration;

/// Reverse (`-R`) and full-duplex tests sending at once; more are refused
/// (each costs a thread and the server's upload).
pub const MAX_REVERSE_SENDERS: usize = 64;
/// Of those, the most one source (IPv4 address or IPv6 /64) may run at
/// once (and never more than `--max-streams`): a quarter, so a few sources
/// cannot take every slot.
pub const MAX_REVERSE_SENDERS_PER_SOURCE: usize = 16;

/// Which sender slots are taken, by source (sans-IO: the driver takes a
/// slot before it spawns a sender and gives it back when it ends).
#[derive(Debug, Default)]
pub(crate) struct SenderSlots {
    per_source: HashMap<IpAddr, usize>,
    total: usize,
}

impl SenderSlots {
    /// Takes a slot for `peer`, or says why not (`per_source`: its
    /// source's share).
    pub(crate) fn take(&mut self, peer: IpAddr, per_source: usize) -> Result<(), String> {
        if self.total >= MAX_REVERSE_SENDERS {
            return Err(format!(
                "too many concurrent reverse UDP tests ({MAX_REVERSE_SENDERS})"
            ));
        }
        let n = self.per_source.entry(source_key(peer)).or_insert(0);
        if *n >= per_source {
            return Err(format!(
                "too many concurrent reverse UDP tests from this source ({per_source}, \
                 its share of {MAX_REVERSE_SENDERS})"
            ));
        }
        *n += 1;
        self.total += 1;
        Ok(())
    }

    /// `peer`'s sender ended.
    pub(crate) fn give_back(&mut self, peer: IpAddr) {
        let key = source_key(peer);
        if let Some(n) = self.per_source.get_mut(&key) {
            *n = n.saturating_sub(1);
            self.total = self.total.saturating_sub(1);
            if *n == 0 {
                self.per_source.remove(&key);
            }
        }
    }
}

/// The send plan of a reverse test: the client's amount and rate, this
/// server's `-i`.
pub(crate) fn reverse_plan(
    start: &ReverseStart,
    interval: Option<Duration>,
    max_duration: Duration,
) -> SendPlan {
    let amount = match start.header.amount {
        WireAmount::Time(d) => Amount::Time(d),
        WireAmount::Bytes(b) => Amount::Bytes(b),
    };
    let rate = match start.header.rate {
        Rate::Bits(r) => r,
        // -b Npps: N datagrams of -l bytes per second.
        Rate::PacketsPerSec(p) => BitRate(p.saturating_mul(start.len.0).saturating_mul(8)),
    };
    SendPlan {
        amount,
        interval,
        rate,
        len: start.len,
        deadline: Some(max_duration),
        watch_server: false,
    }
}

/// Starts the sender thread of one reverse test. Its report events go to
/// `sink`; it stops early when `cancel` is set.
pub(crate) fn spawn_sender(
    listener: &UdpSocket,
    start: ReverseStart,
    (interval, max_duration): (Option<Duration>, Duration),
    meter: Meter,
    sink: Sender<Event>,
    cancel: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, UdpError> {
    let sock = listener.try_clone().map_err(|e| UdpError::Io {
        op: "dup (reverse sender)",
        source: e,
    })?;
    let plan = reverse_plan(&start, interval, max_duration);
    let tmpl = Template::new(reverse_header_repr(&start.header, realtime_now()), plan.len)?;
    std::thread::Builder::new()
        .name(format!("udp-reverse-{}", start.id))
        .spawn(move || {
            bloatlab_os::thread::minimise_timer_slack();
            let batch = SendBatch::new(plan.batch_slots(), &tmpl.bytes).with_dest(start.peer);
            let mono = Mono::start();
            let t0 = mono.now();
            let mut tx = StreamTx {
                sock,
                batch,
                stats: UdpSendStats::new(t0),
                seq: 1,
                last_sent: None,
                len: plan.len,
                meter: Some(meter),
            };
            let SendOutcome { partial, total, .. } =
                send_stream(&plan, &mut tx, mono, t0, start.id, &sink, &cancel);
            // One FIN, no AckFIN (NOUDPFIN): the client ends on it or on
            // its own timer.
            let fin = -tx.seq;
            stamp(tx.batch.datagram_mut(0), fin, realtime_now());
            if let Err(e) = tx.batch.send(&tx.sock, 1) {
                tracing::debug!(peer = %start.peer, error = %e, "sending the reverse FIN failed");
            }
            let _ = sink.send(Event::SendFinal {
                stream: start.id,
                partial,
                total,
                // iperf 2.1.8 prints the id after the FIN (w12: "Sent 67").
                sent: fin.unsigned_abs() + 1,
                server: ServerOutcome::NoAckExpected,
            });
        })
        .map_err(|e| UdpError::Io {
            op: "thread spawn",
            source: e,
        })
}

/// The sender threads of reverse tests and their report channel.
pub(crate) struct ReverseSenders {
    interval: Option<Duration>,
    max_duration: Duration,
    /// A source's share of the slots.
    per_source: usize,
    slots: SenderSlots,
    /// `--max-reverse-rate` per source and in all.
    budget: Option<SharedBudget>,
    /// `--max-source-time` (shared with the core).
    time: Option<SharedTimeBudget>,
    events_tx: mpsc::Sender<Event>,
    events: mpsc::Receiver<Event>,
    threads: Vec<(IpAddr, std::thread::JoinHandle<()>)>,
    cancel: Arc<AtomicBool>,
}

impl ReverseSenders {
    pub(crate) fn new(
        interval: Option<Duration>,
        limits: &ServerLimits,
        time: Option<SharedTimeBudget>,
    ) -> ReverseSenders {
        let (events_tx, events) = mpsc::channel();
        ReverseSenders {
            interval,
            max_duration: limits.max_duration,
            per_source: MAX_REVERSE_SENDERS_PER_SOURCE.min(limits.max_streams as usize),
            slots: SenderSlots::default(),
            budget: limits.send_budget().map(|(p, t)| SharedBudget::new(p, t)),
            time,
            events_tx,
            events,
            threads: Vec::new(),
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Spawns a sender for every reverse test the core started.
    pub(crate) fn start(&mut self, sock: &std::net::UdpSocket, core: &mut ServerCore) {
        let slots = &mut self.slots;
        self.threads.retain(|(peer, h)| {
            let done = h.is_finished();
            if done {
                slots.give_back(*peer);
            }
            !done
        });
        for s in core.take_reverse_starts() {
            if let Err(why) = self.slots.take(s.peer.ip(), self.per_source) {
                core.warn(realtime_now(), || {
                    format!("{why}; ignoring the one from {}", s.peer)
                });
                continue;
            }
            let meter = Meter {
                peer: s.peer.ip(),
                rate: self.budget.clone(),
                time: self.time.clone(),
                progress: None,
            };
            let peer = s.peer;
            let sent = spawn_sender(
                sock,
                s,
                (self.interval, self.max_duration),
                meter,
                self.events_tx.clone(),
                self.cancel.clone(),
            );
            match sent {
                Ok(h) => self.threads.push((peer.ip(), h)),
                Err(e) => {
                    self.slots.give_back(peer.ip());
                    core.warn(realtime_now(), || {
                        format!("could not start the reverse UDP sender for {peer}: {e}")
                    });
                }
            }
        }
    }

    /// Prints what the senders reported so far.
    pub(crate) fn report(&mut self, reporter: &mut Reporter, format: OutputFormat) {
        while let Ok(ev) = self.events.try_recv() {
            let done = match &ev {
                Event::SendFinal { stream, .. } => Some(*stream),
                _ => None,
            };
            reporter.handle(ev);
            if let Some(id) = done
                && let Some(r) = reporter.take_stream(id)
                && format == OutputFormat::Json
                && let Some(doc) = json::server_document(id, &r, &reporter.settings().test)
            {
                reporter.settings().out.line(&doc.to_json_pretty());
            }
        }
    }

    pub(crate) fn all_done(&self) -> bool {
        self.threads.iter().all(|(_, h)| h.is_finished())
    }

    /// Ends every sender early and prints their final reports.
    pub(crate) fn stop(mut self, reporter: &mut Reporter, format: OutputFormat) {
        self.cancel.store(true, Ordering::Relaxed);
        for (_, h) in std::mem::take(&mut self.threads) {
            let _ = h.join();
        }
        self.report(reporter, format);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ClientConfig, Direction, Protocol};
    use crate::udp::datagram::header_repr;
    use crate::udp::datagram::parse_header;
    use bloatlab_units::Bytes;

    fn start_for(cfg: &ClientConfig, rate: BitRate) -> ReverseStart {
        let t = Template::new(header_repr(cfg, Duration::ZERO, rate), cfg.effective_len()).unwrap();
        ReverseStart {
            id: 3,
            peer: "127.0.0.1:40000".parse().unwrap(),
            header: parse_header(&t.bytes).unwrap(),
            len: Bytes(t.bytes.len() as u64),
        }
    }

    #[test]
    fn the_plan_follows_the_clients_header() {
        let mut cfg = ClientConfig::new("127.0.0.1");
        cfg.protocol = Protocol::Udp;
        cfg.direction = Direction::Reverse;
        cfg.amount = Amount::Time(Duration::from_secs(3));
        cfg.buffer_len = Some(Bytes(400));
        let p = reverse_plan(
            &start_for(&cfg, BitRate(2_000_000)),
            Some(Duration::from_secs(1)),
            Duration::from_secs(3600),
        );
        assert_eq!(p.amount, Amount::Time(Duration::from_secs(3)));
        assert_eq!(p.rate, BitRate(2_000_000));
        assert_eq!(p.len, Bytes(400));
        assert_eq!(p.interval, Some(Duration::from_secs(1)));
        cfg.amount = Amount::Bytes(Bytes(40_000));
        let p = reverse_plan(
            &start_for(&cfg, BitRate(0)),
            None,
            Duration::from_secs(3600),
        );
        assert_eq!(
            (p.amount, p.rate),
            (Amount::Bytes(Bytes(40_000)), BitRate(0))
        );
    }

    #[test]
    fn a_source_gets_its_share_of_the_sender_slots_and_others_the_rest() {
        // Issue 19 audit: 64 iperf-style -R requests from one source took
        // every sender slot.
        let mut slots = SenderSlots::default();
        let x: IpAddr = [10, 0, 0, 1].into();
        let taken = (0..64).filter(|_| slots.take(x, 16).is_ok()).count();
        assert_eq!(taken, 16);
        let e = slots.take(x, 16).unwrap_err();
        assert!(e.contains("from this source"), "{e}");
        // Three more sources fill the rest; a fifth finds none left.
        for i in 2..=4u8 {
            for _ in 0..16 {
                slots.take(IpAddr::from([10, 0, 0, i]), 16).unwrap();
            }
        }
        let y: IpAddr = [10, 0, 0, 5].into();
        assert!(slots.take(y, 16).unwrap_err().contains("(64)"));
        // A finished sender gives its slot back; IPv6 counts per /64.
        slots.give_back(x);
        slots.take(y, 16).unwrap();
        let mut v6 = SenderSlots::default();
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2".parse().unwrap();
        v6.take(a, 1).unwrap();
        assert!(v6.take(b, 1).is_err());
    }

    #[test]
    fn packets_per_second_become_bits_per_second() {
        let mut cfg = ClientConfig::new("127.0.0.1");
        cfg.protocol = Protocol::Udp;
        cfg.direction = Direction::Reverse;
        cfg.buffer_len = Some(Bytes(100));
        let mut s = start_for(&cfg, BitRate(1));
        s.header.rate = Rate::PacketsPerSec(50);
        assert_eq!(
            reverse_plan(&s, None, Duration::from_secs(3600)).rate,
            BitRate(50 * 100 * 8)
        );
    }
}
