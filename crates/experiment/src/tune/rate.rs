//! Applying a shaper rate, and putting the original back.
//!
//! * **Lab** ([`Target::Lab`]): `bloatlab lab set LAB --stage-rate STAGE=RATE --up|--down`,
//!   which reaches the running emulator through the lab's control path (crates/lab
//!   `ratectl`): the rate changes between measurements without rebuilding the lab. The
//!   original rate is read from `lab status --json` (each stage's `rate_bit_s`).
//! * **Command** ([`Target::Command`]): the user's `--set-rate-cmd`, run with `sh -c` after
//!   `{rate}` becomes the rate in kbit/s (`9500kbit`) and `{direction}` `up` or `down`. A real
//!   link's rate cannot be read back, so the rate to restore is the user's `--restore-rate`.
//!
//! [`RestoreGuard`] puts every changed direction back when dropped: at the end, on an error
//! and on Ctrl-C alike.

use super::measure::Direction;
use bloatlab_suite::session;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Where rates go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A stage (name or 1-based position) of a running lab's chained link.
    Lab {
        /// The lab.
        lab: String,
        /// The shaper stage.
        stage: String,
    },
    /// A shell command template with `{rate}` (and optionally `{direction}`).
    Command {
        /// The template.
        template: String,
    },
}

/// Why a rate could not be applied or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RateError {
    /// The command failed.
    #[error("--set-rate-cmd `{command}` {status}: {message}")]
    Command {
        /// The command as run.
        command: String,
        /// `exited with status N` / `was killed by a signal` / `could not start`.
        status: String,
        /// Its last line of error output.
        message: String,
    },
    /// `lab set` / `lab status` failed.
    #[error("lab {lab}: {message}")]
    Lab {
        /// The lab.
        lab: String,
        /// What went wrong.
        message: String,
    },
}

/// `{rate}` as the command sees it: whole kbit/s with the unit, `9500kbit`.
pub fn rate_word(kbit: u64) -> String {
    format!("{kbit}kbit")
}

/// The command for `kbit` in direction `dir`.
pub fn expand(template: &str, kbit: u64, dir: Direction) -> String {
    template
        .replace("{rate}", &rate_word(kbit))
        .replace("{direction}", dir.name())
}

/// Checks a `--set-rate-cmd` template.
pub fn check_template(template: &str) -> Result<(), String> {
    if !template.contains("{rate}") {
        return Err(format!(
            "--set-rate-cmd {template:?} has no {{rate}}: write where the rate goes, e.g. \
             'tc qdisc change dev eth0 root cake bandwidth {{rate}}'"
        ));
    }
    Ok(())
}

/// Applies rates to a target through the `bloatlab` binary `exe` or `sh`.
#[derive(Debug, Clone)]
pub struct RateControl {
    /// The `bloatlab` binary.
    pub exe: PathBuf,
    /// Where rates go.
    pub target: Target,
}

