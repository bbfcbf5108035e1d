//! `client_hdr_v1` (24 B) + `client_hdrext` (36 B): the 60-byte test header core
//! shared by TCP (at offset 0) and UDP (at offset 16 of every datagram), plus
//! the optional `client_hdrext_starttime_fq` (20 B) and
//! `client_hdrext_isoch_settings` (32 B) blocks.
//!
//! Offsets are from `offsets/offsets_2.1.8.txt` (compiled from the 2.1.8 headers).

use crate::error::need;
use crate::field::{Field, get_i32, get_u16, get_u32, set_i32, set_u16, set_u32, zero};
use crate::flags::{HeaderFlags, UpperFlags};
use crate::time::{SplitDouble, WallTime};
use crate::version::PeerVersion;
use crate::view::view_struct;
use crate::{BLOATLAB_EXT_MAGIC, WireError};
use bloatlab_units::{BitRate, Bytes};
use std::time::Duration;

/// Field map of the 60-byte core, relative to its start.
pub mod field {
    use super::Field;
    /// `client_hdr_v1.flags` ([`crate::HeaderFlags`]).
    pub const FLAGS: Field = 0..4;
    /// `numThreads` (`-P`).
    pub const NUM_THREADS: Field = 4..8;
    /// `mPort`: port for `-d`/`-r` connect-back.
    pub const PORT: Field = 8..12;
    /// `mBufLen`: `-l` if set explicitly, else 0 (bytes).
    pub const BUF_LEN: Field = 12..16;
    /// `mWinBand` (unused, 0).
    pub const WIN_BAND: Field = 16..20;
    /// `mAmount`: negative = time in 10 ms units, positive = bytes.
    pub const AMOUNT: Field = 20..24;
    /// `client_hdrext.type`: 0 in 2.1.8; bloatlab puts its magic here.
    pub const EXT_TYPE: Field = 24..28;
    /// `client_hdrext.length`: 0 in 2.1.8; bloatlab puts its extension version here.
    pub const EXT_LENGTH: Field = 28..32;
    /// `upperflags` ([`crate::UpperFlags`]).
    pub const UPPER_FLAGS: Field = 32..34;
    /// `lowerflags` (0 in 2.1.8).
    pub const LOWER_FLAGS: Field = 34..36;
    /// `version_u`.
    pub const VERSION_U: Field = 36..40;
    /// `version_l`.
    pub const VERSION_L: Field = 40..44;
    /// `reserved`.
    pub const RESERVED: Field = 44..46;
    /// `tos`: the IP TOS byte the server should apply.
    pub const TOS: Field = 46..48;
    /// `lRate`: rate, low 32 bits.
    pub const RATE_LOW: Field = 48..52;
    /// `uRate`: `(rate >> 32) << 8`.
    pub const RATE_HIGH: Field = 52..56;
    /// `TCPWritePrefetch` (bytes).
    pub const WRITE_PREFETCH: Field = 56..60;
}

/// Size of `client_hdr_v1`.
pub const V1_LEN: usize = 24;
/// Size of `client_hdrext` in 2.1.8.
pub const EXT_LEN: usize = 36;
/// Size of the core (`client_hdr_v1` + `client_hdrext`).
pub const CORE_LEN: usize = V1_LEN + EXT_LEN;

/// How long a test runs (`mAmount`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Amount {
    /// `-t`: sent as `-(centiseconds)`.
    Time(Duration),
    /// `-n`: sent as `bytes & 0x7FFFFFFF`.
    Bytes(Bytes),
}

impl Amount {
    /// Decodes `mAmount`.
    pub fn from_wire(v: i32) -> Amount {
        if v < 0 {
            Amount::Time(Duration::from_millis(10 * i64::from(v).unsigned_abs()))
        } else {
            Amount::Bytes(Bytes(v as u64))
        }
    }

