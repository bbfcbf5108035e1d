//! What a client's short TLS connections did on the wire, read from a
//! tcpdump capture taken inside a lab host: the RPM clients' foreign probes
//! (a new connection: TCP handshake, TLS handshake, one small GET), timed
//! packet by packet, so a difference between two clients' figures can be
//! traced to what each one sent and when (docs/rpm.md, "Why mach's RPM
//! differs from ours").
//!
//! tcpdump is Debian's (scripts/setup.sh installs it); the capture is read
//! back with `tcpdump -r -nn -tt`, one line per packet, and parsed here.

use crate::harness::lab::LabGuard;
use crate::harness::{Proc, stderr, stdout};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// A tcpdump running in a lab host; stopped (by PID) when read or dropped.
pub struct Capture {
    proc: Option<Proc>,
    file: PathBuf,
    _dir: tempfile::TempDir,
}

impl Capture {
    /// Starts capturing TCP port `port` in `host` and waits until tcpdump listens.
    /// `-U` writes each packet as it comes, so stopping it by a kill loses nothing;
    /// `-Z root` keeps it writing into the test's own (root-only) directory.
    pub fn start(lab: &LabGuard, host: &str, port: u16) -> Capture {
        let dir = crate::harness::tempdir();
        let file = dir.path().join("capture.pcap");
        let proc = lab.bg(
            host,
            &[
                "tcpdump",
                "-i",
                "any",
                "-nn",
                "-s",
                "128",
                "-U",
                "-Z",
                "root",
                "-w",
                &file.to_string_lossy(),
                "tcp",
                "port",
                &port.to_string(),
            ],
        );
        proc.wait_err("tcpdump to listen", Duration::from_secs(10), |e| {
            e.contains("listening on")
        });
        Capture {
            proc: Some(proc),
            file,
            _dir: dir,
        }
    }

    /// Stops the capture and returns the handshakes of every short connection in it.
    pub fn handshakes(mut self) -> Vec<Handshake> {
        // Let the last packets reach the file, then stop tcpdump (Proc's drop kills
        // it by PID and reaps it).
        std::thread::sleep(Duration::from_millis(300));
        drop(self.proc.take());
        let o = Command::new("tcpdump")
            .args(["-r", &self.file.to_string_lossy(), "-nn", "-tt"])
            .output()
            .expect("run tcpdump -r");
        assert!(o.status.success(), "tcpdump -r: {}", stderr(&o));
        parse(&stdout(&o))
    }
}

/// One short connection's opening, in milliseconds, as its client host saw it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Handshake {
    /// SYN out to SYN-ACK in: the TCP handshake.
    pub tcp: f64,
    /// SYN-ACK in to the first data out (the ClientHello): the client's own time
    /// before it starts TLS.
    pub before_hello: f64,
    /// ClientHello out to the client's next data after the server's first flight
    /// (its Finished, TLS 1.3).
    pub tls: f64,
    /// The client's Finished out to its next data out (the HTTP request):
    /// near zero for a client that sends at once, one round trip for one whose
    /// small write waits for an ACK (Nagle's algorithm, RFC 896).
    pub request_wait: f64,
}

/// A packet of the capture: when, which way, the client's port, payload bytes.
#[derive(Debug, Clone, Copy)]
struct Packet {
    ms: f64,
    out: bool,
    len: usize,
}

/// Connections with more packets than this carried load, not a probe.
const MAX_PROBE_PACKETS: usize = 40;

/// Parses `tcpdump -r -nn -tt` lines (Linux cooked capture: `TIME IFACE In|Out
/// IP A.B.C.D.PORT > E.F.G.H.PORT: ... length N`) into the handshakes of the
/// short connections that got as far as a request. Lines that do not parse
/// (other protocols, truncated packets) are skipped.
pub fn parse(text: &str) -> Vec<Handshake> {
    let mut by_port: BTreeMap<String, Vec<Packet>> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(time), Some(dir)) = (f.first(), f.get(2)) else {
            continue;
        };
        let (Ok(secs), Some(ip)) = (time.parse::<f64>(), f.iter().position(|w| *w == "IP")) else {
            continue;
        };
        let (Some(src), Some(dst)) = (f.get(ip + 1), f.get(ip + 3)) else {
            continue;
        };
        let out = match *dir {
            "Out" => true,
            "In" => false,
            _ => continue,
        };
        let client = if out { *src } else { dst.trim_end_matches(':') };
        let Some((_, port)) = client.rsplit_once('.') else {
            continue;
        };
        let Some(len) = f
            .iter()
            .position(|w| *w == "length")
            .and_then(|i| f.get(i + 1))
            .and_then(|n| n.trim_end_matches(':').parse().ok())
        else {
            continue;
        };
        by_port.entry(port.to_owned()).or_default().push(Packet {
            ms: secs * 1e3,
            out,
            len,
        });
    }
    by_port
        .values()
        .filter(|p| p.len() <= MAX_PROBE_PACKETS)
        .filter_map(|p| handshake(p))
        .collect()
}

