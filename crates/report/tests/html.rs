//! The HTML report: content, escaping, self-containment, and a real browser rendering it.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bloatlab_report::{Run, html};
use bloatlab_testkit::sample::{Queue, rrul_like};
use common::*;

#[test]
fn single_run_report_has_metadata_tables_and_charts() {
    let page = html::render(&[v1()]).unwrap();
    assert_self_contained(&page);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("<title>bloatlab report: sample run for the schema tests</title>"));
    // Metadata.
    assert!(page.contains("bloatlab test rrul -l 2 10.0.0.2"));
    assert!(page.contains("2026-12-02T11:00:00Z"));
    // The loaded udp_ef row as recomputed from raw (v1.json derived: median 147.5,
    // p10 108.5, p90 186.5, p99 194.15, max 195, 18 of 20, 10% loss, +126.5, C, 405 RPM).
    let row = page
        .lines()
        .find(|l| l.contains("<td>udp_ef</td>") && l.contains("<td>loaded</td>"))
        .expect("loaded udp_ef row");
    for cell in [
        "100.0",
        "108.5",
        "147.5",
        "148.1",
        "186.5",
        "194.2",
        "195.0",
        ">18<",
        ">20<",
        "10.00%",
        "+126.5",
        ">C<",
        "405 (Fair)",
    ] {
        assert!(row.contains(cell), "{cell} missing from {row}");
    }
    // Throughput and fairness.
    assert!(page.contains("tcp_up_be") && page.contains("tcp_down_be"));
    assert!(page.contains("Jain "));
    // Four inline charts, no comparison for one run.
    assert_eq!(page.matches("<svg").count(), 4);
    assert!(!page.contains("<h2>Comparison</h2>"));
}

#[test]
fn not_measured_is_said_and_report_4_columns_come_in_order() {
    let run = v2();
    let page = html::render(std::slice::from_ref(&run)).unwrap();
    // The upload's sender sampled TCP_INFO (7 retransmits, no ECN); the download's
    // sender was not asked: "not measured", never 0.
    let row = |flow: &str| {
        page.lines()
            .find(|l| l.starts_with(&format!("<tr><td>{flow}</td>")))
            .unwrap_or_else(|| panic!("no {flow} row"))
            .to_owned()
    };
    let up = row("tcp_up_be");
    assert!(up.contains("<td class=\"n\">7</td>"), "{up}");
    assert!(up.contains("<td class=\"n\">not measured</td>"), "CE: {up}");
    assert!(up.contains("<td>cubic</td>"), "{up}");
    // 4 x 625 kB.
    assert!(up.contains("<td class=\"n\">2.50</td>"), "{up}");
    let down = row("tcp_down_be");
    // Congestion control, retransmits, ECN and CE marks.
    assert_eq!(down.matches("not measured").count(), 4, "{down}");
    // Metadata records as text.
    assert!(page.contains("remote 10.0.0.2 port 5001, server"), "hosts");
    // (minijinja escapes "/" as &#x2f;)
    assert!(page.contains("lab sample (userspace): up 20.00 Mbit&#x2f;s, delay 40.00 ms"));
    // Report 4's columns: min, p10, mean, median, p90, max, count.
    let header = page
        .lines()
        .find(|l| l.starts_with("<tr><th>series</th>"))
        .unwrap();
    let cols: Vec<&str> = header
        .split("<th>")
        .skip(1)
        .map(|c| c.split('<').next().unwrap())
        .collect();
    assert_eq!(
        &cols[3..10],
        ["min", "p10", "mean", "median", "p90", "max", "count"]
    );
    let text = bloatlab_report::table::run_summary(&bloatlab_report::view::RunView::new(&run));
    let down_line = text
        .lines()
        .find(|l| l.starts_with("tcp_down_be (down)"))
        .unwrap();
    assert!(down_line.contains("not measured"), "{text}");
}

