//! Responsiveness (RPM) interoperability through a lab link (issue 20,
//! deliverables 3 and 4): Cloudflare's `mach rpm` (a client no one here
//! wrote) against `bloatlab server --https`, and against Debian's nginx
//! configured as network-quality/server's example (a server no one here
//! wrote), on one 20 Mbit/s link with 40 ms each way and a deep FIFO
//! (300 packets, 180 ms), Reno on both hosts so the queue fills as it does
//! behind a home router. (Through 1000 packets, 600 ms, mach 0.4.0 sometimes
//! ends its upload leg without any RPM and exits 1: its serial probes
//! leave no window with a complete set.)
//!
//! Physics bounds every answer: the base RTT is 80 ms, so no probe can be
//! faster and no RPM can exceed 60 000 / 80 = 750; a full 300-packet FIFO
//! at 20 Mbit/s adds 180 ms, so the RPM is Poor (< 300); a saturated link
//! carries its TCP goodput, 20 Mbit/s x 1448 / 1500.
//!
//! Our own client against nginx and against our server, through one
//! FQ-CoDel link, is [`our_client_measures_nginx_and_our_server_alike_through_one_link`].

use crate::harness::lab::LabGuard;
use crate::harness::rpm_peers::{MachLeg, MachReport, Nginx, run_mach};
use crate::harness::{BIN, Listen, Proc, load, stdout, stop_http_server};
use bloatlab_testkit::tier;

/// The link every test here runs through.
const LINK: &[&str] = &[
    "--rate", "20mbit", "--delay", "40ms", "--qdisc", "fifo", "--limit", "300p", "--cc", "reno",
];
/// The link our client measures both servers through: FQ-CoDel keeps the
/// network's queue short, so what differs between two runs is the servers.
const D3_LINK: &[&str] = &[
    "--rate", "20mbit", "--delay", "40ms", "--qdisc", "fq_codel", "--limit", "1000p",
];
/// The lab's server address.
const SERVER: &str = "10.77.0.2";
/// TCP goodput of the link: 20 Mbit/s of 1500-byte packets carrying 1448
/// bytes of payload (IPv4 and TCP headers with timestamps: 52 bytes).
const LINK_GOODPUT_BPS: f64 = 20e6 * 1448.0 / 1500.0;
/// 60 000 ms / the 80 ms base RTT.
const RPM_CEILING: f64 = 750.0;

/// `a` and `b` agree within `frac` of the larger one.
pub fn agree(a: f64, b: f64, frac: f64) -> bool {
    (a - b).abs() <= frac * a.max(b)
}

/// What physics allows a report taken through [`LINK`] to say, less two
/// artefacts of mach 0.4.0 seen against both servers (docs/http.md):
///
/// * it counts upload bytes when its HTTP/2 body hands them over, before TCP
///   sends them, so its upload capacity includes the send buffer it fills
///   (+30 to +50 % through this FIFO): only a floor is asserted upstream;
/// * it probes one at a time, so through a full queue some 4-s windows hold
///   no complete probe set, and it reports the RPM of the last window that
///   did, often one from before the queue filled. Its median loaded latency
///   shows the queue either way. Poor is asserted for the download from our
///   server (`rpm_poor`), whose short send queue (`TCP_NOTSENT_LOWAT`) lets
///   its probes finish within the windows; against nginx, whose self probes
///   wait 1.5-2.4 s behind its socket buffer, mach reported 207-332 RPM.
fn assert_physics(who: &str, r: &MachReport, rpm_poor: bool) {
    for (dir, leg, over) in [
        ("download", &r.download, Some(1.10)),
        ("upload", &r.upload, None),
    ] {
        let MachLeg {
            throughput_bps,
            loaded_latency_ms,
            rpm,
            failed_connections,
        } = *leg;
        let ratio = throughput_bps / LINK_GOODPUT_BPS;
        assert!(
            ratio >= 0.90 && over.is_none_or(|o| ratio <= o),
            "{who}: {dir} capacity {:.2} Mbit/s, link goodput {:.2}: {r:?}",
            throughput_bps / 1e6,
            LINK_GOODPUT_BPS / 1e6
        );
        assert!(
            rpm > 0.0 && rpm <= RPM_CEILING,
            "{who}: {dir} RPM {rpm} above what an 80 ms RTT allows: {r:?}"
        );
        assert!(
            loaded_latency_ms >= 79.0,
            "{who}: {dir} loaded latency {loaded_latency_ms} ms under the 80 ms base RTT: {r:?}"
        );
        assert_eq!(failed_connections, 0, "{who}: {dir}: {r:?}");
    }
    // A FIFO of 180 ms kept at least half full by Reno's sawtooth.
    let loaded = r.download.loaded_latency_ms;
    assert!(
        loaded >= 150.0,
        "{who}: download loaded latency {loaded} ms: {r:?}"
    );
    let rpm = r.download.rpm;
    assert!(
        !rpm_poor || rpm < 300.0,
        "{who}: download RPM {rpm} is not Poor: {r:?}"
    );
    // The idle latency is at least the base RTT.
    assert!(r.unloaded_latency_ms >= 79.0, "{who}: {r:?}");
}

