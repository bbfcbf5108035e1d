//! CoDel, "Controlled Delay Active Queue Management", RFC 8289.
//!
//! The state machine follows RFC 8289 §5 (`dodequeue`, `dequeue`, the control law
//! `drop_next = t + interval / sqrt(count)`) with Linux's refinements (include/net/codel_impl.h):
//! `maxpacket` is the largest packet seen rather than a constant, ECN-capable packets are marked
//! CE instead of dropped when `ecn` is on, and an optional `ce_threshold` marks packets whose
//! sojourn exceeds it. [`CodelVars`] is also the per-flow state of FQ-CoDel (RFC 8290 §4.2).
//!
//! Defaults (tc-codel(8)): target 5 ms, interval 100 ms, limit 1000 packets, ECN off.

use super::{Backlog, DropReason, QueueDiscipline, QueuedPacket, Sink, ecn_flag};
use crate::packet::{is_ect, set_ce};
use crate::spec::{
    Limit, Problem, SpecError, format_time, parse_limit, parse_positive_time, parse_time,
};
use std::collections::VecDeque;
use std::time::Duration;

/// CoDel parameters.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct CodelConfig {
    /// Hard queue limit. Default 1000 packets (Linux).
    pub limit: Limit,
    /// Acceptable standing queue delay. Default 5 ms (RFC 8289 §4.4).
    #[serde(serialize_with = "crate::spec::ser_time")]
    pub target: Duration,
    /// Sliding window for the minimum sojourn, about a worst-case RTT. Default 100 ms (RFC 8289 §4.3).
    #[serde(serialize_with = "crate::spec::ser_time")]
    pub interval: Duration,
    /// Mark ECT packets CE instead of dropping them. Default off (Linux `codel`).
    pub ecn: bool,
    /// Mark (never drop) every ECT packet whose sojourn exceeds this. Default none.
    #[serde(serialize_with = "crate::spec::ser_opt_time")]
    pub ce_threshold: Option<Duration>,
}

impl Default for CodelConfig {
    fn default() -> Self {
        CodelConfig {
            limit: Limit::Packets(1000),
            target: Duration::from_millis(5),
            interval: Duration::from_millis(100),
            ecn: false,
            ce_threshold: None,
        }
    }
}

impl CodelConfig {
    pub(crate) fn set(&mut self, key: &str, value: &str) -> Result<bool, SpecError> {
        if let Some(on) = ecn_flag(key) {
            self.ecn = on;
            return Ok(true);
        }
        match key {
            "limit" => self.limit = parse_limit(value)?,
            "target" => self.target = parse_time(value)?,
            "interval" => self.interval = parse_positive_time(value)?,
            "ce_threshold" => self.ce_threshold = Some(parse_time(value)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    pub(crate) fn validate(&self) -> Result<(), SpecError> {
        validate_target_interval(self.target, self.interval)
    }

    pub(crate) fn params(&self) -> CodelParams {
        CodelParams {
            target: self.target,
            interval: self.interval,
            ecn: self.ecn,
            ce_threshold: self.ce_threshold,
        }
    }
}

pub(crate) fn validate_target_interval(
    target: Duration,
    interval: Duration,
) -> Result<(), SpecError> {
    if target >= interval {
        return Err(SpecError::new(
            "target",
            format_time(target),
            Problem::Conflict(format!(
                "target must be below interval {}",
                format_time(interval)
            )),
        ));
    }
    Ok(())
}

/// The constants of the control law, shared by all flows of a qdisc.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CodelParams {
    /// See [`CodelConfig::target`].
    pub target: Duration,
    /// See [`CodelConfig::interval`].
    pub interval: Duration,
    /// See [`CodelConfig::ecn`].
    pub ecn: bool,
    /// See [`CodelConfig::ce_threshold`].
    pub ce_threshold: Option<Duration>,
}

/// The state of one CoDel instance (one per flow in FQ-CoDel).
#[derive(Debug, Clone, Default)]
pub struct CodelVars {
    /// Drops (or marks) since entering the dropping state, decayed on re-entry (RFC 8289 §5.5).
    pub count: u32,
    last_count: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// When the sojourn time first stayed above target for an interval; None when below.
    first_above_time: Option<Duration>,
    /// The next scheduled drop while dropping.
    drop_next: Duration,
}

/// Where CoDel pulls packets from: a whole FIFO (CoDel) or one flow's queue (FQ-CoDel).
pub trait CodelSource {
    /// Removes the head packet.
    fn pop(&mut self) -> Option<QueuedPacket>;
    /// Bytes left in the *whole* qdisc after the pop (Linux compares this with maxpacket).
    fn backlog_bytes(&self) -> u64;
    /// The largest packet seen so far (RFC 8289's MAXPACKET, tracked as Linux does).
    fn max_packet(&self) -> u64;
}

/// `t + interval / sqrt(count)` (RFC 8289 §5.5, `control_law`).
fn control_law(t: Duration, interval: Duration, count: u32) -> Duration {
    let step = interval.as_secs_f64() / f64::from(count.max(1)).sqrt();
    t + Duration::from_nanos((step * 1e9).round() as u64)
}

impl CodelVars {
    /// RFC 8289 `dodequeue`: is the head packet ok to drop? `None` (queue ran empty) is not.
    fn ok_to_drop(
        &mut self,
        p: &CodelParams,
        now: Duration,
        pkt: Option<&QueuedPacket>,
        src: &dyn CodelSource,
    ) -> bool {
        let Some(pkt) = pkt else {
            self.first_above_time = None;
            return false;
        };
        let sojourn = now.saturating_sub(pkt.enqueued_at);
        if sojourn < p.target || src.backlog_bytes() <= src.max_packet() {
            // Went below target (or too little queued to matter): leave the "above" state.
            self.first_above_time = None;
            return false;
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + p.interval);
                false
            }
            Some(t) => now >= t,
        }
    }

