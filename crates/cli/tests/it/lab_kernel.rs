//! The kernel backend: veth + bridges + tbf/pfifo/bfifo in a router
//! namespace. This kernel has no netem, fq_codel, codel, pie or cake, so
//! asking for them must fail naming the qdisc and leave nothing behind.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::{Listen, load};
use std::time::Duration;

#[test]
fn kernel_backend_shapes_with_tbf() {
    if !tier::root("kernel_backend_shapes_with_tbf") {
        return;
    }
    // Timing-sensitive: alone (harness::load).
    let _x = load::exclusive();
    let lab = LabGuard::up(
        "kern",
        &["--backend", "kernel", "--rate", "20mbit", "--limit", "30kb"],
    );
    assert_eq!(lab.namespaces().len(), 3, "{:?}", lab.namespaces());
    let mut rtts = fping_rtts(&lab, "client", "10.77.0.2", 5, 50);
    assert!(median(&mut rtts) < 5.0, "{rtts:?}");
    let _srv = lab.iperf3_server();
    let g = iperf3_goodput(&lab, &[]);
    eprintln!(
        "kernel backend TCP goodput {:.2} Mbit/s through tbf 20 Mbit/s",
        g / 1e6
    );
    assert!((0.85 * 20e6..=20e6).contains(&g), "goodput {g}");
    // `lab status` reads the router's qdisc counters: the tbf shaper on the
    // up direction sent the transfer and was over its limit.
    let st = lab.status();
    let qdiscs = st["counters"]["qdiscs"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let up_tbf = qdiscs
        .iter()
        .find(|q| q[0] == "up" && q[1]["kind"] == "tbf")
        .unwrap_or_else(|| panic!("no tbf on up: {st}"));
    assert!(
        up_tbf[1]["bytes"].as_u64().unwrap_or(0) > 3_000_000,
        "{up_tbf}"
    );
    assert!(
        up_tbf[1]["overlimits"].as_u64().unwrap_or(0) > 0,
        "{up_tbf}"
    );
    assert!(qdiscs.iter().any(|q| q[0] == "down"), "{st}");
    let text = stdout(&bl(&["lab", "status", &lab.name]));
    assert!(text.contains("up   qdisc tbf 1: sent"), "{text}");
}

#[test]
fn missing_kernel_qdiscs_are_named_and_nothing_is_left() {
    if !tier::root("missing_kernel_qdiscs_are_named_and_nothing_is_left") {
        return;
    }
    for (args, qdisc) in [
        (vec!["--delay", "10ms"], "netem"),
        (vec!["--rate", "10mbit", "--qdisc", "fq_codel"], "fq_codel"),
    ] {
        let name = unique("kmiss");
        let mut v = vec!["lab", "up", name.as_str(), "--backend", "kernel"];
        v.extend_from_slice(&args);
        let o = bl(&v);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(qdisc), "{args:?}: {err}");
        assert!(
            lab_namespaces(&name).is_empty(),
            "{:?}",
            lab_namespaces(&name)
        );
        assert!(!std::path::Path::new(&format!("/run/bloatlab/{name}.json")).exists());
    }
}

/// IPv6 through the kernel backend (issue 13): the bridges carry neighbour
/// discovery, tbf shapes IPv6 as IPv4; `ping -6` and a `bloatlab client -V`
/// download from `server -V` work through it.
#[test]
fn kernel_backend_carries_ipv6() {
    if !tier::root("kernel_backend_carries_ipv6") {
        return;
    }
    let lab = LabGuard::up("kern6", &["--backend", "kernel", "--rate", "20mbit"]);
    // Reachable within 5 s (neighbour discovery across the bridges).
    let reachable = wait_until(Duration::from_secs(5), || {
        lab.exec(
            "client",
            &["ping", "-6", "-n", "-c", "1", "-W", "1", "fd00:77::2"],
        )
        .status
        .success()
    });
    assert!(
        reachable,
        "fd00:77::2 not reachable through the kernel backend"
    );
    let mut rtts = fping_rtts(&lab, "client", "fd00:77::2", 5, 50);
    assert!(
        rtts.len() >= 4,
        "ping -6 through the kernel backend: {rtts:?}"
    );
    assert!(median(&mut rtts) < 5.0, "{rtts:?}");
    let _srv = lab.serve("server", &[BIN, "server", "-V"], Listen::Tcp, 5001);
    // A download (-R): the receiving client counts what the down tbf let
    // through (a sender would count what sits in the tbf's queue too).
    let bps = client_bps(&lab.exec(
        "client",
        &[BIN, "client", "-V", "fd00:77::2", "-t", "2", "-R", "--json"],
    ));
    eprintln!("kernel backend IPv6 goodput {:.2} Mbit/s", bps / 1e6);
    assert!((0.8 * 20e6..=1.05 * 20e6).contains(&bps), "{bps} bit/s");
    // The tbf of the down direction shaped it.
    let st = lab.status();
    let sent = st["counters"]["qdiscs"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|q| q[0] == "down" && q[1]["kind"] == "tbf")
        .and_then(|q| q[1]["bytes"].as_u64())
        .unwrap_or(0);
    assert!(sent > 3_000_000, "tbf down sent {sent} B: {st}");
}
