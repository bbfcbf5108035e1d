//! The run journal: what `bloatlab test -o FILE` has learnt so far, appended to
//! `FILE.journal` while the test runs, so a run whose process dies (SIGKILL, a crash, the
//! machine's OOM killer) can still be turned into a results file
//! (`bloatlab test --recover FILE.journal`, docs/tests.md).
//!
//! Format: JSON lines, one [`Entry`] per line, `"event"` naming its kind:
//!
//! * `start` (first line): the test, its parameters, the server, the command line and the
//!   run's start time: everything needed to rebuild the plan;
//! * `progress`: the elapsed time and the phase reached, at most one a
//!   [`PROGRESS_EVERY`];
//! * `spawn`: a runner subprocess started, writing to files in the spool directory
//!   ([`spool_dir_for`]);
//! * `output`: one runner subprocess's complete output (a flow's client document, a probe
//!   stream's ping document) as soon as that subprocess exits;
//! * `full`: the journal reached [`MAX_BYTES`]; later outputs are not journaled;
//! * `end`: the drive finished (all outputs above); only the save remained.
//!
//! Every entry is one `write` of a whole line on an unbuffered file, so it is in the
//! kernel as soon as it is appended and survives the process dying; the file is also
//! `fdatasync`ed with each progress entry (at least once a second while the run goes
//! on), so a machine crash loses at most about a second.
//!
//! Runners still running when the test dies get SIGTERM from the kernel
//! (`suite::orphan::stop_with_parent`), stop as on Ctrl-C and write their report into
//! their spool files, which outlive the test; recovery reads them
//! ([`Journal::spooled_outputs`]). A runner killed outright writes nothing and is named
//! as missing.
//!
//! Reading ([`parse`]) is strict about every complete line (a line that is not a journal
//! entry is an error naming its number) and lenient about the last one: a line without
//! its newline is what a write cut short by the process dying leaves, and is dropped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bloatlab_results::convert::nanos;
use bloatlab_units::CongestionControl;
use serde::{Deserialize, Serialize};

use crate::catalog::Tos;
use crate::driver::{Output, Target};
use crate::plan::TestParams;
use crate::run::RunConfig;

/// `format` of the start entry.
pub const FORMAT: &str = "bloatlab-journal";
/// Version of the journal format this code writes and reads.
pub const VERSION: u32 = 1;
/// Suffix appended to the results file's path.
pub const SUFFIX: &str = ".journal";
/// Largest journal written or read: under `report`'s 32 MiB input bound, so the results
/// file recovered from a full journal can still be reported on.
pub const MAX_BYTES: u64 = 24 << 20;
/// Room kept for progress and end entries once outputs stop being journaled.
const RESERVE: u64 = 1 << 20;
/// At most one progress entry (and one `fdatasync`) per this much run time.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// Bytes of a runner's stderr kept (its last ones: the error line).
const STDERR_TAIL: usize = 4096;

/// The spool directory of journal `journal`: `journal` + `.d`. Runners of a journaled
/// run write their output there, so what a runner reports after the test died (it gets
/// SIGTERM then, `suite::orphan`) is still found by recovery.
pub fn spool_dir_for(journal: &Path) -> PathBuf {
    let mut s = journal.as_os_str().to_owned();
    s.push(".d");
    PathBuf::from(s)
}

/// The journal path of results file `path`: `path` + [`SUFFIX`].
pub fn path_for(results: &Path) -> PathBuf {
    let mut s = results.as_os_str().to_owned();
    s.push(SUFFIX);
    PathBuf::from(s)
}

/// The test's parameters as journaled (units in the names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParamsRecord {
    pub loaded_ns: u64,
    pub idle_before_ns: u64,
    pub idle_after_ns: u64,
    pub flows: u32,
    pub cc: Vec<CongestionControl>,
    /// TOS bytes.
    pub markings: Vec<u8>,
    pub probe_interval_ns: u64,
    pub sample_interval_ns: u64,
    pub pulses: u32,
    pub pulse_size_bytes: u64,
    /// `--ecn mix` (which flows asked for ECN).
    #[serde(default)]
    pub ecn_mix: bool,
}

