//! rtnetlink message building and zero-copy parsing (rtnetlink(7), netlink(7)).
//!
//! Layout (all host-endian): a 16-byte `nlmsghdr` (len u32, type u16,
//! flags u16, seq u32, pid u32), a fixed family header (`ifinfomsg`,
//! `ifaddrmsg`, `tcmsg`), then attributes: `rtattr` (len u16, type u16,
//! payload) each padded to 4 bytes. Parsing never panics on short input.

/// `NLMSG_ERROR`: an error or (with code 0) an acknowledgement.
pub const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`: end of a multipart dump.
pub const NLMSG_DONE: u16 = 3;

pub const NLM_F_REQUEST: u16 = 0x1;
pub const NLM_F_ACK: u16 = 0x4;
pub const NLM_F_EXCL: u16 = 0x200;
pub const NLM_F_CREATE: u16 = 0x400;
pub const NLM_F_DUMP: u16 = 0x300;

pub const RTM_NEWLINK: u16 = 16;
pub const RTM_GETLINK: u16 = 18;
pub const RTM_NEWADDR: u16 = 20;
pub const RTM_NEWQDISC: u16 = 36;
pub const RTM_NEWTCLASS: u16 = 40;

pub const IFLA_IFNAME: u16 = 3;
pub const IFLA_MTU: u16 = 4;
pub const IFLA_MASTER: u16 = 10;
pub const IFLA_TXQLEN: u16 = 13;
pub const IFLA_LINKINFO: u16 = 18;
pub const IFLA_STATS64: u16 = 23;
pub const IFLA_NET_NS_FD: u16 = 28;
pub const IFLA_INFO_KIND: u16 = 1;
pub const IFLA_INFO_DATA: u16 = 2;
pub const VETH_INFO_PEER: u16 = 1;

pub const IFA_ADDRESS: u16 = 1;
pub const IFA_LOCAL: u16 = 2;

pub const TCA_KIND: u16 = 1;
pub const TCA_OPTIONS: u16 = 2;

const NLA_TYPE_MASK: u16 = 0x3fff;
const HDR: usize = 16;

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// Builds one netlink request.
#[derive(Debug)]
pub struct MsgBuilder {
    buf: Vec<u8>,
    nests: Vec<usize>,
}

impl MsgBuilder {
    /// A message of type `ty`; `NLM_F_REQUEST | NLM_F_ACK` are always added.
    pub fn new(ty: u16, flags: u16) -> MsgBuilder {
        let mut buf = vec![0u8; HDR];
        buf[4..6].copy_from_slice(&ty.to_ne_bytes());
        buf[6..8].copy_from_slice(&(flags | NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
        MsgBuilder {
            buf,
            nests: Vec::new(),
        }
    }

    /// Appends the fixed family header (e.g. an `ifinfomsg`).
    pub fn fixed(mut self, bytes: &[u8]) -> MsgBuilder {
        self.push_padded(bytes);
        self
    }

    fn push_padded(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        self.buf.resize(align4(self.buf.len()), 0);
    }

    /// Appends an attribute.
    pub fn attr(&mut self, ty: u16, payload: &[u8]) -> &mut MsgBuilder {
        let len = u16::try_from(4 + payload.len()).unwrap_or(u16::MAX);
        self.buf.extend_from_slice(&len.to_ne_bytes());
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self.push_padded(payload);
        self
    }

    /// Appends a `u32` attribute.
    pub fn attr_u32(&mut self, ty: u16, v: u32) -> &mut MsgBuilder {
        self.attr(ty, &v.to_ne_bytes())
    }

    /// Appends a NUL-terminated string attribute.
    pub fn attr_str(&mut self, ty: u16, s: &str) -> &mut MsgBuilder {
        let mut b = s.as_bytes().to_vec();
        b.push(0);
        self.attr(ty, &b)
    }

    /// Opens a nested attribute; close it with [`MsgBuilder::end_nest`].
    pub fn begin_nest(&mut self, ty: u16) -> &mut MsgBuilder {
        self.nests.push(self.buf.len());
        self.buf.extend_from_slice(&[0, 0]);
        self.buf.extend_from_slice(&ty.to_ne_bytes());
        self
    }

    /// Appends raw bytes inside the current nest (e.g. the peer's
    /// `ifinfomsg` inside `VETH_INFO_PEER`).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut MsgBuilder {
        self.push_padded(bytes);
        self
    }

    /// Closes the innermost nested attribute.
    pub fn end_nest(&mut self) -> &mut MsgBuilder {
        if let Some(start) = self.nests.pop() {
            let len = u16::try_from(self.buf.len() - start).unwrap_or(u16::MAX);
            self.buf[start..start + 2].copy_from_slice(&len.to_ne_bytes());
        }
        self
    }

    /// The finished message with its length and sequence number.
    pub fn finish(mut self, seq: u32) -> Vec<u8> {
        while !self.nests.is_empty() {
            self.end_nest();
        }
        let len = u32::try_from(self.buf.len()).unwrap_or(u32::MAX);
        self.buf[0..4].copy_from_slice(&len.to_ne_bytes());
        self.buf[8..12].copy_from_slice(&seq.to_ne_bytes());
        self.buf
    }
}

/// `struct ifinfomsg` (16 bytes).
pub fn ifinfomsg(index: i32, flags: u32, change: u32) -> [u8; 16] {
    let mut b = [0u8; 16];
    // family AF_UNSPEC (0), pad, type 0
    b[4..8].copy_from_slice(&index.to_ne_bytes());
    b[8..12].copy_from_slice(&flags.to_ne_bytes());
    b[12..16].copy_from_slice(&change.to_ne_bytes());
    b
}

/// `struct ifaddrmsg` (8 bytes) for IPv4.
pub fn ifaddrmsg_v4(index: u32, prefix_len: u8) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = libc::AF_INET as u8;
    b[1] = prefix_len;
    b[4..8].copy_from_slice(&index.to_ne_bytes());
    b
}

/// `struct ifaddrmsg` (8 bytes) for IPv6 with `IFA_F_NODAD`: the lab's
/// addresses are unique by construction, and duplicate address detection
/// would keep them unusable ("tentative") for a second or more.
pub fn ifaddrmsg_v6(index: u32, prefix_len: u8) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[0] = libc::AF_INET6 as u8;
    b[1] = prefix_len;
    b[2] = IFA_F_NODAD;
    b[4..8].copy_from_slice(&index.to_ne_bytes());
    b
}

/// `IFA_F_NODAD` (linux/if_addr.h).
pub const IFA_F_NODAD: u8 = 0x02;

/// `struct tcmsg` (20 bytes).
pub fn tcmsg(ifindex: i32, handle: u32, parent: u32) -> [u8; 20] {
    let mut b = [0u8; 20];
    b[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    b[8..12].copy_from_slice(&handle.to_ne_bytes());
    b[12..16].copy_from_slice(&parent.to_ne_bytes());
    b
}

/// One received netlink message (a view into the receive buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub ty: u16,
    pub flags: u16,
    pub seq: u32,
    /// Everything after the 16-byte header.
    pub payload: &'a [u8],
}

impl Message<'_> {
    /// For `NLMSG_ERROR`: the (negative) errno, 0 for an acknowledgement.
    pub fn error_code(&self) -> Option<i32> {
        if self.ty != NLMSG_ERROR {
            return None;
        }
        let b = self.payload.get(0..4)?;
        Some(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// Iterates over the messages of one `recv` buffer; stops at the first
/// malformed length instead of panicking.
#[derive(Debug)]
pub struct Messages<'a> {
    rest: &'a [u8],
}

impl<'a> Messages<'a> {
    pub fn new(buf: &'a [u8]) -> Messages<'a> {
        Messages { rest: buf }
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;
    fn next(&mut self) -> Option<Message<'a>> {
        let h = self.rest.get(0..HDR)?;
        let len = u32::from_ne_bytes([h[0], h[1], h[2], h[3]]) as usize;
        if len < HDR || len > self.rest.len() {
            self.rest = &[];
            return None;
        }
        let msg = Message {
            ty: u16::from_ne_bytes([h[4], h[5]]),
            flags: u16::from_ne_bytes([h[6], h[7]]),
            seq: u32::from_ne_bytes([h[8], h[9], h[10], h[11]]),
            payload: &self.rest[HDR..len],
        };
        self.rest = self.rest.get(align4(len)..).unwrap_or(&[]);
        Some(msg)
    }
}

/// Iterates over attributes `(type, payload)`; stops at a malformed one.
#[derive(Debug)]
pub struct Attrs<'a> {
    rest: &'a [u8],
}

impl<'a> Attrs<'a> {
    pub fn new(buf: &'a [u8]) -> Attrs<'a> {
        Attrs { rest: buf }
    }
}

impl<'a> Iterator for Attrs<'a> {
    type Item = (u16, &'a [u8]);
    fn next(&mut self) -> Option<(u16, &'a [u8])> {
        let h = self.rest.get(0..4)?;
        let len = u16::from_ne_bytes([h[0], h[1]]) as usize;
        if len < 4 || len > self.rest.len() {
            self.rest = &[];
            return None;
        }
        let ty = u16::from_ne_bytes([h[2], h[3]]) & NLA_TYPE_MASK;
        let payload = &self.rest[4..len];
        self.rest = self.rest.get(align4(len)..).unwrap_or(&[]);
        Some((ty, payload))
    }
}

/// Reads the little set of `rtnl_link_stats64` counters the lab reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LinkStats {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    /// Packets the kernel dropped on the way out of the device; for a TUN
    /// these are drops in its ring when the emulator reads too slowly.
    pub tx_dropped: u64,
}

impl LinkStats {
    /// Parses the `IFLA_STATS64` payload (a `struct rtnl_link_stats64`).
    pub fn parse(b: &[u8]) -> Option<LinkStats> {
        let field = |i: usize| -> Option<u64> {
            let s = b.get(i * 8..i * 8 + 8)?;
            let mut a = [0u8; 8];
            a.copy_from_slice(s);
            Some(u64::from_ne_bytes(a))
        };
        Some(LinkStats {
            rx_packets: field(0)?,
            tx_packets: field(1)?,
            rx_bytes: field(2)?,
            tx_bytes: field(3)?,
            rx_dropped: field(6)?,
            tx_dropped: field(7)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_address_header_matches_golden_bytes() {
        // struct ifaddrmsg { family AF_INET6 = 10, prefixlen 64,
        // flags IFA_F_NODAD = 2, scope 0, index 7 } (rtnetlink(7)).
        let mut want = vec![10, 64, 2, 0];
        want.extend_from_slice(&7u32.to_ne_bytes());
        assert_eq!(ifaddrmsg_v6(7, 64).to_vec(), want);
    }

    #[test]
    fn link_up_message_matches_golden_bytes() {
        // What `ip link set dev <index 7> up mtu 1500` sends (seq 1), checked
        // against the layout in rtnetlink(7).
        let mut m = MsgBuilder::new(RTM_NEWLINK, 0).fixed(&ifinfomsg(7, 1, 1));
        m.attr_u32(IFLA_MTU, 1500);
        let b = m.finish(1);
        let mut want = Vec::new();
        want.extend_from_slice(&40u32.to_ne_bytes()); // len
        want.extend_from_slice(&16u16.to_ne_bytes()); // RTM_NEWLINK
        want.extend_from_slice(&5u16.to_ne_bytes()); // REQUEST|ACK
        want.extend_from_slice(&1u32.to_ne_bytes()); // seq
        want.extend_from_slice(&0u32.to_ne_bytes()); // pid
        want.extend_from_slice(&[0, 0, 0, 0]); // family, pad, type
        want.extend_from_slice(&7i32.to_ne_bytes());
        want.extend_from_slice(&1u32.to_ne_bytes());
        want.extend_from_slice(&1u32.to_ne_bytes());
        want.extend_from_slice(&8u16.to_ne_bytes());
        want.extend_from_slice(&4u16.to_ne_bytes()); // IFLA_MTU
        want.extend_from_slice(&1500u32.to_ne_bytes());
        assert_eq!(b, want);
    }

    #[test]
    fn nested_attributes_get_their_length_and_padding() {
        let mut m = MsgBuilder::new(RTM_NEWLINK, NLM_F_CREATE).fixed(&ifinfomsg(0, 0, 0));
        m.attr_str(IFLA_IFNAME, "ab"); // 4 + 3 -> padded to 8
        m.begin_nest(IFLA_LINKINFO);
        m.attr_str(IFLA_INFO_KIND, "veth"); // 4 + 5 -> 12
        m.end_nest();
        let b = m.finish(9);
        assert_eq!(b.len(), 16 + 16 + 8 + 4 + 12);
        let attrs: Vec<_> = Attrs::new(&b[32..]).collect();
        assert_eq!(attrs[0], (IFLA_IFNAME, &b"ab\0"[..]));
        assert_eq!(attrs[1].0, IFLA_LINKINFO);
        let inner: Vec<_> = Attrs::new(attrs[1].1).collect();
        assert_eq!(inner, vec![(IFLA_INFO_KIND, &b"veth\0"[..])]);
    }

    #[test]
    fn parsers_stop_on_truncated_input_without_panicking() {
        let mut m = MsgBuilder::new(RTM_NEWLINK, 0).fixed(&ifinfomsg(1, 0, 0));
        m.attr_u32(IFLA_MTU, 9000);
        let b = m.finish(3);
        for cut in 0..b.len() {
            let msgs: Vec<_> = Messages::new(&b[..cut]).collect();
            assert!(msgs.is_empty(), "cut {cut}");
            let _ = Attrs::new(&b[..cut]).count();
        }
        let msgs: Vec<_> = Messages::new(&b).collect();
        assert_eq!(msgs.len(), 1);
        assert_eq!(msgs[0].seq, 3);
        assert_eq!(msgs[0].error_code(), None);
        // A length field smaller than the header ends iteration.
        let mut bad = b.clone();
        bad[0..4].copy_from_slice(&3u32.to_ne_bytes());
        assert_eq!(Messages::new(&bad).count(), 0);
        assert_eq!(LinkStats::parse(&[0u8; 63]), None);
    }

    #[test]
    fn error_message_reports_errno() {
        let mut b = vec![0u8; 16 + 4];
        b[0..4].copy_from_slice(&20u32.to_ne_bytes());
        b[4..6].copy_from_slice(&NLMSG_ERROR.to_ne_bytes());
        b[16..20].copy_from_slice(&(-17i32).to_ne_bytes());
        let m = Messages::new(&b).next().unwrap();
        assert_eq!(m.error_code(), Some(-17));
    }
}
