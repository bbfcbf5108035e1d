//! The emulator driver: one forwarding thread per direction over TUN fds,
//! each with its own link model. Threads publish counters a few times a
//! second; `Emulator::reports` collects them for `lab status`.

// `direction` and `histogram` hold the report types `lab status` and the
// suite read; `timing` is public only with the `internals` feature, for the
// tun_copy bench floor (examples/).
pub(crate) mod calibrate;
#[cfg(test)]
mod calibration_sim;
pub mod direction;
pub mod histogram;
pub(crate) mod host_track;
pub(crate) mod idle_probe;
pub(crate) mod path_probe;
pub(crate) mod priority;
#[cfg(feature = "internals")]
pub mod timing;
#[cfg(not(feature = "internals"))]
pub(crate) mod timing;
pub(crate) mod wake;

use crate::model::LinkModel;
use direction::{DirectionIo, DirectionReport};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Running forwarding threads. Dropping it stops and joins them; the fds
/// they use must stay open until then.
#[derive(Debug)]
pub(crate) struct Emulator {
    stop: Arc<AtomicBool>,
    threads: Vec<Thread>,
}

/// One direction's thread, its latest report and its inbox.
type Thread = (
    String,
    JoinHandle<()>,
    Arc<Mutex<DirectionReport>>,
    Arc<Inbox>,
);

/// A stage change for a forwarding thread (`lab set --stage-rate`,
/// `--stage-delay`), with where to send the outcome (the stage's name, or
/// why not).
#[derive(Debug)]
pub(crate) struct RateChange {
    /// Stage name or 1-based position.
    pub stage: String,
    /// The new rate (fixed, schedule or trace) or delay.
    pub setting: bloatlab_emu::StageSetting,
    /// The thread's answer.
    pub reply: mpsc::Sender<Result<String, String>>,
}

/// Requests waiting for a forwarding thread. The thread checks the flag on
/// every loop iteration (at least every 50 ms, its idle cap) and takes the
/// lock only when something is waiting, so the packet path stays lock-free.
#[derive(Debug, Default)]
pub(crate) struct Inbox {
    pending: AtomicBool,
    queue: Mutex<Vec<RateChange>>,
}

impl Inbox {
    fn post(&self, c: RateChange) {
        if let Ok(mut q) = self.queue.lock() {
            q.push(c);
            self.pending.store(true, Ordering::Release);
        }
    }

    /// The requests waiting, if any (called by the forwarding thread).
    pub fn take(&self) -> Vec<RateChange> {
        if !self.pending.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        self.queue
            .lock()
            .map(|mut q| std::mem::take(&mut *q))
            .unwrap_or_default()
    }
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
            let inbox = Arc::new(Inbox::default());
            let (s, st, b, ib) = (shared.clone(), stop.clone(), board.clone(), inbox.clone());
            let name = io.name.clone();
            let clock = timing::Clock::new(origin);
            let h = std::thread::Builder::new()
                .name(format!("emu-{name}"))
                .spawn(move || {
                    let sched = direction::Scheduling { spin, realtime };
                    direction::run(&io, model, clock, &st, (&s, &ib), (&b, slot), sched)
                })?;
            em.threads.push((name, h, shared, inbox));
        }
        Ok(em)
    }

    /// The latest report of each direction, by name. A thread that died
    /// (panicked) reports `running: false`.
    pub fn reports(&self) -> Vec<(String, DirectionReport)> {
        self.threads
            .iter()
            .map(|(n, h, s, _)| {
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
            .map(|(n, _, s, _)| (n.clone(), s.clone()))
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
        self.threads.iter().all(|(_, h, _, _)| !h.is_finished())
    }

    /// Applies `setting` (a rate, schedule, trace or delay) to a stage of
    /// direction `dir` and waits (at most `timeout`) for its thread to
    /// apply it. Returns the stage's name.
    pub fn set_stage(
        &self,
        dir: &str,
        stage: &str,
        setting: bloatlab_emu::StageSetting,
        timeout: Duration,
    ) -> Result<String, String> {
        let (_, h, _, inbox) = self
            .threads
            .iter()
            .find(|(n, ..)| n == dir)
            .ok_or_else(|| format!("no direction {dir:?}"))?;
        if h.is_finished() {
            return Err(format!("the {dir} forwarding thread is not running"));
        }
        let (tx, rx) = mpsc::channel();
        inbox.post(RateChange {
            stage: stage.to_string(),
            setting,
            reply: tx,
        });
        rx.recv_timeout(timeout)
            .map_err(|_| format!("the {dir} forwarding thread did not answer within {timeout:?}"))?
    }

    /// Stops and joins the threads.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for (name, h, _, _) in self.threads.drain(..) {
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
