//! Golden-byte tests: the words are transcribed from iperf 2.1.8 packet
//! captures (one capture per test, named `wNN` after it; the words are in
//! this file, so nothing outside the repository is read).
//! Each test parses the captured bytes, checks the fields against what the
//! capture's console output says, emits the parsed form and compares bytes,
//! and checks truncated input.

use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::*;
use std::time::Duration;

/// Captured 32-bit words (as in the `.decoded.txt` files) to bytes.
fn words(s: &str) -> Vec<u8> {
    s.split_whitespace()
        .flat_map(|w| u32::from_str_radix(w, 16).expect("hex word").to_be_bytes())
        .collect()
}

/// Every strict prefix of a fixed-size message must fail with `Truncated`.
fn assert_truncation<F: Fn(&[u8]) -> Result<(), WireError>>(bytes: &[u8], needed: usize, f: F) {
    for n in 0..needed {
        match f(&bytes[..n]) {
            Err(WireError::Truncated { got, .. }) => assert_eq!(got, n),
            other => panic!("prefix {n}: expected Truncated, got {other:?}"),
        }
    }
}

// w01: iperf -c 127.0.0.1 -p 5201 -e -t 1
const W01_TCP_HEADER: &str = "40010078 00000001 00001451 00000000 00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 00000000 00000000 00000000";
const W01_ACK: &str = "00000002 0000001c 00000000 00020001 00080003 00000000 00000000";
// w02: iperf -c ... -e -t 1 --trip-times -l 1000 -b 80k
const W02_TCP_HEADER: &str = "400100a0 00000001 00001452 000003e8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 00013880 00000000 00000000 00000000 6b0feb78 0000a6ea 00000000 00000000";
const W02_BURST1: &str = "400100a0 00000001 00001452 6b0feb78 0000a705 6b0feb78 0000a766 00000000 00100000 00020001 00080003 00000001 000003e8 000003ea 00000000 00000000 6b0feb78 0000a6ea 00000000 00000000 00000000 00000000 00000000";
const W02_ACK: &str = "00000002 00000034 00000000 00020001 00080003 00000000 00000000 6b0feb78 0000a6ea 6b0feb78 0000a805 6b0feb78 0000a8bc";
// w03: -R --trip-times (client header, then the server's own header)
const W03_TCP_HEADER: &str = "440100a0 00000001 00001453 000003e8 00000000 ffffff9c 00000000 00000000 04100000 00020001 00080003 00000000 00013880 00000000 00000000 00000000 6b0feb88 00018c8c 00000000 00000000";
const W03_SERVER_HEADER: &str = "400100a0 00000001 00001453 000003e8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 00000000 00000000 00000000 00000000 6b0feb88 00018dbb 00000000 00000000";
// w04: --full-duplex
const W04_TCP_HEADER: &str = "44010078 00000001 00001454 000003e8 00000000 ffffff9c 00000000 00000000 08000000 00020001 00080003 00000000 00013880 00000000 00000000";
// w05: -X --trip-times
const W05_TCP_HEADER: &str = "460100a0 00000001 00001455 000003e8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 00013880 00000000 00000000 00000000 6b0feb93 000d07de 00000000 00000000";
// w10: -d -L 5310
const W10_TCP_HEADER: &str = "c0010079 00000001 000014be 000003e8 00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 00013880 00000000 00000000";
// w13: --permit-key=secretkey1
const W13_TCP_HEADER: &str = "5001007c 00000001 0000145d 000003e8 00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 00013880 00000000 00000000 000a7365 63726574 6b657931";
// Captured for bloatlab with a raw TCP listener (the first 100 bytes the
// client sent): `iperf -c 127.0.0.1 -p 47311 -t 1 --permit-key=abcd1234 -l 1000`
// and the same with `--trip-times` (its start time is the capture's own).
const PK_TCP_HEADER: &str = "5001007c 00000001 0000b8cf 000003e8 00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 00000000 00000000 00000000 00086162 63643132 3334";
const PK_TT_TCP_HEADER: &str = "500100a4 00000001 0000b8d0 000003e8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 00000000 00000000 00000000 00000000 6b113163 0008f4e3 00000000 00000000 00086162 63643132 3334";
// w14: --txstart-time 1796205546.5 --trip-times
const W14_TCP_HEADER: &str = "400100a0 00000001 0000145e 000003e8 00000000 ffffff9c 00000000 00000000 10100000 00020001 00080003 00000000 00013880 00000000 00000000 00000000 6b0febea 00000005 00000000 00000000";
// w06: -u -t 1 -b 100k -l 200 (first 160 bytes of datagram 1)
const W06_UDP_1: &str = "00000001 6b0feb9f 000dd051 00000000 48010098 00000001 00001456 000000c8 00000000 ffffff9c 00000000 00000000 00000000 00020001 00080003 00000000 000186a0 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000";
// w07: -u -e -t 1 -b 100k -l 200 --trip-times
const W07_UDP_1: &str = "00000001 6b0feba6 0001ce70 00000000 680100d8 00000001 00001457 000000c8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 000186a0 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 6b0feba6 0001ce70 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000";
const W07_UDP_FIN: &str = "ffffffbe 6b0feba7 00022d6a ffffffff 680100d8 00000001 00001457 000000c8 00000000 ffffff9c 00000000 00000000 00100000 00020001 00080003 00000000 000186a0 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 6b0feba6 0001ce70 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000";
const W07_ACK_FIN: &str = "00000000 00000000 00000000 00000000 c8000000 00000000 00003390 00000001 00005f22 00000000 00000000 00000042 00000000 00000002 00000000 00000004 00000000 0000003e 00000000 000009d6 00000000 00000026 00000d0c 000765f0 00000000 00000002 00000042 00000040 00000001 00000000 00000000 00000000";
// w11: -u -e --isochronous=10:100k,0 -l 300 --trip-times (datagram 2)
const W11_UDP_2: &str = "00000002 6b0febce 000df69b 00000000 680100d8 00000001 0000145b 0000012c 00000000 ffffff9c 00000000 00000000 00110000 00020001 00080003 00000000 00100000 00000000 00000000 000186a0 6b0febce 000df69b 00000000 00000001 000004e1 000004e1 00000000 00000000 6b0febce 000df41c 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000";
// w12: -u -e -R --trip-times: client request, then the server's first datagram
const W12_UDP_REQ: &str = "00000001 6b0febd4 000460d8 00000000 6c0100d8 00000001 0000145c 000000c8 00000000 ffffff9c 00000000 00000000 04100000 00020001 00080003 00000000 000186a0 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 6b0febd4 000460d8 00000000 00000000";
const W12_UDP_SERVER: &str = "00000001 6b0febd4 00046219 00000000 680100d8 00000001 0000145c 000000c8 00000000 ffffff9c 00000000 00000000 00180000 00020001 00080003 00000000 00100000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 6b0febd4 00046219 00000000 00000000";

