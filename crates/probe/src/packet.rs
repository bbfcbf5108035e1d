//! The bloatlab probe datagram (our own format, version 1).
//!
//! One UDP datagram per request and per reply. All integers are big-endian. A datagram is
//! the 80-byte header below followed by zero padding up to the size the client asked for;
//! the reply is exactly as long as the request (the responder never amplifies).
//!
//! ```text
//! off len field
//!   0   4 magic          "blpq" 0x626c7071 request, "blpr" 0x626c7072 reply
//!   4   1 version        1
//!   5   1 flags          bit 0: server_rx came from a kernel timestamp; bit 1: bytes 80..96
//!                        hold an HMAC-SHA256-128 tag of bytes 0..80 ([`crate::auth`]);
//!                        others 0, ignored
//!   6   1 clock          which clock the timestamps are on (1 = CLOCK_REALTIME)
//!   7   1 reserved       0
//!   8   4 check          bitwise NOT of magic
//!  12   4 reserved       0
//!  16   8 session        random id chosen by the client, echoed
//!  24   8 seq            request sequence number, from 0, echoed
//!  32   8 client_send    ns since the clock's epoch, set by the client, echoed
//!  40   8 server_rx      ns, set by the responder (0 in requests)
//!  48   8 server_tx      ns, set by the responder (0 in requests)
//!  56   8 rx_count       requests of this session the responder has received, this one included
//!  64   8 seen           bit i set: the responder had received request seq - 1 - i
//!  72   8 clock_domain   responder's clock domain id (hash of the kernel boot id; 0 unknown)
//!  80     padding        zeros
//! ```
//!
//! # Why this cannot be mistaken for iperf 2
//!
//! Every iperf 2 UDP datagram starts with `{id, tv_sec, tv_usec, id2}`, so bytes 8..12
//! hold a microsecond count below 1 000 000. Our `check` word there is the complement of a
//! magic below `0x8000_0000`, so it is always at least `0x8000_0000`: no iperf 2 datagram
//! passes both the magic and the check.

use std::time::Duration;

use thiserror::Error;

/// Magic of a request ("blpq").
pub const REQUEST_MAGIC: u32 = 0x626c_7071;
/// Magic of a reply ("blpr").
pub const REPLY_MAGIC: u32 = 0x626c_7072;
/// The version this build speaks.
pub const VERSION: u8 = 1;
/// Length of the header; the smallest valid datagram.
pub const HEADER_LEN: usize = 80;
/// The largest probe the client sends (the IPv4 UDP payload limit).
pub const MAX_LEN: usize = 65_507;

/// Flag: `server_rx` is a kernel receive timestamp (SO_TIMESTAMPNS), not a userspace read.
pub const FLAG_SERVER_RX_KERNEL: u8 = 0x01;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const VERSION: usize = 4;
    pub const FLAGS: usize = 5;
    pub const CLOCK: usize = 6;
    pub const RESERVED8: usize = 7;
    pub const CHECK: Range<usize> = 8..12;
    pub const RESERVED32: Range<usize> = 12..16;
    pub const SESSION: Range<usize> = 16..24;
    pub const SEQ: Range<usize> = 24..32;
    pub const CLIENT_SEND: Range<usize> = 32..40;
    pub const SERVER_RX: Range<usize> = 40..48;
    pub const SERVER_TX: Range<usize> = 48..56;
    pub const RX_COUNT: Range<usize> = 56..64;
    pub const SEEN: Range<usize> = 64..72;
    pub const CLOCK_DOMAIN: Range<usize> = 72..80;
}

/// Why bytes are not a probe datagram we understand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum ParseError {
    /// Shorter than the header.
    #[error("probe datagram truncated: {len} bytes, need at least {HEADER_LEN}")]
    Truncated {
        /// Bytes present.
        len: usize,
    },
    /// Bytes 0..4 are neither magic.
    #[error("not a bloatlab probe: magic {found:#010x} at offset 0")]
    BadMagic {
        /// The value found.
        found: u32,
    },
    /// Bytes 8..12 are not the complement of the magic.
    #[error("not a bloatlab probe: check word {found:#010x} at offset 8")]
    BadCheck {
        /// The value found.
        found: u32,
    },
    /// A version we do not speak.
    #[error("probe version {found} at offset 4 is not supported (this build speaks {VERSION})")]
    UnsupportedVersion {
        /// The value found.
        found: u8,
    },
    /// An unknown clock id.
    #[error("unknown clock id {found} at offset 6")]
    UnknownClock {
        /// The value found.
        found: u8,
    },
}

/// Why a datagram could not be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum EmitError {
    /// The buffer is shorter than the header.
    #[error("probe datagram length {len} is shorter than the {HEADER_LEN}-byte header")]
    BadLength {
        /// The rejected length.
        len: usize,
    },
}

