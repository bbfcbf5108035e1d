//! `bloatlab tune` in real labs (issue 12, deliverable 5). The lab hides a 10 Mbit/s line
//! (a deep FIFO stage) behind an fq_codel shaper stage at 50 Mbit/s; tune is told only the
//! shaper stage. Tests run one at a time: each loads the machine's two cores.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::load;
use std::time::Duration;

/// 20 ms base RTT; shaper `shaper` at 50 Mbit/s in front of a 10 Mbit/s line with a
/// 200-packet FIFO (240 ms of queue), both directions.
fn hidden_line() -> LabGuard {
    LabGuard::up(
        "h12t",
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

/// The shaper stage's rate per direction, bit/s, from `lab status --json` (empty until the
/// emulator published its first counters).
fn shaper_rates(lab: &LabGuard) -> Vec<(String, Option<u64>)> {
    let st = lab.status();
    st["counters"]["directions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| {
            let s = d[1]["link"]["stages"]
                .as_array()?
                .iter()
                .find(|s| s["name"] == "shaper")?;
            Some((d[0].as_str()?.to_string(), s["rate_bit_s"].as_u64()))
        })
        .collect()
}

/// Both shapers at their 50 Mbit/s (waits for the first counters).
fn untouched(lab: &LabGuard) -> bool {
    let want =
        |r: &[(String, Option<u64>)]| r.len() == 2 && r.iter().all(|(_, r)| *r == Some(50_000_000));
    wait_until(Duration::from_secs(5), || want(&shaper_rates(lab)))
}

fn tmp(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("h12-{}-{name}", std::process::id()))
}

