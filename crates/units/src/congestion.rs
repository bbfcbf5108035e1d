//! A TCP congestion control name (`cubic`, `reno`, `bbr`), validated once.
//!
//! One rule, wherever the name comes from (a flag, a lab spec, a peer's
//! header or hello, a results journal): 1 to [`CongestionControl::MAX_LEN`]
//! bytes of ASCII letters, digits and `_`. The length is the kernel's
//! `TCP_CA_NAME_MAX` (16) less its NUL: `setsockopt(TCP_CONGESTION)` copies
//! at most 15 bytes and would silently use a truncated name. The character
//! set is what every kernel module and BPF struct_ops name in use spells, and
//! it keeps the name safe in a file name, a sysctl value and a command line.
//! Whether the running kernel *has* the algorithm is only known by asking it
//! (the engine's socket code reports that as its own error).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A congestion control name that satisfies the one rule (module docs).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CongestionControl(String);

/// A string that is not a congestion control name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a congestion control name (e.g. cubic, reno, bbr)")]
pub struct BadCongestionControl(pub String);

impl CongestionControl {
    /// Longest name in bytes: the kernel's `TCP_CA_NAME_MAX` (16) less its NUL.
    pub const MAX_LEN: usize = 15;

    /// Checks `name` against the rule.
    pub fn new(name: &str) -> Result<CongestionControl, BadCongestionControl> {
        let ok = !name.is_empty()
            && name.len() <= Self::MAX_LEN
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if ok {
            Ok(CongestionControl(name.to_owned()))
        } else {
            Err(BadCongestionControl(name.to_owned()))
        }
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for CongestionControl {
    type Err = BadCongestionControl;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CongestionControl::new(s)
    }
}

impl TryFrom<String> for CongestionControl {
    type Error = BadCongestionControl;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        CongestionControl::new(&s)
    }
}

impl From<CongestionControl> for String {
    fn from(c: CongestionControl) -> String {
        c.0
    }
}

/// Read-only access to the name (`Option::as_deref`, comparisons, `&str` arguments).
impl std::ops::Deref for CongestionControl {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for CongestionControl {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for CongestionControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<str> for CongestionControl {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for CongestionControl {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_are_accepted() {
        for n in [
            "cubic",
            "reno",
            "bbr",
            "dctcp",
            "bpf_cubic",
            "highspeed",
            "westwood",
        ] {
            assert_eq!(CongestionControl::new(n).unwrap().as_str(), n);
        }
        // Exactly TCP_CA_NAME_MAX - 1 bytes still fits.
        assert!(CongestionControl::new(&"a".repeat(15)).is_ok());
    }

    #[test]
    fn the_rule_refuses_what_the_kernel_would_mangle_or_a_file_name_would_break() {
        for n in ["", "a b", "cu-bic", "a/b", "cubic\0", "ré", " cubic", "a.b"] {
            assert_eq!(
                CongestionControl::new(n),
                Err(BadCongestionControl(n.into())),
                "{n:?}"
            );
        }
        // 16 bytes: setsockopt would truncate it to 15 and use another name.
        assert!(CongestionControl::new(&"a".repeat(16)).is_err());
    }

    #[test]
    fn serde_is_the_bare_string_and_applies_the_rule() {
        let c = CongestionControl::new("bbr").unwrap();
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"bbr\"");
        let back: CongestionControl = serde_json::from_str("\"bbr\"").unwrap();
        assert_eq!(back, c);
        assert!(serde_json::from_str::<CongestionControl>("\"b b\"").is_err());
    }

    #[test]
    fn error_names_the_value() {
        let e = "a b".parse::<CongestionControl>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "`a b` is not a congestion control name (e.g. cubic, reno, bbr)"
        );
    }
}