    /// RFC 8289 `dequeue` (§5.3), in Linux's arrangement (codel_impl.h). Returns the packet to
    /// send, having dropped or marked as the control law demands.
    pub fn dequeue(
        &mut self,
        p: &CodelParams,
        now: Duration,
        src: &mut dyn CodelSource,
        sink: &mut dyn Sink,
    ) -> Option<QueuedPacket> {
        let Some(head) = src.pop() else {
            self.dropping = false;
            return None;
        };
        let drop = self.ok_to_drop(p, now, Some(&head), src);
        let mut pkt = Some(head);
        if self.dropping {
            if !drop {
                // Sojourn went below target: leave the dropping state.
                self.dropping = false;
            } else {
                while self.dropping && now >= self.drop_next {
                    let Some(mut cur) = pkt.take() else { break };
                    self.count = self.count.saturating_add(1);
                    if p.ecn && set_ce(&mut cur.data) {
                        sink.marked(now, &cur);
                        self.drop_next = control_law(self.drop_next, p.interval, self.count);
                        return self.finish(p, now, cur, sink);
                    }
                    sink.dropped(now, cur, DropReason::Aqm);
                    pkt = src.pop();
                    if self.ok_to_drop(p, now, pkt.as_ref(), src) {
                        self.drop_next = control_law(self.drop_next, p.interval, self.count);
                    } else {
                        self.dropping = false;
                    }
                }
            }
        } else if drop {
            // Enter the dropping state (RFC 8289 §5.4).
            if let Some(mut cur) = pkt.take() {
                if p.ecn && set_ce(&mut cur.data) {
                    sink.marked(now, &cur);
                    pkt = Some(cur);
                } else {
                    sink.dropped(now, cur, DropReason::Aqm);
                    pkt = src.pop();
                    // Called for its effect on first_above_time, as in Linux.
                    self.ok_to_drop(p, now, pkt.as_ref(), src);
                }
            }
            self.dropping = true;
            // Re-entering soon after leaving resumes near the old drop rate: "now - drop_next <
            // 16 * interval", with a negative difference counting as small.
            let delta = self.count.saturating_sub(self.last_count);
            let recent = now < self.drop_next + p.interval * 16;
            self.count = if delta > 1 && recent { delta } else { 1 };
            self.last_count = self.count;
            self.drop_next = control_law(now, p.interval, self.count);
        }
        let pkt = pkt?;
        self.finish(p, now, pkt, sink)
    }

    /// Linux's `ce_threshold`: mark (never drop) ECT packets queued longer than the threshold.
    fn finish(
        &mut self,
        p: &CodelParams,
        now: Duration,
        mut pkt: QueuedPacket,
        sink: &mut dyn Sink,
    ) -> Option<QueuedPacket> {
        if let Some(th) = p.ce_threshold
            && now.saturating_sub(pkt.enqueued_at) > th
            && is_ect(&pkt.data)
            && set_ce(&mut pkt.data)
        {
            sink.marked(now, &pkt);
        }
        Some(pkt)
    }
}

/// The CoDel qdisc: one FIFO, one [`CodelVars`].
#[derive(Debug)]
pub struct Codel {
    cfg: CodelConfig,
    params: CodelParams,
    vars: CodelVars,
    queue: FifoSource,
}

/// A FIFO with the bookkeeping [`CodelSource`] needs.
#[derive(Debug, Default)]
pub(crate) struct FifoSource {
    pub(crate) queue: VecDeque<QueuedPacket>,
    pub(crate) backlog: Backlog,
    pub(crate) max_packet: u64,
}