impl From<&TestParams> for ParamsRecord {
    fn from(p: &TestParams) -> Self {
        ParamsRecord {
            loaded_ns: nanos(p.loaded),
            idle_before_ns: nanos(p.idle_before),
            idle_after_ns: nanos(p.idle_after),
            flows: p.flows,
            cc: p.cc.clone(),
            markings: p.markings.iter().map(|t| t.0).collect(),
            probe_interval_ns: nanos(p.probe_interval),
            sample_interval_ns: nanos(p.sample_interval),
            pulses: p.pulses,
            pulse_size_bytes: p.pulse_size.0,
            ecn_mix: p.ecn_mix,
        }
    }
}

impl From<&ParamsRecord> for TestParams {
    fn from(p: &ParamsRecord) -> Self {
        TestParams {
            loaded: Duration::from_nanos(p.loaded_ns),
            idle_before: Duration::from_nanos(p.idle_before_ns),
            idle_after: Duration::from_nanos(p.idle_after_ns),
            flows: p.flows,
            cc: p.cc.clone(),
            markings: p.markings.iter().map(|&t| Tos(t)).collect(),
            probe_interval: Duration::from_nanos(p.probe_interval_ns),
            sample_interval: Duration::from_nanos(p.sample_interval_ns),
            pulses: p.pulses,
            pulse_size: bloatlab_units::Bytes(p.pulse_size_bytes),
            ecn_mix: p.ecn_mix,
        }
    }
}

/// The first entry: enough to rebuild the run's plan and metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// Test name.
    pub test: String,
    pub params: ParamsRecord,
    /// Server host and port.
    pub host: String,
    /// The server's IPv6 address of a mixed-family run (`rrul46 --v6`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host6: Option<String>,
    pub port: u16,
    pub command_line: Vec<String>,
    #[serde(default)]
    pub title: Option<String>,
    /// When the run (after the pre-flight check) started.
    pub run_start: jiff::Timestamp,
    /// The lab the run went through, if any (its counters are not journaled).
    #[serde(default)]
    pub lab: Option<String>,
}

impl Header {
    /// The header of run `cfg` started at `run_start`.
    pub fn new(cfg: &RunConfig, run_start: jiff::Timestamp) -> Header {
        Header {
            format: FORMAT.to_owned(),
            version: VERSION,
            test: cfg.test.as_str().to_owned(),
            params: ParamsRecord::from(&cfg.params),
            host: cfg.target.host.clone(),
            host6: cfg.target.host6.clone(),
            port: cfg.target.port,
            command_line: cfg.command_line.clone(),
            title: cfg.title.clone(),
            run_start,
            lab: cfg.lab.as_ref().map(|l| l.name.clone()),
        }
    }
}

/// One runner subprocess's output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputRecord {
    /// The plan's runner name.
    pub runner: String,
    /// Spawned and exited, from the run start.
    pub spawned_ns: u64,
    pub exited_ns: u64,
    /// Exit status (`None`: killed by a signal).
    pub status: Option<i32>,
    pub stdout: String,
    /// The last [`STDERR_TAIL`] bytes of its stderr.
    pub stderr_tail: String,
}

impl OutputRecord {
    fn new(runner: &str, o: &Output) -> OutputRecord {
        let err = String::from_utf8_lossy(&o.stderr);
        let mut cut = err.len().saturating_sub(STDERR_TAIL);
        while !err.is_char_boundary(cut) {
            cut += 1;
        }
        OutputRecord {
            runner: runner.to_owned(),
            spawned_ns: nanos(o.spawned),
            exited_ns: nanos(o.exited),
            status: o.status,
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr_tail: err[cut..].to_owned(),
        }
    }

    /// Back to the driver's form.
    pub fn output(&self) -> Output {
        Output {
            spawned: Duration::from_nanos(self.spawned_ns),
            exited: Duration::from_nanos(self.exited_ns),
            status: self.status,
            stdout: self.stdout.clone().into_bytes(),
            stderr: self.stderr_tail.clone().into_bytes(),
        }
    }
}