fn parse_tcp(b: &[u8]) -> Result<TcpTestHeaderRepr, WireError> {
    TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(b))
}

fn emit_tcp(r: &TcpTestHeaderRepr) -> Vec<u8> {
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut TcpTestHeader::new_unchecked(&mut out[..]));
    out
}

#[test]
fn w01_plain_tcp_header() {
    let b = words(W01_TCP_HEADER);
    assert_eq!(header_len_from_flags(0x4001_0078), Ok(60));
    let r = parse_tcp(&b).unwrap();
    assert_eq!(r.core.flags, HeaderFlags::EXTEND);
    assert_eq!(r.core.num_threads, 1);
    assert_eq!(r.core.port, 5201);
    assert_eq!(r.core.buf_len, Bytes(0));
    assert_eq!(r.core.amount, Amount::Time(Duration::from_secs(1)));
    assert_eq!(r.core.version, PeerVersion::IPERF_2_1_8);
    assert_eq!(r.core.version.to_string(), "2.1.8");
    assert_eq!(r.core.rate, Rate::Bits(BitRate(0)));
    assert_eq!(r.core.bloatlab_ext(), None);
    assert_eq!(r.start_fq, None);
    assert_eq!(r.isoch_settings, None);
    assert_eq!(emit_tcp(&r), b);
    // A fresh repr built the way a 2.1.8 client would also emits the same bytes.
    let mut fresh = ClientHeaderRepr::new(Amount::Time(Duration::from_secs(1)));
    fresh.port = 5201;
    let fresh = TcpTestHeaderRepr {
        core: fresh,
        start_fq: None,
        isoch_settings: None,
    };
    assert_eq!(emit_tcp(&fresh), b);
    assert_truncation(&b, 60, |p| parse_tcp(p).map(|_| ()));
}

#[test]
fn w02_triptimes_tcp_header_burst_and_ack() {
    let b = words(W02_TCP_HEADER);
    let r = parse_tcp(&b).unwrap();
    assert_eq!(header_len_from_flags(0x4001_00a0), Ok(80));
    assert_eq!(r.core.buf_len, Bytes(1000));
    assert_eq!(r.core.upper_flags, UpperFlags::TRIPTIME);
    assert_eq!(r.core.rate, Rate::Bits(BitRate(80_000)));
    let start = r.start_fq.unwrap();
    assert_eq!(
        start.start,
        WallTime {
            sec: 0x6b0f_eb78,
            usec: 0xa6ea
        }
    );
    assert_eq!(start.fq_rate_bytes_per_sec, 0);
    assert_eq!(emit_tcp(&r), b);
    assert_truncation(&b, 80, |p| parse_tcp(p).map(|_| ()));

    // The 92-byte burst header carries stale test-header bytes that must be ignored.
    let burst = words(W02_BURST1);
    let br = TcpBurstRepr::parse(&TcpBurstHeader::new_unchecked(&burst[..])).unwrap();
    assert_eq!(
        br.start_time,
        WallTime {
            sec: 0x6b0f_eb78,
            usec: 0xa705
        }
    );
    assert_eq!(
        br.write_time,
        WallTime {
            sec: 0x6b0f_eb78,
            usec: 0xa766
        }
    );
    assert_eq!(br.burst_id, 1);
    assert_eq!(br.burst_size, Bytes(1000));
    assert_eq!(br.seqno, 0x3ea);
    let mut out = [0xAAu8; 92];
    br.emit(&mut TcpBurstHeader::new_unchecked(&mut out[..]));
    // Live fields are byte-identical to the capture, stale ones are zeroed.
    assert_eq!(out[12..28], burst[12..28]);
    assert_eq!(out[44..60], burst[44..60]);
    assert!(
        out[..12]
            .iter()
            .chain(&out[28..44])
            .chain(&out[60..])
            .all(|&x| x == 0)
    );
    assert_eq!(
        TcpBurstRepr::parse(&TcpBurstHeader::new_unchecked(&out[..])).unwrap(),
        br
    );
    assert_truncation(&burst, 92, |p| {
        TcpBurstRepr::parse(&TcpBurstHeader::new_unchecked(p)).map(|_| ())
    });

    let ack = words(W02_ACK);
    let ar = ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(&ack[..])).unwrap();
    assert_eq!(ar.version, PeerVersion::IPERF_2_1_8);
    let t = ar.times.unwrap();
    assert_eq!(
        t.sent, start.start,
        "the ack echoes the client's start time"
    );
    assert_eq!(
        t.sent_rx,
        WallTime {
            sec: 0x6b0f_eb78,
            usec: 0xa805
        }
    );
    assert_eq!(
        t.ack,
        WallTime {
            sec: 0x6b0f_eb78,
            usec: 0xa8bc
        }
    );
    let mut out = vec![0u8; ar.buffer_len()];
    ar.emit(&mut ClientHdrAck::new_unchecked(&mut out[..]));
    assert_eq!(out, ack);
    assert_eq!(ack::bytes_needed(&ack[..3]), Ok(5));
    assert_eq!(ack::bytes_needed(&ack[..8]), Ok(44));
    assert_eq!(ack::bytes_needed(&ack), Ok(0));
    assert_truncation(&ack, 52, |p| {
        ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(p)).map(|_| ())
    });
}

