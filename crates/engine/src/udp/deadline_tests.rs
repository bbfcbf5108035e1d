//! Deadlines of UDP receive flows on a virtual clock (issue 19, deliverable
//! 4): the header's own `-t`, or `--max-duration` for `-n`, plus
//! [`DEADLINE_GRACE`] ends a flow whose client keeps sending, as on TCP.

use super::datagram::{Template, header_repr, stamp};
use super::report::Event;
use super::server::{DEADLINE_GRACE, Datagram, ServerCore};
use super::server_report::parse_ack_fin;
use crate::config::{Amount, ClientConfig, Protocol, ServerConfig};
use crate::limits::ServerLimits;
use bloatlab_units::{BitRate, Bytes};
use std::net::SocketAddr;
use std::time::Duration;

const T0: Duration = Duration::from_secs(1_800_000_000);
const GAP: Duration = Duration::from_millis(10);

fn server(max_duration: Duration) -> ServerCore {
    let cfg = ServerConfig {
        protocol: Protocol::Udp,
        limits: ServerLimits {
            max_duration,
            ..ServerLimits::default()
        },
        ..ServerConfig::default()
    };
    ServerCore::new(&cfg, 5001, Duration::from_secs(4))
}

/// A client's datagram template with `amount` in its header.
fn template(amount: Amount) -> Vec<u8> {
    let mut c = ClientConfig::new("127.0.0.1");
    c.protocol = Protocol::Udp;
    c.amount = amount;
    c.buffer_len = Some(Bytes(200));
    let h = header_repr(&c, T0, BitRate(1_000_000));
    Template::new(h, Bytes(200)).unwrap().bytes
}

struct Run {
    core: ServerCore,
    tmpl: Vec<u8>,
    peer: SocketAddr,
    /// AckFINs the server sent, and when.
    acks: Vec<Duration>,
    connected: usize,
    finals: Vec<u64>,
}

impl Run {
    fn new(core: ServerCore, amount: Amount) -> Run {
        Run {
            core,
            tmpl: template(amount),
            peer: SocketAddr::from(([127, 0, 0, 1], 40_000)),
            acks: Vec::new(),
            connected: 0,
            finals: Vec::new(),
        }
    }

    /// One datagram with id `seq` at `now`, then the timer, as the driver does.
    fn step(&mut self, seq: i64, now: Duration) {
        let mut d = self.tmpl.clone();
        stamp(&mut d, seq, now);
        let dg = Datagram {
            from: self.peer,
            to: None,
            data: &d,
            wire_len: d.len(),
            rx: now,
        };
        if let Some(out) = self.core.on_datagram(&dg) {
            assert!(parse_ack_fin(&out.bytes).is_ok());
            self.acks.push(now);
        }
        if self.core.next_deadline().is_some_and(|t| t <= now) {
            self.core.on_timer(now);
        }
        for out in self.core.take_outgoing() {
            assert_eq!(out.to, self.peer);
            assert!(parse_ack_fin(&out.bytes).is_ok());
            self.acks.push(now);
        }
        for e in self.core.take_events() {
            match e {
                Event::Connected { .. } => self.connected += 1,
                Event::RecvFinal { total, .. } => self.finals.push(total.datagrams),
                _ => {}
            }
        }
    }

    /// Sends ids 1.. every [`GAP`] for `for_`, then its FIN; returns the FIN time.
    fn send_for(&mut self, for_: Duration) -> Duration {
        let n = (for_.as_micros() / GAP.as_micros()) as i64;
        for k in 0..n {
            self.step(k + 1, T0 + GAP * k as u32);
        }
        let fin_at = T0 + GAP * n as u32;
        self.step(-(n + 1), fin_at);
        fin_at
    }
}

#[test]
fn a_flow_whose_header_says_t_1_is_ended_at_1_s_plus_grace_though_the_client_sends_20_s() {
    let mut r = Run::new(
        server(Duration::from_secs(3600)),
        Amount::Time(Duration::from_secs(1)),
    );
    let fin_at = r.send_for(Duration::from_secs(20));
    let deadline = T0 + Duration::from_secs(1) + DEADLINE_GRACE;
    // One flow, one final report: the datagrams up to the deadline.
    assert_eq!(r.connected, 1, "the rest never started a new flow");
    let taken = (deadline - T0).as_millis() as u64 / 10 + 1;
    assert_eq!(r.finals, vec![taken]);
    assert_eq!(r.core.cut_at_deadline(), 1);
    // The AckFIN went out at the deadline, and again for the FIN.
    assert_eq!(r.acks, vec![deadline, fin_at]);
    // The entry leaves after the ack's quiet window.
    r.core.on_timer(fin_at + Duration::from_secs(1));
    assert_eq!(r.core.active_flows(), 0);
}

