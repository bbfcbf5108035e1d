//! One direction of an emulated link, sans-IO.
//!
//! ```text
//! enqueue(now, pkt) -> loss model -> qdisc -> serializer (rate, overhead, framing) -> delay line -> dequeue(now)
//! ```
//!
//! **Virtual time.** The serializer keeps its own schedule: a packet starts serializing at
//! `start = max(link_free, its arrival)` and the link is busy until
//! `link_free = start + wire_bytes·8/rate`; it is delivered at `link_free + delay (+ jitter)`.
//! The qdisc is asked for each packet at that virtual `start`, so its sojourn times and control
//! laws see the link's schedule, not the caller's wake-up times. A driver that wakes late only
//! delays the hand-off of packets whose delivery time has already come; it never changes the rate
//! or the queueing (mahimahi's `rationalize()` idea, with nanosecond times).
//!
//! **Calling contract.** `now` is a [`Duration`] since an origin the caller picks (a virtual clock
//! in tests, `CLOCK_MONOTONIC` in the driver). Times must not go backwards; a smaller `now` than
//! seen before is treated as the latest time seen. Call [`Link::dequeue`] until it returns `None`,
//! then sleep until [`Link::next_event`] (or until a new packet arrives). Nothing here allocates
//! per packet except the packet buffer the caller hands in.

use crate::capacity::{DelayPlan, Varying};
use crate::config::{JitterDistribution, LinkConfig, Overhead};
use crate::counters::{Counters, PacketBytes};
use crate::loss::LossState;
use crate::packet::FlowMeta;
use crate::qdisc::{DropReason, QueueDiscipline, QueuedPacket, Sink};
use crate::spec::SpecError;
use crate::trace::{TraceEvent, TraceFn, Verdict};
use bloatlab_units::{BitRate, Bytes};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::Duration;

/// Most bytes one link's delay line holds (packets between the serializer and their
/// delivery). A link with a rate holds at most rate x (delay + jitter) there, which
/// [`LinkConfig::validate`] refuses above this bound; a link without a rate drops past it.
pub const MAX_IN_FLIGHT_BYTES: Bytes = Bytes(256 << 20);

/// One direction of an emulated link.
pub struct Link {
    rate: Option<BitRate>,
    overhead: Overhead,
    /// Release packets at the start of their slot ([`LinkConfig::shaper`]).
    shaper: bool,
    delay: Duration,
    jitter: Duration,
    distribution: JitterDistribution,
    qdisc: Box<dyn QueueDiscipline>,
    loss: LossState,
    rng: Xoshiro256PlusPlus,
    hash_key: u64,
    /// The latest time seen (times never go backwards).
    clock: Duration,
    /// Time of the latest enqueue.
    last_input: Duration,
    /// When the serializer finishes the packet it is sending.
    link_free: Duration,
    line: DelayLine,
    /// [`MAX_IN_FLIGHT_BYTES`] (smaller in tests).
    max_in_flight: Bytes,
    counters: Counters,
    trace: Option<TraceFn>,
    /// A schedule or trace driving the serializer instead of `rate` ([`crate::capacity`]).
    /// `None` keeps the fixed-rate path as it always was: one predictable branch per packet.
    varying: Option<Varying>,
    /// A delay schedule setting `delay` for each packet leaving the serializer.
    delay_plan: Option<DelayPlan>,
    /// The delay given to [`Link::new`], which [`Link::set_delay`] values are trims of.
    delay_configured: Duration,
    /// The fixed delay in force before the trim (changed by `set_delay_schedule`).
    delay_base: Duration,
    /// What [`Link::set_delay`] took off the configured delay (the lab's calibration trim),
    /// taken off every delay since, scheduled or not.
    delay_trim: Duration,
    /// Qdiscs replaced by [`Link::set_qdisc`] that still hold packets, oldest first: the
    /// serializer empties them before it serves `qdisc`. Empty unless the qdisc was changed.
    retiring: Vec<Box<dyn QueueDiscipline>>,
    /// No schedule, trace, delay plan or retiring qdisc: the serializer takes the fixed-rate
    /// path, which checks none of them per packet ([`Link::refresh_plain`] keeps it true to
    /// the three fields; bench/emu_instructions.sh counts the path's instructions).
    plain: bool,
    /// The `now` the serializer last ran up to, while nothing that could start another
    /// packet by then (an enqueue, a rate, qdisc or delay change) has happened since
    /// ([`UNSETTLED`] otherwise): [`Link::advance`] to the same `now` again has nothing to do.
    /// A caller draining the link (`while let Some(p) = dequeue(now)`) calls it once per
    /// packet and once more at the end; each of those is now a comparison.
    settled_at: Duration,
}

