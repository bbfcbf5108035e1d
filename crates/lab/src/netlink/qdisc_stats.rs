//! Qdisc counters from an `RTM_GETQDISC` dump (what `tc -s qdisc` shows),
//! for the kernel backend's `lab status`. Layouts: `struct tcmsg`
//! (rtnetlink(7)), `TCA_STATS2` nesting `struct gnet_stats_basic` and
//! `struct gnet_stats_queue` (include/uapi/linux/gen_stats.h).

use super::msg::{Attrs, TCA_KIND};
use serde::{Deserialize, Serialize};

pub const RTM_GETQDISC: u16 = 38;
pub const TCA_STATS2: u16 = 7;
pub const TCA_STATS_BASIC: u16 = 1;
pub const TCA_STATS_QUEUE: u16 = 3;
/// `struct tcmsg` length.
pub const TCMSG_LEN: usize = 20;

/// One qdisc's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QdiscStats {
    pub ifindex: i32,
    /// `major:minor` as one number (`0x10000` = `1:`).
    pub handle: u32,
    pub parent: u32,
    pub kind: String,
    /// Bytes and packets the qdisc sent.
    pub bytes: u64,
    pub packets: u64,
    /// Packets it dropped (queue full or AQM).
    pub drops: u64,
    /// Times a packet had to wait for the shaper (tbf/htb).
    pub overlimits: u64,
    pub requeues: u64,
    /// Backlog now.
    pub qlen: u64,
    pub backlog_bytes: u64,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 4)?;
    Some(u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

impl QdiscStats {
    /// Parses the payload of one `RTM_NEWQDISC` message (`tcmsg` then
    /// attributes). `None` when it is too short to be one.
    pub fn parse(payload: &[u8]) -> Option<QdiscStats> {
        let mut s = QdiscStats {
            ifindex: u32_at(payload, 4)? as i32,
            handle: u32_at(payload, 8)?,
            parent: u32_at(payload, 12)?,
            ..QdiscStats::default()
        };
        for (ty, p) in Attrs::new(payload.get(TCMSG_LEN..)?) {
            match ty {
                TCA_KIND => {
                    let name = p.split(|&b| b == 0).next().unwrap_or_default();
                    s.kind = String::from_utf8_lossy(name).into_owned();
                }
                TCA_STATS2 => {
                    for (ty, q) in Attrs::new(p) {
                        match ty {
                            TCA_STATS_BASIC => {
                                let bytes = q.get(0..8).map(|b| {
                                    let mut a = [0u8; 8];
                                    a.copy_from_slice(b);
                                    u64::from_ne_bytes(a)
                                });
                                s.bytes = bytes.unwrap_or(0);
                                s.packets = u32_at(q, 8).map_or(0, u64::from);
                            }
                            TCA_STATS_QUEUE => {
                                let f = |i: usize| u32_at(q, i * 4).map_or(0, u64::from);
                                s.qlen = f(0);
                                s.backlog_bytes = f(1);
                                s.drops = f(2);
                                s.requeues = f(3);
                                s.overlimits = f(4);
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        Some(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    /// A reply as `tc -s qdisc` would get it for `bfifo limit 30kb` on
    /// ifindex 5, handle 2:, parent 1:1, after 3 packets sent and 1 drop.
    fn golden() -> Vec<u8> {
        let mut p = vec![0u8, 0, 0, 0];
        p.extend_from_slice(&5i32.to_ne_bytes());
        p.extend_from_slice(&0x2_0000u32.to_ne_bytes());
        p.extend_from_slice(&0x1_0001u32.to_ne_bytes());
        p.extend_from_slice(&1u32.to_ne_bytes()); // tcm_info (refcnt)
        p.extend(nla(TCA_KIND, b"bfifo\0"));
        let mut basic = Vec::new();
        basic.extend_from_slice(&4500u64.to_ne_bytes());
        basic.extend_from_slice(&3u32.to_ne_bytes());
        basic.extend_from_slice(&[0u8; 4]); // padding of gnet_stats_basic
        let mut queue = Vec::new();
        for v in [2u32, 3000, 1, 0, 7] {
            queue.extend_from_slice(&v.to_ne_bytes());
        }
        let mut stats2 = nla(TCA_STATS_BASIC, &basic);
        stats2.extend(nla(TCA_STATS_QUEUE, &queue));
        p.extend(nla(TCA_STATS2, &stats2));
        p
    }

    #[test]
    fn golden_reply_parses_into_every_counter() {
        let s = QdiscStats::parse(&golden()).unwrap();
        assert_eq!(
            s,
            QdiscStats {
                ifindex: 5,
                handle: 0x2_0000,
                parent: 0x1_0001,
                kind: "bfifo".into(),
                bytes: 4500,
                packets: 3,
                drops: 1,
                overlimits: 7,
                requeues: 0,
                qlen: 2,
                backlog_bytes: 3000,
            }
        );
    }

    #[test]
    fn truncated_replies_never_panic() {
        let g = golden();
        for cut in 0..g.len() {
            let s = QdiscStats::parse(&g[..cut]);
            assert_eq!(s.is_some(), cut >= TCMSG_LEN, "cut {cut}");
        }
    }
}