impl CodelSource for FifoSource {
    fn pop(&mut self) -> Option<QueuedPacket> {
        let pkt = self.queue.pop_front()?;
        self.backlog.sub(pkt.len());
        Some(pkt)
    }
    fn backlog_bytes(&self) -> u64 {
        self.backlog.bytes.0
    }
    fn max_packet(&self) -> u64 {
        self.max_packet
    }
}

impl Codel {
    /// An empty CoDel queue.
    pub fn new(cfg: CodelConfig) -> Codel {
        Codel {
            params: cfg.params(),
            cfg,
            vars: CodelVars::default(),
            queue: FifoSource::default(),
        }
    }

    /// The control state, for tests and metrics.
    pub fn vars(&self) -> &CodelVars {
        &self.vars
    }
}

impl QueueDiscipline for Codel {
    fn enqueue(&mut self, now: Duration, pkt: QueuedPacket, sink: &mut dyn Sink) {
        if self.queue.backlog.would_exceed(self.cfg.limit, pkt.len()) {
            sink.dropped(now, pkt, DropReason::Overflow);
            return;
        }
        self.queue.max_packet = self.queue.max_packet.max(pkt.len());
        self.queue.backlog.add(pkt.len());
        self.queue.queue.push_back(pkt);
    }

    fn dequeue(&mut self, now: Duration, sink: &mut dyn Sink) -> Option<QueuedPacket> {
        self.vars.dequeue(&self.params, now, &mut self.queue, sink)
    }

    fn backlog(&self) -> Backlog {
        self.queue.backlog
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::qdisc::tests_support::{Recorder, udp};

    #[test]
    fn control_law_spacing_shrinks_with_sqrt_count() {
        let i = Duration::from_millis(100);
        assert_eq!(
            control_law(Duration::ZERO, i, 1),
            Duration::from_millis(100)
        );
        assert_eq!(control_law(Duration::ZERO, i, 4), Duration::from_millis(50));
        assert_eq!(
            control_law(Duration::from_secs(1), i, 100),
            Duration::from_millis(1010)
        );
    }

    /// A queue kept 20 ms deep (above the 5 ms target) for long enough: CoDel must start dropping
    /// exactly one interval after the sojourn first exceeded target, then at interval/sqrt(n).
    #[test]
    fn drops_start_after_one_interval_above_target() {
        let mut q = Codel::new(CodelConfig::default());
        let mut rec = Recorder::default();
        let ms = Duration::from_millis;
        // Enqueue a packet every 1 ms and dequeue one every 1 ms, each having waited 20 ms.
        for i in 0..20 {
            q.enqueue(ms(i), udp(1, 1500, ms(i)), &mut rec);
        }
        let mut drops_at = vec![];
        for t in 20..400u64 {
            q.enqueue(ms(t), udp(1, 1500, ms(t)), &mut rec);
            let before = rec.aqm_drops;
            let _ = q.dequeue(ms(t), &mut rec);
            if rec.aqm_drops > before {
                drops_at.push(t);
            }
        }
        // Sojourn first above target at t=20 -> first_above_time = 120 ms -> first drop at 120 ms,
        // entering the dropping state with count 1: next drop at 120 + 100/sqrt(1) = 220, then
        // 220 + 100/sqrt(2) = 290.7 (-> 291), + 100/sqrt(3) = 348.4 (-> 349), + 100/sqrt(4) = 398.4 (-> 399).
        assert_eq!(drops_at, vec![120, 220, 291, 349, 399]);
        assert_eq!(q.vars().count, 5);
        assert!(q.vars().dropping);
    }

    #[test]
    fn ecn_marks_instead_of_dropping() {
        let mut q = Codel::new(CodelConfig {
            ecn: true,
            ..CodelConfig::default()
        });
        let mut rec = Recorder::default();
        let ms = Duration::from_millis;
        for t in 0..400u64 {
            let mut p = udp(1, 1500, ms(t));
            p.data[1] = 0x02; // ECT(0); checksum irrelevant here
            q.enqueue(ms(t), p, &mut rec);
            if t >= 20 {
                let _ = q.dequeue(ms(t), &mut rec);
            }
        }
        assert_eq!(rec.aqm_drops, 0);
        assert!(rec.marks >= 5, "marks = {}", rec.marks);
    }

    #[test]
    fn limit_overflow_is_reported() {
        let mut q = Codel::new(CodelConfig {
            limit: Limit::Packets(3),
            ..CodelConfig::default()
        });
        let mut rec = Recorder::default();
        for _ in 0..5 {
            q.enqueue(Duration::ZERO, udp(1, 100, Duration::ZERO), &mut rec);
        }
        assert_eq!(rec.overflow_drops, 2);
        assert_eq!(q.backlog().packets, 3);
    }
}