/// A runner subprocess started, writing to files in the spool directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnRecord {
    pub runner: String,
    pub spawned_ns: u64,
    /// File names in the spool directory ([`spool_dir_for`]).
    pub stdout: String,
    pub stderr: String,
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Entry {
    Start(Box<Header>),
    Spawn(SpawnRecord),
    Progress { elapsed_ns: u64, phase: String },
    Output(OutputRecord),
    Full { elapsed_ns: u64 },
    End { elapsed_ns: u64, interrupted: bool },
}

/// Appends entries to a journal file. Write errors are reported once (a log line) and
/// end journaling, never the run: the journal is insurance, the run is the point.
#[derive(Debug)]
pub struct JournalWriter {
    file: Option<std::fs::File>,
    path: PathBuf,
    written: u64,
    full: bool,
    last_progress: Option<Duration>,
}

impl JournalWriter {
    /// Creates `path`, which must not exist (a journal left by an earlier run is data to
    /// recover, not to overwrite).
    pub fn create(path: &Path) -> std::io::Result<JournalWriter> {
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        if let Err(e) = std::fs::create_dir_all(spool_dir_for(path)) {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(JournalWriter {
            file: Some(file),
            path: path.to_owned(),
            written: 0,
            full: false,
            last_progress: None,
        })
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the runners write their output ([`spool_dir_for`]).
    pub fn spool_dir(&self) -> PathBuf {
        spool_dir_for(&self.path)
    }

    /// Appends one entry as one line, within [`MAX_BYTES`].
    fn append(&mut self, e: &Entry, sync: bool) {
        let Some(f) = self.file.as_mut() else { return };
        let mut line = match serde_json::to_vec(e) {
            Ok(l) => l,
            Err(err) => {
                tracing::warn!("journal {}: {err}", self.path.display());
                return;
            }
        };
        line.push(b'\n');
        if self.written + line.len() as u64 > MAX_BYTES {
            return;
        }
        let res = f
            .write_all(&line)
            .and_then(|()| if sync { f.sync_data() } else { Ok(()) });
        match res {
            Ok(()) => self.written += line.len() as u64,
            Err(err) => {
                tracing::warn!(
                    "cannot write the journal {}: {err}; journaling stops (the run goes on)",
                    self.path.display()
                );
                self.file = None;
            }
        }
    }

    /// The start entry.
    pub fn start(&mut self, h: Header) {
        self.append(&Entry::Start(Box::new(h)), true);
    }

    /// A runner subprocess is about to start, writing to `spool`.
    pub fn spawn(&mut self, runner: &str, spawned: Duration, spool: &crate::driver::Spool) {
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let e = Entry::Spawn(SpawnRecord {
            runner: runner.to_owned(),
            spawned_ns: nanos(spawned),
            stdout: name(&spool.stdout),
            stderr: name(&spool.stderr),
        });
        self.append(&e, false);
    }

    /// A progress entry, unless one was written less than [`PROGRESS_EVERY`] ago.
    pub fn progress(&mut self, now: Duration, phase: &str) {
        if self
            .last_progress
            .is_some_and(|t| now.saturating_sub(t) < PROGRESS_EVERY)
        {
            return;
        }
        self.last_progress = Some(now);
        let e = Entry::Progress {
            elapsed_ns: nanos(now),
            phase: phase.to_owned(),
        };
        self.append(&e, true);
    }

    /// A runner's output; once outputs would take the journal past its bound, a `full`
    /// entry instead and no more outputs.
    pub fn output(&mut self, runner: &str, o: &Output, now: Duration) {
        if self.full {
            return;
        }
        let e = Entry::Output(OutputRecord::new(runner, o));
        let len = serde_json::to_vec(&e).map_or(u64::MAX, |v| v.len() as u64 + 1);
        if self.written.saturating_add(len) > MAX_BYTES - RESERVE {
            self.full = true;
            tracing::warn!(
                "journal {} reached {} MiB; later runner outputs are not journaled",
                self.path.display(),
                MAX_BYTES >> 20
            );
            self.append(
                &Entry::Full {
                    elapsed_ns: nanos(now),
                },
                false,
            );
            return;
        }
        self.append(&e, false);
    }

    /// The drive finished.
    pub fn end(&mut self, now: Duration, interrupted: bool) {
        let e = Entry::End {
            elapsed_ns: nanos(now),
            interrupted,
        };
        self.append(&e, true);
    }

    /// Removes the journal and its spool directory (the results file is saved).
    pub fn remove(mut self) -> std::io::Result<()> {
        self.file = None;
        remove(&self.path)
    }
}

/// Removes journal `path` and its spool directory.
pub fn remove(path: &Path) -> std::io::Result<()> {
    let _ = std::fs::remove_dir_all(spool_dir_for(path));
    std::fs::remove_file(path)
}

/// A journal read back.
#[derive(Debug, Clone, PartialEq)]
pub struct Journal {
    pub header: Header,
    /// Runner subprocesses started (journaled runs write their output to files).
    pub spawns: Vec<SpawnRecord>,
    /// The spool directory, when read from a file ([`read`]).
    pub spool_dir: Option<PathBuf>,
    /// Outputs in the order the runners finished.
    pub outputs: Vec<OutputRecord>,
    /// The last progress entry: elapsed time and phase.
    pub progress: Option<(Duration, String)>,
    /// The end entry: elapsed time and whether the run was interrupted.
    pub end: Option<(Duration, bool)>,
    /// Outputs stopped being journaled at this time (the size bound).
    pub full: Option<Duration>,
    /// The last line was cut short (dropped).
    pub truncated_tail: bool,
}

impl Journal {
    /// How far the run got: the later of the last progress, end and output entries.
    pub fn reached(&self) -> Duration {
        let outputs = self
            .outputs
            .iter()
            .map(|o| Duration::from_nanos(o.exited_ns));
        self.progress
            .iter()
            .map(|p| p.0)
            .chain(self.end.map(|e| e.0))
            .chain(outputs)
            .max()
            .unwrap_or_default()
    }

    /// Whether the journal holds the whole run (the drive ended, nothing left out).
    pub fn complete(&self) -> bool {
        self.full.is_none() && self.end.is_some_and(|(_, interrupted)| !interrupted)
    }
}

/// Why a journal could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// Reading the file failed.
    #[error("cannot read the journal {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Larger than any journal this version writes.
    #[error("the journal {path} is larger than {max} bytes: not a bloatlab journal")]
    TooLarge { path: String, max: u64 },
    /// Nothing was journaled: the run died before it started.
    #[error(
        "the journal is empty: the run stopped before it started measuring, nothing to recover"
    )]
    Empty,
    /// A complete line that is not a journal entry.
    #[error("journal line {line}: {why}")]
    BadLine { line: usize, why: String },
}

