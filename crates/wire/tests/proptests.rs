//! Property tests: no parser panics on arbitrary bytes, and emit -> parse
//! gives back the same `Repr` for every format.

use bloatlab_units::{BitRate, Bytes};
use bloatlab_wire::*;
use proptest::prelude::*;
use std::time::Duration;

fn wall() -> impl Strategy<Value = WallTime> {
    (any::<u32>(), 0u32..1_000_000).prop_map(|(sec, usec)| WallTime { sec, usec })
}

fn split() -> impl Strategy<Value = SplitDouble> {
    (any::<i32>(), any::<i32>()).prop_map(|(int, frac_e6)| SplitDouble { int, frac_e6 })
}

fn core(excluded_flags: u32) -> impl Strategy<Value = ClientHeaderRepr> {
    let layout = HeaderFlags::LEN_BIT.bits() | HeaderFlags::LEN_MASK | HeaderFlags::KEYCHECK.bits();
    (
        (
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
        ),
        prop_oneof![
            (1u64..=1 << 31).prop_map(|cs| Amount::Time(Duration::from_millis(cs * 10))),
            (0u64..=0x7FFF_FFFF).prop_map(|b| Amount::Bytes(Bytes(b))),
        ],
        (any::<u32>(), any::<u32>(), any::<u16>(), any::<u16>()),
        (any::<u32>(), any::<u32>(), any::<u16>()),
        prop_oneof![
            (0u64..1 << 56).prop_map(|r| Rate::Bits(BitRate(r))),
            (0u64..1 << 56).prop_map(Rate::PacketsPerSec),
        ],
        any::<u32>(),
    )
        .prop_map(
            move |(
                (flags, nt, port, bl, wb),
                amount,
                (et, el, up, low),
                (vu, vl, tos),
                rate,
                wp,
            )| {
                ClientHeaderRepr {
                    flags: HeaderFlags(flags & !layout & !excluded_flags),
                    num_threads: nt,
                    port,
                    buf_len: Bytes(u64::from(bl)),
                    win_band: wb,
                    amount,
                    ext_type: et,
                    ext_length: el,
                    upper_flags: UpperFlags(up).without(UpperFlags::UNITS_PPS),
                    lower_flags: low,
                    version: PeerVersion::from_words(vu, vl),
                    tos,
                    rate,
                    write_prefetch: Bytes(u64::from(wp)),
                }
            },
        )
}

fn start_fq() -> impl Strategy<Value = StartFqRepr> {
    (wall(), any::<u64>()).prop_map(|(start, fq)| StartFqRepr {
        start,
        fq_rate_bytes_per_sec: fq,
    })
}

fn isoch_settings() -> impl Strategy<Value = IsochSettingsRepr> {
    (split(), split(), split(), split()).prop_map(|(fps, mean, variance, burst_ipg)| {
        IsochSettingsRepr {
            fps,
            mean,
            variance,
            burst_ipg,
        }
    })
}

