//! `lab status` as text, rendered from the [`StatusReport`] that
//! `lab status --json` prints, so the two never disagree.

use crate::driver::calibrate::TrimReport;
use crate::driver::direction::DirectionReport;
use crate::driver::host_track::HostTrackReport;
use crate::driver::path_probe;
use crate::driver::priority::{DEMOTED_NICE, DEMOTED_SLICE, NormalMode};
use crate::spec::Backend;
use crate::status::StatusReport;
use std::fmt::Write as _;

/// The whole `lab status` text: the lab, its hosts and link settings, then
/// (once the emulator wrote them) its counters per direction, the delay
/// calibration, the kernel qdiscs and TUN ring drops.
pub fn render(r: &StatusReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "lab {}: {:?} backend, emulator pid {} {}",
        r.name,
        r.backend,
        r.pid,
        if r.emulator_alive {
            "running"
        } else {
            "NOT RUNNING (the lab is dead)"
        }
    );
    for h in &r.hosts {
        let _ = writeln!(
            out,
            "  {:<9} {:<12} {:<12} netns {}",
            h.name, h.addr, h.addr6, h.netns
        );
    }
    settings(&mut out, r);
    let Some(c) = &r.counters else {
        return out;
    };
    for (name, d) in &c.directions {
        direction(&mut out, name, d);
    }
    match &c.calibration {
        Some(cal) => {
            let us = |ns: u64| ns as f64 / 1e3;
            let _ = writeln!(
                out,
                "  calibration at lab up: {}/{} echo requests client -> server through {} ms + {} ms: \
                 RTT p50 {:.3} ms p90 {:.3} ms, overhead {:.1} us (of it release lateness {:.1} us), \
                 {:.1} us taken out of each direction",
                cal.answered,
                cal.probes,
                path_probe::PROBE_DELAY.as_millis(),
                path_probe::PROBE_DELAY.as_millis(),
                us(cal.rtt_p50_ns) / 1e3,
                us(cal.rtt_p90_ns) / 1e3,
                us(cal.overhead_ns),
                us(cal.lateness_ns),
                us(cal.share_ns),
            );
        }
        None if r.spec.backend == Backend::Userspace && !r.spec.driver.calibrate => {
            let _ = writeln!(
                out,
                "  delay calibration off (--no-calibrate): idle RTTs include the emulator's overhead"
            );
        }
        None => {}
    }
    if let Some(t) = &c.host_tracking {
        let _ = writeln!(out, "  {}", host_tracking_line(t));
    }
    for (dir, q) in &c.qdiscs {
        let _ = writeln!(
            out,
            "  {:<4} qdisc {} {:x}: sent {} B / {} pkts, dropped {}, overlimits {}, backlog {} B / {} pkts",
            dir,
            q.kind,
            q.handle >> 16,
            q.bytes,
            q.packets,
            q.drops,
            q.overlimits,
            q.backlog_bytes,
            q.qlen,
        );
    }
    if c.tun_ring_drops > 0 {
        let _ = writeln!(
            out,
            "  WARNING: emulator overloaded: {} packets dropped in TUN rings before emulation",
            c.tun_ring_drops
        );
    }
    out
}

/// The configured link of each direction (a chain stage by stage) and the
/// hosts with TCP ECN on.
fn settings(out: &mut String, r: &StatusReport) {
    fn f<T>(o: &Option<bloatlab_emu::Spelled<T>>) -> String {
        o.as_ref().map_or_else(|| "-".into(), |v| v.to_string())
    }
    for (dir, l) in [("up", &r.spec.up), ("down", &r.spec.down)] {
        if l.stages.is_empty() {
            let _ = writeln!(
                out,
                "  {dir:<4} rate {} delay {} jitter {} loss {} limit {} qdisc {} {}",
                f(&l.rate),
                f(&l.delay),
                f(&l.jitter),
                f(&l.loss),
                f(&l.limit),
                f(&l.qdisc),
                bloatlab_emu::Spelled::join(&l.params, " ")
            );
            continue;
        }
        for (i, st) in l.stages.iter().enumerate() {
            let _ = writeln!(out, "  {dir:<4} stage {}: {st}", i + 1);
        }
        if l.delay.is_some() || l.jitter.is_some() || l.loss.is_some() {
            let _ = writeln!(
                out,
                "  {dir:<4} path: delay {} jitter {} loss {}",
                f(&l.delay),
                f(&l.jitter),
                f(&l.loss)
            );
        }
    }
    if !r.spec.ecn_hosts.is_empty() {
        let _ = writeln!(out, "  TCP ECN on: {}", r.spec.ecn_hosts.join(", "));
    }
}