impl RateControl {
    /// Sets direction `dir` to `bps` bits per second (commands get whole kbit/s).
    pub fn set(&self, dir: Direction, bps: u64) -> Result<(), RateError> {
        match &self.target {
            Target::Lab { lab, stage } => {
                let value = if bps.is_multiple_of(1000) {
                    format!("{stage}={}", rate_word(bps / 1000))
                } else {
                    format!("{stage}={bps}bit")
                };
                let flag = format!("--{}", dir.name());
                let o = session::run_quiet(
                    &self.exe,
                    &["lab", "set", lab, "--stage-rate", &value, &flag],
                )
                .map_err(|message| RateError::Lab {
                    lab: lab.clone(),
                    message,
                })?;
                if !o.status.success() {
                    return Err(RateError::Lab {
                        lab: lab.clone(),
                        message: session::last_line(&o.stderr)
                            .trim_start_matches("bloatlab: error: ")
                            .to_string(),
                    });
                }
                Ok(())
            }
            Target::Command { template } => {
                let command = expand(template, bps.div_ceil(1000).max(1), dir);
                let o = Command::new("sh")
                    .args(["-c", &command])
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| RateError::Command {
                        command: command.clone(),
                        status: "could not start".into(),
                        message: e.to_string(),
                    })?;
                if o.status.success() {
                    return Ok(());
                }
                Err(RateError::Command {
                    status: match o.status.code() {
                        Some(c) => format!("exited with status {c}"),
                        None => "was killed by a signal".into(),
                    },
                    command,
                    message: session::last_line(&o.stderr),
                })
            }
        }
    }

    /// The rate direction `dir` has now, bits per second, when it can be read (a lab's
    /// stage); `None` for a command.
    pub fn current(&self, dir: Direction) -> Result<Option<u64>, RateError> {
        let Target::Lab { lab, stage } = &self.target else {
            return Ok(None);
        };
        let err = |message: String| RateError::Lab {
            lab: lab.clone(),
            message,
        };
        let o = session::run_quiet(&self.exe, &["lab", "status", lab, "--json"]).map_err(err)?;
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).map_err(|_| {
            err(session::last_line(&o.stderr)
                .trim_start_matches("bloatlab: error: ")
                .to_string())
        })?;
        stage_rate(&v, dir, stage).map_err(err)
    }
}

