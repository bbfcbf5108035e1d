//! Console report lines, byte-for-byte like iperf 2.1.8 (Debian build, fast
//! sampling: 4-decimal intervals).
//!
//! Every function returns one line **without** the trailing newline. Headers
//! are constants; iperf 2 prints each kind of header once, before the first
//! line of that kind ([`HeaderOnce`] does that bookkeeping). The format
//! strings are iperf 2.1.8's `src/Locale.c` ones; the golden tests compare
//! against iperf 2.1.8's console captures in `tests/data/iperf2-captures/`.

use crate::cfmt::{self, ByteFormat};
use crate::interval::Span;
use crate::tcp_recv::TcpRecvSnapshot;
use crate::tcp_send::TcpSendSnapshot;
use crate::udp_recv::UdpRecvSnapshot;
use crate::udp_send::UdpSendSnapshot;
use crate::welford::LatencyStats;
use std::collections::HashSet;
use std::fmt;

/// Plain (`report_bw`) header: TCP without `-e`, UDP client without `-e`, `[FD]` lines.
pub const BW_HEADER: &str = "[ ID] Interval       Transfer     Bandwidth";
/// TCP sender `-e` header.
pub const TCP_SEND_HEADER: &str = "[ ID] Interval            Transfer    Bandwidth       Write/Err  Rtry     Cwnd/RTT(var)        NetPwr";
/// TCP receiver `-e` header.
pub const TCP_RECV_HEADER: &str =
    "[ ID] Interval            Transfer    Bandwidth       Reads=Dist";
/// TCP receiver with `--trip-times` header.
pub const TCP_RECV_TRIP_HEADER: &str = "[ ID] Interval            Transfer    Bandwidth    Burst Latency avg/min/max/stdev (cnt/size) inP NetPwr  Reads=Dist";
/// `--sum-only` TCP sender header.
pub const SUMCNT_TCP_SEND_HEADER: &str =
    "[SUM-cnt] Interval            Transfer    Bandwidth       Write/Err  Rtry";
/// `--sum-only` TCP receiver header.
pub const SUMCNT_TCP_RECV_HEADER: &str =
    "[SUM-cnt] Interval            Transfer    Bandwidth       Reads=Dist";
/// `--sum-only` plain header.
pub const SUMCNT_BW_HEADER: &str = "[SUM-cnt] Interval       Transfer     Bandwidth";
/// UDP sender `-e` header.
pub const UDP_SEND_HEADER: &str =
    "[ ID] Interval            Transfer     Bandwidth      Write/Err  PPS";
/// `--sum-only` UDP sender `-e` header.
pub const SUMCNT_UDP_SEND_HEADER: &str =
    "[SUM-cnt] Interval            Transfer     Bandwidth      Write/Err  PPS";
/// UDP receiver header without `-e`.
pub const UDP_RECV_HEADER: &str =
    "[ ID] Interval       Transfer     Bandwidth        Jitter   Lost/Total Datagrams";
/// UDP receiver `-e` (and trip-times) header.
pub const UDP_RECV_ENHANCED_HEADER: &str = "[ ID] Interval            Transfer     Bandwidth        Jitter   Lost/Total  Latency avg/min/max/stdev PPS  Rx/inP  NetPwr";

/// The ID column of a report line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamLabel {
    /// A stream in the normal direction: `[  1] `.
    Id(u32),
    /// A role-reversed stream (`-R`, the reverse half of `--full-duplex`): `[ *1] `.
    Reverse(u32),
    /// Sum over parallel streams: `[SUM] `.
    Sum,
    /// `--sum-only` sum of `n` streams: `[SUM-n] `.
    SumCount(u32),
    /// Full-duplex sum of both directions of stream `n`: `[FD1] `.
    FullDuplex(u32),
}

impl fmt::Display for StreamLabel {
    /// The label including its trailing space, exactly as iperf 2 prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            StreamLabel::Id(n) => write!(f, "[{n:3}] "),
            StreamLabel::Reverse(n) if n < 10 => write!(f, "[ *{n}] "),
            StreamLabel::Reverse(n) => write!(f, "[*{n}] "),
            StreamLabel::Sum => f.write_str("[SUM] "),
            StreamLabel::SumCount(n) => write!(f, "[SUM-{n}] "),
            StreamLabel::FullDuplex(n) => write!(f, "[FD{n}] "),
        }
    }
}

