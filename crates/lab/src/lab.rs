//! Building, running and removing a lab.
//!
//! [`Lab::build`] creates every object behind a guard; if any step fails,
//! the guards built so far are dropped and remove what was created.
//! Dropping a [`Lab`] stops the forwarding threads, closes the TUN fds
//! (non-persistent TUNs vanish with them), then removes the namespaces, in
//! that order: a namespace whose TUN fd is still open outlives its name
//! (emulation.md 4.1). `remove_by_name` (crate-private, behind `lab down`) cleans up after a crash.

use crate::driver::Emulator;
use crate::driver::calibrate::Calibrated;
use crate::driver::direction::{DirectionIo, DirectionReport};
use crate::driver::host_track::{HostTrackReport, SharedShare};
use crate::driver::idle_probe::{self, IdleProber, ProbePath};
use crate::driver::path_probe::{self, PathCalibration};
use crate::error::{LabError, Result};
use crate::model;
use crate::netlink::Netlink;
use crate::netlink::msg::LinkStats;
use crate::netlink::qdisc_stats::QdiscStats;
use crate::netns::{self, NetnsGuard};
use crate::spec::{Backend, Host, LabSpec, LinkSpec, PREFIX_LEN, PREFIX_LEN6, Side};
use crate::state::StateDir;
use crate::sysctl;
use crate::trace_file;
use crate::tun::{Offload, Tun};
use crate::{kernel, names};
use serde::{Deserialize, Serialize};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// TUN transmit ring length. Small on purpose: the ring is a queue in
/// front of the emulated one that the AQM cannot see (emulation.md 4.1);
/// drops in it are reported as overload.
pub(crate) const TUN_TXQLEN: u32 = 500;

/// A host's live objects.
#[derive(Debug)]
struct HostRt {
    host: Host,
    tun: Option<Tun>,
    nl: Netlink,
    index: i32,
}

/// A running lab. Drop it to tear everything down.
#[derive(Debug)]
pub struct Lab {
    spec: LabSpec,
    started: Instant,
    emulator: Option<Emulator>,
    /// Trace writers; finished after the emulator stops (its link models
    /// hold the other ends of their channels).
    traces: Vec<trace_file::TraceWriter>,
    /// Kernel backend: a netlink socket in the router namespace and the
    /// indices of the `bl-up`/`bl-down` devices that carry the qdiscs.
    router: Option<(Netlink, i32, i32)>,
    hosts: Vec<HostRt>,
    guards: Vec<NetnsGuard>,
    /// The path overhead measured at `lab up` (calibrated delay).
    host_paths: Option<PathCalibration>,
    /// Tracks the hosts' share after lab up (driver/idle_probe.rs).
    tracker: Option<IdleProber>,
}

/// Per-device counters in a status report.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeviceStatus {
    pub host: String,
    pub ifname: String,
    pub stats: LinkStats,
}

/// The emulator's counters (the `NAME.status.json` file, written twice a
/// second; read it with [`crate::status::read`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabStatus {
    pub name: String,
    pub backend: Backend,
    /// Seconds since the lab came up.
    pub uptime_s: f64,
    /// When these counters were taken, seconds since the Unix epoch (0 in
    /// files of older emulators): with `uptime_s` it places each
    /// direction's `at_s` on the wall clock ([`LabStatus::taken_unix_s`]).
    #[serde(default)]
    pub unix_time_s: f64,
    /// `up` and `down` driver reports (userspace backend only).
    pub directions: Vec<(String, DirectionReport)>,
    pub devices: Vec<DeviceStatus>,
    /// Packets dropped in TUN rings because the emulator read too slowly:
    /// above zero, the emulator was overloaded and results are suspect.
    pub tun_ring_drops: u64,
    /// Kernel backend: the qdiscs shaping each direction (`up`, `down`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qdiscs: Vec<(String, QdiscStats)>,
    /// The path overhead measured at `lab up` (absent with
    /// `--no-calibrate` and for the kernel backend).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calibration: Option<PathCalibration>,
    /// The hosts' share tracked by idle probes since `lab up` (absent
    /// without calibration, with chained links, jitter or a rate schedule or
    /// trace, and in files of older emulators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_tracking: Option<HostTrackReport>,
}