/// Which clock the timestamps of a datagram are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClockId {
    /// `CLOCK_REALTIME`, ns since the Unix epoch. The same clock in every network
    /// namespace of one kernel, and the clock of SO_TIMESTAMPNS.
    Realtime,
}

impl ClockId {
    fn to_wire(self) -> u8 {
        match self {
            ClockId::Realtime => 1,
        }
    }

    fn from_wire(v: u8) -> Result<ClockId, ParseError> {
        match v {
            1 => Ok(ClockId::Realtime),
            found => Err(ParseError::UnknownClock { found }),
        }
    }
}

/// Request or reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Client to responder.
    Request,
    /// Responder to client.
    Reply,
}

/// A zero-copy view of a probe datagram. Accessors never panic once [`Packet::new_checked`]
/// succeeded (the buffer holds at least [`HEADER_LEN`] bytes).
#[derive(Debug, Clone)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn read_u32(b: &[u8], r: std::ops::Range<usize>) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[r]);
    u32::from_be_bytes(a)
}

fn read_u64(b: &[u8], r: std::ops::Range<usize>) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[r]);
    u64::from_be_bytes(a)
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer after checking its length only.
    pub fn new_checked(buffer: T) -> Result<Packet<T>, ParseError> {
        let len = buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(ParseError::Truncated { len });
        }
        Ok(Packet { buffer })
    }

    /// The whole datagram.
    pub fn as_bytes(&self) -> &[u8] {
        self.buffer.as_ref()
    }

    /// Magic word (bytes 0..4).
    pub fn magic(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::MAGIC)
    }
    /// Version (byte 4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    /// Flags (byte 5).
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    /// Clock id (byte 6).
    pub fn clock(&self) -> u8 {
        self.buffer.as_ref()[field::CLOCK]
    }
    /// Check word (bytes 8..12).
    pub fn check(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::CHECK)
    }
    /// Session id.
    pub fn session(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::SESSION)
    }
    /// Sequence number.
    pub fn seq(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::SEQ)
    }
    /// Client send time, ns.
    pub fn client_send_ns(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::CLIENT_SEND)
    }
    /// Server receive time, ns (0: none).
    pub fn server_rx_ns(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::SERVER_RX)
    }
    /// Server send time, ns (0: none).
    pub fn server_tx_ns(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::SERVER_TX)
    }
    /// Requests of this session received by the responder.
    pub fn rx_count(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::RX_COUNT)
    }
    /// Bitmap of the 64 requests before this one that the responder received.
    pub fn seen(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::SEEN)
    }
    /// The responder's clock domain id.
    pub fn clock_domain(&self) -> u64 {
        read_u64(self.buffer.as_ref(), field::CLOCK_DOMAIN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn put_u32(&mut self, r: std::ops::Range<usize>, v: u32) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }
    fn put_u64(&mut self, r: std::ops::Range<usize>, v: u64) {
        self.buffer.as_mut()[r].copy_from_slice(&v.to_be_bytes());
    }
    /// Sets the server receive time, ns.
    pub fn set_server_rx_ns(&mut self, v: u64) {
        self.put_u64(field::SERVER_RX, v);
    }
    /// Sets the server send time, ns.
    pub fn set_server_tx_ns(&mut self, v: u64) {
        self.put_u64(field::SERVER_TX, v);
    }
}

/// True if `bytes` look like a bloatlab probe request (magic, check and length). Cheap;
/// for a server that shares one UDP port between probes and other traffic.
pub fn is_probe_request(bytes: &[u8]) -> bool {
    bytes.len() >= HEADER_LEN
        && read_u32(bytes, field::MAGIC) == REQUEST_MAGIC
        && read_u32(bytes, field::CHECK) == !REQUEST_MAGIC
}

fn ns(d: Option<Duration>) -> u64 {
    // u64 nanoseconds reach the year 2554; saturate rather than wrap beyond.
    d.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn opt_time(v: u64) -> Option<Duration> {
    (v != 0).then(|| Duration::from_nanos(v))
}

/// A parsed probe datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// Request or reply.
    pub kind: Kind,
    /// Flags ([`FLAG_SERVER_RX_KERNEL`]).
    pub flags: u8,
    /// The clock of all timestamps.
    pub clock: ClockId,
    /// Client-chosen session id.
    pub session: u64,
    /// Request sequence number.
    pub seq: u64,
    /// Client send time since the clock's epoch.
    pub client_send: Duration,
    /// Responder receive time (replies).
    pub server_rx: Option<Duration>,
    /// Responder send time (replies).
    pub server_tx: Option<Duration>,
    /// Requests of this session received by the responder so far, this one included.
    pub rx_count: u64,
    /// Bit `i`: the responder had received request `seq - 1 - i`.
    pub seen: u64,
    /// The responder's clock domain id, 0 if unknown.
    pub clock_domain: u64,
}

