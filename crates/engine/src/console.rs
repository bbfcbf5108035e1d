//! Console output shared by the TCP and UDP reporters, so both print lines,
//! headers and `connected with` lines the same way.

use crate::config::OutputFormat;
use bloatlab_metrics::console::HeaderOnce;
use std::io::Write;
use std::net::SocketAddr;

/// Prints `line` on stdout in console format (the other formats print their
/// own way). Flushed at once so lines of concurrent tests interleave whole.
pub fn print_line(format: OutputFormat, line: &str) {
    if format == OutputFormat::Console {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    }
}

/// Prints header `h` the first time a line of its kind is printed.
pub fn print_header(format: OutputFormat, headers: &mut HeaderOnce, h: &'static str) {
    if let Some(h) = headers.first(h) {
        print_line(format, h);
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
