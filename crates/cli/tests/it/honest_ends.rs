//! Issue 19, deliverables 6 and 7 (client side): a refused test exits 1 saying it was
//! refused in every mode; a run whose `-o` directory vanished is rescued to a printed path
//! with the right cause; `report` refuses a FIFO at once; an experiment whose expansion
//! is too large is refused before it expands; the permit key never appears on the command
//! lines of the children `bloatlab test` starts; a slow `-b` sends no more than its rate.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::harness::{BIN, Listen, Proc, free_port, tempdir};

fn bl(args: &[&str]) -> Output {
    bl_env(args, &[])
}

fn bl_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(BIN);
    c.args(args)
        .stdin(Stdio::null())
        .env_remove("BLOATLAB_PERMIT_KEY");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn server(port: u16, args: &[&str], listen: Listen) -> Proc {
    let p = port.to_string();
    let s = Proc::bloatlab(&[&["server", "-p", &p][..], args].concat());
    s.wait_listening(port, listen);
    s
}

/// Every TCP mode against a `--no-reverse --permit-key` server, with the rates that used to
/// get through: a paced `--full-duplex` whose one write fit before `-t` exited 0, `-P 2` of
/// it too, and a paced forward test saw the refusal a second late and called it a reset.
#[test]
fn refused_tcp_tests_exit_1_saying_refused_in_every_mode() {
    let port = free_port();
    let p = port.to_string();
    let key = "h19c-right-key";
    let srv = server(
        port,
        &["--no-reverse", &format!("--permit-key={key}")],
        Listen::Tcp,
    );
    let right = format!("--permit-key={key}");
    let wrong = "--permit-key=h19c-wrong-key";
    let cases: [&[&str]; 6] = [
        &["--full-duplex", "-b", "1m", "-t", "1", &right],
        &["--full-duplex", "-b", "1m", "-t", "1", wrong],
        &["--full-duplex", "-P", "2", "-b", "1m", "-t", "1", &right],
        &["-P", "2", "-b", "1m", "-t", "1", wrong],
        &["-b", "1m", "-t", "3", wrong],
        &["-R", "-t", "1", &right],
    ];
    for extra in cases {
        let o = bl(&[&["client", "127.0.0.1", "-p", &p][..], extra].concat());
        let e = err(&o);
        let ctx = format!("{extra:?}\n{e}\n{}", srv.transcript());
        assert_eq!(o.status.code(), Some(1), "{ctx}");
        assert!(e.contains("the server refused the test"), "{ctx}");
        assert!(
            !e.contains("reset the connection"),
            "a refusal, not a reset: {ctx}"
        );
    }
    // The key from the environment is the same key: served, and refused when wrong.
    let ok = bl_env(
        &["client", "127.0.0.1", "-p", &p, "-t", "0.5"],
        &[("BLOATLAB_PERMIT_KEY", key)],
    );
    assert_eq!(ok.status.code(), Some(0), "{}", err(&ok));
    let bad = bl_env(
        &["client", "127.0.0.1", "-p", &p, "-t", "0.5", "-b", "1m"],
        &[("BLOATLAB_PERMIT_KEY", "h19c-wrong-key")],
    );
    assert_eq!(bad.status.code(), Some(1), "{}", err(&bad));
    assert!(
        err(&bad).contains("the server refused the test"),
        "{}",
        err(&bad)
    );
}

/// UDP has no refusal message: a refused UDP test exits 1 and says it may be a refusal.
#[test]
fn refused_udp_tests_exit_1_naming_a_refusal() {
    let port = free_port();
    let p = port.to_string();
    let srv = server(
        port,
        &["-u", "--no-reverse", "--max-rate", "5m"],
        Listen::Udp,
    );
    // -R and --full-duplex: --no-reverse; -b 10m, alone or on each of -P 2
    // streams: --max-rate.
    for extra in [
        &["--full-duplex"][..],
        &["-R"],
        &["-b", "10m"],
        &["-P", "2", "-b", "10m"],
    ] {
        let o = bl(&[
            &["client", "127.0.0.1", "-u", "-p", &p, "-t", "1"][..],
            extra,
        ]
        .concat());
        let e = err(&o);
        let ctx = format!("{extra:?}\n{e}\n{}", srv.transcript());
        assert_eq!(o.status.code(), Some(1), "{ctx}");
        assert!(
            e.contains("the server refused the test or never got it"),
            "{ctx}"
        );
    }
}

