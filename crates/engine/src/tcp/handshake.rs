//! The in-band exchanges around a TCP test (README 5.3-5.6): the client's
//! test header, the server's ack, the server's own header on reverse
//! trip-times tests, and bloatlab's end-of-test report frame.

use super::io::{ReadError, read_exact_by};
use crate::config::{Amount, ClientConfig, Direction};
use bloatlab_metrics::json::SenderHello;
use bloatlab_os::clock::realtime_now as wall_now;
use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::blab_block::{
    BLOATLAB_EXT_VERSION_BLOCK, BLOATLAB_EXT_VERSION_FLOW_ID, BlabBlockFlags, BlabBlockRepr,
};
use bloatlab_wire::bloatlab::{BLOATLAB_EXT_VERSION, BlabExt, ReportFrame, ReportFrameRepr};
use bloatlab_wire::client_hdr::{Amount as WireAmount, ClientHeaderRepr, Rate, StartFqRepr};
use bloatlab_wire::permit_key::{self, KeyCheck};
use bloatlab_wire::{
    AckTimes, ClientHdrAck, ClientHdrAckRepr, HeaderFlags, PeerVersion, TcpTestHeader,
    TcpTestHeaderRepr, UpperFlags, WallTime, WireError,
};
use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Why a peer's header was refused.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    #[error("test header: {0}")]
    Read(#[from] ReadError),
    #[error("malformed test header: {0}")]
    Wire(#[from] WireError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What a test header asks for, in engine terms.
#[derive(Debug, Clone, PartialEq)]
pub struct TestRequest {
    pub direction: Direction,
    pub trip_times: bool,
    pub amount: Amount,
    /// `-P` of the client (for grouping and `--one-off`).
    pub parallel: u32,
    /// `-l` if the client set it.
    pub buffer_len: Option<Bytes>,
    /// IP TOS the client asked the server to use.
    pub tos: u8,
    /// The client's start time (wall clock), sent with trip-times.
    pub start: Option<WallTime>,
    pub peer_version: PeerVersion,
    /// The server must answer with an ack (README 5.4 rule).
    pub wants_ack: bool,
    /// The client is bloatlab (BLAB magic): send the BLXR report at the end.
    pub bloatlab: bool,
    /// Header length on the wire (counts in the receive totals).
    pub header_len: usize,
    /// The client's `-b` (lRate/uRate in bits/s): paces our sender on
    /// reverse/full-duplex tests. `None` when zero or given in packets/s.
    pub rate: Option<BitRate>,
    /// A bloatlab client's `-i`: the period of the server-side intervals
    /// in the BLXR report when the server has no `-i` of its own.
    pub report_interval: Option<Duration>,
    /// A bloatlab client's wishes for our sending socket (extension block,
    /// docs/wire.md): congestion control, TCP_NOTSENT_LOWAT, hello frame.
    pub sender: BlabBlockRepr,
}

fn to_wire_amount(a: Amount) -> WireAmount {
    match a {
        Amount::Time(d) => WireAmount::Time(d),
        Amount::Bytes(b) => WireAmount::Bytes(b),
    }
}

/// What a client asks of a bloatlab server's sender: on reverse and
/// full-duplex tests, our `-Z`, `--notsent-lowat`, a hello frame telling
/// what its socket really uses, and (with `flow_id`) to keep its final
/// `TCP_INFO` for a flow query. `None` on forward tests (the server does not
/// send), which keeps their header at 60/80 bytes.
pub fn sender_block(cfg: &ClientConfig, flow_id: Option<u64>) -> Option<BlabBlockRepr> {
    (cfg.direction != Direction::Forward).then(|| BlabBlockRepr {
        flags: BlabBlockFlags::HELLO,
        notsent_lowat: cfg
            .notsent_lowat
            .map(|b| u32::try_from(b.0).unwrap_or(u32::MAX)),
        congestion: cfg.socket.congestion.clone(),
        flow_id,
    })
}

/// Builds the client's test header bytes: 60, or 80 with trip-times, or
/// 104 with bloatlab's extension block ([`sender_block`]; docs/wire.md),
/// 112 when the block carries `flow_id`, plus `2 + key length` with
/// `--permit-key` (the key goes after the block).
pub fn client_header(
    cfg: &ClientConfig,
    start_wall: Duration,
    flow_id: Option<u64>,
) -> Result<Vec<u8>, WireError> {
    let block = sender_block(cfg, flow_id);
    // BLAB extension: also ask a bloatlab server for server-side intervals
    // at our -i (docs/wire.md); iperf 2 ignores the field.
    let ext = BlabExt {
        version: match &block {
            Some(b) if b.flow_id.is_some() => BLOATLAB_EXT_VERSION_FLOW_ID,
            Some(_) => BLOATLAB_EXT_VERSION_BLOCK,
            None => BLOATLAB_EXT_VERSION as u8,
        },
        report_interval: cfg.interval,
    };
    let mut core =
        ClientHeaderRepr::new(to_wire_amount(cfg.amount)).with_bloatlab_ext(ext.to_length());
    core.num_threads = cfg.parallel;
    core.port = u32::from(cfg.port);
    core.buf_len = cfg.buffer_len.unwrap_or(Bytes(0));
    core.tos = u16::from(cfg.socket.tos.unwrap_or(0));
    let mut upper = UpperFlags(0);
    if cfg.trip_times {
        upper = upper | UpperFlags::TRIPTIME;
    }
    match cfg.direction {
        Direction::Forward => {}
        Direction::Reverse => {
            upper = upper | UpperFlags::REVERSE;
            core.flags = core.flags | HeaderFlags::VERSION2;
        }
        Direction::FullDuplex => {
            upper = upper | UpperFlags::FULLDUPLEX;
            core.flags = core.flags | HeaderFlags::VERSION2;
        }
    }
    if cfg.peer_detect {
        core.flags = core.flags | HeaderFlags::VERSION2 | HeaderFlags::V2PEERDETECT;
    }
    core.upper_flags = upper;
    // -b in iperf 2's lRate/uRate, in every direction as iperf 2.1.8 sends
    // it (a forward `-b 80k` header carries lRate 80000, no BWSET flag:
    // reference iperf2/wire/w02). On reverse and full-duplex tests the
    // server paces its writes at this rate; on forward ones a server's
    // `--max-rate` checks it (issue 19).
    if let Some(r) = cfg.rate {
        core.rate = Rate::Bits(r);
    }
    // The block follows a start-time block, all zero without trip-times
    // (iperf 2 reads it only with TRIPTIME/EPOCH/FQRATE flags).
    let start = StartFqRepr {
        start: if cfg.trip_times {
            WallTime::from_since_epoch(start_wall)
        } else {
            WallTime::default()
        },
        fq_rate_bytes_per_sec: 0,
    };
    let repr = TcpTestHeaderRepr {
        core,
        start_fq: (cfg.trip_times || block.is_some()).then_some(start),
        isoch_settings: None,
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut TcpTestHeader::new_unchecked(&mut buf[..]));
    if let Some(b) = block {
        b.append_to(&mut buf)?;
    }
    if let Some(key) = &cfg.permit_key {
        permit_key::append(&mut buf, key.as_bytes())?;
    }
    Ok(buf)
}

/// Checks the permit key of a received header (`raw`: the bytes
/// [`read_header`] returned) against the server's. `Err` holds the reason to
/// log; the caller closes the connection, as iperf 2 does.
pub fn check_permit_key(raw: &[u8], ours: Option<&str>) -> Result<(), &'static str> {
    let view = TcpTestHeader::new_unchecked(raw);
    match KeyCheck::verdict(view.permit_key(), ours.map(str::as_bytes)).refusal() {
        None => Ok(()),
        Some(why) => Err(why),
    }
}

/// The 80-byte header a server sends first on a reverse/full-duplex
/// trip-times test (flags `0x400100a0`, upper TRIPTIME, its start time).
pub fn server_reverse_header(amount: Amount, start_wall: Duration) -> Vec<u8> {
    let mut core = ClientHeaderRepr::new(to_wire_amount(amount));
    core.upper_flags = UpperFlags::TRIPTIME;
    let repr = TcpTestHeaderRepr {
        core,
        start_fq: Some(StartFqRepr {
            start: WallTime::from_since_epoch(start_wall),
            fq_rate_bytes_per_sec: 0,
        }),
        isoch_settings: None,
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut TcpTestHeader::new_unchecked(&mut buf[..]));
    buf
}

/// Reads one test header (4 bytes of flags, then the rest per the LEN
/// field) before `deadline`. Returns the raw bytes and the parsed header.
pub fn read_header(
    stream: &mut TcpStream,
    deadline: Instant,
) -> Result<(Vec<u8>, TcpTestHeaderRepr), HandshakeError> {
    let first = read_first(stream, deadline)?;
    read_header_rest(stream, first, deadline)
}

/// Reads the first 4 bytes of a connection (a header's flags, or a flow
/// query's magic) before `deadline`.
pub fn read_first(stream: &mut TcpStream, deadline: Instant) -> Result<Vec<u8>, HandshakeError> {
    let mut buf = vec![0u8; 4];
    read_exact_by(stream, &mut buf, deadline)?;
    Ok(buf)
}

/// [`read_header`] after its first 4 bytes (`buf`) were read.
pub fn read_header_rest(
    stream: &mut TcpStream,
    mut buf: Vec<u8>,
    deadline: Instant,
) -> Result<(Vec<u8>, TcpTestHeaderRepr), HandshakeError> {
    loop {
        let more = bloatlab_wire::tcp_header::bytes_needed(&buf)?;
        if more == 0 {
            break;
        }
        let at = buf.len();
        buf.resize(at + more, 0);
        read_exact_by(stream, &mut buf[at..], deadline)?;
    }
    let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&buf[..]))?;
    Ok((buf, repr))
}

