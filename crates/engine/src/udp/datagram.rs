//! Building the client's datagram template and reading a received datagram.
//!
//! iperf 2.1.8 builds one buffer per stream and rewrites only the sequence
//! number and send time before each `write()` (README 5.9); the test header
//! is repeated in every datagram. [`Template`] does the same: the header is
//! emitted once by `bloatlab-wire`, the payload is iperf's `0123456789`
//! pattern, and [`stamp`] rewrites the 16-byte prefix in place.

use super::UdpError;
use crate::config::{Amount, ClientConfig, Direction};
use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::bloatlab::BLOATLAB_EXT_VERSION;
use bloatlab_wire::client_hdr::{CORE_LEN, V1_LEN, field as core_field};
use bloatlab_wire::udp::PREFIX_LEN;
use bloatlab_wire::{
    Amount as WireAmount, ClientHeader, ClientHeaderRepr, HeaderFlags, Rate, StartFqRepr,
    UdpDatagram, UdpDatagramRepr, UdpHeaderRepr, UdpTestsRepr, UpperFlags, WallTime,
};
use std::time::Duration;

/// Largest UDP payload over IPv4 (65535 − 8 − 20).
pub const MAX_DATAGRAM: usize = 65_507;

/// What a client stream sends.
#[derive(Debug, Clone)]
pub struct Template {
    /// One full datagram (`-l` bytes) with sequence number 0 and time 0.
    pub bytes: Vec<u8>,
}

/// The test header a bloatlab UDP client repeats in every datagram.
pub fn header_repr(cfg: &ClientConfig, start_wall: Duration, rate: BitRate) -> UdpHeaderRepr {
    let amount = match cfg.amount {
        Amount::Time(d) => WireAmount::Time(d),
        Amount::Bytes(b) => WireAmount::Bytes(b),
    };
    let mut core = ClientHeaderRepr::new(amount).with_bloatlab_ext(BLOATLAB_EXT_VERSION);
    core.num_threads = cfg.parallel.max(1);
    core.port = u32::from(cfg.port);
    core.buf_len = cfg.buffer_len.unwrap_or(Bytes(0));
    core.tos = u16::from(cfg.socket.tos.unwrap_or(0));
    core.rate = Rate::Bits(rate);
    match cfg.direction {
        Direction::Forward => {}
        // iperf 2.1.8 marks role reversal with VERSION2 plus the upper flag
        // (README 5.6/5.10, wire/w12: flags 0x6c0100d8, upper 0x0410).
        Direction::Reverse => {
            core.flags = core.flags.with(HeaderFlags::VERSION2);
            core.upper_flags = core.upper_flags.with(UpperFlags::REVERSE);
        }
        // Both ends send one FIN and expect no AckFIN (2.1.8 tags it
        // `(full-duplex) (no-udp-fin)`).
        Direction::FullDuplex => {
            core.flags = core.flags.with(HeaderFlags::VERSION2);
            core.upper_flags = core
                .upper_flags
                .with(UpperFlags::FULLDUPLEX)
                .with(UpperFlags::NOUDPFIN);
        }
    }
    let mut header = UdpHeaderRepr::new(core);
    if cfg.trip_times {
        announce_trip_times(&mut header, start_wall);
    } else if cfg.direction == Direction::FullDuplex {
        // A 2.1.8 server reads NOUDPFIN only from a header with UDPTESTS
        // (its own full-duplex client sets it); without it, it would send
        // an AckFIN nobody waits for.
        header.tests = Some(UdpTestsRepr::default());
    }
    header
}

/// Upper `TRIPTIME` plus the sender's start time in the start/fq block.
fn announce_trip_times(header: &mut UdpHeaderRepr, start_wall: Duration) {
    header.core.upper_flags = header.core.upper_flags.with(UpperFlags::TRIPTIME);
    header.tests = Some(UdpTestsRepr {
        start_fq: Some(StartFqRepr {
            start: WallTime::from_since_epoch(start_wall),
            fq_rate_bytes_per_sec: 0,
        }),
        ..UdpTestsRepr::default()
    });
}

