//! A whole `bloatlab rpm` session: fetch the config, measure idle latency, then one run
//! of the algorithm (both directions at once) or two (download, then upload), each driven
//! by the sans-IO [`Run`] on tokio. The event loop is thin: it samples the load
//! connections' byte counters, hands the run what happened, carries out its actions, and
//! sleeps until the run's next deadline or the next event (at most [`TICK`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

use http::{Method, Uri};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use super::net::{self, Endpoint, NetError, Protocol, ReqBody};
use super::probe::{self, Event, LoadShared};
use super::tls;
use super::{ClientError, Idle, Mode, Options, Report, RunName, Update};
use crate::config::{self, TestConfig};
use crate::run::{Action, ConnId, Direction, Limits, Outcome, Run, Timing};

/// Longest sleep of the event loop: how fresh the byte counters are when an interval
/// closes, and how soon a stall or a Ctrl-C is seen.
pub const TICK: Duration = Duration::from_millis(50);

/// GETs of the small object on the idle connection before any load.
pub const IDLE_GETS: usize = 10;

/// Longest config document accepted.
const CONFIG_LIMIT: u64 = 64 * 1024;

async fn resolve(host: &str, port: u16) -> Result<SocketAddr, ClientError> {
    tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| ClientError::Resolve(format!("{host}: {e}")))?
        .next()
        .ok_or_else(|| ClientError::Resolve(format!("{host}: no addresses")))
}

fn host_of(u: &Uri) -> String {
    u.host()
        .unwrap_or_default()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned()
}

fn port_of(u: &Uri) -> u16 {
    u.port_u16().unwrap_or(if u.scheme_str() == Some("https") {
        443
    } else {
        80
    })
}

/// Fetches and checks the config, over HTTP/1.1 (which every server speaks).
async fn fetch_config(opts: &Options) -> Result<TestConfig, ClientError> {
    let url = &opts.config_url;
    let host = host_of(url);
    let tls = match url.scheme_str() {
        Some("https") => Some(tls::client_config(&opts.trust, &[b"http/1.1"])?),
        _ => None,
    };
    let ep = Endpoint {
        addr: resolve(&host, port_of(url)).await?,
        host,
        tls,
        protocol: Protocol::H1,
        permit_key: opts.permit_key.clone(),
    };
    let fetch = async {
        let mut c = net::connect(&ep).await?;
        let req = net::request(&ep, Method::GET, url, ReqBody::Empty)?;
        let resp = c
            .sender
            .send(req)
            .await
            .map_err(|e| NetError(format!("GET {url}: {e}")))?;
        net::check_response(url, &resp)?;
        net::read_to_end(url, resp.into_body(), CONFIG_LIMIT).await
    };
    let body = tokio::time::timeout(Duration::from_secs(10), fetch)
        .await
        .map_err(|_| ClientError::Config(format!("{url}: no answer within 10 s")))?
        .map_err(|e| ClientError::Config(e.0))?;
    config::parse(&body).map_err(|e| ClientError::Config(format!("{url}: {e}")))
}

/// The idle connection: its handshakes and [`IDLE_GETS`] GETs one after another.
async fn idle(ep: &Endpoint, small: &Uri, t0: Instant) -> Result<Idle, ClientError> {
    let start = t0.elapsed();
    let mut c = net::connect(ep).await.map_err(ClientError::Idle)?;
    let mut gets = Vec::new();
    for _ in 0..IDLE_GETS {
        let sent = t0.elapsed();
        let rtt = probe::get_small(ep, &mut c.sender, small)
            .await
            .map_err(ClientError::Idle)?;
        gets.push((sent, rtt));
    }
    Ok(Idle {
        start,
        end: t0.elapsed(),
        tcp: c.tcp,
        tls: c.tls,
        tls_version: c.tls_version,
        gets,
    })
}

/// Runs a session.
pub async fn session(
    opts: &Options,
    stop: &AtomicBool,
    on_update: &mut dyn FnMut(Update),
) -> Result<Report, ClientError> {
    opts.params
        .validate()
        .map_err(|e| ClientError::Usage(e.to_string()))?;
    let start_wall = SystemTime::now();
    let t0 = Instant::now();
    let deadline = opts.duration;
    let cfg = fetch_config(opts).await?;
    let connect_host = cfg
        .test_endpoint
        .clone()
        .unwrap_or_else(|| cfg.host.clone());
    let addr = resolve(&connect_host, cfg.port).await?;
    let alpn: &[&[u8]] = match opts.protocol {
        Protocol::H2 => &[b"h2"],
        Protocol::H1 => &[b"http/1.1"],
    };
    let ep = Endpoint {
        addr,
        host: cfg.host.clone(),
        tls: if cfg.tls {
            Some(tls::client_config(&opts.trust, alpn)?)
        } else {
            None
        },
        protocol: opts.protocol,
        permit_key: opts.permit_key.clone(),
    };
    on_update(Update::Config { config: &cfg, addr });
    let idle = idle(&ep, &cfg.small, t0).await?;
    on_update(Update::Idle(&idle));
    let plan: Vec<(RunName, Vec<Direction>)> = match opts.mode {
        Mode::Concurrent => vec![(
            RunName::Concurrent,
            vec![Direction::Download, Direction::Upload],
        )],
        Mode::Sequential => vec![
            (RunName::Download, vec![Direction::Download]),
            (RunName::Upload, vec![Direction::Upload]),
        ],
        Mode::DownloadOnly => vec![(RunName::Download, vec![Direction::Download])],
        Mode::UploadOnly => vec![(RunName::Upload, vec![Direction::Upload])],
    };
    let tls_version = idle.tls_version;
    let mut runs = Vec::new();
    let n = plan.len();
    for (k, (name, dirs)) in plan.into_iter().enumerate() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let now = t0.elapsed();
        // The time left, shared evenly among the runs still to come.
        let left = deadline.saturating_sub(now);
        let until = now + left / (n - k) as u32;
        let outcome = drive(
            &ep, &cfg, opts, name, &dirs, t0, now, until, stop, on_update,
        )
        .await?;
        runs.push((name, outcome));
    }
    Ok(Report {
        config_url: opts.config_url.to_string(),
        config: cfg,
        addr,
        protocol: opts.protocol,
        tls_version,
        mode: opts.mode,
        params: opts.params,
        duration: opts.duration,
        start_wall,
        idle: Some(idle),
        runs,
        interrupted: stop.load(Ordering::Relaxed),
        elapsed: t0.elapsed(),
    })
}

