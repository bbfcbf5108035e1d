//! The test catalogue: names, one-line descriptions, and DSCP markings.
//!
//! Markings follow flent's `rrul.conf` (anchors §1.2): the four TCP flows per direction are
//! CS0 (BE), CS1 (BK), CS5 and EF; the UDP probes EF, CS1 (BK) and unmarked (BE).

/// Moved to `bloatlab_units::tos` (one rule for every crate); named here as before.
pub use bloatlab_units::tos::{BadMarking, Tos, parse_marking};

use std::fmt;
use std::str::FromStr;

/// A test `bloatlab test NAME` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TestName {
    /// 4 up + 4 down TCP flows (CS0/CS1/CS5/EF), UDP probes EF/BK/BE and ICMP.
    Rrul,
    /// 4 up + 4 down unmarked TCP flows, three unmarked UDP probes and ICMP.
    RrulBe,
    /// RRUL over both IP families (flent's `rrul46`): BE and BK flows and UDP BE/BK
    /// probes over IPv4, CS5 and EF flows and UDP BE/BK probes over IPv6, ICMP over both.
    Rrul46,
    /// One TCP upload.
    TcpUpload,
    /// One TCP download.
    TcpDownload,
    /// One TCP upload and one TCP download at once.
    TcpBidirectional,
    /// N TCP uploads (`--flows`).
    TcpNup,
    /// N TCP downloads (`--flows`).
    TcpNdown,
    /// N downloads, then N uploads, one direction at a time.
    Speedtest,
    /// Probes only, no load.
    Ping,
    /// Two competing long uploads (seed report 3).
    OneVsOne,
    /// A long upload against 40 sequential 1 MB uploads (seed report 3).
    OneVsPulses,
    /// An isochronous VoIP-like stream (50 pps, 172 B) with an E-model MOS, under a 1+1 load.
    Voip,
    /// The draft's responsiveness run (`bloatlab rpm`) as the load, with UDP and ICMP probes.
    Rpm,
}

impl TestName {
    /// Every test, in the order `--list` shows them.
    pub const ALL: [TestName; 14] = [
        TestName::Rrul,
        TestName::RrulBe,
        TestName::Rrul46,
        TestName::TcpUpload,
        TestName::TcpDownload,
        TestName::TcpBidirectional,
        TestName::TcpNup,
        TestName::TcpNdown,
        TestName::Speedtest,
        TestName::Ping,
        TestName::OneVsOne,
        TestName::OneVsPulses,
        TestName::Voip,
        TestName::Rpm,
    ];

    /// The command-line name.
    pub fn as_str(self) -> &'static str {
        match self {
            TestName::Rrul => "rrul",
            TestName::RrulBe => "rrul_be",
            TestName::Rrul46 => "rrul46",
            TestName::TcpUpload => "tcp_upload",
            TestName::TcpDownload => "tcp_download",
            TestName::TcpBidirectional => "tcp_bidirectional",
            TestName::TcpNup => "tcp_nup",
            TestName::TcpNdown => "tcp_ndown",
            TestName::Speedtest => "speedtest",
            TestName::Ping => "ping",
            TestName::OneVsOne => "one_vs_one",
            TestName::OneVsPulses => "one_vs_pulses",
            TestName::Voip => "voip",
            TestName::Rpm => "rpm",
        }
    }

    /// Whether the test runs over IPv4 and IPv6 at once: it needs an address of each
    /// family for the server (`--v6`).
    pub fn dual_stack(self) -> bool {
        self == TestName::Rrul46
    }

    /// One line for the list of tests.
    pub fn description(self) -> &'static str {
        match self {
            TestName::Rrul => {
                "4 up + 4 down TCP flows marked CS0/CS1/CS5/EF, UDP probes EF/BK/BE and ICMP"
            }
            TestName::RrulBe => "4 up + 4 down unmarked TCP flows, 3 UDP probes and ICMP",
            TestName::Rrul46 => {
                "rrul over IPv4 and IPv6 at once: BE/BK flows over IPv4, CS5/EF over IPv6, probes over both"
            }
            TestName::TcpUpload => "1 TCP upload, with UDP and ICMP probes",
            TestName::TcpDownload => "1 TCP download, with UDP and ICMP probes",
            TestName::TcpBidirectional => "1 TCP upload and 1 TCP download at once, with probes",
            TestName::TcpNup => "N TCP uploads (--flows N, default 4), with probes",
            TestName::TcpNdown => "N TCP downloads (--flows N, default 4), with probes",
            TestName::Speedtest => {
                "N downloads, then N uploads (one direction at a time), with probes"
            }
            TestName::Ping => "UDP and ICMP probes on an idle link (-l seconds)",
            TestName::OneVsOne => "two competing long TCP uploads",
            TestName::OneVsPulses => "a long TCP upload against 40 sequential 1 MB uploads",
            TestName::Voip => {
                "50 pps 172-byte UDP stream with an E-model MOS, under 1 up + 1 down TCP flow"
            }
            TestName::Rpm => {
                "the draft's RPM run (bloatlab rpm, HTTPS on --rpm-port 8443) as the load, with UDP and ICMP probes"
            }
        }
    }
}

impl fmt::Display for TestName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `NAME` is not a test; the message lists the available ones.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown test {name:?}; available tests:\n{}", list_tests())]
pub struct UnknownTest {
    /// What the user typed.
    pub name: String,
}

impl FromStr for TestName {
    type Err = UnknownTest;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // flent spells some names with dashes; accept both.
        let norm = s.trim().to_ascii_lowercase().replace('-', "_");
        TestName::ALL
            .into_iter()
            .find(|t| t.as_str() == norm)
            .ok_or_else(|| UnknownTest { name: s.to_owned() })
    }
}

/// The available tests, one per line: `  name  description`.
pub fn list_tests() -> String {
    TestName::ALL
        .iter()
        .map(|t| format!("  {:<18} {}", t.as_str(), t.description()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_dashes_are_accepted() {
        for t in TestName::ALL {
            assert_eq!(t.as_str().parse::<TestName>(), Ok(t));
        }
        assert_eq!("RRUL-BE".parse::<TestName>(), Ok(TestName::RrulBe));
    }

    #[test]
    fn unknown_test_lists_every_test() {
        let e = "rrul_bogus".parse::<TestName>().unwrap_err().to_string();
        assert!(e.starts_with("unknown test \"rrul_bogus\""), "{e}");
        for t in TestName::ALL {
            assert!(e.contains(t.as_str()), "{t} missing from {e}");
        }
    }

    #[test]
    fn markings() {
        assert_eq!(parse_marking("ef"), Ok(Tos(0xb8)));
        assert_eq!(parse_marking("CS1"), Ok(Tos(0x20)));
        assert_eq!(parse_marking("cs5"), Ok(Tos(0xa0)));
        assert_eq!(parse_marking("af41"), Ok(Tos(0x88)));
        assert_eq!(parse_marking("af11"), Ok(Tos(0x28)));
        assert_eq!(parse_marking("0xb8"), Ok(Tos(184)));
        assert_eq!(parse_marking("32"), Ok(Tos(32)));
        assert_eq!(parse_marking("le"), Ok(Tos(4)));
        assert!(parse_marking("cs8").is_err());
        assert!(parse_marking("af44").is_err());
        assert!(parse_marking("0x1ff").is_err());
        assert_eq!(Tos::EF.to_arg(), "0xb8");
        assert_eq!(Tos::CS0.to_arg(), "0x00");
    }
}
