//! Console output shared by the TCP and UDP reporters, so both print lines,
//! headers and `connected with` lines the same way, to the run's [`Out`].

use crate::config::OutputFormat;
use bloatlab_metrics::console::HeaderOnce;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// Where a run's report goes (console lines, `-y C` rows, the `--json` document): stdout
/// for the binary, any writer for a program embedding the engine. Clones share the writer;
/// each line is written and flushed under its lock, so lines of concurrent streams and tests
/// interleave whole.
#[derive(Clone)]
pub struct Out(Arc<Mutex<Box<dyn Write + Send>>>);

impl Out {
    /// The process's stdout.
    pub fn stdout() -> Out {
        Out::to(std::io::stdout())
    }

    /// The process's stderr (the default for warnings and errors).
    pub fn stderr() -> Out {
        Out::to(std::io::stderr())
    }

    /// Any writer.
    pub fn to(w: impl Write + Send + 'static) -> Out {
        Out(Arc::new(Mutex::new(Box::new(w))))
    }

    /// A writer into memory, and the buffer to read it from (tests, embedding).
    pub fn capture() -> (Out, Arc<Mutex<Vec<u8>>>) {
        let buf = Arc::new(Mutex::new(Vec::new()));
        (Out::to(Captured(Arc::clone(&buf))), buf)
    }

    /// Writes `line` and a newline, then flushes. Output errors (a closed pipe) are
    /// ignored: the measurement goes on and the caller still gets its results.
    pub fn line(&self, line: &str) {
        let mut w = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(w, "{line}");
        let _ = w.flush();
    }
}

impl Default for Out {
    fn default() -> Out {
        Out::stdout()
    }
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Out")
    }
}

/// Equal when they are the same writer (clones of one `Out`).
impl PartialEq for Out {
    fn eq(&self, other: &Out) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Prints `line` to `out` in console format (the other formats print their own way).
pub fn print_line(out: &Out, format: OutputFormat, line: &str) {
    if format == OutputFormat::Console {
        out.line(line);
    }
}

/// Prints header `h` the first time a line of its kind is printed.
pub fn print_header(out: &Out, format: OutputFormat, headers: &mut HeaderOnce, h: &'static str) {
    if let Some(h) = headers.first(h) {
        print_line(out, format, h);
    }
}

/// `[  1] local 127.0.0.1 port 5001 connected with 127.0.0.1 port 41234 (trip-times)`.
/// `(peer ...)` tags print only with `-e`, as in iperf 2.
pub fn connected_line(
    stream: u32,
    local: SocketAddr,
    peer: SocketAddr,
    tags: &[String],
    enhanced: bool,
) -> String {
    let mut l = format!(
        "[{stream:3}] local {} port {} connected with {} port {}",
        local.ip(),
        local.port(),
        peer.ip(),
        peer.port()
    );
    for t in tags {
        if enhanced || !t.starts_with("(peer") {
            l.push(' ');
            l.push_str(t);
        }
    }
    l
}
