//! The IP TOS byte a flow is marked with, and the DSCP names users write for it
//! (RFC 4594's service classes, RFC 8622's LE, RFC 5865's VOICE-ADMIT): one rule for
//! `bloatlab test --markings` and experiment files.

/// An IP TOS byte (DSCP << 2, ECN bits zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tos(pub u8);

impl Tos {
    /// DSCP CS0 (best effort).
    pub const CS0: Tos = Tos(0);
    /// DSCP CS1 (background, "BK").
    pub const CS1: Tos = Tos(8 << 2);
    /// DSCP CS5.
    pub const CS5: Tos = Tos(40 << 2);
    /// DSCP EF (expedited forwarding, RFC 3246).
    pub const EF: Tos = Tos(46 << 2);

    /// `0xb8` style, what `bloatlab client -S` and `bloatlab ping --tos` accept.
    pub fn to_arg(self) -> String {
        format!("{:#04x}", self.0)
    }
}

/// A marking that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid marking {value:?}: use a DSCP name (cs0..cs7, af11..af43, ef, le, va) or a TOS byte (0xb8, 184)"
)]
pub struct BadMarking {
    /// The rejected text.
    pub value: String,
}

/// Parses a DSCP name (RFC 4594 names: `cs0`..`cs7`, `af11`..`af43`, `ef`, `le` (RFC
/// 8622), `va` (RFC 5865), `be` = `cs0`, `bk` = `cs1`) or a raw TOS byte (`0xb8`, `184`).
pub fn parse_marking(s: &str) -> Result<Tos, BadMarking> {
    let bad = || BadMarking {
        value: s.to_owned(),
    };
    let t = s.trim().to_ascii_lowercase();
    let dscp = |d: u8| Ok(Tos(d << 2));
    match t.as_str() {
        "be" => return dscp(0),
        "bk" => return dscp(8),
        "ef" => return dscp(46),
        "le" => return dscp(1),
        "va" => return dscp(44),
        _ => {}
    }
    if let Some(n) = t.strip_prefix("cs") {
        return match n.parse::<u8>() {
            Ok(c) if c <= 7 => dscp(c * 8),
            _ => Err(bad()),
        };
    }
    if let Some(n) = t.strip_prefix("af") {
        let b = n.as_bytes();
        return match b {
            [c @ b'1'..=b'4', p @ b'1'..=b'3'] => dscp((c - b'0') * 8 + (p - b'0') * 2),
            _ => Err(bad()),
        };
    }
    let v = if let Some(h) = t.strip_prefix("0x") {
        u8::from_str_radix(h, 16)
    } else {
        t.parse::<u8>()
    };
    v.map(Tos).map_err(|_| bad())
}
