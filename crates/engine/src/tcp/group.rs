//! Server side of `-P N`: the N connections of one client share one
//! reporter, so the server prints `[SUM]` lines like iperf 2 does.
//!
//! Which connections form a group is [`crate::sum::JoinTable`]'s rule
//! (client address and `numThreads = N > 1`, [`JOIN_WINDOW`]); a client that
//! announced N but connected fewer never blocks later tests; its `[SUM]`
//! lines just never complete.

use super::Sink;
use super::report::Collected;
pub use crate::sum::JOIN_WINDOW;
use crate::sum::JoinTable;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

#[derive(Debug)]
struct Shared {
    reporter: Mutex<Option<JoinHandle<Collected>>>,
    /// Members that have not finished yet (including ones that never came
    /// while the group was open).
    left: AtomicU32,
}

/// Open groups, keyed by client address and stream count.
#[derive(Debug, Default)]
pub struct Groups {
    open: Mutex<JoinTable<Instant, (Sink, Arc<Shared>)>>,
}

/// One connection's share of a group's reporter.
#[derive(Debug)]
pub struct Member {
    pub sink: Sink,
    shared: Arc<Shared>,
}

impl Member {
    /// Leaves the group; the last member waits for the reporter to print
    /// the final lines (so a `--one-off` server does not exit before them).
    pub fn finish(self) {
        drop(self.sink);
        if self.shared.left.fetch_sub(1, Ordering::SeqCst) == 1
            && let Some(h) = self.shared.reporter.lock().ok().and_then(|mut h| h.take())
        {
            let _ = h.join();
        }
    }
}

impl Groups {
    /// Joins (or opens, with `spawn(expected)`) the group for `peer` and `expected` streams.
    pub fn join(
        &self,
        peer: IpAddr,
        expected: u32,
        now: Instant,
        spawn: impl FnOnce(u32) -> std::io::Result<(Sink, JoinHandle<Collected>)>,
    ) -> std::io::Result<Member> {
        let expected = expected.max(1);
        let Ok(mut open) = self.open.lock() else {
            return spawn(1).map(solo);
        };
        // Close groups whose window passed: their missing members never come.
        for g in open.expire(now) {
            g.value
                .1
                .left
                .fetch_sub(g.expected - g.joined, Ordering::SeqCst);
        }
        if expected == 1 {
            return spawn(1).map(solo);
        }
        // A group opens only if its reporter starts; the failure goes to
        // the connection that tried (it is refused, the server goes on).
        let mut failed = None;
        let (sink, shared) = open.join(peer, expected, now, || match spawn(expected) {
            Ok((sink, h)) => {
                let shared = Arc::new(Shared {
                    reporter: Mutex::new(Some(h)),
                    left: AtomicU32::new(expected),
                });
                (sink, shared)
            }
            Err(e) => {
                failed = Some(e);
                let (sink, _) = std::sync::mpsc::channel();
                let shared = Arc::new(Shared {
                    reporter: Mutex::new(None),
                    left: AtomicU32::new(expected),
                });
                (sink, shared)
            }
        });
        if let Some(e) = failed {
            open.remove(peer, expected);
            return Err(e);
        }
        Ok(Member { sink, shared })
    }
}

fn solo((sink, h): (Sink, JoinHandle<Collected>)) -> Member {
    Member {
        sink,
        shared: Arc::new(Shared {
            reporter: Mutex::new(Some(h)),
            left: AtomicU32::new(1),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn spawner(
        count: Arc<AtomicU32>,
    ) -> impl FnOnce(u32) -> std::io::Result<(Sink, JoinHandle<Collected>)> {
        move |_| {
            count.fetch_add(1, Ordering::SeqCst);
            let (tx, rx) = mpsc::channel();
            Ok((
                tx,
                std::thread::spawn(move || {
                    for _ in rx {}
                    Collected::default()
                }),
            ))
        }
    }

    #[test]
    fn members_of_one_client_share_a_reporter_and_the_group_closes_when_full() {
        let groups = Groups::default();
        let spawned = Arc::new(AtomicU32::new(0));
        let ip: IpAddr = [127, 0, 0, 1].into();
        let t = Instant::now();
        let a = groups.join(ip, 2, t, spawner(spawned.clone())).unwrap();
        let b = groups.join(ip, 2, t, spawner(spawned.clone())).unwrap();
        assert_eq!(spawned.load(Ordering::SeqCst), 1);
        // Full: the next connection opens a new group.
        let c = groups.join(ip, 2, t, spawner(spawned.clone())).unwrap();
        assert_eq!(spawned.load(Ordering::SeqCst), 2);
        a.finish();
        b.finish(); // joins the first reporter, which ends once every sink is gone
        // An expired group lets its lone member finish and join its reporter.
        let _ = groups.join(ip, 3, t + JOIN_WINDOW * 2, spawner(spawned.clone()));
        c.finish();
        assert!(groups.open.lock().unwrap().len() <= 1);
    }

    #[test]
    fn a_reporter_that_cannot_start_refuses_one_connection_and_leaves_no_group() {
        let groups = Groups::default();
        let ip: IpAddr = [127, 0, 0, 1].into();
        let t = Instant::now();
        let fail = |_| Err(std::io::Error::from_raw_os_error(libc::EAGAIN));
        assert!(groups.join(ip, 1, t, fail).is_err());
        assert!(groups.join(ip, 3, t, fail).is_err());
        assert!(groups.open.lock().unwrap().is_empty());
        // The next connection of that client opens the group normally.
        let spawned = Arc::new(AtomicU32::new(0));
        let m = groups.join(ip, 3, t, spawner(spawned.clone())).unwrap();
        assert_eq!(spawned.load(Ordering::SeqCst), 1);
        let _ = groups.join(ip, 3, t + JOIN_WINDOW * 2, spawner(spawned.clone()));
        m.finish();
    }

    #[test]
    fn single_streams_get_their_own_reporter() {
        let groups = Groups::default();
        let spawned = Arc::new(AtomicU32::new(0));
        let ip: IpAddr = [127, 0, 0, 1].into();
        let a = groups
            .join(ip, 1, Instant::now(), spawner(spawned.clone()))
            .unwrap();
        let b = groups
            .join(ip, 1, Instant::now(), spawner(spawned.clone()))
            .unwrap();
        assert_eq!(spawned.load(Ordering::SeqCst), 2);
        a.finish();
        b.finish();
    }
}
