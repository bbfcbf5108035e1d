//! The UDP AckFIN: the server's reply to the client's FIN datagram (README
//! 5.9): 16 zero bytes (a `UDP_datagram` prefix) followed by the 112-byte
//! `server_hdr` with the server's final statistics. The client prints it as
//! the "Server Report".
//!
//! Doubles are [`SplitDouble`] pairs (`x1` integer part, `x2` fraction x 1e6)
//! in seconds; `m2_transit` is Welford's M2 times 1e12 (so in µs²).

use crate::WireError;
use crate::client_hdr::{get_split, set_split};
use crate::error::need;
use crate::field::{Field, get_i32, get_u32, set_i32, set_u32, zero};
use crate::time::SplitDouble;
use crate::view::view_struct;
use bloatlab_units::Bytes;
use std::time::Duration;

/// Field map (absolute offsets in the 128-byte datagram).
pub mod field {
    use super::Field;
    /// The zeroed `UDP_datagram` prefix.
    pub const PREFIX: Field = 0..16;
    /// `server_hdr.flags` ([`super::ServerFlags`]).
    pub const FLAGS: Field = 16..20;
    /// Total bytes, high word.
    pub const TOTAL_LEN1: Field = 20..24;
    /// Total bytes, low word.
    pub const TOTAL_LEN2: Field = 24..28;
    /// Measurement duration, seconds.
    pub const STOP_SEC: Field = 28..32;
    /// .. microseconds.
    pub const STOP_USEC: Field = 32..36;
    /// Lost datagrams, low word.
    pub const ERROR_CNT: Field = 36..40;
    /// Out-of-order datagrams, low word.
    pub const OUTORDER_CNT: Field = 40..44;
    /// Datagrams received, low word.
    pub const DATAGRAMS: Field = 44..48;
    /// Jitter (seconds, split).
    pub const JITTER: Field = 48..56;
    /// Extension: minimum transit (seconds, split).
    pub const MIN_TRANSIT: Field = 56..64;
    /// Maximum transit.
    pub const MAX_TRANSIT: Field = 64..72;
    /// Sum of transits.
    pub const SUM_TRANSIT: Field = 72..80;
    /// Mean transit.
    pub const MEAN_TRANSIT: Field = 80..88;
    /// Welford M2 x 1e12.
    pub const M2_TRANSIT: Field = 88..96;
    /// `vdTransit`.
    pub const VD_TRANSIT: Field = 96..104;
    /// Number of transit samples.
    pub const CNT_TRANSIT: Field = 104..108;
    /// `cntIPG`: datagrams / duration (packets per second).
    pub const CNT_IPG: Field = 108..112;
    /// `IPGsum` (1).
    pub const IPG_SUM: Field = 112..116;
    /// Extension2: lost, high word.
    pub const ERROR_CNT2: Field = 116..120;
    /// Out-of-order, high word.
    pub const OUTORDER_CNT2: Field = 120..124;
    /// Datagrams, high word.
    pub const DATAGRAMS2: Field = 124..128;
}

/// Length of the base (`UDP_datagram` + `server_hdr_v1`).
pub const BASE_LEN: usize = 56;
/// Length through `server_hdr_extension`.
pub const EXT_END: usize = 116;
/// Full AckFIN length.
pub const ACK_FIN_LEN: usize = 128;

/// `server_hdr.flags` bits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ServerFlags(pub u32);

impl ServerFlags {
    /// `HEADER_VERSION1`.
    pub const VERSION1: u32 = 0x8000_0000;
    /// `SERVER_HEADER_EXTEND`: the transit extension is valid (-e or trip-times).
    pub const EXTEND: u32 = 0x4000_0000;
    /// `HEADER_SEQNO64B`: extension2 (64-bit counts) is valid.
    pub const SEQNO64B: u32 = 0x0800_0000;

    /// True if `bit` is set.
    pub const fn has(self, bit: u32) -> bool {
        self.0 & bit == bit
    }
}

view_struct!(
    /// A view of an AckFIN datagram.
    AckFin
);