/// [`Link::settled_at`] when the serializer must run at the next [`Link::advance`].
const UNSETTLED: Duration = Duration::MAX;

impl fmt::Debug for Link {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Link")
            .field("rate", &self.rate)
            .field("delay", &self.delay)
            .field("qdisc", &self.qdisc)
            .field("clock", &self.clock)
            .field("link_free", &self.link_free)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// SplitMix64, to derive independent sub-seeds from the user's seed.
fn splitmix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Link {
    /// Builds a link from a validated config. The same `(cfg, seed)` gives the same behaviour
    /// for the same inputs: loss, jitter, AQM coin flips and the flow-hash key derive from `seed`.
    pub fn new(cfg: &LinkConfig, seed: u64) -> Result<Link, SpecError> {
        cfg.validate()?;
        Ok(Link {
            rate: cfg.rate,
            overhead: cfg.overhead,
            shaper: cfg.shaper,
            delay: cfg.delay,
            jitter: cfg.jitter,
            distribution: cfg.jitter_distribution,
            qdisc: cfg.qdisc.build(splitmix(seed ^ 0x0071_6469_7363), cfg.rate),
            loss: LossState::new(cfg.loss),
            rng: Xoshiro256PlusPlus::seed_from_u64(splitmix(seed)),
            hash_key: splitmix(seed ^ 0x6861_7368),
            clock: Duration::ZERO,
            last_input: Duration::ZERO,
            link_free: Duration::ZERO,
            line: if cfg.allow_reorder && !cfg.jitter.is_zero() {
                DelayLine::Reorder(BinaryHeap::new(), 0)
            } else {
                DelayLine::InOrder(VecDeque::new(), Duration::ZERO)
            },
            max_in_flight: MAX_IN_FLIGHT_BYTES,
            counters: Counters::default(),
            trace: None,
            varying: cfg
                .capacity
                .as_ref()
                .map(|c| Varying::new(c, Duration::ZERO)),
            delay_plan: cfg.delay_schedule.as_ref().map(|s| DelayPlan {
                epoch: Duration::ZERO,
                schedule: s.clone(),
            }),
            delay_configured: cfg.delay,
            delay_base: cfg.delay,
            delay_trim: Duration::ZERO,
            retiring: Vec::new(),
            plain: cfg.capacity.is_none() && cfg.delay_schedule.is_none(),
            settled_at: UNSETTLED,
        })
    }

    /// Offers an IPv4/IPv6 packet (no link-layer header) at `now`. What happens to it is counted:
    /// lost, dropped by the qdisc, or queued for delivery.
    pub fn enqueue(&mut self, now: Duration, packet: Vec<u8>) {
        self.enqueue_waited(now, packet, Duration::ZERO);
    }

    /// [`Link::enqueue`] for a packet that already `waited` in the queues of earlier stages
    /// of a [`crate::Chain`]; [`Link::dequeue_waited`] returns it with this stage's added.
    pub(crate) fn enqueue_waited(&mut self, now: Duration, packet: Vec<u8>, waited: Duration) {
        let now = self.tick(now);
        self.advance(now);
        let len = packet.len() as u64;
        self.counters.enqueued.add(len);
        let meta = FlowMeta::of(&packet, self.hash_key);
        if !meta.parsed {
            self.counters.unparsed += 1;
        }
        let pkt = QueuedPacket {
            data: packet,
            enqueued_at: now,
            meta,
            waited,
        };
        let mut sink = LinkSink {
            counters: &mut self.counters,
            trace: &mut self.trace,
        };
        if self.loss.lose(&mut self.rng) {
            sink.dropped(now, pkt, DropReason::Loss);
        } else {
            self.qdisc.enqueue(now, pkt, &mut sink);
        }
        self.last_input = now;
        self.settled_at = UNSETTLED;
        self.advance(now);
    }

    /// The next packet whose delivery time is at or before `now`, if any.
    pub fn dequeue(&mut self, now: Duration) -> Option<Vec<u8>> {
        self.dequeue_timed(now).map(|(_, data)| data)
    }

    /// Like [`Link::dequeue`], with the packet's virtual delivery time (at or before `now`):
    /// a [`crate::Chain`] hands the packet to its next stage at that time, not at the caller's
    /// (possibly later) wake-up time.
    pub fn dequeue_timed(&mut self, now: Duration) -> Option<(Duration, Vec<u8>)> {
        self.dequeue_waited(now).map(|d| (d.at, d.data))
    }

    /// Like [`Link::dequeue_timed`], with the packet's queueing so far: what it brought to
    /// [`Link::enqueue_waited`] plus its sojourn in this link's qdisc.
    pub(crate) fn dequeue_waited(&mut self, now: Duration) -> Option<Delivered> {
        let now = self.tick(now);
        self.advance(now);
        let d = self.line.pop_due(now)?;
        let len = d.data.len() as u64;
        self.counters.in_transit.sub(len);
        self.counters.dequeued.add(len);
        Some(d)
    }

    /// The earliest time at which [`Link::dequeue`] may return a packet: the next delivery, or,
    /// while the qdisc holds packets, a lower bound on when the next of them can be delivered.
    /// `None` when the link is empty.
    pub fn next_event(&self) -> Option<Duration> {
        let queued = (self.active().backlog().packets > 0).then(|| {
            let start = self.next_start();
            let t = start + self.min_delay().saturating_sub(self.max_negative_jitter());
            match &self.line {
                DelayLine::InOrder(_, last) => t.max(*last),
                DelayLine::Reorder(..) => t,
            }
        });
        match (self.line.next_release(), queued) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Everything this direction did so far.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// Installs (or removes, with `None`) a per-packet trace callback. It is called for every
    /// drop, CE mark and departure from the qdisc, with virtual times.
    pub fn set_trace(&mut self, trace: Option<TraceFn>) {
        self.trace = trace;
    }

    /// The configured rate (`None` = unlimited).
    pub fn rate(&self) -> Option<BitRate> {
        self.rate
    }

    /// The one-way delay packets get when they leave the serializer now.
    pub fn delay(&self) -> Duration {
        self.delay
    }

    /// Changes the one-way delay for packets that leave the serializer from now on (the lab
    /// takes its measured forwarding overhead out of the configured delay this way). Packets
    /// already in the delay line keep their delivery time, and without `reorder` a later packet
    /// still never overtakes an earlier one.
    ///
    /// The change is kept as a trim of the configured delay (configured less `delay`), so it
    /// also applies to a delay schedule and to delays set later with
    /// [`Link::set_delay_schedule`] (`lab set` on a calibrated lab keeps the calibration).
    pub fn set_delay(&mut self, delay: Duration) {
        if self.delay_plan.is_none() && delay > self.delay_configured {
            // Longer than configured: not a trim, a new fixed delay.
            self.delay_configured = delay;
            self.delay_base = delay;
        }
        self.delay_trim = self.delay_configured.saturating_sub(delay);
        self.delay = match &self.delay_plan {
            Some(p) => p.at(self.clock),
            None => self.delay_base,
        }
        .saturating_sub(self.delay_trim);
    }

    /// Changes the one-way delay at `now` to a fixed `delay` or, with `schedule`, to a delay
    /// schedule whose time starts at `now` (`lab set --stage-delay`). Packets already in the
    /// delay line keep their delivery time. A trim made with [`Link::set_delay`] is kept.
    pub fn set_delay_schedule(
        &mut self,
        now: Duration,
        delay: Duration,
        schedule: Option<std::sync::Arc<crate::Schedule<Duration>>>,
    ) {
        let now = self.tick(now);
        self.advance(now);
        self.delay_plan = schedule.map(|schedule| DelayPlan {
            epoch: now,
            schedule,
        });
        self.refresh_plain();
        self.settled_at = UNSETTLED;
        self.delay_base = match &self.delay_plan {
            Some(p) => p.at(now),
            None => delay,
        };
        self.delay = self.delay_base.saturating_sub(self.delay_trim);
    }

    /// The shortest delay a packet leaving the serializer can get.
    fn min_delay(&self) -> Duration {
        match &self.delay_plan {
            None => self.delay,
            Some(p) => p
                .schedule
                .steps()
                .iter()
                .map(|s| s.1)
                .min()
                .unwrap_or_default()
                .saturating_sub(self.delay_trim),
        }
    }

    /// Changes the rate at `now` (`None` = unlimited): the serializer first runs up to `now` at
    /// the old rate, so a packet that started serializing before keeps its schedule; every
    /// packet that starts from `now` on is serialized at the new rate. A qdisc with its own
    /// shaper following the link's rate (CAKE without `bandwidth`) follows the change.
    /// `bloatlab tune` moves a shaper stage's rate this way while the lab runs.
    ///
    /// A schedule or trace the link followed is replaced by the fixed rate.
    pub fn set_rate(&mut self, now: Duration, rate: Option<BitRate>) {
        self.set_capacity(now, rate, None);
    }

    /// Like [`Link::set_rate`], to a schedule or trace when `capacity` is given (its time
    /// starting at `now`; `rate` is then ignored and the capacity's nominal rate shown).
    pub fn set_capacity(
        &mut self,
        now: Duration,
        rate: Option<BitRate>,
        capacity: Option<&crate::Capacity>,
    ) {
        let now = self.tick(now);
        self.advance(now);
        self.varying = capacity.map(|c| Varying::new(c, now));
        self.refresh_plain();
        self.settled_at = UNSETTLED;
        let rate = match &self.varying {
            Some(v) => Some(v.rate_at(now)),
            None => rate,
        };
        self.rate = rate;
        self.qdisc.set_link_rate(rate);
        for q in &mut self.retiring {
            q.set_link_rate(rate);
        }
        self.advance(now);
    }

    /// Replaces the queue discipline at `now` (`lab set --stage-qdisc`). Packets queued in the
    /// old one are not lost: the serializer sends them first, under the old qdisc's rules, and
    /// packets arriving from `now` on queue in the new one. Refuses a config that does not
    /// validate.
    pub fn set_qdisc(&mut self, now: Duration, cfg: &crate::QdiscConfig) -> Result<(), SpecError> {
        cfg.validate()?;
        let now = self.tick(now);
        self.advance(now);
        let seed = splitmix(self.hash_key ^ now.as_nanos() as u64);
        let old = std::mem::replace(&mut self.qdisc, cfg.build(seed, self.rate));
        if old.backlog().packets > 0 {
            self.retiring.push(old);
            self.refresh_plain();
        }
        self.settled_at = UNSETTLED;
        self.advance(now);
        Ok(())
    }

    /// The qdisc the serializer serves now: the oldest replaced one that still holds packets,
    /// else the current one.
    #[inline]
    fn active(&self) -> &dyn QueueDiscipline {
        // The common case first: no qdisc was ever replaced (the per-packet path of a link
        // that `lab set --stage-qdisc` never touched stays as short as before).
        if self.retiring.is_empty() {
            return self.qdisc.as_ref();
        }
        match self.retiring.iter().find(|q| q.backlog().packets > 0) {
            Some(q) => q.as_ref(),
            None => self.qdisc.as_ref(),
        }
    }

    fn tick(&mut self, now: Duration) -> Duration {
        self.clock = self.clock.max(now);
        self.clock
    }

    /// When the serializer could take the next packet from the qdisc.
    fn next_start(&self) -> Duration {
        self.next_start_after(self.active().ready_at())
    }

    /// [`Link::next_start`] for a qdisc that is ready at `ready`.
    #[inline]
    fn next_start_after(&self, ready: Duration) -> Duration {
        let t = self.link_free.max(self.last_input).max(ready);
        match &self.varying {
            None => t,
            // A trace's next opportunity: the wait for it is queueing (the packet is still
            // in the qdisc, and its sojourn counts it).
            Some(v) => v.start(t),
        }
    }

    fn max_negative_jitter(&self) -> Duration {
        match self.distribution {
            JitterDistribution::Uniform => self.jitter,
            JitterDistribution::Normal => self.jitter * 4,
        }
    }

    /// Runs the serializer in virtual time up to `now`: every packet that could have started
    /// serializing by `now` leaves the qdisc at its virtual start time and enters the delay line.
    fn advance(&mut self, now: Duration) {
        if now == self.settled_at {
            return;
        }
        self.settled_at = now;
        let b = if self.plain {
            self.advance_qdisc::<true>(now);
            self.qdisc.backlog()
        } else {
            self.advance_varying(now)
        };
        self.counters.backlog = PacketBytes {
            packets: b.packets,
            bytes: b.bytes,
        };
    }

    /// [`Link::advance`] off the fixed-rate path (out of line, so that path stays short);
    /// returns the backlog of every qdisc.
    #[inline(never)]
    fn advance_varying(&mut self, now: Duration) -> crate::qdisc::Backlog {
        if self.retiring.is_empty() {
            self.advance_qdisc::<false>(now);
        } else {
            self.advance_retiring(now);
        }
        let mut b = self.qdisc.backlog();
        for q in &self.retiring {
            b = b.plus(q.backlog());
        }
        b
    }

    /// Recomputes [`Link::plain`] after a schedule, trace, delay plan or qdisc change.
    fn refresh_plain(&mut self) {
        self.plain =
            self.varying.is_none() && self.delay_plan.is_none() && self.retiring.is_empty();
    }

    /// [`Link::advance`] with one qdisc (none replaced, or all replaced ones drained).
    /// `PLAIN`: [`Link::plain`] holds, so the schedule, trace and delay plan are not looked
    /// at: the fixed-rate path, as short as before they existed but for the one flag
    /// (bench/emu_instructions.sh counts its instructions per packet).
    #[inline(always)]
    fn advance_qdisc<const PLAIN: bool>(&mut self, now: Duration) {
        while self.qdisc.backlog().packets > 0 {
            let ready = self.qdisc.ready_at();
            let start = if PLAIN {
                self.link_free.max(self.last_input).max(ready)
            } else {
                self.next_start_after(ready)
            };
            if start > now {
                break;
            }
            let mut sink = LinkSink {
                counters: &mut self.counters,
                trace: &mut self.trace,
            };
            let Some(pkt) = self.qdisc.dequeue(start, &mut sink) else {
                // Everything left was dropped (or the qdisc's shaper is not ready yet).
                break;
            };
            self.serialize::<PLAIN>(start, pkt);
        }
    }

    /// [`Link::advance`] while replaced qdiscs still hold packets: the oldest is served first.
    fn advance_retiring(&mut self, now: Duration) {
        loop {
            self.retiring.retain(|q| q.backlog().packets > 0);
            if self.retiring.is_empty() {
                self.refresh_plain();
            }
            if self.active().backlog().packets == 0 {
                break;
            }
            let start = self.next_start();
            if start > now {
                break;
            }
            let mut sink = LinkSink {
                counters: &mut self.counters,
                trace: &mut self.trace,
            };
            let q = match self.retiring.first_mut() {
                Some(q) => q,
                None => &mut self.qdisc,
            };
            let Some(pkt) = q.dequeue(start, &mut sink) else {
                break;
            };
            self.serialize::<false>(start, pkt);
        }
    }

    /// Puts a packet the qdisc released at `start` on the wire: counted, traced, serialized
    /// at the link's rate (or its schedule's or trace's) and queued in the delay line.
    /// `PLAIN` as in [`Link::advance_qdisc`].
    #[inline(always)]
    fn serialize<const PLAIN: bool>(&mut self, start: Duration, pkt: QueuedPacket) {
        let len = pkt.len();
        // The delay line holds what is in flight on the wire: bounded like a real link's
        // (rate x delay, which `LinkConfig::validate` caps) and, on a link without a rate,
        // by MAX_IN_FLIGHT_BYTES: past it a packet is dropped as an overflow, as a full
        // qdisc would (issue 19: --delay 1000s under a 300 Mbit/s flow grew without bound).
        if self.counters.in_transit.bytes.0 + len > self.max_in_flight.0 {
            self.counters.dropped.overflow.add(len);
            if let Some(trace) = self.trace.as_mut() {
                trace(&TraceEvent {
                    time: start,
                    flow: pkt.meta.flow,
                    size: Bytes(len),
                    sojourn: None,
                    verdict: Verdict::Dropped(DropReason::Overflow),
                });
            }
            return;
        }
        let sojourn = start.saturating_sub(pkt.enqueued_at);
        self.counters.sojourn.record(sojourn);
        if let Some(trace) = self.trace.as_mut() {
            trace(&TraceEvent {
                time: start,
                flow: pkt.meta.flow,
                size: Bytes(len),
                sojourn: Some(sojourn),
                verdict: Verdict::Sent,
            });
        }
        let wire = self.overhead.wire_bytes(len);
        match self.varying.as_mut().filter(|_| !PLAIN) {
            None => {
                let serialization = self
                    .rate
                    .and_then(|r| r.transmit_time(Bytes(wire)))
                    .unwrap_or(Duration::ZERO);
                self.link_free = start + serialization;
            }
            Some(v) => {
                self.link_free = v.send(start, wire);
                // The step in force (status shows it; CAKE's own shaper follows it).
                let r = Some(v.rate_at(start));
                if r != self.rate {
                    self.rate = r;
                    self.qdisc.set_link_rate(r);
                }
            }
        }
        // A store-and-forward link delivers a packet after its last bit; a token-bucket
        // shaper sends it at wire speed when its slot starts and makes the next packet
        // wait out the slot instead (the same rate, another departure time).
        let sent = if self.shaper { start } else { self.link_free };
        if !PLAIN && let Some(p) = &self.delay_plan {
            self.delay = p.at(sent).saturating_sub(self.delay_trim);
        }
        let release = sent + self.sample_delay();
        self.line.push(Delivered {
            at: release,
            waited: pkt.waited + sojourn,
            data: pkt.data,
        });
        self.counters.in_transit.add(len);
    }

    fn sample_delay(&mut self) -> Duration {
        if self.jitter.is_zero() {
            return self.delay;
        }
        let j = self.jitter.as_secs_f64();
        let offset = match self.distribution {
            JitterDistribution::Uniform => (self.rng.random::<f64>() * 2.0 - 1.0) * j,
            JitterDistribution::Normal => {
                // Box-Muller; u1 in (0, 1] so ln is finite.
                let u1 = 1.0 - self.rng.random::<f64>();
                let u2 = self.rng.random::<f64>();
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                z.clamp(-4.0, 4.0) * j
            }
        };
        let d = (self.delay.as_secs_f64() + offset).max(0.0);
        Duration::from_nanos((d * 1e9).round() as u64)
    }
}

/// A packet leaving a link: its delivery time, its queueing so far (every stage's sojourn
/// in a [`crate::Chain`]) and its bytes.
pub(crate) struct Delivered {
    pub(crate) at: Duration,
    pub(crate) waited: Duration,
    pub(crate) data: Vec<u8>,
}

/// Packets between the serializer and the output, ordered by delivery time.
enum DelayLine {
    /// Delivery times made monotonic (`at = max(at, last at)`); the second field is the last
    /// delivery time.
    InOrder(VecDeque<Delivered>, Duration),
    /// netem-style: jitter may reorder. The second field is a sequence number breaking ties in
    /// arrival order.
    Reorder(BinaryHeap<Reverse<Pending>>, u64),
}

struct Pending {
    seq: u64,
    packet: Delivered,
}

impl PartialEq for Pending {
    fn eq(&self, o: &Self) -> bool {
        (self.packet.at, self.seq) == (o.packet.at, o.seq)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pending {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.packet.at, self.seq).cmp(&(o.packet.at, o.seq))
    }
}

impl DelayLine {
    fn push(&mut self, mut packet: Delivered) {
        match self {
            DelayLine::InOrder(q, last) => {
                packet.at = packet.at.max(*last);
                *last = packet.at;
                q.push_back(packet);
            }
            DelayLine::Reorder(h, seq) => {
                *seq += 1;
                h.push(Reverse(Pending { seq: *seq, packet }));
            }
        }
    }

    fn next_release(&self) -> Option<Duration> {
        match self {
            DelayLine::InOrder(q, _) => q.front().map(|p| p.at),
            DelayLine::Reorder(h, _) => h.peek().map(|Reverse(p)| p.packet.at),
        }
    }

    fn pop_due(&mut self, now: Duration) -> Option<Delivered> {
        if self.next_release()? > now {
            return None;
        }
        match self {
            DelayLine::InOrder(q, _) => q.pop_front(),
            DelayLine::Reorder(h, _) => h.pop().map(|Reverse(p)| p.packet),
        }
    }
}

/// Counts and traces what the qdisc reports.
struct LinkSink<'a> {
    counters: &'a mut Counters,
    trace: &'a mut Option<TraceFn>,
}

impl Sink for LinkSink<'_> {
    fn dropped(&mut self, now: Duration, pkt: QueuedPacket, reason: DropReason) {
        let len = pkt.len();
        match reason {
            DropReason::Overflow => self.counters.dropped.overflow.add(len),
            DropReason::Aqm => self.counters.dropped.aqm.add(len),
            DropReason::Loss => self.counters.dropped.loss.add(len),
        }
        if let Some(trace) = self.trace.as_mut() {
            let queued = reason != DropReason::Loss;
            trace(&TraceEvent {
                time: now,
                flow: pkt.meta.flow,
                size: Bytes(len),
                sojourn: queued.then(|| now.saturating_sub(pkt.enqueued_at)),
                verdict: Verdict::Dropped(reason),
            });
        }
    }

