use super::*;
use crate::catalog::TestName;

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bl-journal-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn cfg() -> RunConfig {
    RunConfig {
        test: TestName::TcpUpload,
        params: TestParams {
            loaded: Duration::from_secs(4),
            idle_before: Duration::from_secs(1),
            idle_after: Duration::from_secs(2),
            cc: vec![bloatlab_units::CongestionControl::new("reno").unwrap()],
            markings: vec![Tos(0xb8)],
            ..TestParams::default()
        },
        target: Target {
            exe: "bloatlab".into(),
            host: "127.0.0.1".into(),
            host6: None,
            port: 5999,
            ecn_fwmark: None,
            rpm: Default::default(),
            permit_key: Some("not journaled".into()),
        },
        command_line: vec!["bloatlab".into(), "test".into()],
        title: Some("t".into()),
        preflight: true,
        lab: None,
        ecn: None,
    }
}

fn output(stdout: &str, at: u64) -> Output {
    Output {
        spawned: Duration::from_secs(1),
        exited: Duration::from_secs(at),
        status: Some(0),
        stdout: stdout.as_bytes().to_vec(),
        stderr: b"a warning\n".to_vec(),
    }
}

/// A journal as a run writes it: start, progress each tick (rate-limited), an output, end.
fn write_sample(path: &Path) {
    let mut w = JournalWriter::create(path).unwrap();
    w.start(Header::new(
        &cfg(),
        jiff::Timestamp::from_second(1_700_000_000).unwrap(),
    ));
    for ms in (0..=2500).step_by(50) {
        w.progress(Duration::from_millis(ms), "idle");
    }
    w.output(
        "tcp_up_1",
        &output("{\"doc\": 1}", 2),
        Duration::from_secs(2),
    );
    w.end(Duration::from_millis(2600), false);
}

#[test]
fn a_written_journal_reads_back_with_progress_at_most_once_a_second() {
    let d = tmp("roundtrip");
    let p = path_for(&d.join("x.json"));
    assert!(p.ends_with("x.json.journal"));
    write_sample(&p);
    let text = std::fs::read_to_string(&p).unwrap();
    // start + progress at 0, 1, 2 s (not every 50 ms tick) + output + end.
    assert_eq!(text.lines().count(), 6, "{text}");
    let j = read(&p).unwrap();
    assert_eq!(j.header, Header::new(&cfg(), j.header.run_start));
    assert_eq!(j.header.test, "tcp_upload");
    assert!(
        !text.contains("not journaled"),
        "the permit key is not written"
    );
    assert_eq!(j.progress, Some((Duration::from_secs(2), "idle".into())));
    assert_eq!(j.outputs.len(), 1);
    assert_eq!(j.outputs[0].output().stdout, b"{\"doc\": 1}");
    assert_eq!(j.outputs[0].stderr_tail, "a warning\n");
    assert_eq!(j.end, Some((Duration::from_millis(2600), false)));
    assert!(j.complete() && !j.truncated_tail);
    // The parameters survive the round trip.
    let back = config(&j, "bloatlab".into()).unwrap();
    assert_eq!(back.params, cfg().params);
    assert_eq!(back.test, TestName::TcpUpload);
    // A journal is never overwritten.
    assert!(JournalWriter::create(&p).is_err());
    let _ = std::fs::remove_dir_all(&d);
}

/// The bytes of [`write_sample`]'s journal.
fn sample_bytes(tag: &str) -> Vec<u8> {
    let d = tmp(tag);
    let p = d.join("x.json.journal");
    write_sample(&p);
    let bytes = std::fs::read(&p).unwrap();
    let _ = std::fs::remove_dir_all(&d);
    bytes
}

#[test]
fn a_cut_short_last_line_is_dropped_and_the_rest_kept() {
    let bytes = sample_bytes("cut");
    // Cut in the middle of the end entry (what SIGKILL during a write leaves).
    let cut = &bytes[..bytes.len() - 10];
    let j = parse(cut).unwrap();
    assert!(j.truncated_tail);
    assert_eq!(j.end, None);
    assert!(!j.complete());
    assert_eq!(j.outputs.len(), 1);
    // A whole last entry without its newline is kept.
    let j = parse(&bytes[..bytes.len() - 1]).unwrap();
    assert!(!j.truncated_tail && j.end.is_some());
}