/// Largest `-P` a peer may announce (more is clamped: it only sizes `[SUM]` grouping).
pub const MAX_PARALLEL: u32 = 1024;
/// Largest `-l` a peer may ask our reverse sender to use (its buffer is allocated).
pub const MAX_PEER_LEN: Bytes = Bytes(16 << 20);

/// Interprets a parsed client header (`raw`: its bytes, for bloatlab's
/// extension block). Values that would make us allocate or wait without
/// bound are clamped ([`MAX_PARALLEL`], [`MAX_PEER_LEN`]).
pub fn request_of(raw_len: usize, h: &TcpTestHeaderRepr, raw: Option<&[u8]>) -> TestRequest {
    let f = h.core.flags;
    let up = h.core.upper_flags;
    let direction = if up.contains(UpperFlags::FULLDUPLEX) {
        Direction::FullDuplex
    } else if up.contains(UpperFlags::REVERSE) {
        Direction::Reverse
    } else {
        Direction::Forward
    };
    let amount = match h.core.amount {
        WireAmount::Time(d) => Amount::Time(d),
        WireAmount::Bytes(b) => Amount::Bytes(b),
    };
    let ext = h.core.bloatlab_ext().map(BlabExt::from_length);
    // The block of an extension-2 client; a malformed one is ignored (the
    // test still runs, with our own defaults).
    let sender = match (ext, raw) {
        (Some(e), Some(raw)) if e.version >= BLOATLAB_EXT_VERSION_BLOCK => {
            match BlabBlockRepr::from_header(raw) {
                Some(Ok(b)) => b,
                Some(Err(e)) => {
                    tracing::warn!("ignoring a malformed bloatlab extension block: {e}");
                    BlabBlockRepr::default()
                }
                None => BlabBlockRepr::default(),
            }
        }
        _ => BlabBlockRepr::default(),
    };
    TestRequest {
        direction,
        trip_times: up.contains(UpperFlags::TRIPTIME),
        amount,
        parallel: h.core.num_threads.clamp(1, MAX_PARALLEL),
        buffer_len: (h.core.buf_len.0 > 0).then_some(Bytes(h.core.buf_len.0.min(MAX_PEER_LEN.0))),
        tos: (h.core.tos & 0xff) as u8,
        // A start time only with the flags that give it one (an extension
        // block's header carries an all-zero start block otherwise).
        start: h
            .start_fq
            .filter(|_| up.contains(UpperFlags::TRIPTIME) || up.contains(UpperFlags::EPOCH_START))
            .map(|s| s.start),
        peer_version: h.core.version,
        wants_ack: (f.contains(HeaderFlags::EXTEND) && !f.contains(HeaderFlags::VERSION2))
            || f.contains(HeaderFlags::V2PEERDETECT),
        bloatlab: h.core.bloatlab_ext().is_some(),
        header_len: raw_len,
        report_interval: ext.and_then(|e| e.report_interval),
        sender,
        rate: match h.core.rate {
            Rate::Bits(b) if b.0 > 0 => Some(b),
            _ => None,
        },
    }
}