/// Deleting the `-o` directory mid-run used to lose the whole run ("every load flow
/// failed": the runners' spooled outputs were read back by path). Now the run completes,
/// its results go to a rescue file that is printed, and the cause is the directory.
#[test]
fn a_results_directory_removed_mid_run_is_rescued_to_a_printed_path() {
    let port = free_port();
    let _srv = server(port, &[], Listen::Both);
    let tmp = tempdir();
    let dir = tmp.path().join("gone");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("r.json");
    let p = port.to_string();
    let args = [
        "test",
        "tcp_upload",
        "127.0.0.1",
        "-p",
        &p,
        "-l",
        "2",
        "--idle",
        "1",
        "-o",
        file.to_str().unwrap(),
    ];
    let mut run = Proc::bloatlab(&args);
    // The journal exists once the run started measuring.
    assert!(crate::harness::wait_until(Duration::from_secs(20), || {
        dir.join("r.json.journal").exists()
    }));
    std::thread::sleep(Duration::from_millis(1500));
    std::fs::remove_dir_all(&dir).unwrap();
    let st = run.wait_exit(Duration::from_secs(60));
    let e = run.err();
    assert_eq!(st.code(), Some(1), "{}", run.transcript());
    assert!(!e.contains("every load flow failed"), "{e}");
    assert!(e.contains("was removed during the run"), "{e}");
    let rescue = e
        .split("saved to ")
        .nth(1)
        .and_then(|r| r.split(" instead").next())
        .unwrap_or_else(|| panic!("no rescue path printed: {e}"));
    let f = bloatlab_results::load(std::path::Path::new(rescue)).unwrap();
    let _ = std::fs::remove_file(rescue);
    assert!(
        f.raw.throughput.iter().any(|t| !t.samples.is_empty()),
        "the rescued run has its measurements"
    );
}

/// `bloatlab report` on a FIFO with no writer hung forever; it is refused at once.
#[test]
fn report_refuses_a_fifo_at_once_instead_of_hanging() {
    let tmp = tempdir();
    let fifo = tmp.path().join("run.json");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let mut r = Proc::bloatlab(&["report", fifo.to_str().unwrap()]);
    let st = r.wait_exit(Duration::from_secs(20));
    assert_eq!(st.code(), Some(1), "{}", r.transcript());
    assert!(
        r.err().contains("not a regular file (a FIFO)"),
        "{}",
        r.err()
    );
}

/// A 20 KB experiment file (a 100,000-value range with a 20,000-character suffix) made
/// `--list-points` allocate 4 GB and abort; it is refused naming the key and the line.
#[test]
fn list_points_refuses_a_huge_expansion_naming_the_key_and_line() {
    let tmp = tempdir();
    let f = tmp.path().join("huge.toml");
    let suffix = "s".repeat(20_000);
    std::fs::write(
        &f,
        format!(
            "[test]\nname = \"rrul\"\n\n[matrix]\n\"lab.limit\" = {{ from = 1, to = 100000, step = 1, suffix = \"{suffix}\" }}\n"
        ),
    )
    .unwrap();
    let mut r = Proc::bloatlab(&["experiment", "run", f.to_str().unwrap(), "--list-points"]);
    let st = r.wait_exit(Duration::from_secs(30));
    let e = r.err();
    assert_eq!(st.code(), Some(2), "{}", r.transcript());
    assert!(
        e.contains("huge.toml:5: matrix.lab.limit") && e.contains("expansion budget"),
        "{e}"
    );
}