/// The client host reaches the lab link and nothing else: no default route
/// (v4 or v6), so mach cannot reach Cloudflare's servers from there whatever
/// it tried.
fn assert_client_reaches_only_the_lab(lab: &LabGuard) {
    for family in ["-4", "-6"] {
        let routes = stdout(&lab.exec("client", &["ip", family, "route", "show"]));
        assert!(
            !routes.contains("default"),
            "the lab client has a default route ({family}): {routes}"
        );
    }
}

/// `bloatlab server --no-iperf --https PORT` on the lab's server host.
fn our_server(lab: &LabGuard, port: u16) -> Proc {
    let p = port.to_string();
    lab.serve(
        "server",
        &[BIN, "server", "--no-iperf", "-B", SERVER, "--https", &p],
        Listen::Tcp,
        port,
    )
}

#[test]
fn mach_measures_our_server_and_nginx_alike_through_a_deep_fifo() {
    if !tier::root("mach_measures_our_server_and_nginx_alike_through_a_deep_fifo") {
        return;
    }
    // Capacity within 10 % and an RPM class: timing-sensitive, alone.
    let _s = load::exclusive();
    let lab = LabGuard::up("rpm", LINK);
    assert_client_reaches_only_the_lab(&lab);
    let ours = our_server(&lab, 8443);
    let nginx = Nginx::start_in_lab(&lab, "server", SERVER, 8444);

    let (on_ours, log) = run_mach(
        &lab,
        "client",
        &format!("https://{SERVER}:8443/.well-known/nq"),
    );
    eprintln!("mach vs bloatlab server: {on_ours:?}\n{log}");
    let (on_nginx, log) = run_mach(&lab, "client", &nginx.config_url);
    eprintln!("mach vs nginx: {on_nginx:?}\n{log}");
    // Our client on the same link and server, each direction alone as mach runs
    // them (docs/rpm.md, "Why mach's RPM differs from ours").
    let ours_seq = run_ours_with(
        &lab,
        &format!("https://{SERVER}:8443/.well-known/nq"),
        &["--sequential", "--interval", "1s"],
    );
    eprintln!("bloatlab rpm --sequential vs bloatlab server: {ours_seq}");

    assert_physics("mach vs bloatlab server", &on_ours, true);
    assert_physics("mach vs nginx", &on_nginx, false);
    // The same client through the same link sees the same download
    // capacity from either server. (RPM may differ: nginx does not set
    // TCP_NOTSENT_LOWAT, so a self probe also waits behind nginx's own
    // socket buffer.) The upload is not compared: mach counts upload bytes
    // as its HTTP/2 body hands them over (see `assert_physics`), so its
    // figure includes whatever each server lets it put in flight (HTTP/2
    // flow-control windows and socket buffers differ between the two), and
    // both figures are above what the link can carry: 27.8 (ours) and
    // 30.9 Mbit/s (nginx) on a 19.3 Mbit/s link in one CI run, 11 % apart.
    // The bytes our server actually received are checked below.
    let (a, b) = (on_ours.download, on_nginx.download);
    assert!(
        agree(a.throughput_bps, b.throughput_bps, 0.10),
        "download: {:.2} Mbit/s from ours, {:.2} from nginx",
        a.throughput_bps / 1e6,
        b.throughput_bps / 1e6
    );

    // mach's RPM per leg is one 4-s window of a few serial probes (the worst of each
    // kind dropped), so one leg swings -20 to +32 % around ours (docs/rpm.md). Its two
    // legs averaged came within 10 % of ours in 6 runs by hand, then 37 % apart (mach
    // 246, ours 179) in the next full suite run: no agreement within 15 % can be asserted
    // of a client this noisy. What both clients must agree on is the band: each
    // direction, by each client, Poor through this FIFO (mach's half in assert_physics).
    for run in ["download", "upload"] {
        let rpm = ours_seq["responsiveness"]
            .as_array()
            .and_then(|a| a.iter().find(|r| r["run"] == run))
            .and_then(|r| r["rpm"].as_f64())
            .unwrap_or_else(|| panic!("no {run} RPM: {ours_seq}"));
        assert!(
            rpm < 300.0,
            "bloatlab rpm's {run} RPM {rpm:.0} is not Poor, while mach's is: {ours_seq}"
        );
    }

    // The two clients on the same server and link: download capacity within 10 %
    // (the upload is not comparable, as above).
    let ours_down = ours_seq["download"]["capacity_bps"]
        .as_f64()
        .unwrap_or_else(|| panic!("no download capacity: {ours_seq}"));
    assert!(
        agree(ours_down, on_ours.download.throughput_bps, 0.10),
        "download capacity: bloatlab rpm {:.2} Mbit/s, mach {:.2}",
        ours_down / 1e6,
        on_ours.download.throughput_bps / 1e6
    );

    // Our server saw mach: its config fetch, the probes, the bytes.
    let st = stop_http_server(ours);
    // mach ends a leg once goodput and RPM are stable, so a leg may be
    // short; at 20 Mbit/s, 4 s worth each way is a floor.
    let four_seconds = (LINK_GOODPUT_BPS / 8.0 * 4.0) as u64;
    assert!(
        st.sent >= four_seconds && st.received >= four_seconds,
        "{st:?}"
    );
    // Foreign probes open a connection each; self probes are requests too.
    assert!(st.accepted >= 10 && st.requests > st.accepted, "{st:?}");
}

