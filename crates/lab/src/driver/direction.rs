//! The forwarding loop of one direction: read the input TUNs (timestamped
//! at read), `enqueue(now)`, release every packet whose time has come with
//! `dequeue(now)`, write it to the TUN of its destination, then sleep to
//! the link's next deadline or the next arrival. One OS thread per
//! direction, so ACKs never wait behind the other direction's work
//! (emulation.md 6.5).
//!
//! With offloads (`lab up --offload`) a read may bring a TSO super-packet,
//! which is cut into wire packets before `enqueue`, and the packets
//! released in one pass go through a per-output [`Coalescer`], so segments
//! of one flow that are due together reach the host in one write (GRO).

use super::histogram::{Histogram, Summary};
use super::priority::{BusyBoard, NormalMode, PriorityGovernor};
use super::timing::{self, Clock, Woke};
use super::wake::{Wait, WakePlanner};
use crate::model::LinkModel;
use crate::offload::{self, Coalescer, Frame};
use crate::tun;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::RawFd;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Packets read from one input per wake-up before the others get a turn.
const BATCH: usize = 64;
/// Longest the read phase may run while a release is already due. With
/// offloads one read brings up to 64 KB (44 segments to cut and enqueue), so
/// a full batch after a stall is milliseconds of work during which due
/// packets would wait (issue 24: release lateness). The bound is time, not
/// a count, so a model whose `next_event` stays in the past without a
/// release (an AQM drop, see step 4) still reads at full speed.
const READ_SLICE: Duration = Duration::from_micros(50);

/// Whether the read phase that began at `started` stops before the next
/// read: only once a release is due (`next_event <= now`) and the phase
/// has run [`READ_SLICE`]; each input still gets at least one read per pass.
fn read_phase_over(started: Duration, now: Duration, next_event: Option<Duration>) -> bool {
    next_event.is_some_and(|t| t <= now) && now.saturating_sub(started) >= READ_SLICE
}
/// Longest sleep without a deadline (bounds the reaction to a stop request).
const IDLE_CAP: Duration = Duration::from_millis(50);
/// Pause when the model reports a past deadline but releases nothing.
const STALL_NAP: Duration = Duration::from_micros(20);
/// How often counters are published for `lab status` (as often as the lab writes its status
/// file, `crate::lab::STATUS_EVERY`: `bloatlab autorate --lab` reads a stage's load there, and
/// a reading that lags a line's step by a few hundred ms makes its first cut miss the step).
const PUBLISH_EVERY: Duration = Duration::from_millis(100);

/// The fds of one direction. The caller keeps the devices open until the
/// thread has been joined.
#[derive(Debug, Clone)]
pub(crate) struct DirectionIo {
    /// `up` or `down`.
    pub name: String,
    /// TUN fds packets come from.
    pub inputs: Vec<RawFd>,
    /// Destination address (IPv4 or IPv6) -> TUN fd packets go to.
    pub outputs: Vec<(IpAddr, RawFd)>,
    /// The TUNs were opened with [`tun::Offload::Tso`]: every read and
    /// write carries a `virtio_net_hdr`.
    pub offload: bool,
}

/// Counters of the driver itself (the link model keeps its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoCounters {
    /// Packets and bytes read from the input TUNs.
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// Packets and bytes written to the output TUNs.
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// Failed reads and writes.
    pub rx_errors: u64,
    pub tx_errors: u64,
    /// Packets with no lab host as destination (not IPv4, or another
    /// address), dropped.
    pub unroutable: u64,
    /// Wake-ups that found a full batch waiting: the emulator fell behind
    /// the input (the TUN ring may overflow next).
    pub rx_batch_full: u64,
    /// Offloads: TSO super-packets read (and cut into `rx_packets`), and
    /// writes that carried more than one packet.
    #[serde(default)]
    pub rx_super: u64,
    #[serde(default)]
    pub tx_coalesced: u64,
}