fn bad(line: usize, why: impl std::fmt::Display) -> JournalError {
    JournalError::BadLine {
        line,
        why: why.to_string(),
    }
}

/// Reads a journal's bytes (see the module docs for what is strict and what lenient).
pub fn parse(bytes: &[u8]) -> Result<Journal, JournalError> {
    let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
    // After the last newline: empty when the file ends with one, else a cut-short write.
    let tail = lines.pop().unwrap_or_default();
    let mut entries = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let text = std::str::from_utf8(l).map_err(|e| bad(i + 1, e))?;
        let e: Entry = serde_json::from_str(text)
            .map_err(|e| bad(i + 1, format!("not a journal entry ({e})")))?;
        entries.push(e);
    }
    let mut truncated_tail = false;
    if !tail.is_empty() {
        // A whole entry whose newline did not make it is still an entry.
        match std::str::from_utf8(tail)
            .ok()
            .and_then(|t| serde_json::from_str::<Entry>(t).ok())
        {
            Some(e) => entries.push(e),
            None => truncated_tail = true,
        }
    }
    let mut it = entries.into_iter();
    let header = match it.next() {
        Some(Entry::Start(h)) => *h,
        Some(_) => return Err(bad(1, "the first entry is not the start entry")),
        None if truncated_tail => return Err(bad(1, "the start entry is cut short")),
        None => return Err(JournalError::Empty),
    };
    if header.format != FORMAT || header.version != VERSION {
        return Err(bad(
            1,
            format!(
                "format {:?} version {} is not one this bloatlab reads ({FORMAT} {VERSION})",
                header.format, header.version
            ),
        ));
    }
    let mut j = Journal {
        header,
        spawns: Vec::new(),
        spool_dir: None,
        outputs: Vec::new(),
        progress: None,
        end: None,
        full: None,
        truncated_tail,
    };
    for (i, e) in it.enumerate() {
        match e {
            Entry::Start(_) => return Err(bad(i + 2, "a second start entry")),
            Entry::Progress { elapsed_ns, phase } => {
                j.progress = Some((Duration::from_nanos(elapsed_ns), phase));
            }
            Entry::Spawn(sp) => j.spawns.push(sp),
            Entry::Output(o) => j.outputs.push(o),
            Entry::Full { elapsed_ns } => j.full = Some(Duration::from_nanos(elapsed_ns)),
            Entry::End {
                elapsed_ns,
                interrupted,
            } => j.end = Some((Duration::from_nanos(elapsed_ns), interrupted)),
        }
    }
    Ok(j)
}

