//! The TCP test header: the first bytes a client sends on the data connection
//! (README 5.3). Layout: core (60 B) [+ start-time/fq (20 B)] [+ isoch settings
//! (32 B)] [+ permit key: `u16 len` + key], i.e. 60, 80 or 112 bytes (+ key).
//!
//! A server reads it in two steps: 4 bytes of flags, then
//! [`header_len_from_flags`] tells how many bytes the header has in total.

use crate::WireError;
use crate::client_hdr::{
    CORE_LEN, ClientHeader, ClientHeaderRepr, ISOCH_SETTINGS_LEN, IsochSettingsRepr, START_FQ_LEN,
    StartFqRepr,
};
use crate::error::need;
use crate::field::{Field, get_u16, get_u32};
use crate::flags::HeaderFlags;
use crate::view::view_struct;

/// Field map (absolute offsets in the TCP header).
pub mod field {
    use super::Field;
    /// The 60-byte core ([`crate::client_hdr::field`]).
    pub const CORE: Field = 0..60;
    /// `client_hdrext_starttime_fq`, present when the header is >= 80 bytes.
    pub const START_FQ: Field = 60..80;
    /// `client_hdrext_isoch_settings`, present when the header is >= 112 bytes.
    pub const ISOCH_SETTINGS: Field = 80..112;
}

/// Header length with the start-time block.
pub const LEN_WITH_START: usize = CORE_LEN + START_FQ_LEN;
/// Header length with the start-time and isoch settings blocks.
pub const LEN_WITH_ISOCH: usize = LEN_WITH_START + ISOCH_SETTINGS_LEN;
/// The largest header length a 2.1.8 server accepts (`Listener.cpp`).
pub const MAX_HEADER_LEN: usize = 256;

/// The total header length (bytes, counting the 4 flag bytes already read)
/// that a server must read, from the first 4 bytes (README 5.3, `Listener.cpp:1199`).
///
/// * LEN_BIT set: the LEN field (with `KEYCHECK`, the key value offset: the
///   key's 2-byte length is the last 2 bytes of this count; read that many
///   more bytes after it, see [`bytes_needed`]).
/// * otherwise: 24 if `VERSION1|EXTEND`, plus 36 if `VERSION2|EXTEND`.
///
/// Errors: `BOUNCEBACK` (a different message), a length above 256, and
/// lengths shorter than `client_hdr_v1` (24), including "no header at all".
pub fn header_len_from_flags(flags: u32) -> Result<usize, WireError> {
    let flags = HeaderFlags(flags);
    if flags.contains(HeaderFlags::BOUNCEBACK) {
        return Err(WireError::Unsupported {
            what: "bounceback message",
        });
    }
    let len = match flags.len_field() {
        Some(len) => len,
        None => {
            let v1 = flags.intersects(HeaderFlags::VERSION1 | HeaderFlags::EXTEND);
            let ext = flags.intersects(HeaderFlags::VERSION2 | HeaderFlags::EXTEND);
            usize::from(v1) * 24 + usize::from(ext) * 36
        }
    };
    // The LEN field holds at most 255, but keep the rule explicit (iperf checks > 256).
    if !(24..=MAX_HEADER_LEN).contains(&len) {
        return Err(WireError::BadLength {
            field: "flags.len",
            value: len as u64,
        });
    }
    Ok(len)
}

view_struct!(
    /// A view of a TCP test header (the buffer may extend past it).
    TcpTestHeader
);

/// Streaming helper: how many more bytes must be appended to `buf` (the first
/// bytes of the connection) before the whole test header, including any
/// permit key, is in it. `Ok(0)` means complete. Reading exactly this many
/// bytes in a loop never reads past the header into the payload.
pub fn bytes_needed(buf: &[u8]) -> Result<usize, WireError> {
    if buf.len() < 4 {
        return Ok(4 - buf.len());
    }
    let total = TcpTestHeader::<&[u8]>::total_len_of(buf)?;
    Ok(total.saturating_sub(buf.len()))
}

impl<T: AsRef<[u8]>> TcpTestHeader<T> {
    /// Total length with the permit key, or the length known so far (LEN) when
    /// the key length is not in `buf` yet.
    fn total_len_of(buf: &[u8]) -> Result<usize, WireError> {
        let flags = get_u32(buf, 0..4);
        let len = header_len_from_flags(flags)?;
        if len < CORE_LEN {
            return Err(WireError::Unsupported {
                what: "test header without client_hdrext",
            });
        }
        if !HeaderFlags(flags).contains(HeaderFlags::KEYCHECK) {
            return Ok(len);
        }
        if len < CORE_LEN + 2 {
            return Err(WireError::BadLength {
                field: "flags.len (permit key offset)",
                value: len as u64,
            });
        }
        if buf.len() < len {
            return Ok(len);
        }
        let key_len = usize::from(get_u16(buf, len - 2..len));
        Ok(len + key_len)
    }