/// The header a server repeats in the datagrams of a reverse (`-R`) test:
/// the client's amount and rate, upper `NOUDPFIN` (the client sends no
/// AckFIN) and `TRIPTIME` with the server's start time when the client
/// asked for trip times (wire/w12: flags 0x680100d8, upper 0x0018).
pub fn reverse_header_repr(h: &HeaderInfo, start_wall: Duration) -> UdpHeaderRepr {
    let mut core = ClientHeaderRepr::new(h.amount);
    core.port = h.port;
    core.buf_len = h.buf_len;
    core.rate = h.rate;
    core.upper_flags = core.upper_flags.with(UpperFlags::NOUDPFIN);
    let mut header = UdpHeaderRepr::new(core);
    if h.trip_times {
        announce_trip_times(&mut header, start_wall);
    }
    header
}

impl Template {
    /// A `len`-byte datagram carrying `header`. Fails for lengths that cannot
    /// hold the 16-byte sequence/timestamp prefix or exceed a UDP datagram.
    pub fn new(header: UdpHeaderRepr, len: Bytes) -> Result<Template, UdpError> {
        let len = usize::try_from(len.0).unwrap_or(usize::MAX);
        if !(PREFIX_LEN..=MAX_DATAGRAM).contains(&len) {
            return Err(UdpError::Config(format!(
                "-l {len}: a UDP datagram must be {PREFIX_LEN}..={MAX_DATAGRAM} bytes"
            )));
        }
        // Built at least header-long and cut to `len`: a short datagram carries the first
        // `len - 16` bytes of the header, exactly like iperf 2's (which a server needs to
        // recognise the test).
        let full = len.max(MAX_HEADER_DATAGRAM);
        let mut bytes: Vec<u8> = (0..full).map(|i| b'0' + (i % 10) as u8).collect();
        let repr = UdpDatagramRepr {
            seqno: 0,
            timestamp: WallTime::default(),
            header: Some(header),
        };
        repr.emit(&mut UdpDatagram::new_unchecked(&mut bytes[..]));
        bytes.truncate(len);
        Ok(Template { bytes })
    }
}

/// Writes sequence number `seqno` and send time `wall` into a datagram
/// built from a [`Template`] (the per-datagram hot path: four stores).
#[inline]
pub fn stamp(datagram: &mut [u8], seqno: i64, wall: Duration) {
    let mut v = UdpDatagram::new_unchecked(datagram);
    v.set_seqno(seqno);
    v.set_timestamp(WallTime::from_since_epoch(wall));
}

/// What the server needs from every received datagram (the hot path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incoming {
    /// Sequence number (negative for the FIN).
    pub seqno: i64,
    /// Sender CLOCK_REALTIME.
    pub sent: Duration,
}

/// The header fields a server acts on when a flow starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderInfo {
    /// Upper flag TRIPTIME.
    pub trip_times: bool,
    /// The BLAB magic: the client is bloatlab and wants the report frame.
    pub bloatlab: bool,
    /// `-P` of the client.
    pub parallel: u32,
    /// The client's version, for the `(peer x.y.z)` tag.
    pub version: bloatlab_wire::PeerVersion,
    /// IP TOS the client asked for.
    pub tos: u8,
    /// The client's `-b`: the idle timeout of slow flows, the send rate of
    /// a reverse test.
    pub rate: Rate,
    /// Upper flag REVERSE: the server sends (`-R`).
    pub reverse: bool,
    /// Upper flag FULLDUPLEX (`--full-duplex`).
    pub full_duplex: bool,
    /// The client's `-t`/`-n`.
    pub amount: WireAmount,
    /// `mPort` (echoed in reverse datagrams).
    pub port: u32,
    /// The client's `-l` if it set one, else 0.
    pub buf_len: Bytes,
    /// Flag `HEADER_EXTEND`, which every iperf 2.x client sets.
    pub extend: bool,
    /// Bytes of the 60-byte header core the datagram carried: less than 60 when the client's
    /// `-l` cut it short (iperf 2 truncates the header of datagrams smaller than it), and
    /// then the fields beyond are zero here (no rate, no upper flags, maybe no version).
    pub core_len: usize,
}

