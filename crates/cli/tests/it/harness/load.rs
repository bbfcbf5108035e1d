//! The load lock: keeps timing-sensitive tests away from tests that generate load.
//!
//! When every test file was its own binary, cargo ran the binaries one after another, so
//! e.g. `lab_calibration` never measured a 2 ms link while `engine_tcp` pushed 17 Gbit/s
//! through loopback on the same 2 cores. In one binary libtest runs tests of every
//! module side by side; this lock keeps the old property.
//!
//! Rules:
//! * A test whose assertion has a tight timing bound (a link's measured delay or rate
//!   against its configuration, a pacing rate within a few percent, a latency floor)
//!   takes [`exclusive`] first, at the top of the test: no other guarded test runs
//!   while it holds it.
//! * Every test that generates load holds a [`shared`] guard while it does. The
//!   harness's constructors take it for the test: [`super::Proc`] (servers, clients,
//!   iperf) and [`super::lab::LabGuard`] hold one for as long as they live.
//! * Guards nest per thread: a test that holds one (exclusive or shared) and builds a
//!   `Proc` or a lab takes nothing more, so an exclusive test can use the harness.
//!   Taking exclusive while the same thread holds shared would deadlock, so it panics.
//! * Take guards on the test's own thread, never on a thread the test spawned and
//!   waits for (that thread could queue behind a waiting exclusive test which waits for
//!   the test itself).
//!
//! Waiting exclusive tests go first: no new shared guard is handed out while one waits,
//! so a stream of short load tests cannot starve it.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::{Condvar, Mutex, MutexGuard};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Shared,
    Exclusive,
}

struct State {
    readers: usize,
    writer: bool,
    writers_waiting: usize,
}

/// A readers-writer lock whose guards nest per thread. The tests use the one
/// process-wide [`LOAD`]; the lock's own tests use fresh ones.
pub struct Lock {
    state: Mutex<State>,
    changed: Condvar,
}

/// The process-wide load lock.
static LOAD: Lock = Lock::new();

thread_local! {
    /// The lock this thread holds (by address), what kind, and how many guards share it.
    static HELD: Cell<Option<(usize, Kind, usize)>> = const { Cell::new(None) };
}

/// Released when the last guard of this thread drops (guards may drop in any order).
/// Not `Send`: the per-thread count must be released on the thread that took it.
#[must_use = "the lock is released when the guard drops"]
pub struct Guard<'a> {
    lock: &'a Lock,
    _not_send: PhantomData<MutexGuard<'static, ()>>,
}

/// A shared guard: load-generating tests run side by side, never beside an exclusive one.
pub fn shared() -> Guard<'static> {
    LOAD.take(Kind::Shared)
}

/// An exclusive guard for a timing-sensitive test: waits until no guarded test runs.
pub fn exclusive() -> Guard<'static> {
    LOAD.take(Kind::Exclusive)
}

impl Lock {
    pub const fn new() -> Lock {
        Lock {
            state: Mutex::new(State {
                readers: 0,
                writer: false,
                writers_waiting: 0,
            }),
            changed: Condvar::new(),
        }
    }

    fn id(&self) -> usize {
        self as *const Lock as usize
    }

