//! bloatlab extension version 2: a 24-byte block appended to the TCP test
//! header, after a (possibly all-zero) start-time/fq block, so the header is
//! 104 bytes and the block sits at offset 80.
//!
//! ```text
//! 80  u32      flags (BlabBlockFlags)
//! 84  u32      notsent_lowat: TCP_NOTSENT_LOWAT in bytes for the server's
//!              sending socket (0 = leave the kernel's setting)
//! 88  [u8;16]  congestion control for the server's sending socket, ASCII,
//!              NUL-padded (TCP_CA_NAME_MAX = 16); all zero = no request.
//!              The name obeys bloatlab_units::CongestionControl's rule, so
//!              at least one NUL always follows it
//! ```
//!
//! Why here: `client_hdrext.length` (the version and report interval,
//! [`crate::BlabExt`]) has no room for a name. iperf 2.1.8 reads exactly the
//! LEN field's bytes (`Settings_ClientTestHdrLen`) and interprets blocks by
//! the upper flags, so it ignores both the zero start-time block (no
//! TRIPTIME/EPOCH/FQRATE flag) and this block. Older bloatlab servers see an
//! 80-byte layout plus bytes they do not read. The block is only sent with
//! extension version [`BLOATLAB_EXT_VERSION_BLOCK`] in `client_hdrext.length`.
//!
//! Extension version 3 ([`BLOATLAB_EXT_VERSION_FLOW_ID`]) appends an 8-byte
//! flow id to the block (offset 104, header LEN 112):
//!
//! ```text
//! 104 u64      flow id: a random nonzero number naming this flow; the server
//!              keeps its sender's final TCP_INFO under it, for a later
//!              query (crate::flow_query)
//! ```
//!
//! Version-2 servers read the 24-byte block and ignore the id (they parse
//! by offset and length, not by the version).

use crate::WireError;
use crate::error::need;
use crate::field::{Field, get_u32, get_u64, set_u32};
use crate::flags::HeaderFlags;
use crate::tcp_header::LEN_WITH_START;
use bloatlab_units::CongestionControl;

/// The extension version announcing a [`BlabBlockRepr`] at offset 80.
pub const BLOATLAB_EXT_VERSION_BLOCK: u8 = 2;
/// Block length in bytes.
pub const BLAB_BLOCK_LEN: usize = 24;
/// Offset of the block in the TCP test header.
pub const BLAB_BLOCK_OFFSET: usize = LEN_WITH_START;
/// Header length with the block (without a permit key).
pub const LEN_WITH_BLAB_BLOCK: usize = BLAB_BLOCK_OFFSET + BLAB_BLOCK_LEN;
/// The extension version whose block carries a flow id at offset 104.
pub const BLOATLAB_EXT_VERSION_FLOW_ID: u8 = 3;
/// The flow id's bytes in the TCP test header.
pub const FLOW_ID_FIELD: Field = LEN_WITH_BLAB_BLOCK..LEN_WITH_BLAB_BLOCK + 8;
/// Header length with the block and a flow id (without a permit key).
pub const LEN_WITH_FLOW_ID: usize = LEN_WITH_BLAB_BLOCK + 8;
/// Bytes of the congestion control field (the kernel's TCP_CA_NAME_MAX).
pub const CC_NAME_MAX: usize = 16;

/// Field map, relative to the block start.
pub mod field {
    use super::Field;
    /// [`super::BlabBlockFlags`].
    pub const FLAGS: Field = 0..4;
    /// TCP_NOTSENT_LOWAT for the server's sender, bytes (0 = unset).
    pub const NOTSENT_LOWAT: Field = 4..8;
    /// Congestion control name, NUL-padded.
    pub const CC: Field = 8..24;
}

/// Flags of the block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BlabBlockFlags(pub u32);

impl BlabBlockFlags {
    /// On a reverse or full-duplex test, the server sends one BLXR frame (a
    /// `bloatlab_metrics::json::SenderHello`) before its data, saying what its
    /// sending socket really uses.
    pub const HELLO: BlabBlockFlags = BlabBlockFlags(0x1);