/// What a direction publishes.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct DirectionReport {
    /// When these counters were taken, seconds since the lab came up: two
    /// reports give exact rates (`lab status` files are written every
    /// 0.5 s, reports refreshed every 0.2 s).
    #[serde(default)]
    pub at_s: f64,
    pub io: IoCounters,
    /// How late packets were released after the time the link model gave
    /// them (the emulator's own timing error).
    pub lateness: Summary,
    /// The same as a histogram, so that two reports give the lateness of
    /// the packets released between them ([`Histogram::since`]).
    #[serde(default)]
    pub lateness_histogram: Histogram,
    /// The link model's counters.
    pub link: crate::model::LinkCounters,
    /// True while the thread runs.
    pub running: bool,
    /// The thread runs with SCHED_FIFO now (priority.rs).
    #[serde(default)]
    pub realtime: bool,
    /// Times the thread dropped from SCHED_FIFO to normal scheduling
    /// because it kept a core busy.
    #[serde(default)]
    pub demotions: u64,
    /// How it runs when not SCHED_FIFO (after a demotion: nice -20 with a
    /// short slice where the kernel allows, priority.rs).
    #[serde(default)]
    pub normal_mode: NormalMode,
    /// The delay calibration (absent with `lab up --no-calibrate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<super::calibrate::TrimReport>,
}

/// Destination address of an IPv4 or IPv6 packet (RFC 791, RFC 8200 §3), read
/// through the link model's header view.
fn ip_dst(pkt: &[u8]) -> Option<IpAddr> {
    let dst = bloatlab_emu::packet::IpView::parse(pkt).ok()?.dst();
    match <[u8; 4]>::try_from(dst) {
        Ok(v4) => Some(Ipv4Addr::from(v4).into()),
        Err(_) => Some(Ipv6Addr::from(<[u8; 16]>::try_from(dst).ok()?).into()),
    }
}

/// How a forwarding thread waits and is scheduled (`lab up --spin`,
/// `--no-realtime`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scheduling {
    /// Longest busy-wait before a release (wake.rs).
    pub spin: Duration,
    /// Ask for SCHED_FIFO (priority.rs decides when to keep it).
    pub realtime: bool,
}