    pub fn shared(&self) -> Guard<'_> {
        self.take(Kind::Shared)
    }

    pub fn exclusive(&self) -> Guard<'_> {
        self.take(Kind::Exclusive)
    }

    fn guard(&self) -> Guard<'_> {
        Guard {
            lock: self,
            _not_send: PhantomData,
        }
    }

    fn take(&self, kind: Kind) -> Guard<'_> {
        if let Some((id, held, n)) = HELD.get() {
            assert_eq!(id, self.id(), "a thread holds guards of one lock at a time");
            assert!(
                !(held == Kind::Shared && kind == Kind::Exclusive),
                "load::exclusive() while this test holds a shared guard would deadlock: \
                 take exclusive first, at the top of the test"
            );
            HELD.set(Some((id, held, n + 1)));
            return self.guard();
        }
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            Kind::Shared => {
                while s.writer || s.writers_waiting > 0 {
                    s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                s.readers += 1;
            }
            Kind::Exclusive => {
                s.writers_waiting += 1;
                while s.writer || s.readers > 0 {
                    s = self.changed.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                s.writers_waiting -= 1;
                s.writer = true;
            }
        }
        HELD.set(Some((self.id(), kind, 1)));
        self.guard()
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        let Some((id, kind, n)) = HELD.get() else {
            return;
        };
        if n > 1 {
            HELD.set(Some((id, kind, n - 1)));
            return;
        }
        HELD.set(None);
        let mut s = self.lock.state.lock().unwrap_or_else(|e| e.into_inner());
        match kind {
            Kind::Shared => s.readers -= 1,
            Kind::Exclusive => s.writer = false,
        }
        self.lock.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Whether `f` (run on a new thread) finishes within 300 ms.
    fn finishes<'s>(
        scope: &'s std::thread::Scope<'s, '_>,
        f: impl FnOnce() + Send + 's,
    ) -> mpsc::Receiver<()> {
        let (tx, rx) = mpsc::channel();
        scope.spawn(move || {
            f();
            let _ = tx.send(());
        });
        rx
    }

    const SOON: Duration = Duration::from_millis(300);

    #[test]
    fn load_lock_exclusive_waits_for_shared_and_shared_waits_for_exclusive() {
        let lock = Lock::new();
        let released = AtomicBool::new(false);
        std::thread::scope(|scope| {
            let (hold_tx, hold_rx) = mpsc::channel::<()>();
            let (taken_tx, taken_rx) = mpsc::channel::<()>();
            let (lock, released) = (&lock, &released);
            scope.spawn(move || {
                let _g = lock.shared();
                taken_tx.send(()).unwrap();
                hold_rx.recv().unwrap();
                released.store(true, Ordering::SeqCst);
            });
            taken_rx.recv().unwrap();
            // A second shared guard on another thread does not wait.
            assert!(
                finishes(scope, move || drop(lock.shared()))
                    .recv_timeout(SOON)
                    .is_ok()
            );
            // An exclusive one waits for the first shared guard...
            let excl = finishes(scope, move || {
                let _g = lock.exclusive();
                assert!(released.load(Ordering::SeqCst), "exclusive beside shared");
                std::thread::sleep(SOON);
            });
            assert!(excl.recv_timeout(SOON).is_err(), "exclusive did not wait");
            // ...and, once it waits, new shared guards queue behind it.
            let late = finishes(scope, move || drop(lock.shared()));
            assert!(
                late.recv_timeout(SOON).is_err(),
                "shared overtook a waiting exclusive"
            );
            hold_tx.send(()).unwrap();
            assert!(excl.recv_timeout(Duration::from_secs(5)).is_ok());
            assert!(late.recv_timeout(Duration::from_secs(5)).is_ok());
        });
    }

    #[test]
    fn load_lock_guards_nest_on_one_thread_and_release_with_the_last() {
        let lock = Lock::new();
        std::thread::scope(|scope| {
            let lock = &lock;
            let (step_tx, step_rx) = mpsc::channel::<()>();
            let (go_tx, go_rx) = mpsc::channel::<()>();
            scope.spawn(move || {
                let outer = lock.exclusive();
                // Nested: taken at once although the exclusive guard is held.
                let inner = lock.shared();
                drop(outer);
                step_tx.send(()).unwrap();
                go_rx.recv().unwrap();
                drop(inner);
            });
            step_rx.recv().unwrap();
            // Still held through `inner`: another thread waits.
            let other = finishes(scope, move || drop(lock.shared()));
            assert!(
                other.recv_timeout(SOON).is_err(),
                "released with the first guard"
            );
            go_tx.send(()).unwrap();
            assert!(other.recv_timeout(Duration::from_secs(5)).is_ok());
        });
    }

    #[test]
    #[should_panic(expected = "would deadlock")]
    fn load_lock_exclusive_inside_shared_panics_instead_of_deadlocking() {
        let lock = Lock::new();
        let _s = lock.shared();
        let _e = lock.exclusive();
    }
}
