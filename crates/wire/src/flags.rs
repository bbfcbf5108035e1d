//! Flag words of the test header (README section 5.2).

use std::fmt;

/// `client_hdr_v1.flags` (32 bits). Constants are the iperf 2 `HEADER_*` bits.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct HeaderFlags(pub u32);

impl HeaderFlags {
    /// Legacy `-d`/`-r`: the server connects back to the client.
    pub const VERSION1: HeaderFlags = HeaderFlags(0x8000_0000);
    /// `client_hdrext` follows (always set by 2.x clients).
    pub const EXTEND: HeaderFlags = HeaderFlags(0x4000_0000);
    /// UDP: upper flags carry per-packet test options; the isoch/start-time
    /// blocks follow the extension.
    pub const UDPTESTS: HeaderFlags = HeaderFlags(0x2000_0000);
    /// A permit key follows; the LEN field is then the key value's offset.
    pub const KEYCHECK: HeaderFlags = HeaderFlags(0x1000_0000);
    /// UDP: 64-bit sequence numbers (`id` + `id2`).
    pub const SEQNO64B: HeaderFlags = HeaderFlags(0x0800_0000);
    /// 2.0.14+ semantics (reverse/full-duplex); suppresses the automatic ack.
    pub const VERSION2: HeaderFlags = HeaderFlags(0x0400_0000);
    /// `-X`: the server must send the ack and the client waits for it.
    pub const V2PEERDETECT: HeaderFlags = HeaderFlags(0x0200_0000);
    /// The message is a bounceback header, not a test header.
    pub const BOUNCEBACK: HeaderFlags = HeaderFlags(0x0080_0000);
    /// UDP with tiny datagrams: 16-bit flags at offset 16.
    pub const SMALL_TRIPTIMES: HeaderFlags = HeaderFlags(0x0002_0000);
    /// Bits 1..8 hold the header length (see [`HeaderFlags::LEN_MASK`]).
    pub const LEN_BIT: HeaderFlags = HeaderFlags(0x0001_0000);
    /// `len = (flags & LEN_MASK) >> 1`.
    pub const LEN_MASK: u32 = 0x0000_01FE;
    /// `-d` (start the reverse traffic now) rather than `-r`.
    pub const RUN_NOW: HeaderFlags = HeaderFlags(0x0000_0001);

    /// The raw word.
    pub const fn bits(self) -> u32 {
        self.0
    }

    /// True if every bit of `other` is set.
    pub const fn contains(self, other: HeaderFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// True if any bit of `other` is set.
    pub const fn intersects(self, other: HeaderFlags) -> bool {
        self.0 & other.0 != 0
    }

    /// `self` with `other`'s bits set.
    pub const fn with(self, other: HeaderFlags) -> HeaderFlags {
        HeaderFlags(self.0 | other.0)
    }

    /// `self` with `other`'s bits cleared.
    pub const fn without(self, other: HeaderFlags) -> HeaderFlags {
        HeaderFlags(self.0 & !other.0)
    }

    /// The LEN field (bytes), if `LEN_BIT` is set.
    pub const fn len_field(self) -> Option<usize> {
        if self.contains(HeaderFlags::LEN_BIT) {
            Some(((self.0 & HeaderFlags::LEN_MASK) >> 1) as usize)
        } else {
            None
        }
    }

    /// `self` with `LEN_BIT` set and the LEN field holding `len` (max 255).
    pub const fn with_len(self, len: usize) -> HeaderFlags {
        let len = if len > 255 { 255 } else { len } as u32;
        HeaderFlags((self.0 & !HeaderFlags::LEN_MASK) | HeaderFlags::LEN_BIT.0 | (len << 1))
    }

    /// `self` without `LEN_BIT` and the LEN field (they describe the layout,
    /// which a `Repr` recomputes on emit).
    pub const fn without_len(self) -> HeaderFlags {
        HeaderFlags(self.0 & !(HeaderFlags::LEN_BIT.0 | HeaderFlags::LEN_MASK))
    }
}

impl fmt::Debug for HeaderFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HeaderFlags({:#010x})", self.0)
    }
}

impl std::ops::BitOr for HeaderFlags {
    type Output = HeaderFlags;
    fn bitor(self, rhs: HeaderFlags) -> HeaderFlags {
        self.with(rhs)
    }
}

/// `client_hdrext.upperflags` (16 bits): the test options.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct UpperFlags(pub u16);

impl UpperFlags {
    /// `--isochronous`.
    pub const ISOCH: UpperFlags = UpperFlags(0x0001);
    /// L2 IPv6 check.
    pub const L2ETHPIPV6: UpperFlags = UpperFlags(0x0002);
    /// L2 length check.
    pub const L2LENCHECK: UpperFlags = UpperFlags(0x0004);
    /// UDP: no FIN/AckFIN exchange.
    pub const NOUDPFIN: UpperFlags = UpperFlags(0x0008);
    /// `--trip-times`: TCP bursts are framed with the 92-byte header.
    pub const TRIPTIME: UpperFlags = UpperFlags(0x0010);
    /// The isoch settings block is present.
    pub const ISOCH_SETTINGS: UpperFlags = UpperFlags(0x0040);
    /// The rate is in packets per second.
    pub const UNITS_PPS: UpperFlags = UpperFlags(0x0080);
    /// `-b` was given.
    pub const BWSET: UpperFlags = UpperFlags(0x0100);
    /// `--fq-rate` was given.
    pub const FQRATESET: UpperFlags = UpperFlags(0x0200);
    /// `-R`: the server sends.
    pub const REVERSE: UpperFlags = UpperFlags(0x0400);
    /// `--full-duplex`: both send on one connection.
    pub const FULLDUPLEX: UpperFlags = UpperFlags(0x0800);
    /// `--txstart-time`: the start time is an epoch to start at.
    pub const EPOCH_START: UpperFlags = UpperFlags(0x1000);
    /// Periodic bursts.
    pub const PERIODICBURST: UpperFlags = UpperFlags(0x2000);
    /// `TCPWritePrefetch` is meaningful.
    pub const WRITEPREFETCH: UpperFlags = UpperFlags(0x4000);
    /// TCP_QUICKACK requested.
    pub const TCPQUICKACK: UpperFlags = UpperFlags(0x8000);

    /// The raw word.
    pub const fn bits(self) -> u16 {
        self.0
    }

    /// True if every bit of `other` is set.
    pub const fn contains(self, other: UpperFlags) -> bool {
        self.0 & other.0 == other.0
    }

    /// `self` with `other`'s bits set.
    pub const fn with(self, other: UpperFlags) -> UpperFlags {
        UpperFlags(self.0 | other.0)
    }

    /// `self` with `other`'s bits cleared.
    pub const fn without(self, other: UpperFlags) -> UpperFlags {
        UpperFlags(self.0 & !other.0)
    }
}

impl fmt::Debug for UpperFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "UpperFlags({:#06x})", self.0)
    }
}

impl std::ops::BitOr for UpperFlags {
    type Output = UpperFlags;
    fn bitor(self, rhs: UpperFlags) -> UpperFlags {
        self.with(rhs)
    }
}