#[test]
fn w01_short_ack() {
    let ack = words(W01_ACK);
    let ar = ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(&ack[..])).unwrap();
    assert_eq!(ar.times, None);
    assert_eq!(ar.flags, 0);
    let mut out = vec![0u8; ar.buffer_len()];
    ar.emit(&mut ClientHdrAck::new_unchecked(&mut out[..]));
    assert_eq!(out, ack);
    assert_truncation(&ack, 28, |p| {
        ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(p)).map(|_| ())
    });
    // Wrong type and wrong length are rejected by name.
    let mut bad = ack.clone();
    bad[3] = 7;
    assert!(matches!(
        ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(&bad[..])),
        Err(WireError::BadValue {
            field: "client_hdr_ack.type",
            value: 7
        })
    ));
    bad = ack.clone();
    bad[7] = 30;
    assert!(matches!(
        ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(&bad[..])),
        Err(WireError::BadLength { value: 30, .. })
    ));
}

#[test]
fn w03_reverse_headers_both_ways() {
    let b = words(W03_TCP_HEADER);
    let r = parse_tcp(&b).unwrap();
    assert_eq!(r.core.flags, HeaderFlags::EXTEND | HeaderFlags::VERSION2);
    assert_eq!(
        r.core.upper_flags,
        UpperFlags::REVERSE | UpperFlags::TRIPTIME
    );
    assert_eq!(emit_tcp(&r), b);
    // The server's sending side first sends its own 80-byte header.
    let s = words(W03_SERVER_HEADER);
    let sr = parse_tcp(&s).unwrap();
    assert_eq!(sr.core.flags, HeaderFlags::EXTEND);
    assert_eq!(sr.core.upper_flags, UpperFlags::TRIPTIME);
    assert_eq!(
        sr.start_fq.unwrap().start,
        WallTime {
            sec: 0x6b0f_eb88,
            usec: 0x18dbb
        }
    );
    assert_eq!(emit_tcp(&sr), s);
}

#[test]
fn w04_w05_w10_w14_flag_variants() {
    let r = parse_tcp(&words(W04_TCP_HEADER)).unwrap();
    assert_eq!(r.core.upper_flags, UpperFlags::FULLDUPLEX);
    assert_eq!(r.core.flags, HeaderFlags::EXTEND | HeaderFlags::VERSION2);
    assert_eq!(emit_tcp(&r), words(W04_TCP_HEADER));

    let r = parse_tcp(&words(W05_TCP_HEADER)).unwrap();
    assert!(
        r.core
            .flags
            .contains(HeaderFlags::V2PEERDETECT | HeaderFlags::VERSION2)
    );
    assert_eq!(emit_tcp(&r), words(W05_TCP_HEADER));

    let r = parse_tcp(&words(W10_TCP_HEADER)).unwrap();
    assert_eq!(
        r.core.flags,
        HeaderFlags::VERSION1 | HeaderFlags::EXTEND | HeaderFlags::RUN_NOW
    );
    assert_eq!(r.core.port, 5310);
    assert_eq!(emit_tcp(&r), words(W10_TCP_HEADER));

    let r = parse_tcp(&words(W14_TCP_HEADER)).unwrap();
    assert_eq!(
        r.core.upper_flags,
        UpperFlags::EPOCH_START | UpperFlags::TRIPTIME
    );
    // `--txstart-time 1796205546.5` parses ".5" as 5 us (README 5.11).
    assert_eq!(
        r.start_fq.unwrap().start,
        WallTime {
            sec: 1_796_205_546,
            usec: 5
        }
    );
    assert_eq!(emit_tcp(&r), words(W14_TCP_HEADER));
}

#[test]
fn w13_permit_key_length_rule() {
    let b = words(W13_TCP_HEADER);
    assert_eq!(b.len(), 72);
    // LEN is the offset of the key value (62); the key length sits just before it.
    assert_eq!(header_len_from_flags(0x5001_007c), Ok(62));
    assert_eq!(tcp_header::bytes_needed(&b[..0]), Ok(4));
    assert_eq!(tcp_header::bytes_needed(&b[..4]), Ok(58));
    assert_eq!(tcp_header::bytes_needed(&b[..62]), Ok(10));
    assert_eq!(tcp_header::bytes_needed(&b), Ok(0));
    let v = TcpTestHeader::new_checked(&b[..]).unwrap();
    assert_eq!(v.permit_key(), Some(&b"secretkey1"[..]));
    assert_eq!(v.header_len(), 72);
    assert_eq!(v.start_fq(), None);
    let r = TcpTestHeaderRepr::parse(&v).unwrap();
    assert!(
        !r.core.flags.contains(HeaderFlags::KEYCHECK),
        "layout bit stays in the view"
    );
    assert_truncation(&b, 72, |p| parse_tcp(p).map(|_| ()));
}