/// Remembers which headers were printed, so each is printed once (iperf 2's
/// `HEADING_PRINT_COND`). Full-duplex output interleaves three kinds.
#[derive(Debug, Default, Clone)]
pub struct HeaderOnce {
    printed: HashSet<&'static str>,
}

impl HeaderOnce {
    /// A tracker that has printed nothing.
    pub fn new() -> HeaderOnce {
        HeaderOnce::default()
    }

    /// `Some(header)` the first time a header is asked for, `None` afterwards.
    pub fn first(&mut self, header: &'static str) -> Option<&'static str> {
        self.printed.insert(header).then_some(header)
    }
}

/// Formats report lines. `format` is iperf 2's `-f` (default: adaptive bits
/// for rates, adaptive bytes for amounts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Console {
    /// `-f` format letter.
    pub format: ByteFormat,
}

impl Default for Console {
    fn default() -> Console {
        Console {
            format: ByteFormat::AdaptiveBits,
        }
    }
}

impl Console {
    /// `"<label><interval> sec  <transfer>  <bandwidth>"`, the start of every data line.
    fn common(&self, label: &dyn fmt::Display, span: Span, bytes: u64) -> String {
        let secs = span.secs();
        // iperf 2 (fast sampling) zeroes the rate for spans ending before
        // 100 us (`SMALLEST_INTERVAL_SEC`), and divides by the span length.
        let rate = if span.end.as_secs_f64() < 0.0001 || secs <= 0.0 {
            0.0
        } else {
            bytes as f64 / secs
        };
        format!(
            "{label}{span} sec  {}  {}",
            cfmt::transfer(bytes as f64, self.format),
            cfmt::bandwidth(rate, self.format)
        )
    }

    /// Plain line (`report_bw_format`): TCP or UDP without `-e`, `[SUM]`, `[FD1]`.
    ///
    /// `[  1] 0.0000-3.0219 sec  4.63 GBytes  13.2 Gbits/sec`
    pub fn bw_line(&self, label: StreamLabel, span: Span, bytes: bloatlab_units::Bytes) -> String {
        self.common(&label, span, bytes.0)
    }

    /// TCP sender `-e` line. Per-stream labels print Write/Err, Rtry,
    /// Cwnd/RTT(var) and NetPwr (or `NA/<rtt> us` without a TCP_INFO
    /// sample); `[SUM]`/`[SUM-n]` labels print only Write/Err and Rtry.
    ///
    /// `[  1] 0.0000-1.0000 sec  1.37 GBytes  11.8 Gbits/sec  11240/0         29     4732K/251(272) us  5869519`
    pub fn tcp_send_line(&self, label: StreamLabel, s: &TcpSendSnapshot) -> String {
        let mut line = self.common(&label, s.span, s.bytes.0);
        if matches!(label, StreamLabel::Sum | StreamLabel::SumCount(_)) {
            line.push_str(&format!(
                "  {}/{}{:10}",
                s.writes, s.write_errors, s.retransmits
            ));
            return line;
        }
        let netpwr = cfmt::net_power(s.net_power());
        match s.tcp_info {
            Some(info) if info.cwnd_kbytes() > 0 => line.push_str(&format!(
                "  {}/{} {:10} {:8}K/{}({}) us  {}",
                s.writes,
                s.write_errors,
                s.retransmits,
                info.cwnd_kbytes(),
                info.rtt.as_micros(),
                info.rttvar.as_micros(),
                netpwr
            )),
            other => line.push_str(&format!(
                "  {}/{} {:10}       NA/{} us  {}",
                s.writes,
                s.write_errors,
                s.retransmits,
                other.map_or(0, |i| i.rtt.as_micros()),
                netpwr
            )),
        }
        line
    }

