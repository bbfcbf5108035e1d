//! The session's guard, checked with a stand-in `bloatlab`: a shell script that logs its
//! arguments and plays `lab up`, `lab down`, a server and `ping`.

use super::*;
use std::os::unix::process::ExitStatusExt as _;
use std::sync::atomic::AtomicBool;

/// A temporary directory with the stand-in executable; removed when dropped.
struct Fake {
    dir: PathBuf,
    exe: PathBuf,
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Fake {
    /// `lab up fail` fails naming a cause; a server writes its PID and sleeps; `lab down`
    /// logs whether that server is still alive; `ping` prints `ping.json` when it exists
    /// and otherwise fails.
    fn new(tag: &str) -> Fake {
        let dir = std::env::temp_dir().join(format!("bl-session-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let d = dir.display();
        let script = format!(
            r#"#!/bin/sh
echo "$*" >> {d}/log
case "$1 $2" in
  "lab up") [ "$3" = fail ] && {{ echo "a cause" >&2; echo "no such device" >&2; exit 1; }}; exit 0 ;;
  "lab down")
    if [ -f {d}/server.pid ] && kill -0 "$(cat {d}/server.pid)" 2>/dev/null; then
      echo "server alive at lab down" >> {d}/log
    fi
    exit 0 ;;
  "lab exec") shift 6 ;;
esac
case "$1" in
  server) echo "server key=${{BLOATLAB_PERMIT_KEY:-none}}" >> {d}/log; echo $$ > {d}/server.pid; exec sleep 30 ;;
  ping) [ -f {d}/ping.json ] && exec cat {d}/ping.json; exit 1 ;;
esac
exit 0
"#
        );
        let exe = dir.join("bloatlab");
        std::fs::write(&exe, script).unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        // A fork in another test thread while the script was open for writing holds it
        // open until that child execs: running it meanwhile fails with ETXTBSY.
        for _ in 0..100 {
            match std::process::Command::new(&exe).arg("noop").status() {
                Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                r => {
                    r.unwrap();
                    break;
                }
            }
        }
        let _ = std::fs::remove_file(dir.join("log"));
        Fake { dir, exe }
    }

    /// The PID of the server the script started, once it has written it.
    fn server_pid(&self) -> i32 {
        let t0 = std::time::Instant::now();
        loop {
            if let Ok(s) = std::fs::read_to_string(self.dir.join("server.pid"))
                && let Ok(pid) = s.trim().parse()
            {
                return pid;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "the server never started"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Makes `ping` answer with one received probe.
    fn answer_pings(&self) {
        let raw = bloatlab_testkit::sample::idle_then_loaded(
            Duration::from_millis(1),
            Duration::from_millis(1),
            Duration::from_secs(2),
        );
        let meta = bloatlab_results::Metadata::new("ping", vec![], jiff::Timestamp::UNIX_EPOCH);
        let file = bloatlab_results::ResultsFile::new(meta, raw);
        let bytes = bloatlab_results::save::to_vec(&file).unwrap();
        std::fs::write(self.dir.join("ping.json"), bytes).unwrap();
    }
}

#[test]
fn the_server_address_is_the_lab_plan_s() {
    assert_eq!(server_addr(), Ipv4Addr::new(10, 77, 0, 2));
}

#[test]
fn exec_argv_runs_this_binary_in_a_host_of_the_lab() {
    let s = LabSession::existing(Path::new("/bin/bl"), "demo1");
    assert_eq!(
        s.exec_argv("client", &["ping", "10.77.0.2"]),
        [
            "lab",
            "exec",
            "demo1",
            "client",
            "--",
            "/bin/bl",
            "ping",
            "10.77.0.2"
        ]
    );
}

#[test]
fn a_failed_lab_up_is_named_and_the_half_built_lab_still_goes_down() {
    let f = Fake::new("upfail");
    let stop = AtomicBool::new(false);
    let e = LabSession::up(&f.exe, "fail", &["--rate", "20mbit"], &stop).unwrap_err();
    assert_eq!(e.to_string(), "lab up: no such device");
    assert_eq!(f.log(), ["lab up fail --rate 20mbit", "lab down fail"]);
}

#[test]
fn ctrl_c_during_lab_up_tears_the_lab_down() {
    let f = Fake::new("upstop");
    let stop = AtomicBool::new(true);
    let e = LabSession::up(&f.exe, "l1", &[], &stop).unwrap_err();
    assert!(matches!(e, SessionError::Interrupted), "{e}");
    assert_eq!(f.log(), ["lab up l1", "lab down l1"]);
}

#[test]
fn the_server_is_waited_for_and_killed_before_the_lab_goes_down() {
    let f = Fake::new("server");
    f.answer_pings();
    let stop = AtomicBool::new(false);
    let mut s = LabSession::up(&f.exe, "l2", &[], &stop).unwrap();
    let mut server = ServerInvocation::on_port(5001);
    server.engine.enhanced = true;
    server.engine.permit_key = Some("sekrit-key-1234".into());
    s.start_server(&server, &stop).unwrap();
    let pid = f.server_pid();
    let exe = f.exe.display().to_string();
    let log = f.log();
    assert_eq!(log[0], "lab up l2");
    // The typed server's command line; its key by environment only.
    let argv = bloatlab_invoke::server::to_argv(&server).join(" ");
    assert!(
        argv.contains("--port=5001") && argv.contains("--enhanced"),
        "{argv}"
    );
    assert!(
        log.contains(&format!("lab exec l2 server -- {exe} {argv}")),
        "{log:?}"
    );
    assert!(
        !log.iter()
            .any(|l| l.contains("sekrit") && !l.starts_with("server key=")),
        "{log:?}"
    );
    assert!(
        log.contains(&"server key=sekrit-key-1234".to_owned()),
        "{log:?}"
    );
    assert!(
        log.contains(&format!(
            "lab exec l2 client -- {exe} ping 10.77.0.2 -c 1 --timeout 1 --json"
        )),
        "{log:?}"
    );
    drop(s);
    let log = f.log();
    assert_eq!(
        log.last().map(String::as_str),
        Some("lab down l2"),
        "{log:?}"
    );
    assert!(!log.iter().any(|l| l.contains("server alive")), "{log:?}");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "server {pid} alive"
    );
}

#[test]
fn a_silent_server_is_reported_and_ctrl_c_stops_the_wait() {
    let f = Fake::new("silent");
    let stop = AtomicBool::new(false);
    let s = LabSession::existing(&f.exe, "l3");
    let e = s.wait_for_server(5001, Duration::ZERO, &stop).unwrap_err();
    assert_eq!(
        e.to_string(),
        "waiting for the server: the server in the lab did not answer probes within 0 s"
    );
    stop.store(true, Ordering::Relaxed);
    let e = s
        .wait_for_server(5001, Duration::from_secs(60), &stop)
        .unwrap_err();
    assert!(matches!(e, SessionError::Interrupted), "{e}");
}

#[test]
fn a_session_in_someone_else_s_lab_leaves_the_lab_up() {
    let f = Fake::new("existing");
    f.answer_pings();
    let stop = AtomicBool::new(false);
    let mut s = LabSession::existing(&f.exe, "theirs");
    // A server without a key runs without the variable (an inherited one is removed).
    s.start_server(&ServerInvocation::on_port(5001), &stop)
        .unwrap();
    let pid = f.server_pid();
    assert!(
        f.log().contains(&"server key=none".to_owned()),
        "{:?}",
        f.log()
    );
    drop(s);
    let log = f.log();
    assert!(!log.iter().any(|l| l.starts_with("lab down")), "{log:?}");
    // Its server is gone all the same.
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "server {pid} alive"
    );
}

#[test]
fn a_ping_answers_only_with_a_received_probe_and_success() {
    let f = Fake::new("ping");
    f.answer_pings();
    let ok = |code: i32| Output {
        status: std::process::ExitStatus::from_raw(code << 8),
        stdout: std::fs::read(f.dir.join("ping.json")).unwrap(),
        stderr: Vec::new(),
    };
    assert!(ping_answered(&ok(0)));
    assert!(!ping_answered(&ok(1)));
    let garbage = Output {
        stdout: b"{}".to_vec(),
        ..ok(0)
    };
    assert!(!ping_answered(&garbage));
}