#[test]
fn header_len_rule_matches_listener() {
    // LEN_BIT clear: 24 for VERSION1|EXTEND, +36 for VERSION2|EXTEND.
    assert_eq!(header_len_from_flags(0x4000_0000), Ok(60));
    assert_eq!(header_len_from_flags(0x8000_0000), Ok(24));
    assert_eq!(header_len_from_flags(0x8400_0000), Ok(60));
    assert!(matches!(
        header_len_from_flags(0),
        Err(WireError::BadLength { value: 0, .. })
    ));
    // The LEN field maxes at 255 and short lengths cannot hold a header.
    assert_eq!(header_len_from_flags(0x0001_01FE), Ok(255));
    assert!(matches!(
        header_len_from_flags(0x4001_0010),
        Err(WireError::BadLength { value: 8, .. })
    ));
    assert!(matches!(
        header_len_from_flags(0x0080_0000),
        Err(WireError::Unsupported { .. })
    ));
    // A LEN of 24 is legal for the length rule but has no client_hdrext to parse.
    let mut b = vec![0u8; 60];
    b[..4].copy_from_slice(&0x4001_0030u32.to_be_bytes());
    assert!(matches!(parse_tcp(&b), Err(WireError::Unsupported { .. })));
}

fn parse_udp(b: &[u8]) -> Result<UdpDatagramRepr, WireError> {
    UdpDatagramRepr::parse(&UdpDatagram::new_unchecked(b))
}

fn emit_udp(r: &UdpDatagramRepr) -> Vec<u8> {
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut UdpDatagram::new_unchecked(&mut out[..]));
    out
}

#[test]
fn w06_plain_udp_datagram() {
    let b = words(W06_UDP_1);
    let r = parse_udp(&b).unwrap();
    assert_eq!(r.seqno, 1);
    assert!(!r.is_fin());
    assert_eq!(
        r.timestamp,
        WallTime {
            sec: 0x6b0f_eb9f,
            usec: 0xdd051
        }
    );
    let h = r.header.unwrap();
    assert_eq!(h.core.flags, HeaderFlags::EXTEND | HeaderFlags::SEQNO64B);
    assert_eq!(h.core.buf_len, Bytes(200));
    assert_eq!(h.core.port, 5206);
    assert_eq!(h.core.rate, Rate::Bits(BitRate(100_000)));
    assert_eq!(h.tests, None);
    assert_eq!(r.advertised_len(), 76);
    assert_eq!(
        UdpDatagram::new_unchecked(&b[..]).advertised_len(),
        Some(76)
    );
    assert_eq!(emit_udp(&r), b[..76]);
    // Datagrams shorter than the header (small -l) still parse, without a header.
    let short = parse_udp(&b[..40]).unwrap();
    assert_eq!((short.seqno, short.header), (1, None));
    assert_truncation(&b, 16, |p| parse_udp(p).map(|_| ()));
}

#[test]
fn w07_triptimes_udp_fin_and_ackfin() {
    let b = words(W07_UDP_1);
    let r = parse_udp(&b).unwrap();
    let h = r.header.unwrap();
    assert_eq!(h.core.upper_flags, UpperFlags::TRIPTIME);
    assert!(h.trip_times());
    let t = h.tests.unwrap();
    assert_eq!(t.isoch, IsochPayloadRepr::default());
    assert_eq!(
        t.start_fq.unwrap().start,
        WallTime {
            sec: 0x6b0f_eba6,
            usec: 0x1ce70
        }
    );
    assert_eq!(t.isoch_settings, None);
    assert_eq!(r.advertised_len(), 108);
    assert_eq!(emit_udp(&r), b[..128]);

    let fin = words(W07_UDP_FIN);
    let f = parse_udp(&fin).unwrap();
    assert_eq!(f.seqno, -66);
    assert!(f.is_fin());
    assert!(UdpDatagram::new_unchecked(&fin[..]).is_fin());
    assert_eq!(emit_udp(&f), fin[..128]);

    // The server's AckFIN; the console said: 12.9 KBytes, 1.0244 s, 0.002 ms jitter,
    // 0/66, latency 0.038/0.004/0.062/0.007 ms, 64 pps.
    let a = words(W07_ACK_FIN);
    let s = ServerReportRepr::parse(&AckFin::new_unchecked(&a[..])).unwrap();
    assert_eq!(s.flags, ServerFlags(0xc800_0000));
    assert_eq!(s.total_bytes, Bytes(13_200));
    assert_eq!(s.duration, Duration::from_micros(1_024_354));
    assert_eq!((s.lost, s.out_of_order, s.datagrams), (0, 0, 66));
    assert_eq!(s.jitter.to_duration(), Some(Duration::from_micros(2)));
    let e = s.ext.unwrap();
    assert_eq!(e.min_transit.to_duration(), Some(Duration::from_micros(4)));
    assert_eq!(e.max_transit.to_duration(), Some(Duration::from_micros(62)));
    assert_eq!(
        e.mean_transit.to_duration(),
        Some(Duration::from_micros(38))
    );
    assert_eq!(e.sum_transit.to_micros(), 2518);
    assert_eq!(
        e.m2_transit,
        SplitDouble {
            int: 3340,
            frac_e6: 484_848
        }
    );
    assert_eq!((e.cnt_transit, e.cnt_ipg, e.ipg_sum), (66, 64, 1));
    // stdev = sqrt(M2 / (n-1)) = 7.17 us, printed as 0.007 ms.
    let sd = e.transit_stdev().unwrap().as_secs_f64() * 1e3;
    assert!((sd - 0.00717).abs() < 0.00001, "{sd}");
    let mut out = vec![0xFFu8; s.buffer_len()];
    s.emit(&mut AckFin::new_unchecked(&mut out[..]));
    assert_eq!(out, a);
    assert_truncation(&a, 56, |p| {
        ServerReportRepr::parse(&AckFin::new_unchecked(p)).map(|_| ())
    });
    // A stale 52-byte client_hdr_ack is not an AckFIN.
    let stale = words(W02_ACK);
    assert!(matches!(
        ServerReportRepr::parse(&AckFin::new_unchecked(&stale[..])),
        Err(WireError::BadValue { .. })
    ));
}

