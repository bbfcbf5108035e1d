//! Sans-IO UDP flow table: which flow does a datagram belong to, and what
//! should the server do with it?
//!
//! iperf 2 has no control channel for UDP: a flow *is* a source address
//! (the server's 5-tuple demux, iperf 2.1.8 `Listener::udp_accept`). This
//! table reproduces that model on one unconnected socket:
//!
//! * the first datagram with a non-negative id from an unknown source starts
//!   a flow ([`Verdict::Start`]);
//! * a negative id from an unknown source is the FIN of a flow we no longer
//!   know (an old test, a server restart) and is dropped
//!   ([`Verdict::StaleFin`]), as iperf 2 does;
//! * a negative id from a receiving flow is its FIN ([`Verdict::Fin`]): the
//!   driver finalizes the statistics and hands the AckFIN bytes back with
//!   [`FlowTable::ack`];
//! * while a flow is acking, every datagram from it (typically the client
//!   re-sending its FIN because our AckFIN was lost) triggers a resend, up to
//!   [`MAX_ACK_SENDS`] sends in all; the flow is forgotten after
//!   [`ACK_QUIET`] of silence (iperf 2.1.8 `write_UDP_AckFIN`: 250 ms
//!   silence windows, at most 10 sends);
//! * a receiving flow silent for `idle_timeout` is finalized without an ack
//!   ([`Expired::Idle`]): a client that died must not hold state forever;
//! * a receiving flow past its deadline (its `-t`, or `--max-duration`, plus a
//!   grace) is ended by the server with [`FlowTable::end`]: its AckFIN is
//!   ready, the client's further data is absorbed ([`Verdict::Ignore`]) so
//!   it cannot start a new flow, and its FIN gets the AckFIN as usual; the
//!   entry leaves after `idle_timeout` of silence (issue 19);
//! * flows are counted per source ([`FlowTable::from_source`], an IPv4
//!   address or an IPv6 /64) so a server can cap what one source holds;
//! * a full table makes room by source fairness and age
//!   ([`FlowTable::evict_for`]): a new source takes the place of the oldest
//!   flow of the source holding most, so a few sources refreshing a full
//!   table with a trickle cannot keep a real client out (issue 19, attack 2:
//!   ~98 KB/s from 17 sources held all 4,096 flows); when no source holds
//!   more than its share (4,096 sources at one flow each), the flow silent
//!   longest goes, if silent for [`EVICT_SILENCE`]: holding the table then
//!   takes a datagram per flow per second.
//!
//! The table owns per-flow driver state `F` (statistics, names), so its
//! lifetime matches the flow's. Time is whatever monotonic-enough clock the
//! driver passes as `now` (the server uses the receive-timestamp clock).

use crate::limits::source_key;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// Silence after an AckFIN send that ends a flow (iperf 2.1.8: 250 ms).
pub const ACK_QUIET: Duration = Duration::from_millis(250);
/// AckFIN sends per flow, the first included (iperf 2.1.8 loops 10 times).
pub const MAX_ACK_SENDS: u32 = 10;
/// A full table with no source above its share evicts the flow silent
/// longest, if silent at least this long (see [`FlowTable::evict_for`]).
pub const EVICT_SILENCE: Duration = Duration::from_secs(1);