#[test]
fn max_duration_3_ends_a_udp_n_3m_at_1m_flow_at_3_s_plus_grace() {
    // -n 3M at 1 Mbit/s would take 25 s.
    let mut r = Run::new(
        server(Duration::from_secs(3)),
        Amount::Bytes(Bytes(3_000_000)),
    );
    let fin_at = r.send_for(Duration::from_secs(25));
    let deadline = T0 + Duration::from_secs(3) + DEADLINE_GRACE;
    assert_eq!(r.connected, 1);
    assert_eq!(r.finals.len(), 1);
    assert_eq!(r.acks, vec![deadline, fin_at]);
}

#[test]
fn a_flow_that_ends_on_time_is_not_cut() {
    for slack in [Duration::ZERO, DEADLINE_GRACE - GAP * 2] {
        let mut r = Run::new(
            server(Duration::from_secs(3600)),
            Amount::Time(Duration::from_secs(1)),
        );
        let fin_at = r.send_for(Duration::from_secs(1) + slack);
        assert_eq!(r.core.cut_at_deadline(), 0, "slack {slack:?}");
        assert_eq!(r.acks, vec![fin_at]);
        assert_eq!(r.finals.len(), 1);
    }
}

#[test]
fn the_deadline_is_on_the_servers_timer_list() {
    let mut r = Run::new(
        server(Duration::from_secs(3600)),
        Amount::Time(Duration::from_secs(5)),
    );
    r.step(1, T0);
    // Before the idle timeout (4 s) a live flow's next work is its idle
    // check; once data keeps coming, the deadline is what remains.
    for k in 1..700u32 {
        r.step(i64::from(k) + 1, T0 + GAP * k);
    }
    let deadline = T0 + Duration::from_secs(5) + DEADLINE_GRACE;
    assert!(r.core.next_deadline().is_some_and(|t| t <= deadline));
    r.core.on_timer(deadline);
    assert_eq!(r.core.cut_at_deadline(), 1);
    assert_eq!(r.core.take_outgoing().len(), 1);
}

/// AckFINs and report frames are paid from the bytes the flow sent: a
/// forged header and FIN, and short repeated FINs, never get more bytes
/// back than they cost (issue 19, deliverable 1).
#[test]
fn ack_fin_replies_never_outweigh_what_the_flow_sent() {
    for bloatlab in [false, true] {
        let mut core = server(Duration::from_secs(3600));
        let mut tmpl = template(Amount::Time(Duration::from_secs(1)));
        if !bloatlab {
            tmpl[40..48].fill(0); // an iperf 2 header: no BLAB marker
        }
        let peer = SocketAddr::from(([127, 0, 0, 1], 40_001));
        let (mut bytes_in, mut bytes_out, mut sends) = (0u64, 0u64, 0);
        // Header, FIN, then 20 repeated FINs cut to 20 bytes.
        for (k, seq) in [1i64, -2]
            .into_iter()
            .chain((3..23).map(|i| -i))
            .enumerate()
        {
            let mut d = tmpl.clone();
            stamp(&mut d, seq, T0 + GAP * k as u32);
            if k >= 2 {
                d.truncate(20);
            }
            bytes_in += d.len() as u64;
            let dg = Datagram {
                from: peer,
                to: None,
                data: &d,
                wire_len: d.len(),
                rx: T0 + GAP * k as u32,
            };
            if let Some(out) = core.on_datagram(&dg) {
                assert!(parse_ack_fin(&out.bytes).is_ok());
                bytes_out += out.bytes.len() as u64;
                sends += 1;
            }
            assert!(
                bytes_out <= bytes_in,
                "{bytes_out} > {bytes_in} (bloatlab {bloatlab})"
            );
        }
        // The real FIN got its AckFIN; the 20 short repeats (400 bytes) buy
        // at most 3 more of 128 bytes, not 9.
        assert!((1..=4).contains(&sends), "{sends} sends");
    }
}
