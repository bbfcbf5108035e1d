//! A download's sender is the server: its retransmits, RTT and CE marks reach the results
//! file through the flow query (docs/wire.md). Through a lab with a shallow FIFO (20 Mbit/s,
//! 10 ms each way, 30-packet limit) a cubic download must lose packets, so the server's
//! sender retransmits: `bloatlab test tcp_download` must record that count (> 0) and the
//! sender's RTT, never `null` (not measured) as before. Needs root (CI runs as root), like
//! the other lab tests.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::tempdir;
use bloatlab_results::schema::DirectionRecord;

const SERVER: &str = "10.77.0.2";

#[test]
fn download_retransmits_come_from_the_bloatlab_server() {
    if !tier::root("download_retransmits_come_from_the_bloatlab_server") {
        return;
    }
    let lab = LabGuard::up(
        "dlrx",
        &[
            "--rate", "20mbit", "--delay", "10ms", "--qdisc", "fifo", "--limit", "30p",
        ],
    );
    let _server = serve_and_wait(&lab, SERVER);
    let tmp = tempdir();
    let file = tmp.path().join("dlrx.json");
    let path = file.to_string_lossy().into_owned();
    let o = lab.exec(
        "client",
        &[
            BIN,
            "test",
            "tcp_download",
            SERVER,
            "-l",
            "4",
            "--idle-before",
            "1",
            "--idle-after",
            "1",
            "--cc",
            "cubic",
            "-o",
            &path,
        ],
    );
    let summary = stdout(&o);
    assert!(o.status.success(), "{summary}\n{}", stderr(&o));
    assert!(
        !stderr(&o).contains("not measured"),
        "the flow query failed: {}",
        stderr(&o)
    );
    let f = bloatlab_results::load(&file).unwrap();
    // The server named itself (its hello): the remote software is known, not empty.
    assert_eq!(
        f.metadata.hosts.remote.software.as_deref(),
        Some(concat!("bloatlab ", env!("CARGO_PKG_VERSION")))
    );
    let downs: Vec<_> = f
        .raw
        .throughput
        .iter()
        .filter(|t| t.direction == DirectionRecord::Down)
        .collect();
    assert!(!downs.is_empty(), "{summary}");
    let mut total = 0;
    for d in &downs {
        let s = d
            .tcp
            .sender
            .unwrap_or_else(|| panic!("{}: sender not measured\n{summary}", d.name));
        let r = s
            .retransmits
            .unwrap_or_else(|| panic!("{}: retransmits not measured\n{summary}", d.name));
        total += r;
        // The server's RTT through a 20 ms path.
        let min = s.min_rtt_ns.expect("min RTT");
        assert!(
            (19_000_000..200_000_000).contains(&min),
            "{}: {min} ns",
            d.name
        );
        assert!(s.max_rtt_ns.expect("RTT at the end") >= min);
    }
    assert!(
        total > 0,
        "a 30-packet FIFO at 20 Mbit/s dropped nothing?\n{summary}"
    );
    // The emulator agrees that the download's queue dropped packets.
    let lab_view = f.metadata.lab.as_ref().expect("lab view");
    let drops: u64 = lab_view
        .directions
        .iter()
        .filter(|d| d.direction == DirectionRecord::Down)
        .map(|d| d.drops.overflow + d.drops.aqm)
        .sum();
    assert!(drops > 0, "emulator counted no drops: {lab_view:?}");
}
