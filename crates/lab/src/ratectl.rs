//! Changing a stage's rate or delay while the lab runs (`lab set
//! --stage-rate`, `--stage-delay`), so `bloatlab tune` can move a shaper
//! without rebuilding the lab (a rebuild would also empty every queue and
//! reset the counters between probes). A rate may be a schedule or a trace
//! and a delay a schedule; their time starts when the change applies.
//!
//! The emulator runs in the lab's daemon, another process. A request is a
//! file `NAME.ctl/ID.req.json` in the state directory (written atomically),
//! `{"changes": [{"direction": "up", "stage": "1", "rate_bit_s": 9000000}]}`
//! (a fixed rate), or with `"key": "rate"|"delay", "value": "SPELLING"`
//! (`schedule:...`, `trace:/abs/path`, `40ms`), which the daemon parses;
//! the daemon looks for requests every 50 ms, hands each change to the
//! direction's forwarding thread ([`crate::driver::Emulator::set_stage`]),
//! removes the request, rewrites its status file and writes `ID.reply.json`, `{"ok": true, "stages":
//! ["up/1"]}` or `{"ok": false, "error": "..."}`. The caller waits for the
//! reply and removes it. Changes of one request apply in order; a failed one
//! stops the rest.

use crate::driver::Emulator;
use crate::error::{LabError, Result, SpecField};
use crate::spec::Backend;
use crate::state::{LabState, StateDir, write_atomic};
use bloatlab_emu::StageSetting;
use bloatlab_units::BitRate;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::{Duration, Instant};

/// One change: direction `up`/`down`, stage name (or 1-based position), rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageRate {
    pub direction: String,
    pub stage: String,
    /// Bits per second (a schedule's or trace's nominal rate; 0 for a
    /// delay change).
    pub rate_bit_s: u64,
    /// `rate` or `delay`, when `value` is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The setting as written (trace paths absolute), parsed by the daemon
    /// with `bloatlab_emu::StageSetting::parse`. Absent: the fixed rate
    /// `rate_bit_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

impl StageRate {
    /// What the change sets, for the daemon.
    fn setting(&self) -> std::result::Result<StageSetting, String> {
        match (&self.key, &self.value) {
            (Some(k), Some(v)) => StageSetting::parse(k, v).map_err(|e| e.to_string()),
            _ => Ok(StageSetting::Rate(Some(BitRate(self.rate_bit_s)), None)),
        }
    }