/// `bloatlab rpm CONFIG_URL --json --interval 2s` on the lab's client, both directions
/// at once, 40 s at most; its JSON document.
fn run_ours(lab: &LabGuard, config_url: &str) -> serde_json::Value {
    run_ours_with(lab, config_url, &["--interval", "2s", "--duration", "40"])
}

/// `bloatlab rpm CONFIG_URL --json --insecure EXTRA...` on the lab's client; its JSON
/// document.
fn run_ours_with(lab: &LabGuard, config_url: &str, extra: &[&str]) -> serde_json::Value {
    let mut cmd = vec![BIN, "rpm", config_url, "--insecure", "--json"];
    cmd.extend_from_slice(extra);
    let o = lab.exec("client", &cmd);
    assert!(
        o.status.success(),
        "bloatlab rpm {config_url} failed ({}):\n{}{}",
        o.status,
        stdout(&o),
        crate::harness::stderr(&o)
    );
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
}

/// RPM, P90 RPM, download and upload capacity (bit/s) of a `bloatlab rpm` report.
fn figures(v: &serde_json::Value) -> [f64; 4] {
    let f = |x: &serde_json::Value| x.as_f64().unwrap_or_else(|| panic!("{v}"));
    let r = &v["responsiveness"][0];
    [
        f(&r["rpm"]),
        f(&r["p90_rpm"]),
        f(&v["download"]["capacity_bps"]),
        f(&v["upload"]["capacity_bps"]),
    ]
}

/// D3 of issue 20: `bloatlab rpm` against nginx (a server no one here wrote) and
/// against `bloatlab server`, back to back through one FQ-CoDel link, agree within
/// 15 % RPM and 10 % capacity each way. 2-s intervals: with 1 s, a loss repaired on
/// many connections at once made a 4-s capacity window read 21.5 Mbit/s through a
/// 20 Mbit/s link (2 of 3 runs over 10 % apart); through the deep FIFO the RPM
/// itself swung 0-27 % between runs. Measured (3 runs, docs/http.md): RPM 409, 409,
/// 403 ours against 379, 379, 349 nginx (7-13 % apart, all of it the loaded half:
/// nginx's self probes wait 1.5-1.8 s behind its send buffers, ours 0.65-0.68 s; the
/// foreign parts agree at 81-93 ms); capacities 0-4.5 % apart. About 45 s.
#[test]
fn our_client_measures_nginx_and_our_server_alike_through_one_link() {
    if !tier::root("our_client_measures_nginx_and_our_server_alike_through_one_link") {
        return;
    }
    // Capacity within 10 %: timing-sensitive, alone.
    let _s = load::exclusive();
    let lab = LabGuard::up("rpmd3", D3_LINK);
    let ours = our_server(&lab, 8443);
    let nginx = Nginx::start_in_lab(&lab, "server", SERVER, 8444);
    // Back to back through the same link, the same client and parameters.
    let on_ours = run_ours(&lab, &format!("https://{SERVER}:8443/.well-known/nq"));
    let on_nginx = run_ours(&lab, &nginx.config_url);
    let (a, b) = (figures(&on_ours), figures(&on_nginx));
    eprintln!("bloatlab rpm vs bloatlab server: {a:?}\nbloatlab rpm vs nginx: {b:?}");
    eprintln!("{on_ours}\n{on_nginx}");
    for (who, [rpm, ..]) in [("ours", a), ("nginx", b)] {
        assert!(rpm > 0.0 && rpm <= RPM_CEILING, "{who}: RPM {rpm}");
    }
    assert!(
        agree(a[0], b[0], 0.15),
        "RPM: {} ours, {} nginx",
        a[0],
        b[0]
    );
    for (i, dir) in [(2, "download"), (3, "upload")] {
        assert!(
            agree(a[i], b[i], 0.10),
            "{dir}: {:.2} Mbit/s from ours, {:.2} from nginx",
            a[i] / 1e6,
            b[i] / 1e6
        );
    }
    drop(ours);
}