    /// Encodes `mAmount`. Times round to the nearest 10 ms (at least 10 ms for a
    /// non-zero time) and saturate; byte counts keep their low 31 bits, as iperf 2 does.
    pub fn to_wire(self) -> i32 {
        match self {
            Amount::Time(d) => {
                let cs = (d.as_millis().saturating_add(5) / 10).max(u128::from(!d.is_zero()));
                // -(2^31) centiseconds is representable, so saturate at i32::MIN.
                let neg = -i64::try_from(cs).unwrap_or(i64::MAX);
                i32::try_from(neg).unwrap_or(i32::MIN)
            }
            Amount::Bytes(b) => (b.0 & 0x7FFF_FFFF) as i32,
        }
    }
}

/// The requested rate (`lRate`/`uRate`), in bits or packets per second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rate {
    /// Bits per second (the usual `-b`).
    Bits(BitRate),
    /// Packets per second (`-b 100pps`; [`UpperFlags::UNITS_PPS`] on the wire).
    PacketsPerSec(u64),
}

impl Rate {
    fn from_wire(low: u32, high: u32, pps: bool) -> Rate {
        let v = u64::from(low) | (u64::from(high >> 8) << 32);
        if pps {
            Rate::PacketsPerSec(v)
        } else {
            Rate::Bits(BitRate(v))
        }
    }

    fn to_wire(self) -> (u32, u32, bool) {
        let (v, pps) = match self {
            Rate::Bits(b) => (b.0, false),
            Rate::PacketsPerSec(p) => (p, true),
        };
        // uRate keeps only 24 bits of the high word: rates above 2^56 are cut, as in iperf 2.
        (v as u32, ((v >> 32) as u32) << 8, pps)
    }
}

view_struct!(
    /// A view of the 60-byte test header core.
    ClientHeader
);

