//! `bloatlab report`: tables on stdout, charts, HTML and flent outputs, and bad input
//! (missing, corrupt, foreign, newer-version files) with clear errors, exit codes and
//! no output written.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bloatlab_report::results;
use bloatlab_testkit::sample::{Queue, rrul_like};

use crate::harness::{stderr, stdout, tempdir};

fn bl(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(crate::harness::BIN);
    c.args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("bloatlab runs")
}

fn v1() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/tests/data/v1.json")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Everything in `dir`, sorted (to spot leftover temporary files).
fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// A fontconfig configuration that finds no fonts at all.
fn no_fonts(dir: &Path) -> PathBuf {
    let conf = dir.join("fonts.conf");
    std::fs::write(
        &conf,
        "<?xml version=\"1.0\"?>\n<!DOCTYPE fontconfig SYSTEM \"fonts.dtd\">\n\
         <fontconfig><dir>/nonexistent-bloatlab-fonts</dir><cachedir>/nonexistent-bloatlab-cache</cachedir></fontconfig>\n",
    )
    .unwrap();
    conf
}

#[test]
fn single_run_prints_tables_and_writes_every_output_without_system_fonts() {
    let dir = tempdir();
    let d = dir.path();
    let conf = no_fonts(d);
    let (html, png, svg, fl) = (
        d.join("r.html"),
        d.join("png"),
        d.join("svg"),
        d.join("r.flent.gz"),
    );
    let o = bl(
        &[
            "report",
            s(&v1()),
            "--html",
            s(&html),
            "--png",
            s(&png),
            "--svg",
            s(&svg),
            "--export",
            "flent",
            s(&fl),
        ],
        &[("FONTCONFIG_FILE", &conf)],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    // The loaded udp_ef row, recomputed from raw.
    let row = out
        .lines()
        .find(|l| l.starts_with("udp_ef (rtt)") && l.contains("loaded"))
        .unwrap_or_else(|| panic!("no loaded row in\n{out}"));
    for cell in [
        "147.5",
        "186.5",
        "194.2",
        "10.00%",
        "+126.5",
        " C ",
        "405 (Fair)",
    ] {
        assert!(row.contains(cell), "{cell} missing: {row}");
    }
    assert!(out.contains("throughput (Mbit/s)"));
    assert!(!out.contains("comparison"));

    let charts = ["latency-box", "latency-cdf", "latency", "throughput"];
    assert_eq!(entries(&png), charts.map(|c| format!("{c}.png")));
    assert_eq!(entries(&svg), charts.map(|c| format!("{c}.svg")));
    for c in charts {
        let bytes = std::fs::read(png.join(format!("{c}.png"))).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 10_000,
            "{c}"
        );
        let text = std::fs::read_to_string(svg.join(format!("{c}.svg"))).unwrap();
        assert!(
            text.contains("<text") && text.trim_end().ends_with("</svg>"),
            "{c}"
        );
    }
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("sample run for the schema tests") && page.matches("<svg").count() == 4);

    let mut json = String::new();
    flate2_free_gunzip(&std::fs::read(&fl).unwrap(), &mut json);
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(doc["version"], 4);
    assert_eq!(doc["metadata"]["DATA_FILENAME"], "r.flent.gz");
    let n = doc["x_values"].as_array().unwrap().len();
    assert_eq!(n, 20);
    for (name, col) in doc["results"].as_object().unwrap() {
        assert_eq!(col.as_array().unwrap().len(), n, "{name}");
    }
    // Atomic writes leave no temporary file behind.
    assert_eq!(
        entries(d),
        ["fonts.conf", "png", "r.flent.gz", "r.html", "svg"]
    );
}

