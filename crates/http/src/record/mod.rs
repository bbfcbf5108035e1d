//! The operator's record of browser tests (issue 21): every test is started
//! by the server, which hands the page an id and a secret token
//! (`POST /api/v1/browser/start`); the page posts its result with that
//! token when it is done (`POST /api/v1/browser/result?id=ID`), and with
//! `--results-dir DIR` the server keeps it as the bloatlab results file
//! `DIR/ID.json` and shows it at `/result/ID`.
//!
//! * [`ledger`]: the sans-IO core: tokens (unknown, reused, expired), the
//!   caps (tests per source per hour, tests at once, longest test).
//! * [`tcp`]: the server's own TCP_INFO of each test's load connections
//!   (the page's load requests carry `t=ID`).
//! * [`result`]: the page's document, checked, as a results file.
//! * [`http`]: the three routes, the bounded body reader, the atomic write
//!   and the result page.
//!
//! A test the user closes mid-way never posts, so no file is written; a
//! file is written whole (temp file + rename) or not at all.

pub mod http;
pub mod ledger;
pub mod result;
pub mod tcp;

use crate::routes::ConnInfo;
use ledger::{Ledger, TestCaps, TestId};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tcp::{ConnKey, Dir, SockFd, Tracker};

/// `--results-dir` and the `--browser-*` caps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordConfig {
    /// Where results files go; `None`: results are not kept (tests are
    /// still started and capped).
    pub results_dir: Option<PathBuf>,
    pub caps: TestCaps,
}

/// The service's browser tests.
#[derive(Debug)]
pub struct Records {
    ledger: Mutex<Ledger>,
    pub dir: Option<PathBuf>,
    /// Result pages rendered at once: each costs a few ms of CPU (20 ms
    /// for a long test), so a flood of `/result/ID` requests waits here
    /// instead of taking every core.
    pub renders: tokio::sync::Semaphore,
}

/// Result pages rendered at once.
pub const RENDERS: usize = 2;

/// The query parameter a load request names its test with.
pub const TEST_QUERY: &str = "t";

impl Records {
    pub fn new(cfg: RecordConfig) -> Records {
        Records {
            ledger: Mutex::new(Ledger::new(cfg.caps)),
            dir: cfg.results_dir,
            renders: tokio::sync::Semaphore::new(RENDERS),
        }
    }

    /// The ledger. Its updates are single steps, so it stays sound even if
    /// a task panicked while holding the lock.
    pub fn ledger(&self) -> MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A sampler for a load request whose query names a running test from
    /// the connection's source (`t=ID`); `None` for any other request.
    pub fn track(
        self: &Arc<Self>,
        query: Option<&str>,
        conn: ConnInfo,
        dir: Dir,
    ) -> Option<Tracker> {
        let id = query?
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == TEST_QUERY)
            .and_then(|(_, v)| TestId::parse(v))?;
        if !self.ledger().tracks(Instant::now(), id, conn.peer.ip()) {
            return None;
        }
        Some(Tracker {
            records: Arc::clone(self),
            id,
            key: ConnKey {
                peer: conn.peer,
                dir,
            },
            fd: SockFd(conn.fd),
            last: None,
        })
    }

    fn sample(
        &self,
        now: Instant,
        id: TestId,
        key: ConnKey,
        s: &bloatlab_engine::tcpinfo::TcpInfoSample,
    ) {
        self.ledger().sample(now, id, key, s);
    }
}
