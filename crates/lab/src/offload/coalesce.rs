//! From released wire packets to TUN writes: consecutive segments of one
//! TCP flow that are released together are written as one super-packet,
//! the way a NIC's GRO hands them up (net/ipv4/tcp_offload.c
//! `tcp_gro_receive` has the rules we follow: same addresses, ports, TOS,
//! TTL, ACK number, window and options; contiguous sequence numbers; all
//! segments full-sized except the last; PSH ends a run; SYN, FIN, RST, URG,
//! ECE and CWR never join). One addition: a CE-marked packet is always
//! written alone, so the receiver's per-packet CE counters
//! (`IpExtInCEPkts`) agree with the emulator's marks exactly; GRO would
//! merge consecutive CE segments. The driver only ever pushes packets that are
//! already due, so coalescing never delays a packet: it only changes how
//! many syscalls (and receive-path passes in the host) carry them.

use super::csum;
use super::{F_NEEDS_CSUM, GSO_TCPV4, VNET_HDR_LEN, VnetHeader};
use bloatlab_wire::inet::{ECN_CE, Ipv4Packet, PROTO_TCP, TcpPacket, ipv4, tcp};
use std::net::Ipv4Addr;

/// Largest IPv4 packet.
const MAX_IP_LEN: usize = 65_535;
/// Most segments in one super-packet (64 KB fills first at MSS 1448).
const MAX_SEGS: usize = 64;
/// Flows with a run open at once (Linux GRO keeps 8 per NAPI bucket).
const MAX_RUNS: usize = 8;

/// SYN, FIN, RST, URG, ECE, CWR.
const TCP_NEVER_JOIN: u8 = tcp::SYN | tcp::FIN | tcp::RST | tcp::URG | tcp::ECE | tcp::CWR;

/// The parts of a packet the joining rules look at.
#[derive(Debug, Clone, Copy)]
struct Segment {
    ihl: usize,
    hl: usize,
    seq: u32,
    psh: bool,
}

impl Segment {
    /// A TCP/IPv4 data segment that may join a run: no IP options or
    /// fragments, not CE-marked, only ACK and PSH set, some payload.
    fn of(p: &[u8]) -> Option<Segment> {
        let ip = Ipv4Packet::new_checked(p).ok()?;
        if ip.version() != 4
            || ip.header_len() != ipv4::MIN_HEADER_LEN
            || ip.protocol() != PROTO_TCP
            || ip.ecn() == ECN_CE
        {
            return None;
        }
        let t = TcpPacket::new_checked(ip.payload()).ok()?;
        let not_fragment = !ip.more_frags() && ip.frag_offset() == 0;
        let hl = ipv4::MIN_HEADER_LEN + t.header_len();
        let flags = t.flags();
        let ok = not_fragment
            && usize::from(ip.total_len()) == p.len()
            && hl < p.len()
            && flags & tcp::ACK != 0
            && flags & TCP_NEVER_JOIN == 0;
        ok.then(|| Segment {
            ihl: ipv4::MIN_HEADER_LEN,
            hl,
            seq: t.seq_number(),
            psh: flags & tcp::PSH != 0,
        })
    }
}

/// One TUN write.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// `virtio_net_hdr` and packet.
    pub bytes: &'a [u8],
    /// Wire packets it carries.
    pub packets: usize,
    /// Their bytes on the wire (each with its own headers).
    pub wire_bytes: usize,
}

/// Addresses and ports: runs of different flows never mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct FlowKey {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    ports: (u16, u16),
}

/// The flow of an IPv4/TCP packet with a valid header length and its
/// ports; other packets are in no flow and are written alone.
fn flow_key(p: &[u8]) -> Option<FlowKey> {
    let ip = Ipv4Packet::new_checked(p).ok()?;
    if ip.version() != 4 || ip.protocol() != PROTO_TCP {
        return None;
    }
    Some(FlowKey {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
        ports: bloatlab_wire::inet::ports(ip.payload())?,
    })
}

/// One flow's frame being built: header room, the first packet, then the
/// payloads that joined it.
#[derive(Debug)]
struct Run {
    key: FlowKey,
    buf: Vec<u8>,
    segs: usize,
    wire_bytes: usize,
    first: Segment,
    mss: usize,
    next_seq: u32,
    /// More segments may still join (the last one was full-sized, no PSH).
    open: bool,
    psh: bool,
}

