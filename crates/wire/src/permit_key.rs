//! iperf 2's `--permit-key` on TCP (README 5.3 and 5.11): the client appends
//! `u16 key length` + the key bytes to its test header, sets `KEYCHECK`, and
//! sets the LEN field to the offset of the key *value* (header + 2). A 2.1.8
//! server reads LEN bytes, then the key, and closes the connection when the key
//! is missing, of the wrong length or different (`Listener::test_permit_key`);
//! a server without a key closes a connection that sends one.
//!
//! iperf 2 has no permit key on UDP (its client refuses `-u --permit-key`).
//!
//! Captured from iperf 2.1.8 (`iperf -c ... --permit-key=abcd1234 -l 1000`):
//! flags `0x5001007c` = `EXTEND|KEYCHECK|LEN_BIT|LEN=62`, then at offset 60
//! `0008` and `abcd1234`; with `--trip-times` the LEN is 82 (80 + 2). See
//! `tests/golden.rs` (`permit_key_*`).

use crate::WireError;
use crate::field::{get_u32, set_u32};
use crate::flags::HeaderFlags;
use crate::tcp_header::MAX_HEADER_LEN;

/// Shortest key iperf 2 accepts (`MIN_PERMITKEY_LEN`).
pub const MIN_LEN: usize = 4;
/// Longest key iperf 2 accepts (`MAX_PERMITKEY_LEN`).
pub const MAX_LEN: usize = 128;

/// Checks a key as iperf 2's option parser does: 4 to 128 bytes. We also
/// refuse NUL bytes, which iperf's C strings would cut the key at.
pub fn validate(key: &[u8]) -> Result<(), WireError> {
    if !(MIN_LEN..=MAX_LEN).contains(&key.len()) {
        return Err(WireError::BadLength {
            field: "permit key (4 to 128 bytes)",
            value: key.len() as u64,
        });
    }
    if key.contains(&0) {
        return Err(WireError::BadValue {
            field: "permit key (NUL byte)",
            value: 0,
        });
    }
    Ok(())
}

/// Appends `key` to a complete test header (as `TcpTestHeaderRepr::emit`
/// wrote it: LEN = its length) and rewrites the flags: `KEYCHECK` set, LEN =
/// offset of the key value. The header must not already carry a key.
pub fn append(header: &mut Vec<u8>, key: &[u8]) -> Result<(), WireError> {
    validate(key)?;
    let flags = HeaderFlags(get_u32(header, 0..4));
    if header.len() < 4 || flags.contains(HeaderFlags::KEYCHECK) {
        return Err(WireError::BadValue {
            field: "flags (header already has a key, or is empty)",
            value: u64::from(flags.0),
        });
    }
    let key_offset = header.len() + 2;
    // LEN holds at most 255; iperf's server also refuses more than 256.
    if key_offset > MAX_HEADER_LEN.min(255) {
        return Err(WireError::BadLength {
            field: "flags.len (permit key offset)",
            value: key_offset as u64,
        });
    }
    set_u32(
        header,
        0..4,
        flags.with(HeaderFlags::KEYCHECK).with_len(key_offset).0,
    );
    // Cannot truncate: validate() bounded the length to 128.
    header.extend_from_slice(&(key.len() as u16).to_be_bytes());
    header.extend_from_slice(key);
    Ok(())
}

/// What a server concludes from a header's key, given its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyCheck {
    /// Both sides have no key, or the keys match.
    Accepted,
    /// This server has a key and the client sent none.
    Missing,
    /// The client sent a key and this server has none (iperf 2 refuses this too).
    Unexpected,
    /// The client's key differs from ours.
    Mismatch,
}

impl KeyCheck {
    /// The verdict for a client key (`TcpTestHeader::permit_key`) against
    /// `ours`. The comparison takes the same time for any key of our length.
    pub fn verdict(theirs: Option<&[u8]>, ours: Option<&[u8]>) -> KeyCheck {
        match (theirs, ours) {
            (None, None) => KeyCheck::Accepted,
            (None, Some(_)) => KeyCheck::Missing,
            (Some(_), None) => KeyCheck::Unexpected,
            (Some(t), Some(o)) if constant_time_eq(t, o) => KeyCheck::Accepted,
            (Some(_), Some(_)) => KeyCheck::Mismatch,
        }
    }

    /// A short reason for a log line (`None` when accepted).
    pub fn refusal(self) -> Option<&'static str> {
        match self {
            KeyCheck::Accepted => None,
            KeyCheck::Missing => Some("permit key fail: the client sent no key"),
            KeyCheck::Unexpected => {
                Some("permit key fail: the client sent a key and this server has none")
            }
            KeyCheck::Mismatch => Some("permit key fail: wrong key"),
        }
    }
}

/// Compares without an early exit on the first differing byte, so the time
/// taken does not tell an attacker how long a matching prefix was.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_lengths_follow_iperf() {
        assert!(validate(b"abc").is_err());
        assert!(validate(b"abcd").is_ok());
        assert!(validate(&[b'k'; 128]).is_ok());
        assert!(validate(&[b'k'; 129]).is_err());
        assert!(validate(b"ab\0cd").is_err());
    }

    #[test]
    fn verdicts() {
        use KeyCheck::*;
        assert_eq!(KeyCheck::verdict(None, None), Accepted);
        assert_eq!(KeyCheck::verdict(Some(b"abcd"), Some(b"abcd")), Accepted);
        assert_eq!(KeyCheck::verdict(None, Some(b"abcd")), Missing);
        assert_eq!(KeyCheck::verdict(Some(b"abcd"), None), Unexpected);
        assert_eq!(KeyCheck::verdict(Some(b"abce"), Some(b"abcd")), Mismatch);
        assert_eq!(KeyCheck::verdict(Some(b"abcde"), Some(b"abcd")), Mismatch);
        assert!(Accepted.refusal().is_none() && Mismatch.refusal().is_some());
    }

    #[test]
    fn append_refuses_a_second_key_and_an_empty_header() {
        let mut h = vec![0x40, 0x01, 0x00, 0x78];
        h.resize(60, 0);
        append(&mut h, b"abcd").unwrap();
        assert_eq!(h.len(), 66);
        assert!(append(&mut h, b"abcd").is_err());
        assert!(append(&mut Vec::new(), b"abcd").is_err());
    }
}
