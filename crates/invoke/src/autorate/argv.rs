//! [`to_argv`]: a [`Plan`] back to the `bloatlab autorate` command line.

use super::{DEFAULT_INTERVAL, DEFAULT_LOAD_INTERVAL, DEFAULT_PORT, Place, Plan, Which};
use crate::client::secs;
use bloatlab_autorate::{Bounds, Params};
use bloatlab_probe::client::Mode;
use bloatlab_units::BitRate;
use clap::ValueEnum;

/// The `bloatlab autorate` command line (after the program name) that resolves to
/// `p`. Times are written as exact decimal seconds, rates in bit/s, factors as the
/// shortest decimal that reads back as the same f64; options at their defaults are
/// left out.
pub fn to_argv(p: &Plan) -> Vec<String> {
    let mut a = vec!["autorate".to_owned()];
    // resolve never makes a plan without a direction.
    let Some(first) = p.down.or(p.up) else {
        return a;
    };
    let (which, bounds) = match (p.down, p.up) {
        (Some(d), Some(u)) => (Which::Both, [d, u]),
        (Some(_), None) => (Which::Down, [first; 2]),
        _ => (Which::Up, [first; 2]),
    };
    let mut opt = |flag: &str, value: String| a.extend([flag.to_owned(), value]);
    let default_iface = match &p.place {
        Place::Lab { lab, stage } => {
            opt("--lab", lab.clone());
            opt("--stage", stage.clone());
            "eth0"
        }
        Place::Command { template, iface } => {
            opt("--set-rate-cmd", template.clone());
            opt("--iface", iface.clone());
            iface.as_str()
        }
    };
    for r in &p.reflectors {
        opt("--reflector", r.clone());
    }
    if p.port != DEFAULT_PORT {
        opt("-p", p.port.to_string());
    }
    if p.interval != DEFAULT_INTERVAL {
        opt("--interval", secs(p.interval));
    }
    if which != Which::Both {
        let v = which.to_possible_value().map(|v| v.get_name().to_owned());
        opt("--direction", v.unwrap_or_default());
    }
    let pair = |f: fn(&Bounds) -> BitRate| {
        let (d, u) = (f(&bounds[0]), f(&bounds[1]));
        if d == u {
            format!("{}bit", d.0)
        } else {
            format!("{}bit/{}bit", d.0, u.0)
        }
    };
    opt("--min", pair(|b| b.min));
    opt("--base", pair(|b| b.base));
    opt("--max", pair(|b| b.max));
    let (q, d) = (&p.params, Params::default());
    let times = [
        ("--delay-thr", q.delay_thr, d.delay_thr),
        ("--cut-full-delay", q.cut_full_delay, d.cut_full_delay),
        ("--bloat-refractory", q.bloat_refractory, d.bloat_refractory),
        ("--decay-every", q.decay_refractory, d.decay_refractory),
    ];
    for (flag, v, default) in times {
        if v != default {
            opt(flag, secs(v));
        }
    }
    let factors = [
        ("--cut-max", q.cut_max, d.cut_max),
        ("--raise-max", q.raise_max, d.raise_max),
        ("--high-load", q.high_load, d.high_load),
        ("--decay-step", q.decay_step, d.decay_step),
    ];
    for (flag, v, default) in factors {
        if v != default {
            // `{v}` is the shortest decimal that reads back as the same f64.
            opt(flag, v.to_string());
        }
    }
    if q.bloat_count != d.bloat_count {
        opt("--bloat-count", q.bloat_count.to_string());
    }
    if q.bloat_window != d.bloat_window {
        opt("--bloat-window", q.bloat_window.to_string());
    }
    if q.cut_achieved != d.cut_achieved {
        opt(
            "--cut-achieved",
            q.cut_achieved.map_or("off".to_owned(), |v| v.to_string()),
        );
    }
    if p.load_interval != DEFAULT_LOAD_INTERVAL {
        opt("--load-interval", secs(p.load_interval));
    }
    if let Some(t) = p.duration {
        opt("--duration", secs(t));
    }
    if let Some(f) = &p.output {
        opt("-o", f.display().to_string());
    }
    for f in &p.emit {
        opt("--emit", f.name().to_owned());
    }
    if p.emit_iface != default_iface {
        opt("--emit-iface", p.emit_iface.clone());
    }
    if p.mode == Mode::Icmp {
        a.push("--icmp".into());
    }
    a
}