/// A stage's rate in `lab status --json` (`counters.directions[DIR].link.stages`): by name,
/// else by 1-based position. `Ok(None)`: the stage is unlimited.
pub fn stage_rate(
    status: &serde_json::Value,
    dir: Direction,
    stage: &str,
) -> Result<Option<u64>, String> {
    let d = status["counters"]["directions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d[0] == dir.name())
        .ok_or_else(|| {
            format!(
                "no {} direction in lab status (is the lab running?)",
                dir.name()
            )
        })?;
    let stages: Vec<&serde_json::Value> = d[1]["link"]["stages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["name"] != "path")
        .collect();
    if stages.is_empty() {
        return Err(format!(
            "the {} direction has no stages (bring the lab up with --stage)",
            dir.name()
        ));
    }
    let by_position = stage
        .parse::<usize>()
        .ok()
        .and_then(|k| k.checked_sub(1))
        .and_then(|i| stages.get(i).copied());
    let s = stages
        .iter()
        .copied()
        .find(|s| s["name"] == stage)
        .or(by_position)
        .ok_or_else(|| {
            let names: Vec<&str> = stages.iter().filter_map(|s| s["name"].as_str()).collect();
            format!(
                "--stage {stage:?}: the {} direction has no such stage (stages: {})",
                dir.name(),
                names.join(", ")
            )
        })?;
    Ok(s["rate_bit_s"].as_u64())
}

/// Puts each recorded direction back to its rate when dropped.
#[derive(Debug)]
pub struct RestoreGuard {
    control: RateControl,
    /// (direction, bits per second) to restore, in the order recorded.
    saved: Vec<(Direction, u64)>,
}

impl RestoreGuard {
    /// A guard over `control` with nothing recorded yet.
    pub fn new(control: RateControl) -> RestoreGuard {
        RestoreGuard {
            control,
            saved: Vec::new(),
        }
    }

    /// Records that `dir` is to go back to `bps` (first record of a direction wins).
    pub fn record(&mut self, dir: Direction, bps: u64) {
        if !self.saved.iter().any(|(d, _)| *d == dir) {
            self.saved.push((dir, bps));
        }
    }

    /// Replaces what `dir` goes back to (`--apply`: the recommendation).
    pub fn replace(&mut self, dir: Direction, bps: u64) {
        self.saved.retain(|(d, _)| *d != dir);
        self.saved.push((dir, bps));
    }

    /// The rate control.
    pub fn control(&self) -> &RateControl {
        &self.control
    }

    /// Restores now; returns one line per direction (what was set, or the error).
    pub fn restore(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        for (dir, bps) in std::mem::take(&mut self.saved) {
            let r = self.control.set(dir, bps);
            let rate = fmt_rate(bps);
            match r {
                Ok(()) => lines.push(format!("{}: rate set back to {rate}", dir.name())),
                Err(e) => {
                    tracing::error!("{}: could not set the rate back to {rate}: {e}", dir.name());
                    lines.push(format!(
                        "{}: could not set the rate back to {rate}: {e}",
                        dir.name()
                    ));
                }
            }
        }
        lines
    }
}

impl Drop for RestoreGuard {
    fn drop(&mut self) {
        // Failures are logged by `restore`; nothing else can be done here.
        let _ = self.restore();
    }
}

/// `9.5 Mbit/s`.
pub fn fmt_rate(bps: u64) -> String {
    format!("{:.3} Mbit/s", bps as f64 / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_get_the_rate_in_kbit_and_the_direction() {
        assert_eq!(
            expand(
                "tc qdisc change dev eth0 root cake bandwidth {rate} # {direction}",
                9500,
                Direction::Down
            ),
            "tc qdisc change dev eth0 root cake bandwidth 9500kbit # down"
        );
        assert!(check_template("ssh r tc ... {rate}").is_ok());
        let e = check_template("tc qdisc change dev eth0 root cake").unwrap_err();
        assert!(e.contains("--set-rate-cmd") && e.contains("{rate}"), "{e}");
    }

    #[test]
    fn a_failing_command_is_named_with_its_status() {
        let c = RateControl {
            exe: "bloatlab".into(),
            target: Target::Command {
                template: "echo nope >&2; exit 7 # {rate}".into(),
            },
        };
        let e = c.set(Direction::Up, 9_500_000).unwrap_err().to_string();
        assert!(
            e.contains("echo nope >&2; exit 7 # 9500kbit")
                && e.contains("status 7")
                && e.contains("nope"),
            "{e}"
        );
        assert_eq!(c.current(Direction::Up), Ok(None));
    }

    /// The guard runs the command for each recorded direction once, in order.
    #[test]
    fn the_guard_restores_every_direction_when_dropped() {
        let log = std::env::temp_dir().join(format!("h12-restore-{}.log", std::process::id()));
        let c = RateControl {
            exe: "bloatlab".into(),
            target: Target::Command {
                template: format!("echo {{direction}}={{rate}} >> {}", log.display()),
            },
        };
        {
            let mut g = RestoreGuard::new(c);
            g.record(Direction::Up, 20_000_000);
            g.record(Direction::Up, 1_000_000); // not the first: ignored
            g.record(Direction::Down, 5_000_000);
            g.replace(Direction::Down, 4_000_000);
        }
        let text = std::fs::read_to_string(&log).unwrap();
        let _ = std::fs::remove_file(&log);
        assert_eq!(text, "up=20000kbit\ndown=4000kbit\n");
    }

    #[test]
    fn stage_rates_are_read_from_lab_status_by_name_or_position() {
        let v = serde_json::json!({"counters": {"directions": [
            ["up", {"link": {"stages": [
                {"name": "router", "rate_bit_s": 9000000, "link": {}},
                {"name": "2", "rate_bit_s": 10000000, "link": {}},
                {"name": "path", "link": {}}]}}],
            ["down", {"link": {"enqueued": {}}}]]}});
        assert_eq!(stage_rate(&v, Direction::Up, "router"), Ok(Some(9_000_000)));
        assert_eq!(stage_rate(&v, Direction::Up, "1"), Ok(Some(9_000_000)));
        assert_eq!(stage_rate(&v, Direction::Up, "2"), Ok(Some(10_000_000)));
        let e = stage_rate(&v, Direction::Up, "3").unwrap_err();
        assert!(
            e.contains("--stage \"3\"") && e.contains("router, 2"),
            "{e}"
        );
        assert!(
            stage_rate(&v, Direction::Down, "1")
                .unwrap_err()
                .contains("no stages")
        );
    }
}
