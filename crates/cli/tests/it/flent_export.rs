//! The `.flent.gz` export of a real `bloatlab test` run, opened by the real flent
//! (Debian package `flent`, installed by scripts/setup.sh; reading a file needs no
//! netperf). Regression (issue 9): flent's legend read "None UDP EF" because the
//! exporter looked for the host where no producer wrote it.

use bloatlab_testkit::tier;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::harness::{BIN, Listen, Proc, free_port, tempdir};

/// `bloatlab server -B 127.0.0.1 -p PORT`, accepting flows and probes.
fn server(port: u16) -> Proc {
    let p = Proc::bloatlab(&["server", "-B", "127.0.0.1", "-p", &port.to_string()]);
    p.wait_listening(port, Listen::Both);
    p
}

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| {
            panic!("{cmd} runs (Debian package `flent`, installed by scripts/setup.sh): {e}")
        })
}

fn ok(o: &Output, what: &str) {
    assert!(
        o.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Asks flent's own test definition (rrul.conf, loaded the way `flent -i` loads it)
/// for the legend label of every data series: `name<TAB>label` lines.
const FLENT_LABELS: &str = r#"
import sys
sys.path.insert(0, '/usr/share/flent')
from flent import settings as S, resultset
st = S.load(['-i', sys.argv[1], '-f', 'summary'])
st.update(resultset.load(sys.argv[1]).meta())
st.load_test(informational=True)
for name, d in sorted(st.DATA_SETS.items()):
    if 'id' in d:
        print('%s\t%s' % (name, d['id']))
"#;

fn path(d: &Path, name: &str) -> String {
    d.join(name).to_string_lossy().into_owned()
}

#[test]
fn flent_reads_the_export_of_a_real_run_with_its_host_and_kernel() {
    if !tier::root("flent_reads_the_export_of_a_real_run_with_its_host_and_kernel") {
        return;
    }
    let dir = tempdir();
    let port = free_port();
    let srv = server(port);
    let results = path(dir.path(), "r.json");
    let o = run(
        BIN,
        &[
            "test",
            "rrul",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-l",
            "1",
            "--idle",
            "1",
            "-o",
            &results,
        ],
    );
    ok(&o, "bloatlab test rrul");
    drop(srv);
    let file = bloatlab_results::load(Path::new(&results)).unwrap();
    let export = path(dir.path(), "r.flent.gz");
    ok(
        &run(
            BIN,
            &["report", &results, "--export", "flent", &export, "-q"],
        ),
        "bloatlab report --export flent",
    );

    // flent's metadata view of the file.
    let meta_out = path(dir.path(), "meta.json");
    ok(
        &run("flent", &["-i", &export, "-f", "metadata", "-o", &meta_out]),
        "flent -f metadata",
    );
    let m: Value = serde_json::from_str(&std::fs::read_to_string(&meta_out).unwrap()).unwrap();
    let m = &m[0];
    assert_eq!(m["HOST"], "127.0.0.1", "{m}");
    assert_eq!(m["HOSTS"], serde_json::json!(["127.0.0.1"]));
    let local = file.metadata.hosts.local.name.clone().expect("node name");
    assert_eq!(m["LOCAL_HOST"], local.as_str());
    assert_eq!(m["KERNEL_NAME"], "Linux");
    assert_eq!(
        m["KERNEL_RELEASE"].as_str(),
        file.metadata.kernel.release.as_deref()
    );
    assert_eq!(m["BLOATLAB_VERSION"], env!("CARGO_PKG_VERSION"));
    assert_eq!(m["IP_VERSION"], 4);

    // flent's summary lists our RRUL series under its own names.
    let summary_out = path(dir.path(), "summary.txt");
    ok(
        &run(
            "flent",
            &["-i", &export, "-f", "summary", "-o", &summary_out],
        ),
        "flent -f summary",
    );
    let summary = std::fs::read_to_string(&summary_out).unwrap();
    for series in [
        "Ping (ms) UDP EF",
        "Ping (ms) ICMP",
        "TCP upload BE",
        "TCP totals",
    ] {
        assert!(summary.contains(series), "{series} missing:\n{summary}");
    }

    // The legend labels flent's rrul plots use: "HOST UDP EF", never "None UDP EF".
    let labels = run("/usr/bin/python3", &["-c", FLENT_LABELS, &export]);
    ok(&labels, "flent's test definition");
    let labels = String::from_utf8_lossy(&labels.stdout).into_owned();
    for (series, label) in [
        ("Ping (ms) UDP EF", "127.0.0.1 UDP EF"),
        ("Ping (ms) UDP BE", "127.0.0.1 UDP BE"),
        ("Ping (ms) ICMP", "127.0.0.1 ICMP"),
    ] {
        assert!(
            labels.lines().any(|l| l == format!("{series}\t{label}")),
            "no {label:?} in:\n{labels}"
        );
    }
    assert!(!labels.contains("None"), "{labels}");
}