/// The handshake of one connection's packets, if it has every step.
fn handshake(p: &[Packet]) -> Option<Handshake> {
    let syn = p.first().filter(|s| s.out && s.len == 0)?.ms;
    let synack = p.iter().find(|s| !s.out)?.ms;
    let after = |t: f64, out: bool| p.iter().find(|s| s.out == out && s.len > 0 && s.ms > t);
    let hello = after(synack, true)?.ms;
    let flight = after(hello, false)?.ms;
    let finished = after(flight, true)?.ms;
    let request = after(finished, true)?.ms;
    Some(Handshake {
        tcp: synack - syn,
        before_hello: hello - synack,
        tls: finished - hello,
        request_wait: request - finished,
    })
}

/// The median of one field over the handshakes (NaN when there are none).
pub fn median(h: &[Handshake], field: fn(&Handshake) -> f64) -> f64 {
    let mut v: Vec<f64> = h.iter().map(field).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    crate::harness::lab::median(&mut v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One of Cloudflare mach 0.4.0's foreign probes through an 80 ms lab path
    /// (times shortened), then one of ours, then a load connection's first packets.
    const CAPTURE: &str = "\
1.6746 ifb0  Out IP 10.77.0.1.44588 > 10.77.0.2.8443: Flags [S], seq 1, win 64240, length 0
1.7546 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.44588: Flags [S.], seq 2, ack 2, win 65160, length 0
1.7546 ifb0  Out IP 10.77.0.1.44588 > 10.77.0.2.8443: Flags [.], ack 1, win 63, length 0
1.7741 ifb0  Out IP 10.77.0.1.44588 > 10.77.0.2.8443: Flags [.], seq 1:1449, ack 1, length 1448
1.7741 ifb0  Out IP 10.77.0.1.44588 > 10.77.0.2.8443: Flags [P.], seq 1449:1462, ack 1, length 13
1.8546 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.44588: Flags [.], ack 1449, length 0
1.8557 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.44588: Flags [P.], seq 1:688, ack 1462, length 687
1.8557 ifb0  Out IP 10.77.0.1.44588 > 10.77.0.2.8443: Flags [.], ack 688, length 0
1.8562 ifb0  Out IP 10.77.0.1.44588 > 10.77.0.2.8443: Flags [P.], seq 1462:1526, ack 688, length 64
1.9364 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.44588: Flags [P.], seq 688:872, ack 1526, length 184
1.9364 ifb0  Out IP 10.77.0.1.44588 > 10.77.0.2.8443: Flags [P.], seq 1526:1707, ack 872, length 181
2.0167 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.44588: Flags [P.], seq 872:927, ack 1707, length 55
2.5026 ifb0  Out IP 10.77.0.1.49554 > 10.77.0.2.8443: Flags [S], seq 1, win 64240, length 0
2.5826 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.49554: Flags [S.], seq 2, ack 2, length 0
2.5827 ifb0  Out IP 10.77.0.1.49554 > 10.77.0.2.8443: Flags [.], ack 1, length 0
2.5836 ifb0  Out IP 10.77.0.1.49554 > 10.77.0.2.8443: Flags [P.], seq 1:234, ack 1, length 233
2.6636 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.49554: Flags [.], ack 234, length 0
2.6643 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.49554: Flags [P.], seq 1:708, ack 234, length 707
2.6646 ifb0  Out IP 10.77.0.1.49554 > 10.77.0.2.8443: Flags [P.], seq 234:314, ack 708, length 80
2.6648 ifb0  Out IP 10.77.0.1.49554 > 10.77.0.2.8443: Flags [P.], seq 314:445, ack 708, length 131
2.7454 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.49554: Flags [P.], seq 708:1245, ack 445, length 537
3.0000 ifb0  Out IP 10.77.0.1.40000 > 10.77.0.2.8443: Flags [S], seq 1, win 64240, length 0
3.0800 ifb0  In  IP 10.77.0.2.8443 > 10.77.0.1.40000: Flags [S.], seq 2, ack 2, length 0
garbage line
";

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 0.05
    }

    #[test]
    fn a_nagle_wait_and_an_immediate_request_are_told_apart() {
        let h = parse(CAPTURE);
        assert_eq!(h.len(), 2, "{h:?}");
        let (mach, ours) = (h[0], h[1]);
        assert!(close(mach.tcp, 80.0), "{mach:?}");
        assert!(close(mach.before_hello, 19.5), "{mach:?}");
        assert!(close(mach.tls, 82.1), "{mach:?}");
        assert!(close(mach.request_wait, 80.2), "{mach:?}");
        assert!(close(ours.tcp, 80.0), "{ours:?}");
        assert!(close(ours.before_hello, 1.0), "{ours:?}");
        assert!(close(ours.tls, 81.0), "{ours:?}");
        assert!(close(ours.request_wait, 0.2), "{ours:?}");
        assert!(close(median(&h, |h| h.request_wait), 80.2));
        assert!(median(&[], |h| h.tcp).is_nan());
    }
}