/// One direction of a `bloatlab rpm --sequential` report: its RPM, its loaded
/// (self-probe) RPM and its foreign parts' trimmed means, tcp_f, tls_f and
/// http_f, in ms.
fn leg(v: &serde_json::Value, run: &str) -> (f64, f64, [f64; 3]) {
    let r = v["responsiveness"]
        .as_array()
        .and_then(|a| a.iter().find(|r| r["run"] == run))
        .unwrap_or_else(|| panic!("no {run} leg: {v}"));
    let f = |x: &serde_json::Value| x.as_f64().unwrap_or_else(|| panic!("{run}: {v}"));
    let ms = |k: &str| f(&r["trimmed"][k]) / 1e6;
    (
        f(&r["rpm"]),
        f(&r["loaded_rpm"]),
        [ms("tcp_f_ns"), ms("tls_f_ns"), ms("http_f_ns")],
    )
}

/// D3 of issue 20, the other pair: Cloudflare's mach (a client no one here wrote)
/// and `bloatlab rpm`, each against our server through one FQ-CoDel link, in mach's
/// mode (one direction after the other, 1-s intervals). Both runs are captured on
/// the client host, which shows the two clients open their probe connections
/// differently: mach 0.4.0 leaves Nagle's algorithm on (`set_nodelay(false)`), so
/// its request waits one round trip for the ACK of its TLS Finished, and it spends
/// 10-45 ms before each ClientHello (loading the system's CA store per connection);
/// its tls_f and http_f include both (its `foreign_probe_phases`). Ours sends at
/// once. Measured: mach 317-326 download, 293-305 upload; ours 395-400 and 411-415;
/// mach's waits as seen on the wire, added to our foreign parts, give 299 and 314
/// (docs/rpm.md). The assertion is that prediction against mach's own figure,
/// within issue 20's 15 %, so a disagreement with any other cause still fails, and
/// so does a mach that stops waiting (the wire check first). About 110 s.
#[test]
fn mach_and_our_client_agree_through_fq_codel_once_machs_own_waits_are_counted() {
    use crate::harness::wire::{Capture, median};
    if !tier::root("mach_and_our_client_agree_through_fq_codel_once_machs_own_waits_are_counted") {
        return;
    }
    // RPM within 15 %: timing-sensitive, alone.
    let _s = load::exclusive();
    let lab = LabGuard::up("rpmm", D3_LINK);
    assert_client_reaches_only_the_lab(&lab);
    let server = our_server(&lab, 8443);
    let url = format!("https://{SERVER}:8443/.well-known/nq");

    // mach's RPM per leg is one window of a few serial probes, so one leg in about five
    // lands 20-30 % off its usual value (upload 384 once against 275-305 in eight
    // other runs): its median of three runs is what is compared.
    let capture = Capture::start(&lab, "client", 8443);
    let machs: Vec<MachReport> = (0..3)
        .map(|_| {
            let (r, log) = run_mach(&lab, "client", &url);
            eprintln!("mach: {r:?}\n{log}");
            r
        })
        .collect();
    let mach_wire = capture.handshakes();
    let capture = Capture::start(&lab, "client", 8443);
    let ours = run_ours_with(&lab, &url, &["--sequential", "--interval", "1s"]);
    let ours_wire = capture.handshakes();
    drop(server);
    eprintln!("ours: {ours}");

    // The wire: each client opened its probe connections over the same path.
    for (who, w) in [("mach", &mach_wire), ("ours", &ours_wire)] {
        assert!(w.len() >= 10, "{who}: {} probe connections: {w:?}", w.len());
    }
    let m = |w: &[_], f| median(w, f);
    let rtt = m(&ours_wire, |h| h.tcp);
    assert!(
        agree(m(&mach_wire, |h| h.tcp), rtt, 0.05) && (79.0..90.0).contains(&rtt),
        "TCP handshakes: mach {:.1} ms, ours {rtt:.1} ms",
        m(&mach_wire, |h| h.tcp)
    );
    let (mach_wait, ours_wait) = (
        m(&mach_wire, |h| h.request_wait),
        m(&ours_wire, |h| h.request_wait),
    );
    assert!(
        ours_wait < 5.0,
        "our request waited {ours_wait:.1} ms after the TLS Finished"
    );
    assert!(
        mach_wait > 0.9 * rtt,
        "mach's request waited {mach_wait:.1} ms after its TLS Finished, not a round trip \
         ({rtt:.1} ms): if mach now sends at once, the prediction below needs revisiting"
    );
    let extra_tls = m(&mach_wire, |h| h.before_hello) - m(&ours_wire, |h| h.before_hello);
    let extra_http = mach_wait - ours_wait;
    eprintln!(
        "mach waits {extra_tls:.1} ms more before its ClientHello, {extra_http:.1} ms more before its request"
    );

    let median_of = |f: fn(&MachReport) -> f64| {
        let mut v: Vec<f64> = machs.iter().map(f).collect();
        crate::harness::lab::median(&mut v)
    };
    for (run, mach_rpm) in [
        ("download", median_of(|r| r.download.rpm)),
        ("upload", median_of(|r| r.upload.rpm)),
    ] {
        let (rpm, loaded, [tcp, tls, http]) = leg(&ours, run);
        // The draft's formula (mach's too) over our parts with mach's waits in them.
        let foreign = (tcp + tls + extra_tls + http + extra_http) / 3.0;
        let predicted = (60_000.0 / foreign + loaded) / 2.0;
        eprintln!("{run}: mach {mach_rpm}, ours {rpm:.0}, ours with mach's waits {predicted:.0}");
        assert!(
            agree(predicted, mach_rpm, 0.15),
            "{run}: mach {mach_rpm} RPM (median of 3); ours {rpm:.0}, with mach's waits \
             {predicted:.0} (foreign parts {tcp:.1}/{tls:.1}/{http:.1} ms + {extra_tls:.1} + \
             {extra_http:.1}, loaded {loaded:.0} RPM)"
        );
    }
    // Download capacity: the two clients' counts of the same link within 10 % of each other.
    // One exception, for an artefact both clients share (docs/rpm.md, "A capacity can read
    // above the link"): a window that takes in bytes released at once after a late loss
    // repair reads above what the link can carry. In one CI run mach's median read 20.58
    // Mbit/s on a link whose payload capacity is 19.31 and ours 18.44, 10.4 % apart. So when
    // mach reads above the payload capacity and the two are more than 10 % apart, ours must
    // be the closer of the two to the link: the test still fails if ours is the one that is
    // off.
    let down = ours["download"]["capacity_bps"]
        .as_f64()
        .unwrap_or_else(|| panic!("no download capacity: {ours}"));
    let mach_down = median_of(|r| r.download.throughput_bps);
    let (mbit, link) = (|b: f64| b / 1e6, LINK_GOODPUT_BPS);
    // Ours alone within 10 % of the link (issue 20, deliverable 4). Its capacity is the
    // goodput over the loaded span after saturation, not the moving average at saturation
    // that read 22.56 Mbit/s here once (docs/rpm.md, "How accurate the capacity is").
    assert!(
        (down / link - 1.0).abs() <= 0.10,
        "download capacity: ours {:.2} Mbit/s, link goodput {:.2}",
        mbit(down),
        mbit(link)
    );
    let mach_above_link = mach_down > link;
    let ours_closer = (down - link).abs() < (mach_down - link).abs();
    assert!(
        agree(down, mach_down, 0.10) || (mach_above_link && ours_closer),
        "download capacity: ours {:.2} Mbit/s, mach {:.2}, link goodput {:.2}",
        mbit(down),
        mbit(mach_down),
        mbit(link)
    );
}