/// Largest id a flow's first datagram may carry: a client's first
/// datagrams are ids 1, 2, 3 ... (a few may be lost or reordered).
pub const MAX_FIRST_ID: i64 = 1 << 16;

/// Why a datagram from an unknown source is not taken as a test header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotAHeader {
    #[error("too short for a test header ({0} bytes)")]
    Short(usize),
    #[error("first id {0} is not one a client starts with")]
    FirstId(i64),
    #[error("no HEADER_EXTEND flag (every iperf 2.x client sets it)")]
    NoExtend,
    #[error("version {0} is not iperf 2")]
    Version(u16),
    #[error("-P {0} is outside 1..=1024")]
    Streams(u32),
    #[error("zero -t/-n")]
    NoAmount,
    #[error("header says -l {said} but the datagram is {wire} bytes")]
    Length { said: u64, wire: usize },
    #[error("a -R / --full-duplex header cut short by -l {0}: its rate is missing")]
    TruncatedSender(usize),
}

/// The longest datagram an iperf 2.1.8 header fills: prefix, core, isoch, start/fq and
/// isoch settings blocks (16 + 60 + 32 + 20 + 32 bytes).
pub const MAX_HEADER_DATAGRAM: usize = 160;

impl HeaderInfo {
    /// Whether the datagram carried the whole 60-byte header core.
    pub fn complete(&self) -> bool {
        self.core_len >= CORE_LEN
    }

    /// Checks that a flow's first datagram (id `first_id`, `wire_len`
    /// bytes) looks like an iperf 2 test header, before any state exists:
    /// random bytes almost never pass all of these at once.
    pub fn consistent(&self, first_id: i64, wire_len: usize) -> Result<(), NotAHeader> {
        if !(0..=MAX_FIRST_ID).contains(&first_id) {
            return Err(NotAHeader::FirstId(first_id));
        }
        if !self.extend {
            return Err(NotAHeader::NoExtend);
        }
        if self.core_len >= core_field::VERSION_U.end && self.version.major != 2 {
            return Err(NotAHeader::Version(self.version.major));
        }
        if !self.complete() {
            // Only an explicit -l cuts the header (the default is 1470 bytes), and the
            // client writes it into the header: it must be this datagram's length.
            if self.buf_len.0 != wire_len as u64 {
                return Err(NotAHeader::Length {
                    said: self.buf_len.0,
                    wire: wire_len,
                });
            }
            // A test that makes the server send needs the rate the cut took away.
            if self.reverse || self.full_duplex {
                return Err(NotAHeader::TruncatedSender(wire_len));
            }
        }
        if !(1..=1024).contains(&self.parallel) {
            return Err(NotAHeader::Streams(self.parallel));
        }
        let zero = match self.amount {
            WireAmount::Time(d) => d.is_zero(),
            WireAmount::Bytes(b) => b.0 == 0,
        };
        if zero {
            return Err(NotAHeader::NoAmount);
        }
        // iperf 2.1.8 sends its first datagram whole (`SendFirstPayload`: 76 bytes or more)
        // even when -l is smaller; only then may the datagram be longer than -l.
        let whole_first = (self.buf_len.0 as usize) < wire_len && wire_len <= MAX_HEADER_DATAGRAM;
        if self.buf_len.0 != 0 && self.buf_len.0 != wire_len as u64 && !whole_first {
            return Err(NotAHeader::Length {
                said: self.buf_len.0,
                wire: wire_len,
            });
        }
        Ok(())
    }
}