/// What to do with one datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a, F> {
    /// Unknown source, non-negative id: a new flow. Create its state and
    /// [`FlowTable::insert`] it, then account this datagram to it.
    Start,
    /// A data datagram of a receiving flow, whose state is handed back
    /// (one hash lookup per datagram on the hot path).
    Data(&'a mut F),
    /// The FIN of a receiving flow: finalize, then [`FlowTable::ack`].
    Fin,
    /// Datagram from a flow that is acking: resend these AckFIN bytes.
    ResendAck(&'a [u8]),
    /// From an acking flow that already used all its sends: ignore.
    Ignore,
    /// Negative id from an unknown source: drop it.
    StaleFin,
}

/// Why a flow left the table in [`FlowTable::expire`].
#[derive(Debug, PartialEq, Eq)]
pub enum Expired {
    /// No datagram for `idle_timeout` while receiving, and no FIN: finalize
    /// the statistics (no ack can be sent).
    Idle,
    /// The ack phase ended (silence or all sends used). Already reported.
    Acked {
        /// How many AckFINs were sent.
        sends: u32,
    },
}

#[derive(Debug)]
enum Phase {
    Receiving,
    Acking {
        ack: Vec<u8>,
        sends: u32,
        quiet_until: Duration,
    },
    /// Ended by the server at its deadline while the client still sends:
    /// data is absorbed, a FIN moves the flow to `Acking`.
    Ended {
        ack: Vec<u8>,
        sends: u32,
    },
}

#[derive(Debug)]
struct Entry<F> {
    /// Start order (smaller: older), the key in the source's `order`.
    seq: u64,
    phase: Phase,
    last_rx: Duration,
    idle_timeout: Duration,
    state: F,
}

/// The flow table (see the module docs).
#[derive(Debug)]
pub struct FlowTable<F> {
    flows: HashMap<SocketAddr, Entry<F>>,
    idle_timeout: Duration,
    /// Per source: its flows by start order (oldest first).
    per_source: HashMap<IpAddr, BTreeMap<u64, SocketAddr>>,
    next_seq: u64,
}

impl<F> FlowTable<F> {
    /// An empty table whose receiving flows expire after `idle_timeout` of silence.
    pub fn new(idle_timeout: Duration) -> FlowTable<F> {
        FlowTable {
            flows: HashMap::new(),
            idle_timeout,
            per_source: HashMap::new(),
            next_seq: 0,
        }
    }

    /// Flows from `ip`'s source (its IPv4 address or IPv6 /64).
    pub fn from_source(&self, ip: IpAddr) -> usize {
        self.per_source
            .get(&source_key(ip))
            .map_or(0, BTreeMap::len)
    }

    fn forget_source(&mut self, peer: &SocketAddr, seq: u64) {
        let k = source_key(peer.ip());
        if let Some(m) = self.per_source.get_mut(&k) {
            m.remove(&seq);
            if m.is_empty() {
                self.per_source.remove(&k);
            }
        }
    }

    /// Makes room for a new flow from `ip` in a full table at `now`:
    /// removes and returns the oldest flow of the source holding most
    /// flows, when that source holds at least two more than `ip`'s (so
    /// equal shares do not take turns, and a source never evicts its own
    /// flows); else the flow silent longest, if silent for at least
    /// [`EVICT_SILENCE`] (a running test sends far more often). `None`:
    /// nobody to evict; the caller refuses the new flow.
    ///
    /// Cost: one pass over the sources, and over the flows when no source
    /// is above its share, and a logarithmic removal; only called when the
    /// table is full.
    pub fn evict_for(&mut self, ip: IpAddr, now: Duration) -> Option<(SocketAddr, Expired, F)> {
        let here = self.from_source(ip);
        // Ties: the smallest key, so the choice does not depend on hash order.
        let (most, victim) = self
            .per_source
            .iter()
            .map(|(k, m)| (m.len(), std::cmp::Reverse(*k)))
            .max()
            .map(|(n, std::cmp::Reverse(k))| (n, k))?;
        let peer = if most >= here + 2 {
            *self.per_source.get(&victim)?.first_key_value()?.1
        } else {
            // Ties: the smallest address.
            let (silent, peer) = self
                .flows
                .iter()
                .map(|(a, e)| (now.saturating_sub(e.last_rx), std::cmp::Reverse(*a)))
                .max()
                .map(|(t, std::cmp::Reverse(a))| (t, a))?;
            if silent < EVICT_SILENCE {
                return None;
            }
            peer
        };
        let seq = self.flows.get(&peer)?.seq;
        self.forget_source(&peer, seq);
        let e = self.flows.remove(&peer)?;
        let why = match e.phase {
            Phase::Receiving => Expired::Idle,
            // An ended flow was reported at its deadline, as an acked one was.
            Phase::Acking { sends, .. } | Phase::Ended { sends, .. } => Expired::Acked { sends },
        };
        Some((peer, why, e.state))
    }

    /// Number of flows (receiving or acking).
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// True when no flow is known.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Number of flows still receiving data.
    pub fn receiving(&self) -> usize {
        self.flows
            .values()
            .filter(|e| matches!(e.phase, Phase::Receiving))
            .count()
    }

    /// Classifies a datagram with sequence number `id` from `peer` at `now`.
    pub fn classify(&mut self, now: Duration, peer: SocketAddr, id: i64) -> Verdict<'_, F> {
        let Some(entry) = self.flows.get_mut(&peer) else {
            return if id < 0 {
                Verdict::StaleFin
            } else {
                Verdict::Start
            };
        };
        if let Phase::Ended { ack, sends } = &mut entry.phase {
            entry.last_rx = entry.last_rx.max(now);
            if id >= 0 {
                return Verdict::Ignore;
            }
            // The FIN is answered as in the acking phase.
            let (ack, sends) = (std::mem::take(ack), *sends);
            let send = sends < MAX_ACK_SENDS && !ack.is_empty();
            entry.phase = Phase::Acking {
                ack,
                sends: sends + u32::from(send),
                quiet_until: now + ACK_QUIET,
            };
            return match &entry.phase {
                Phase::Acking { ack, .. } if send => Verdict::ResendAck(ack),
                _ => Verdict::ResendAck(&[]),
            };
        }
        match &mut entry.phase {
            Phase::Receiving => {
                entry.last_rx = entry.last_rx.max(now);
                if id < 0 {
                    Verdict::Fin
                } else {
                    Verdict::Data(&mut entry.state)
                }
            }
            Phase::Acking {
                ack,
                sends,
                quiet_until,
            } => {
                if *sends >= MAX_ACK_SENDS {
                    return Verdict::Ignore;
                }
                *sends += 1;
                *quiet_until = now + ACK_QUIET;
                Verdict::ResendAck(ack)
            }
            // Handled above.
            Phase::Ended { .. } => Verdict::Ignore,
        }
    }

    /// Adds a flow after [`Verdict::Start`] with the table's idle timeout.
    /// Replaces any existing state.
    pub fn insert(&mut self, now: Duration, peer: SocketAddr, state: F) {
        self.insert_with_idle(now, peer, state, self.idle_timeout);
    }

    /// Adds a flow with its own idle timeout (e.g. longer for a client that
    /// paces datagrams seconds apart).
    pub fn insert_with_idle(&mut self, now: Duration, peer: SocketAddr, state: F, idle: Duration) {
        // A replaced flow keeps its place in the start order.
        let seq = match self.flows.get(&peer) {
            Some(e) => e.seq,
            None => {
                let seq = self.next_seq;
                self.next_seq += 1;
                self.per_source
                    .entry(source_key(peer.ip()))
                    .or_default()
                    .insert(seq, peer);
                seq
            }
        };
        self.flows.insert(
            peer,
            Entry {
                seq,
                phase: Phase::Receiving,
                last_rx: now,
                idle_timeout: idle,
                state,
            },
        );
    }

    /// The state of `peer`'s flow.
    pub fn get_mut(&mut self, peer: &SocketAddr) -> Option<&mut F> {
        self.flows.get_mut(peer).map(|e| &mut e.state)
    }

    /// All flows' states, shared.
    pub fn states(&self) -> impl Iterator<Item = &F> {
        self.flows.values().map(|e| &e.state)
    }

    /// All flows' states (e.g. to emit interval reports).
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&SocketAddr, &mut F)> {
        self.flows.iter_mut().map(|(a, e)| (a, &mut e.state))
    }

    /// After [`Verdict::Fin`]: the flow moves to acking with `ack` as the
    /// bytes to (re)send; the caller sends them once now. Returns false if
    /// the flow is unknown.
    pub fn ack(&mut self, now: Duration, peer: &SocketAddr, ack: Vec<u8>) -> bool {
        match self.flows.get_mut(peer) {
            Some(e) => {
                e.phase = Phase::Acking {
                    ack,
                    sends: 1,
                    quiet_until: now + ACK_QUIET,
                };
                true
            }
            None => false,
        }
    }

    /// Ends a receiving flow at the server's deadline: `ack` (already sent
    /// once by the caller, `sends` times; empty for a flow that gets no
    /// AckFIN) answers its FIN later. Returns false if the flow is unknown.
    pub fn end(&mut self, peer: &SocketAddr, ack: Vec<u8>, sends: u32) -> bool {
        match self.flows.get_mut(peer) {
            Some(e) => {
                e.phase = Phase::Ended { ack, sends };
                true
            }
            None => false,
        }
    }

    /// The earliest time at which [`expire`](Self::expire) has work.
    pub fn next_deadline(&self) -> Option<Duration> {
        self.flows.values().map(deadline_of).min()
    }

    /// Removes every flow whose deadline is `<= now`, with the reason.
    pub fn expire(&mut self, now: Duration) -> Vec<(SocketAddr, Expired, F)> {
        let due: Vec<SocketAddr> = self
            .flows
            .iter()
            .filter(|(_, e)| deadline_of(e) <= now)
            .map(|(a, _)| *a)
            .collect();
        let mut out = Vec::with_capacity(due.len());
        for peer in due {
            if let Some(e) = self.flows.remove(&peer) {
                self.forget_source(&peer, e.seq);
                let why = match e.phase {
                    Phase::Receiving => Expired::Idle,
                    Phase::Acking { sends, .. } | Phase::Ended { sends, .. } => {
                        Expired::Acked { sends }
                    }
                };
                out.push((peer, why, e.state));
            }
        }
        out
    }

    /// Removes every flow (server shutdown), receiving ones first.
    pub fn drain(&mut self) -> Vec<(SocketAddr, Expired, F)> {
        self.per_source.clear();
        self.flows
            .drain()
            .map(|(a, e)| {
                let why = match e.phase {
                    Phase::Receiving => Expired::Idle,
                    Phase::Acking { sends, .. } | Phase::Ended { sends, .. } => {
                        Expired::Acked { sends }
                    }
                };
                (a, why, e.state)
            })
            .collect()
    }
}

