//! Chained links in a real lab (`lab up --stage ...`): report 4's shaper
//! in front of a bloated modem. With the shaper's rate below the line rate
//! the queue (and the latency) stays in the AQM stage; above it, the
//! modem's FIFO fills and the loaded RTT grows to base + buffer / line rate.
//! The two tests run one at a time so they do not load each other's links.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::load;
use std::time::Duration;

/// Base RTT 20 ms; the modem: 10 Mbit/s with a 50 KiB FIFO
/// (51 200 B * 8 / 10 Mbit/s = 40.96 ms of queue).
fn home_network(router_rate: &str) -> LabGuard {
    let router = format!("name=router rate={router_rate} qdisc=fq_codel");
    LabGuard::up(
        "chn",
        &[
            "--delay",
            "10ms",
            "--up-stage",
            &router,
            "--up-stage",
            "name=modem rate=10mbit qdisc=fifo limit=50kb",
        ],
    )
}

/// fping RTTs (ms) sampled for ~1.5 s after 1 s of `load`.
fn rtts_under_load(lab: &LabGuard, period_ms: u32, load: impl FnOnce() -> f64) -> (Vec<f64>, f64) {
    std::thread::scope(|s| {
        let pinger = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(1000));
            fping_rtts(lab, "client", "10.77.0.2", 1500 / period_ms, period_ms)
        });
        let goodput = load();
        (pinger.join().expect("pinger"), goodput)
    })
}

/// The up direction's stages from `lab status --json`: (name, counters).
fn up_stages(lab: &LabGuard) -> Vec<(String, serde_json::Value)> {
    std::thread::sleep(Duration::from_millis(1200));
    let st = lab.status();
    let up = &st["counters"]["directions"][0];
    assert_eq!(up[0], "up", "{st}");
    up[1]["link"]["stages"]
        .as_array()
        .unwrap_or_else(|| panic!("no stages in {st}"))
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or("?").to_string(),
                s["link"].clone(),
            )
        })
        .collect()
}

fn sojourn_p50_ms(c: &serde_json::Value) -> f64 {
    c["sojourn"]["p50_ns"].as_u64().unwrap_or(0) as f64 / 1e6
}

fn drops(c: &serde_json::Value, kind: &str) -> u64 {
    c["dropped"][kind]["packets"].as_u64().unwrap_or(0)
}

#[test]
fn shaper_below_line_rate_keeps_the_queue_in_the_aqm_stage() {
    if !tier::root("shaper_below_line_rate_keeps_the_queue_in_the_aqm_stage") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = home_network("9mbit");
    let _srv = lab.iperf3_server();
    let (mut rtts, g) = rtts_under_load(&lab, 50, || iperf3_goodput(&lab, &["-P", "2", "-t", "4"]));
    assert!(rtts.len() >= 20, "{rtts:?}");
    let m = median(&mut rtts);
    let stages = up_stages(&lab);
    let names: Vec<&str> = stages.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["router", "modem", "path"]);
    let (router, modem) = (&stages[0].1, &stages[1].1);
    eprintln!(
        "shaper 9 Mbit/s: RTT median {m:.2} ms, goodput {:.2} Mbit/s, sojourn p50 router {:.2} ms modem {:.2} ms",
        g / 1e6,
        sojourn_p50_ms(router),
        sojourn_p50_ms(modem)
    );
    // The sparse ping goes first at the router; nothing waits at the modem.
    assert!(
        m <= 20.0 + 10.0,
        "median RTT {m:.2} ms > base 20 + 10 ({rtts:?})"
    );
    assert_eq!(drops(modem, "overflow"), 0, "modem dropped: {modem}");
    assert!(drops(router, "aqm") > 0, "the AQM never acted: {router}");
    assert!(sojourn_p50_ms(modem) < 1.0, "queue at the modem: {modem}");
    // The direction's sojourn: one sample per packet that crossed the chain (as many as
    // the last stage, `path`, sent once the load is over), its queueing summed over the
    // stages, so never below the router's alone.
    let st = lab.status();
    let total = &st["counters"]["directions"][0][1]["link"];
    let count = |c: &serde_json::Value| c["sojourn"]["count"].as_u64().unwrap_or(0);
    assert_eq!(count(total), count(&stages[2].1), "{total}");
    assert!(
        sojourn_p50_ms(total) >= 0.98 * sojourn_p50_ms(router),
        "{total} vs {router}"
    );
    let text = stdout(&bl(&["lab", "status", &lab.name]));
    assert!(
        text.contains("chain (sojourn per packet, all stages): link: enqueued"),
        "{text}"
    );
    // The shaper sets the pace: 9 Mbit/s, less headers.
    assert!(
        (0.85 * 9e6..=9e6).contains(&g),
        "goodput {:.2} Mbit/s",
        g / 1e6
    );
}

#[test]
fn shaper_above_line_rate_fills_the_modem_fifo() {
    if !tier::root("shaper_above_line_rate_fills_the_modem_fifo") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _s = load::exclusive();
    let lab = home_network("12mbit");
    let _srv = lab.iperf3_server();
    // 11 Mbit/s of UDP: under the shaper's 12, over the line's 10. The
    // router never queues; the modem's FIFO stays full, so every echo
    // request waits behind its whole buffer.
    let (mut rtts, _) = rtts_under_load(&lab, 100, || {
        iperf3_goodput(&lab, &["-u", "-b", "11M", "-l", "1400", "-t", "4"])
    });
    assert!(rtts.len() >= 5, "too few echo replies under load: {rtts:?}");
    let m = median(&mut rtts);
    let want = 20.0 + 51_200.0 * 8.0 / 10e6 * 1e3;
    let stages = up_stages(&lab);
    let (router, modem) = (&stages[0].1, &stages[1].1);
    eprintln!(
        "shaper 12 Mbit/s: RTT median {m:.2} ms (want {want:.2}), sojourn p50 router {:.2} ms modem {:.2} ms",
        sojourn_p50_ms(router),
        sojourn_p50_ms(modem)
    );
    assert!(
        (m - want).abs() <= 0.1 * want,
        "median RTT under load {m:.2} ms, want {want:.2} +- 10% ({rtts:?})"
    );
    assert!(
        drops(modem, "overflow") > 0,
        "modem never overflowed: {modem}"
    );
    // iperf3's UDP sender is bursty (more so on a busy machine), so the
    // router queues and drops a burst now and then, but most drops and the
    // standing queue are the modem's.
    let router_drops = drops(router, "aqm") + drops(router, "overflow");
    assert!(
        router_drops * 3 < drops(modem, "overflow"),
        "router {router}, modem {modem}"
    );
    assert!(
        sojourn_p50_ms(modem) >= 0.5 * (want - 20.0),
        "modem FIFO not full: {modem}"
    );
    assert!(
        sojourn_p50_ms(router) * 10.0 < sojourn_p50_ms(modem),
        "queue at the router: {router}, modem {modem}"
    );
}
