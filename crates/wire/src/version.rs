//! iperf 2 version words (`version_u`, `version_l`).

use std::fmt;

/// A peer's iperf 2 version: `version_u = (major << 16) | minor`,
/// `version_l = (patch << 16) | kind`. Displays as iperf 2 prints it
/// (`2.1.8`, `2.1.99-private`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerVersion {
    /// Major version.
    pub major: u16,
    /// Minor version.
    pub minor: u16,
    /// Patch level.
    pub patch: u16,
    /// Release kind.
    pub kind: VersionKind,
}

/// The release kind in the low half of `version_l`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VersionKind {
    /// 0: development build.
    Dev,
    /// 1: release candidate.
    Rc,
    /// 2: second release candidate.
    Rc2,
    /// 3: release.
    Release,
    /// 4: private build.
    Private,
    /// 5: master branch.
    Master,
    /// Any other value, kept so a round trip is exact.
    Other(u16),
}

impl VersionKind {
    /// The wire value.
    pub fn code(self) -> u16 {
        match self {
            VersionKind::Dev => 0,
            VersionKind::Rc => 1,
            VersionKind::Rc2 => 2,
            VersionKind::Release => 3,
            VersionKind::Private => 4,
            VersionKind::Master => 5,
            VersionKind::Other(c) => c,
        }
    }

    /// Decodes a wire value.
    pub fn from_code(c: u16) -> VersionKind {
        match c {
            0 => VersionKind::Dev,
            1 => VersionKind::Rc,
            2 => VersionKind::Rc2,
            3 => VersionKind::Release,
            4 => VersionKind::Private,
            5 => VersionKind::Master,
            c => VersionKind::Other(c),
        }
    }
}

impl PeerVersion {
    /// What iperf 2.1.8 sends: `0x00020001 / 0x00080003`.
    pub const IPERF_2_1_8: PeerVersion = PeerVersion {
        major: 2,
        minor: 1,
        patch: 8,
        kind: VersionKind::Release,
    };

    /// Decodes the two words.
    pub fn from_words(version_u: u32, version_l: u32) -> PeerVersion {
        PeerVersion {
            major: (version_u >> 16) as u16,
            minor: version_u as u16,
            patch: (version_l >> 16) as u16,
            kind: VersionKind::from_code(version_l as u16),
        }
    }

    /// Encodes as `(version_u, version_l)`.
    pub fn to_words(self) -> (u32, u32) {
        (
            (u32::from(self.major) << 16) | u32::from(self.minor),
            (u32::from(self.patch) << 16) | u32::from(self.kind.code()),
        )
    }
}

impl fmt::Display for PeerVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        match self.kind {
            VersionKind::Release => Ok(()),
            VersionKind::Dev => f.write_str("-dev"),
            VersionKind::Rc => f.write_str("-rc"),
            VersionKind::Rc2 => f.write_str("-rc2"),
            VersionKind::Private => f.write_str("-private"),
            VersionKind::Master => f.write_str("-master"),
            VersionKind::Other(c) => write!(f, "-kind{c}"),
        }
    }
}
