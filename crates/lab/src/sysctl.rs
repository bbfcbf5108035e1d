//! Per-namespace sysctls. Files under `/proc/sys/net` act on the namespace
//! of the thread that opens them, so call these from
//! [`crate::netns::run_in`].

use crate::error::{LabError, Result};
use std::io;

/// Writes `value` to `/proc/sys/<key with dots as slashes>`.
pub fn write(key: &str, value: &str) -> Result<()> {
    if key.contains("..") || key.contains('/') {
        return Err(LabError::Spec {
            field: crate::error::SpecField::setting("sysctl"),
            value: key.into(),
            why: "not a sysctl name".into(),
        });
    }
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::write(&path, value).map_err(|e| {
        let why = if e.raw_os_error() == Some(libc::EPERM) && key.ends_with("congestion_control") {
            io::Error::new(
                e.kind(),
                format!(
                    "{e}; a network namespace may only pick algorithms listed in \
                     net.ipv4.tcp_allowed_congestion_control (set in the root namespace), \
                     or use `iperf3 -C {value}`"
                ),
            )
        } else {
            e
        };
        LabError::io(format!("sysctl {key}={value}"), why)
    })
}

/// Reads a sysctl, trimmed.
pub fn read(key: &str) -> Result<String> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    std::fs::read_to_string(&path)
        .map(|s| s.trim().to_string())
        .map_err(|e| LabError::io(format!("read sysctl {key}"), e))
}