#[test]
fn ecn_and_ce_marks_are_shown_per_flow() {
    use bloatlab_results::schema::FlowEcnRecord;
    let mut run = v2();
    let flows = &mut run.file.raw.throughput;
    flows[0].ecn = Some(FlowEcnRecord {
        requested: Some(true),
        negotiated: Some(true),
        ce_marks: Some(412),
    });
    flows[1].ecn = Some(FlowEcnRecord {
        requested: Some(false),
        negotiated: Some(false),
        ce_marks: Some(0),
    });
    let (a, b) = (flows[0].name.clone(), flows[1].name.clone());
    let page = html::render(std::slice::from_ref(&run)).unwrap();
    let row = |flow: &str| {
        page.lines()
            .find(|l| l.starts_with(&format!("<tr><td>{flow}</td>")))
            .unwrap_or_else(|| panic!("no {flow} row"))
            .to_owned()
    };
    let ra = row(&a);
    assert!(ra.contains("<td>asked, negotiated</td>"), "{ra}");
    assert!(ra.contains("<td class=\"n\">412</td>"), "{ra}");
    let rb = row(&b);
    assert!(rb.contains("<td>not asked, not negotiated</td>"), "{rb}");
    assert!(rb.contains("<td class=\"n\">0</td>"), "{rb}");
    let text = bloatlab_report::table::run_summary(&bloatlab_report::view::RunView::new(&run));
    assert!(text.contains("asked, negotiated"), "{text}");
}

#[test]
fn two_runs_get_a_side_by_side_comparison() {
    let page = html::render(&fifo_vs_fqcodel()).unwrap();
    assert_self_contained(&page);
    assert!(page.contains("<h2>Comparison</h2>"));
    assert!(page.contains("<th>fifo</th><th>fq_codel</th>"));
    let row = page
        .lines()
        .find(|l| l.contains("<td>udp_ef (rtt): loaded grade</td>"))
        .expect("grade row");
    assert!(row.contains(">B<") || row.contains(">C<"), "{row}");
    assert!(row.contains(">A+<"), "{row}");
    assert_eq!(page.matches("<svg").count(), 6);
}

#[test]
fn user_strings_are_escaped() {
    let mut file = rrul_like(Queue::FqCodel);
    file.metadata.title = Some("<script>alert(1)</script>".into());
    file.metadata.command_line = vec!["<b>bold</b>".into(), "a&b".into()];
    file.raw.latency[0].name = "<img src=http://evil.example/x.png>".into();
    let page = html::render(&[Run::new("\"><i>label", file).unwrap()]).unwrap();
    assert!(!page.contains("<script>"));
    assert!(!page.contains("<img"));
    assert!(!page.contains("<b>bold"));
    assert!(!page.contains("<i>label"));
    assert!(page.contains("&lt;script&gt;alert(1)&lt;&#x2f;script&gt;"));
    assert!(page.contains("a&amp;b"));
    // The name still appears as text: in the tables and in the SVG legend, escaped.
    assert!(page.contains("&lt;img src=http:&#x2f;&#x2f;evil.example"));
    assert!(page.contains("&lt;img src=http://evil.example/x.png&gt;"));
    assert_self_contained(&page);
}

/// Kills and reaps the browser if the test fails before it exits.
struct Browser(std::process::Child);

impl Drop for Browser {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn screenshot(html_file: &Path, png: &Path, profile: &Path) {
    let child = Command::new("/usr/bin/chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1200,2000")
        .arg(format!("file://{}", html_file.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect(
            "/usr/bin/chromium runs (Debian package `chromium`, installed by scripts/setup.sh)",
        );
    let mut browser = Browser(child);
    // Generous: a cold start on a loaded 2-core machine can take a while.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Some(status) = browser.0.try_wait().unwrap() {
            let mut err = String::new();
            if let Some(mut e) = browser.0.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            assert!(status.success(), "chromium failed: {status}\n{err}");
            return;
        }
        assert!(
            Instant::now() < deadline,
            "chromium did not finish in 120 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn headless_chromium_renders_the_reports() {
    let dir = tempfile::tempdir().unwrap();
    for (name, runs) in [("single", vec![v1()]), ("comparison", fifo_vs_fqcodel())] {
        let page = html::render(&runs).unwrap();
        let file = dir.path().join(format!("{name}.html"));
        std::fs::write(&file, &page).unwrap();
        let png = dir.path().join(format!("{name}.png"));
        let profile = dir.path().join(format!("profile-{name}"));
        screenshot(&file, &png, &profile);
        let bytes = std::fs::read(&png).expect("screenshot written");
        let (w, h, colours) = png_stats(&bytes);
        assert_eq!((w, h), (1200, 2000), "{name}");
        // A blank or error page has a handful of colours; tables, shaded rows and
        // anti-aliased charts have hundreds.
        assert!(
            colours > 200,
            "{name}: screenshot has only {colours} colours"
        );
    }
}
