//! `bloatlab lab` lifecycle in real namespaces: up, list, status, exec,
//! down; bad input; missing privilege; names in use; a dead emulator.

use bloatlab_testkit::tier;

use crate::harness::Proc;
use crate::harness::lab::*;
use crate::harness::tempdir;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn up_exec_status_list_down_round_trip() {
    if !tier::root("up_exec_status_list_down_round_trip") {
        return;
    }
    let lab = LabGuard::up("rt", &["--peer", "--clients", "2"]);
    let ns = lab.namespaces();
    assert_eq!(ns.len(), 4, "{ns:?}");

    let st = lab.status();
    assert_eq!(st["emulator_alive"], true, "{st}");
    assert_eq!(st["hosts"].as_array().map(Vec::len), Some(4));

    let list = stdout(&bl(&["lab", "list"]));
    assert!(list.contains(&lab.name), "{list}");
    // --json is the lab crate's typed record.
    let o = bl(&["lab", "list", "--json"]);
    let typed: bloatlab_lab::status::LabList = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("lab list --json is not a LabList: {e}: {}", stdout(&o)));
    let entry = typed.labs.iter().find(|e| e.name == lab.name).unwrap();
    assert!(entry.emulator_alive && entry.pid > 0, "{entry:?}");
    assert_eq!(entry.hosts.len(), 4, "{entry:?}");

    // Packets cross the emulator: client and client2 reach server and peer.
    for (host, target) in [
        ("client", "10.77.0.2"),
        ("client2", "10.77.0.3"),
        ("server", "10.77.0.12"),
    ] {
        let o = lab.exec(host, &["fping", "-c", "2", "-p", "50", "-q", target]);
        assert!(o.status.success(), "{host} -> {target}: {}", stderr(&o));
    }
    // exec runs inside the namespace: only lo and the TUN are visible, and
    // the environment names the hosts.
    let o = lab.exec(
        "client",
        &["sh", "-c", "ls /sys/class/net; echo $BLOATLAB_SERVER"],
    );
    let out = stdout(&o);
    assert!(out.contains("bl-client") && out.contains("lo"), "{out}");
    assert!(out.contains("10.77.0.2"), "{out}");
    assert!(!out.contains("eth0"), "{out}");
    // The exit status of the command is passed through.
    assert_eq!(
        lab.exec("server", &["sh", "-c", "exit 7"]).status.code(),
        Some(7)
    );

    // Counters reach `lab status` (published every 0.5 s).
    assert!(wait_until(Duration::from_secs(3), || {
        lab.status()["counters"]["directions"][0][1]["io"]["tx_packets"]
            .as_u64()
            .unwrap_or(0)
            >= 4
    }));

    // A command left running with `lab exec` is ended by `lab down` (by
    // its PID, recorded under the state dir), not orphaned in a namespace.
    let mut left = lab.bg("server", &["sleep", "300"]);
    let exec_dir = format!("/run/bloatlab/{}.exec/{}", lab.name, left.pid());
    assert!(
        wait_until(Duration::from_secs(5), || std::path::Path::new(&exec_dir)
            .exists()),
        "{exec_dir} not recorded"
    );

    // A process started with plain `ip netns exec` is not ours to end:
    // `lab down` names it instead (it keeps the namespace alive).
    let stray = Proc::spawn(
        "ip",
        &[
            "netns",
            "exec",
            &format!("bl-{}-server", lab.name),
            "sleep",
            "300",
        ],
    );
    assert!(wait_until(Duration::from_secs(5), || {
        std::fs::read_to_string(format!("/proc/{}/comm", stray.pid()))
            .is_ok_and(|c| c.trim() == "sleep")
    }));

    let o = bl(&["lab", "down", &lab.name]);
    assert!(o.status.success(), "{}", stderr(&o));
    let warned = format!(
        "still running in bl-{}-server: {} (sleep)",
        lab.name,
        stray.pid()
    );
    assert!(stderr(&o).contains(&warned), "{}", stderr(&o));
    drop(stray);
    assert!(
        stdout(&o).contains("1 `lab exec` process(es) ended"),
        "{}",
        stdout(&o)
    );
    assert!(
        wait_until(Duration::from_secs(5), || left.try_wait().is_some()),
        "the lab exec command survived lab down"
    );
    assert!(lab.namespaces().is_empty());
    assert!(!stdout(&bl(&["lab", "list"])).contains(&lab.name));
    let o = bl(&["lab", "status", &lab.name]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("no lab named"), "{}", stderr(&o));
}