/// Reads a received datagram's prefix. Fails (never panics) when it is
/// shorter than the 16 bytes; a missing or partial header is not an error
/// (iperf 2 truncates it for small `-l`).
#[inline]
pub fn parse_incoming(data: &[u8]) -> Result<Incoming, bloatlab_wire::WireError> {
    let v = UdpDatagram::new_checked(data)?;
    Ok(Incoming {
        seqno: v.seqno(),
        sent: v.timestamp().since_epoch(),
    })
}

/// The repeated test header: all 60 bytes of its core, or at least the 24-byte
/// `client_hdr_v1` when a small `-l` cut it short (iperf 2.1.8's `-l 64` datagrams carry 48
/// bytes of it, up to the TOS; the missing fields read as zero, see
/// [`HeaderInfo::core_len`]).
pub fn parse_header(data: &[u8]) -> Option<HeaderInfo> {
    let got = data.get(PREFIX_LEN..)?;
    let core_len = got.len().min(CORE_LEN);
    if core_len < V1_LEN {
        return None;
    }
    let mut core = [0u8; CORE_LEN];
    core[..core_len].copy_from_slice(&got[..core_len]);
    let c = ClientHeaderRepr::parse(&ClientHeader::new_unchecked(&core[..])).ok()?;
    Some(HeaderInfo {
        core_len,
        trip_times: c.upper_flags.contains(UpperFlags::TRIPTIME),
        bloatlab: c.bloatlab_ext().is_some(),
        parallel: c.num_threads,
        version: c.version,
        tos: (c.tos & 0xff) as u8,
        rate: c.rate,
        reverse: c.upper_flags.contains(UpperFlags::REVERSE),
        full_duplex: c.upper_flags.contains(UpperFlags::FULLDUPLEX),
        amount: c.amount,
        port: c.port,
        buf_len: c.buf_len,
        extend: c.flags.contains(HeaderFlags::EXTEND),
    })
}

