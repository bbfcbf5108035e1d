//! A small synchronous rtnetlink client: just the requests the lab needs
//! (link up/MTU/queue length, IPv4 addresses, veth pairs, qdiscs, link
//! statistics). A socket talks to the namespace of the thread that opened
//! it, so open it with [`crate::netns::run_in`] to configure a namespace.

pub mod msg;
pub mod qdisc_stats;

use crate::error::{LabError, Result};
use msg::*;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, OwnedFd};

/// `IFF_UP`.
const IFF_UP: u32 = 0x1;

/// A `NETLINK_ROUTE` socket.
#[derive(Debug)]
pub struct Netlink {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

impl Netlink {
    /// Opens a socket in the calling thread's namespace.
    pub fn open() -> Result<Netlink> {
        let fd = bloatlab_os::fdio::socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)
            .map_err(|e| LabError::io("socket(AF_NETLINK)", e))?;
        Ok(Netlink {
            fd,
            seq: 0,
            buf: vec![0u8; 64 * 1024],
        })
    }

    fn send(&mut self, m: MsgBuilder) -> Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let seq = self.seq;
        let bytes = m.finish(seq);
        bloatlab_os::netdev::netlink_send_to_kernel(&self.fd, &bytes)
            .map_err(|e| LabError::io("netlink send", e))?;
        Ok(seq)
    }

    fn recv(&mut self) -> Result<usize> {
        bloatlab_os::fdio::recv(&self.fd, &mut self.buf, 0)
            .map_err(|e| LabError::io("netlink recv", e))
    }

    /// Sends a request and waits for its acknowledgement; `Err` carries the
    /// kernel's errno. Replies to the request (e.g. a `GETLINK` answer) are
    /// passed to `on_reply`.
    fn transact(
        &mut self,
        op: &str,
        m: MsgBuilder,
        mut on_reply: impl FnMut(&Message<'_>),
    ) -> Result<()> {
        let seq = self.send(m)?;
        loop {
            let n = self.recv()?;
            let buf = std::mem::take(&mut self.buf);
            let mut outcome = None;
            for msg in Messages::new(&buf[..n]) {
                if msg.seq != seq {
                    continue;
                }
                if let Some(code) = msg.error_code() {
                    outcome = Some(if code == 0 {
                        Ok(())
                    } else {
                        Err(LabError::Netlink {
                            op: op.to_string(),
                            source: io::Error::from_raw_os_error(-code),
                        })
                    });
                    break;
                }
                if msg.ty == NLMSG_DONE {
                    outcome = Some(Ok(()));
                    break;
                }
                on_reply(&msg);
            }
            self.buf = buf;
            if let Some(o) = outcome {
                return o;
            }
        }
    }

    /// The index of interface `name`.
    pub fn link_index(&mut self, name: &str) -> Result<i32> {
        let mut m = MsgBuilder::new(RTM_GETLINK, 0).fixed(&ifinfomsg(0, 0, 0));
        m.attr_str(IFLA_IFNAME, name);
        let mut index = None;
        self.transact(&format!("get link {name}"), m, |msg| {
            if let Some(b) = msg.payload.get(4..8) {
                index = Some(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
            }
        })?;
        index.ok_or_else(|| LabError::Netlink {
            op: format!("get link {name}"),
            source: io::Error::from_raw_os_error(libc::ENODEV),
        })
    }

    /// Statistics of the interface with index `index`.
    pub fn link_stats(&mut self, index: i32) -> Result<LinkStats> {
        let m = MsgBuilder::new(RTM_GETLINK, 0).fixed(&ifinfomsg(index, 0, 0));
        let mut stats = None;
        self.transact("get link stats", m, |msg| {
            if let Some(attrs) = msg.payload.get(16..) {
                for (ty, p) in Attrs::new(attrs) {
                    if ty == IFLA_STATS64 {
                        stats = LinkStats::parse(p);
                    }
                }
            }
        })?;
        stats.ok_or_else(|| LabError::Netlink {
            op: "get link stats".into(),
            source: io::Error::from_raw_os_error(libc::ENODATA),
        })
    }

    /// Sets the link up, and its MTU and transmit queue length when given.
    pub fn set_link(&mut self, index: i32, mtu: Option<u32>, txqlen: Option<u32>) -> Result<()> {
        let mut m = MsgBuilder::new(RTM_NEWLINK, 0).fixed(&ifinfomsg(index, IFF_UP, IFF_UP));
        if let Some(mtu) = mtu {
            m.attr_u32(IFLA_MTU, mtu);
        }
        if let Some(q) = txqlen {
            m.attr_u32(IFLA_TXQLEN, q);
        }
        self.transact(&format!("set link {index} up"), m, |_| {})
    }

    /// Enslaves link `index` to the bridge `master`.
    pub fn set_master(&mut self, index: i32, master: i32) -> Result<()> {
        let mut m = MsgBuilder::new(RTM_NEWLINK, 0).fixed(&ifinfomsg(index, 0, 0));
        m.attr_u32(IFLA_MASTER, master as u32);
        self.transact(&format!("set master of link {index}"), m, |_| {})
    }

    /// Adds `addr/prefix` to link `index`.
    pub fn add_addr_v4(&mut self, index: i32, addr: Ipv4Addr, prefix: u8) -> Result<()> {
        let mut m = MsgBuilder::new(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL)
            .fixed(&ifaddrmsg_v4(index as u32, prefix));
        m.attr(IFA_LOCAL, &addr.octets());
        m.attr(IFA_ADDRESS, &addr.octets());
        self.transact(&format!("add address {addr}/{prefix}"), m, |_| {})
    }

    /// Adds the IPv6 `addr/prefix` to link `index`, without duplicate
    /// address detection (usable at once).
    pub fn add_addr_v6(&mut self, index: i32, addr: Ipv6Addr, prefix: u8) -> Result<()> {
        let mut m = MsgBuilder::new(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL)
            .fixed(&ifaddrmsg_v6(index as u32, prefix));
        m.attr(IFA_LOCAL, &addr.octets());
        m.attr(IFA_ADDRESS, &addr.octets());
        self.transact(&format!("add address {addr}/{prefix}"), m, |_| {})
    }

    /// Creates a link of `kind` (e.g. "bridge") named `name`.
    pub fn add_link(&mut self, name: &str, kind: &str) -> Result<()> {
        let mut m =
            MsgBuilder::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL).fixed(&ifinfomsg(0, 0, 0));
        m.attr_str(IFLA_IFNAME, name);
        m.begin_nest(IFLA_LINKINFO);
        m.attr_str(IFLA_INFO_KIND, kind);
        m.end_nest();
        self.transact(&format!("create {kind} {name}"), m, |_| {})
    }

    /// Creates a veth pair `name` <-> `peer`, with the peer placed directly
    /// in the namespace behind `peer_ns` (or beside `name` when `None`), so
    /// no interface ever appears in a namespace the lab does not own.
    pub fn add_veth(&mut self, name: &str, peer: &str, peer_ns: Option<&OwnedFd>) -> Result<()> {
        let mut m =
            MsgBuilder::new(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL).fixed(&ifinfomsg(0, 0, 0));
        m.attr_str(IFLA_IFNAME, name);
        m.begin_nest(IFLA_LINKINFO);
        m.attr_str(IFLA_INFO_KIND, "veth");
        m.begin_nest(IFLA_INFO_DATA);
        m.begin_nest(VETH_INFO_PEER);
        m.raw(&ifinfomsg(0, 0, 0));
        m.attr_str(IFLA_IFNAME, peer);
        if let Some(fd) = peer_ns {
            m.attr_u32(IFLA_NET_NS_FD, fd.as_raw_fd() as u32);
        }
        m.end_nest();
        m.end_nest();
        m.end_nest();
        self.transact(&format!("create veth {name}/{peer}"), m, |_| {})
    }

    /// Counters of every qdisc in this socket's namespace (`tc -s qdisc`).
    pub fn qdisc_stats(&mut self) -> Result<Vec<qdisc_stats::QdiscStats>> {
        let m = MsgBuilder::new(qdisc_stats::RTM_GETQDISC, NLM_F_DUMP).fixed(&tcmsg(0, 0, 0));
        let mut out = Vec::new();
        self.transact("dump qdiscs", m, |msg| {
            if msg.ty == RTM_NEWQDISC
                && let Some(s) = qdisc_stats::QdiscStats::parse(msg.payload)
            {
                out.push(s);
            }
        })?;
        Ok(out)
    }

    /// Adds a qdisc or class (`RTM_NEWQDISC`/`RTM_NEWTCLASS`) with raw
    /// `TCA_OPTIONS` bytes built by the caller.
    pub fn add_tc(
        &mut self,
        ty: u16,
        ifindex: i32,
        handle: u32,
        parent: u32,
        kind: &str,
        options: &[u8],
    ) -> Result<()> {
        let mut m =
            MsgBuilder::new(ty, NLM_F_CREATE | NLM_F_EXCL).fixed(&tcmsg(ifindex, handle, parent));
        m.attr_str(TCA_KIND, kind);
        m.attr(TCA_OPTIONS, options);
        let what = if ty == RTM_NEWTCLASS {
            "class"
        } else {
            "qdisc"
        };
        self.transact(&format!("add {what} {kind}"), m, |_| {})
            .map_err(|e| match e {
                // The kernel answers ENOENT for a qdisc kind it does not have.
                LabError::Netlink { ref source, .. }
                    if source.raw_os_error() == Some(libc::ENOENT) && ty != RTM_NEWTCLASS =>
                {
                    LabError::MissingQdisc {
                        qdisc: kind.to_string(),
                    }
                }
                e => e,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the loopback device of the test's own namespace: an end-to-end
    /// check of send, ack and dump parsing that changes nothing.
    #[test]
    fn loopback_has_index_and_stats() {
        let mut nl = Netlink::open().expect("netlink socket");
        let lo = nl.link_index("lo").expect("lo index");
        assert!(lo > 0);
        let s = nl.link_stats(lo).expect("lo stats");
        assert!(s.rx_packets >= s.rx_dropped);
        match nl.link_index("bl-no-such-if") {
            Err(LabError::Netlink { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(libc::ENODEV))
            }
            other => panic!("expected ENODEV, got {other:?}"),
        }
    }
}