impl Repr {
    /// A request with no responder fields.
    pub fn request(session: u64, seq: u64, client_send: Duration) -> Repr {
        Repr {
            kind: Kind::Request,
            flags: 0,
            clock: ClockId::Realtime,
            session,
            seq,
            client_send,
            server_rx: None,
            server_tx: None,
            rx_count: 0,
            seen: 0,
            clock_domain: 0,
        }
    }

    /// Parses and validates a datagram. Padding is not inspected.
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Result<Repr, ParseError> {
        let kind = match p.magic() {
            REQUEST_MAGIC => Kind::Request,
            REPLY_MAGIC => Kind::Reply,
            found => return Err(ParseError::BadMagic { found }),
        };
        if p.check() != !p.magic() {
            return Err(ParseError::BadCheck { found: p.check() });
        }
        if p.version() != VERSION {
            return Err(ParseError::UnsupportedVersion { found: p.version() });
        }
        Ok(Repr {
            kind,
            flags: p.flags(),
            clock: ClockId::from_wire(p.clock())?,
            session: p.session(),
            seq: p.seq(),
            client_send: Duration::from_nanos(p.client_send_ns()),
            server_rx: opt_time(p.server_rx_ns()),
            server_tx: opt_time(p.server_tx_ns()),
            rx_count: p.rx_count(),
            seen: p.seen(),
            clock_domain: p.clock_domain(),
        })
    }

    /// Parses raw bytes (length check, then [`Repr::parse`]).
    pub fn parse_bytes(bytes: &[u8]) -> Result<Repr, ParseError> {
        Repr::parse(&Packet::new_checked(bytes)?)
    }

    /// Writes the header into `buf` and zeroes the rest of it (the padding). The datagram
    /// is all of `buf`, which must hold at least `HEADER_LEN` bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), EmitError> {
        if buf.len() < HEADER_LEN {
            return Err(EmitError::BadLength { len: buf.len() });
        }
        buf.fill(0);
        let magic = match self.kind {
            Kind::Request => REQUEST_MAGIC,
            Kind::Reply => REPLY_MAGIC,
        };
        let mut p = Packet { buffer: buf };
        p.put_u32(field::MAGIC, magic);
        p.buffer[field::VERSION] = VERSION;
        p.buffer[field::FLAGS] = self.flags;
        p.buffer[field::CLOCK] = self.clock.to_wire();
        p.buffer[field::RESERVED8] = 0;
        p.put_u32(field::CHECK, !magic);
        p.put_u32(field::RESERVED32, 0);
        p.put_u64(field::SESSION, self.session);
        p.put_u64(field::SEQ, self.seq);
        p.put_u64(field::CLIENT_SEND, ns(Some(self.client_send)));
        p.put_u64(field::SERVER_RX, ns(self.server_rx));
        p.put_u64(field::SERVER_TX, ns(self.server_tx));
        p.put_u64(field::RX_COUNT, self.rx_count);
        p.put_u64(field::SEEN, self.seen);
        p.put_u64(field::CLOCK_DOMAIN, self.clock_domain);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reply, byte by byte as documented in the module table.
    const GOLDEN_REPLY: [u8; 88] = [
        0x62, 0x6c, 0x70, 0x72, // magic "blpr"
        0x01, 0x01, 0x01, 0x00, // version 1, flags kernel-rx, clock realtime, reserved
        0x9d, 0x93, 0x8f, 0x8d, // check = !magic
        0x00, 0x00, 0x00, 0x00, // reserved
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, // session
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, // seq 42
        0x00, 0x00, 0x00, 0x00, 0x3b, 0x9a, 0xca, 0x00, // client_send 1 s
        0x00, 0x00, 0x00, 0x00, 0x3b, 0x9a, 0xd9, 0xa0, // server_rx 1 s + 4 us
        0x00, 0x00, 0x00, 0x00, 0x3b, 0x9a, 0xe1, 0x70, // server_tx 1 s + 6 us
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x29, // rx_count 41
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfd, // seen: all but seq 40
        0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x01, // clock domain
        0, 0, 0, 0, 0, 0, 0, 0, // padding to 88
    ];

    fn golden_repr() -> Repr {
        Repr {
            kind: Kind::Reply,
            flags: FLAG_SERVER_RX_KERNEL,
            clock: ClockId::Realtime,
            session: 0x0102_0304_0506_0708,
            seq: 42,
            client_send: Duration::from_secs(1),
            server_rx: Some(Duration::from_nanos(1_000_004_000)),
            server_tx: Some(Duration::from_nanos(1_000_006_000)),
            rx_count: 41,
            seen: !0b10,
            clock_domain: 0xdead_beef_0000_0001,
        }
    }