impl<T: AsRef<[u8]>> ClientHeader<T> {
    /// Needs [`CORE_LEN`] bytes.
    pub fn check_len(&self) -> Result<(), WireError> {
        need(self.buffer.as_ref(), CORE_LEN)
    }
    /// Flags word.
    pub fn flags(&self) -> HeaderFlags {
        HeaderFlags(get_u32(self.buffer.as_ref(), field::FLAGS))
    }
    /// `numThreads`.
    pub fn num_threads(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::NUM_THREADS)
    }
    /// `mPort`.
    pub fn port(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::PORT)
    }
    /// `mBufLen` in bytes (0 = not set).
    pub fn buf_len(&self) -> Bytes {
        Bytes(u64::from(get_u32(self.buffer.as_ref(), field::BUF_LEN)))
    }
    /// `mWinBand`.
    pub fn win_band(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::WIN_BAND)
    }
    /// `mAmount`, decoded.
    pub fn amount(&self) -> Amount {
        Amount::from_wire(get_i32(self.buffer.as_ref(), field::AMOUNT))
    }
    /// `client_hdrext.type`.
    pub fn ext_type(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::EXT_TYPE)
    }
    /// `client_hdrext.length`.
    pub fn ext_length(&self) -> u32 {
        get_u32(self.buffer.as_ref(), field::EXT_LENGTH)
    }
    /// Upper flags.
    pub fn upper_flags(&self) -> UpperFlags {
        UpperFlags(get_u16(self.buffer.as_ref(), field::UPPER_FLAGS))
    }
    /// Lower flags.
    pub fn lower_flags(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::LOWER_FLAGS)
    }
    /// The sender's version.
    pub fn version(&self) -> PeerVersion {
        let b = self.buffer.as_ref();
        PeerVersion::from_words(get_u32(b, field::VERSION_U), get_u32(b, field::VERSION_L))
    }
    /// `tos`.
    pub fn tos(&self) -> u16 {
        get_u16(self.buffer.as_ref(), field::TOS)
    }
    /// The rate, in the units the upper flags say.
    pub fn rate(&self) -> Rate {
        let b = self.buffer.as_ref();
        Rate::from_wire(
            get_u32(b, field::RATE_LOW),
            get_u32(b, field::RATE_HIGH),
            self.upper_flags().contains(UpperFlags::UNITS_PPS),
        )
    }
    /// `TCPWritePrefetch` in bytes.
    pub fn write_prefetch(&self) -> Bytes {
        Bytes(u64::from(get_u32(
            self.buffer.as_ref(),
            field::WRITE_PREFETCH,
        )))
    }
    /// The bloatlab extension version if the sender marked the header as bloatlab's.
    pub fn bloatlab_ext(&self) -> Option<u32> {
        (self.ext_type() == BLOATLAB_EXT_MAGIC).then(|| self.ext_length())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ClientHeader<T> {
    /// Sets the flags word.
    pub fn set_flags(&mut self, v: HeaderFlags) {
        set_u32(self.buffer.as_mut(), field::FLAGS, v.0)
    }
}

/// The parsed 60-byte core.
///
/// `flags` holds every flag bit except the layout bits (`LEN_BIT`, the LEN
/// field and `KEYCHECK`), which the enclosing header computes on emit.
/// `upper_flags` never holds `UNITS_PPS`: that bit is carried by `rate`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClientHeaderRepr {
    /// Flag bits (without layout bits).
    pub flags: HeaderFlags,
    /// `-P` stream count.
    pub num_threads: u32,
    /// `mPort`.
    pub port: u32,
    /// `-l` if explicitly set, else 0.
    pub buf_len: Bytes,
    /// `mWinBand` (unused).
    pub win_band: u32,
    /// Test length.
    pub amount: Amount,
    /// `client_hdrext.type` ([`BLOATLAB_EXT_MAGIC`] marks a bloatlab client).
    pub ext_type: u32,
    /// `client_hdrext.length` (the bloatlab extension version when marked).
    pub ext_length: u32,
    /// Upper flags (without `UNITS_PPS`).
    pub upper_flags: UpperFlags,
    /// Lower flags.
    pub lower_flags: u16,
    /// Sender version.
    pub version: PeerVersion,
    /// Requested IP TOS.
    pub tos: u16,
    /// Requested rate.
    pub rate: Rate,
    /// `TCPWritePrefetch`.
    pub write_prefetch: Bytes,
}

/// Flag bits that describe layout rather than the test.
const LAYOUT_FLAGS: HeaderFlags =
    HeaderFlags(HeaderFlags::LEN_BIT.0 | HeaderFlags::LEN_MASK | HeaderFlags::KEYCHECK.0);

impl ClientHeaderRepr {
    /// A header as a 2.1.8 client would send it for a plain forward test:
    /// `EXTEND`, one stream, no rate, version 2.1.8.
    pub fn new(amount: Amount) -> ClientHeaderRepr {
        ClientHeaderRepr {
            flags: HeaderFlags::EXTEND,
            num_threads: 1,
            port: 0,
            buf_len: Bytes(0),
            win_band: 0,
            amount,
            ext_type: 0,
            ext_length: 0,
            upper_flags: UpperFlags(0),
            lower_flags: 0,
            version: PeerVersion::IPERF_2_1_8,
            tos: 0,
            rate: Rate::Bits(BitRate(0)),
            write_prefetch: Bytes(0),
        }
    }

    /// Parses the core. Never fails on content, only on length.
    pub fn parse<T: AsRef<[u8]>>(v: &ClientHeader<T>) -> Result<ClientHeaderRepr, WireError> {
        v.check_len()?;
        Ok(ClientHeaderRepr {
            flags: v.flags().without(LAYOUT_FLAGS),
            num_threads: v.num_threads(),
            port: v.port(),
            buf_len: v.buf_len(),
            win_band: v.win_band(),
            amount: v.amount(),
            ext_type: v.ext_type(),
            ext_length: v.ext_length(),
            upper_flags: v.upper_flags().without(UpperFlags::UNITS_PPS),
            lower_flags: v.lower_flags(),
            version: v.version(),
            tos: v.tos(),
            rate: v.rate(),
            write_prefetch: v.write_prefetch(),
        })
    }

