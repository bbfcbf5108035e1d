//! `bloatlab demo` in a shortened mode (`-l 2 --idle 1`): both runs complete, the FIFO
//! shows more induced latency than FQ-CoDel, and the lab leaves nothing behind.
//! Needs root (CI runs as root), like the lab tests.

use bloatlab_testkit::tier;
use std::process::{Command, Stdio};

use crate::harness::tempdir;

fn leftover_namespaces(lab: &str) -> Vec<String> {
    let prefix = format!("bl-{lab}-");
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn short_demo_compares_fifo_and_fq_codel_and_leaves_nothing() {
    if !tier::root("short_demo_compares_fifo_and_fq_codel_and_leaves_nothing") {
        return;
    }
    // Labs under load (harness::load).
    let _load = crate::harness::load::shared();
    let lab = format!("sd{}", std::process::id());
    let tmp = tempdir();
    let dir = tmp.path().join("demo");
    let out = Command::new(crate::harness::BIN)
        .args(["demo", "-l", "2", "--idle", "1", "--lab", &lab, "-o"])
        .arg(&dir)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let so = String::from_utf8_lossy(&out.stdout).into_owned();
    let se = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        leftover_namespaces(&lab),
        Vec::<String>::new(),
        "namespaces left behind"
    );
    assert!(
        !std::path::Path::new(&format!("/run/bloatlab/{lab}.json")).exists(),
        "lab state left behind"
    );
    assert!(out.status.success(), "stderr: {se}\nstdout: {so}");
    assert!(so.contains("side by side"), "{so}");
    assert!(so.contains("bufferbloat grade"), "{so}");

    // Per run: the median over the four RTT series (udp_ef, udp_bk, udp_be, icmp) of their
    // loaded-phase medians. One series can hash into the same FQ-CoDel queue as a bulk
    // flow (1024 buckets, random ephemeral ports) and see FIFO-like delay; the median of
    // the four is immune to one such collision.
    let typical = |label: &str| {
        let f = bloatlab_results::load(&dir.join(format!("demo-{label}.json"))).unwrap();
        let d = f.derived.unwrap();
        let mut loaded = Vec::new();
        for s in d
            .latency
            .iter()
            .filter(|s| s.kind == bloatlab_results::schema::DelayKindRecord::Rtt)
        {
            let idle = s
                .phases
                .iter()
                .find(|p| p.phase == "idle")
                .unwrap()
                .delay
                .unwrap();
            // 80 ms RTT in the lab.
            assert!(
                (75_000_000..90_000_000).contains(&idle.median_ns),
                "{label} {}: idle median {} ns",
                s.name,
                idle.median_ns
            );
            let l = s
                .phases
                .iter()
                .find(|p| p.phase == "loaded")
                .unwrap()
                .delay
                .unwrap();
            loaded.push(l.median_ns);
        }
        assert_eq!(loaded.len(), 4, "{label}: four RTT series");
        loaded.sort_unstable();
        (loaded[1] + loaded[2]) / 2
    };
    let (fifo, fq) = (typical("fifo"), typical("fq_codel"));
    // A 1000-packet FIFO at 20 Mbit/s holds 600 ms; 8 flows fill part of it within 2 s,
    // while FQ-CoDel keeps the sparse probe flows out of the bulk queues.
    assert!(
        fifo > fq + 10_000_000,
        "fifo loaded median {fifo} ns vs fq_codel {fq} ns"
    );
}

/// A bad link value is refused before anything starts: exit 2, the demo's own flag named,
/// no lab, no output directory.
#[test]
fn demo_bad_link_values_are_refused_before_a_lab_exists() {
    if !tier::root("demo_bad_link_values_are_refused_before_a_lab_exists") {
        return;
    }
    let lab = format!("sb{}", std::process::id());
    let tmp = tempdir();
    let dir = tmp.path().join("demo");
    for (args, named) in [
        (["--rate", "0mbit"], "--rate"),
        (["--delay", "soon"], "--delay"),
        (["--fifo-limit", "0p"], "--fifo-limit"),
    ] {
        let out = Command::new(crate::harness::BIN)
            .args(["demo", "-l", "1", "--lab", &lab, "-o"])
            .arg(&dir)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let se = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {se}");
        assert!(se.contains(named) && se.contains(args[1]), "{args:?}: {se}");
        assert!(!se.contains("building lab"), "{args:?}: {se}");
        assert!(leftover_namespaces(&lab).is_empty(), "{args:?}");
        assert!(!dir.exists(), "{args:?}: {} was written", dir.display());
    }
}
