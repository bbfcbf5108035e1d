//! ECN per flow through a real lab: Linux has no per-socket ECN switch, so a flow gets ECN
//! from its route (`features ecn`), chosen per socket with `bloatlab client --fwmark N`
//! (SO_MARK) and a policy rule. Through the lab's FQ-CoDel (ECN marking on), the marked
//! flow sees CE marks (`tcp_info.delivered_ce` > 0 on an upload, the receiving socket's
//! `received_ce` > 0 on a download: ECN is negotiated for both directions) while an
//! unmarked flow from the same host sees none. The hosts keep the kernel default `tcp_ecn=2` (accept, do not ask).
//! Needs root (CI runs as root), like the other lab tests.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::load;
use crate::harness::tempdir;

const SERVER: &str = "10.77.0.2";

/// `ip ARGS` inside the lab's client namespace, asserting success.
fn ip(lab: &LabGuard, args: &[&str]) -> String {
    let mut cmd = vec!["ip"];
    cmd.extend_from_slice(args);
    let o = lab.exec("client", &cmd);
    assert!(
        o.status.success(),
        "ip {args:?}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs a 3 s cubic flow; returns its CE count: `tcp_info.delivered_ce` of an upload
/// (sender side), `tcp_recv.tcp_info.received_ce` of a download (`-R`, receiver side).
fn ce_marks(lab: &LabGuard, extra: &[&str]) -> u64 {
    let mut cmd = vec![
        BIN, "client", SERVER, "-p", "5001", "-t", "3", "-e", "-Z", "cubic",
    ];
    cmd.extend_from_slice(extra);
    cmd.push("--json");
    let o = lab.exec("client", &cmd);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let s = &v["streams"][0]["summary"];
    // The link was saturated, so the AQM had a reason to mark or drop.
    assert!(s["bits_per_second"].as_f64().unwrap() > 10e6, "{v}");
    let ce = if extra.contains(&"-R") {
        &s["tcp_recv"]["tcp_info"]["received_ce"]
    } else {
        &s["tcp_send"]["tcp_info"]["delivered_ce"]
    };
    ce.as_u64().unwrap_or_else(|| panic!("no CE count: {v}"))
}

#[test]
fn fwmark_gives_one_flow_ecn_through_fq_codel() {
    if !tier::root("fwmark_gives_one_flow_ecn_through_fq_codel") {
        return;
    }
    // A saturated link (a rate bound): alone (harness::load).
    let _x = load::exclusive();
    let lab = LabGuard::up(
        "ecnf",
        &["--rate", "20mbit", "--delay", "10ms", "--qdisc", "fq_codel"],
    );
    let _server = lab.bg("server", &[BIN, "server", "-p", "5001"]);
    // Copy the route to the server into table 77 with ECN on; marked sockets use it.
    let route = ip(&lab, &["-o", "route", "get", SERVER]);
    let words: Vec<&str> = route.split_whitespace().collect();
    let after = |k: &str| {
        words
            .iter()
            .position(|w| *w == k)
            .and_then(|i| words.get(i + 1).copied())
    };
    let dev = after("dev").unwrap_or_else(|| panic!("no dev in {route}"));
    let mut add = vec![
        "route", "add", SERVER, "dev", dev, "table", "77", "features", "ecn",
    ];
    if let Some(gw) = after("via") {
        add.extend(["via", gw]);
    }
    ip(&lab, &add);
    ip(
        &lab,
        &[
            "rule", "add", "fwmark", "7", "table", "77", "priority", "100",
        ],
    );
    assert!(
        wait_until(std::time::Duration::from_secs(10), || {
            lab.exec(
                "client",
                &[BIN, "ping", SERVER, "-p", "5001", "-t", "0.2", "--json"],
            )
            .status
            .success()
        }),
        "the server in lab {} never answered",
        lab.name
    );
    for dir in [&[][..], &["-R"][..]] {
        let mut marked_args = vec!["--fwmark", "7"];
        marked_args.extend_from_slice(dir);
        let marked = ce_marks(&lab, &marked_args);
        let plain = ce_marks(&lab, dir);
        assert!(marked > 0, "{dir:?}: the ECN flow saw no CE marks");
        assert_eq!(plain, 0, "{dir:?}: a flow without ECN cannot be CE-marked");
    }
}

/// `bloatlab test --ecn mix` through the lab's FQ-CoDel (ECN marking on): the first flow
/// of each pair per direction asks for ECN through a marked route, the other does not.
/// The ECN flows negotiate ECN and meet CE marks (uploads: the client's
/// `tcpi_delivered_ce`; downloads: the bloatlab server's, by flow query); the others
/// negotiate nothing and meet no mark, and FQ-CoDel drops their packets instead. The
/// host's tcp_ecn, the rule and the route are as before after the run.
#[test]
fn test_ecn_mix_gives_half_the_flows_ecn() {
    if !tier::root("test_ecn_mix_gives_half_the_flows_ecn") {
        return;
    }
    // A saturated link (a rate bound): alone (harness::load).
    let _x = load::exclusive();
    use bloatlab_results::schema::DirectionRecord;
    let lab = LabGuard::up(
        "ecnmix",
        &["--rate", "20mbit", "--delay", "10ms", "--qdisc", "fq_codel"],
    );
    let _server = serve_and_wait(&lab, SERVER);
    let ecn_before = stdout(&lab.exec("client", &["cat", "/proc/sys/net/ipv4/tcp_ecn"]));
    let rules_before = ip(&lab, &["rule", "show"]);
    let tmp = tempdir();
    let file = tmp.path().join("ecnmix.json");
    let path = file.to_string_lossy().into_owned();
    let o = lab.exec(
        "client",
        &[
            BIN,
            "test",
            "rrul_be",
            SERVER,
            "-l",
            "4",
            "--idle-before",
            "1",
            "--idle-after",
            "1",
            "--cc",
            "cubic",
            "--ecn",
            "mix",
            "-o",
            &path,
        ],
    );
    let summary = stdout(&o);
    assert!(o.status.success(), "{summary}\n{}", stderr(&o));
    assert!(summary.contains("ECN per flow"), "{summary}");
    let f = bloatlab_results::load(&file).unwrap();
    let mut asked = 0;
    for fl in &f.raw.throughput {
        let e = fl
            .ecn
            .unwrap_or_else(|| panic!("{}: no ECN record\n{summary}", fl.name));
        // Flows 1 and 3 of each direction ask.
        let wants = fl.name.ends_with("_1") || fl.name.ends_with("_3");
        assert_eq!(e.requested, Some(wants), "{}\n{summary}", fl.name);
        assert_eq!(e.negotiated, Some(wants), "{}\n{summary}", fl.name);
        let ce = e
            .ce_marks
            .unwrap_or_else(|| panic!("{}: CE not measured", fl.name));
        if wants {
            asked += 1;
            assert!(ce > 0, "{}: an ECN flow met no CE mark\n{summary}", fl.name);
        } else {
            assert_eq!(
                ce, 0,
                "{}: a non-ECN flow was CE-marked\n{summary}",
                fl.name
            );
        }
    }
    assert_eq!(asked, 4, "{summary}");
    // FQ-CoDel drops the packets of the flows that cannot be marked, in both directions.
    let lab_view = f.metadata.lab.as_ref().expect("lab view");
    for dir in [DirectionRecord::Up, DirectionRecord::Down] {
        let d = lab_view
            .directions
            .iter()
            .find(|d| d.direction == dir)
            .unwrap();
        assert!(d.drops.aqm > 0, "{dir:?}: no AQM drops: {d:?}");
        assert!(d.ce_marked > 0, "{dir:?}: no CE marks: {d:?}");
    }
    // Everything the run changed is back.
    assert_eq!(
        stdout(&lab.exec("client", &["cat", "/proc/sys/net/ipv4/tcp_ecn"])),
        ecn_before
    );
    assert_eq!(ip(&lab, &["rule", "show"]), rules_before);
}
