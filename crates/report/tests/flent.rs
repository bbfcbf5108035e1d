//! `.flent.gz` export: gzip JSON with flent's keys, one value per grid point.

mod common;

use std::io::Read;

use bloatlab_report::flent::{FILEFORMAT_VERSION, STEP, document, to_gzip};
use common::*;
use serde_json::Value;

fn gunzip(bytes: &[u8]) -> Value {
    let mut s = String::new();
    flate2::read::GzDecoder::new(bytes)
        .read_to_string(&mut s)
        .expect("valid gzip");
    serde_json::from_str(&s).expect("valid JSON")
}

#[test]
fn v1_export_gunzips_and_has_flents_layout() {
    let run = v1();
    let doc = gunzip(&to_gzip(&run, "v1.flent.gz").unwrap());
    let keys: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        ["metadata", "raw_values", "results", "version", "x_values"]
    );
    assert_eq!(doc["version"], FILEFORMAT_VERSION);
    assert_eq!(FILEFORMAT_VERSION, 4);
    // 4 s run on the 0.2 s grid: 20 points, 0.0 .. 3.8.
    let x = doc["x_values"].as_array().unwrap();
    assert_eq!(x.len(), 20);
    assert_eq!(x[0], 0.0);
    assert_eq!(x[19], 3.8);
    let results = doc["results"].as_object().unwrap();
    let names: Vec<&str> = results.keys().map(String::as_str).collect();
    for n in [
        "Ping (ms) UDP EF",
        "One-way delay up (ms) UDP EF UP",
        "TCP upload BE",
        "TCP download BE",
        "TCP upload sum",
        "TCP download sum",
        "TCP totals",
        "Ping (ms) avg",
    ] {
        assert!(names.contains(&n), "{n} missing from {names:?}");
    }
    for (name, col) in results {
        assert_eq!(col.as_array().unwrap().len(), x.len(), "{name}");
    }
    // Probes every 100 ms: two per bucket; a value in ms. The loaded phase has a
    // bucket where both probes were lost or none arrived?  At least: idle values ~20 ms.
    let ping = results["Ping (ms) UDP EF"].as_array().unwrap();
    let first = ping[0].as_f64().unwrap();
    assert!((19.0..=23.0).contains(&first), "{first}");
    // Raw probes: one per received probe, with seq numbers that skip the lost ones.
    let raw = doc["raw_values"]["Ping (ms) UDP EF"].as_array().unwrap();
    assert_eq!(raw.len(), 38);
    let seqs: Vec<u64> = raw.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert_eq!(
        *seqs.last().unwrap() + 1 - seqs.len() as u64,
        2,
        "2 lost probes"
    );
    let t0 = 1_796_209_200.0; // 2026-12-02T11:00:00Z
    assert!((raw[0]["t"].as_f64().unwrap() - t0).abs() < 1e-3);
    assert!((raw[1]["t"].as_f64().unwrap() - (t0 + 0.1)).abs() < 1e-3);
    let m = &doc["metadata"];
    assert_eq!(m["NAME"], "rrul");
    assert_eq!(m["TIME"], "2026-12-02T11:00:00.000000Z");
    assert_eq!(m["T0"], m["TIME"]);
    assert_eq!(m["STEP_SIZE"], STEP.as_secs_f64());
    assert_eq!(m["TOTAL_LENGTH"], 4.0);
    assert_eq!(m["LENGTH"], 2.0);
    assert_eq!(m["HOST"], "10.0.0.2");
    assert_eq!(m["KERNEL_RELEASE"], "6.18.0");
    assert_eq!(m["SYSCTLS"]["net.ipv4.tcp_ecn"], "2");
    assert_eq!(m["SERIES_META"]["TCP upload BE"]["UNITS"], "Mbits/s");
    assert_eq!(m["BLOATLAB_METADATA"]["test"], "rrul");
}