    /// TCP receiver `-e` line: `Reads=Dist`, plus burst latency, inP and
    /// NetPwr when the snapshot carries trip-times data (and the label is a
    /// single stream).
    ///
    /// `[  1] 0.0000-1.0000 sec  1.37 GBytes  11.8 Gbits/sec  14369=1741:0:0:1889:949:0:3:9787`
    ///
    /// `[  1] 0.0000-1.0000 sec  2.62 GBytes  22.5 Gbits/sec  1.032/0.023/9.391/0.914 ms (21495/131072) 2.79 MByte 2730038  22377=400:12:16:517:403:4:0:21025`
    pub fn tcp_recv_line(&self, label: StreamLabel, s: &TcpRecvSnapshot) -> String {
        let mut line = self.common(&label, s.span, s.bytes.0);
        let d = &s.reads;
        let dist = format!(
            "{}={}:{}:{}:{}:{}:{}:{}:{}",
            d.reads,
            d.bins[0],
            d.bins[1],
            d.bins[2],
            d.bins[3],
            d.bins[4],
            d.bins[5],
            d.bins[6],
            d.bins[7]
        );
        let single = matches!(label, StreamLabel::Id(_) | StreamLabel::Reverse(_));
        match &s.burst {
            Some(b) if single => {
                let l = &b.latency;
                let n = l.count();
                // iperf 2 prints min/max/stdev as 0 below two bursts.
                let (min, max, stdev) = if n < 2 {
                    (0.0, 0.0, 0.0)
                } else {
                    let w = l.welford_secs();
                    (w.min() * 1e3, w.max() * 1e3, w.stdev() * 1e3)
                };
                line.push_str(&format!(
                    "  {:.3}/{:.3}/{:.3}/{:.3} ms ({}/{}) {} {}  {}",
                    l.mean_secs() * 1e3,
                    min,
                    max,
                    stdev,
                    n,
                    s.burst_size().0,
                    cfmt::in_progress(s.in_progress_bytes()),
                    cfmt::net_power(s.net_power()),
                    dist
                ));
            }
            _ => {
                line.push_str("  ");
                line.push_str(&dist);
            }
        }
        line
    }

    /// UDP sender `-e` line (`Write/Err PPS`).
    ///
    /// `[  1] 0.0000-1.0000 sec  1.19 MBytes  10.0 Mbits/sec  851/0      852 pps`
    pub fn udp_send_line(&self, label: StreamLabel, s: &UdpSendSnapshot) -> String {
        let mut line = self.common(&label, s.span, s.bytes.0);
        line.push_str(&format!(
            "  {}/{} {:8.0} pps",
            s.writes,
            s.write_errors,
            s.pps()
        ));
        line
    }

    /// `[  1] Sent 2555 datagrams`, printed by a UDP client after its final line.
    pub fn udp_sent_datagrams(&self, transfer_id: u32, datagrams: u64) -> String {
        format!("[{transfer_id:3}] Sent {datagrams} datagrams")
    }

    /// `[SUM] Sent 5110 datagrams` / `[SUM-2] Sent 5110 datagrams` after a UDP
    /// client's sum line (`report_sum_datagrams`, `report_sumcnt_datagrams`).
    pub fn udp_sent_datagrams_sum(&self, label: StreamLabel, datagrams: u64) -> String {
        format!("{label}Sent {datagrams} datagrams")
    }

    /// `[ CT] final connect times (min/avg/max/stdev) = 0.021/0.440/1.681/0.828 ms (tot/err) = 4/0`,
    /// printed by a TCP client with `-e` and more than one connection.
    /// `connects` holds the successful `connect()` durations; `errors` counts
    /// failed ones. iperf 2.1.8 prints the stdev 1000x too large (a unit bug
    /// we do not reproduce); `None` with fewer than two connects, as iperf 2.
    pub fn connect_times_line(&self, connects: &LatencyStats, errors: u64) -> Option<String> {
        let n = connects.count();
        (n > 1).then(|| {
            let w = connects.welford_secs();
            format!(
                "[ CT] final connect times (min/avg/max/stdev) = {:.3}/{:.3}/{:.3}/{:.3} ms (tot/err) = {}/{}",
                w.min() * 1e3,
                w.sum() / n as f64 * 1e3,
                w.max() * 1e3,
                w.stdev() * 1e3,
                n + errors,
                errors
            )
        })
    }

    /// `[  1] Server Report:`, printed before the relayed UDP server report.
    pub fn udp_server_report_banner(&self, transfer_id: u32) -> String {
        format!("[{transfer_id:3}] Server Report:")
    }