    /// Writes the core with the given layout bits (`LEN` value and `KEYCHECK`).
    pub(crate) fn emit_with_layout<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        v: &mut ClientHeader<T>,
        len: usize,
        keycheck: bool,
    ) {
        let mut flags = self.flags.without(LAYOUT_FLAGS).with_len(len);
        if keycheck {
            flags = flags.with(HeaderFlags::KEYCHECK);
        }
        let (rate_low, rate_high, pps) = self.rate.to_wire();
        let upper = if pps {
            self.upper_flags.with(UpperFlags::UNITS_PPS)
        } else {
            self.upper_flags.without(UpperFlags::UNITS_PPS)
        };
        let (vu, vl) = self.version.to_words();
        let b = v.buffer.as_mut();
        set_u32(b, field::FLAGS, flags.0);
        set_u32(b, field::NUM_THREADS, self.num_threads);
        set_u32(b, field::PORT, self.port);
        set_u32(b, field::BUF_LEN, self.buf_len.0 as u32);
        set_u32(b, field::WIN_BAND, self.win_band);
        set_i32(b, field::AMOUNT, self.amount.to_wire());
        set_u32(b, field::EXT_TYPE, self.ext_type);
        set_u32(b, field::EXT_LENGTH, self.ext_length);
        set_u16(b, field::UPPER_FLAGS, upper.0);
        set_u16(b, field::LOWER_FLAGS, self.lower_flags);
        set_u32(b, field::VERSION_U, vu);
        set_u32(b, field::VERSION_L, vl);
        set_u16(b, field::RESERVED, 0);
        set_u16(b, field::TOS, self.tos);
        set_u32(b, field::RATE_LOW, rate_low);
        set_u32(b, field::RATE_HIGH, rate_high);
        set_u32(b, field::WRITE_PREFETCH, self.write_prefetch.0 as u32);
    }

    /// The bloatlab extension version if the header is marked as bloatlab's.
    pub fn bloatlab_ext(&self) -> Option<u32> {
        (self.ext_type == BLOATLAB_EXT_MAGIC).then_some(self.ext_length)
    }

    /// Marks the header as sent by a bloatlab client speaking extension `version`
    /// (`client_hdrext.type = "BLAB"`, `client_hdrext.length = version`).
    pub fn with_bloatlab_ext(mut self, version: u32) -> ClientHeaderRepr {
        self.ext_type = BLOATLAB_EXT_MAGIC;
        self.ext_length = version;
        self
    }
}

/// `client_hdrext_starttime_fq` (20 B): field map relative to its start.
pub mod start_fq_field {
    use super::Field;
    /// `reserved` (2.2.x: `barrier_usecs` sits here).
    pub const RESERVED: Field = 0..4;
    /// `start_tv_sec`: client start (trip-times) or epoch start (`--txstart-time`).
    pub const START_SEC: Field = 4..8;
    /// `start_tv_usec`.
    pub const START_USEC: Field = 8..12;
    /// `fqratel`: `--fq-rate` low word (bytes/s).
    pub const FQ_RATE_LOW: Field = 12..16;
    /// `fqrateu`: `--fq-rate` high word.
    pub const FQ_RATE_HIGH: Field = 16..20;
}
/// Size of `client_hdrext_starttime_fq` in 2.1.8.
pub const START_FQ_LEN: usize = 20;

/// Parsed `client_hdrext_starttime_fq`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct StartFqRepr {
    /// Client start time (trip-times) or the epoch to start at (`EPOCH_START`).
    pub start: WallTime,
    /// `--fq-rate` in bytes per second (SO_MAX_PACING_RATE units); 0 if unset.
    pub fq_rate_bytes_per_sec: u64,
}