/// Runs one direction until `stop` is set.
pub(crate) fn run(
    io: &DirectionIo,
    mut link: Box<dyn LinkModel>,
    clock: Clock,
    stop: &AtomicBool,
    (shared, inbox): (&Mutex<DirectionReport>, &super::Inbox),
    (board, slot): (&BusyBoard, usize),
    Scheduling { spin, realtime }: Scheduling,
) {
    timing::tight_timer_slack();
    let got_realtime = realtime && timing::realtime();
    if realtime && !got_realtime {
        tracing::warn!(
            "{}: SCHED_FIFO refused; running with normal priority",
            io.name
        );
    }
    // The machine-share rule only with offloads (priority.rs says why).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let share_of = io.offload.then_some(cpus);
    let mut governor = PriorityGovernor::new(got_realtime, got_realtime, clock.now(), share_of);
    let mut pollfds: Vec<libc::pollfd> = io
        .inputs
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let mut buf = vec![0u8; offload::MAX_FRAME];
    let mut coalescers: Vec<Coalescer> = io.outputs.iter().map(|_| Coalescer::new()).collect();
    let mut c = IoCounters::default();
    let mut lateness = Histogram::default();
    let mut next_publish = Duration::ZERO;
    let mut planner = WakePlanner::new(spin);
    let mut normal_mode = NormalMode::Plain;

    while !stop.load(Ordering::Relaxed) {
        // 1. Drain the inputs, each packet stamped when read, until a due
        // release has waited READ_SLICE.
        let read_started = clock.now();
        for &fd in &io.inputs {
            let mut n = 0;
            while n < BATCH {
                if n > 0 && read_phase_over(read_started, clock.now(), link.next_event()) {
                    break;
                }
                match tun::read_packet(fd, &mut buf) {
                    Ok(Some(len)) if io.offload => {
                        n += 1;
                        let now = clock.now();
                        let mut enqueue = |p: Vec<u8>| {
                            c.rx_packets += 1;
                            c.rx_bytes += p.len() as u64;
                            link.enqueue(now, p);
                        };
                        match offload::split(&buf[..len], &mut enqueue) {
                            Ok(1) => {}
                            Ok(_) => c.rx_super += 1,
                            Err(e) => {
                                c.rx_errors += 1;
                                tracing::debug!("{}: dropped a frame: {e}", io.name);
                            }
                        }
                    }
                    Ok(Some(len)) => {
                        n += 1;
                        c.rx_packets += 1;
                        c.rx_bytes += len as u64;
                        link.enqueue(clock.now(), buf[..len].to_vec());
                    }
                    Ok(None) => break,
                    Err(e) => {
                        c.rx_errors += 1;
                        tracing::debug!("{}: read: {e}", io.name);
                        break;
                    }
                }
            }
            if n == BATCH {
                c.rx_batch_full += 1;
            }
        }

        // 2. Apply rate changes (`lab set --stage-rate`): packets released
        // below are serialized at the new rate from now on.
        for change in inbox.take() {
            let now = clock.now();
            let r = link.set_stage(now, &change.stage, &change.setting);
            // Publish before answering, so a status taken after the answer
            // shows the new rate.
            publish(
                shared,
                now,
                &c,
                &lateness,
                link.as_ref(),
                (&governor, normal_mode),
                true,
            );
            let _ = change.reply.send(r);
        }

        // 3. Release everything due.
        let now = clock.now();
        while let Some(due) = link.next_event().filter(|&t| t <= now) {
            let Some(pkt) = link.dequeue(now) else {
                break;
            };
            lateness.record(now - due);
            let out = ip_dst(&pkt).and_then(|dst| io.outputs.iter().position(|(a, _)| *a == dst));
            let Some(i) = out else {
                c.unroutable += 1;
                continue;
            };
            let fd = io.outputs[i].1;
            if io.offload {
                coalescers[i].push(&pkt, &mut |f| write_frame(fd, f, &mut c, &io.name));
            } else {
                let f = Frame {
                    bytes: &pkt,
                    packets: 1,
                    wire_bytes: pkt.len(),
                };
                write_frame(fd, f, &mut c, &io.name);
            }
        }
        for (co, (_, fd)) in coalescers.iter_mut().zip(&io.outputs) {
            co.flush(&mut |f| write_frame(*fd, f, &mut c, &io.name));
        }

        if now >= next_publish {
            publish(
                shared,
                now,
                &c,
                &lateness,
                link.as_ref(),
                (&governor, normal_mode),
                true,
            );
            next_publish = now + PUBLISH_EVERY;
        }
        let decision = governor.tick(now, board.others(slot));
        board.set(slot, governor.last_busy_pct());
        if let Some(rt) = decision {
            let ok = if rt {
                timing::realtime()
            } else {
                normal_mode = timing::prompt_normal();
                true
            };
            governor.applied(if ok { rt } else { !rt });
        }

        // 4. Sleep to the next deadline or arrival. `next_event` may be a
        // lower bound that has already passed while the model released
        // nothing (e.g. an AQM dropped the head); then nap briefly instead
        // of looping, which under SCHED_FIFO would starve the host. Whether
        // a wait sleeps or busy-waits is the planner's call (wake.rs): it
        // spins only from a bounded budget.
        let deadline = link
            .next_event()
            .map(|t| if t <= now { now + STALL_NAP } else { t });
        let plan = deadline.map(|d| planner.plan(clock.now(), d));
        match plan {
            Some(Wait::Due) => {}
            Some(Wait::Spin(t)) => {
                timing::spin(&mut pollfds, &clock, t);
            }
            Some(Wait::Sleep(t)) => {
                let before = clock.now();
                let woke = timing::sleep(&mut pollfds, &clock, Some(t), IDLE_CAP);
                governor.idle(clock.now().saturating_sub(before));
                if let Woke::Timer { target, at } = woke {
                    planner.timer_woke(target, at);
                }
            }
            None => {
                let before = clock.now();
                timing::sleep(&mut pollfds, &clock, None, IDLE_CAP);
                governor.idle(clock.now().saturating_sub(before));
            }
        }
    }
    let end = clock.now();
    publish(
        shared,
        end,
        &c,
        &lateness,
        link.as_ref(),
        (&governor, normal_mode),
        false,
    );
}

