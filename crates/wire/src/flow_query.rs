//! bloatlab's flow query: after a reverse or full-duplex TCP flow, a bloatlab
//! client asks the bloatlab server for the final `TCP_INFO` of the server's
//! sending socket (retransmits, RTT, cwnd, ECN, CE marks), which the client
//! cannot see and which an abortive end (RST) leaves no room to send in band.
//!
//! The flow is named by the random 64-bit id the client put after its
//! extension block ([`crate::blab_block`], extension version 3). The query
//! is a new TCP connection to the server's port carrying only:
//!
//! ```text
//! 0   u32  magic 0x00424C51 ("\0BLQ")
//! 4   u32  version (1)
//! 8   u64  flow id
//! 16  u16  permit key length (0 = none, else 4..=128), then the key
//! ```
//!
//! The magic has none of iperf 2's VERSION1/EXTEND/VERSION2/LEN bits, so a
//! bloatlab server that predates the query reads it as a header of length 0
//! and closes the connection at once (the querier sees EOF: "not measured").
//! A client only queries a server that proved to be bloatlab (its hello), so
//! an iperf 2 server never gets one.
//!
//! The server answers with one fixed 64-byte reply and closes:
//!
//! ```text
//! 0   u32  magic 0x00424C52 ("\0BLR")
//! 4   u32  version (1)
//! 8   u64  flow id (echoed)
//! 16  u32  status: 0 found, 1 unknown (never seen, expired, already
//!          answered, or another source), 2 refused (permit key),
//!          3 still running (the flow did not end in time)
//! 20  u32  flags: 0x1 ECN negotiated (TCPI_OPT_ECN), 0x2 ECN seen
//!          (TCPI_OPT_ECN_SEEN), 0x4 delivered_ce valid, 0x8 min_rtt valid
//! 24  u64  bytes acked (tcpi_bytes_acked)
//! 32  u32  retransmitted segments (tcpi_total_retrans)
//! 36  u32  smoothed RTT, µs          40  u32  RTT variance, µs
//! 44  u32  minimum RTT, µs           48  u32  cwnd, segments
//! 52  u32  MSS, bytes                56  u32  segments delivered with CE
//! 60  u32  reserved (0)
//! ```
//!
//! All fields past `status` are zero unless the status is "found".

use crate::WireError;
use crate::error::need;
use crate::field::{Field, get_u16, get_u32, get_u64, set_u16, set_u32, set_u64};
use crate::permit_key;
use crate::view::view_struct;
use bloatlab_units::Bytes;
use std::time::Duration;

/// Query magic: "\0BLQ".
pub const QUERY_MAGIC: u32 = u32::from_be_bytes(*b"\0BLQ");
/// Reply magic: "\0BLR".
pub const REPLY_MAGIC: u32 = u32::from_be_bytes(*b"\0BLR");
/// The version this crate writes and reads.
pub const FLOW_QUERY_VERSION: u32 = 1;
/// Query length without a key.
pub const QUERY_LEN: usize = 18;
/// Reply length.
pub const REPLY_LEN: usize = 64;

/// Query field map.
pub mod query_field {
    use super::Field;
    /// "\0BLQ".
    pub const MAGIC: Field = 0..4;
    /// Version.
    pub const VERSION: Field = 4..8;
    /// Flow id.
    pub const FLOW_ID: Field = 8..16;
    /// Permit key length.
    pub const KEY_LEN: Field = 16..18;
    /// Start of the key.
    pub const KEY: usize = 18;
}

/// Reply field map.
pub mod reply_field {
    use super::Field;
    /// "\0BLR".
    pub const MAGIC: Field = 0..4;
    /// Version.
    pub const VERSION: Field = 4..8;
    /// Flow id.
    pub const FLOW_ID: Field = 8..16;
    /// [`super::FlowStatus`].
    pub const STATUS: Field = 16..20;
    /// [`super::ReplyFlags`].
    pub const FLAGS: Field = 20..24;
    /// Bytes acked.
    pub const BYTES_ACKED: Field = 24..32;
    /// Retransmitted segments.
    pub const RETRANS: Field = 32..36;
    /// Smoothed RTT, µs.
    pub const RTT: Field = 36..40;
    /// RTT variance, µs.
    pub const RTTVAR: Field = 40..44;
    /// Minimum RTT, µs.
    pub const MIN_RTT: Field = 44..48;
    /// Congestion window, segments.
    pub const CWND: Field = 48..52;
    /// MSS, bytes.
    pub const MSS: Field = 52..56;
    /// Segments delivered with CE.
    pub const DELIVERED_CE: Field = 56..60;
    /// Reserved, zero.
    pub const RESERVED: Field = 60..64;
}

