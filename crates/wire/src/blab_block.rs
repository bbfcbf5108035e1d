//! bloatlab extension version 2: a 24-byte block appended to the TCP test
//! header, after a (possibly all-zero) start-time/fq block, so the header is
//! 104 bytes and the block sits at offset 80.
//!
//! ```text
//! 80  u32      flags (BlabBlockFlags)
//! 84  u32      notsent_lowat: TCP_NOTSENT_LOWAT in bytes for the server's
//!              sending socket (0 = leave the kernel's setting)
//! 88  [u8;16]  congestion control for the server's sending socket, ASCII,
//!              NUL-padded (TCP_CA_NAME_MAX = 16); all zero = no request
//! ```
//!
//! Why here: `client_hdrext.length` (the version and report interval,
//! [`crate::BlabExt`]) has no room for a name. iperf 2.1.8 reads exactly the
//! LEN field's bytes (`Settings_ClientTestHdrLen`) and interprets blocks by
//! the upper flags, so it ignores both the zero start-time block (no
//! TRIPTIME/EPOCH/FQRATE flag) and this block. Older bloatlab servers see an
//! 80-byte layout plus bytes they do not read. The block is only sent with
//! extension version [`BLOATLAB_EXT_VERSION_BLOCK`] in `client_hdrext.length`.

use crate::WireError;
use crate::error::need;
use crate::field::{Field, get_u32, set_u32};
use crate::flags::HeaderFlags;
use crate::tcp_header::LEN_WITH_START;

/// The extension version announcing a [`BlabBlockRepr`] at offset 80.
pub const BLOATLAB_EXT_VERSION_BLOCK: u8 = 2;
/// Block length in bytes.
pub const BLAB_BLOCK_LEN: usize = 24;
/// Offset of the block in the TCP test header.
pub const BLAB_BLOCK_OFFSET: usize = LEN_WITH_START;
/// Header length with the block (without a permit key).
pub const LEN_WITH_BLAB_BLOCK: usize = BLAB_BLOCK_OFFSET + BLAB_BLOCK_LEN;
/// Longest congestion control name (the kernel's TCP_CA_NAME_MAX).
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
    pub congestion: Option<String>,
}

impl BlabBlockRepr {
    /// Parses the 24 block bytes. The name must be printable ASCII without
    /// inner NULs (it becomes a `setsockopt` argument on the server).
    pub fn parse(b: &[u8]) -> Result<BlabBlockRepr, WireError> {
        need(b, BLAB_BLOCK_LEN)?;
        let raw = &b[field::CC];
        let end = raw.iter().position(|&c| c == 0).unwrap_or(raw.len());
        let (name, pad) = raw.split_at(end);
        if pad.iter().any(|&c| c != 0) || !name.iter().all(|c| c.is_ascii_graphic()) {
            return Err(WireError::BadValue {
                field: "blab_block.congestion",
                value: u64::from(get_u32(raw, 0..4)),
            });
        }
        let lowat = get_u32(b, field::NOTSENT_LOWAT);
        Ok(BlabBlockRepr {
            flags: BlabBlockFlags(get_u32(b, field::FLAGS)),
            notsent_lowat: (lowat > 0).then_some(lowat),
            congestion: (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned()),
        })
    }

    /// The 24 block bytes. A name longer than [`CC_NAME_MAX`] is an error
    /// (the kernel would refuse it anyway).
    pub fn to_bytes(&self) -> Result<[u8; BLAB_BLOCK_LEN], WireError> {
        let mut b = [0u8; BLAB_BLOCK_LEN];
        set_u32(&mut b, field::FLAGS, self.flags.0);
        set_u32(
            &mut b,
            field::NOTSENT_LOWAT,
            self.notsent_lowat.unwrap_or(0),
        );
        if let Some(cc) = &self.congestion {
            let n = cc.as_bytes();
            if n.len() > CC_NAME_MAX || !n.iter().all(|c| c.is_ascii_graphic()) {
                return Err(WireError::BadLength {
                    field: "blab_block.congestion",
                    value: n.len() as u64,
                });
            }
            b[field::CC.start..field::CC.start + n.len()].copy_from_slice(n);
        }
        Ok(b)
    }

    /// Appends the block to an 80-byte header (core + start-time block, no
    /// permit key) and sets its LEN field to 104. Any other length is refused.
    pub fn append_to(&self, header: &mut Vec<u8>) -> Result<(), WireError> {
        if header.len() != BLAB_BLOCK_OFFSET {
            return Err(WireError::BadLength {
                field: "tcp header (needs the 80-byte layout)",
                value: header.len() as u64,
            });
        }
        header.extend_from_slice(&self.to_bytes()?);
        let flags = HeaderFlags(get_u32(header, 0..4)).with_len(LEN_WITH_BLAB_BLOCK);
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
        header
            .get(BLAB_BLOCK_OFFSET..LEN_WITH_BLAB_BLOCK)
            .map(BlabBlockRepr::parse)
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
            congestion: Some("cubic".into()),
        };
        let b = r.to_bytes().unwrap();
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
        let long = BlabBlockRepr {
            congestion: Some("a".repeat(17)),
            ..BlabBlockRepr::default()
        };
        assert!(long.to_bytes().is_err());
        assert!(r.append_to(&mut vec![0u8; 60]).is_err());
    }
}