impl<T: AsRef<[u8]>> AckFin<T> {
    /// Needs the base (56 bytes); the extensions are read when present.
    pub fn check_len(&self) -> Result<(), WireError> {
        need(self.buffer.as_ref(), BASE_LEN)
    }
    /// Flags.
    pub fn flags(&self) -> ServerFlags {
        ServerFlags(get_u32(self.buffer.as_ref(), field::FLAGS))
    }
    fn word(&self, f: Field) -> u32 {
        get_u32(self.buffer.as_ref(), f)
    }
    fn split(&self, f: Field) -> SplitDouble {
        get_split(self.buffer.as_ref(), f)
    }
    fn count(&self, lo: Field, hi: Field) -> i64 {
        let lo_v = self.word(lo);
        if self.flags().has(ServerFlags::SEQNO64B) && self.buffer.as_ref().len() >= ACK_FIN_LEN {
            ((u64::from(self.word(hi)) << 32) | u64::from(lo_v)) as i64
        } else {
            i64::from(lo_v as i32)
        }
    }
}

/// The transit-statistics extension.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ServerReportExt {
    /// Minimum transit (seconds; negative when clocks disagree).
    pub min_transit: SplitDouble,
    /// Maximum transit (seconds).
    pub max_transit: SplitDouble,
    /// Sum of transits (seconds).
    pub sum_transit: SplitDouble,
    /// Mean transit (seconds).
    pub mean_transit: SplitDouble,
    /// Welford M2 of transit times 1e12 (µs²).
    pub m2_transit: SplitDouble,
    /// `vdTransit` (seconds).
    pub vd_transit: SplitDouble,
    /// Number of transit samples.
    pub cnt_transit: i32,
    /// Datagrams per second over the test (`cntIPG`).
    pub cnt_ipg: i32,
    /// `IPGsum` (always 1 from 2.1.8).
    pub ipg_sum: i32,
}

impl ServerReportExt {
    /// Sample standard deviation of transit (`sqrt(M2 / (n - 1))`), or `None`
    /// with fewer than two samples or a negative M2.
    pub fn transit_stdev(&self) -> Option<Duration> {
        let m2_us2 = self.m2_transit.to_f64();
        if self.cnt_transit < 2 || m2_us2.is_nan() || m2_us2 < 0.0 {
            return None;
        }
        let us = (m2_us2 / f64::from(self.cnt_transit - 1)).sqrt();
        Duration::try_from_secs_f64(us / 1e6).ok()
    }
}

/// A parsed AckFIN (`server_hdr`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ServerReportRepr {
    /// Flags. `EXTEND` is set iff `ext` is present (parse clears it when the
    /// datagram is too short to hold the extension); `SEQNO64B` selects 64-bit counts.
    pub flags: ServerFlags,
    /// Bytes received.
    pub total_bytes: Bytes,
    /// Duration of the server's measurement.
    pub duration: Duration,
    /// Lost datagrams.
    pub lost: i64,
    /// Out-of-order datagrams.
    pub out_of_order: i64,
    /// Datagrams received (as counted by the server).
    pub datagrams: i64,
    /// Jitter (seconds, RFC 1889).
    pub jitter: SplitDouble,
    /// Present with `ServerFlags::EXTEND`.
    pub ext: Option<ServerReportExt>,
}