/// One run of the algorithm.
#[allow(clippy::too_many_arguments)]
async fn drive(
    ep: &Endpoint,
    cfg: &TestConfig,
    opts: &Options,
    name: RunName,
    dirs: &[Direction],
    t0: Instant,
    start: Duration,
    deadline: Duration,
    stop: &AtomicBool,
    on_update: &mut dyn FnMut(Update),
) -> Result<Outcome, ClientError> {
    let mut limits = Limits::until(deadline);
    limits.stall_timeout = opts.stall_timeout;
    limits.setup_timeout = opts.stall_timeout * 2;
    let seed = start_seed();
    let mut run = Run::new(opts.params, dirs, start, limits, seed);
    let (tx, mut rx) = mpsc::channel::<Event>(4096);
    // Dropping the set aborts every task: load connections and probes in flight.
    let mut tasks = JoinSet::new();
    let mut loads: BTreeMap<ConnId, (Direction, Arc<LoadShared>)> = BTreeMap::new();
    let mut next_update = start;
    loop {
        let now = t0.elapsed();
        for (&id, (dir, shared)) in &loads {
            run.load_progress(now, id, shared.goodput(*dir));
        }
        while let Some(action) = run.poll(now) {
            tracing::debug!(?action, at = ?now, "action");
            match action {
                Action::OpenLoad { conn, direction } => {
                    let shared = Arc::new(LoadShared::default());
                    loads.insert(conn, (direction, Arc::clone(&shared)));
                    let url = match direction {
                        Direction::Download => cfg.large.clone(),
                        Direction::Upload => cfg.upload.clone(),
                    };
                    tasks.spawn(probe::load(
                        ep.clone(),
                        conn,
                        direction,
                        url,
                        shared,
                        tx.clone(),
                    ));
                }
                Action::ForeignProbe { probe } => {
                    tasks.spawn(probe::foreign(
                        ep.clone(),
                        probe,
                        cfg.small.clone(),
                        tx.clone(),
                    ));
                }
                Action::SelfProbe { probe, conn } => {
                    let Some((dir, shared)) = loads.get(&conn) else {
                        continue;
                    };
                    match ep.protocol {
                        Protocol::H2 => {
                            let sender =
                                shared.h2.lock().ok().and_then(|h| {
                                    h.as_ref().and_then(super::net::Sender::h2_handle)
                                });
                            match sender {
                                Some(s) => {
                                    tasks.spawn(probe::on_load(
                                        ep.clone(),
                                        probe,
                                        s,
                                        cfg.small.clone(),
                                        tx.clone(),
                                    ));
                                }
                                None => run.probe_failed(
                                    now,
                                    probe,
                                    format!("load connection {} has no HTTP/2 handle", conn.0),
                                ),
                            }
                        }
                        Protocol::H1 => match shared.tcp_rtt(*dir) {
                            Some(http) => run.probe_done(now, probe, Timing::SelfProbe { http }),
                            None => run.probe_failed(
                                now,
                                probe,
                                format!("no TCP_INFO RTT on load connection {}", conn.0),
                            ),
                        },
                    }
                }
            }
        }
        if run.is_finished() {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            run.stop(now);
            break;
        }
        if now >= next_update {
            on_update(Update::Progress {
                run: name,
                elapsed: now.saturating_sub(start),
                progress: run.progress(),
            });
            next_update = now + Duration::from_secs(1);
        }
        let wake = run.poll_at().unwrap_or(now).min(now + TICK);
        tokio::select! {
            ev = rx.recv() => {
                let now = t0.elapsed();
                match ev {
                    Some(Event::LoadReady(c)) => run.load_ready(now, c),
                    Some(Event::LoadFailed(c, why)) => run.load_failed(now, c, why),
                    Some(Event::ProbeDone(p, t)) => run.probe_done(now, p, t),
                    Some(Event::ProbeFailed(p, why)) => run.probe_failed(now, p, why),
                    None => {}
                }
            }
            _ = tokio::time::sleep_until((t0 + wake).into()) => {}
        }
    }
    tasks.abort_all();
    drop(tasks);
    let outcome = run.finish().map_err(|e| ClientError::Run(name, e))?;
    on_update(Update::RunDone {
        run: name,
        outcome: &outcome,
    });
    Ok(outcome)
}

fn start_seed() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
}