impl LabStatus {
    /// When the oldest direction report in here was taken, seconds since
    /// the Unix epoch (the file's own time when there are none).
    pub fn taken_unix_s(&self) -> f64 {
        let origin = self.unix_time_s - self.uptime_s;
        self.directions
            .iter()
            .map(|(_, r)| origin + r.at_s)
            .fold(self.unix_time_s, f64::min)
    }

    /// The report of direction `name` (`up` or `down`).
    pub fn direction(&self, name: &str) -> Option<&DirectionReport> {
        self.directions
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r)
    }
}

fn setup_host(spec: &LabSpec, host: &Host, with_tun: bool) -> Result<(Option<Tun>, Netlink, i32)> {
    netns::run_in(&host.netns, || {
        let tun = if with_tun {
            let offload = if spec.driver.offload {
                Offload::Tso
            } else {
                Offload::Off
            };
            Some(Tun::create(&host.ifname, offload)?)
        } else {
            None
        };
        let mut nl = Netlink::open()?;
        let lo = nl.link_index("lo")?;
        nl.set_link(lo, None, None)?;
        let index = nl.link_index(&host.ifname)?;
        nl.set_link(index, Some(spec.mtu), Some(TUN_TXQLEN))?;
        nl.add_addr_v4(index, host.addr, PREFIX_LEN)?;
        nl.add_addr_v6(index, host.addr6, PREFIX_LEN6)?;
        host_sysctls(spec, host)?;
        Ok((tun, nl, index))
    })
}

/// Sysctls every lab host gets, plus the per-host ECN and congestion
/// control choices. Runs inside the host's namespace.
pub(crate) fn host_sysctls(spec: &LabSpec, host: &Host) -> Result<()> {
    // Let unprivileged ICMP echo sockets work (ping without root).
    sysctl::write("net.ipv4.ping_group_range", "0 2147483647")?;
    if spec.ecn_hosts.contains(&host.name) {
        sysctl::write("net.ipv4.tcp_ecn", "1")?;
    }
    if let Some(cc) = spec.cc.get(&host.name) {
        sysctl::write("net.ipv4.tcp_congestion_control", cc)?;
    }
    Ok(())
}

/// Checks `spec` before anything is built: its fields against each other
/// ([`LabSpec::validate`]), then what its backend can do (the backend
/// module's `check`: [`crate::userspace::check`], [`crate::kernel::check`]).
pub fn check(spec: &LabSpec) -> Result<()> {
    spec.validate()?;
    match spec.backend {
        Backend::Userspace => crate::userspace::check(spec),
        Backend::Kernel => kernel::check(spec),
    }
}

impl Lab {
    /// Builds the lab described by `spec` (checked first, see [`check`]).
    pub fn build(spec: &LabSpec) -> Result<Lab> {
        check(spec)?;
        let mut lab = Lab {
            spec: spec.clone(),
            started: Instant::now(),
            emulator: None,
            traces: Vec::new(),
            router: None,
            hosts: Vec::new(),
            guards: Vec::new(),
            host_paths: None,
            tracker: None,
        };
        for ns in spec.namespaces() {
            lab.guards.push(NetnsGuard::create(&ns)?);
        }
        match spec.backend {
            Backend::Userspace => lab.build_userspace()?,
            Backend::Kernel => {
                for host in spec.hosts() {
                    kernel::wire_host(spec, &host)?;
                }
                kernel::configure_router(spec)?;
                lab.router = Some(netns::run_in(&kernel::router_ns(spec), || {
                    let mut nl = Netlink::open()?;
                    let up = nl.link_index("bl-up")?;
                    let down = nl.link_index("bl-down")?;
                    Ok((nl, up, down))
                })?);
                for host in spec.hosts() {
                    let (_, nl, index) = setup_host(spec, &host, false)?;
                    lab.hosts.push(HostRt {
                        host,
                        tun: None,
                        nl,
                        index,
                    });
                }
            }
        }
        Ok(lab)
    }