fn deadline_of<F>(e: &Entry<F>) -> Duration {
    match &e.phase {
        Phase::Receiving | Phase::Ended { .. } => e.last_rx + e.idle_timeout,
        Phase::Acking { quiet_until, .. } => *quiet_until,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_secs(3);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn peer(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    #[test]
    fn first_datagram_starts_a_flow_and_later_ones_are_data() {
        let mut t: FlowTable<u32> = FlowTable::new(IDLE);
        assert_eq!(t.classify(ms(0), peer(1), 1), Verdict::Start);
        t.insert(ms(0), peer(1), 7);
        assert_eq!(t.classify(ms(1), peer(1), 2), Verdict::Data(&mut 7));
        // A second source is a second flow.
        assert_eq!(t.classify(ms(1), peer(2), 5), Verdict::Start);
        assert_eq!(t.len(), 1);
        assert_eq!(t.get_mut(&peer(1)), Some(&mut 7));
    }

    #[test]
    fn stale_negative_id_from_unknown_source_is_dropped() {
        let mut t: FlowTable<()> = FlowTable::new(IDLE);
        assert_eq!(t.classify(ms(0), peer(1), -66), Verdict::StaleFin);
        assert!(t.is_empty());
    }

    #[test]
    fn fin_then_ack_resends_on_each_retransmitted_fin_up_to_ten_sends() {
        let mut t: FlowTable<()> = FlowTable::new(IDLE);
        t.insert(ms(0), peer(1), ());
        assert_eq!(t.classify(ms(10), peer(1), -66), Verdict::Fin);
        assert!(t.ack(ms(10), &peer(1), vec![0xAA; 128]));
        assert_eq!(t.receiving(), 0);
        // The client's FIN retransmissions (every 10 ms) each trigger a resend.
        for k in 1..MAX_ACK_SENDS {
            let now = ms(10 + 10 * u64::from(k));
            match t.classify(now, peer(1), -66 - i64::from(k)) {
                Verdict::ResendAck(b) => assert_eq!(b.len(), 128),
                v => panic!("send {k}: {v:?}"),
            }
        }
        // Ten sends used: further FINs are ignored.
        assert_eq!(t.classify(ms(200), peer(1), -80), Verdict::Ignore);
        // And the flow goes after 250 ms of silence since the last resend.
        let last_resend = ms(10 + 10 * u64::from(MAX_ACK_SENDS - 1));
        assert_eq!(t.next_deadline(), Some(last_resend + ACK_QUIET));
        assert!(t.expire(last_resend + ACK_QUIET - ms(1)).is_empty());
        let gone = t.expire(last_resend + ACK_QUIET);
        assert_eq!(gone, vec![(peer(1), Expired::Acked { sends: 10 }, ())]);
        assert!(t.is_empty());
        // A FIN after that is stale.
        assert_eq!(t.classify(ms(900), peer(1), -90), Verdict::StaleFin);
    }

    #[test]
    fn acked_flow_ends_after_one_quiet_window_when_client_got_the_ack() {
        let mut t: FlowTable<()> = FlowTable::new(IDLE);
        t.insert(ms(0), peer(1), ());
        let _ = t.classify(ms(5), peer(1), -3);
        t.ack(ms(5), &peer(1), vec![0; 128]);
        assert_eq!(t.next_deadline(), Some(ms(255)));
        assert_eq!(
            t.expire(ms(255)),
            vec![(peer(1), Expired::Acked { sends: 1 }, ())]
        );
    }

    #[test]
    fn silent_flow_expires_as_idle_and_data_postpones_it() {
        let mut t: FlowTable<&str> = FlowTable::new(IDLE);
        t.insert(ms(0), peer(1), "a");
        t.insert(ms(0), peer(2), "b");
        assert_eq!(t.classify(ms(2000), peer(2), 9), Verdict::Data(&mut "b"));
        assert_eq!(t.next_deadline(), Some(IDLE));
        let gone = t.expire(IDLE);
        assert_eq!(gone, vec![(peer(1), Expired::Idle, "a")]);
        assert_eq!(t.next_deadline(), Some(ms(2000) + IDLE));
        let rest = t.drain();
        assert_eq!(rest, vec![(peer(2), Expired::Idle, "b")]);
    }

    #[test]
    fn out_of_order_timestamps_never_move_the_idle_deadline_back() {
        let mut t: FlowTable<()> = FlowTable::new(IDLE);
        t.insert(ms(100), peer(1), ());
        let _ = t.classify(ms(50), peer(1), 2);
        assert_eq!(t.next_deadline(), Some(ms(100) + IDLE));
    }

    #[test]
    fn flows_are_counted_per_source_until_they_leave() {
        let mut t: FlowTable<u8> = FlowTable::new(IDLE);
        let other = SocketAddr::from(([10, 0, 0, 9], 1));
        t.insert(ms(0), peer(1), 1);
        t.insert(ms(0), peer(2), 2);
        t.insert(ms(0), peer(2), 3); // replaced, not a new flow
        t.insert(ms(5), other, 4);
        assert_eq!(t.from_source(peer(9).ip()), 2);
        assert_eq!(t.from_source(other.ip()), 1);
        assert_eq!(t.expire(IDLE).len(), 2);
        assert_eq!(t.from_source(peer(1).ip()), 0);
        assert_eq!(t.from_source(other.ip()), 1);
        t.drain();
        assert_eq!(t.from_source(other.ip()), 0);
    }

    #[test]
    fn a_full_table_evicts_the_oldest_flow_of_the_source_holding_most() {
        // Attack 2 in small: two sources hold every flow; a third gets in.
        let mut t: FlowTable<u32> = FlowTable::new(IDLE);
        let a = |port| SocketAddr::from(([10, 0, 0, 1], port));
        let b = |port| SocketAddr::from(([10, 0, 0, 2], port));
        let real = SocketAddr::from(([10, 0, 0, 3], 9));
        for p in 1..=4 {
            t.insert(ms(u64::from(p)), a(p), u32::from(p));
        }
        for p in 1..=2 {
            t.insert(ms(10), b(p), 100 + u32::from(p));
        }
        // Refreshing a flow does not make it younger.
        let _ = t.classify(ms(20), a(1), 5);
        assert_eq!(
            t.evict_for(real.ip(), ms(30)),
            Some((a(1), Expired::Idle, 1)),
            "the oldest flow of the source holding most"
        );
        t.insert(ms(30), real, 7);
        assert_eq!(t.from_source(a(1).ip()), 3);
        // a holds 3, real 1: a's next oldest goes for real's second flow.
        assert_eq!(t.evict_for(real.ip(), ms(30)).map(|x| x.0), Some(a(2)));
        t.insert(ms(31), SocketAddr::from(([10, 0, 0, 3], 10)), 8);
        // Now 2 / 2 / 2: nobody holds two more than anybody; no turns.
        assert_eq!(t.evict_for(real.ip(), ms(30)), None);
        assert_eq!(t.evict_for(a(9).ip(), ms(30)), None);
        // A source never evicts itself: alone, it is refused.
        let mut solo: FlowTable<u8> = FlowTable::new(IDLE);
        solo.insert(ms(0), a(1), 1);
        solo.insert(ms(0), a(2), 2);
        assert_eq!(solo.evict_for(a(3).ip(), ms(0)), None);
        // Everything left is accounted for.
        assert_eq!(t.len(), 6);
        assert_eq!(t.drain().len(), 6);
    }

    #[test]
    fn a_full_table_of_single_flows_evicts_the_flow_silent_longest() {
        // Issue 19 audit: 4,096 sources (IPv6 /64s, or spoofed) at one flow
        // each: nobody holds two more than a newcomer.
        let mut t: FlowTable<u8> = FlowTable::new(IDLE);
        let src = |i: u8| SocketAddr::new(format!("2001:db8:{i}::1").parse().unwrap(), 9);
        for i in 0..4 {
            t.insert(ms(0), src(i), i);
        }
        // Each refreshed lately; a running test (src 2) sends all the time.
        for (i, at) in [(0, 200), (1, 100), (2, 1990), (3, 300)] {
            let _ = t.classify(ms(at), src(i), 2);
        }
        let real = src(99);
        // Nobody silent for EVICT_SILENCE at 1.05 s: refused.
        assert_eq!(t.evict_for(real.ip(), ms(1050)), None);
        // At 2 s, src 1 (silent since 100 ms) goes, not the running test.
        assert_eq!(t.evict_for(real.ip(), ms(2000)).map(|x| x.2), Some(1));
        t.insert(ms(2000), real, 99);
        assert_eq!(t.evict_for(src(98).ip(), ms(2000)).map(|x| x.2), Some(0));
        assert_eq!(t.evict_for(src(97).ip(), ms(2000)).map(|x| x.2), Some(3));
        // Then only flows that sent within the last second are left.
        assert_eq!(t.evict_for(src(96).ip(), ms(2000)), None);
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn per_flow_idle_timeout() {
        let mut t: FlowTable<u8> = FlowTable::new(IDLE);
        t.insert_with_idle(ms(0), peer(1), 1, ms(30_000));
        t.insert(ms(0), peer(2), 2);
        assert_eq!(t.expire(ms(29_999)), vec![(peer(2), Expired::Idle, 2)]);
        assert_eq!(t.expire(ms(30_000)), vec![(peer(1), Expired::Idle, 1)]);
    }

    #[test]
    fn an_ended_flow_absorbs_data_and_answers_its_fin_with_the_ack() {
        let mut t: FlowTable<u8> = FlowTable::new(IDLE);
        t.insert(ms(0), peer(1), 1);
        assert!(t.end(&peer(1), vec![0xAB; 128], 1));
        // The client keeps sending: absorbed, never a new flow.
        for k in 1..100 {
            assert_eq!(t.classify(ms(10 * k), peer(1), k as i64), Verdict::Ignore);
        }
        assert_eq!(t.next_deadline(), Some(ms(990) + IDLE));
        // Its FIN gets the ready AckFIN, then the usual quiet window.
        match t.classify(ms(1000), peer(1), -100) {
            Verdict::ResendAck(b) => assert_eq!(b, &[0xAB; 128][..]),
            v => panic!("{v:?}"),
        }
        assert_eq!(t.next_deadline(), Some(ms(1000) + ACK_QUIET));
        assert_eq!(
            t.expire(ms(1000) + ACK_QUIET),
            vec![(peer(1), Expired::Acked { sends: 2 }, 1)]
        );
    }

    #[test]
    fn an_ended_flow_without_an_ack_answers_nothing_and_leaves_when_silent() {
        let mut t: FlowTable<u8> = FlowTable::new(IDLE);
        t.insert(ms(0), peer(1), 1);
        assert!(t.end(&peer(1), Vec::new(), 0));
        assert_eq!(t.classify(ms(5), peer(1), 3), Verdict::Ignore);
        assert_eq!(t.classify(ms(6), peer(1), -4), Verdict::ResendAck(&[]));
        assert_eq!(t.expire(ms(6) + ACK_QUIET).len(), 1);
        t.insert(ms(0), peer(2), 2);
        assert!(t.end(&peer(2), Vec::new(), 0));
        assert_eq!(
            t.expire(IDLE),
            vec![(peer(2), Expired::Acked { sends: 0 }, 2)]
        );
    }
}