impl ServerReportRepr {
    /// Parses an AckFIN. A 52-byte `client_hdr_ack` (type 2 in the first word)
    /// is a stale ack, not an AckFIN, and is rejected with `BadValue`.
    pub fn parse<T: AsRef<[u8]>>(v: &AckFin<T>) -> Result<ServerReportRepr, WireError> {
        let first = v.word(0..4);
        if v.as_bytes().len() >= 4 && first == crate::ack::CLIENT_HDR_ACK_TYPE {
            return Err(WireError::BadValue {
                field: "ackfin.prefix (stale client_hdr_ack)",
                value: u64::from(first),
            });
        }
        v.check_len()?;
        let flags = v.flags();
        let ext = (flags.has(ServerFlags::EXTEND) && v.as_bytes().len() >= EXT_END).then(|| {
            ServerReportExt {
                min_transit: v.split(field::MIN_TRANSIT),
                max_transit: v.split(field::MAX_TRANSIT),
                sum_transit: v.split(field::SUM_TRANSIT),
                mean_transit: v.split(field::MEAN_TRANSIT),
                m2_transit: v.split(field::M2_TRANSIT),
                vd_transit: v.split(field::VD_TRANSIT),
                cnt_transit: get_i32(v.as_bytes(), field::CNT_TRANSIT),
                cnt_ipg: get_i32(v.as_bytes(), field::CNT_IPG),
                ipg_sum: get_i32(v.as_bytes(), field::IPG_SUM),
            }
        });
        Ok(ServerReportRepr {
            // EXTEND without the bytes to back it (a short datagram) means no extension.
            flags: if ext.is_some() {
                flags
            } else {
                ServerFlags(flags.0 & !ServerFlags::EXTEND)
            },
            total_bytes: Bytes(
                (u64::from(v.word(field::TOTAL_LEN1)) << 32) | u64::from(v.word(field::TOTAL_LEN2)),
            ),
            duration: Duration::from_secs(u64::from(v.word(field::STOP_SEC)))
                + Duration::from_micros(u64::from(v.word(field::STOP_USEC))),
            lost: v.count(field::ERROR_CNT, field::ERROR_CNT2),
            out_of_order: v.count(field::OUTORDER_CNT, field::OUTORDER_CNT2),
            datagrams: v.count(field::DATAGRAMS, field::DATAGRAMS2),
            jitter: v.split(field::JITTER),
            ext,
        })
    }

    /// 128: 2.1.8 always sends the full structure.
    pub fn buffer_len(&self) -> usize {
        ACK_FIN_LEN
    }

    /// Writes the 128-byte AckFIN. `EXTEND` is set iff `ext` is present; the
    /// high count words are written (and `SEQNO64B` kept) as the flags say.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut AckFin<T>) {
        let mut flags = self.flags.0 & !ServerFlags::EXTEND;
        if self.ext.is_some() {
            flags |= ServerFlags::EXTEND;
        }
        let wide = ServerFlags(flags).has(ServerFlags::SEQNO64B);
        let b = v.buffer.as_mut();
        zero(b, 0..ACK_FIN_LEN);
        set_u32(b, field::FLAGS, flags);
        set_u32(b, field::TOTAL_LEN1, (self.total_bytes.0 >> 32) as u32);
        set_u32(b, field::TOTAL_LEN2, self.total_bytes.0 as u32);
        set_u32(
            b,
            field::STOP_SEC,
            u32::try_from(self.duration.as_secs()).unwrap_or(u32::MAX),
        );
        set_u32(b, field::STOP_USEC, self.duration.subsec_micros());
        for (value, lo, hi) in [
            (self.lost, field::ERROR_CNT, field::ERROR_CNT2),
            (self.out_of_order, field::OUTORDER_CNT, field::OUTORDER_CNT2),
            (self.datagrams, field::DATAGRAMS, field::DATAGRAMS2),
        ] {
            set_u32(b, lo, value as u32);
            if wide {
                set_u32(b, hi, ((value as u64) >> 32) as u32);
            }
        }
        set_split(b, field::JITTER, self.jitter);
        if let Some(e) = &self.ext {
            set_split(b, field::MIN_TRANSIT, e.min_transit);
            set_split(b, field::MAX_TRANSIT, e.max_transit);
            set_split(b, field::SUM_TRANSIT, e.sum_transit);
            set_split(b, field::MEAN_TRANSIT, e.mean_transit);
            set_split(b, field::M2_TRANSIT, e.m2_transit);
            set_split(b, field::VD_TRANSIT, e.vd_transit);
            set_i32(b, field::CNT_TRANSIT, e.cnt_transit);
            set_i32(b, field::CNT_IPG, e.cnt_ipg);
            set_i32(b, field::IPG_SUM, e.ipg_sum);
        }
    }
}