/// The test: the recommendation lands between 8.5 and 10 Mbit/s, the curve shows
/// rates on both sides of the line, and the shaper is back at 50 Mbit/s afterwards.
#[test]
fn tune_finds_the_hidden_line_rate_behind_the_shaper() {
    if !tier::root("tune_finds_the_hidden_line_rate_behind_the_shaper") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = hidden_line();
    let json = tmp("tune.json");
    let html = tmp("tune.html");
    let o = bl(&[
        "tune",
        "--lab",
        &lab.name,
        "--stage",
        "shaper",
        "--direction",
        "up",
        "--min",
        "4mbit",
        "--max",
        "16mbit",
        "--resolution",
        "500kbit",
        "--repeats",
        "1",
        "-l",
        "4",
        "--idle",
        "1",
        "--json",
        json.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let h = std::fs::read_to_string(&html).unwrap();
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&html);
    let d = &v["directions"][0];
    let rec = d["recommended_kbit"].as_u64().expect("a recommendation");
    assert!(
        (8_500..=10_000).contains(&rec),
        "recommended {rec} kbit/s\n{out}"
    );
    assert_eq!(d["verdict"], "found");
    assert_eq!(d["original_bit_s"], 50_000_000);
    let curve = d["curve"].as_array().unwrap();
    assert!(
        curve
            .iter()
            .any(|p| p["within"] == false && p["rate_kbit"].as_u64() > Some(10_000))
    );
    // Above the line the FIFO fills: far over the budget at the top of the range.
    let top = curve.last().unwrap();
    assert_eq!(top["rate_kbit"], 16_000);
    assert!(top["induced_p90_ms"].as_f64().unwrap() > 30.0, "{top}");
    assert!(
        out.contains("up: recommended ") && out.contains("given up"),
        "{out}"
    );
    assert!(out.contains("rate Mbit/s") && out.contains("up: rate set back to 50.000 Mbit/s"));
    assert_eq!(h.matches("<svg").count(), 2);
    assert!(untouched(&lab), "{:?}", shaper_rates(&lab));
}

/// `tune --server 10.77.0.2 --set-rate-cmd CMD --restore-rate 50mbit EXTRA...` run in the
/// lab's client host, as on a machine behind a real link.
fn tune_from_client(lab: &LabGuard, cmd: &str, extra: &[&str]) -> std::process::Output {
    let mut v = vec![
        BIN,
        "tune",
        "--server",
        "10.77.0.2",
        "--set-rate-cmd",
        cmd,
        "--restore-rate",
        "50mbit",
    ];
    v.extend_from_slice(extra);
    lab.exec("client", &v)
}

/// Real-link mode through a `--set-rate-cmd` that itself calls `lab set` (never a real
/// interface), both directions: the command gets `{rate}` in kbit and `{direction}`, and the
/// `--restore-rate` goes back at the end. `--max` below the line: the top is within budget
/// at once, one measurement per direction.
#[test]
fn tune_with_a_set_rate_command_tunes_both_directions_and_restores() {
    if !tier::root("tune_with_a_set_rate_command_tunes_both_directions_and_restores") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = hidden_line();
    let _server = lab.bg("server", &[BIN, "server", "-p", "5001"]);
    let log = tmp("cmd.log");
    let cmd = format!(
        "echo {{direction}} {{rate}} >> {log} && {BIN} lab set {lab} --stage-rate shaper={{rate}} --{{direction}}",
        log = log.display(),
        lab = lab.name
    );
    let json = tmp("cmd.json");
    let o = tune_from_client(
        &lab,
        &cmd,
        &[
            "--min",
            "2mbit",
            "--max",
            "8mbit",
            "--repeats",
            "1",
            "-l",
            "3",
            "--idle",
            "1",
            "--json",
            json.to_str().unwrap(),
            "--emit",
            "sqm,tc,cake-autorate",
        ],
    );
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let _ = std::fs::remove_file(&log);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(
        text,
        "up 8000kbit\ndown 8000kbit\nup 50000kbit\ndown 50000kbit\n",
        "{}",
        stdout(&o)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    for (i, dir) in ["up", "down"].iter().enumerate() {
        let d = &v["directions"][i];
        assert_eq!(d["direction"], *dir);
        assert_eq!(d["verdict"], "always_within");
        assert_eq!(d["recommended_kbit"], 8_000);
        let t = d["curve"][0]["throughput_mbit"].as_f64().unwrap();
        assert!(
            t > 6.0 && t <= 8.0,
            "{dir}: {t} Mbit/s through an 8 Mbit/s shaper"
        );
    }
    // --emit (issue 23): the recommendation as sqm rates, CAKE bandwidths and
    // cake-autorate's base; min is half of it, max the goodput (below 8 Mbit/s: base).
    let out = stdout(&o);
    for want in [
        "option download '8000'",
        "option upload '8000'",
        "option qdisc 'cake'",
        "option script 'piece_of_cake.qos'",
        "tc qdisc replace dev eth0 root cake bandwidth 8000kbit besteffort",
        "tc qdisc replace dev ifb4eth0 root cake bandwidth 8000kbit besteffort ingress",
        "min_dl_shaper_rate_kbps=4000",
        "base_dl_shaper_rate_kbps=8000",
        "max_dl_shaper_rate_kbps=8000",
        "base_ul_shaper_rate_kbps=8000",
    ] {
        assert!(out.lines().any(|l| l.trim() == want), "{want}\n{out}");
    }
    assert!(!out.contains("linklayer"), "the lab has no framing\n{out}");
    assert!(untouched(&lab), "{:?}", shaper_rates(&lab));
    // A failing command is a clear error naming it and its status; the restore still runs.
    let o = tune_from_client(&lab, "exit 3 # {rate}", &[]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert!(
        e.contains("`exit 3 # 100000kbit` exited with status 3"),
        "{e}"
    );
}

/// Bad input: the flag is named, exit 2, and nothing changed in the lab.
#[test]
fn tune_bad_input_is_refused_before_anything_starts() {
    if !tier::root("tune_bad_input_is_refused_before_anything_starts") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = hidden_line();
    assert!(untouched(&lab), "{:?}", shaper_rates(&lab));
    for (args, want) in [
        (vec!["--lab", "h12nosuch", "--max", "20mbit"], "h12nosuch"),
        (
            vec!["--lab", &lab.name, "--stage", "modem"],
            "--stage \"modem\"",
        ),
        (vec!["--lab", &lab.name, "--budget", "0ms"], "--budget"),
        (
            vec!["--lab", &lab.name, "--min", "20mbit", "--max", "10mbit"],
            "--min",
        ),
        (
            vec![
                "--server",
                "10.77.0.2",
                "--set-rate-cmd",
                "tc qdisc change dev eth0 root cake",
                "--restore-rate",
                "1mbit",
            ],
            "{rate}",
        ),
    ] {
        let mut v = vec!["tune"];
        v.extend_from_slice(&args);
        let o = bl(&v);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(want), "{args:?}: {e}");
    }
    assert!(untouched(&lab), "{:?}", shaper_rates(&lab));
}

/// Ctrl-C in the middle of a measurement: exit 1, the shaper back at its rate, no server
/// left in the lab and no temporary files.
#[test]
fn tune_ctrl_c_restores_the_rate_and_leaves_nothing_behind() {
    if !tier::root("tune_ctrl_c_restores_the_rate_and_leaves_nothing_behind") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = hidden_line();
    let child = std::process::Command::new(BIN)
        .args([
            "tune",
            "--lab",
            &lab.name,
            "--stage",
            "shaper",
            "--direction",
            "down",
            "--max",
            "16mbit",
            "-l",
            "20",
            "--idle",
            "1",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start tune");
    let pid = child.id();
    let changed = wait_until(Duration::from_secs(20), || {
        shaper_rates(&lab)
            .iter()
            .any(|(d, r)| d == "down" && *r == Some(16_000_000))
    });
    // Into the load.
    std::thread::sleep(Duration::from_secs(3));
    bloatlab_os::process::signal(pid, libc::SIGINT).expect("SIGINT our child");
    let o = child.wait_with_output().expect("tune output");
    assert!(changed, "tune never set the rate");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("interrupted"), "{}", stderr(&o));
    assert!(untouched(&lab), "{:?}", shaper_rates(&lab));
    assert!(
        !std::env::temp_dir()
            .join(format!("bloatlab-tune-{pid}"))
            .exists()
    );
    let ss = stdout(&lab.exec("server", &["ss", "-Hltn", "sport = :5001"]));
    assert!(!ss.contains("5001"), "a server is still listening: {ss}");
}