/// Writes one frame into a TUN (the receiving host's stack processes it
/// inside this call).
fn write_frame(fd: RawFd, f: Frame<'_>, c: &mut IoCounters, dir: &str) {
    match tun::write_packet(fd, f.bytes) {
        Ok(()) => {
            c.tx_packets += f.packets as u64;
            c.tx_bytes += f.wire_bytes as u64;
            c.tx_coalesced += u64::from(f.packets > 1);
        }
        Err(e) => {
            c.tx_errors += 1;
            tracing::debug!("{dir}: write: {e}");
        }
    }
}

fn publish(
    shared: &Mutex<DirectionReport>,
    now: Duration,
    c: &IoCounters,
    lateness: &Histogram,
    link: &dyn LinkModel,
    (governor, normal_mode): (&PriorityGovernor, NormalMode),
    running: bool,
) {
    let report = DirectionReport {
        at_s: now.as_secs_f64(),
        io: *c,
        lateness: lateness.summary(),
        lateness_histogram: lateness.clone(),
        link: link.counters(),
        running,
        realtime: governor.realtime(),
        demotions: governor.demotions(),
        normal_mode,
        calibration: link.calibration(),
    };
    if let Ok(mut g) = shared.lock() {
        *g = report;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_read_phase_yields_to_a_due_release_only_after_its_slice() {
        let us = Duration::from_micros;
        let start = us(1_000);
        // Nothing due: read on, however long the phase has run.
        assert!(!read_phase_over(start, us(5_000), None));
        assert!(!read_phase_over(start, us(5_000), Some(us(5_001))));
        // Due, but the slice has not run out.
        assert!(!read_phase_over(
            start,
            start + READ_SLICE - us(1),
            Some(start)
        ));
        // Due and the slice is over: release first.
        assert!(read_phase_over(start, start + READ_SLICE, Some(start)));
        assert!(read_phase_over(start, us(5_000), Some(us(4_999))));
    }

    #[test]
    fn destination_is_read_from_ipv4_and_ipv6_headers() {
        let mut p = vec![0u8; 20];
        p[0] = 0x45;
        p[16..20].copy_from_slice(&[10, 77, 0, 2]);
        assert_eq!(ip_dst(&p), Some(Ipv4Addr::new(10, 77, 0, 2).into()));
        assert_eq!(ip_dst(&p[..19]), None);
        p[0] = 0x60;
        assert_eq!(ip_dst(&p), None, "20 bytes are no IPv6 header");
        let mut p6 = vec![0u8; 40];
        p6[0] = 0x60;
        p6[8..24].copy_from_slice(&"fd00:77::1".parse::<Ipv6Addr>().unwrap().octets());
        p6[24..40].copy_from_slice(&"fd00:77::2".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(ip_dst(&p6), Some("fd00:77::2".parse().unwrap()));
        assert_eq!(ip_dst(&p6[..39]), None);
        p6[0] = 0x50;
        assert_eq!(ip_dst(&p6), None);
        assert_eq!(ip_dst(&[]), None);
    }

    /// A pair of connected SOCK_SEQPACKET sockets stands in for a TUN: one
    /// packet per read/write, non-blocking on the driver's side. `keep`
    /// owns them (they close when the test drops it); the driver takes the
    /// descriptor numbers, as it does a TUN's.
    fn seqpacket(keep: &mut Vec<std::os::fd::OwnedFd>) -> (RawFd, RawFd) {
        use std::os::fd::AsRawFd;
        let (a, b) =
            bloatlab_os::fdio::socketpair(libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK).unwrap();
        let fds = (a.as_raw_fd(), b.as_raw_fd());
        keep.extend([a, b]);
        fds
    }

    fn packet_to(dst: [u8; 4], len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[9] = 17;
        p[12..16].copy_from_slice(&[10, 77, 0, 1]);
        p[16..20].copy_from_slice(&dst);
        p
    }

    #[test]
    fn forwards_after_the_link_delay_and_routes_by_destination() {
        let mut keep = Vec::new();
        let (in_test, in_drv) = seqpacket(&mut keep);
        let (out_drv, out_test) = seqpacket(&mut keep);
        let (other_drv, other_test) = seqpacket(&mut keep);
        let io = DirectionIo {
            name: "up".into(),
            inputs: vec![in_drv],
            outputs: vec![
                (Ipv4Addr::new(10, 77, 0, 2).into(), out_drv),
                (Ipv4Addr::new(10, 77, 0, 3).into(), other_drv),
            ],
            offload: false,
        };
        let mut cfg = bloatlab_emu::LinkConfig::default();
        cfg.set("delay", Some("20ms")).unwrap();
        let link = Box::new(bloatlab_emu::Link::new(&cfg, 1).unwrap());
        let stop = AtomicBool::new(false);
        let shared = Mutex::new(DirectionReport::default());
        let origin = std::time::Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                run(
                    &io,
                    link,
                    Clock::new(origin),
                    &stop,
                    (&shared, &crate::driver::Inbox::default()),
                    (&BusyBoard::new(1), 0),
                    Scheduling {
                        spin: Duration::ZERO,
                        realtime: false,
                    },
                )
            });
            let t0 = std::time::Instant::now();
            for p in [
                packet_to([10, 77, 0, 2], 100),
                packet_to([10, 77, 0, 9], 60),
                packet_to([10, 77, 0, 3], 80),
            ] {
                tun::write_packet(in_test, &p).unwrap();
            }
            let mut buf = [0u8; 2048];
            let mut got = None;
            while t0.elapsed() < Duration::from_secs(2) {
                if let Ok(Some(n)) = tun::read_packet(out_test, &mut buf) {
                    got = Some((n, t0.elapsed()));
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            let (n, at) = got.expect("packet forwarded");
            assert_eq!(n, 100);
            assert!(at >= Duration::from_millis(20), "released after {at:?}");
            assert!(at < Duration::from_millis(500), "released after {at:?}");
            std::thread::sleep(Duration::from_millis(30));
            assert_eq!(tun::read_packet(other_test, &mut buf).unwrap(), Some(80));
            std::thread::sleep(Duration::from_millis(250));
            stop.store(true, Ordering::Relaxed);
        });
        let r = shared.lock().unwrap().clone();
        assert!(!r.running);
        assert_eq!(r.io.rx_packets, 3);
        assert_eq!(r.io.tx_packets, 2);
        assert_eq!(r.io.unroutable, 1);
        assert_eq!(r.lateness.count, 3);
        assert_eq!(r.link.total.dequeued.packets, 3);
        drop(keep);
    }

    /// An IPv6 packet goes to the TUN of its IPv6 destination, an IPv6
    /// packet to an unknown address (a router solicitation to ff02::2) is
    /// unroutable, and the link model parsed both.
    #[test]
    fn ipv6_packets_are_routed_by_their_destination() {
        let mut keep = Vec::new();
        let (in_test, in_drv) = seqpacket(&mut keep);
        let (out_drv, out_test) = seqpacket(&mut keep);
        let server6: Ipv6Addr = "fd00:77::2".parse().unwrap();
        let io = DirectionIo {
            name: "up".into(),
            inputs: vec![in_drv],
            outputs: vec![
                (Ipv4Addr::new(10, 77, 0, 2).into(), out_drv),
                (server6.into(), out_drv),
            ],
            offload: false,
        };
        let v6_to = |dst: Ipv6Addr| {
            let mut p = vec![0u8; 48];
            p[0] = 0x60;
            p[4..6].copy_from_slice(&8u16.to_be_bytes());
            p[6] = 17;
            p[7] = 64;
            p[8..24].copy_from_slice(&"fd00:77::1".parse::<Ipv6Addr>().unwrap().octets());
            p[24..40].copy_from_slice(&dst.octets());
            p
        };
        let cfg = bloatlab_emu::LinkConfig::default();
        let link = Box::new(bloatlab_emu::Link::new(&cfg, 1).unwrap());
        let stop = AtomicBool::new(false);
        let shared = Mutex::new(DirectionReport::default());
        let mut buf = [0u8; 2048];
        let got = std::thread::scope(|s| {
            s.spawn(|| {
                let sched = Scheduling {
                    spin: Duration::ZERO,
                    realtime: false,
                };
                let clock = Clock::new(std::time::Instant::now());
                run(
                    &io,
                    link,
                    clock,
                    &stop,
                    (&shared, &crate::driver::Inbox::default()),
                    (&BusyBoard::new(1), 0),
                    sched,
                )
            });
            tun::write_packet(in_test, &v6_to("ff02::2".parse().unwrap())).unwrap();
            tun::write_packet(in_test, &v6_to(server6)).unwrap();
            let t0 = std::time::Instant::now();
            let mut got = None;
            while got.is_none() && t0.elapsed() < Duration::from_secs(2) {
                got = tun::read_packet(out_test, &mut buf).unwrap();
                std::thread::sleep(Duration::from_micros(200));
            }
            std::thread::sleep(Duration::from_millis(250));
            stop.store(true, Ordering::Relaxed);
            got
        });
        assert_eq!(got, Some(48));
        assert_eq!(&buf[24..40], &server6.octets());
        let r = shared.lock().unwrap().clone();
        assert_eq!((r.io.tx_packets, r.io.unroutable), (1, 1));
        assert_eq!(r.link.total.unparsed, 0);
        drop(keep);
    }

    #[test]
    fn with_offloads_a_tso_frame_is_emulated_as_segments_and_written_as_one() {
        use crate::offload::testpkt::{self, ACK};
        use crate::offload::{F_NEEDS_CSUM, GSO_TCPV4, VNET_HDR_LEN, VnetHeader};
        let mut keep = Vec::new();
        let (in_test, in_drv) = seqpacket(&mut keep);
        let (out_drv, out_test) = seqpacket(&mut keep);
        let io = DirectionIo {
            name: "up".into(),
            inputs: vec![in_drv],
            outputs: vec![(Ipv4Addr::new(10, 77, 0, 2).into(), out_drv)],
            offload: true,
        };
        // 1 ms of delay: the three segments are due together and leave in
        // one GSO write.
        let mut cfg = bloatlab_emu::LinkConfig::default();
        cfg.set("delay", Some("1ms")).unwrap();
        let link = Box::new(bloatlab_emu::Link::new(&cfg, 1).unwrap());
        let data = testpkt::payload(3 * 1448, 0);
        let mut frame = vec![0u8; VNET_HDR_LEN];
        VnetHeader {
            gso_type: GSO_TCPV4,
            gso_size: 1448,
            ..VnetHeader::default()
        }
        .write(&mut frame);
        frame.extend_from_slice(&testpkt::tcp(1, ACK, 9, &data));
        let stop = AtomicBool::new(false);
        let shared = Mutex::new(DirectionReport::default());
        let mut buf = vec![0u8; 70_000];
        let got = std::thread::scope(|s| {
            s.spawn(|| {
                let sched = Scheduling {
                    spin: Duration::ZERO,
                    realtime: false,
                };
                let clock = Clock::new(std::time::Instant::now());
                run(
                    &io,
                    link,
                    clock,
                    &stop,
                    (&shared, &crate::driver::Inbox::default()),
                    (&BusyBoard::new(1), 0),
                    sched,
                )
            });
            tun::write_packet(in_test, &frame).unwrap();
            let t0 = std::time::Instant::now();
            let mut got = None;
            while got.is_none() && t0.elapsed() < Duration::from_secs(2) {
                got = tun::read_packet(out_test, &mut buf).unwrap();
                std::thread::sleep(Duration::from_micros(200));
            }
            std::thread::sleep(Duration::from_millis(250));
            stop.store(true, Ordering::Relaxed);
            got
        });
        let n = got.expect("frame forwarded");
        let h = VnetHeader::parse(&buf[..n]).unwrap();
        assert_eq!(
            (h.flags, h.gso_type, h.gso_size),
            (F_NEEDS_CSUM, GSO_TCPV4, 1448)
        );
        assert_eq!(n, VNET_HDR_LEN + 52 + data.len());
        assert_eq!(&buf[VNET_HDR_LEN + 52..n], &data[..]);
        let r = shared.lock().unwrap().clone();
        assert_eq!(r.io.rx_super, 1);
        assert_eq!(r.io.rx_packets, 3);
        assert_eq!(r.io.rx_bytes, 3 * 1500);
        assert_eq!(
            (r.io.tx_packets, r.io.tx_bytes, r.io.tx_coalesced),
            (3, 4500, 1)
        );
        assert_eq!(r.link.total.enqueued.packets, 3);
        drop(keep);
    }
}