impl StartFqRepr {
    /// Reads the block from `b` (which must hold [`START_FQ_LEN`] bytes).
    pub fn parse(b: &[u8]) -> Result<StartFqRepr, WireError> {
        need(b, START_FQ_LEN)?;
        Ok(StartFqRepr {
            start: WallTime {
                sec: get_u32(b, start_fq_field::START_SEC),
                usec: get_u32(b, start_fq_field::START_USEC),
            },
            fq_rate_bytes_per_sec: u64::from(get_u32(b, start_fq_field::FQ_RATE_LOW))
                | (u64::from(get_u32(b, start_fq_field::FQ_RATE_HIGH)) << 32),
        })
    }

    /// Writes the block to the first [`START_FQ_LEN`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        set_u32(b, start_fq_field::RESERVED, 0);
        set_u32(b, start_fq_field::START_SEC, self.start.sec);
        set_u32(b, start_fq_field::START_USEC, self.start.usec);
        set_u32(
            b,
            start_fq_field::FQ_RATE_LOW,
            self.fq_rate_bytes_per_sec as u32,
        );
        set_u32(
            b,
            start_fq_field::FQ_RATE_HIGH,
            (self.fq_rate_bytes_per_sec >> 32) as u32,
        );
    }
}

/// `client_hdrext_isoch_settings` (32 B): four [`SplitDouble`]s.
pub mod isoch_settings_field {
    use super::Field;
    /// Frames per second.
    pub const FPS: Field = 0..8;
    /// Mean (bits/s; periodic burst: burst size).
    pub const MEAN: Field = 8..16;
    /// Variance.
    pub const VARIANCE: Field = 16..24;
    /// Burst inter-packet gap.
    pub const BURST_IPG: Field = 24..32;
}
/// Size of `client_hdrext_isoch_settings`.
pub const ISOCH_SETTINGS_LEN: usize = 32;

/// Parsed `client_hdrext_isoch_settings`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IsochSettingsRepr {
    /// Frames per second.
    pub fps: SplitDouble,
    /// Mean rate in bits/s (periodic burst: burst size in bytes).
    pub mean: SplitDouble,
    /// Variance (bits/s).
    pub variance: SplitDouble,
    /// Burst inter-packet gap (seconds).
    pub burst_ipg: SplitDouble,
}

pub(crate) fn get_split(b: &[u8], f: Field) -> SplitDouble {
    SplitDouble {
        int: get_i32(b, f.start..f.start + 4),
        frac_e6: get_i32(b, f.start + 4..f.end),
    }
}

pub(crate) fn set_split(b: &mut [u8], f: Field, v: SplitDouble) {
    set_i32(b, f.start..f.start + 4, v.int);
    set_i32(b, f.start + 4..f.end, v.frac_e6);
}

impl IsochSettingsRepr {
    /// Reads the block from `b`.
    pub fn parse(b: &[u8]) -> Result<IsochSettingsRepr, WireError> {
        need(b, ISOCH_SETTINGS_LEN)?;
        Ok(IsochSettingsRepr {
            fps: get_split(b, isoch_settings_field::FPS),
            mean: get_split(b, isoch_settings_field::MEAN),
            variance: get_split(b, isoch_settings_field::VARIANCE),
            burst_ipg: get_split(b, isoch_settings_field::BURST_IPG),
        })
    }

    /// Writes the block to the first [`ISOCH_SETTINGS_LEN`] bytes of `b`.
    pub fn emit(&self, b: &mut [u8]) {
        zero(b, 0..ISOCH_SETTINGS_LEN);
        set_split(b, isoch_settings_field::FPS, self.fps);
        set_split(b, isoch_settings_field::MEAN, self.mean);
        set_split(b, isoch_settings_field::VARIANCE, self.variance);
        set_split(b, isoch_settings_field::BURST_IPG, self.burst_ipg);
    }
}