#[test]
fn w11_isochronous_udp_payload() {
    let b = words(W11_UDP_2);
    let r = parse_udp(&b).unwrap();
    let h = r.header.unwrap();
    assert_eq!(h.core.upper_flags, UpperFlags::ISOCH | UpperFlags::TRIPTIME);
    let t = h.tests.unwrap();
    assert_eq!(t.isoch.burst_period, Duration::from_millis(100));
    assert_eq!(
        t.isoch.start,
        WallTime {
            sec: 0x6b0f_ebce,
            usec: 0xdf69b
        }
    );
    assert_eq!((t.isoch.prev_frame_id, t.isoch.frame_id), (0, 1));
    assert_eq!(
        (t.isoch.burst_size, t.isoch.remaining),
        (Bytes(1249), Bytes(1249))
    );
    assert_eq!(
        t.start_fq.unwrap().start,
        WallTime {
            sec: 0x6b0f_ebce,
            usec: 0xdf41c
        }
    );
    assert_eq!(emit_udp(&r), b[..128]);
}

#[test]
fn w12_udp_reverse_request_and_server_stream() {
    let b = words(W12_UDP_REQ);
    let r = parse_udp(&b).unwrap();
    let h = r.header.unwrap();
    assert!(h.core.flags.contains(HeaderFlags::VERSION2));
    assert_eq!(
        h.core.upper_flags,
        UpperFlags::REVERSE | UpperFlags::TRIPTIME
    );
    assert_eq!(emit_udp(&r), b[..128]);
    let s = parse_udp(&words(W12_UDP_SERVER)).unwrap();
    assert_eq!(
        s.header.unwrap().core.upper_flags,
        UpperFlags::TRIPTIME | UpperFlags::NOUDPFIN
    );
}

#[test]
fn bloatlab_marker_round_trips_and_keeps_the_iperf_layout() {
    let mut r = parse_tcp(&words(W01_TCP_HEADER)).unwrap();
    r.core = r.core.with_bloatlab_ext(BLOATLAB_EXT_VERSION);
    let out = emit_tcp(&r);
    assert_eq!(&out[24..28], b"BLAB");
    assert_eq!(out[28..32], 1u32.to_be_bytes());
    // Only the two unused words differ from what 2.1.8 sends.
    let orig = words(W01_TCP_HEADER);
    assert_eq!(out[..24], orig[..24]);
    assert_eq!(out[32..], orig[32..]);
    let back = parse_tcp(&out).unwrap();
    assert_eq!(back.core.bloatlab_ext(), Some(1));
    assert_eq!(
        TcpTestHeader::new_checked(&out[..])
            .unwrap()
            .core()
            .bloatlab_ext(),
        Some(1)
    );
}

#[test]
fn bloatlab_report_interval_request_golden_bytes() {
    let mut r = parse_tcp(&words(W01_TCP_HEADER)).unwrap();
    let ext = BlabExt {
        version: 1,
        report_interval: Some(Duration::from_millis(500)),
    };
    r.core = r.core.with_bloatlab_ext(ext.to_length());
    let out = emit_tcp(&r);
    assert_eq!(&out[24..28], b"BLAB");
    // length = 1 | 500 << 8 = 0x0001f401
    assert_eq!(out[28..32], [0x00, 0x01, 0xf4, 0x01]);
    let orig = words(W01_TCP_HEADER);
    assert_eq!(out[..24], orig[..24]);
    assert_eq!(out[32..], orig[32..]);
    let back = parse_tcp(&out).unwrap().core.bloatlab_ext().unwrap();
    assert_eq!(BlabExt::from_length(back), ext);
    // An older client (length = 1) asks for nothing.
    assert_eq!(BlabExt::from_length(1).report_interval, None);
    // Rounding and saturation.
    let enc = |d| {
        BlabExt {
            version: 1,
            report_interval: Some(d),
        }
        .to_length()
    };
    assert_eq!(enc(Duration::from_micros(100)), 1 | (1 << 8));
    assert_eq!(enc(Duration::from_secs(1 << 30)), 0xffff_ff01);
}

#[test]
fn report_frame_golden_and_streaming() {
    let json = r#"{"schema":1}"#;
    let f = ReportFrameRepr::new(json).unwrap();
    let bytes = f.to_vec();
    let mut expected = b"BLXR".to_vec();
    expected.extend(1u32.to_be_bytes());
    expected.extend((json.len() as u32).to_be_bytes());
    expected.extend(json.as_bytes());
    assert_eq!(bytes, expected);
    let v = ReportFrame::new_checked(&bytes[..]).unwrap();
    assert_eq!(ReportFrameRepr::parse(&v).unwrap(), f);
    // Streaming: 12 header bytes first, then exactly the payload.
    assert_eq!(report_frame_bytes_needed(&[]), Ok(12));
    assert_eq!(report_frame_bytes_needed(&bytes[..5]), Ok(7));
    assert_eq!(report_frame_bytes_needed(&bytes[..12]), Ok(json.len()));
    assert_eq!(report_frame_bytes_needed(&bytes), Ok(0));
    assert!(matches!(report_frame_bytes_needed(b"BLX"), Ok(9)));
    assert!(matches!(
        report_frame_bytes_needed(b"{"),
        Err(WireError::BadMagic { .. })
    ));
    for n in 0..bytes.len() {
        assert!(ReportFrame::new_checked(&bytes[..n]).is_err(), "prefix {n}");
    }
    // Oversized and non-UTF-8 payloads are refused.
    let mut big = expected.clone();
    big[8..12].copy_from_slice(&((1u32 << 20) + 1).to_be_bytes());
    assert!(matches!(
        report_frame_bytes_needed(&big),
        Err(WireError::BadLength {
            field: "report.payload_len",
            ..
        })
    ));
    let mut bad = expected.clone();
    bad[12] = 0xFF;
    assert!(matches!(
        ReportFrameRepr::parse(&ReportFrame::new_unchecked(&bad[..])),
        Err(WireError::NotUtf8 { valid_up_to: 0 })
    ));
    assert!(ReportFrameRepr::new(&"x".repeat(MAX_REPORT_PAYLOAD + 1)).is_err());
}