    /// UDP receiver line. Without `enhanced` (no `-e`): Jitter and
    /// Lost/Total. With `enhanced`: also latency avg/min/max/stdev, PPS,
    /// Rx/inP and NetPwr, or `-/-/-/- ms` when the latency is not usable
    /// (no packets, or clocks unsynced by iperf 2's thresholds).
    /// `[SUM]`/`[SUM-n]` labels print `Lost/Total (pct%)` (plain) or
    /// `Lost/Total PPS` (enhanced), as iperf 2's UDP sum lines do.
    ///
    /// `[  1] 0.0000-1.0000 sec  1.19 MBytes  10.0 Mbits/sec   0.001 ms 0/852 (0%) 0.008/0.002/0.084/0.004 ms 855 pps 852/0(0) pkts 163964`
    pub fn udp_recv_line(&self, label: StreamLabel, s: &UdpRecvSnapshot, enhanced: bool) -> String {
        let mut line = self.common(&label, s.span, s.bytes.0);
        let jitter_ms = s.jitter.as_secs_f64() * 1e3;
        let lost_total = format!(
            "{}/{} ({}%)",
            s.lost,
            s.datagrams,
            cfmt::c_g(s.loss_percent(), 2)
        );
        if matches!(label, StreamLabel::Sum | StreamLabel::SumCount(_)) {
            // iperf 2's UDP sum lines carry no jitter or latency
            // (`report_sum_bw_jitter_loss_format`, `report_sum_bw_pps_enhanced_format`).
            if enhanced {
                line.push_str(&format!("  {}/{} {:8.0} pps", s.lost, s.datagrams, s.pps()));
            } else {
                line.push_str(&format!("   {lost_total}"));
            }
            return line;
        }
        if !enhanced {
            line.push_str(&format!("  {jitter_ms:6.3} ms {lost_total}"));
            return line;
        }
        if s.ipg_count == 0 {
            // iperf 2 prints zeros here (`report_bw_jitter_loss_suppress_enhanced_format`).
            line.push_str(&format!(
                "  {:6.3} ms {}/{} ({}%) -/-/-/- ms {:.0} pps",
                0.0,
                s.lost,
                s.datagrams,
                cfmt::c_g(0.0, 2),
                0.0
            ));
            return line;
        }
        if !s.latency_plausible() {
            line.push_str(&format!(
                "  {jitter_ms:6.3} ms {lost_total} -/-/-/- ms {:.0} pps",
                s.pps()
            ));
            return line;
        }
        let w = s.latency.welford_secs();
        let inp = s.in_progress();
        line.push_str(&format!(
            "  {jitter_ms:6.3} ms {lost_total} {:.3}/{:.3}/{:.3}/{:.3} ms {:.0} pps {}/{}({}) pkts {}",
            s.latency.mean_secs() * 1e3,
            w.min() * 1e3,
            w.max() * 1e3,
            w.stdev() * 1e3,
            s.pps(),
            s.ipg_count,
            inp.mean_packets,
            inp.stdev_packets,
            cfmt::net_power(s.net_power())
        ));
        line
    }

    /// `[  1] 0.0000-1.0000 sec  3 datagrams received out-of-order`, printed
    /// after a UDP receiver line when the span saw out-of-order datagrams.
    pub fn udp_out_of_order_line(&self, label: StreamLabel, s: &UdpRecvSnapshot) -> Option<String> {
        (s.out_of_order > 0).then(|| {
            format!(
                "{label}{} sec  {} datagrams received out-of-order",
                s.span, s.out_of_order
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(StreamLabel::Id(1).to_string(), "[  1] ");
        assert_eq!(StreamLabel::Id(123).to_string(), "[123] ");
        assert_eq!(StreamLabel::Reverse(1).to_string(), "[ *1] ");
        assert_eq!(StreamLabel::Reverse(12).to_string(), "[*12] ");
        assert_eq!(StreamLabel::Sum.to_string(), "[SUM] ");
        assert_eq!(StreamLabel::SumCount(3).to_string(), "[SUM-3] ");
        assert_eq!(StreamLabel::FullDuplex(1).to_string(), "[FD1] ");
        let c = Console::default();
        assert_eq!(
            c.udp_sent_datagrams_sum(StreamLabel::Sum, 5110),
            "[SUM] Sent 5110 datagrams"
        );
        assert_eq!(
            c.udp_sent_datagrams_sum(StreamLabel::SumCount(2), 5110),
            "[SUM-2] Sent 5110 datagrams"
        );
    }

    #[test]
    fn headers_print_once() {
        let mut h = HeaderOnce::new();
        assert_eq!(h.first(TCP_RECV_HEADER), Some(TCP_RECV_HEADER));
        assert_eq!(h.first(TCP_SEND_HEADER), Some(TCP_SEND_HEADER));
        assert_eq!(h.first(TCP_RECV_HEADER), None);
    }
}