#[test]
fn missing_data_is_null_not_zero_or_interpolated() {
    let runs = fifo_vs_fqcodel();
    let doc = document(&runs[0], "fifo.flent.gz").unwrap();
    let x: Vec<f64> = doc["x_values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(x.len(), 50);
    let at = |series: &str, t: f64| {
        let i = x.iter().position(|&v| (v - t).abs() < 1e-9).unwrap();
        doc["results"][series][i].clone()
    };
    // udp_be sent nothing in [4.0, 4.4): null, while udp_ef has values.
    assert_eq!(at("Ping (ms) UDP BE", 4.0), Value::Null);
    assert_eq!(at("Ping (ms) UDP BE", 4.2), Value::Null);
    assert!(at("Ping (ms) UDP EF", 4.2).is_f64());
    // Flows do not run in the idle phase: null, not 0.
    assert_eq!(at("TCP download BE", 0.0), Value::Null);
    assert_eq!(at("TCP totals", 1.8), Value::Null);
    // tcp_down_be's hole [5.0, 5.5): null in its own series and in the sums (unknown,
    // not an undercount); the other flows keep their values.
    assert_eq!(at("TCP download BE", 5.2), Value::Null);
    assert!(at("TCP download EF", 5.2).is_f64());
    assert_eq!(at("TCP download sum", 5.2), Value::Null);
    assert_eq!(at("TCP totals", 5.2), Value::Null);
    assert!(at("TCP upload sum", 5.2).is_f64());
    // Steady state: 15 + 7 Mbit/s plus the byte pattern.
    let full = at("TCP download sum", 6.0).as_f64().unwrap();
    assert!((22.0..23.0).contains(&full), "{full}");
}

/// A real rrul46 file exports with flent's rrul46 series names (`UDP6 BE`,
/// `TCP upload CS5`, ...), each series' IP version in SERIES_META, and the
/// report's plan line says which family and address each series used.
#[test]
fn rrul46_exports_with_flent_rrul46_names_and_families() {
    let run = rrul46();
    let doc = gunzip(&to_gzip(&run, "rrul46.flent.gz").unwrap());
    let results = doc["results"].as_object().unwrap();
    let meta = &doc["metadata"]["SERIES_META"];
    for (name, ours, version) in [
        ("Ping (ms) UDP BE", "udp_be_v4", 4),
        ("Ping (ms) UDP BK", "udp_bk_v4", 4),
        ("Ping (ms) UDP6 BE", "udp_be_v6", 6),
        ("Ping (ms) UDP6 BK", "udp_bk_v6", 6),
        ("Ping (ms) ICMP", "icmp_v6", 6),
        ("Ping (ms) ICMP4", "icmp_v4", 4),
        ("TCP upload BE", "tcp_up_be_v4", 4),
        ("TCP upload BK", "tcp_up_bk_v4", 4),
        ("TCP upload CS5", "tcp_up_cs5_v6", 6),
        ("TCP upload EF", "tcp_up_ef_v6", 6),
        ("TCP download BE", "tcp_down_be_v4", 4),
        ("TCP download EF", "tcp_down_ef_v6", 6),
    ] {
        let col = results
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing from {:?}", results.keys()));
        assert!(
            col.as_array().unwrap().iter().any(|v| v.is_number()),
            "{name} has no data"
        );
        assert_eq!(meta[name]["BLOATLAB_NAME"], ours, "{name}");
        assert_eq!(meta[name]["IP_VERSION"], version, "{name}");
    }
    // flent's rrul46 sets IP_VERSION 6 for the run.
    assert_eq!(doc["metadata"]["IP_VERSION"], 6);
    assert_eq!(doc["metadata"]["NAME"], "rrul46");
    let plan = bloatlab_report::meta::plan(run.file.metadata.plan.as_ref().unwrap());
    assert!(
        plan.contains("tcp_up_cs5_v6 up tos 0xa0 bbr over IPv6 to fd00:77::2")
            || plan.contains("tcp_up_cs5_v6 up tos 0xa0 over IPv6 to fd00:77::2"),
        "{plan}"
    );
    assert!(
        plan.contains("udp_bk_v4 udp tos 0x20 over IPv4 to 10.77.0.2"),
        "{plan}"
    );
}