#[test]
fn split_double_sign_and_duration_helpers() {
    let neg = SplitDouble::from_f64(-0.5);
    assert_eq!(
        neg,
        SplitDouble {
            int: 0,
            frac_e6: -500_000
        }
    );
    assert_eq!(neg.to_f64(), -0.5);
    assert_eq!(neg.to_duration(), None);
    assert_eq!(neg.to_micros(), -500_000);
    assert_eq!(
        SplitDouble::from_f64(-1.25),
        SplitDouble {
            int: -1,
            frac_e6: -250_000
        }
    );
    assert_eq!(SplitDouble::from_f64(f64::NAN), SplitDouble::default());
    assert_eq!(SplitDouble::from_f64(1e300).int, i32::MAX);
    assert_eq!(SplitDouble::from_f64(f64::NEG_INFINITY).int, i32::MIN);
    let d = Duration::new(3, 141_592_000);
    assert_eq!(SplitDouble::from_duration(d).to_duration(), Some(d));
    // Extreme words never panic.
    let x = SplitDouble {
        int: i32::MIN,
        frac_e6: i32::MIN,
    };
    assert!(x.to_f64() < 0.0);
    assert_eq!(x.to_duration(), None);
}

#[test]
fn wall_time_conversions() {
    use std::time::{SystemTime, UNIX_EPOCH};
    let t = UNIX_EPOCH + Duration::new(0x6b0f_eb78, 42_699_999);
    let w = WallTime::from(t);
    assert_eq!(
        w,
        WallTime {
            sec: 0x6b0f_eb78,
            usec: 42_699
        }
    );
    assert_eq!(
        SystemTime::from(w),
        UNIX_EPOCH + Duration::new(0x6b0f_eb78, 42_699_000)
    );
    let later = WallTime {
        sec: w.sec + 1,
        usec: 1,
    };
    assert_eq!(later.micros_since(w), 1_000_000 + 1 - 42_699);
    assert_eq!(w.micros_since(later), -(1_000_000 + 1 - 42_699));
    assert_eq!(w.checked_duration_since(later), None);
    // A malformed usec carries instead of panicking.
    let odd = WallTime {
        sec: u32::MAX,
        usec: u32::MAX,
    };
    assert_eq!(odd.since_epoch().as_secs(), u64::from(u32::MAX) + 4294);
}

#[test]
fn peer_version_display() {
    let v = PeerVersion::from_words(0x0002_0001, 0x0063_0004);
    assert_eq!(v.to_string(), "2.1.99-private");
    assert_eq!(v.to_words(), (0x0002_0001, 0x0063_0004));
    assert_eq!(
        PeerVersion::IPERF_2_1_8.to_words(),
        (0x0002_0001, 0x0008_0003)
    );
}

#[test]
fn amount_and_rate_encoding() {
    assert_eq!(
        Amount::from_wire(-100),
        Amount::Time(Duration::from_secs(1))
    );
    assert_eq!(Amount::Time(Duration::from_secs(10)).to_wire(), -1000);
    assert_eq!(Amount::Time(Duration::from_millis(1)).to_wire(), -1);
    assert_eq!(
        Amount::from_wire(i32::MIN),
        Amount::Time(Duration::from_millis(21_474_836_480))
    );
    assert_eq!(Amount::Bytes(Bytes(1_000_000)).to_wire(), 1_000_000);
    assert_eq!(
        Amount::Bytes(Bytes(0x1_8000_0001)).to_wire(),
        1,
        "iperf 2 masks to 31 bits"
    );
    // A 10 Gbit/s rate splits into lRate and uRate = (rate >> 32) << 8.
    let mut r = ClientHeaderRepr::new(Amount::Time(Duration::from_secs(1)));
    r.rate = Rate::Bits(BitRate(10_000_000_000));
    let h = TcpTestHeaderRepr {
        core: r,
        start_fq: None,
        isoch_settings: None,
    };
    let b = emit_tcp(&h);
    assert_eq!(b[48..52], (10_000_000_000u64 as u32).to_be_bytes());
    assert_eq!(b[52..56], (2u32 << 8).to_be_bytes());
    assert_eq!(
        parse_tcp(&b).unwrap().core.rate,
        Rate::Bits(BitRate(10_000_000_000))
    );
    r.rate = Rate::PacketsPerSec(1000);
    let b = emit_tcp(&TcpTestHeaderRepr {
        core: r,
        start_fq: None,
        isoch_settings: None,
    });
    assert_eq!(b[32..34], UpperFlags::UNITS_PPS.bits().to_be_bytes());
    assert_eq!(parse_tcp(&b).unwrap().core.rate, Rate::PacketsPerSec(1000));
}

/// Regressions found by `scripts/fuzz-smoke.sh`.
#[test]
fn fuzz_regressions_round_trip() {
    // mAmount = i32::MIN (-(2^31) centiseconds) re-encodes to itself.
    let a = Amount::from_wire(i32::MIN);
    assert_eq!(a.to_wire(), i32::MIN);
    // An AckFIN with EXTEND but too short for the extension parses without it.
    let mut b = words(W07_ACK_FIN);
    b.truncate(60);
    let r = ServerReportRepr::parse(&AckFin::new_unchecked(&b[..])).unwrap();
    assert_eq!((r.ext, r.flags.has(ServerFlags::EXTEND)), (None, false));
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut AckFin::new_unchecked(&mut out[..]));
    assert_eq!(
        ServerReportRepr::parse(&AckFin::new_unchecked(&out[..])),
        Ok(r)
    );
}

