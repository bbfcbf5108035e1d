//! The driver: the draft's client on tokio, hyper's low-level client connections and
//! rustls. [`run`] is the whole `bloatlab rpm` session (config, idle latency, the runs);
//! the algorithm itself is [`crate::run`].

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use http::Uri;

use crate::config::TestConfig;
use crate::params::Params;
use crate::run::{Outcome, Progress, RunError};

pub mod net;
pub mod probe;
pub mod session;
pub mod tls;

pub use net::Protocol;
pub use tls::Trust;

/// Which directions load, and how.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Download and upload at once: one run, one responsiveness (the draft's default,
    /// section 5.1.2).
    Concurrent,
    /// A download run, then an upload run, each with its responsiveness.
    Sequential,
    /// Only a download run.
    DownloadOnly,
    /// Only an upload run.
    UploadOnly,
}

impl Mode {
    /// `concurrent`, `sequential`, `download`, `upload`.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Concurrent => "concurrent",
            Mode::Sequential => "sequential",
            Mode::DownloadOnly => "download",
            Mode::UploadOnly => "upload",
        }
    }
}

/// One run of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunName {
    /// Both directions at once.
    Concurrent,
    /// Download only.
    Download,
    /// Upload only.
    Upload,
}

impl RunName {
    /// `concurrent`, `download`, `upload`.
    pub fn name(self) -> &'static str {
        match self {
            RunName::Concurrent => "concurrent",
            RunName::Download => "download",
            RunName::Upload => "upload",
        }
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Where the config is.
    pub config_url: Uri,
    /// The draft's parameters.
    pub params: Params,
    /// Directions.
    pub mode: Mode,
    /// HTTP/2 or HTTP/1.1.
    pub protocol: Protocol,
    /// Whom to trust.
    pub trust: Trust,
    /// Upper bound of the whole session.
    pub duration: Duration,
    /// A bloatlab server's permit key, sent as a header on every request.
    pub permit_key: Option<String>,
    /// A running load connection that moves nothing this long fails the run (one that
    /// has not started gets twice as long).
    pub stall_timeout: Duration,
}

/// The idle connection, before any load.
#[derive(Debug, Clone, PartialEq)]
pub struct Idle {
    /// When it was opened (since the session's start).
    pub start: Duration,
    /// When its last GET ended.
    pub end: Duration,
    /// Its TCP handshake.
    pub tcp: Duration,
    /// Its TLS handshake per round trip.
    pub tls: Option<Duration>,
    /// `TLSv1.3` / `TLSv1.2`.
    pub tls_version: Option<&'static str>,
    /// Each GET: when it was sent, how long it took.
    pub gets: Vec<(Duration, Duration)>,
}

impl Idle {
    /// Idle latency: the trimmed mean of the GET times.
    pub fn latency(&self, trim: f64) -> Option<Duration> {
        let v: Vec<Duration> = self.gets.iter().map(|g| g.1).collect();
        bloatlab_stats::rpm::trimmed_mean(&v, trim)
    }
}

/// What a session measured.
#[derive(Debug, Clone)]
pub struct Report {
    /// The config URL.
    pub config_url: String,
    /// The config.
    pub config: TestConfig,
    /// The address the test connected to.
    pub addr: SocketAddr,
    /// HTTP version of the test connections.
    pub protocol: Protocol,
    /// TLS version; `None` for plain HTTP.
    pub tls_version: Option<&'static str>,
    /// Directions.
    pub mode: Mode,
    /// The draft's parameters.
    pub params: Params,
    /// The upper bound asked for.
    pub duration: Duration,
    /// Wall-clock start.
    pub start_wall: SystemTime,
    /// The idle connection.
    pub idle: Option<Idle>,
    /// The runs, in order.
    pub runs: Vec<(RunName, Outcome)>,
    /// Ctrl-C cut the session short.
    pub interrupted: bool,
    /// How long the session took.
    pub elapsed: Duration,
}

/// Something to show while a session runs.
#[derive(Debug)]
pub enum Update<'a> {
    /// The config is read.
    Config {
        /// It.
        config: &'a TestConfig,
        /// Where the test connects.
        addr: SocketAddr,
    },
    /// Idle latency is measured.
    Idle(&'a Idle),
    /// A run's state (about once a second).
    Progress {
        /// Which run.
        run: RunName,
        /// Since it started.
        elapsed: Duration,
        /// Where it is.
        progress: Progress,
    },
    /// A run ended.
    RunDone {
        /// Which.
        run: RunName,
        /// Its outcome.
        outcome: &'a Outcome,
    },
}

/// Why a session failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// A parameter out of range.
    #[error("{0}")]
    Usage(String),
    /// TLS cannot be set up.
    #[error(transparent)]
    TlsSetup(#[from] tls::TlsSetupError),
    /// A host does not resolve.
    #[error("cannot resolve {0}")]
    Resolve(String),
    /// The config cannot be fetched or used.
    #[error("config: {0}")]
    Config(String),
    /// The idle connection failed.
    #[error("idle latency: {0}")]
    Idle(net::NetError),
    /// A run failed.
    #[error("{name} run: {1}", name = .0.name())]
    Run(RunName, RunError),
    /// The runtime could not start.
    #[error("starting the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// Runs a session on its own runtime (two worker threads), calling `on_update` on this
/// thread as it goes; `stop` ends it early (what was measured is kept).
pub fn run(
    opts: &Options,
    stop: &AtomicBool,
    mut on_update: impl FnMut(Update),
) -> Result<Report, ClientError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(ClientError::Runtime)?;
    rt.block_on(session::session(opts, stop, &mut on_update))
}
