//! Idle path probes while the lab runs: the driver of
//! [`crate::driver::host_track`].
//!
//! A daemon thread sends a burst of [`BURST`] ICMP echo requests from the
//! first client to the server, one at a time and 3 ms apart as at lab up,
//! every [`PROBE_EVERY`], and only when the link was idle for [`QUIET`]
//! (no packet released in either direction, nothing queued). After the
//! burst it waits [`QUIET`] again: if anything but its own requests and
//! replies crossed the link meanwhile, the burst is discarded (it may have
//! queued behind traffic). Otherwise its overhead is the median round trip
//! of the burst after the first (which wakes a cold path: the same warm
//! path lab up measures, so tracking follows changes of the hosts, not the
//! probe rate) minus what the link models applied (their current delays
//! and median release lateness, from their own reports) and the probe's
//! serialization time at the configured rates. So a running test sees at
//! most the packets of a burst that started before it, and only ever on an
//! idle link.

use super::direction::DirectionReport;
use super::host_track::{HostTrackReport, HostTracker, SharedShare};
use super::path_probe;
use std::net::Ipv4Addr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Time between probes.
pub const PROBE_EVERY: Duration = Duration::from_secs(2);
/// How long the link must be seen idle before and after a probe: more than
/// two of the forwarding threads' report periods (200 ms).
pub const QUIET: Duration = Duration::from_millis(450);
/// IP size of a probe (64 bytes of ICMP in a 20-byte IPv4 header).
pub const PROBE_IP_BYTES: u64 = 84;
/// Sequence numbers of tracking probes start here (lab up uses 0..48).
const FIRST_SEQ: u16 = 1000;
/// Echo requests per tracking probe.
pub const BURST: u64 = 4;
/// Pause between the requests of a burst (as at lab up).
const GAP: Duration = Duration::from_millis(3);

/// Both directions' counters and calibration, summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkSnapshot {
    /// Packets released by the link models.
    pub dequeued: u64,
    /// Packets queued now.
    pub backlog: u64,
    /// Delays the models apply now.
    pub applied: Duration,
    /// Their median release lateness.
    pub lateness: Duration,
}

impl LinkSnapshot {
    /// Sums the reports; `None` when a direction is not calibrated.
    pub fn of(reports: &[(String, DirectionReport)]) -> Option<LinkSnapshot> {
        let mut s = LinkSnapshot {
            dequeued: 0,
            backlog: 0,
            applied: Duration::ZERO,
            lateness: Duration::ZERO,
        };
        for (_, r) in reports {
            let c = r.calibration?;
            s.dequeued += r.link.total.dequeued.packets;
            s.backlog += r.link.total.backlog.packets;
            s.applied += Duration::from_nanos(c.applied_ns);
            s.lateness += Duration::from_nanos(c.forwarding_ns);
        }
        (!reports.is_empty()).then_some(s)
    }
}

/// The hosts' overhead of a probe of `requests` echo requests whose
/// round trip was `rtt`, given the link before (`idle`, seen quiet) and
/// after it: `None` when anything but the probe's requests and replies
/// crossed the link, or something was queued.
pub fn probe_overhead(
    idle: &LinkSnapshot,
    after: &LinkSnapshot,
    requests: u64,
    rtt: Duration,
    serialization: Duration,
) -> Option<Duration> {
    let clean = idle.backlog == 0
        && after.backlog == 0
        && after.dequeued.checked_sub(idle.dequeued) == Some(2 * requests);
    clean.then(|| rtt.saturating_sub(after.applied + after.lateness + serialization))
}

/// Where the probes go.
#[derive(Debug)]
pub struct ProbePath {
    /// An ICMP echo socket made in the first client's namespace.
    pub socket: OwnedFd,
    /// The server's address.
    pub dst: Ipv4Addr,
    /// The probe's serialization time, both directions together.
    pub serialization: Duration,
}

/// [`PROBE_IP_BYTES`] at `rate_bps` (`None`: unshaped, no serialization).
pub fn serialization(rate_bps: Option<u64>) -> Duration {
    match rate_bps {
        Some(r) if r > 0 => Duration::from_nanos(PROBE_IP_BYTES * 8 * 1_000_000_000 / r),
        _ => Duration::ZERO,
    }
}

/// Reads the forwarding threads' latest reports.
pub type Reports = Box<dyn Fn() -> Vec<(String, DirectionReport)> + Send>;

/// The running prober thread; dropping it stops and joins it.
#[derive(Debug)]
pub struct IdleProber {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    report: Arc<Mutex<HostTrackReport>>,
}