    /// `rate 9 Mbit/s`, `rate schedule:...`, `delay 40ms`: what `lab set`
    /// prints.
    pub fn describe(&self) -> String {
        match (&self.key, &self.value) {
            (Some(k), Some(v)) => format!("{k} {v}"),
            _ => format!("rate {}", BitRate(self.rate_bit_s)),
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    changes: Vec<StageRate>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Reply {
    ok: bool,
    #[serde(default)]
    stages: Vec<String>,
    #[serde(default)]
    error: Option<String>,
}

/// The stage names of each direction of a lab, from its spec; `path` (the
/// stage `--delay` adds) only with `with_path`: it has a delay, no rate.
fn stage_names(st: &LabState, direction: &str, with_path: bool) -> Result<Vec<String>> {
    let link = if direction == "up" {
        &st.spec.up
    } else {
        &st.spec.down
    };
    let stages = crate::stages::stage_configs(direction, link)?.unwrap_or_default();
    Ok(stages
        .into_iter()
        .map(|s| s.name)
        .filter(|n| with_path || n != "path")
        .collect())
}

/// Parses `STAGE=RATE` (stage name or 1-based position, a rate such as
/// `9mbit` or `8500kbit`) for each of `directions`, checked against the
/// lab's stages: an unknown stage, a bad rate or a lab without stages is a
/// usage error naming `--stage-rate`.
pub fn parse(st: &LabState, v: &str, directions: &[&str]) -> Result<Vec<StageRate>> {
    parse_setting(st, "rate", v, directions)
}

/// Like [`parse`] for `key` `rate` (`--stage-rate STAGE=RATE`, the rate
/// also `schedule:...` or `trace:FILE`), `delay` (`--stage-delay
/// STAGE=DELAY`, also `schedule:...`) or `qdisc` (`--stage-qdisc
/// 'STAGE=KIND [KEY=VALUE ...]'`). A trace is read here, so a bad one
/// is refused before the lab is asked, naming the file and line; its path
/// must be absolute (the CLI makes it so).
pub fn parse_setting(
    st: &LabState,
    key: &str,
    v: &str,
    directions: &[&str],
) -> Result<Vec<StageRate>> {
    let flag = format!("--stage-{key}");
    let bad = |why: String| LabError::Spec {
        field: SpecField::flag(&flag),
        value: v.to_string(),
        why,
    };
    let (stage, value) = v.split_once('=').ok_or_else(|| {
        bad(format!(
            "write STAGE={}, e.g. {}",
            key.to_uppercase(),
            match key {
                "rate" => "1=9mbit, router=8500kbit or 1=schedule:0s/20mbit,5s/5mbit",
                "delay" => "path=40ms or 1=schedule:0s/20ms,10s/200ms",
                _ => "'1=fq_codel target=5ms' or router=cake",
            }
        ))
    })?;
    let stage = stage.trim();
    let value = value.trim();
    let setting = StageSetting::parse(key, value).map_err(|e| bad(e.to_string()))?;
    let (rate_bit_s, plain) = match &setting {
        StageSetting::Rate(Some(r), c) => (r.0, c.is_none()),
        StageSetting::Rate(None, _) => return Err(bad("a rate is needed".into())),
        StageSetting::Delay(..) | StageSetting::Qdisc(_) => (0, false),
    };
    // A fixed rate travels as bits per second, as before; the rest as written.
    let (key_out, value_out) = if plain {
        (None, None)
    } else {
        (Some(key.to_string()), Some(value.to_string()))
    };
    if st.spec.backend == Backend::Kernel {
        return Err(bad(
            "the kernel backend has no stages; use the userspace backend".into(),
        ));
    }
    let mut out = Vec::new();
    for &d in directions {
        let names = stage_names(st, d, key == "delay")?;
        if names.is_empty() {
            return Err(bad(format!(
                "the {d} direction of lab {} has no stages (lab up --stage/--{d}-stage)",
                st.name
            )));
        }
        let by_position = stage
            .parse::<usize>()
            .ok()
            .filter(|&k| (1..=names.len()).contains(&k))
            .map(|k| names[k - 1].clone());
        let name = names
            .iter()
            .find(|n| *n == stage)
            .cloned()
            .or(by_position)
            .ok_or_else(|| {
                bad(format!(
                    "the {d} direction of lab {} has no stage {stage:?} (stages: {})",
                    st.name,
                    names.join(", ")
                ))
            })?;
        out.push(StageRate {
            direction: d.to_string(),
            stage: name,
            rate_bit_s,
            key: key_out.clone(),
            value: value_out.clone(),
        });
    }
    Ok(out)
}

/// Sends `changes` to the daemon of lab `name` and waits (at most
/// `timeout`) until they are applied. Returns `direction/stage` of each.
pub fn request(
    dir: &StateDir,
    name: &str,
    changes: &[StageRate],
    timeout: Duration,
) -> Result<Vec<String>> {
    let ctl = dir.ctl_dir(name);
    std::fs::create_dir_all(&ctl)
        .map_err(|e| LabError::io(format!("mkdir {}", ctl.display()), e))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let id = format!("{}-{nanos}", std::process::id());
    let req = ctl.join(format!("{id}.req.json"));
    let reply = ctl.join(format!("{id}.reply.json"));
    let body = serde_json::to_vec(&Request {
        changes: changes.to_vec(),
    })
    .map_err(|e| LabError::io("encode request", std::io::Error::other(e)))?;
    write_atomic(&req, &body)?;
    let t0 = Instant::now();
    loop {
        if let Ok(b) = std::fs::read(&reply) {
            let _ = std::fs::remove_file(&reply);
            let r: Reply = serde_json::from_slice(&b).map_err(|e| LabError::State {
                path: reply.display().to_string(),
                why: e.to_string(),
            })?;
            return if r.ok {
                Ok(r.stages)
            } else {
                Err(LabError::Sys {
                    op: format!("lab {name}: stage rate"),
                    source: std::io::Error::other(r.error.unwrap_or_default()),
                })
            };
        }
        if t0.elapsed() > timeout {
            // Withdraw the request if the daemon has not taken it yet.
            let _ = std::fs::remove_file(&req);
            return Err(LabError::Sys {
                op: format!("lab {name}: stage rate"),
                source: std::io::Error::other(format!(
                    "the lab's emulator did not answer within {timeout:?} (is the lab running?)"
                )),
            });
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// What the daemon answers one request: its id and the reply.
#[derive(Debug)]
pub struct Answer(String, Reply);

/// The daemon's side, first half: applies every waiting request (the
/// forwarding threads publish their new rates before they answer). The
/// daemon then writes its status file and calls [`reply`], so `lab status`
/// right after `lab set` shows the new rates. A request that does not parse
/// gets an error reply.
pub fn apply(dir: &StateDir, name: &str, em: Option<&Emulator>) -> Vec<Answer> {
    let Ok(entries) = std::fs::read_dir(dir.ctl_dir(name)) else {
        return Vec::new();
    };
    let mut answers = Vec::new();
    for e in entries.filter_map(|e| e.ok()) {
        let fname = e.file_name().to_string_lossy().into_owned();
        let Some(id) = fname.strip_suffix(".req.json") else {
            continue;
        };
        if fname.starts_with('.') {
            continue; // a request still being written
        }
        let path = e.path();
        let reply = answer(&path, em);
        let _ = std::fs::remove_file(&path);
        answers.push(Answer(id.to_string(), reply));
    }
    answers
}

/// The daemon's side, second half: writes the replies.
pub fn reply(dir: &StateDir, name: &str, answers: &[Answer]) {
    for Answer(id, reply) in answers {
        if let Ok(b) = serde_json::to_vec(reply) {
            let _ = write_atomic(&dir.ctl_dir(name).join(format!("{id}.reply.json")), &b);
        }
    }
}

fn answer(path: &Path, em: Option<&Emulator>) -> Reply {
    let fail = |error: String, stages: Vec<String>| Reply {
        ok: false,
        stages,
        error: Some(error),
    };
    let req: Request = match std::fs::read(path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(r) => r,
        Err(e) => return fail(format!("bad request: {e}"), Vec::new()),
    };
    let Some(em) = em else {
        return fail("this lab has no userspace emulator".into(), Vec::new());
    };
    let mut done = Vec::new();
    for c in &req.changes {
        let setting = match c.setting() {
            Ok(s) => s,
            Err(e) => return fail(format!("{} stage {}: {e}", c.direction, c.stage), done),
        };
        match em.set_stage(&c.direction, &c.stage, setting, Duration::from_secs(2)) {
            Ok(stage) => {
                tracing::info!("{}: stage {stage} {} set", c.direction, c.describe());
                done.push(format!("{}/{stage}", c.direction));
            }
            Err(e) => return fail(format!("{} stage {}: {e}", c.direction, c.stage), done),
        }
    }
    Reply {
        ok: true,
        stages: done,
        error: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::LabSpec;

    fn lab(stages: &[&str]) -> LabState {
        let mut spec = LabSpec::new("h12t");
        for l in [&mut spec.up, &mut spec.down] {
            l.stages = stages.iter().map(|s| s.parse().unwrap()).collect();
            l.delay = Some(Duration::from_millis(10).into());
        }
        LabState::new(&spec, &StateDir(std::env::temp_dir()))
    }

    #[test]
    fn stage_rates_name_stages_by_name_or_position() {
        let st = lab(&[
            "name=router rate=9mbit qdisc=fq_codel",
            "rate=10mbit limit=100p",
        ]);
        let c = parse(&st, "router=8500kbit", &["up", "down"]).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(
            (c[0].direction.as_str(), c[0].stage.as_str()),
            ("up", "router")
        );
        assert_eq!(c[1].rate_bit_s, 8_500_000);
        let c = parse(&st, "1=2mbit", &["down"]).unwrap();
        assert_eq!(
            (c[0].direction.as_str(), c[0].stage.as_str()),
            ("down", "router")
        );
        let c = parse(&st, "2=2mbit", &["up"]).unwrap();
        assert_eq!(c[0].stage, "2");
    }

    #[test]
    fn bad_stage_rates_are_usage_errors_naming_the_flag() {
        let st = lab(&[
            "name=router rate=9mbit qdisc=fq_codel",
            "rate=10mbit limit=100p",
        ]);
        for (v, want) in [
            ("router", "STAGE=RATE"),
            ("modem=1mbit", "no stage \"modem\" (stages: router, 2)"),
            ("3=1mbit", "no stage \"3\""),
            ("path=1mbit", "no stage \"path\""),
            ("router=fast", "rate"),
            ("router=0mbit", "greater than zero"),
        ] {
            let e = parse(&st, v, &["up"]).unwrap_err();
            assert!(matches!(e, LabError::Spec { .. }), "{v}: {e:?}");
            let m = e.to_string();
            assert!(m.contains("--stage-rate") && m.contains(want), "{v}: {m}");
        }
        let e = parse(&lab(&[]), "1=1mbit", &["up"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("has no stages"), "{e}");
    }

    /// Schedules, traces and delays travel as written; `path` takes a delay
    /// but no rate; bad ones are refused naming the flag and what is wrong.
    #[test]
    fn schedules_traces_and_delays_are_checked_and_sent_as_written() {
        let st = lab(&["name=router rate=9mbit qdisc=fq_codel"]);
        let c = parse(&st, "router=schedule:0s/20mbit,5s/5mbit", &["up"]).unwrap();
        assert_eq!(c[0].rate_bit_s, 20_000_000);
        assert_eq!(c[0].describe(), "rate schedule:0s/20mbit,5s/5mbit");
        assert_eq!(
            c[0].setting().unwrap(),
            StageSetting::parse("rate", "schedule:0s/20mbit,5s/5mbit").unwrap()
        );
        // A fixed rate keeps the old wire form.
        let c = parse(&st, "1=9mbit", &["up"]).unwrap();
        assert_eq!((c[0].key.as_ref(), c[0].value.as_ref()), (None, None));
        let c = parse_setting(&st, "delay", "path=schedule:0s/10ms,1s/50ms", &["down"]).unwrap();
        assert_eq!((c[0].stage.as_str(), c[0].rate_bit_s), ("path", 0));
        assert!(matches!(
            c[0].setting().unwrap(),
            StageSetting::Delay(d, Some(_)) if d == Duration::from_millis(10)
        ));
        let c = parse_setting(&st, "qdisc", "router=cake bandwidth=8mbit", &["up"]).unwrap();
        assert_eq!(c[0].describe(), "qdisc cake bandwidth=8mbit");
        assert!(matches!(c[0].setting().unwrap(), StageSetting::Qdisc(_)));
        let e = parse_setting(&st, "qdisc", "path=fifo", &["up"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--stage-qdisc") && e.contains("no stage"), "{e}");
        let e = parse(&st, "path=1mbit", &["up"]).unwrap_err().to_string();
        assert!(e.contains("no stage \"path\""), "{e}");
        for (key, v, want) in [
            (
                "rate",
                "1=schedule:0s/20mbit,5s/-1mbit",
                "must not be negative",
            ),
            (
                "rate",
                "1=trace:/nonexistent/h23r.trace",
                "/nonexistent/h23r.trace",
            ),
            ("delay", "1=soon", "is not a number"),
            ("delay", "1", "STAGE=DELAY"),
        ] {
            let e = parse_setting(&st, key, v, &["up"]).unwrap_err().to_string();
            assert!(
                e.contains(&format!("--stage-{key}")) && e.contains(want),
                "{v}: {e}"
            );
        }
    }

    /// The file protocol without a daemon: a request nobody answers times
    /// out and is withdrawn; an answered one returns the reply's stages.
    #[test]
    fn requests_time_out_cleanly_and_replies_are_read() {
        let d = StateDir(std::env::temp_dir().join(format!("h12-ratectl-{}", std::process::id())));
        let c = vec![StageRate {
            direction: "up".into(),
            stage: "1".into(),
            rate_bit_s: 1_000_000,
            key: None,
            value: None,
        }];
        let e = request(&d, "x", &c, Duration::from_millis(100)).unwrap_err();
        assert!(e.to_string().contains("did not answer"), "{e}");
        assert_eq!(std::fs::read_dir(d.ctl_dir("x")).unwrap().count(), 0);
        // A daemon stand-in: no emulator, so the reply is an error naming why.
        let dd = d.clone();
        let t = std::thread::spawn(move || {
            for _ in 0..100 {
                let a = apply(&dd, "x", None);
                reply(&dd, "x", &a);
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let e = request(&d, "x", &c, Duration::from_secs(5)).unwrap_err();
        assert!(e.to_string().contains("no userspace emulator"), "{e}");
        t.join().unwrap();
        assert_eq!(std::fs::read_dir(d.ctl_dir("x")).unwrap().count(), 0);
        d.remove("x");
        let _ = std::fs::remove_dir_all(&d.0);
    }
}