    #[test]
    fn golden_reply_parses() {
        assert_eq!(Repr::parse_bytes(&GOLDEN_REPLY), Ok(golden_repr()));
        let p = Packet::new_checked(&GOLDEN_REPLY[..]).unwrap();
        assert_eq!(p.seq(), 42);
        assert_eq!(p.server_rx_ns(), 1_000_004_000);
    }

    #[test]
    fn golden_reply_emits_byte_exact() {
        let mut buf = [0xaau8; 88];
        golden_repr().emit(&mut buf).unwrap();
        assert_eq!(buf, GOLDEN_REPLY);
    }

    #[test]
    fn request_golden_header() {
        let mut buf = [0u8; HEADER_LEN];
        Repr::request(7, 1, Duration::from_nanos(5))
            .emit(&mut buf)
            .unwrap();
        assert_eq!(&buf[0..16], b"blpq\x01\x00\x01\x00\x9d\x93\x8f\x8e\0\0\0\0");
        assert_eq!(&buf[16..24], &7u64.to_be_bytes());
        assert_eq!(&buf[24..32], &1u64.to_be_bytes());
        assert_eq!(&buf[32..40], &5u64.to_be_bytes());
        assert!(buf[40..].iter().all(|&b| b == 0));
        assert!(is_probe_request(&buf));
        assert!(!is_probe_request(&GOLDEN_REPLY));
    }

    #[test]
    fn truncated_input_is_an_error_at_every_length() {
        for len in 0..HEADER_LEN {
            assert_eq!(
                Repr::parse_bytes(&GOLDEN_REPLY[..len]),
                Err(ParseError::Truncated { len })
            );
            assert!(!is_probe_request(&GOLDEN_REPLY[..len]));
        }
        assert!(Repr::parse_bytes(&GOLDEN_REPLY[..HEADER_LEN]).is_ok());
    }

    #[test]
    fn rejects_bad_magic_check_version_clock() {
        let mut b = GOLDEN_REPLY;
        b[0] = 0;
        assert!(matches!(
            Repr::parse_bytes(&b),
            Err(ParseError::BadMagic { .. })
        ));
        let mut b = GOLDEN_REPLY;
        b[8] = 0;
        assert_eq!(
            Repr::parse_bytes(&b),
            Err(ParseError::BadCheck { found: 0x0093_8f8d })
        );
        let mut b = GOLDEN_REPLY;
        b[4] = 2;
        assert_eq!(
            Repr::parse_bytes(&b),
            Err(ParseError::UnsupportedVersion { found: 2 })
        );
        let mut b = GOLDEN_REPLY;
        b[6] = 9;
        assert_eq!(
            Repr::parse_bytes(&b),
            Err(ParseError::UnknownClock { found: 9 })
        );
    }

    #[test]
    fn iperf2_udp_datagram_is_not_a_probe() {
        // iperf 2 UDP header: id, tv_sec, tv_usec (< 1e6), id2; even with an id equal to
        // our magic the check word cannot match.
        let mut b = [0u8; 128];
        b[0..4].copy_from_slice(&REQUEST_MAGIC.to_be_bytes());
        b[4..8].copy_from_slice(&1_764_000_000u32.to_be_bytes());
        b[8..12].copy_from_slice(&999_999u32.to_be_bytes());
        assert!(!is_probe_request(&b));
        assert!(Repr::parse_bytes(&b).is_err());
    }

    #[test]
    fn emit_rejects_bad_lengths() {
        let r = golden_repr();
        assert_eq!(
            r.emit(&mut [0u8; HEADER_LEN - 1]),
            Err(EmitError::BadLength {
                len: HEADER_LEN - 1
            })
        );
        let mut big = vec![0u8; MAX_LEN + 100];
        assert!(
            r.emit(&mut big).is_ok(),
            "IPv6 datagrams may exceed the IPv4 limit"
        );
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..200)) {
            let _ = Repr::parse_bytes(&bytes);
            let _ = is_probe_request(&bytes);
        }

        #[test]
        fn roundtrip(session: u64, seq: u64, send in 1u64.., rx: u64, tx: u64, count: u64,
                     seen: u64, dom: u64, pad in 0usize..64) {
            let r = Repr {
                kind: Kind::Reply, flags: 0, clock: ClockId::Realtime, session, seq,
                client_send: Duration::from_nanos(send),
                server_rx: opt_time(rx), server_tx: opt_time(tx),
                rx_count: count, seen, clock_domain: dom,
            };
            let mut buf = vec![0u8; HEADER_LEN + pad];
            r.emit(&mut buf).unwrap();
            proptest::prop_assert_eq!(Repr::parse_bytes(&buf), Ok(r));
        }
    }
}
