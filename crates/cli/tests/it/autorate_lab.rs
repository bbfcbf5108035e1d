//! `bloatlab autorate` in real labs (issue 23, deliverable 2): on a lab stage in front of a
//! slower line, and through a `--set-rate-cmd` script that records its arguments (run in the
//! lab's client host, as on a router behind a real link). Tests run one at a time: each
//! loads the machine's cores.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::{Listen, load};
use std::time::Duration;

/// 20 ms base RTT; a `shaper` stage (fq_codel, 50 Mbit/s) in front of a 10 Mbit/s line
/// with a 200-packet FIFO (240 ms of queue), both directions.
fn hidden_line() -> LabGuard {
    LabGuard::up(
        "h23a",
        &[
            "--delay",
            "10ms",
            "--stage",
            "name=shaper rate=50mbit qdisc=fq_codel",
            "--stage",
            "name=line rate=10mbit qdisc=fifo limit=200p",
        ],
    )
}

/// The `server` host's address.
fn server_addr(lab: &LabGuard) -> String {
    let st = lab.status();
    st["hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|h| h["name"] == "server")
        .and_then(|h| h["addr"].as_str())
        .expect("a server host")
        .to_string()
}

/// The shaper stage's rate in direction `dir`, bit/s.
fn shaper_rate(lab: &LabGuard, dir: &str) -> Option<u64> {
    let st = lab.status();
    st["counters"]["directions"]
        .as_array()?
        .iter()
        .find(|d| d[0] == dir)?[1]["link"]["stages"]
        .as_array()?
        .iter()
        .find(|s| s["name"] == "shaper")?["rate_bit_s"]
        .as_u64()
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("h23a-{}-{name}", std::process::id()))
}

/// The test: under an upload that fills the hidden 10 Mbit/s line, autorate on
/// stage 1 (by position) cuts the shaper from its 20 Mbit/s base toward the line's rate,
/// every rate it applies stays within --min/--max, the lab ends at the rate the log says,
/// and the direction it was not asked to control is untouched.
#[test]
fn autorate_cuts_a_lab_stage_under_bloat_and_stays_in_bounds() {
    if !tier::root("autorate_cuts_a_lab_stage_under_bloat_and_stays_in_bounds") {
        return;
    }
    let _s = load::exclusive();
    let lab = hidden_line();
    let server = server_addr(&lab);
    let _srv = lab.serve("server", &[BIN, "server", "-p", "5001"], Listen::Tcp, 5001);
    // cubic fills the line's FIFO (this machine's default, bbr, would barely queue).
    let _load = lab.bg(
        "client",
        &[BIN, "client", &server, "-t", "14", "-Z", "cubic"],
    );
    let json = tmp("lab.json");
    let o = bl(&[
        "autorate",
        "--lab",
        &lab.name,
        "--stage",
        "1",
        "--direction",
        "up",
        "--min",
        "2mbit",
        "--base",
        "20mbit",
        "--max",
        "40mbit",
        "--duration",
        "10s",
        "-o",
        json.to_str().unwrap(),
        "--emit",
        "sqm,tc",
        "--emit-iface",
        "wan0",
    ]);
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}{err}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(v["schema"], "bloatlab-autorate/1");
    assert_eq!(v["delay"], "one_way", "a lab shares the clock");
    assert_eq!(v["end"]["reason"], "duration");
    let changes = v["changes"].as_array().unwrap();
    assert_eq!(changes[0]["reason"], "start");
    assert_eq!(changes[0]["to_bit_s"], 20_000_000);
    for c in changes {
        assert_eq!(c["direction"], "up", "{c}");
        let r = c["to_bit_s"].as_u64().unwrap();
        assert!((2_000_000..=40_000_000).contains(&r), "{c}");
    }
    let cuts = changes.iter().filter(|c| c["reason"] == "bloat").count();
    assert!(
        cuts >= 2,
        "the 10 Mbit/s line bloats a 20 Mbit/s shaper\n{err}"
    );
    let lowest = changes
        .iter()
        .filter_map(|c| c["to_bit_s"].as_u64())
        .min()
        .unwrap();
    assert!(
        lowest < 10_000_000,
        "cut below the line's 10 Mbit/s, not held at base: {lowest}\n{err}"
    );
    let end = v["end"]["rates"]["up"].as_u64().unwrap();
    assert_eq!(
        shaper_rate(&lab, "up"),
        Some(end),
        "the lab has the last rate"
    );
    assert_eq!(
        shaper_rate(&lab, "down"),
        Some(50_000_000),
        "down untouched"
    );
    let loaded = v["ticks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["load_bit_s"].as_u64() > Some(1_000_000))
        .count();
    assert!(loaded > 10, "the stage's counters show the load");
    // Every change is on stderr; the summary and the sqm section on stdout.
    assert_eq!(err.matches("autorate ").count(), changes.len(), "{err}");
    assert!(out.contains("autorate up: rate now"), "{out}");
    let up: u64 = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("option upload '"))
        .and_then(|s| s.trim_end_matches('\'').parse().ok())
        .expect("an sqm upload");
    assert!((2_000..=40_000).contains(&up), "{out}");
    assert!(
        out.contains("option download '0'"),
        "down was not controlled\n{out}"
    );
    // The emitted CAKE line goes through tc's own option parser (on the client host's lo,
    // which no test uses). This kernel has no sch_cake, so the kernel refuses it after tc
    // parsed it; a kernel with CAKE takes it. A keyword tc does not know fails differently.
    let cake = out
        .lines()
        .find(|l| l.starts_with("tc qdisc replace dev wan0 root cake bandwidth "))
        .unwrap_or_else(|| panic!("a CAKE egress line\n{out}"));
    let line = cake.replace("dev wan0", "dev lo");
    let words: Vec<&str> = line.split_whitespace().collect();
    let o = lab.exec("client", &words);
    let e = stderr(&o);
    assert!(
        o.status.success() || e.contains("Specified qdisc kind is unknown"),
        "{cake}: {e}"
    );
}

