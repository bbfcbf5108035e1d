//! The emulator's per-packet trace written to a CSV file (`lab up --trace`).
//!
//! The trace callback runs on the forwarding thread, so it only copies the
//! event into a bounded channel (never blocking: when the writer falls
//! behind, events are counted as lost and the count is logged at the end);
//! a thread of its own formats and writes the lines. The file is complete
//! once the direction's link model is dropped (the channel closes) and
//! [`TraceWriter::finish`] has joined the writer.

use crate::error::{LabError, Result};
use bloatlab_emu::{TraceEvent, TraceFn, Verdict};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Events buffered between the forwarding thread and the writer.
const CHANNEL_EVENTS: usize = 1 << 16;

/// First line of every trace file.
pub const HEADER: &str = "time_ns,flow,size_bytes,sojourn_ns,verdict";

/// The file a direction's trace goes to: `PREFIX.DIR.csv`.
pub fn path_for(prefix: &Path, dir: &str) -> PathBuf {
    let mut s = prefix.as_os_str().to_owned();
    s.push(format!(".{dir}.csv"));
    PathBuf::from(s)
}

/// One CSV line (without the newline) for `ev`.
pub fn line(ev: &TraceEvent) -> String {
    let verdict = match ev.verdict {
        Verdict::Sent => "sent".to_string(),
        Verdict::Marked => "marked".to_string(),
        Verdict::Dropped(r) => {
            let r = serde_json::to_value(r).ok();
            format!(
                "dropped_{}",
                r.as_ref().and_then(|v| v.as_str()).unwrap_or("?")
            )
        }
    };
    let sojourn = ev
        .sojourn
        .map_or(String::new(), |d| d.as_nanos().to_string());
    format!(
        "{},{},{},{},{}",
        ev.time.as_nanos(),
        ev.flow,
        ev.size.0,
        sojourn,
        verdict
    )
}

/// The writer thread of one direction's trace file.
#[derive(Debug)]
pub struct TraceWriter {
    path: PathBuf,
    lost: Arc<AtomicU64>,
    thread: Option<JoinHandle<std::io::Result<u64>>>,
}

/// Creates `PREFIX.DIR.csv` and its writer; returns the callback to
/// install on the link.
pub fn open(prefix: &Path, dir: &str) -> Result<(TraceFn, TraceWriter)> {
    let path = path_for(prefix, dir);
    let file = std::fs::File::create(&path).map_err(|e| LabError::Spec {
        field: crate::error::SpecField::flag("--trace"),
        value: prefix.display().to_string(),
        why: format!("cannot create {}: {e}", path.display()),
    })?;
    let (tx, rx) = mpsc::sync_channel::<TraceEvent>(CHANNEL_EVENTS);
    let lost = Arc::new(AtomicU64::new(0));
    let thread = std::thread::Builder::new()
        .name(format!("trace-{dir}"))
        .spawn(move || {
            let mut w = BufWriter::with_capacity(1 << 20, file);
            writeln!(w, "{HEADER}")?;
            let mut n = 0u64;
            for ev in rx {
                writeln!(w, "{}", line(&ev))?;
                n += 1;
            }
            w.flush()?;
            Ok(n)
        })
        .map_err(|e| LabError::io("start trace writer", e))?;
    let counter = lost.clone();
    let callback: TraceFn = Box::new(move |ev: &TraceEvent| {
        if tx.try_send(*ev).is_err() {
            counter.fetch_add(1, Ordering::Relaxed);
        }
    });
    Ok((
        callback,
        TraceWriter {
            path,
            lost,
            thread: Some(thread),
        },
    ))
}

impl TraceWriter {
    /// Waits for the writer to drain (call after the link model is dropped)
    /// and logs what was written and lost.
    pub fn finish(mut self) {
        self.join();
    }

    fn join(&mut self) {
        let Some(t) = self.thread.take() else {
            return;
        };
        let lost = self.lost.load(Ordering::Relaxed);
        match t.join() {
            Ok(Ok(n)) if lost == 0 => {
                tracing::info!("trace: {n} events in {}", self.path.display())
            }
            Ok(Ok(n)) => tracing::warn!(
                "trace: {n} events in {}, {lost} lost (the writer fell behind)",
                self.path.display()
            ),
            Ok(Err(e)) => tracing::warn!("trace: writing {} failed: {e}", self.path.display()),
            Err(_) => tracing::warn!("trace: writer of {} panicked", self.path.display()),
        }
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        self.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_emu::DropReason;
    use bloatlab_units::Bytes;
    use std::time::Duration;

    fn ev(verdict: Verdict, sojourn: Option<Duration>) -> TraceEvent {
        TraceEvent {
            time: Duration::from_micros(1500),
            flow: 7,
            size: Bytes(1500),
            sojourn,
            verdict,
        }
    }

    #[test]
    fn lines_name_every_verdict() {
        let us = Some(Duration::from_micros(20));
        assert_eq!(line(&ev(Verdict::Sent, us)), "1500000,7,1500,20000,sent");
        assert_eq!(
            line(&ev(Verdict::Marked, us)),
            "1500000,7,1500,20000,marked"
        );
        assert_eq!(
            line(&ev(Verdict::Dropped(DropReason::Aqm), us)),
            "1500000,7,1500,20000,dropped_aqm"
        );
        assert_eq!(
            line(&ev(Verdict::Dropped(DropReason::Loss), None)),
            "1500000,7,1500,,dropped_loss"
        );
    }

    #[test]
    fn a_file_gets_the_header_and_every_event_once_the_callback_is_dropped() {
        let dir = std::env::temp_dir().join(format!("bl-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let prefix = dir.join("t");
        let (mut cb, w) = open(&prefix, "up").unwrap();
        for _ in 0..3 {
            cb(&ev(Verdict::Sent, Some(Duration::ZERO)));
        }
        drop(cb);
        w.finish();
        let text = std::fs::read_to_string(path_for(&prefix, "up")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], HEADER);
        assert_eq!(lines.len(), 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_uncreatable_file_names_the_option() {
        let Err(e) = open(Path::new("/nonexistent-bl-dir/t"), "up") else {
            panic!("created a file in a missing directory");
        };
        assert!(e.to_string().contains("--trace"), "{e}");
    }
}