/// Reads the journal at `path` (at most [`MAX_BYTES`]).
pub fn read(path: &Path) -> Result<Journal, JournalError> {
    use std::io::Read;
    let io = |source| JournalError::Io {
        path: path.display().to_string(),
        source,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let mut bytes = Vec::new();
    f.take(MAX_BYTES + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > MAX_BYTES {
        return Err(JournalError::TooLarge {
            path: path.display().to_string(),
            max: MAX_BYTES,
        });
    }
    let mut j = parse(&bytes)?;
    j.spool_dir = Some(spool_dir_for(path));
    Ok(j)
}

impl Journal {
    /// The outputs of runner subprocesses that started but whose output was not
    /// journaled (the test died first): what each wrote to its spool files, which is its
    /// report of the time until it was stopped (runners get SIGTERM when the test dies).
    /// Recorded as exiting at `at` with the status of a runner stopped by SIGTERM (143)
    /// when it wrote anything, else as killed (`None`).
    pub fn spooled_outputs(&self, at: Duration) -> Vec<OutputRecord> {
        let Some(dir) = &self.spool_dir else {
            return Vec::new();
        };
        self.spawns
            .iter()
            .filter(|sp| {
                !self
                    .outputs
                    .iter()
                    .any(|o| o.runner == sp.runner && o.spawned_ns == sp.spawned_ns)
            })
            .map(|sp| {
                // File names only: a journal cannot point recovery outside its directory.
                let file = |n: &str| dir.join(Path::new(n).file_name().unwrap_or_default());
                let spool = crate::driver::Spool {
                    stdout: file(&sp.stdout),
                    stderr: file(&sp.stderr),
                };
                let (stdout, stderr) = spool.read();
                let o = Output {
                    spawned: Duration::from_nanos(sp.spawned_ns),
                    exited: at.max(Duration::from_nanos(sp.spawned_ns)),
                    status: (!stdout.is_empty()).then_some(128 + libc::SIGTERM),
                    stdout,
                    stderr,
                };
                OutputRecord::new(&sp.runner, &o)
            })
            .collect()
    }
}

/// The run configuration a journal describes (`exe` runs nothing: recovery only
/// assembles).
pub fn config(j: &Journal, exe: PathBuf) -> Result<RunConfig, JournalError> {
    let h = &j.header;
    let test = h
        .test
        .parse()
        .map_err(|e: crate::catalog::UnknownTest| bad(1, e))?;
    Ok(RunConfig {
        test,
        params: TestParams::from(&h.params),
        target: Target {
            exe,
            host: h.host.clone(),
            host6: h.host6.clone(),
            port: h.port,
            ecn_fwmark: None,
            rpm: Default::default(),
            permit_key: None,
        },
        command_line: h.command_line.clone(),
        title: h.title.clone(),
        preflight: false,
        lab: None,
        ecn: None,
    })
}

#[cfg(test)]
mod tests;