#[test]
fn bloatlab_block_golden_bytes() {
    // w03 (-R --trip-times) with extension version 2 and the 24-byte block:
    // HELLO, TCP_NOTSENT_LOWAT 16 KiB, congestion control "cubic".
    let mut r = parse_tcp(&words(W03_TCP_HEADER)).unwrap();
    let ext = BlabExt {
        version: BLOATLAB_EXT_VERSION_BLOCK,
        report_interval: None,
    };
    r.core = r.core.with_bloatlab_ext(ext.to_length());
    let mut out = emit_tcp(&r);
    let block = BlabBlockRepr {
        flags: BlabBlockFlags::HELLO,
        notsent_lowat: Some(16384),
        congestion: Some(bloatlab_units::CongestionControl::new("cubic").unwrap()),
        flow_id: None,
    };
    block.append_to(&mut out).unwrap();
    let mut expected = words(W03_TCP_HEADER);
    // LEN field: 104 bytes (0x68 << 1 = 0xd0).
    expected[..4].copy_from_slice(&[0x44, 0x01, 0x00, 0xd0]);
    expected[24..32].copy_from_slice(b"BLAB\x00\x00\x00\x02");
    expected.extend(words(
        "00000001 00004000 63756269 63000000 00000000 00000000",
    ));
    assert_eq!(out, expected);
    assert_eq!(out.len(), LEN_WITH_BLAB_BLOCK);
    // A server reads exactly 104 bytes and finds everything else unchanged.
    assert_eq!(tcp_header::bytes_needed(&out[..4]), Ok(100));
    let back = parse_tcp(&out).unwrap();
    assert_eq!(back.start_fq, r.start_fq);
    assert_eq!(BlabExt::from_length(back.core.bloatlab_ext().unwrap()), ext);
    assert_eq!(BlabBlockRepr::from_header(&out), Some(Ok(block)));
    // The plain 80-byte header (an older client) has no block.
    assert_eq!(BlabBlockRepr::from_header(&words(W03_TCP_HEADER)), None);
    // A name with garbage after its NUL padding is refused, not trusted.
    let mut bad = out.clone();
    bad[100] = b'x';
    assert!(matches!(
        BlabBlockRepr::from_header(&bad),
        Some(Err(WireError::BadValue { .. }))
    ));
}

#[test]
fn bloatlab_flow_id_golden_bytes() {
    // Extension version 3: the same header with an 8-byte flow id after the block.
    let mut r = parse_tcp(&words(W03_TCP_HEADER)).unwrap();
    let ext = BlabExt {
        version: BLOATLAB_EXT_VERSION_FLOW_ID,
        report_interval: None,
    };
    r.core = r.core.with_bloatlab_ext(ext.to_length());
    let mut out = emit_tcp(&r);
    let block = BlabBlockRepr {
        flags: BlabBlockFlags::HELLO,
        notsent_lowat: None,
        congestion: None,
        flow_id: Some(0x0123_4567_89ab_cdef),
    };
    block.append_to(&mut out).unwrap();
    let mut expected = words(W03_TCP_HEADER);
    // LEN field: 112 bytes (0x70 << 1 = 0xe0).
    expected[..4].copy_from_slice(&[0x44, 0x01, 0x00, 0xe0]);
    expected[24..32].copy_from_slice(b"BLAB\x00\x00\x00\x03");
    expected.extend(words(
        "00000001 00000000 00000000 00000000 00000000 00000000 01234567 89abcdef",
    ));
    assert_eq!(out, expected);
    assert_eq!(out.len(), LEN_WITH_FLOW_ID);
    assert_eq!(tcp_header::bytes_needed(&out[..4]), Ok(108));
    assert_eq!(BlabBlockRepr::from_header(&out), Some(Ok(block)));
    // With a permit key the key follows the id (LEN = 114) and the id stays.
    permit_key::append(&mut out, b"abcd1234").unwrap();
    assert_eq!(&out[..4], &[0x54, 0x01, 0x00, 0xe4]);
    assert_eq!(
        BlabBlockRepr::from_header(&out).unwrap().unwrap().flow_id,
        Some(0x0123_4567_89ab_cdef)
    );
}

#[test]
fn flow_query_golden_bytes() {
    use bloatlab_wire::flow_query::*;
    let q = FlowQueryRepr {
        flow_id: 0x0123_4567_89ab_cdef,
        key: None,
    };
    let b = q.to_vec().unwrap();
    assert_eq!(b, hex_bytes("00424c51 00000001 0123456789abcdef 0000"));
    assert_eq!(
        FlowQueryRepr::parse(&FlowQuery::new_unchecked(&b[..])),
        Ok(q)
    );
    for n in 0..QUERY_LEN {
        assert_eq!(query_bytes_needed(&b[..n]), Ok(QUERY_LEN - n), "{n}");
    }
    assert_eq!(query_bytes_needed(&b), Ok(0));
    let keyed = FlowQueryRepr {
        flow_id: 7,
        key: Some(b"abcd1234"),
    };
    let kb = keyed.to_vec().unwrap();
    assert_eq!(
        kb,
        hex_bytes("00424c51 00000001 0000000000000007 0008 6162636431323334")
    );
    assert_eq!(query_bytes_needed(&kb[..18]), Ok(8));
    assert_eq!(
        FlowQueryRepr::parse(&FlowQuery::new_unchecked(&kb[..])),
        Ok(keyed)
    );
    // A key with a NUL inside (found by the wire_flow_reply fuzz target): iperf 2 would
    // refuse it, and it would not emit, so it does not parse either.
    let nul_key = hex_bytes("00424c51 00000001 0000000000000007 0008 0000000000323334");
    assert!(FlowQueryRepr::parse(&FlowQuery::new_unchecked(&nul_key[..])).is_err());
    assert!(matches!(
        FlowQueryRepr::parse(&FlowQuery::new_unchecked(&kb[..20])),
        Err(WireError::Truncated {
            needed: 26,
            got: 20
        })
    ));
    // An iperf 2 header is not a query, from its first byte.
    assert!(matches!(
        query_bytes_needed(&words(W01_TCP_HEADER)[..1]),
        Err(WireError::BadMagic { .. })
    ));
    // Bad key lengths and versions are refused before anything else is read.
    let mut bad = b.clone();
    bad[17] = 3;
    assert!(matches!(
        query_bytes_needed(&bad),
        Err(WireError::BadLength { .. })
    ));
    bad = b.clone();
    bad[7] = 2;
    assert!(matches!(
        query_bytes_needed(&bad[..8]),
        Err(WireError::Unsupported { .. })
    ));
    assert!(
        FlowQueryRepr {
            flow_id: 1,
            key: Some(b"abc")
        }
        .to_vec()
        .is_err()
    );
}