/// Gunzips with the system `gzip` (the CLI crate has no gzip library of its own).
fn flate2_free_gunzip(bytes: &[u8], out: &mut String) {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("gzip")
        .args(["-dc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("gzip");
    child.stdin.take().unwrap().write_all(bytes).unwrap();
    child.stdout.take().unwrap().read_to_string(out).unwrap();
    assert!(child.wait().unwrap().success(), "not valid gzip");
}

#[test]
fn several_runs_are_compared_side_by_side() {
    let dir = tempdir();
    let d = dir.path();
    let (a, b) = (d.join("fifo.json"), d.join("fq_codel.json"));
    results::save(&a, &rrul_like(Queue::DeepFifo)).unwrap();
    results::save(&b, &rrul_like(Queue::FqCodel)).unwrap();
    let html = d.join("cmp.html");
    let png = d.join("png");
    let o = bl(
        &["report", s(&a), s(&b), "--html", s(&html), "--png", s(&png)],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("== fifo (rrul)") && out.contains("== fq_codel (rrul)"));
    let header = out
        .lines()
        .find(|l| l.starts_with("metric"))
        .expect("comparison header");
    assert!(
        header.contains("fifo") && header.contains("fq_codel"),
        "{header}"
    );
    let grade = out
        .lines()
        .find(|l| l.starts_with("udp_ef (rtt): loaded grade"))
        .expect("grade row");
    assert!(grade.trim_end().ends_with("A+"), "{grade}");
    assert_eq!(
        entries(&png),
        [
            "fifo-latency.png",
            "fifo-throughput.png",
            "fq_codel-latency.png",
            "fq_codel-throughput.png",
            "latency-box.png",
            "latency-cdf.png"
        ]
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<h2>Comparison</h2>"));
}

/// Runs `report FILE --html OUT` on bad input: exit status, message, nothing written.
fn rejected(file: &Path, code: i32) -> String {
    let out_dir = tempdir();
    let html = out_dir.path().join("out.html");
    let o = bl(&["report", s(file), "--html", s(&html)], &[]);
    assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    assert!(
        entries(out_dir.path()).is_empty(),
        "output written on bad input"
    );
    let err = stderr(&o);
    assert!(err.starts_with("bloatlab: error: "), "{err}");
    err
}

#[test]
fn bad_input_files_get_clear_errors_naming_the_file() {
    let dir = tempdir();
    let d = dir.path();
    let write = |name: &str, body: &[u8]| {
        let p = d.join(name);
        std::fs::write(&p, body).unwrap();
        p
    };
    let missing = d.join("missing.json");
    let e = rejected(&missing, 1);
    assert!(e.contains("missing.json: cannot read: No such file"), "{e}");
    assert_eq!(e.matches("missing.json").count(), 1, "{e}");

    let v1_text = std::fs::read_to_string(v1()).unwrap();
    let truncated = write("truncated.json", &v1_text.as_bytes()[..v1_text.len() / 2]);
    let e = rejected(&truncated, 1);
    assert!(
        e.contains("truncated.json: results file is truncated"),
        "{e}"
    );

    let corrupt = write("corrupt.json", b"{\"format\": ?}");
    let e = rejected(&corrupt, 1);
    assert!(e.contains("corrupt.json: results file is corrupt"), "{e}");

    let foreign = write("flent.json", br#"{"version": 4, "x_values": []}"#);
    let e = rejected(&foreign, 1);
    assert!(e.contains("flent.json: not a bloatlab results file"), "{e}");

    let gz = write("run.flent.gz", &[0x1f, 0x8b, 8, 0, 0, 0, 0, 0]);
    let e = rejected(&gz, 1);
    assert!(e.contains("run.flent.gz") && e.contains("gzip"), "{e}");

    let newer = write(
        "newer.json",
        v1_text
            .replacen("\"version\": 1", "\"version\": 99", 1)
            .as_bytes(),
    );
    let e = rejected(&newer, 1);
    assert!(
        e.contains("newer.json: written by a newer bloatlab (version 99)"),
        "{e}"
    );

    // One bad file among good ones: nothing is printed or written either.
    let out = d.join("cmp.html");
    let o = bl(&["report", s(&v1()), s(&corrupt), "--html", s(&out)], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).is_empty() && !out.exists());
}

#[test]
fn bad_options_are_usage_errors() {
    let dir = tempdir();
    let out = dir.path().join("x.gz");
    let o = bl(&["report", s(&v1()), "--export", "csv", s(&out)], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown format \"csv\"; available: flent"),
        "{}",
        stderr(&o)
    );
    let o = bl(
        &["report", s(&v1()), s(&v1()), "--export", "flent", s(&out)],
        &[],
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("one run"), "{}", stderr(&o));
    assert!(!out.exists());
    let o = bl(&["report"], &[]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn an_existing_output_is_replaced_whole() {
    let dir = tempdir();
    let html = dir.path().join("r.html");
    std::fs::write(&html, "old report").unwrap();
    let o = bl(&["report", "-q", s(&v1()), "--html", s(&html)], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>") && page.trim_end().ends_with("</html>"));
    assert_eq!(entries(dir.path()), ["r.html"]);
}