/// Our version as sent in headers and acks (we speak 2.1.8's protocol).
pub const OUR_VERSION: PeerVersion = PeerVersion::IPERF_2_1_8;

/// Sends the server's ack (28 bytes, or 52 with trip-times times), with
/// TCP_NODELAY on for that one send as iperf 2 does.
pub fn send_ack(
    stream: &mut TcpStream,
    req: &TestRequest,
    accepted_at: Duration,
) -> std::io::Result<()> {
    let repr = ClientHdrAckRepr {
        flags: 0,
        version: OUR_VERSION,
        times: req.trip_times.then(|| AckTimes {
            sent: req.start.unwrap_or_default(),
            sent_rx: WallTime::from_since_epoch(accepted_at),
            ack: WallTime::from_since_epoch(wall_now()),
        }),
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ClientHdrAck::new_unchecked(&mut buf[..]));
    let nodelay = stream.nodelay().unwrap_or(false);
    stream.set_nodelay(true)?;
    stream.write_all(&buf)?;
    stream.set_nodelay(nodelay)
}

/// Reads the server's ack (`-X`) before `deadline`.
pub fn read_ack(
    stream: &mut TcpStream,
    deadline: Instant,
) -> Result<ClientHdrAckRepr, HandshakeError> {
    let mut buf = vec![0u8; 8];
    read_exact_by(stream, &mut buf, deadline)?;
    loop {
        let more = bloatlab_wire::ack::bytes_needed(&buf)?;
        if more == 0 {
            break;
        }
        let at = buf.len();
        buf.resize(at + more, 0);
        read_exact_by(stream, &mut buf[at..], deadline)?;
    }
    Ok(ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(
        &buf[..],
    ))?)
}