    fn build_userspace(&mut self) -> Result<()> {
        let spec = self.spec.clone();
        for host in spec.hosts() {
            let (tun, nl, index) = setup_host(&spec, &host, true)?;
            self.hosts.push(HostRt {
                host,
                tun,
                nl,
                index,
            });
        }
        // Every host is reached by its IPv4 and its IPv6 address.
        let fds = |side: Side| -> Vec<(std::net::IpAddr, i32)> {
            self.hosts
                .iter()
                .filter(|h| h.host.side == side)
                .filter_map(|h| h.tun.as_ref().map(|t| (&h.host, t.fd().as_raw_fd())))
                .flat_map(|(h, fd)| [(h.addr.into(), fd), (h.addr6.into(), fd)])
                .collect()
        };
        let (clients, servers) = (fds(Side::Client), fds(Side::Server));
        let up = DirectionIo {
            name: "up".into(),
            inputs: tun_fds(&clients),
            outputs: servers.clone(),
            offload: spec.driver.offload,
        };
        let down = DirectionIo {
            name: "down".into(),
            inputs: tun_fds(&servers),
            outputs: clients,
            offload: spec.driver.offload,
        };
        let seed = spec.driver.seed;
        // `--trace`: one file per queue (model::build names them).
        let traces = &mut self.traces;
        let mut open = spec.driver.trace.as_deref().map(|prefix| {
            move |file: &str| -> Result<bloatlab_emu::TraceFn> {
                let (callback, writer) = trace_file::open(prefix, file)?;
                traces.push(writer);
                Ok(callback)
            }
        });
        let mut up_model = model::build(
            "up",
            &spec.up,
            seed,
            open.as_mut().map(|f| f as model::TraceOpener<'_>),
        )?;
        let mut down_model = model::build(
            "down",
            &spec.down,
            seed.wrapping_add(1),
            open.as_mut().map(|f| f as model::TraceOpener<'_>),
        )?;
        let mut share = None;
        if spec.driver.calibrate {
            let cal = self.measure_path(&up, &down)?;
            let s = SharedShare::new(Duration::from_nanos(cal.share_ns));
            up_model = Calibrated::wrap_tracked(up_model, s.clone());
            down_model = Calibrated::wrap_tracked(down_model, s.clone());
            share = (cal.answered > 0).then_some(s);
            self.host_paths = Some(cal);
        }
        let dirs = vec![(up, up_model), (down, down_model)];
        let em = Emulator::start(dirs, self.started, spec.driver.spin, spec.driver.realtime)
            .map_err(|e| LabError::io("start forwarding threads", e))?;
        if let Some(s) = share {
            self.tracker = self.start_tracking(&em, s)?;
        }
        self.emulator = Some(em);
        Ok(())
    }

    /// Starts tracking the hosts' share with idle probes, except where a
    /// probe's link time is not known from the reports: chained links,
    /// jitter, and rates that follow a schedule or a trace (a probe may wait
    /// for a trace's next opportunity) (docs/lab.md).
    fn start_tracking(&self, em: &Emulator, share: SharedShare) -> Result<Option<IdleProber>> {
        let (up, down) = (&self.spec.up, &self.spec.down);
        if [up, down].iter().any(|d| {
            !d.stages.is_empty()
                || d.jitter.is_some()
                || d.rate.as_ref().is_some_and(|r| r.get().capacity.is_some())
        }) {
            tracing::info!("host path tracking off: chained links, jitter or a varying rate");
            return Ok(None);
        }
        let hosts = self.spec.hosts();
        let client = hosts.iter().find(|h| h.side == Side::Client);
        let server = hosts.iter().find(|h| h.side == Side::Server);
        let (Some(client), Some(server)) = (client, server) else {
            return Ok(None);
        };
        let rate = |d: &LinkSpec| d.rate.as_ref().map(|r| r.get().nominal.0);
        let serialization =
            idle_probe::serialization(rate(up)) + idle_probe::serialization(rate(down));
        let socket = netns::run_in(&client.netns, path_probe::icmp_socket)?;
        let path = ProbePath {
            socket,
            dst: server.addr,
            serialization,
        };
        IdleProber::start(path, em.report_reader(), share)
            .map(Some)
            .map_err(|e| LabError::io("start the host path tracker", e))
    }

    /// Runs the forwarding threads with [`path_probe::PROBE_DELAY`] each
    /// way and times echo requests from the first client to the server
    /// (driver/path_probe.rs), then stops them again.
    fn measure_path(&self, up: &DirectionIo, down: &DirectionIo) -> Result<PathCalibration> {
        let probe_link = LinkSpec {
            delay: Some(path_probe::PROBE_DELAY.into()),
            ..LinkSpec::default()
        };
        let models = vec![
            (up.clone(), model::build("up", &probe_link, 1, None)?),
            (down.clone(), model::build("down", &probe_link, 2, None)?),
        ];
        let d = &self.spec.driver;
        let mut em = Emulator::start(models, Instant::now(), d.spin, d.realtime)
            .map_err(|e| LabError::io("start forwarding threads", e))?;
        let hosts = self.spec.hosts();
        let client = hosts.iter().find(|h| h.side == Side::Client);
        let server = hosts.iter().find(|h| h.side == Side::Server);
        let (Some(client), Some(server)) = (client, server) else {
            return Ok(PathCalibration::default());
        };
        let rtts = netns::run_in(&client.netns, || {
            let sock = path_probe::icmp_socket()?;
            Ok(path_probe::echo_rtts(&sock, server.addr))
        })?;
        // The threads publish every 200 ms; the probes took longer.
        let lateness: u64 = em
            .reports()
            .iter()
            .map(|(_, r)| (r.lateness.p50_us * 1e3) as u64)
            .sum();
        em.stop();
        let cal = path_probe::derive(&rtts, Duration::from_nanos(lateness));
        if cal.answered == 0 {
            tracing::warn!(
                "calibration: no echo reply from {}; delay not trimmed",
                server.name
            );
        }
        tracing::info!("calibration: {cal:?}");
        Ok(cal)
    }

    /// The spec the lab was built from.
    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }

    /// False when a forwarding thread died.
    pub(crate) fn healthy(&self) -> bool {
        self.emulator.as_ref().is_none_or(|e| e.healthy())
    }

    /// Current counters.
    pub fn status(&mut self) -> LabStatus {
        let mut devices = Vec::new();
        let mut drops = 0;
        for h in &mut self.hosts {
            let stats = h.nl.link_stats(h.index).unwrap_or_default();
            if h.tun.is_some() {
                drops += stats.tx_dropped;
            }
            devices.push(DeviceStatus {
                host: h.host.name.clone(),
                ifname: h.host.ifname.clone(),
                stats,
            });
        }
        LabStatus {
            name: self.spec.name.clone(),
            backend: self.spec.backend,
            uptime_s: self.started.elapsed().as_secs_f64(),
            unix_time_s: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            directions: self
                .emulator
                .as_ref()
                .map(|e| e.reports())
                .unwrap_or_default(),
            devices,
            tun_ring_drops: drops,
            qdiscs: self.router_qdiscs(),
            calibration: self.host_paths.clone(),
            host_tracking: self.tracker.as_ref().map(IdleProber::report),
        }
    }

    /// Counters of the qdiscs on `bl-up` and `bl-down` (kernel backend).
    fn router_qdiscs(&mut self) -> Vec<(String, QdiscStats)> {
        let Some((nl, up, down)) = self.router.as_mut() else {
            return Vec::new();
        };
        let (up, down) = (*up, *down);
        let mut v: Vec<(String, QdiscStats)> = nl
            .qdisc_stats()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|q| match q.ifindex {
                i if i == up => Some(("up".to_string(), q)),
                i if i == down => Some(("down".to_string(), q)),
                _ => None,
            })
            .collect();
        v.sort_by_key(|(dir, q)| (dir != "up", q.handle));
        v
    }