#[test]
fn a_garbage_line_is_an_error_naming_its_line() {
    let text = String::from_utf8(sample_bytes("garbage")).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines.insert(2, "this is not json");
    let e = parse(format!("{}\n", lines.join("\n")).as_bytes()).unwrap_err();
    assert!(matches!(e, JournalError::BadLine { line: 3, .. }), "{e:?}");
    assert!(e.to_string().contains("journal line 3"), "{e}");
    // Valid JSON that is not an entry, and a second start, are errors too.
    lines[2] = r#"{"event": "explode"}"#;
    let e = parse(format!("{}\n", lines.join("\n")).as_bytes()).unwrap_err();
    assert!(e.to_string().contains("line 3"), "{e}");
    let first = lines[0];
    lines[2] = first;
    let e = parse(format!("{}\n", lines.join("\n")).as_bytes()).unwrap_err();
    assert!(e.to_string().contains("line 3: a second start"), "{e}");
    // No start entry, an empty file, another format.
    let e = parse(format!("{}\n", lines[1]).as_bytes()).unwrap_err();
    assert!(e.to_string().contains("line 1"), "{e}");
    assert!(matches!(parse(b"").unwrap_err(), JournalError::Empty));
    let other = first.replace(FORMAT, "something-else");
    let e = parse(format!("{other}\n").as_bytes()).unwrap_err();
    assert!(e.to_string().contains("line 1: format"), "{e}");
}