/// Checks magic and version of the first 8 bytes of a message.
fn check_head(b: &[u8], magic: u32) -> Result<(), WireError> {
    let have = b.len().min(4);
    if b[..have] != magic.to_be_bytes()[..have] {
        let mut m = [0u8; 4];
        m[..have].copy_from_slice(&b[..have]);
        return Err(WireError::BadMagic {
            expected: magic,
            got: u32::from_be_bytes(m),
        });
    }
    if b.len() >= 8 && get_u32(b, 4..8) != FLOW_QUERY_VERSION {
        return Err(WireError::Unsupported {
            what: "flow query version",
        });
    }
    Ok(())
}

view_struct!(
    /// A view of a flow query.
    FlowQuery
);

impl<T: AsRef<[u8]>> FlowQuery<T> {
    /// Checks magic, version, the key length, and that the whole query is present.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        need(b, QUERY_LEN)?;
        check_head(b, QUERY_MAGIC)?;
        need(b, QUERY_LEN + self.key_len())
    }
    /// Flow id.
    pub fn flow_id(&self) -> u64 {
        get_u64(self.buffer.as_ref(), query_field::FLOW_ID)
    }
    /// Announced key length.
    pub fn key_len(&self) -> usize {
        usize::from(get_u16(self.buffer.as_ref(), query_field::KEY_LEN))
    }
}

/// Streaming helper: how many more bytes `buf` (a query's first bytes) needs
/// before it is complete; `Ok(0)` = complete. Never asks for more than 18 +
/// 128 bytes, and fails as soon as the magic, version or key length is wrong.
pub fn query_bytes_needed(buf: &[u8]) -> Result<usize, WireError> {
    check_head(buf, QUERY_MAGIC)?;
    if buf.len() < QUERY_LEN {
        return Ok(QUERY_LEN - buf.len());
    }
    let key = usize::from(get_u16(buf, query_field::KEY_LEN));
    if key != 0 && !(permit_key::MIN_LEN..=permit_key::MAX_LEN).contains(&key) {
        return Err(WireError::BadLength {
            field: "flow_query.key_len",
            value: key as u64,
        });
    }
    Ok((QUERY_LEN + key).saturating_sub(buf.len()))
}

/// A parsed query.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowQueryRepr<'a> {
    /// The flow asked about.
    pub flow_id: u64,
    /// The permit key, if the querier sent one.
    pub key: Option<&'a [u8]>,
}

impl<'a> FlowQueryRepr<'a> {
    /// Parses a complete query (key length 0 or 4..=128).
    pub fn parse(v: &FlowQuery<&'a [u8]>) -> Result<FlowQueryRepr<'a>, WireError> {
        let b: &'a [u8] = v.buffer;
        query_bytes_needed(b)?;
        v.check_len()?;
        let n = v.key_len();
        let key = (n > 0).then(|| &b[query_field::KEY..query_field::KEY + n]);
        // A key iperf 2 would refuse (a NUL inside) is refused here too, so what parses
        // also emits (fuzz: wire_flow_reply found a NUL key that parsed but did not emit).
        if let Some(k) = key {
            permit_key::validate(k)?;
        }
        Ok(FlowQueryRepr {
            flow_id: v.flow_id(),
            key,
        })
    }

    /// 18 + key length.
    pub fn buffer_len(&self) -> usize {
        QUERY_LEN + self.key.map_or(0, <[u8]>::len)
    }

    /// The query bytes; a key that iperf 2 would refuse (4..=128 bytes, no
    /// NUL) is an error.
    pub fn to_vec(&self) -> Result<Vec<u8>, WireError> {
        let mut b = vec![0u8; self.buffer_len()];
        set_u32(&mut b, query_field::MAGIC, QUERY_MAGIC);
        set_u32(&mut b, query_field::VERSION, FLOW_QUERY_VERSION);
        set_u64(&mut b, query_field::FLOW_ID, self.flow_id);
        if let Some(k) = self.key {
            permit_key::validate(k)?;
            set_u16(&mut b, query_field::KEY_LEN, k.len() as u16);
            b[query_field::KEY..].copy_from_slice(k);
        }
        Ok(b)
    }
}

/// What the server knows of the flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowStatus {
    /// The summary follows.
    Found,
    /// Never recorded, expired, already answered, or recorded for another source.
    Unknown,
    /// The server has a permit key and the query did not carry it.
    Refused,
    /// The flow was still running when the server stopped waiting for it.
    Running,
}