/// Brings up a lab with `link_args` and `--trace DIR/t`, sends five fping
/// echo requests through it, takes it down (which completes the files) and
/// returns DIR.
fn trace_five_pings(tag: &str, link_args: &[&str]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique("trace"));
    std::fs::create_dir_all(&dir).unwrap();
    let prefix = dir.join("t");
    let mut args = link_args.to_vec();
    args.extend(["--trace", prefix.to_str().unwrap()]);
    let lab = LabGuard::up(tag, &args);
    let o = lab.exec(
        "client",
        &["fping", "-c", "5", "-p", "20", "-q", "10.77.0.2"],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = bl(&["lab", "down", &lab.name]);
    assert!(o.status.success(), "{}", stderr(&o));
    dir
}

/// The `sent` lines of the 84-byte echo packets in trace file `path` (its
/// header checked): plus nothing else on an idle lab but what the kernel
/// may send, e.g. router solicitations, which are not IPv4.
fn echo_sent_lines(path: &std::path::Path) -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("time_ns,flow,size_bytes,sojourn_ns,verdict"),
        "{}",
        path.display()
    );
    lines
        .map(|l| l.split(',').map(str::to_owned).collect::<Vec<_>>())
        .filter(|f| f.len() == 5 && f[4] == "sent" && f[2] == "84")
        .collect()
}