/// One direction's forwarding counters, offloads, delay calibration, and
/// link model counters (a chain's per stage).
fn direction(out: &mut String, name: &str, d: &DirectionReport) {
    let _ = writeln!(
        out,
        "  {:<4} forwarded {} pkts / {} B, unroutable {}, lateness p50 {:.0} us p99 {:.0} us max {:.0} us, {}",
        name,
        d.io.tx_packets,
        d.io.tx_bytes,
        d.io.unroutable,
        d.lateness.p50_us,
        d.lateness.p99_us,
        d.lateness.max_us,
        scheduling(d),
    );
    if d.io.rx_super > 0 || d.io.tx_coalesced > 0 {
        let _ = writeln!(
            out,
            "       offload: {} TSO super-packets cut into wire packets, {} coalesced writes",
            d.io.rx_super, d.io.tx_coalesced
        );
    }
    if let Some(cal) = &d.calibration {
        let _ = writeln!(out, "       {}", calibration_line(cal));
    }
    if d.link.stages.is_empty() {
        let _ = writeln!(out, "       {}", link_counters_text(&d.link.total));
    } else {
        // The whole chain: a packet's queueing summed over the stages it crossed.
        let _ = writeln!(
            out,
            "       chain (sojourn per packet, all stages): {}",
            link_counters_text(&d.link.total)
        );
    }
    for st in &d.link.stages {
        let rate = st.rate_bit_s.map_or("unlimited".to_string(), |r| {
            bloatlab_units::BitRate(r).to_string()
        });
        let _ = writeln!(
            out,
            "       stage {:<8} {rate}: {}",
            st.name,
            link_counters_text(&st.link)
        );
    }
}

/// One line of a link model's counters: what entered, left, was dropped
/// (by whom) or marked, what waits, and the sojourn percentiles.
fn link_counters_text(l: &bloatlab_emu::Counters) -> String {
    let ms = |ns: Option<u64>| ns.map_or("-".to_string(), |v| format!("{:.2}", v as f64 / 1e6));
    let s = l.sojourn.summary();
    format!(
        "link: enqueued {} pkts, dequeued {}, dropped {} (overflow {}, aqm {}, loss {}), CE-marked {}, backlog {} pkts / {} B, sojourn ms p50 {} p99 {} max {}",
        l.enqueued.packets,
        l.dequeued.packets,
        l.dropped.total().packets,
        l.dropped.overflow.packets,
        l.dropped.aqm.packets,
        l.dropped.loss.packets,
        l.ce_marked.packets,
        l.backlog.packets,
        l.backlog.bytes.0,
        ms(s.p50_ns),
        ms(s.p99_ns),
        ms(s.max_ns),
    )
}

/// The hosts' share as idle probes track it after lab up.
fn host_tracking_line(t: &HostTrackReport) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    let measured = match t.probes {
        0 => "no idle probe yet".to_string(),
        _ => format!("host overhead median {:.1} us", us(t.measured_ns)),
    };
    let unremoved = match t.unremoved_ns {
        0 => String::new(),
        n => format!("; not removed {:.1} us each way", us(n)),
    };
    format!(
        "host path tracked since lab up: {} idle probes ({} discarded for traffic), {measured}; \
         {:.1} us taken out of each direction (lab up: {:.1} us; {} changes){unremoved}",
        t.probes,
        t.discarded,
        us(t.share_ns),
        us(t.initial_ns),
        t.updates,
    )
}

/// One direction's delay calibration: what was configured, what is
/// applied, and what could not be taken out.
fn calibration_line(c: &TrimReport) -> String {
    let ms = |ns: u64| ns as f64 / 1e6;
    let us = |ns: u64| ns as f64 / 1e3;
    let unremoved = match c.unremoved_ns {
        0 => "nothing".to_string(),
        u => format!("{:.1} us", us(u)),
    };
    format!(
        "calibrated delay: configured {:.3} ms, applied {:.3} ms (path {:.1} us); \
         release lateness p50 {:.1} us of the last {} packets, not taken out \
         (a packet never leaves before its time); not removed: {unremoved}",
        ms(c.configured_ns),
        ms(c.applied_ns),
        us(c.host_path_ns),
        us(c.forwarding_ns),
        c.samples,
    )
}

/// How a forwarding thread is scheduled.
fn scheduling(r: &DirectionReport) -> String {
    let policy = match (r.realtime, r.normal_mode) {
        (true, _) => "SCHED_FIFO".to_string(),
        (false, NormalMode::Plain) => "normal priority".to_string(),
        (false, NormalMode::Prompt) => format!(
            "normal priority at nice {DEMOTED_NICE} with a {} us slice",
            DEMOTED_SLICE.as_micros()
        ),
        (false, NormalMode::NoCustomSlice) => {
            "normal priority (nice 0: no custom slices before Linux 6.12)".to_string()
        }
        (false, NormalMode::Refused) => {
            format!("normal priority (nice 0: nice {DEMOTED_NICE} refused)")
        }
    };
    match r.demotions {
        0 => policy.to_string(),
        n => format!("{policy} (left SCHED_FIFO {n}x: busy enough to starve the hosts)"),
    }
}

#[cfg(test)]
mod tests;