#[test]
fn flow_reply_golden_bytes() {
    use bloatlab_wire::flow_query::*;
    let s = SenderSummary {
        bytes_acked: Bytes(0x1_0000_0002),
        retransmits: 42,
        rtt: Duration::from_micros(80_500),
        rttvar: Duration::from_micros(1_200),
        min_rtt: Some(Duration::from_micros(80_000)),
        cwnd_segments: 10,
        mss: Bytes(1448),
        delivered_ce: Some(3),
        ecn_negotiated: true,
        ecn_seen: true,
    };
    let r = FlowReplyRepr {
        flow_id: 0x0123_4567_89ab_cdef,
        status: FlowStatus::Found,
        summary: Some(s),
    };
    let b = r.to_bytes();
    let expected = hex_bytes(
        "00424c52 00000001 0123456789abcdef 00000000 0000000f 0000000100000002
         0000002a 00013a74 000004b0 00013880 0000000a 000005a8 00000003 00000000",
    );
    assert_eq!(b.to_vec(), expected);
    assert_eq!(
        FlowReplyRepr::parse(&FlowReply::new_unchecked(&b[..])),
        Ok(r)
    );
    assert_truncation(&b, REPLY_LEN, |x| {
        FlowReplyRepr::parse(&FlowReply::new_unchecked(x)).map(|_| ())
    });
    // Not measured stays not measured: no flags, no min RTT, no CE count.
    let bare = FlowReplyRepr {
        summary: Some(SenderSummary {
            min_rtt: None,
            delivered_ce: None,
            ecn_negotiated: false,
            ecn_seen: false,
            ..s
        }),
        ..r
    };
    let bb = bare.to_bytes();
    assert_eq!(&bb[20..24], &[0, 0, 0, 0]);
    assert_eq!(
        FlowReplyRepr::parse(&FlowReply::new_unchecked(&bb[..])),
        Ok(bare)
    );
    // Unknown: no summary, all fields zero.
    let unknown = FlowReplyRepr {
        flow_id: 9,
        status: FlowStatus::Unknown,
        summary: Some(s),
    };
    let ub = unknown.to_bytes();
    assert!(ub[20..].iter().all(|&x| x == 0));
    assert_eq!(
        FlowReplyRepr::parse(&FlowReply::new_unchecked(&ub[..])),
        Ok(FlowReplyRepr {
            summary: None,
            ..unknown
        })
    );
    let mut bad = b;
    bad[19] = 9;
    assert!(matches!(
        FlowReplyRepr::parse(&FlowReply::new_unchecked(&bad[..])),
        Err(WireError::BadValue { .. })
    ));
    bad = b;
    bad[3] = b'Q';
    assert!(matches!(
        FlowReplyRepr::parse(&FlowReply::new_unchecked(&bad[..])),
        Err(WireError::BadMagic { .. })
    ));
}

/// Hex digits (whitespace ignored) to bytes, for captures that do not end on
/// a 32-bit word.
fn hex_bytes(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).expect("hex byte"))
        .collect()
}

#[test]
fn permit_key_header_matches_iperf_capture() {
    for (capture, len, trip_times) in [(PK_TCP_HEADER, 70, false), (PK_TT_TCP_HEADER, 90, true)] {
        let b = hex_bytes(capture);
        assert_eq!(b.len(), len);
        let v = TcpTestHeader::new_checked(&b[..]).unwrap();
        assert_eq!(v.permit_key(), Some(&b"abcd1234"[..]));
        assert_eq!(v.header_len(), len);
        assert_eq!(tcp_header::bytes_needed(&b), Ok(0));
        let r = TcpTestHeaderRepr::parse(&v).unwrap();
        assert_eq!(r.start_fq.is_some(), trip_times);
        assert_eq!(r.core.buf_len, Bytes(1000));
        // Emit the parsed header, append the key: the captured bytes again.
        let mut out = emit_tcp(&r);
        permit_key::append(&mut out, b"abcd1234").unwrap();
        assert_eq!(out, b, "trip_times={trip_times}");
        assert_truncation(&b, len, |p| parse_tcp(p).map(|_| ()));
    }
}

#[test]
fn permit_key_w13_reference_capture_round_trips() {
    let b = words(W13_TCP_HEADER);
    let r = parse_tcp(&b).unwrap();
    let mut out = emit_tcp(&r);
    permit_key::append(&mut out, b"secretkey1").unwrap();
    assert_eq!(out, b);
}

#[test]
fn permit_key_append_refuses_what_iperf_refuses() {
    let r = parse_tcp(&words(W01_TCP_HEADER)).unwrap();
    let mut out = emit_tcp(&r);
    assert!(permit_key::append(&mut out, b"abc").is_err());
    assert!(permit_key::append(&mut out, &[b'k'; 129]).is_err());
    assert_eq!(out.len(), 60, "a refused key leaves the header alone");
    permit_key::append(&mut out, &[b'k'; 128]).unwrap();
    assert_eq!(out.len(), 190);
    let v = TcpTestHeader::new_checked(&out[..]).unwrap();
    assert_eq!(v.permit_key(), Some(&[b'k'; 128][..]));
}