    /// Checks that the whole header (per its LEN field, plus any permit key) is
    /// in the buffer and that it has a `client_hdrext`.
    pub fn check_len(&self) -> Result<(), WireError> {
        let b = self.buffer.as_ref();
        need(b, 4)?;
        // With a key, `total_len_of` includes the key only once LEN bytes are
        // present; until then it returns LEN, which is already too long.
        need(b, Self::total_len_of(b)?)
    }

    /// The header length in bytes (from the flags; includes any permit key).
    pub fn header_len(&self) -> usize {
        Self::total_len_of(self.buffer.as_ref()).unwrap_or(0)
    }

    /// Length of the structs before any permit key (60, 80 or 112 normally).
    fn struct_len(&self) -> usize {
        let b = self.buffer.as_ref();
        let flags = HeaderFlags(get_u32(b, 0..4));
        let len = header_len_from_flags(flags.0).unwrap_or(0);
        if flags.contains(HeaderFlags::KEYCHECK) {
            len.saturating_sub(2)
        } else {
            len
        }
    }

    /// The 60-byte core.
    pub fn core(&self) -> ClientHeader<&[u8]> {
        let b = self.buffer.as_ref();
        ClientHeader::new_unchecked(b.get(field::CORE).unwrap_or(b))
    }

    /// The start-time/fq block, if the header is long enough to hold it.
    pub fn start_fq(&self) -> Option<&[u8]> {
        (self.struct_len() >= field::START_FQ.end)
            .then(|| self.buffer.as_ref().get(field::START_FQ))
            .flatten()
    }

    /// The isoch settings block, if the header is long enough to hold it.
    pub fn isoch_settings(&self) -> Option<&[u8]> {
        (self.struct_len() >= field::ISOCH_SETTINGS.end)
            .then(|| self.buffer.as_ref().get(field::ISOCH_SETTINGS))
            .flatten()
    }

    /// The permit key bytes (`--permit-key`), if `KEYCHECK` is set.
    pub fn permit_key(&self) -> Option<&[u8]> {
        let b = self.buffer.as_ref();
        if !HeaderFlags(get_u32(b, 0..4)).contains(HeaderFlags::KEYCHECK) {
            return None;
        }
        let len = header_len_from_flags(get_u32(b, 0..4)).ok()?;
        let key_len = usize::from(get_u16(b, len.checked_sub(2)?..len));
        b.get(len..len + key_len)
    }
}

/// A parsed TCP test header.
///
/// Permit keys are exposed by the view ([`TcpTestHeader::permit_key`]) only;
/// `emit` never writes one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpTestHeaderRepr {
    /// The 60-byte core.
    pub core: ClientHeaderRepr,
    /// The start-time/fq block (sent with trip-times, fq-rate, isochronous, txstart).
    pub start_fq: Option<StartFqRepr>,
    /// The isoch settings block (isochronous with reverse/full-duplex). When set,
    /// the start-time block is sent too (zeros if `start_fq` is `None`).
    pub isoch_settings: Option<IsochSettingsRepr>,
}

impl TcpTestHeaderRepr {
    /// Parses a complete header.
    pub fn parse<T: AsRef<[u8]>>(v: &TcpTestHeader<T>) -> Result<TcpTestHeaderRepr, WireError> {
        v.check_len()?;
        let core = ClientHeaderRepr::parse(&v.core())?;
        let start_fq = v.start_fq().map(StartFqRepr::parse).transpose()?;
        let isoch_settings = v
            .isoch_settings()
            .map(IsochSettingsRepr::parse)
            .transpose()?;
        Ok(TcpTestHeaderRepr {
            core,
            start_fq,
            isoch_settings,
        })
    }

    /// Bytes `emit` writes: 60, 80 or 112.
    pub fn buffer_len(&self) -> usize {
        if self.isoch_settings.is_some() {
            LEN_WITH_ISOCH
        } else if self.start_fq.is_some() {
            LEN_WITH_START
        } else {
            CORE_LEN
        }
    }

    /// Writes the header (LEN field = [`buffer_len`](Self::buffer_len)) into the
    /// first `buffer_len()` bytes of the view's buffer. A shorter buffer gets a
    /// truncated header (never a panic); size it with `buffer_len()`.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut TcpTestHeader<T>) {
        let len = self.buffer_len();
        let b = v.buffer.as_mut();
        self.core
            .emit_with_layout(&mut ClientHeader::new_unchecked(&mut *b), len, false);
        if len >= LEN_WITH_START
            && let Some(dst) = b.get_mut(field::START_FQ)
        {
            self.start_fq.unwrap_or_default().emit(dst);
        }
        if let (Some(s), Some(dst)) = (self.isoch_settings, b.get_mut(field::ISOCH_SETTINGS)) {
            s.emit(dst);
        }
    }
}