/// `--set-rate-cmd` gets `{dir}`, `{kbit}` and `{bps}`; under load with low delay (the lab's
/// shaper has fq_codel at 20 Mbit/s, and the command changes nothing) autorate raises the
/// rate from base to max, reading the load from the client's interface. Then a command that
/// fails above 7 Mbit/s: exit 1, a message naming it, and the last good rate is kept.
#[test]
fn autorate_runs_a_set_rate_command_and_stops_when_it_fails() {
    if !tier::root("autorate_runs_a_set_rate_command_and_stops_when_it_fails") {
        return;
    }
    let _s = load::exclusive();
    let lab = LabGuard::up(
        "h23c",
        &[
            "--delay",
            "5ms",
            "--stage",
            "name=shaper rate=20mbit qdisc=fq_codel",
        ],
    );
    let server = server_addr(&lab);
    let _srv = lab.serve("server", &[BIN, "server", "-p", "5001"], Listen::Both, 5001);
    let log = tmp("cmd.log");
    let script = tmp("set-rate.sh");
    std::fs::write(
        &script,
        format!(
            "echo \"$@\" >> {}\n[ \"$2\" -le \"${{LIMIT:-999999}}\" ] || {{ echo \"$2 kbit is too much\" >&2; exit 4; }}\n",
            log.display()
        ),
    )
    .unwrap();
    let run = |limit: &str, extra: &[&str]| {
        let _ = std::fs::remove_file(&log);
        let _load = lab.bg(
            "client",
            &[BIN, "client", &server, "-t", "10", "-Z", "cubic"],
        );
        std::thread::sleep(Duration::from_secs(1));
        let cmd = format!(
            "LIMIT={limit} sh {} {{dir}} {{kbit}} {{bps}}",
            script.display()
        );
        let mut v = vec![
            BIN,
            "autorate",
            "--set-rate-cmd",
            &cmd,
            "--iface",
            "bl-client",
            "--reflector",
            &server,
            "--direction",
            "up",
            "--min",
            "1mbit",
            "--base",
            "5mbit",
            "--max",
            "10mbit",
            "--duration",
            "5s",
        ];
        v.extend_from_slice(extra);
        let o = lab.exec("client", &v);
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        (o, text)
    };
    let json = tmp("cmd.json");
    let (o, text) = run(
        "999999",
        &["-o", json.to_str().unwrap(), "--emit", "cake-autorate,tc"],
    );
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(o.status.success(), "{out}{err}");
    let calls: Vec<Vec<u64>> = text
        .lines()
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(w[0], "up", "{l}");
            let kbit: u64 = w[1].parse().unwrap();
            let bps: u64 = w[2].parse().unwrap();
            assert_eq!(kbit, bps / 1000, "{l}");
            vec![kbit, bps]
        })
        .collect();
    assert_eq!(calls[0], [5_000, 5_000_000], "starts at base\n{text}");
    assert!(
        calls.iter().all(|c| (1_000..=10_000).contains(&c[0])),
        "{text}"
    );
    assert_eq!(
        calls.last().unwrap()[0],
        10_000,
        "loaded with low delay: raised to max\n{text}\n{err}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(v["changes"].as_array().unwrap().len(), calls.len());
    // --emit cake-autorate: shell assignments with min <= base <= max, within the bounds.
    let kv = |k: &str| -> u64 {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{k} in\n{out}"))
    };
    let (min, base, max) = (
        kv("min_ul_shaper_rate_kbps"),
        kv("base_ul_shaper_rate_kbps"),
        kv("max_ul_shaper_rate_kbps"),
    );
    assert!(
        1_000 <= min && min <= base && base <= max && max == 10_000,
        "{out}"
    );
    assert!(out.contains("adjust_dl_shaper_rate=0"), "{out}");
    assert!(
        out.contains("tc qdisc replace dev bl-client root cake bandwidth "),
        "--emit-iface defaults to --iface\n{out}"
    );

    let (o, text) = run("7000", &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let last = text.lines().last().unwrap_or_default();
    let failed: u64 = last.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(failed > 7_000, "{text}");
    let kept = text
        .lines()
        .rev()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|k| k.parse::<u64>().ok())
        .expect("a rate applied before the failure");
    assert!((1_000_000..=7_000_999).contains(&kept), "{text}");
    assert!(
        err.contains("--set-rate-cmd")
            && err.contains("exited with status 4")
            && err.contains("kbit is too much")
            && err.contains(&format!(
                "the last rates applied stay: up {:.3} Mbit/s",
                kept as f64 / 1e6
            )),
        "{err}"
    );
    let _ = std::fs::remove_file(&script);
    let _ = std::fs::remove_file(&log);
}