    /// Runs until `stop()` returns true or a forwarding thread dies,
    /// writing `NAME.status.json` every [`STATUS_EVERY`]. Warns (once per
    /// increase) when TUN rings drop packets.
    /// Writes the counters file (`lab status` reads it). Called once before the lab reports
    /// ready, so a caller that goes on at once (`lab up && bloatlab tune ...`) finds it.
    pub(crate) fn publish_status(&mut self, dir: &StateDir) {
        let st = self.status();
        write_status(dir, &self.spec.name, &st);
    }

    pub fn run(&mut self, dir: &StateDir, stop: impl Fn() -> bool) -> Result<()> {
        let mut last_drops = 0;
        let mut next = Instant::now();
        while !stop() {
            if !self.healthy() {
                return Err(LabError::Sys {
                    op: "emulator".into(),
                    source: std::io::Error::other("a forwarding thread died"),
                });
            }
            if Instant::now() >= next {
                let st = self.status();
                if st.tun_ring_drops > last_drops {
                    tracing::warn!(
                        "emulator overloaded: {} packets dropped in TUN rings (total {})",
                        st.tun_ring_drops - last_drops,
                        st.tun_ring_drops
                    );
                    last_drops = st.tun_ring_drops;
                }
                write_status(dir, &self.spec.name, &st);
                next = Instant::now() + STATUS_EVERY;
            }
            // Rate changes: the status file shows the new rates before the
            // caller hears back, so `lab status` right after `lab set` agrees.
            let answers = crate::ratectl::apply(dir, &self.spec.name, self.emulator.as_ref());
            if !answers.is_empty() {
                let st = self.status();
                write_status(dir, &self.spec.name, &st);
                crate::ratectl::reply(dir, &self.spec.name, &answers);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }
}

/// How often the status file (`lab status`, and the load `bloatlab autorate --lab` reads) is
/// rewritten; also after every `lab set`. Ten times a second: autorate cuts on 25-ms probes,
/// and a load read up to half a second late (the period was 500 ms) still showed the rate
/// of before a line's step when the step's first cut was decided (docs/autorate.md).
pub(crate) const STATUS_EVERY: Duration = Duration::from_millis(100);

impl Drop for Lab {
    fn drop(&mut self) {
        // Order matters: the prober, threads, then fds, then namespaces.
        self.tracker = None;
        if let Some(mut e) = self.emulator.take() {
            e.stop();
        }
        for t in self.traces.drain(..) {
            t.finish();
        }
        self.router = None;
        self.hosts.clear();
        self.guards.clear();
    }
}

/// Removes every namespace lab `name` may have left behind: those listed
/// in its state file and any `/run/netns` entry matching the lab's exact
/// naming scheme. Returns the namespaces removed.
pub(crate) fn remove_by_name(name: &str, listed: &[String]) -> Result<Vec<String>> {
    names::validate(name)?;
    let mut removed = Vec::new();
    let mut candidates: Vec<String> = listed
        .iter()
        .filter(|n| names::is_lab_netns(name, n))
        .cloned()
        .collect();
    for ns in netns::list() {
        if names::is_lab_netns(name, &ns) && !candidates.contains(&ns) {
            candidates.push(ns);
        }
    }
    let mut first_err = None;
    for ns in candidates {
        if !netns::exists(&ns) {
            continue;
        }
        match netns::delete(&ns) {
            Ok(()) => removed.push(ns),
            Err(e) => {
                tracing::warn!("removing {ns}: {e}");
                first_err.get_or_insert(e);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// Each TUN fd once (a host is listed with both of its addresses).
fn tun_fds(outputs: &[(std::net::IpAddr, i32)]) -> Vec<i32> {
    let mut v: Vec<i32> = outputs.iter().map(|(_, fd)| *fd).collect();
    v.dedup();
    v
}

/// Linux capability numbers (linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// Fails with [`LabError::Privilege`] unless the process has CAP_NET_ADMIN
/// and CAP_SYS_ADMIN (netns mounts and `setns` need the latter).
pub(crate) fn check_privilege(what: &'static str) -> Result<()> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let caps = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    let need = (1u64 << CAP_NET_ADMIN) | (1u64 << CAP_SYS_ADMIN);
    if caps & need == need {
        Ok(())
    } else {
        Err(LabError::Privilege { what })
    }
}

fn write_status(dir: &StateDir, name: &str, st: &LabStatus) {
    if let Ok(v) = serde_json::to_vec_pretty(st) {
        let _ = crate::state::write_atomic(&dir.status(name), &v);
    }
}
