//! Names of everything a lab creates. Every object carries the prefix
//! `bl-NAME-`, so `lab down NAME` can remove leftovers by exact name and
//! never touches anything else.

use crate::error::{LabError, Result};

/// Prefix of every namespace a lab creates.
pub const PREFIX: &str = "bl-";

/// Longest lab name. Keeps `bl-NAME-client99` readable and leaves room in
/// interface names derived from it.
pub(crate) const MAX_NAME: usize = 16;

/// Checks a lab name: 1-16 characters of `a-z0-9-`, starting with a letter
/// or digit. The restriction keeps names safe in paths and interface names.
pub fn validate(name: &str) -> Result<()> {
    let bad = |why| {
        Err(LabError::InvalidName {
            name: name.to_string(),
            why,
        })
    };
    if name.is_empty() {
        return bad("it is empty");
    }
    if name.len() > MAX_NAME {
        return bad("it is longer than 16 characters");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return bad("only a-z, 0-9 and '-' are allowed");
    }
    if name.starts_with('-') {
        return bad("it must start with a letter or digit");
    }
    Ok(())
}

/// Namespace name of `host` in lab `lab`: `bl-LAB-HOST`.
pub fn netns(lab: &str, host: &str) -> String {
    format!("{PREFIX}{lab}-{host}")
}

/// True when `ns` is a namespace name that lab `lab` can have created:
/// `bl-LAB-` followed by a host name of the lab's vocabulary
/// (`client`, `clientN`, `server`, `peer`, `router`). Used by `lab down` to
/// remove leftovers by exact name after a crash.
pub(crate) fn is_lab_netns(lab: &str, ns: &str) -> bool {
    let Some(host) = ns
        .strip_prefix(PREFIX)
        .and_then(|rest| rest.strip_prefix(lab))
        .and_then(|rest| rest.strip_prefix('-'))
    else {
        return false;
    };
    is_host_name(host) || host == ROUTER
}

/// Name of the middle namespace of the kernel backend.
pub(crate) const ROUTER: &str = "router";

/// True for the host names a topology can contain.
pub(crate) fn is_host_name(host: &str) -> bool {
    if host == "client" || host == "server" || host == "peer" {
        return true;
    }
    match host.strip_prefix("client") {
        Some(n) => !n.is_empty() && !n.starts_with('0') && n.bytes().all(|b| b.is_ascii_digit()),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_simple_names_and_rejects_others() {
        assert!(validate("t1").is_ok());
        assert!(validate("a-b-0123456789ab").is_ok());
        assert!(validate("").is_err());
        assert!(validate("-x").is_err());
        assert!(validate("A").is_err());
        assert!(validate("a/b").is_err());
        assert!(validate("abcdefghijklmnopq").is_err());
    }

    #[test]
    fn lab_netns_match_is_exact() {
        assert!(is_lab_netns("x", "bl-x-client"));
        assert!(is_lab_netns("x", "bl-x-client12"));
        assert!(is_lab_netns("x", "bl-x-router"));
        assert!(!is_lab_netns("x", "bl-x-client0"));
        assert!(!is_lab_netns("x", "bl-xy-client"));
        // Lab "x" must not claim the namespaces of lab "x-y".
        assert!(!is_lab_netns("x", "bl-x-y-client"));
        assert!(!is_lab_netns("x", "emc"));
        assert_eq!(netns("x", "server"), "bl-x-server");
    }
}
