//! The emulator driver: one forwarding thread per direction over TUN fds,
//! each with its own link model. Threads publish counters a few times a
//! second; [`Emulator::reports`] collects them for `lab status`.

pub mod calibrate;
pub mod direction;
pub mod histogram;
pub mod host_track;
pub mod idle_probe;
pub mod path_probe;
pub mod priority;
pub mod timing;
pub mod wake;

use crate::model::LinkModel;
use direction::{DirectionIo, DirectionReport};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Running forwarding threads. Dropping it stops and joins them; the fds
/// they use must stay open until then.
#[derive(Debug)]
pub struct Emulator {
    stop: Arc<AtomicBool>,
    threads: Vec<(String, JoinHandle<()>, Arc<Mutex<DirectionReport>>)>,
}

impl Emulator {
    /// Starts one thread per `(io, model)` pair. Times are measured from
    /// `origin`.
    pub fn start(
        dirs: Vec<(DirectionIo, Box<dyn LinkModel>)>,
        origin: Instant,
        spin: Duration,
        realtime: bool,
    ) -> std::io::Result<Emulator> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut em = Emulator {
            stop: stop.clone(),
            threads: Vec::new(),
        };
        let board = Arc::new(priority::BusyBoard::new(dirs.len()));
        for (slot, (io, model)) in dirs.into_iter().enumerate() {
            let shared = Arc::new(Mutex::new(DirectionReport {
                running: true,
                ..DirectionReport::default()
            }));
            let (s, st, b) = (shared.clone(), stop.clone(), board.clone());
            let name = io.name.clone();
            let clock = timing::Clock::new(origin);
            let h = std::thread::Builder::new()
                .name(format!("emu-{name}"))
                .spawn(move || {
                    let sched = direction::Scheduling { spin, realtime };
                    direction::run(&io, model, clock, &st, &s, (&b, slot), sched)
                })?;
            em.threads.push((name, h, shared));
        }
        Ok(em)
    }

    /// The latest report of each direction, by name. A thread that died
    /// (panicked) reports `running: false`.
    pub fn reports(&self) -> Vec<(String, DirectionReport)> {
        self.threads
            .iter()
            .map(|(n, h, s)| {
                let mut r = s.lock().map(|g| g.clone()).unwrap_or_default();
                if h.is_finished() {
                    r.running = false;
                }
                (n.clone(), r)
            })
            .collect()
    }

    /// A reader of the threads' latest reports that outlives this borrow
    /// (the idle prober's, driver/idle_probe.rs).
    pub fn report_reader(&self) -> idle_probe::Reports {
        let shared: Vec<(String, Arc<Mutex<DirectionReport>>)> = self
            .threads
            .iter()
            .map(|(n, _, s)| (n.clone(), s.clone()))
            .collect();
        Box::new(move || {
            shared
                .iter()
                .map(|(n, s)| (n.clone(), s.lock().map(|g| g.clone()).unwrap_or_default()))
                .collect()
        })
    }

    /// True when every thread still runs.
    pub fn healthy(&self) -> bool {
        self.threads.iter().all(|(_, h, _)| !h.is_finished())
    }

    /// Stops and joins the threads.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (name, h, _) in self.threads.drain(..) {
            if h.join().is_err() {
                tracing::error!("forwarding thread {name} panicked");
            }
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.stop();
    }
}