impl Run {
    fn start(key: FlowKey, mut buf: Vec<u8>, pkt: &[u8], s: Segment) -> Run {
        buf.clear();
        buf.resize(VNET_HDR_LEN, 0);
        buf.extend_from_slice(pkt);
        let mss = pkt.len() - s.hl;
        Run {
            key,
            buf,
            segs: 1,
            wire_bytes: pkt.len(),
            first: s,
            mss,
            next_seq: s.seq.wrapping_add(mss as u32),
            open: !s.psh,
            psh: s.psh,
        }
    }

    fn joins(&self, p: &[u8], s: Segment) -> bool {
        let f = self.first;
        let first = &self.buf[VNET_HDR_LEN..VNET_HDR_LEN + f.hl];
        let payload = p.len() - s.hl;
        if !(self.open
            && s.hl == f.hl
            && s.seq == self.next_seq
            && payload <= self.mss
            && self.segs < MAX_SEGS
            && self.buf.len() - VNET_HDR_LEN + payload <= MAX_IP_LEN)
        {
            return false;
        }
        // Both are segments (Segment::of): IPv4/TCP, no IP options, not
        // fragments, so equal header lengths; addresses and ports are the
        // run's key.
        let (a, b) = (
            Ipv4Packet::new_unchecked(p),
            Ipv4Packet::new_unchecked(first),
        );
        let (ta, tb) = (
            TcpPacket::new_unchecked(a.payload()),
            TcpPacket::new_unchecked(b.payload()),
        );
        // TOS (so ECN codepoints, CE included, match), DF, TTL
        a.dscp_ecn() == b.dscp_ecn()
            && a.flags() == b.flags()
            && a.ttl() == b.ttl()
            // ACK number, reserved bits, window, urgent pointer, options
            && ta.ack_number() == tb.ack_number()
            && ta.reserved() == tb.reserved()
            && ta.window() == tb.window()
            && ta.urgent_ptr() == tb.urgent_ptr()
            && ta.options() == tb.options()
    }

    fn append(&mut self, p: &[u8], s: Segment) {
        let payload = &p[s.hl..];
        self.buf.extend_from_slice(payload);
        self.segs += 1;
        self.wire_bytes += p.len();
        self.next_seq = s.seq.wrapping_add(payload.len() as u32);
        self.psh |= s.psh;
        self.open = payload.len() == self.mss && !s.psh;
    }

    /// Finishes the frame: a lone packet goes out as it came (empty vnet
    /// header, checksums complete); a run becomes one TCPV4 GSO frame.
    fn finish(&mut self) -> Frame<'_> {
        let h = if self.segs == 1 {
            VnetHeader::default()
        } else {
            let s = self.first;
            let total = self.buf.len() - VNET_HDR_LEN;
            let (iph, seg) = self.buf[VNET_HDR_LEN..].split_at_mut(s.ihl);
            let mut ip = Ipv4Packet::new_unchecked(iph);
            ip.set_total_len(total as u16);
            ip.fill_checksum();
            let mut t = TcpPacket::new_unchecked(seg);
            if self.psh {
                t.set_flags(t.flags() | tcp::PSH);
            }
            // CHECKSUM_PARTIAL: the field holds the pseudo-header sum and
            // the receiving stack treats the payload as verified (every
            // segment's checksum was checked or computed when it entered
            // the emulator).
            let partial = csum::fold(ip.pseudo_header_sum(PROTO_TCP, total - s.ihl));
            t.set_checksum(partial);
            VnetHeader {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                hdr_len: s.hl as u16,
                gso_size: self.mss as u16,
                csum_start: s.ihl as u16,
                csum_offset: 16,
            }
        };
        h.write(&mut self.buf);
        Frame {
            bytes: &self.buf,
            packets: self.segs,
            wire_bytes: self.wire_bytes,
        }
    }
}