impl FlowStatus {
    fn code(self) -> u32 {
        match self {
            FlowStatus::Found => 0,
            FlowStatus::Unknown => 1,
            FlowStatus::Refused => 2,
            FlowStatus::Running => 3,
        }
    }
    fn from_code(c: u32) -> Result<FlowStatus, WireError> {
        Ok(match c {
            0 => FlowStatus::Found,
            1 => FlowStatus::Unknown,
            2 => FlowStatus::Refused,
            3 => FlowStatus::Running,
            v => {
                return Err(WireError::BadValue {
                    field: "flow_reply.status",
                    value: u64::from(v),
                });
            }
        })
    }
}

/// Flags of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct ReplyFlags(pub u32);

impl ReplyFlags {
    /// ECN was negotiated on the connection (`TCPI_OPT_ECN`).
    pub const ECN: ReplyFlags = ReplyFlags(0x1);
    /// The sender saw ECE/CE (`TCPI_OPT_ECN_SEEN`).
    pub const ECN_SEEN: ReplyFlags = ReplyFlags(0x2);
    /// `delivered_ce` was measured (Linux 4.19+).
    pub const DELIVERED_CE: ReplyFlags = ReplyFlags(0x4);
    /// `min_rtt` was measured.
    pub const MIN_RTT: ReplyFlags = ReplyFlags(0x8);

    fn has(self, f: ReplyFlags) -> bool {
        self.0 & f.0 == f.0
    }
}

/// The final `TCP_INFO` of a flow's sending socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct SenderSummary {
    /// Bytes the receiver acknowledged.
    pub bytes_acked: Bytes,
    /// Retransmitted segments over the whole flow.
    pub retransmits: u32,
    /// Smoothed RTT at the end (µs resolution on the wire).
    pub rtt: Duration,
    /// RTT variance at the end.
    pub rttvar: Duration,
    /// Smallest RTT the kernel saw (`None`: not measured).
    pub min_rtt: Option<Duration>,
    /// Congestion window in segments.
    pub cwnd_segments: u32,
    /// Sender MSS.
    pub mss: Bytes,
    /// Segments delivered with an ECN CE mark (`None`: kernel too old).
    pub delivered_ce: Option<u32>,
    /// ECN was negotiated on the connection.
    pub ecn_negotiated: bool,
    /// The sender saw ECN feedback (ECE) on the connection.
    pub ecn_seen: bool,
}

fn micros(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

view_struct!(
    /// A view of a flow query reply.
    FlowReply
);

impl<T: AsRef<[u8]>> FlowReply<T> {
    /// Checks magic, version and length (64 bytes).
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        check_head(b, REPLY_MAGIC)?;
        need(b, REPLY_LEN)
    }
    /// Flow id.
    pub fn flow_id(&self) -> u64 {
        get_u64(self.buffer.as_ref(), reply_field::FLOW_ID)
    }
    /// Raw status code.
    pub fn status(&self) -> u32 {
        get_u32(self.buffer.as_ref(), reply_field::STATUS)
    }
    /// Flags.
    pub fn flags(&self) -> ReplyFlags {
        ReplyFlags(get_u32(self.buffer.as_ref(), reply_field::FLAGS))
    }
}