/// The header of a flow's first datagram, if it is a consistent one.
pub fn parse_first(data: &[u8], first_id: i64, wire_len: usize) -> Result<HeaderInfo, NotAHeader> {
    let h = parse_header(data).ok_or(NotAHeader::Short(wire_len))?;
    h.consistent(first_id, wire_len)?;
    Ok(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// First datagram of `wire/w07_udp_e_triptimes.decoded.txt` (200 bytes),
    /// the header words only (the rest is payload).
    const W07_FIRST: [u32; 30] = [
        0x00000001, 0x6b0feba6, 0x0001ce70, 0x00000000, 0x680100d8, 0x00000001, 0x00001457,
        0x000000c8, 0x00000000, 0xffffff9c, 0x00000000, 0x00000000, 0x00100000, 0x00020001,
        0x00080003, 0x00000000, 0x000186a0, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
        0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
        0x6b0feba6, 0x0001ce70,
    ];

    fn w07_bytes() -> Vec<u8> {
        W07_FIRST.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    fn w07_config() -> ClientConfig {
        // iperf -c 127.0.0.1 -p 5207 -u -e -t 1 -b 100k -l 200 --trip-times
        let mut c = ClientConfig::new("127.0.0.1");
        c.port = 5207;
        c.protocol = crate::config::Protocol::Udp;
        c.amount = Amount::Time(Duration::from_secs(1));
        c.buffer_len = Some(Bytes(200));
        c.trip_times = true;
        c
    }

    #[test]
    fn template_matches_iperf_218_except_the_bloatlab_marker() {
        let start = WallTime {
            sec: 0x6b0feba6,
            usec: 0x0001ce70,
        }
        .since_epoch();
        let h = header_repr(&w07_config(), start, BitRate(100_000));
        let t = Template::new(h, Bytes(200)).unwrap();
        assert_eq!(t.bytes.len(), 200);
        let mut d = t.bytes.clone();
        stamp(&mut d, 1, start);
        let want = w07_bytes();
        // Offsets 40..48 are client_hdrext.type/length: "BLAB" and version 1
        // instead of iperf's zeros; everything else is byte-identical.
        assert_eq!(&d[..40], &want[..40]);
        assert_eq!(&d[40..44], b"BLAB");
        assert_eq!(&d[44..48], &BLOATLAB_EXT_VERSION.to_be_bytes());
        assert_eq!(&d[48..120], &want[48..120]);
    }

    #[test]
    fn stamp_writes_negative_fin_ids_as_64_bit() {
        let h = header_repr(&w07_config(), Duration::ZERO, BitRate(1));
        let mut d = Template::new(h, Bytes(200)).unwrap().bytes;
        stamp(&mut d, -66, Duration::from_micros(1_500_000));
        // w07 FIN: ffffffbe ... ffffffff.
        assert_eq!(&d[0..4], &[0xff, 0xff, 0xff, 0xbe]);
        assert_eq!(&d[12..16], &[0xff; 4]);
        let inc = parse_incoming(&d).unwrap();
        assert_eq!(inc.seqno, -66);
        assert_eq!(inc.sent, Duration::from_micros(1_500_000));
    }

    #[test]
    fn real_headers_are_consistent_and_random_bytes_are_not() {
        let h = parse_first(&w07_bytes(), 1, 200).unwrap();
        assert!(h.trip_times);
        assert_eq!(
            parse_first(&words(&W12_CLIENT), 1, 200).map(|h| h.reverse),
            Ok(true)
        );
        // Ours, as every -l and direction builds it.
        for d in [
            Direction::Forward,
            Direction::Reverse,
            Direction::FullDuplex,
        ] {
            let mut cfg = w07_config();
            cfg.direction = d;
            for len in [100u64, 1470, 9000] {
                cfg.buffer_len = Some(Bytes(len));
                let t = Template::new(header_repr(&cfg, Duration::ZERO, BitRate(1)), Bytes(len))
                    .unwrap();
                let mut b = t.bytes.clone();
                stamp(&mut b, 1, Duration::ZERO);
                assert!(parse_first(&b, 1, len as usize).is_ok(), "{d:?} {len}");
            }
        }
        assert_eq!(
            parse_first(&w07_bytes(), 1, 201),
            Err(NotAHeader::Length {
                said: 200,
                wire: 201
            })
        );
        assert_eq!(
            parse_first(&w07_bytes(), 1 << 40, 200),
            Err(NotAHeader::FirstId(1 << 40))
        );
        assert!(matches!(
            parse_first(&[0u8; 39], 0, 39),
            Err(NotAHeader::Short(39))
        ));
        assert_eq!(parse_first(&[0u8; 40], 0, 40), Err(NotAHeader::NoExtend));
        // Pseudo-random datagrams (xorshift): none looks like a header.
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        let mut passed = 0;
        for _ in 0..20_000 {
            let mut b = vec![0u8; 200];
            for c in b.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_be_bytes()[..c.len()]);
            }
            let id = parse_incoming(&b).unwrap().seqno;
            passed += usize::from(parse_first(&b, id, 200).is_ok());
        }
        assert_eq!(passed, 0);
    }

    /// iperf 2.1.8 with `-l 64` sends its first datagram whole (76 bytes, `-l` 64 in the
    /// header) and then 64-byte datagrams whose header is cut after 48 bytes. Either starts
    /// a forward test, as iperf 2's server takes it; a cut header only with `-l` equal to
    /// its length, and never a test that makes the server send, whose rate was cut off.
    #[test]
    fn a_header_cut_short_by_a_small_l_starts_only_a_forward_test() {
        // The first two datagrams of `iperf -c 127.0.0.1 -u -l 64 -b 1m -t 1` (2.1.8),
        // captured on loopback: the 76-byte first one, the 64-byte second one's header part.
        const IPERF_FIRST: &str = "000000016b11b66b000b8f5d000000004801009800000001000054330000\
            004000000000ffffff9c000000000000000000000000000200010008000300000000000f42400000000000000000";
        let first: Vec<u8> = (0..IPERF_FIRST.len() / 2)
            .map(|i| u8::from_str_radix(&IPERF_FIRST[2 * i..2 * i + 2], 16).unwrap())
            .collect();
        assert_eq!(first.len(), 76);
        let h = parse_first(&first, 1, 76).unwrap();
        assert!(h.complete() && h.buf_len == Bytes(64), "{h:?}");
        assert_eq!(h.rate, Rate::Bits(BitRate(1_000_000)));
        let mut second = first[..64].to_vec();
        second[3] = 2;
        let h = parse_first(&second, 2, 64).unwrap();
        assert!(!h.complete() && !h.reverse, "{h:?}");
        assert_eq!(
            parse_first(&second, 2, 65),
            Err(NotAHeader::Length { said: 64, wire: 65 })
        );
        // Ours, at every short length from client_hdr_v1 up.
        for len in [40u64, 50, 64, 75] {
            let mut cfg = w07_config();
            cfg.trip_times = false;
            cfg.buffer_len = Some(Bytes(len));
            let t =
                Template::new(header_repr(&cfg, Duration::ZERO, BitRate(1)), Bytes(len)).unwrap();
            let mut b = t.bytes.clone();
            stamp(&mut b, 1, Duration::ZERO);
            let h = parse_first(&b, 1, len as usize).unwrap();
            assert!(!h.complete() && !h.reverse, "{len}");
        }
        for d in [Direction::Reverse, Direction::FullDuplex] {
            let mut cfg = w07_config();
            cfg.direction = d;
            cfg.buffer_len = Some(Bytes(64));
            let t =
                Template::new(header_repr(&cfg, Duration::ZERO, BitRate(1)), Bytes(64)).unwrap();
            let mut b = t.bytes.clone();
            stamp(&mut b, 1, Duration::ZERO);
            assert_eq!(
                parse_first(&b, 1, 64),
                Err(NotAHeader::TruncatedSender(64)),
                "{d:?}"
            );
        }
        // Random 64-byte datagrams still never pass.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        let mut passed = 0;
        for _ in 0..20_000 {
            let mut b = vec![0u8; 64];
            for c in b.chunks_mut(8) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                c.copy_from_slice(&x.to_be_bytes());
            }
            let id = parse_incoming(&b).unwrap().seqno;
            passed += usize::from(parse_first(&b, id, 64).is_ok());
        }
        assert_eq!(passed, 0);
    }

    #[test]
    fn iperf_datagram_parses_with_its_header() {
        let inc = parse_incoming(&w07_bytes()).unwrap();
        assert_eq!(inc.seqno, 1);
        let h = parse_header(&w07_bytes()).unwrap();
        assert_eq!(h.rate, Rate::Bits(BitRate(100_000)));
        assert!(h.trip_times && !h.bloatlab);
        assert_eq!(h.parallel, 1);
        assert_eq!(h.version, bloatlab_wire::PeerVersion::IPERF_2_1_8);
    }

    #[test]
    fn short_and_tiny_datagrams() {
        assert!(parse_incoming(&[1, 2, 3]).is_err());
        let mut d = [0u8; 16];
        d[3] = 9;
        let inc = parse_incoming(&d).unwrap();
        assert_eq!((inc.seqno, parse_header(&d)), (9, None));
        // 64-byte datagrams carry a truncated header, as iperf 2.1.8's do: the 48 bytes of
        // it that fit, up to the TOS.
        let h = header_repr(&w07_config(), Duration::ZERO, BitRate(1));
        let t = Template::new(h, Bytes(64)).unwrap();
        assert_eq!(t.bytes.len(), 64);
        let cut = parse_header(&t.bytes).unwrap();
        assert_eq!((cut.core_len, cut.complete()), (48, false));
        assert_eq!(cut.version, bloatlab_wire::PeerVersion::IPERF_2_1_8);
        assert_eq!(cut.rate, Rate::Bits(BitRate(0)), "the rate was cut off");
        assert_eq!(parse_incoming(&t.bytes).unwrap().seqno, 0);
        // The same bytes as the whole header's first 64.
        let whole = Template::new(h, Bytes(200)).unwrap();
        assert_eq!(&t.bytes[..], &whole.bytes[..64]);
        // Less than client_hdr_v1: no header at all.
        assert_eq!(parse_header(&t.bytes[..39]), None);
        assert!(Template::new(h, Bytes(15)).is_err());
        assert!(Template::new(h, Bytes(70_000)).is_err());
    }

    /// `wire/w12_udp_reverse.decoded.txt`: the client's header datagram
    /// (`-u -e -t 1 -R -b 100k -l 200 --trip-times`) and the server's first
    /// data datagram, header words only.
    const W12_CLIENT: [u32; 30] = [
        0x00000001, 0x6b0febd4, 0x000460d8, 0x00000000, 0x6c0100d8, 0x00000001, 0x0000145c,
        0x000000c8, 0x00000000, 0xffffff9c, 0x00000000, 0x00000000, 0x04100000, 0x00020001,
        0x00080003, 0x00000000, 0x000186a0, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
        0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
        0x6b0febd4, 0x000460d8,
    ];
    const W12_SERVER: [u32; 30] = [
        0x00000001, 0x6b0febd4, 0x00046219, 0x00000000, 0x680100d8, 0x00000001, 0x0000145c,
        0x000000c8, 0x00000000, 0xffffff9c, 0x00000000, 0x00000000, 0x00180000, 0x00020001,
        0x00080003, 0x00000000, 0x00100000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
        0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
        0x6b0febd4, 0x00046219,
    ];

    fn words(w: &[u32]) -> Vec<u8> {
        w.iter().flat_map(|w| w.to_be_bytes()).collect()
    }

    #[test]
    fn reverse_client_header_matches_iperf_218_w12() {
        let mut cfg = w07_config();
        cfg.port = 5212;
        cfg.direction = Direction::Reverse;
        let start = WallTime {
            sec: 0x6b0febd4,
            usec: 0x000460d8,
        }
        .since_epoch();
        let h = header_repr(&cfg, start, BitRate(100_000));
        let mut d = Template::new(h, Bytes(200)).unwrap().bytes;
        stamp(&mut d, 1, start);
        let want = words(&W12_CLIENT);
        assert_eq!(&d[..40], &want[..40]);
        assert_eq!(&d[40..44], b"BLAB");
        assert_eq!(&d[48..120], &want[48..120]);
    }

    #[test]
    fn iperf_reverse_header_parses_and_the_server_answers_like_w12() {
        let h = parse_header(&words(&W12_CLIENT)).unwrap();
        assert!(h.reverse && !h.full_duplex && h.trip_times && !h.bloatlab);
        assert_eq!(h.amount, WireAmount::Time(Duration::from_secs(1)));
        assert_eq!((h.port, h.buf_len), (5212, Bytes(200)));
        let start = WallTime {
            sec: 0x6b0febd4,
            usec: 0x00046219,
        }
        .since_epoch();
        let t = Template::new(reverse_header_repr(&h, start), Bytes(200)).unwrap();
        let mut d = t.bytes;
        stamp(&mut d, 1, start);
        let want = words(&W12_SERVER);
        // Identical except the rate word: iperf's server writes its own
        // default (0x100000); we echo the client's -b (0x186a0).
        assert_eq!(&d[..64], &want[..64]);
        assert_eq!(&d[64..68], &0x186a0u32.to_be_bytes());
        assert_eq!(&d[68..120], &want[68..120]);
        // A forward header is not reverse.
        let f = parse_header(&w07_bytes()).unwrap();
        assert!(!f.reverse && !f.full_duplex);
    }
}
