//! `lab set`: change a running lab's hosts (TCP ECN, [`crate::hostctl`])
//! and stage rates and delays ([`crate::ratectl`]) without rebuilding it.

use crate::error::{LabError, Result};
use crate::lab::check_privilege;
use crate::state::StateDir;
use crate::{hostctl, names, ratectl};
use std::io::Write;
use std::time::Duration;

/// How long `lab set --stage-rate` waits for the emulator to apply a change.
const RATE_REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// The changes of one `lab set`, as the user wrote them.
#[derive(Debug, Clone, Default)]
pub struct SetRequest {
    /// `HOST=on|off` or `all=on|off`.
    pub ecn: Vec<String>,
    /// `STAGE=RATE`, the stage by name or 1-based position; the rate also
    /// `schedule:...` or `trace:FILE` (an absolute path).
    pub stage_rate: Vec<String>,
    /// `STAGE=DELAY`, the delay also `schedule:...`.
    pub stage_delay: Vec<String>,
    /// `STAGE=KIND [KEY=VALUE ...]`: a new qdisc for a stage.
    pub stage_qdisc: Vec<String>,
    /// Stage rates apply to the up direction only.
    pub up: bool,
    /// Stage rates apply to the down direction only.
    pub down: bool,
}

/// Checks every value of `req` against lab `name` first, then applies the
/// rates (waiting for the emulator), then the ECN settings, writing one
/// line per change to `out`.
pub fn set(dir: &StateDir, name: &str, req: &SetRequest, out: &mut dyn Write) -> Result<()> {
    names::validate(name)?;
    let st = dir
        .read(name)?
        .ok_or_else(|| LabError::NoSuchLab(name.into()))?;
    let mut settings = Vec::new();
    for v in &req.ecn {
        settings.extend(hostctl::parse_ecn_setting(&st, v)?);
    }
    let directions: &[&str] = match (req.up, req.down) {
        (true, _) => &["up"],
        (_, true) => &["down"],
        _ => &["up", "down"],
    };
    let mut rates = Vec::new();
    for v in &req.stage_rate {
        rates.extend(ratectl::parse(&st, v, directions)?);
    }
    for v in &req.stage_delay {
        rates.extend(ratectl::parse_setting(&st, "delay", v, directions)?);
    }
    for v in &req.stage_qdisc {
        rates.extend(ratectl::parse_setting(&st, "qdisc", v, directions)?);
    }
    check_privilege("bloatlab lab set")?;
    if !rates.is_empty() {
        let done = ratectl::request(dir, name, &rates, RATE_REPLY_TIMEOUT)?;
        for (stage, r) in done.iter().zip(&rates) {
            let _ = writeln!(out, "lab {name}: stage {stage} {}", r.describe());
        }
    }
    if settings.is_empty() {
        return Ok(());
    }
    hostctl::set_ecn(dir, name, &settings)?;
    for (host, on) in &settings {
        let _ = writeln!(
            out,
            "lab {name}: {host} ECN {} (net.ipv4.tcp_ecn={})",
            if *on { "on" } else { "off" },
            hostctl::ecn_value(*on)
        );
    }
    Ok(())
}