/// Finds bloatlab's report frame in the bytes a client drained after its
/// shutdown. They may start with an iperf ack (28 or 52 bytes) that a
/// plain forward test leaves unread. Returns the JSON payload.
pub fn find_report(drained: &[u8]) -> Option<String> {
    let mut rest = drained;
    if ClientHdrAck::<&[u8]>::new_checked(rest).is_ok_and(|a| a.msg_type() == 2) {
        let len = ClientHdrAck::new_unchecked(rest).length() as usize;
        rest = rest.get(len..)?;
    }
    let frame = ReportFrame::new_checked(rest).ok()?;
    ReportFrameRepr::parse(&frame)
        .ok()
        .map(|r| r.payload.to_owned())
}

/// bloatlab extension: the hello a server's sender sends before its data
/// when the client's block asked for it (docs/wire.md), as a BLXR frame.
pub fn send_hello(stream: &mut TcpStream, hello: &SenderHello) -> Result<(), HandshakeError> {
    let json = String::from_utf8(hello.to_json()).unwrap_or_default();
    stream.write_all(&report_frame(&json)?)?;
    Ok(())
}

/// Reads a bloatlab server's hello if the connection starts with a BLXR
/// frame. The first bytes are only peeked, so an iperf 2 server's data (or
/// its trip-times header) stays in place for the receive loop: `None` then,
/// and also on EOF, on a timeout before any byte, or on a frame that does
/// not hold a valid hello.
pub fn read_hello(stream: &mut TcpStream, deadline: Instant) -> Option<SenderHello> {
    let magic = bloatlab_wire::REPORT_MAGIC.to_be_bytes();
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    let mut first = [0u8; 4];
    loop {
        if Instant::now() >= deadline {
            return None;
        }
        match stream.peek(&mut first) {
            Ok(0) => return None,
            Ok(n) if first[..n] != magic[..n] => return None,
            Ok(4) => break,
            // A partial magic: wait for the rest.
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
            Err(e) if super::io::is_transient(&e) => {}
            Err(_) => return None,
        }
    }
    let mut buf = Vec::new();
    loop {
        let more = bloatlab_wire::report_frame_bytes_needed(&buf).ok()?;
        if more == 0 {
            break;
        }
        let at = buf.len();
        buf.resize(at + more, 0);
        read_exact_by(stream, &mut buf[at..], deadline).ok()?;
    }
    let frame = ReportFrameRepr::parse(&ReportFrame::new_unchecked(&buf[..])).ok()?;
    SenderHello::from_json(frame.payload.as_bytes())
        .map_err(|e| tracing::warn!("server hello ignored: {e}"))
        .ok()
}