impl IdleProber {
    /// Starts probing; new shares go to `share`, which starts at what lab
    /// up measured.
    pub fn start(path: ProbePath, reports: Reports, share: SharedShare) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let tracker = HostTracker::new(share.get());
        let report = Arc::new(Mutex::new(tracker.report()));
        let (st, rep) = (stop.clone(), report.clone());
        let thread = std::thread::Builder::new()
            .name("emu-path-track".into())
            .spawn(move || run(path, reports, share, tracker, &st, &rep))?;
        Ok(IdleProber {
            stop,
            thread: Some(thread),
            report,
        })
    }

    /// What the tracking did so far.
    pub fn report(&self) -> HostTrackReport {
        self.report.lock().map(|g| *g).unwrap_or_default()
    }
}

impl Drop for IdleProber {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sleeps `d` in short steps; false when asked to stop meanwhile.
fn nap(d: Duration, stop: &AtomicBool) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25).min(end - Instant::now()));
    }
    !stop.load(Ordering::Relaxed)
}

fn run(
    path: ProbePath,
    reports: Reports,
    share: SharedShare,
    mut tracker: HostTracker,
    stop: &AtomicBool,
    report: &Mutex<HostTrackReport>,
) {
    let snap = || LinkSnapshot::of(&reports());
    let mut seq = FIRST_SEQ;
    while nap(PROBE_EVERY, stop) {
        let Some(before) = snap() else { continue };
        if !nap(QUIET, stop) {
            return;
        }
        let Some(idle) = snap() else { continue };
        if idle.dequeued != before.dequeued || idle.backlog > 0 {
            continue; // traffic: come back later
        }
        // The links' delays and some: a reply later than that is lost.
        let timeout = idle.applied + idle.lateness + Duration::from_millis(500);
        let mut rtts = Vec::new();
        for _ in 0..BURST {
            seq = seq.wrapping_add(1).max(FIRST_SEQ);
            rtts.extend(path_probe::echo_rtt(&path.socket, path.dst, seq, timeout));
            std::thread::sleep(GAP);
        }
        if !nap(QUIET, stop) {
            return;
        }
        let (Some(rtt), Some(after)) = (burst_rtt(rtts), snap()) else {
            continue;
        };
        match probe_overhead(&idle, &after, BURST, rtt, path.serialization) {
            Some(o) => {
                if let Some(s) = tracker.sample(o) {
                    tracing::info!("host path share now {s:?} per direction");
                    share.set(s);
                }
            }
            None => tracker.discarded(),
        }
        if let Ok(mut g) = report.lock() {
            *g = tracker.report();
        }
    }
}

/// The median of a burst's round trips after the first; `None` unless
/// every request was answered.
pub fn burst_rtt(mut rtts: Vec<Duration>) -> Option<Duration> {
    if rtts.len() as u64 != BURST {
        return None;
    }
    let warm = &mut rtts[1..];
    warm.sort_unstable();
    Some(warm[warm.len() / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: fn(u64) -> Duration = Duration::from_micros;

    fn snap(dequeued: u64, backlog: u64) -> LinkSnapshot {
        LinkSnapshot {
            dequeued,
            backlog,
            applied: US(19_900),
            lateness: US(20),
        }
    }

    #[test]
    fn a_clean_probe_is_its_rtt_minus_the_links() {
        let o = probe_overhead(&snap(100, 0), &snap(108, 0), 4, US(20_200), US(70));
        assert_eq!(o, Some(US(210)));
    }

    #[test]
    fn a_burst_is_the_median_of_its_warm_round_trips() {
        // The first request wakes a cold path; it is left out.
        let b = vec![US(900), US(210), US(230), US(220)];
        assert_eq!(burst_rtt(b), Some(US(220)));
        assert_eq!(
            burst_rtt(vec![US(900), US(210), US(230)]),
            None,
            "a lost reply"
        );
    }

    #[test]
    fn serialization_of_a_probe() {
        assert_eq!(serialization(Some(1_000_000)), US(672));
        assert_eq!(
            serialization(Some(20_000_000)),
            Duration::from_nanos(33_600)
        );
        assert_eq!(serialization(None), Duration::ZERO);
    }

    #[test]
    fn other_traffic_or_a_queue_discards_the_probe() {
        let rtt = US(20_200);
        let z = US(0);
        assert_eq!(
            probe_overhead(&snap(100, 0), &snap(109, 0), 4, rtt, z),
            None
        );
        assert_eq!(
            probe_overhead(&snap(100, 0), &snap(107, 0), 4, rtt, z),
            None
        );
        assert_eq!(
            probe_overhead(&snap(100, 1), &snap(108, 0), 4, rtt, z),
            None
        );
        assert_eq!(
            probe_overhead(&snap(100, 0), &snap(108, 1), 4, rtt, z),
            None
        );
        // Counters that went backwards (a restarted thread) are not "8 more".
        assert_eq!(probe_overhead(&snap(100, 0), &snap(92, 0), 4, rtt, z), None);
    }
}
