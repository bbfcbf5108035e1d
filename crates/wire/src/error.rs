//! The one error type of this crate.

/// Why a byte slice could not be read as (or written to) a wire format.
///
/// Every variant names the field or structure at fault so a server can log a
/// single clear line about a bad peer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The buffer is shorter than the structure needs.
    #[error("truncated: need {needed} bytes, got {got}")]
    Truncated {
        /// Bytes the structure needs (from the start of the buffer).
        needed: usize,
        /// Bytes available.
        got: usize,
    },
    /// A length field (or a length derived from flags) is out of range.
    #[error("bad length in {field}: {value}")]
    BadLength {
        /// Field name, as in the iperf 2 struct (`flags.len`, `payload_len`, ...).
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// A field holds a value this format does not allow (e.g. a wrong message type).
    #[error("bad value in {field}: {value:#x}")]
    BadValue {
        /// Field name.
        field: &'static str,
        /// The offending value.
        value: u64,
    },
    /// A magic number did not match.
    #[error("bad magic: expected {expected:#010x}, got {got:#010x}")]
    BadMagic {
        /// The magic this format starts with.
        expected: u32,
        /// What the buffer held.
        got: u32,
    },
    /// The flags ask for a message kind this crate does not parse.
    #[error("unsupported: {what}")]
    Unsupported {
        /// What was asked for.
        what: &'static str,
    },
    /// A payload that must be UTF-8 is not.
    #[error("payload is not UTF-8 (first bad byte at payload offset {valid_up_to})")]
    NotUtf8 {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
    },
}

/// Returns `Truncated` unless `buf` holds at least `needed` bytes.
pub(crate) fn need(buf: &[u8], needed: usize) -> Result<(), WireError> {
    if buf.len() < needed {
        Err(WireError::Truncated {
            needed,
            got: buf.len(),
        })
    } else {
        Ok(())
    }
}

/// Checks a header whose length is a field of its own (IPv4's IHL, TCP's data offset):
/// `buf` holds the fixed part (`min` bytes), the field says at least `min`
/// (`BadLength` naming `field`, in its 32-bit words), and `buf` holds the whole header.
/// `header_len` is the field's value in bytes, read before the first check (a view
/// reads 0 past the end of a short buffer).
pub(crate) fn need_header(
    buf: &[u8],
    min: usize,
    header_len: usize,
    field: &'static str,
) -> Result<(), WireError> {
    need(buf, min)?;
    if header_len < min {
        return Err(WireError::BadLength {
            field,
            value: header_len as u64 / 4,
        });
    }
    need(buf, header_len)
}