/// Frames `json` as a BLXR report.
pub fn report_frame(json: &str) -> Result<Vec<u8>, WireError> {
    Ok(ReportFrameRepr::new(json)?.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_header_round_trips_into_a_request() {
        let mut cfg = ClientConfig::new("h");
        cfg.trip_times = true;
        cfg.direction = Direction::Reverse;
        cfg.parallel = 4;
        cfg.amount = Amount::Time(Duration::from_secs(3));
        let raw = client_header(&cfg, Duration::from_secs(1_800_000_000), None).unwrap();
        // 80 bytes as in README 5.6 (flags 0x440100a0) plus bloatlab's
        // 24-byte extension block: LEN = 104.
        assert_eq!(raw.len(), 104);
        assert_eq!(&raw[0..4], &[0x44, 0x01, 0x00, 0xd0]);
        let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&raw[..])).unwrap();
        let req = request_of(raw.len(), &repr, Some(&raw));
        assert_eq!(req.direction, Direction::Reverse);
        assert!(req.trip_times && req.bloatlab && !req.wants_ack);
        assert_eq!(req.parallel, 4);
        assert_eq!(req.amount, Amount::Time(Duration::from_secs(3)));
        assert_eq!(req.start.unwrap().sec, 1_800_000_000);
        assert_eq!(req.report_interval, None);
        assert!(req.sender.flags.contains(BlabBlockFlags::HELLO));
        assert_eq!(req.sender.congestion, None);
    }

    #[test]
    fn reverse_congestion_control_and_lowat_reach_the_server() {
        let mut cfg = ClientConfig::new("h");
        cfg.direction = Direction::Reverse;
        cfg.socket.congestion = Some(bloatlab_units::CongestionControl::new("cubic").unwrap());
        cfg.notsent_lowat = Some(Bytes(16384));
        let raw = client_header(&cfg, Duration::ZERO, None).unwrap();
        assert_eq!(raw.len(), 104);
        let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&raw[..])).unwrap();
        let req = request_of(raw.len(), &repr, Some(&raw));
        assert_eq!(req.sender.congestion.as_deref(), Some("cubic"));
        assert_eq!(req.sender.notsent_lowat, Some(16384));
        assert_eq!(req.sender.flow_id, None);
        // With a flow id: extension version 3, LEN 112, the id reaches the server.
        let raw = client_header(&cfg, Duration::ZERO, Some(0xfeed)).unwrap();
        assert_eq!(raw.len(), 112);
        assert_eq!(raw[31], BLOATLAB_EXT_VERSION_FLOW_ID);
        let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&raw[..])).unwrap();
        let req = request_of(raw.len(), &repr, Some(&raw));
        assert_eq!(req.sender.flow_id, Some(0xfeed));
        assert_eq!(req.sender.congestion.as_deref(), Some("cubic"));
        // No trip-times: the zero start block gives no start time.
        assert_eq!(req.start, None);
        // Forward tests keep iperf 2's 60-byte header: the server does not send.
        cfg.direction = Direction::Forward;
        assert_eq!(client_header(&cfg, Duration::ZERO, None).unwrap().len(), 60);
    }

    #[test]
    fn client_interval_is_requested_from_a_bloatlab_server() {
        let mut cfg = ClientConfig::new("h");
        cfg.interval = Some(Duration::from_millis(500));
        let raw = client_header(&cfg, Duration::ZERO, None).unwrap();
        assert_eq!(raw.len(), 60);
        assert_eq!(&raw[24..32], b"BLAB\x00\x01\xf4\x01");
        let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&raw[..])).unwrap();
        let req = request_of(raw.len(), &repr, Some(&raw));
        assert_eq!(req.report_interval, Some(Duration::from_millis(500)));
    }

    #[test]
    fn rate_travels_in_the_header_in_every_direction_as_iperf2_sends_it() {
        let mut cfg = ClientConfig::new("h");
        cfg.rate = Some(BitRate(50_000_000));
        let req_of = |cfg: &ClientConfig| {
            let raw = client_header(cfg, Duration::ZERO, None).unwrap();
            let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&raw[..])).unwrap();
            request_of(raw.len(), &repr, Some(&raw))
        };
        // Forward too (issue 19: a --max-rate server must see our -b).
        assert_eq!(req_of(&cfg).rate, Some(BitRate(50_000_000)));
        for d in [Direction::Reverse, Direction::FullDuplex] {
            cfg.direction = d;
            assert_eq!(req_of(&cfg).rate, Some(BitRate(50_000_000)), "{d:?}");
        }
        // Above 2^32 bits/s the rate uses uRate too.
        cfg.rate = Some(BitRate(40_000_000_000));
        assert_eq!(req_of(&cfg).rate, Some(BitRate(40_000_000_000)));
    }

    #[test]
    fn hostile_sizes_are_clamped() {
        let mut cfg = ClientConfig::new("h");
        cfg.parallel = u32::MAX;
        cfg.buffer_len = Some(Bytes(0x7fff_ffff));
        let raw = client_header(&cfg, Duration::ZERO, None).unwrap();
        let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&raw[..])).unwrap();
        let req = request_of(raw.len(), &repr, Some(&raw));
        assert_eq!(req.parallel, MAX_PARALLEL);
        assert_eq!(req.buffer_len, Some(MAX_PEER_LEN));
    }

    #[test]
    fn permit_key_is_sent_and_checked() {
        let mut cfg = ClientConfig::new("h");
        cfg.permit_key = Some("abcd1234".into());
        let raw = client_header(&cfg, Duration::ZERO, None).unwrap();
        assert_eq!(raw.len(), 70);
        // KEYCHECK, LEN = 62 (the key value's offset), as iperf 2.1.8 sends it.
        assert_eq!(&raw[0..4], &[0x50, 0x01, 0x00, 0x7c]);
        assert_eq!(&raw[60..70], b"\x00\x08abcd1234");
        assert_eq!(check_permit_key(&raw, Some("abcd1234")), Ok(()));
        assert!(check_permit_key(&raw, Some("abcd1235")).is_err());
        assert!(
            check_permit_key(&raw, None).is_err(),
            "iperf 2 refuses an unexpected key"
        );
        let plain = client_header(&ClientConfig::new("h"), Duration::ZERO, None).unwrap();
        assert!(check_permit_key(&plain, Some("abcd1234")).is_err());
        assert_eq!(check_permit_key(&plain, None), Ok(()));
        // The header with its key parses into the same request.
        let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&raw[..])).unwrap();
        assert_eq!(request_of(raw.len(), &repr, Some(&raw)).header_len, 70);
        cfg.permit_key = Some("abc".into());
        assert!(client_header(&cfg, Duration::ZERO, None).is_err());
    }

    #[test]
    fn plain_forward_header_is_60_bytes_and_wants_an_ack() {
        let cfg = ClientConfig::new("h");
        let raw = client_header(&cfg, Duration::ZERO, None).unwrap();
        assert_eq!(raw.len(), 60);
        assert_eq!(&raw[0..4], &[0x40, 0x01, 0x00, 0x78]);
        let repr = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(&raw[..])).unwrap();
        assert!(request_of(60, &repr, Some(&raw)).wants_ack);
    }

    #[test]
    fn report_is_found_after_an_unread_ack() {
        let mut drained = vec![0u8; 28];
        ClientHdrAckRepr {
            flags: 0,
            version: OUR_VERSION,
            times: None,
        }
        .emit(&mut ClientHdrAck::new_unchecked(&mut drained[..]));
        drained.extend(report_frame("{\"a\":1}").unwrap());
        assert_eq!(find_report(&drained).as_deref(), Some("{\"a\":1}"));
        assert_eq!(find_report(&drained[..28]), None);
        assert_eq!(find_report(b"garbage garbage garbage garbage"), None);
    }

    #[test]
    fn hello_is_read_and_plain_data_is_left_in_place() {
        use std::io::Read;
        use std::net::TcpListener;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut a, _) = l.accept().unwrap();
            send_hello(&mut a, &SenderHello::new(Some("cubic".into()), None)).unwrap();
            a.write_all(b"0123456789").unwrap();
            let (mut b, _) = l.accept().unwrap();
            b.write_all(b"0123456789").unwrap();
        });
        let deadline = || Instant::now() + Duration::from_secs(5);
        let mut c = TcpStream::connect(addr).unwrap();
        let h = read_hello(&mut c, deadline()).unwrap();
        assert_eq!(h.congestion_control.as_deref(), Some("cubic"));
        let mut rest = [0u8; 10];
        c.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"0123456789");
        // An iperf 2 server: no hello, and its data is not consumed.
        let mut c = TcpStream::connect(addr).unwrap();
        assert_eq!(read_hello(&mut c, deadline()), None);
        c.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b"0123456789");
        server.join().unwrap();
    }
}