    /// Whether every bit of `other` is set.
    pub const fn contains(self, other: BlabBlockFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// A parsed block.
#[derive(Debug, Clone, PartialEq, Eq, Default, Hash)]
pub struct BlabBlockRepr {
    /// Flags.
    pub flags: BlabBlockFlags,
    /// TCP_NOTSENT_LOWAT for the server's sending socket, bytes.
    pub notsent_lowat: Option<u32>,
    /// Congestion control for the server's sending socket.
    pub congestion: Option<CongestionControl>,
    /// Extension version 3: the flow's id (8 bytes after the block; 0 on
    /// the wire = none). A server keeps its sender's final TCP_INFO under it.
    pub flow_id: Option<u64>,
}

impl BlabBlockRepr {
    /// Parses the 24 block bytes. The name must be NUL-padded and obey
    /// [`CongestionControl`]'s rule (it becomes a `setsockopt` argument on the server).
    pub fn parse(b: &[u8]) -> Result<BlabBlockRepr, WireError> {
        need(b, BLAB_BLOCK_LEN)?;
        let raw = &b[field::CC];
        let bad = || WireError::BadValue {
            field: "blab_block.congestion",
            value: u64::from(get_u32(raw, 0..4)),
        };
        let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
        let (name, pad) = raw.split_at(end);
        if pad.iter().any(|&c| c != 0) {
            return Err(bad());
        }
        let congestion = match name {
            [] => None,
            _ => {
                let text = std::str::from_utf8(name).map_err(|_| bad())?;
                Some(CongestionControl::new(text).map_err(|_| bad())?)
            }
        };
        let lowat = get_u32(b, field::NOTSENT_LOWAT);
        Ok(BlabBlockRepr {
            flags: BlabBlockFlags(get_u32(b, field::FLAGS)),
            notsent_lowat: (lowat > 0).then_some(lowat),
            congestion,
            flow_id: None,
        })
    }

    /// The 24 block bytes (without the flow id). Every [`CongestionControl`]
    /// fits the field ([`CongestionControl::MAX_LEN`] < [`CC_NAME_MAX`]).
    pub fn to_bytes(&self) -> [u8; BLAB_BLOCK_LEN] {
        let mut b = [0u8; BLAB_BLOCK_LEN];
        set_u32(&mut b, field::FLAGS, self.flags.0);
        set_u32(
            &mut b,
            field::NOTSENT_LOWAT,
            self.notsent_lowat.unwrap_or(0),
        );
        if let Some(cc) = &self.congestion {
            let n = cc.as_str().as_bytes();
            b[field::CC.start..field::CC.start + n.len()].copy_from_slice(n);
        }
        b
    }

    /// Appends the block to an 80-byte header (core + start-time block, no
    /// permit key) and sets its LEN field to 104, or 112 with a flow id
    /// after the block. Any other length is refused.
    pub fn append_to(&self, header: &mut Vec<u8>) -> Result<(), WireError> {
        if header.len() != BLAB_BLOCK_OFFSET {
            return Err(WireError::BadLength {
                field: "tcp header (needs the 80-byte layout)",
                value: header.len() as u64,
            });
        }
        header.extend_from_slice(&self.to_bytes());
        if let Some(id) = self.flow_id.filter(|&id| id != 0) {
            header.extend_from_slice(&id.to_be_bytes());
        }
        let flags = HeaderFlags(get_u32(header, 0..4)).with_len(header.len());
        set_u32(header, 0..4, flags.bits());
        Ok(())
    }

    /// The block of a complete TCP test header whose extension version is
    /// [`BLOATLAB_EXT_VERSION_BLOCK`] or later: `None` when the header is
    /// too short to hold it (an older client).
    pub fn from_header(header: &[u8]) -> Option<Result<BlabBlockRepr, WireError>> {
        let flags = HeaderFlags(get_u32(header, 0..4));
        let mut len = flags.len_field()?;
        if flags.contains(HeaderFlags::KEYCHECK) {
            len = len.saturating_sub(2);
        }
        if len < LEN_WITH_BLAB_BLOCK {
            return None;
        }
        let block = header
            .get(BLAB_BLOCK_OFFSET..LEN_WITH_BLAB_BLOCK)
            .map(BlabBlockRepr::parse)?;
        // A flow id follows when the LEN field leaves room for it.
        let flow_id = (len >= LEN_WITH_FLOW_ID)
            .then(|| get_u64(header, FLOW_ID_FIELD))
            .filter(|&id| id != 0);
        Some(block.map(|b| BlabBlockRepr { flow_id, ..b }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bad_names() {
        let r = BlabBlockRepr {
            flags: BlabBlockFlags::HELLO,
            notsent_lowat: Some(16384),
            congestion: Some(CongestionControl::new("cubic").unwrap()),
            flow_id: None,
        };
        let b = r.to_bytes();
        assert_eq!(BlabBlockRepr::parse(&b).unwrap(), r);
        assert_eq!(
            BlabBlockRepr::parse(&[0u8; 24]).unwrap(),
            BlabBlockRepr::default()
        );
        assert!(BlabBlockRepr::parse(&b[..23]).is_err());
        let mut bad = b;
        bad[20] = b'x'; // text after the NUL padding
        assert!(BlabBlockRepr::parse(&bad).is_err());
        bad = b;
        bad[8] = b' ';
        assert!(BlabBlockRepr::parse(&bad).is_err());
        // A name the rule refuses (a hyphen; 16 bytes with no NUL, which the
        // kernel would truncate) is refused on the wire too.
        bad = b;
        bad[8..14].copy_from_slice(b"cu-bic");
        assert!(BlabBlockRepr::parse(&bad).is_err());
        bad = b;
        bad[8..24].copy_from_slice(&[b'a'; 16]);
        assert!(BlabBlockRepr::parse(&bad).is_err());
        // The longest name the rule allows round-trips.
        let long = BlabBlockRepr {
            congestion: Some(CongestionControl::new(&"a".repeat(15)).unwrap()),
            ..BlabBlockRepr::default()
        };
        assert_eq!(BlabBlockRepr::parse(&long.to_bytes()).unwrap(), long);
        assert!(r.append_to(&mut vec![0u8; 60]).is_err());
    }

    #[test]
    fn flow_id_follows_the_block() {
        let r = BlabBlockRepr {
            flags: BlabBlockFlags::HELLO,
            flow_id: Some(0x0102_0304_0506_0708),
            ..BlabBlockRepr::default()
        };
        let mut h = vec![0u8; BLAB_BLOCK_OFFSET];
        h[..4].copy_from_slice(&0x4401_00a0u32.to_be_bytes());
        r.append_to(&mut h).unwrap();
        assert_eq!(h.len(), LEN_WITH_FLOW_ID);
        assert_eq!(HeaderFlags(get_u32(&h, 0..4)).len_field(), Some(112));
        assert_eq!(&h[104..112], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(BlabBlockRepr::from_header(&h), Some(Ok(r.clone())));
        // A version-2 header (LEN 104) has no id even if bytes follow.
        let mut v2 = h.clone();
        set_u32(
            &mut v2,
            0..4,
            HeaderFlags(get_u32(&h, 0..4)).with_len(104).bits(),
        );
        assert_eq!(
            BlabBlockRepr::from_header(&v2).unwrap().unwrap().flow_id,
            None
        );
        // A zero id is no id.
        let zero = BlabBlockRepr {
            flow_id: Some(0),
            ..r
        };
        let mut h0 = vec![0u8; BLAB_BLOCK_OFFSET];
        zero.append_to(&mut h0).unwrap();
        assert_eq!(h0.len(), LEN_WITH_BLAB_BLOCK);
    }
}
