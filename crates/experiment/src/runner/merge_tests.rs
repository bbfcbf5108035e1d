//! `experiment merge` refuses what is not one run of one file, and sorts by point number.

use super::{RunError, merge, point_number};
use std::path::{Path, PathBuf};

const FILE: &str = "[lab]\nrate = \"{rate}\"\n[test]\nname = \"tcp_upload\"\n[matrix]\nrate = [\"6mbit\", \"8mbit\", \"9mbit\"]\n";

/// A shard directory as `experiment run` leaves it: `plan.json` and a row per complete run.
fn shard(
    root: &Path,
    dir: &str,
    text: &str,
    quick: bool,
    shard: Option<&str>,
    runs: &[&str],
    complete: &[&str],
) -> PathBuf {
    let d = root.join(dir);
    std::fs::create_dir_all(d.join("runs")).unwrap();
    let e = crate::parse("t.toml", "t", text).unwrap();
    let plan = serde_json::json!({
        "experiment": "t", "quick": quick, "file": "t.toml", "sha256": e.digest,
        "text": text, "shard": shard, "runs": runs,
    });
    std::fs::write(d.join("plan.json"), plan.to_string()).unwrap();
    for r in complete {
        let point = r.rsplit_once("_r").unwrap().0;
        let row = serde_json::json!({"cells": [["run", r], ["point", point], ["rep", 1],
            ["interrupted", false]]});
        std::fs::write(
            d.join("runs").join(format!("{r}.row.json")),
            row.to_string(),
        )
        .unwrap();
    }
    d
}

fn refused(dirs: &[PathBuf]) -> String {
    match merge(dirs, false) {
        Err(RunError::MergeRefused { why }) => why,
        other => panic!("merged: {other:?}"),
    }
}

const R0: &[&str] = &["p001_rate-6mbit_r1", "p003_rate-9mbit_r1"];
const R1: &[&str] = &["p002_rate-8mbit_r1"];

#[test]
fn two_complete_shards_merge_in_point_order() {
    let t = tempfile::tempdir().unwrap();
    let a = shard(t.path(), "a", FILE, false, Some("0/2"), R0, R0);
    let b = shard(t.path(), "b", FILE, false, Some("1/2"), R1, R1);
    let m = merge(&[b, a], false).unwrap();
    let runs: Vec<&str> = m
        .rows
        .iter()
        .map(|r| r.get("run").unwrap().as_str().unwrap())
        .collect();
    assert_eq!(
        runs,
        [
            "p001_rate-6mbit_r1",
            "p002_rate-8mbit_r1",
            "p003_rate-9mbit_r1"
        ]
    );
    assert!(m.partial.is_empty());
    assert_eq!(m.params, ["rate"]);
}

#[test]
fn shards_of_different_files_are_refused_by_content_not_name() {
    let t = tempfile::tempdir().unwrap();
    let a = shard(t.path(), "a", FILE, false, Some("0/2"), R0, R0);
    let edited = FILE.replace("9mbit", "10mbit");
    let b = shard(t.path(), "b", &edited, false, Some("1/2"), R1, R1);
    let why = refused(&[a, b]);
    assert!(why.contains("different experiment files"), "{why}");
    assert!(
        why.contains("/a and ") && why.contains("/b"),
        "names the dirs: {why}"
    );
}

#[test]
fn quick_mixed_with_full_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let a = shard(t.path(), "a", FILE, false, Some("0/2"), R0, R0);
    let b = shard(t.path(), "b", FILE, true, Some("1/2"), R1, R1);
    let why = refused(&[a, b]);
    assert!(why.contains("quick and full"), "{why}");
}

#[test]
fn different_shard_counts_are_refused() {
    let t = tempfile::tempdir().unwrap();
    let a = shard(t.path(), "a", FILE, false, Some("0/2"), R0, R0);
    let b = shard(t.path(), "b", FILE, false, Some("1/3"), R1, R1);
    let why = refused(&[a, b]);
    assert!(
        why.contains("2 shards") && why.contains("3 shards"),
        "{why}"
    );
}

#[test]
fn a_duplicated_or_overlapping_shard_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let a = shard(t.path(), "a", FILE, false, Some("0/2"), R0, R0);
    let b = shard(t.path(), "b", FILE, false, Some("0/2"), R0, R0);
    let why = refused(&[a.clone(), b]);
    assert!(why.contains("both shard 0/2"), "{why}");
    // Two unsharded runs of the whole experiment overlap.
    let all = [
        "p001_rate-6mbit_r1",
        "p002_rate-8mbit_r1",
        "p003_rate-9mbit_r1",
    ];
    let c = shard(t.path(), "c", FILE, false, None, &all, &all);
    let d = shard(t.path(), "d", FILE, false, None, &all, &all);
    let why = refused(&[c, d]);
    assert!(
        why.contains("overlap") && why.contains("p001_rate-6mbit_r1"),
        "{why}"
    );
}

#[test]
fn a_missing_or_incomplete_shard_is_refused_unless_allowed_partial() {
    let t = tempfile::tempdir().unwrap();
    let a = shard(t.path(), "a", FILE, false, Some("0/2"), R0, R0);
    let why = refused(std::slice::from_ref(&a));
    assert!(
        why.contains("shard 1/2 missing") && why.contains("--allow-partial"),
        "{why}"
    );
    let m = merge(std::slice::from_ref(&a), true).unwrap();
    assert_eq!(m.rows.len(), 2);
    assert_eq!(m.partial, ["shard 1/2 missing"]);
    // The missing shard's run is planned, so its point shows as incomplete, not absent.
    let planned: Vec<(&str, &str, &str)> = m
        .planned
        .iter()
        .map(|p| (p.run.as_str(), p.point.as_str(), p.why_missing.as_str()))
        .collect();
    assert_eq!(
        planned[1],
        (
            "p002_rate-8mbit_r1",
            "p002_rate-8mbit",
            "shard 1/2 missing from the merge"
        )
    );
    assert_eq!(planned.len(), 3);
    let pts = crate::completeness::points(&m.rows, &m.planned, &0.05.into());
    let incomplete: Vec<&str> = pts
        .iter()
        .filter(|p| !p.complete)
        .map(|p| p.point.as_str())
        .collect();
    assert_eq!(incomplete, ["p002_rate-8mbit"]);
    // A shard with a run that did not complete.
    let b = shard(t.path(), "b", FILE, false, Some("1/2"), R1, &[]);
    let why = refused(&[a.clone(), b.clone()]);
    assert!(why.contains("/b: 1 of 1 runs not complete"), "{why}");
    let m = merge(&[a, b], true).unwrap();
    assert!(!m.partial.is_empty());
    let pts = crate::completeness::points(&m.rows, &m.planned, &0.05.into());
    assert!(
        pts.iter()
            .any(|p| !p.complete && p.causes[0].contains("no result: not complete in")),
        "{pts:?}"
    );
}

#[test]
fn a_plan_without_the_file_content_is_refused() {
    let t = tempfile::tempdir().unwrap();
    let a = shard(t.path(), "a", FILE, false, None, R0, R0);
    std::fs::write(
        a.join("plan.json"),
        r#"{"experiment": "t", "quick": false, "shard": null, "runs": []}"#,
    )
    .unwrap();
    let why = refused(&[a]);
    assert!(why.contains("older bloatlab"), "{why}");
}

#[test]
fn point_numbers_sort_past_999() {
    assert_eq!(point_number("p1000_rate-1_r1"), 1000);
    assert!(point_number("p999_x") < point_number("p1000_x"));
    assert_eq!(point_number("p007"), 7);
}