#[test]
fn outputs_stop_at_the_size_bound_and_the_journal_stays_readable() {
    let d = tmp("full");
    let p = d.join("x.json.journal");
    let mut w = JournalWriter::create(&p).unwrap();
    w.start(Header::new(&cfg(), jiff::Timestamp::now()));
    let big = "x".repeat(1 << 20);
    for i in 0..40 {
        w.output("tcp_up_1", &output(&big, i), Duration::from_secs(i));
    }
    w.end(Duration::from_secs(41), false);
    let len = std::fs::metadata(&p).unwrap().len();
    assert!(len <= MAX_BYTES, "{len}");
    let j = read(&p).unwrap();
    assert!(j.full.is_some());
    assert!(!j.complete(), "a full journal does not hold the whole run");
    assert!(
        j.outputs.len() >= 20 && j.outputs.len() < 40,
        "{}",
        j.outputs.len()
    );
    assert!(j.end.is_some(), "the end entry still fits");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_journal_without_an_end_recovers_as_incomplete_at_the_phase_reached() {
    let d = tmp("recover");
    let p = d.join("x.json.journal");
    let mut w = JournalWriter::create(&p).unwrap();
    w.start(Header::new(&cfg(), jiff::Timestamp::now()));
    for s in 0..=3 {
        w.progress(Duration::from_secs(s), "x");
    }
    drop(w);
    let j = read(&p).unwrap();
    let out = crate::run::recover(&config(&j, "bloatlab".into()).unwrap(), &j).unwrap();
    let m = &out.file.metadata;
    assert!(m.interrupted);
    let inc = m.incomplete.as_ref().expect("metadata.incomplete");
    assert_eq!(inc.phase_reached.as_deref(), Some("loaded"), "{inc:?}");
    assert_eq!(inc.reached_ns, 3_000_000_000u64);
    assert!(
        inc.runners_missing.iter().any(|r| r == "tcp_up_1"),
        "{inc:?}"
    );
    assert_eq!(m.extra["recovered_from_journal"], true);
    // Phases are cut where the run got.
    assert_eq!(out.file.raw.phases.last().unwrap().end_ns, 3_000_000_000);
    let text = crate::summary::render(&out);
    assert!(
        text.contains("INCOMPLETE") && text.contains("loaded at 3.0 s"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_runner_that_reported_after_the_test_died_is_found_in_its_spool_file() {
    let d = tmp("spool");
    let p = d.join("x.json.journal");
    let mut w = JournalWriter::create(&p).unwrap();
    assert!(w.spool_dir().is_dir());
    w.start(Header::new(&cfg(), jiff::Timestamp::now()));
    let dir = w.spool_dir();
    let done = crate::driver::Spool::new(&dir, "udp_be", 0);
    let stopped = crate::driver::Spool::new(&dir, "tcp_up_1", 0);
    let killed = crate::driver::Spool::new(&dir, "icmp", 0);
    w.spawn("udp_be", Duration::from_secs(1), &done);
    w.spawn("tcp_up_1", Duration::from_secs(1), &stopped);
    w.spawn("icmp", Duration::ZERO, &killed);
    // udp_be finished and was journaled; the others were running when the test died:
    // tcp_up_1 wrote its report after that, icmp nothing.
    w.output("udp_be", &output("{}", 1), Duration::from_secs(1));
    w.progress(Duration::from_secs(2), "loaded");
    std::fs::write(&stopped.stdout, "{\"report\": 1}").unwrap();
    std::fs::write(&stopped.stderr, "stopped\n").unwrap();
    drop(w);
    let j = read(&p).unwrap();
    assert_eq!(j.spawns.len(), 3);
    let spooled = j.spooled_outputs(Duration::from_secs(2));
    assert_eq!(spooled.len(), 2, "{spooled:?}");
    let up = spooled.iter().find(|o| o.runner == "tcp_up_1").unwrap();
    assert_eq!(up.stdout, "{\"report\": 1}");
    assert_eq!(up.stderr_tail, "stopped\n");
    assert_eq!(up.status, Some(128 + libc::SIGTERM));
    assert_eq!(
        (up.spawned_ns, up.exited_ns),
        (1_000_000_000, 2_000_000_000)
    );
    let icmp = spooled.iter().find(|o| o.runner == "icmp").unwrap();
    assert_eq!((icmp.status, icmp.stdout.as_str()), (None, ""));
    // Parsed from bytes alone there is no directory to look in.
    assert!(
        parse(&std::fs::read(&p).unwrap())
            .unwrap()
            .spooled_outputs(Duration::ZERO)
            .is_empty()
    );
    remove(&p).unwrap();
    assert!(!p.exists() && !spool_dir_for(&p).exists());
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn a_flow_that_stalled_keeps_its_bytes_and_is_recorded_as_failed() {
    let d = tmp("stall");
    let p = d.join("x.json.journal");
    let mut w = JournalWriter::create(&p).unwrap();
    w.start(Header::new(&cfg(), jiff::Timestamp::now()));
    for s in 0..=7 {
        w.progress(Duration::from_secs(s), "x");
    }
    // The client measured 4000 bytes, then stalled: exit 1, its --json document printed.
    let mut o = output(&crate::flow::tests::upload(true).to_json_pretty(), 3);
    o.status = Some(1);
    o.stderr = b"bloatlab: 1 of 1 stream(s) failed; stream 1: stalled: the server read nothing for 3 s (at 2.000 s); the run did not happen as asked\n".to_vec();
    w.output("tcp_up_1", &o, Duration::from_secs(3));
    w.end(Duration::from_secs(7), false);
    drop(w);
    let j = read(&p).unwrap();
    let out = crate::run::recover(&config(&j, "bloatlab".into()).unwrap(), &j).unwrap();
    let flow = out
        .file
        .raw
        .throughput
        .iter()
        .find(|f| f.name == "tcp_up_1")
        .unwrap();
    let bytes: u64 = flow.samples.iter().map(|s| s.bytes).sum();
    assert_eq!(bytes, 4000, "the bytes before the stall are kept");
    let failures = &out.file.metadata.extra["flow_failures"];
    assert_eq!(failures[0]["flow"], "tcp_up_1", "{failures}");
    assert!(
        failures[0]["why"].as_str().unwrap().contains("stalled"),
        "{failures}"
    );
    let _ = std::fs::remove_dir_all(&d);
}