/// A 100,000-point file is within the budget, but its `[quick] repetitions = 1000` planned
/// 10^8 runs: `--quick --list-points` asked `with_capacity` for gigabytes. The quick variant
/// is checked as the file is, so both variants are refused at once naming
/// `quick.repetitions` and its line, within 1 GiB of address space (the expansion would
/// take over 4 GiB).
#[test]
fn a_quick_variant_over_the_expansion_budget_is_refused_naming_its_repetitions() {
    let tmp = tempdir();
    let f = tmp.path().join("quick.toml");
    std::fs::write(
        &f,
        "[test]\nname = \"rrul\"\n\n[matrix]\n\"lab.limit\" = { from = 1, to = 100000, step = 1, suffix = \"p\" }\n\n[quick]\nlength = 2\nrepetitions = 1000\n",
    )
    .unwrap();
    for quick in ["--quick", ""] {
        let script = format!(
            "ulimit -v 1048576; exec {BIN} experiment run {} {quick} --list-points",
            f.display()
        );
        let t0 = std::time::Instant::now();
        let mut r = Proc::spawn("sh", &["-c", &script]);
        let st = r.wait_exit(Duration::from_secs(20));
        let e = r.err();
        assert_eq!(st.code(), Some(2), "{quick}: {}", r.transcript());
        assert!(
            e.contains("quick.toml:9: quick.repetitions")
                && e.contains("under --quick: 100000000 runs (at most 100000)"),
            "{quick}: {e}"
        );
        assert!(r.out().is_empty(), "{quick}: no run listed: {}", r.out());
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    }
}

/// `bloatlab test --permit-key` hands the key to its `client` and `ping` children in
/// $BLOATLAB_PERMIT_KEY: none of their command lines (world-readable) holds it, and the
/// keyed server still serves every flow.
#[test]
fn the_permit_key_is_never_on_the_command_line_of_test_s_children() {
    let port = free_port();
    let key = "h19c-secret-in-env";
    let _srv = server(port, &[&format!("--permit-key={key}")], Listen::Both);
    let tmp = tempdir();
    let file = tmp.path().join("k.json");
    let p = port.to_string();
    let mut run = Proc::bloatlab(&[
        "test",
        "rrul_be",
        "127.0.0.1",
        "-p",
        &p,
        "-l",
        "2",
        "--idle",
        "1",
        "-o",
        file.to_str().unwrap(),
        &format!("--permit-key={key}"),
    ]);
    let parent = run.pid();
    let mut children = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while run.alive() && std::time::Instant::now() < deadline {
        let all = processes();
        // Between fork and exec a child still shows its parent's command line.
        let own = all.iter().find(|p| p.0 == parent).map(|p| p.2.clone());
        for (pid, ppid, cmdline) in all {
            if ppid == parent && Some(&cmdline) != own.as_ref() {
                children += 1;
                assert!(!cmdline.contains(key), "child {pid}: {cmdline}");
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let st = run.wait_exit(Duration::from_secs(30));
    assert_eq!(st.code(), Some(0), "{}", run.transcript());
    assert!(children > 0, "no child of the test was seen");
}

/// (pid, parent pid, command line) of every process, from /proc.
fn processes() -> Vec<(u32, u32, String)> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // The fields after the command name, which is in parentheses and may hold spaces.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|x| x.parse().ok())
            .unwrap_or(0);
        let cmdline = std::fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        v.push((pid, ppid, cmdline));
    }
    v
}

/// `-R -b 1 -t 1` sent a whole 128 KB first write and reported 1.04 Mbit/s; a paced write
/// now carries at most 100 ms of the rate, so it receives one byte.
#[test]
fn a_slow_reverse_rate_does_not_start_with_a_full_write() {
    let port = free_port();
    let _srv = server(port, &[], Listen::Tcp);
    let p = port.to_string();
    let o = bl(&[
        "client",
        "127.0.0.1",
        "-p",
        &p,
        "-R",
        "-b",
        "1",
        "-t",
        "1",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let bytes = doc["streams"][0]["summary"]["bytes"].as_u64().unwrap();
    assert!((1..=2).contains(&bytes), "{bytes} bytes at 1 bit/s in 1 s");
    // 1 Mbit/s for 2 s: within a 100 ms write of the rate, not a whole 128 KB over.
    let o = bl(&[
        "client",
        "127.0.0.1",
        "-p",
        &p,
        "-R",
        "-b",
        "1m",
        "-t",
        "2",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let bytes = doc["streams"][0]["summary"]["bytes"].as_u64().unwrap();
    assert!(
        bytes <= 250_000 + 12_500,
        "{bytes} bytes at 1 Mbit/s in 2 s"
    );
}