/// Builds TUN frames (vnet header + packet) from packets pushed in release
/// order, one run per flow like GRO's per-flow lists. Each flow's packets
/// leave in the order they were pushed; packets of different flows may
/// pass each other within one release batch (they are all due already).
/// One per output device.
#[derive(Debug, Default)]
pub struct Coalescer {
    runs: Vec<Run>,
    /// Buffers of finished runs, reused.
    spare: Vec<Vec<u8>>,
}

impl Coalescer {
    /// An empty coalescer.
    pub fn new() -> Coalescer {
        Coalescer::default()
    }

    /// Adds `pkt` (a wire packet). Finished frames go to `emit`.
    pub fn push(&mut self, pkt: &[u8], emit: &mut impl FnMut(Frame<'_>)) {
        let key = flow_key(pkt);
        let at = key.and_then(|k| self.runs.iter().position(|r| r.key == k));
        let seg = Segment::of(pkt);
        if let (Some(i), Some(s)) = (at, seg)
            && self.runs[i].joins(pkt, s)
        {
            self.runs[i].append(pkt, s);
            return;
        }
        if let Some(i) = at {
            self.finish(i, emit);
        }
        match (key, seg) {
            (Some(k), Some(s)) => {
                if self.runs.len() == MAX_RUNS {
                    self.finish(0, emit);
                }
                let buf = self.spare.pop().unwrap_or_default();
                self.runs.push(Run::start(k, buf, pkt, s));
            }
            _ => {
                let mut buf = self.spare.pop().unwrap_or_default();
                buf.clear();
                buf.resize(VNET_HDR_LEN, 0);
                buf.extend_from_slice(pkt);
                emit(Frame {
                    bytes: &buf,
                    packets: 1,
                    wire_bytes: pkt.len(),
                });
                self.spare.push(buf);
            }
        }
    }

    /// Writes out every frame being built.
    pub fn flush(&mut self, emit: &mut impl FnMut(Frame<'_>)) {
        while !self.runs.is_empty() {
            self.finish(0, emit);
        }
    }

    fn finish(&mut self, i: usize, emit: &mut impl FnMut(Frame<'_>)) {
        let mut run = self.runs.remove(i);
        emit(run.finish());
        self.spare.push(run.buf);
    }
}

#[cfg(test)]
mod tests {
    use super::super::split;
    use super::super::testpkt::{self, ACK, CWR, FIN, PSH};
    use super::*;

    fn frames(pkts: &[Vec<u8>]) -> Vec<(Vec<u8>, usize)> {
        let mut c = Coalescer::new();
        let mut out = Vec::new();
        let mut emit = |f: Frame<'_>| {
            assert_eq!(
                f.wire_bytes,
                f.packets * 52 + f.bytes.len() - VNET_HDR_LEN - 52
            );
            out.push((f.bytes.to_vec(), f.packets))
        };
        for p in pkts {
            c.push(p, &mut emit);
        }
        c.flush(&mut emit);
        out
    }

    fn resplit(frames: &[(Vec<u8>, usize)]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for (f, n) in frames {
            assert_eq!(split(f, &mut |p| out.push(p)).unwrap(), *n);
        }
        out
    }

    /// `n` back-to-back segments of `mss` from `seq`, the last `last` long.
    fn run(seq: u32, id: u16, n: usize, mss: usize, last: usize) -> Vec<Vec<u8>> {
        let mut off = 0;
        (0..n)
            .map(|i| {
                let len = if i + 1 == n { last } else { mss };
                let p = testpkt::tcp(
                    seq + off as u32,
                    ACK,
                    id + i as u16,
                    &testpkt::payload(len, off),
                );
                off += len;
                p
            })
            .collect()
    }

    #[test]
    fn back_to_back_segments_become_one_gso_frame() {
        let segs = run(1000, 7, 4, 1448, 600);
        let out = frames(&segs);
        assert_eq!(out.len(), 1);
        let (f, n) = &out[0];
        assert_eq!(*n, 4);
        let h = VnetHeader::parse(f).unwrap();
        assert_eq!(
            h,
            VnetHeader {
                flags: F_NEEDS_CSUM,
                gso_type: GSO_TCPV4,
                hdr_len: 52,
                gso_size: 1448,
                csum_start: 20,
                csum_offset: 16,
            }
        );
        let ip = &f[VNET_HDR_LEN..];
        assert_eq!(ip.len(), 52 + 3 * 1448 + 600);
        assert_eq!(usize::from(u16::from_be_bytes([ip[2], ip[3]])), ip.len());
        assert_eq!(csum::fold(csum::add(0, &ip[..20])), 0xffff);
        let partial = csum::fold(csum::pseudo_v4(ip, 6, ip.len() - 20));
        assert_eq!(&ip[36..38], &partial.to_be_bytes());
        // Cutting it again the way the kernel would gives back the exact
        // segments, checksums included.
        assert_eq!(resplit(&out), segs);
    }

    #[test]
    fn a_lone_packet_goes_out_unchanged_with_an_empty_header() {
        let ack = testpkt::tcp(1, ACK, 1, &[]);
        let data = testpkt::tcp(1, ACK, 1, &[1, 2, 3]);
        let out = frames(std::slice::from_ref(&ack));
        assert_eq!(out.len(), 1);
        assert_eq!(&out[0].0[..VNET_HDR_LEN], &[0; VNET_HDR_LEN]);
        assert_eq!(&out[0].0[VNET_HDR_LEN..], &ack[..]);
        let out = frames(std::slice::from_ref(&data));
        assert_eq!(&out[0].0[VNET_HDR_LEN..], &data[..]);
        assert_eq!(out[0].1, 1);
    }

    #[test]
    fn runs_break_where_gro_would_break_them() {
        let mut gap = run(1000, 0, 2, 1448, 1448);
        gap.extend(run(1000 + 3 * 1448, 2, 2, 1448, 1448));
        assert_eq!(frames(&gap).iter().map(|f| f.1).collect::<Vec<_>>(), [2, 2]);

        // A short segment ends a run; the next full one starts another.
        let mut short = run(0, 0, 2, 1448, 1000);
        short.extend(run(2448, 2, 2, 1448, 1448));
        assert_eq!(
            frames(&short).iter().map(|f| f.1).collect::<Vec<_>>(),
            [2, 2]
        );

        // PSH joins and ends a run.
        let mut psh = run(0, 0, 3, 1448, 1448);
        psh[1][33] |= PSH;
        psh[1] = refresh(&psh[1]);
        let out = frames(&psh);
        assert_eq!(out.iter().map(|f| f.1).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(resplit(&out), psh);

        // CE-marked segments are written alone, even next to each other.
        let mut ce = run(0, 0, 3, 1448, 1448);
        for p in &mut ce {
            p[1] |= 0x03;
            *p = refresh(p);
        }
        let out = frames(&ce);
        assert_eq!(out.iter().map(|f| f.1).collect::<Vec<_>>(), [1, 1, 1]);
        assert_eq!(resplit(&out), ce);

        // CWR, FIN, a CE mark, another window: never joined.
        for (at, bits) in [(33, CWR), (33, FIN), (1, 0x03), (35, 0x01)] {
            let mut r = run(0, 0, 3, 1448, 1448);
            r[1][at] |= bits;
            r[1] = refresh(&r[1]);
            let out = frames(&r);
            assert_eq!(
                out.iter().map(|f| f.1).collect::<Vec<_>>(),
                [1, 1, 1],
                "byte {at} |= {bits:#x}"
            );
            assert_eq!(resplit(&out), r);
        }
    }

    #[test]
    fn other_flows_may_pass_but_each_flow_keeps_its_order() {
        let a = run(0, 0, 3, 1448, 1448);
        let b = other_flow(&testpkt::tcp(0, ACK, 0, &[9; 100]));
        let a_fin = refresh(&{
            let mut p = testpkt::tcp(3 * 1448, ACK, 3, &[]);
            p[33] |= FIN;
            p
        });
        let pkts = vec![
            a[0].clone(),
            a[1].clone(),
            b.clone(),
            a[2].clone(),
            a_fin.clone(),
        ];
        let out = frames(&pkts);
        // b starts a run of its own; a's FIN ends a's run and follows it.
        assert_eq!(out.iter().map(|f| f.1).collect::<Vec<_>>(), [3, 1, 1]);
        assert_eq!(
            resplit(&out),
            vec![a[0].clone(), a[1].clone(), a[2].clone(), a_fin, b]
        );
    }

    #[test]
    fn interleaved_flows_are_coalesced_like_gro() {
        // Round robin over 9 flows (one more than MAX_RUNS): runs still
        // form for up to 8, the 9th evicts the oldest.
        let flows: Vec<Vec<Vec<u8>>> = (0..9u8)
            .map(|f| {
                run(0, 0, 4, 1448, 1448)
                    .iter()
                    .map(|p| port(p, f))
                    .collect()
            })
            .collect();
        let mut pkts = Vec::new();
        for i in 0..4 {
            for f in &flows[..4] {
                pkts.push(f[i].clone());
            }
        }
        let out = frames(&pkts);
        assert_eq!(out.iter().map(|f| f.1).collect::<Vec<_>>(), [4, 4, 4, 4]);
        assert_eq!(per_flow(&resplit(&out)), per_flow(&pkts));
        let mut nine = Vec::new();
        for i in 0..2 {
            for f in &flows {
                nine.push(f[i].clone());
            }
        }
        let out = frames(&nine);
        assert_eq!(out.iter().map(|f| f.1).sum::<usize>(), 18);
        assert_eq!(per_flow(&resplit(&out)), per_flow(&nine));
    }

    #[test]
    fn a_frame_never_exceeds_64_kb() {
        let segs = run(0, 0, 100, 1448, 1448);
        let out = frames(&segs);
        assert!(
            out.iter()
                .all(|(f, _)| f.len() - VNET_HDR_LEN <= MAX_IP_LEN)
        );
        assert_eq!(out.iter().map(|f| f.1).sum::<usize>(), 100);
        assert_eq!(out[0].1, (MAX_IP_LEN - 52) / 1448);
        assert_eq!(resplit(&out), segs);
    }

    #[test]
    fn any_mix_of_packets_survives_coalescing_and_splitting() {
        // Two flows, random sizes, gaps and flags, a deterministic LCG.
        let mut x = 12345u64;
        let mut rnd = |m: u64| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (x >> 33) % m
        };
        let mut seq = [0u32; 2];
        let mut id = [0u16; 2];
        let mut pkts = Vec::new();
        for _ in 0..2000 {
            let f = rnd(2) as usize;
            let len = [1448, 1448, 1448, 700, 0][rnd(5) as usize];
            let mut flags = ACK;
            if rnd(20) == 0 {
                flags |= PSH;
            }
            if rnd(50) == 0 {
                seq[f] = seq[f].wrapping_add(1448); // a loss upstream
            }
            let p = port(
                &testpkt::tcp(
                    seq[f],
                    flags,
                    id[f],
                    &testpkt::payload(len, seq[f] as usize),
                ),
                f as u8,
            );
            seq[f] = seq[f].wrapping_add(len as u32);
            id[f] = id[f].wrapping_add(1);
            pkts.push(p);
        }
        let out = frames(&pkts);
        // 40 % of the packets are short or empty, so runs are short.
        assert!(out.len() < pkts.len() * 3 / 5, "{} frames", out.len());
        assert_eq!(per_flow(&resplit(&out)), per_flow(&pkts));
    }

    /// The packet with source port 40000 + `f`.
    fn port(p: &[u8], f: u8) -> Vec<u8> {
        let mut p = p.to_vec();
        p[21] = p[21].wrapping_add(f);
        refresh(&p)
    }

    fn other_flow(p: &[u8]) -> Vec<u8> {
        port(p, 100)
    }

    /// Packets grouped by flow, in order within each flow.
    fn per_flow(pkts: &[Vec<u8>]) -> std::collections::BTreeMap<FlowKey, Vec<Vec<u8>>> {
        let mut m = std::collections::BTreeMap::<_, Vec<_>>::new();
        for p in pkts {
            m.entry(flow_key(p).unwrap()).or_default().push(p.clone());
        }
        m
    }

    /// Recomputes both checksums after a test edited a packet.
    fn refresh(p: &[u8]) -> Vec<u8> {
        let mut p = p.to_vec();
        csum::fix_ipv4_header(&mut p[..20]);
        p[36..38].fill(0);
        let c = !csum::fold(csum::add(csum::pseudo_v4(&p, 6, p.len() - 20), &p[20..]));
        p[36..38].copy_from_slice(&c.to_be_bytes());
        p
    }
}