#[test]
fn trace_files_hold_every_packet_with_its_sojourn() {
    if !tier::root("trace_files_hold_every_packet_with_its_sojourn") {
        return;
    }
    let dir = trace_five_pings("tr", &["--rate", "10mbit", "--delay", "5ms"]);
    for dir_name in ["up", "down"] {
        let sent = echo_sent_lines(&dir.join(format!("t.{dir_name}.csv")));
        assert_eq!(sent.len(), 5, "{dir_name}: {sent:?}");
        for f in &sent {
            let sojourn: u64 = f[3].parse().unwrap();
            assert!(sojourn < 5_000_000, "{dir_name}: sojourn {sojourn} ns");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// With stages, `--trace` writes one file per stage and direction
/// (`PREFIX.DIR.STAGE.csv`); each holds the packets that crossed that stage.
#[test]
fn trace_files_of_a_chain_hold_every_stage() {
    if !tier::root("trace_files_of_a_chain_hold_every_stage") {
        return;
    }
    let dir = trace_five_pings(
        "trc",
        &[
            "--stage",
            "name=router rate=10mbit qdisc=fq_codel shaper",
            "--stage",
            "name=modem rate=20mbit qdisc=fifo",
            "--delay",
            "5ms",
        ],
    );
    assert!(
        !dir.join("t.up.csv").exists(),
        "a chain has no direction-wide trace"
    );
    for d in ["up", "down"] {
        for stage in ["router", "modem", "path"] {
            let sent = echo_sent_lines(&dir.join(format!("t.{d}.{stage}.csv")));
            assert_eq!(sent.len(), 5, "{d}.{stage}: {sent:?}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn invalid_link_specs_exit_2_naming_field_and_value() {
    for (args, field, value) in [
        (vec!["--rate", "0mbit"], "rate", "0mbit"),
        (vec!["--delay", "-5ms"], "delay", "-5ms"),
        (vec!["--qdisc", "sfq"], "qdisc", "sfq"),
        (vec!["--down-rate", "20mbits"], "rate", "20mbits"),
        (vec!["--loss", "150%"], "loss", "150%"),
        (vec!["--limit", "10 furlongs"], "limit", "10 furlongs"),
        // Each flag family's bad value is clap's, naming the exact flag.
        (vec!["--down-loss", "150%"], "for '--down-loss <", "'150%'"),
        (
            vec!["--up-stage", "rate=9mbit limit=0p"],
            "for '--up-stage <",
            "limit: \"0p\"",
        ),
        (
            vec!["--qdisc-param", "bogus=1"],
            "for '--qdisc-param <",
            "\"bogus\" is not known",
        ),
        (
            vec!["--trace", "/nonexistent-bl/t"],
            "--trace",
            "/nonexistent-bl/t",
        ),
        (
            vec!["--backend", "kernel", "--trace", "/tmp/t"],
            "--trace",
            "userspace backend",
        ),
    ] {
        let name = unique("bad");
        // Takes the lab down if a case is wrongly accepted, before the assertion fails.
        let _lab = LabGuard::adopt(&name);
        let mut v = vec!["lab", "up", &name];
        v.extend_from_slice(&args);
        let o = bl(&v);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(field) && err.contains(value),
            "{args:?}: {err}"
        );
        assert!(lab_namespaces(&name).is_empty());
    }
    let o = bl(&["lab", "up", "Not_Valid"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn without_root_the_privilege_is_named_and_exit_is_3() {
    let name = unique("np");
    for args in [
        vec!["lab", "up", name.as_str()],
        vec!["lab", "down", name.as_str()],
    ] {
        let o = Command::new(BIN)
            .args(&args)
            .stdin(Stdio::null())
            .uid(65534)
            .gid(65534)
            .output()
            .expect("run as nobody");
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(3), "{args:?}: {err}");
        assert!(
            err.contains("CAP_NET_ADMIN") && err.contains("root"),
            "{err}"
        );
    }
    assert!(lab_namespaces(&name).is_empty());
}

#[test]
fn a_name_in_use_is_refused() {
    if !tier::root("a_name_in_use_is_refused") {
        return;
    }
    let lab = LabGuard::up("dup", &[]);
    let o = bl(&["lab", "up", &lab.name]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("already in use"), "{}", stderr(&o));
    // The refused attempt did not disturb the running lab.
    assert_eq!(lab.status()["emulator_alive"], true);
    assert_eq!(lab.namespaces().len(), 2);
}

#[test]
fn a_dead_emulator_is_reported_and_down_still_cleans_up() {
    if !tier::root("a_dead_emulator_is_reported_and_down_still_cleans_up") {
        return;
    }
    let lab = LabGuard::up("dead", &[]);
    let pid = lab.status()["pid"].as_i64().expect("pid") as i32;
    assert!(pid > 0);
    bloatlab_os::process::signal(pid as u32, libc::SIGKILL).expect("signal our own process");
    assert!(wait_until(
        Duration::from_secs(5),
        || lab.status()["emulator_alive"] == false
    ));
    let o = bl(&["lab", "status", &lab.name]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("NOT RUNNING"), "{}", stdout(&o));
    assert!(stderr(&o).contains("not running"), "{}", stderr(&o));
    assert!(stdout(&bl(&["lab", "list"])).contains("DEAD"));
    let o = bl(&["lab", "down", &lab.name]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(lab.namespaces().is_empty());
}

#[test]
fn leftovers_without_state_are_removed_by_exact_name() {
    if !tier::root("leftovers_without_state_are_removed_by_exact_name") {
        return;
    }
    let lab = LabGuard::up("left", &[]);
    let pid = lab.status()["pid"].as_i64().expect("pid") as i32;
    bloatlab_os::process::signal(pid as u32, libc::SIGKILL).expect("signal our own process");
    let _ = std::fs::remove_file(format!("/run/bloatlab/{}.json", lab.name));
    assert_eq!(lab.namespaces().len(), 2);
    let o = bl(&["lab", "down", &lab.name]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("leftover"), "{}", stdout(&o));
    assert!(lab.namespaces().is_empty());
}

#[test]
fn foreground_lab_is_torn_down_by_ctrl_c() {
    if !tier::root("foreground_lab_is_torn_down_by_ctrl_c") {
        return;
    }
    let name = unique("fg");
    let _guard = LabGuard::adopt(&name);
    let mut child = Command::new(BIN)
        .args(["lab", "up", &name, "--foreground"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let up = wait_until(Duration::from_secs(10), || {
        let o = bl(&["lab", "status", &name, "--json"]);
        o.status.success()
    });
    assert!(up, "foreground lab never came up");
    // SAFETY: our child.
    bloatlab_os::process::signal(child.id(), libc::SIGINT).expect("SIGINT our child");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    assert!(lab_namespaces(&name).is_empty());
    assert!(!std::path::Path::new(&format!("/run/bloatlab/{name}.json")).exists());
}

#[test]
fn ecn_and_sysctls_are_per_host() {
    if !tier::root("ecn_and_sysctls_are_per_host") {
        return;
    }
    let lab = LabGuard::up("ecn", &["--ecn", "client"]);
    let read = |host: &str, key: &str| {
        stdout(&lab.exec(host, &["cat", &format!("/proc/sys/net/ipv4/{key}")]))
            .trim()
            .to_string()
    };
    assert_eq!(read("client", "tcp_ecn"), "1");
    assert_eq!(read("server", "tcp_ecn"), "2");
    assert_eq!(read("server", "ping_group_range"), "0\t2147483647");
    let o = lab.exec("nohost", &["true"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

/// The lab daemon must not keep its caller's files open: `flock L bloatlab
/// lab up ...` used to hold L until `lab down`, and a `$(bloatlab lab up ...)`
/// caller could wait forever for EOF on a pipe the daemon inherited.
#[test]
fn lab_up_daemon_does_not_inherit_the_callers_fds() {
    if !tier::root("lab_up_daemon_does_not_inherit_the_callers_fds") {
        return;
    }
    let name = unique("fd");
    let lock = std::env::temp_dir().join(format!("bloatlab-{name}.lock"));
    let _down = LabGuard::adopt(&name);
    // flock(1) holds the lock on an fd that `bloatlab lab up` inherits.
    let o = Command::new("flock")
        .arg(&lock)
        .args([BIN, "lab", "up", &name])
        .stdin(Stdio::null())
        .output()
        .expect("run flock");
    assert!(o.status.success(), "lab up: {}", stderr(&o));
    let free = Command::new("flock")
        .args(["-n"])
        .arg(&lock)
        .arg("true")
        .status()
        .expect("run flock -n");
    let _ = std::fs::remove_file(&lock);
    assert!(
        free.success(),
        "the lab daemon still holds the caller's lock"
    );
    // $(...) returns: the shell reads lab up's stdout to EOF.
    let name2 = unique("fs");
    let _down2 = LabGuard::adopt(&name2);
    let mut sh = Command::new("sh")
        .args(["-c", &format!("x=$({BIN} lab up {name2}); echo done")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run sh");
    let ok = wait_until(Duration::from_secs(20), || {
        matches!(sh.try_wait(), Ok(Some(_)))
    });
    if !ok {
        let _ = sh.kill();
    }
    let _ = sh.wait();
    assert!(ok, "$(bloatlab lab up) did not return");
}

/// A run through a lab whose emulator dies during it exits 1 naming that cause (not
/// only the loss or silence it causes), and `lab exec` then refuses to run anything.
#[test]
fn a_run_through_a_lab_whose_emulator_dies_exits_1_naming_it() {
    if !tier::root("a_run_through_a_lab_whose_emulator_dies_exits_1_naming_it") {
        return;
    }
    let lab = LabGuard::up("h11em", &[]);
    let pid = lab.status()["pid"].as_i64().expect("pid") as i32;
    assert!(pid > 0);
    let _srv = lab.bg("server", &[BIN, "server", "-p", "5201"]);
    // The server answers through the live lab first: these runs are real.
    assert!(wait_until(Duration::from_secs(10), || {
        lab.exec(
            "client",
            &[BIN, "ping", "10.77.0.2", "-p", "5201", "-c", "3"],
        )
        .status
        .success()
    }));
    let ping = lab.spawn(
        "client",
        &[
            BIN,
            "ping",
            "10.77.0.2",
            "-p",
            "5201",
            "-t",
            "4",
            "-i",
            "20ms",
        ],
    );
    let client = lab.spawn(
        "client",
        &[BIN, "client", "10.77.0.2", "-p", "5201", "-t", "4"],
    );
    std::thread::sleep(Duration::from_millis(1500));
    bloatlab_os::process::signal(pid as u32, libc::SIGKILL).expect("signal our own process");
    let want = format!("lab {}'s emulator (pid {pid}) is not running", lab.name);
    for (what, child) in [("ping", ping), ("client", client)] {
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{what}: {}", stderr(&o));
        assert!(stderr(&o).contains(&want), "{what}: {}", stderr(&o));
    }
    // Before a run: `lab exec` itself refuses, and so would a command it ran.
    let o = lab.exec("client", &["true"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains(&want), "{}", stderr(&o));
    let tmp = tempdir();
    let out = tmp.path().join("run.json");
    for args in [
        vec!["ping", "127.0.0.1", "-c", "1"],
        vec!["client", "127.0.0.1", "-t", "1"],
        vec![
            "test",
            "tcp_upload",
            "127.0.0.1",
            "-l",
            "1",
            "-o",
            out.to_str().unwrap(),
        ],
    ] {
        let o = Command::new(BIN)
            .args(&args)
            .env("BLOATLAB_LAB", &lab.name)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(&want), "{args:?}: {}", stderr(&o));
    }
    assert!(
        !out.exists(),
        "nothing written for a run that could not start"
    );
    let o = bl(&["lab", "status", &lab.name]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("the lab is dead"), "{}", stdout(&o));
}