/// A parsed reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowReplyRepr {
    /// The flow the reply is about.
    pub flow_id: u64,
    /// What the server knows.
    pub status: FlowStatus,
    /// The summary, with [`FlowStatus::Found`] only.
    pub summary: Option<SenderSummary>,
}

impl FlowReplyRepr {
    /// Parses a complete reply. Never panics; unknown status codes are errors.
    pub fn parse<T: AsRef<[u8]>>(v: &FlowReply<T>) -> Result<FlowReplyRepr, WireError> {
        v.check_len()?;
        let b = v.buffer.as_ref();
        let status = FlowStatus::from_code(v.status())?;
        let f = v.flags();
        let us = |field: Field| Duration::from_micros(u64::from(get_u32(b, field)));
        let summary = (status == FlowStatus::Found).then(|| SenderSummary {
            bytes_acked: Bytes(get_u64(b, reply_field::BYTES_ACKED)),
            retransmits: get_u32(b, reply_field::RETRANS),
            rtt: us(reply_field::RTT),
            rttvar: us(reply_field::RTTVAR),
            min_rtt: f.has(ReplyFlags::MIN_RTT).then(|| us(reply_field::MIN_RTT)),
            cwnd_segments: get_u32(b, reply_field::CWND),
            mss: Bytes(u64::from(get_u32(b, reply_field::MSS))),
            delivered_ce: f
                .has(ReplyFlags::DELIVERED_CE)
                .then(|| get_u32(b, reply_field::DELIVERED_CE)),
            ecn_negotiated: f.has(ReplyFlags::ECN),
            ecn_seen: f.has(ReplyFlags::ECN_SEEN),
        });
        Ok(FlowReplyRepr {
            flow_id: v.flow_id(),
            status,
            summary,
        })
    }

    /// Always [`REPLY_LEN`].
    pub fn buffer_len(&self) -> usize {
        REPLY_LEN
    }

    /// Writes the reply into the first 64 bytes (a shorter buffer gets a
    /// truncated reply, never a panic). A summary is written only with
    /// [`FlowStatus::Found`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut FlowReply<T>) {
        let b = v.buffer.as_mut();
        let end = REPLY_LEN.min(b.len());
        b[..end].fill(0);
        set_u32(b, reply_field::MAGIC, REPLY_MAGIC);
        set_u32(b, reply_field::VERSION, FLOW_QUERY_VERSION);
        set_u64(b, reply_field::FLOW_ID, self.flow_id);
        set_u32(b, reply_field::STATUS, self.status.code());
        let Some(s) = self.summary.filter(|_| self.status == FlowStatus::Found) else {
            return;
        };
        let mut flags = 0;
        for (on, f) in [
            (s.ecn_negotiated, ReplyFlags::ECN),
            (s.ecn_seen, ReplyFlags::ECN_SEEN),
            (s.delivered_ce.is_some(), ReplyFlags::DELIVERED_CE),
            (s.min_rtt.is_some(), ReplyFlags::MIN_RTT),
        ] {
            if on {
                flags |= f.0;
            }
        }
        set_u32(b, reply_field::FLAGS, flags);
        set_u64(b, reply_field::BYTES_ACKED, s.bytes_acked.0);
        set_u32(b, reply_field::RETRANS, s.retransmits);
        set_u32(b, reply_field::RTT, micros(s.rtt));
        set_u32(b, reply_field::RTTVAR, micros(s.rttvar));
        set_u32(b, reply_field::MIN_RTT, s.min_rtt.map_or(0, micros));
        set_u32(b, reply_field::CWND, s.cwnd_segments);
        set_u32(
            b,
            reply_field::MSS,
            u32::try_from(s.mss.0).unwrap_or(u32::MAX),
        );
        set_u32(b, reply_field::DELIVERED_CE, s.delivered_ce.unwrap_or(0));
    }

    /// The reply as a new array.
    pub fn to_bytes(&self) -> [u8; REPLY_LEN] {
        let mut out = [0u8; REPLY_LEN];
        self.emit(&mut FlowReply::new_unchecked(&mut out[..]));
        out
    }
}
