//! `-y C` CSV lines exactly like iperf 2.1.8 (`src/ReportOutputs.c:1087-1195`,
//! `src/Locale.c` `reportCSV_*`).
//!
//! * TCP, 9 fields: `timestamp,client_ip,client_port,server_ip,server_port,
//!   transfer_id,start-end,bytes,bits_per_second`
//! * UDP, 14 fields: the 9 above plus `jitter_ms,lost,total,loss_percent,out_of_order`.
//!
//! Both sides print the **client's** endpoint first (iperf 2 swaps local and
//! peer on the server). The interval is `%.1f-%.1f`; bits per second is
//! `bytes × 8 / span` truncated to an integer (0 for an empty span or no
//! bytes). The timestamp is local wall-clock time `YYYYMMDDHHMMSS`, with
//! `.mmm` appended under `-e`; the caller supplies it (this crate reads no
//! clock), normally the wall-clock time at which the report is emitted.
//!
//! iperf 2.1.8 bugs deliberately **not** reproduced (see `docs/metrics.md`):
//! the `19700101000000` timestamp and wrong `0.0-3.0` interval with `-P`
//! and no `-i`; the UDP client's final row showing `-1` datagrams and
//! `-0.000` loss; `nan` loss for zero datagrams (we print `0.000`).

use crate::interval::Span;
use crate::udp_recv::UdpRecvSnapshot;
use crate::udp_send::UdpSendSnapshot;
use bloatlab_units::Bytes;
use std::net::SocketAddr;
use std::time::Duration;

/// A broken-down local time for the CSV timestamp column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvTimestamp {
    /// Year, e.g. 2026.
    pub year: i32,
    /// Month 1..=12.
    pub month: u8,
    /// Day of month 1..=31.
    pub day: u8,
    /// Hour 0..=23.
    pub hour: u8,
    /// Minute 0..=59.
    pub minute: u8,
    /// Second 0..=60.
    pub second: u8,
    /// Milliseconds 0..=999 (printed only with `-e`).
    pub millis: u16,
}

impl CsvTimestamp {
    /// From a UNIX time (since 1970-01-01 UTC) and the local UTC offset in
    /// seconds (east positive, e.g. `-8 * 3600` for PST). The caller obtains
    /// the offset from the OS (`localtime_r`'s `tm_gmtoff`) or uses 0 for UTC.
    pub fn from_unix(unix: Duration, utc_offset_secs: i32) -> CsvTimestamp {
        let local =
            i64::try_from(unix.as_secs()).unwrap_or(i64::MAX / 2) + i64::from(utc_offset_secs);
        let days = local.div_euclid(86_400);
        let secs_of_day = local.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        CsvTimestamp {
            year: i32::try_from(year).unwrap_or(i32::MAX),
            month,
            day,
            hour: (secs_of_day / 3600) as u8,
            minute: (secs_of_day % 3600 / 60) as u8,
            second: (secs_of_day % 60) as u8,
            millis: (unix.subsec_millis()) as u16,
        }
    }

    /// `YYYYMMDDHHMMSS`, plus `.mmm` when `enhanced` (`-e`).
    pub fn render(&self, enhanced: bool) -> String {
        let mut s = format!(
            "{:04}{:02}{:02}{:02}{:02}{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        );
        if enhanced {
            s.push_str(&format!(".{:03}", self.millis));
        }
        s
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian
/// calendar, using 400-year eras of 146097 days.
fn civil_from_days(z: i64) -> (i64, u8, u8) {
    let z = z + 719_468; // shift the epoch to 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // 0..=365, from March 1st
    let mp = (5 * doy + 2) / 153; // March = 0
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The fields shared by every CSV row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CsvRow {
    /// Wall-clock time of the report (local time).
    pub timestamp: CsvTimestamp,
    /// `-e` given: the timestamp gets milliseconds.
    pub enhanced: bool,
    /// The client's address (printed first on both sides).
    pub client: SocketAddr,
    /// The server's address.
    pub server: SocketAddr,
    /// iperf 2's transfer id (the number in `[  1]`).
    pub transfer_id: u32,
}

impl CsvRow {
    fn prefix(&self, span: Span, bytes: Bytes) -> String {
        let secs = span.secs();
        let bps: i64 = if bytes.0 > 0 && secs > 0.0 {
            // C casts the double to intmax_t: truncation toward zero.
            (bytes.0 as f64 * 8.0 / secs) as i64
        } else {
            0
        };
        format!(
            "{},{},{},{},{},{},{:.1}-{:.1},{},{}",
            self.timestamp.render(self.enhanced),
            self.client.ip(),
            self.client.port(),
            self.server.ip(),
            self.server.port(),
            self.transfer_id,
            span.start.as_secs_f64(),
            span.end.as_secs_f64(),
            bytes.0,
            bps
        )
    }

    /// A TCP row (9 fields).
    ///
    /// `20261202095347,127.0.0.1,52906,127.0.0.1,5111,1,0.0-1.0,1716518972,13732151776`
    pub fn tcp(&self, span: Span, bytes: Bytes) -> String {
        self.prefix(span, bytes)
    }

    /// A UDP receiver row (14 fields).
    ///
    /// `20261202095358,127.0.0.1,33069,127.0.0.1,5131,1,0.0-1.0,1252440,10019520,0.002,0,852,0.000,0`
    pub fn udp_recv(&self, s: &UdpRecvSnapshot) -> String {
        format!(
            "{},{:.3},{},{},{:.3},{}",
            self.prefix(s.span, s.bytes),
            s.jitter.as_secs_f64() * 1e3,
            s.lost,
            s.datagrams,
            s.loss_percent(),
            s.out_of_order
        )
    }

    /// A UDP sender row (14 fields; jitter, loss and out-of-order are 0, the
    /// total is the datagrams sent in the span).
    pub fn udp_send(&self, s: &UdpSendSnapshot) -> String {
        format!(
            "{},{:.3},{},{},{:.3},{}",
            self.prefix(s.span, s.bytes),
            0.0,
            0,
            s.writes,
            0.0,
            0
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        assert_eq!(civil_from_days(20_789), (2026, 12, 2));
    }

    #[test]
    fn timestamps() {
        // 2026-12-02 09:53:47 UTC, the 11a capture.
        let t = Duration::from_secs(1_796_205_227) + Duration::from_millis(813);
        let ts = CsvTimestamp::from_unix(t, 0);
        assert_eq!(ts.render(false), "20261202095347");
        assert_eq!(ts.render(true), "20261202095347.813");
        // PST (UTC-8) crosses the date line backwards.
        let ts = CsvTimestamp::from_unix(Duration::from_secs(1_796_169_600), -8 * 3600);
        assert_eq!(ts.render(false), "20261201160000");
    }
}