/// Bad input: the flag is named, exit 2, nothing changes in the lab.
#[test]
fn autorate_bad_input_names_the_flag() {
    if !tier::root("autorate_bad_input_names_the_flag") {
        return;
    }
    let _s = load::exclusive();
    let lab = hidden_line();
    let rates = ["--min", "2mbit", "--base", "10mbit", "--max", "20mbit"];
    for (args, want) in [
        (vec!["--lab", "h23nosuch"], "h23nosuch"),
        (
            vec!["--lab", &lab.name, "--stage", "modem"],
            "--stage \"modem\"",
        ),
        (
            vec!["--lab", &lab.name, "--bloat-count", "7"],
            "--bloat-count",
        ),
        (
            vec![
                "--set-rate-cmd",
                "echo {kbit}",
                "--iface",
                "bl-nosuch0",
                "--reflector",
                "192.0.2.1",
            ],
            "--iface",
        ),
    ] {
        let mut v = vec!["autorate"];
        v.extend_from_slice(&args);
        v.extend_from_slice(&rates);
        let o = bl(&v);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
    }
    assert_eq!(shaper_rate(&lab, "up"), Some(50_000_000));
}

/// Without --duration, autorate runs until SIGINT: then it exits 0, writes its log (end
/// reason `interrupted`) and leaves the stage at the last rate it applied.
#[test]
fn autorate_runs_until_sigint_and_leaves_the_last_rate() {
    if !tier::root("autorate_runs_until_sigint_and_leaves_the_last_rate") {
        return;
    }
    let _s = load::exclusive();
    let lab = hidden_line();
    let json = tmp("sigint.json");
    let child = std::process::Command::new(BIN)
        .args([
            "autorate",
            "--lab",
            &lab.name,
            "--stage",
            "shaper",
            "--min",
            "2mbit",
            "--base",
            "12mbit/8mbit",
            "--max",
            "40mbit",
            "-o",
            json.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start autorate");
    let started = wait_until(Duration::from_secs(10), || {
        shaper_rate(&lab, "down") == Some(12_000_000) && shaper_rate(&lab, "up") == Some(8_000_000)
    });
    std::thread::sleep(Duration::from_secs(2));
    bloatlab_os::process::signal(child.id(), libc::SIGINT).expect("SIGINT our child");
    let o = child.wait_with_output().expect("autorate output");
    assert!(started, "autorate never set the base rates\n{}", stderr(&o));
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(v["end"]["reason"], "interrupted");
    assert!(v["end"]["seconds"].as_f64().unwrap() >= 2.0);
    for d in ["down", "up"] {
        let end = v["end"]["rates"][d].as_u64().unwrap();
        assert_eq!(shaper_rate(&lab, d), Some(end), "{d}");
    }
}