/// (start_fq, isoch_settings) where settings imply a start block.
fn tails() -> impl Strategy<Value = (Option<StartFqRepr>, Option<IsochSettingsRepr>)> {
    prop_oneof![
        Just((None, None)),
        start_fq().prop_map(|s| (Some(s), None)),
        (start_fq(), isoch_settings()).prop_map(|(s, i)| (Some(s), Some(i))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn no_parser_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), flags in any::<u32>()) {
        let b = &bytes[..];
        let _ = header_len_from_flags(flags);
        let _ = tcp_header::bytes_needed(b);
        let _ = ack::bytes_needed(b);
        let _ = report_frame_bytes_needed(b);
        let _ = TcpTestHeaderRepr::parse(&TcpTestHeader::new_unchecked(b));
        let v = TcpTestHeader::new_unchecked(b);
        let _ = (v.header_len(), v.permit_key(), v.start_fq(), v.isoch_settings(), v.core().rate());
        let _ = ClientHeaderRepr::parse(&ClientHeader::new_unchecked(b));
        let _ = ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(b));
        let _ = TcpBurstRepr::parse(&TcpBurstHeader::new_unchecked(b));
        let _ = UdpDatagramRepr::parse(&UdpDatagram::new_unchecked(b));
        let u = UdpDatagram::new_unchecked(b);
        let _ = (u.seqno(), u.is_fin(), u.isoch(), u.start_fq(), u.isoch_settings());
        if let Ok(s) = ServerReportRepr::parse(&AckFin::new_unchecked(b)) {
            let _ = s.ext.map(|e| e.transit_stdev());
            let _ = s.jitter.to_duration();
        }
        let _ = ReportFrameRepr::parse(&ReportFrame::new_unchecked(b));
        let _ = ReportFrame::new_unchecked(b).payload();
        // Emitting into a too-short buffer truncates instead of panicking.
        let mut small = bytes.clone();
        let r = TcpTestHeaderRepr { core: ClientHeaderRepr::new(Amount::Bytes(Bytes(1))), start_fq: None, isoch_settings: None };
        r.emit(&mut TcpTestHeader::new_unchecked(&mut small[..]));
    }

    #[test]
    fn tcp_header_round_trips(core in core(HeaderFlags::BOUNCEBACK.bits()), (s, i) in tails()) {
        let r = TcpTestHeaderRepr { core, start_fq: s, isoch_settings: i };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut TcpTestHeader::new_unchecked(&mut buf[..]));
        prop_assert_eq!(tcp_header::bytes_needed(&buf), Ok(0));
        prop_assert_eq!(header_len_from_flags(u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]])), Ok(buf.len()));
        let back = TcpTestHeaderRepr::parse(&TcpTestHeader::new_checked(&buf[..]).unwrap()).unwrap();
        prop_assert_eq!(back, r);
    }

    #[test]
    fn udp_datagram_round_trips(
        core in core(HeaderFlags::UDPTESTS.bits()),
        seq in any::<i64>(),
        ts in wall(),
        has_header in any::<bool>(),
        tests in proptest::option::of((
            (0u64..=u64::from(u32::MAX), wall(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
            tails(),
        )),
    ) {
        let header = has_header.then(|| UdpHeaderRepr {
            core,
            tests: tests.map(|((period, start, prev, frame, size, rem), (s, i))| UdpTestsRepr {
                isoch: IsochPayloadRepr {
                    burst_period: Duration::from_micros(period),
                    start,
                    prev_frame_id: prev,
                    frame_id: frame,
                    burst_size: Bytes(u64::from(size)),
                    remaining: Bytes(u64::from(rem)),
                },
                start_fq: s,
                isoch_settings: i,
            }),
        });
        // Without SEQNO64B only the low 32 bits are meaningful.
        let seqno = match &header {
            Some(h) if !h.core.flags.contains(HeaderFlags::SEQNO64B) => i64::from(seq as i32),
            _ => seq,
        };
        let r = UdpDatagramRepr { seqno, timestamp: ts, header };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut UdpDatagram::new_unchecked(&mut buf[..]));
        let back = UdpDatagramRepr::parse(&UdpDatagram::new_checked(&buf[..]).unwrap()).unwrap();
        prop_assert_eq!(back, r);
        prop_assert_eq!(back.is_fin(), seqno < 0);
    }

    #[test]
    fn ack_round_trips(flags in any::<u32>(), vu in any::<u32>(), vl in any::<u32>(),
                       times in proptest::option::of((wall(), wall(), wall()))) {
        let r = ClientHdrAckRepr {
            flags,
            version: PeerVersion::from_words(vu, vl),
            times: times.map(|(sent, sent_rx, ack)| AckTimes { sent, sent_rx, ack }),
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut ClientHdrAck::new_unchecked(&mut buf[..]));
        prop_assert_eq!(ack::bytes_needed(&buf), Ok(0));
        prop_assert_eq!(ClientHdrAckRepr::parse(&ClientHdrAck::new_unchecked(&buf[..])), Ok(r));
    }

    #[test]
    fn burst_round_trips(start in wall(), write in wall(), id in any::<u32>(), size in any::<u32>(), seq in any::<u64>()) {
        let r = TcpBurstRepr { start_time: start, write_time: write, burst_id: id, burst_size: Bytes(u64::from(size)), seqno: seq };
        let mut buf = vec![0x5Au8; r.buffer_len()];
        r.emit(&mut TcpBurstHeader::new_unchecked(&mut buf[..]));
        prop_assert_eq!(TcpBurstRepr::parse(&TcpBurstHeader::new_unchecked(&buf[..])), Ok(r));
    }

    #[test]
    fn server_report_round_trips(
        flags in any::<u32>(),
        bytes in any::<u64>(),
        (secs, micros) in (any::<u32>(), 0u32..1_000_000),
        counts in (any::<i64>(), any::<i64>(), any::<i64>()),
        jitter in split(),
        ext in proptest::option::of((split(), split(), split(), split(), split(), split(), any::<i32>(), any::<i32>(), any::<i32>())),
    ) {
        let mut flags = flags & !ServerFlags::EXTEND;
        if ext.is_some() { flags |= ServerFlags::EXTEND; }
        let wide = flags & ServerFlags::SEQNO64B != 0;
        let narrow = |v: i64| if wide { v } else { i64::from(v as i32) };
        let r = ServerReportRepr {
            flags: ServerFlags(flags),
            total_bytes: Bytes(bytes),
            duration: Duration::from_secs(u64::from(secs)) + Duration::from_micros(u64::from(micros)),
            lost: narrow(counts.0),
            out_of_order: narrow(counts.1),
            datagrams: narrow(counts.2),
            jitter,
            ext: ext.map(|(a, b, c, d, e, f, g, h, i)| ServerReportExt {
                min_transit: a, max_transit: b, sum_transit: c, mean_transit: d, m2_transit: e,
                vd_transit: f, cnt_transit: g, cnt_ipg: h, ipg_sum: i,
            }),
        };
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut AckFin::new_unchecked(&mut buf[..]));
        prop_assert_eq!(ServerReportRepr::parse(&AckFin::new_unchecked(&buf[..])), Ok(r));
    }

    #[test]
    fn report_frame_round_trips(payload in ".{0,400}", version in any::<u32>()) {
        let r = ReportFrameRepr { version, payload: &payload };
        let buf = r.to_vec();
        prop_assert_eq!(report_frame_bytes_needed(&buf), Ok(0));
        prop_assert_eq!(ReportFrameRepr::parse(&ReportFrame::new_unchecked(&buf[..])), Ok(r));
    }

    #[test]
    fn split_double_f64_round_trip_is_close(v in -2.0e9f64..2.0e9) {
        let s = SplitDouble::from_f64(v);
        // Truncation loses < 1 us; float spacing at |v| adds a few ulps.
        let tol = 1e-6 + v.abs() * f64::EPSILON * 8.0;
        prop_assert!((s.to_f64() - v).abs() <= tol, "{} -> {:?}", v, s);
    }
}