    fn marked(&mut self, now: Duration, pkt: &QueuedPacket) {
        self.counters.ce_marked.add(pkt.len());
        if let Some(trace) = self.trace.as_mut() {
            trace(&TraceEvent {
                time: now,
                flow: pkt.meta.flow,
                size: Bytes(pkt.len()),
                sojourn: Some(now.saturating_sub(pkt.enqueued_at)),
                verdict: Verdict::Marked,
            });
        }
    }
}

#[cfg(test)]
mod in_flight_tests {
    use super::*;

    fn ipv4(len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[9] = 17;
        p
    }

    #[test]
    fn a_link_without_a_rate_holds_at_most_its_bound_in_flight_and_drops_the_rest() {
        let cfg = LinkConfig {
            delay: Duration::from_secs(1000),
            ..LinkConfig::default()
        };
        let mut l = Link::new(&cfg, 1).unwrap();
        l.max_in_flight = Bytes(150_000);
        for i in 0..1000u64 {
            l.enqueue(Duration::from_micros(i), ipv4(1500));
            assert!(l.counters.in_transit.bytes.0 <= 150_000);
        }
        let c = l.counters();
        assert_eq!(c.in_transit.packets, 100);
        assert_eq!(c.dropped.overflow.packets, 900);
        assert_eq!(c.conservation_gap(), (0, 0));
        // Once delivered, room again.
        let mut n = 0;
        while l.dequeue(Duration::from_secs(1001)).is_some() {
            n += 1;
        }
        assert_eq!(n, 100);
        l.enqueue(Duration::from_secs(1002), ipv4(1500));
        assert_eq!(l.counters().in_transit.packets, 1);
    }

    #[test]
    fn a_rate_times_delay_above_the_bound_is_refused_when_configured() {
        let mut cfg = LinkConfig {
            rate: Some(BitRate(300_000_000)),
            delay: Duration::from_secs(1000),
            ..LinkConfig::default()
        };
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.contains("in flight") && e.contains("256 MiB"), "{e}");
        // 300 Mbit/s x 5 s = 179 MiB: a link one could build.
        cfg.delay = Duration::from_secs(5);
        cfg.validate().unwrap();
    }
}
