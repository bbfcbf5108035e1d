//! The configuration a user pastes (`--emit sqm|tc|cake-autorate` of `bloatlab tune` and
//! `bloatlab autorate`):
//!
//! * [`Format::Sqm`]: an OpenWrt sqm-scripts `config queue` section for /etc/config/sqm
//!   (CAKE with `piece_of_cake.qos`; `linklayer`/`overhead` when the measured link had
//!   framing).
//! * [`Format::Tc`]: `tc` commands for a plain Linux router: CAKE on the interface's egress
//!   (upload) and on an IFB device that the interface's ingress is redirected to
//!   (download), named `ifb4IFACE` as sqm-scripts does.
//! * [`Format::CakeAutorate`]: a cake-autorate `config.primary.sh` with min/base/max rates
//!   per direction (and the thresholds autorate ran with, when known).
//!
//! Rates are written in whole kbit/s, rounded down: a configuration never shapes above
//! what was measured. Pure text; nothing is run. tc-cake(8) and the sqm-scripts
//! documentation describe the keywords.

use crate::controller::Direction;
use crate::params::{Bounds, Params};
use std::fmt::Write;

/// What to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenWrt sqm-scripts.
    Sqm,
    /// tc commands (egress and IFB ingress).
    Tc,
    /// cake-autorate's config.
    CakeAutorate,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Format, String> {
        match s {
            "sqm" => Ok(Format::Sqm),
            "tc" => Ok(Format::Tc),
            "cake-autorate" => Ok(Format::CakeAutorate),
            _ => Err(format!("{s:?} is not a format: sqm, tc or cake-autorate")),
        }
    }
}

impl Format {
    /// Its `--emit` word.
    pub fn name(self) -> &'static str {
        match self {
            Format::Sqm => "sqm",
            Format::Tc => "tc",
            Format::CakeAutorate => "cake-autorate",
        }
    }
}

/// Cell framing of the measured link (tc-cake(8) `atm`/`ptm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cells {
    /// None (Ethernet-like: only the overhead).
    None,
    /// ATM/AAL5 (ADSL).
    Atm,
    /// PTM 64/65 (VDSL2).
    Ptm,
}

/// Per-packet overhead compensation the experiment used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// Bytes added per packet (may be negative).
    pub overhead: i32,
    /// Minimum packet unit, bytes (0: none).
    pub mpu: u32,
    /// Cell framing.
    pub cells: Cells,
}

impl Framing {
    /// `None` when it changes nothing (no overhead, MPU or cells).
    pub fn nontrivial(self) -> Option<Framing> {
        (self.overhead != 0 || self.mpu != 0 || self.cells != Cells::None).then_some(self)
    }

    /// tc-cake(8) keywords: `atm overhead 44 mpu 64`.
    fn cake_words(self) -> String {
        let mut w = Vec::new();
        match self.cells {
            Cells::None => {}
            Cells::Atm => w.push("atm".to_string()),
            Cells::Ptm => w.push("ptm".to_string()),
        }
        w.push(format!("overhead {}", self.overhead));
        if self.mpu > 0 {
            w.push(format!("mpu {}", self.mpu));
        }
        w.join(" ")
    }
}

/// What to deploy.
#[derive(Debug, Clone, PartialEq)]
pub struct Deploy {
    /// Where it came from, for the header comment (`bloatlab tune --lab x --stage 1`).
    pub source: String,
    /// The WAN interface (egress = upload).
    pub iface: String,
    /// Download rates (`None`: not measured; that direction is left unshaped).
    pub down: Option<Bounds>,
    /// Upload rates.
    pub up: Option<Bounds>,
    /// The link's framing, when the experiment had one.
    pub framing: Option<Framing>,
    /// Thresholds to carry into cake-autorate (autorate's own), if any.
    pub params: Option<Params>,
}

impl Deploy {
    fn rates(&self, d: Direction) -> Option<Bounds> {
        match d {
            Direction::Down => self.down,
            Direction::Up => self.up,
        }
    }

    /// The IFB device for ingress shaping, `ifb4IFACE` cut to 15 bytes (IFNAMSIZ - 1), as
    /// sqm-scripts names it.
    pub fn ifb(&self) -> String {
        let mut s = format!("ifb4{}", self.iface);
        while s.len() > 15 {
            s.pop();
        }
        s
    }
}

/// Whole kbit/s, rounded down (at least 1).
pub fn kbit(b: bloatlab_units::BitRate) -> u64 {
    (b.0 / 1000).max(1)
}

/// The text for `f`.
pub fn render(f: Format, d: &Deploy) -> String {
    match f {
        Format::Sqm => sqm(d),
        Format::Tc => tc(d),
        Format::CakeAutorate => cake_autorate(d),
    }
}

fn sqm(d: &Deploy) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {}", d.source);
    let _ = writeln!(
        s,
        "# OpenWrt sqm-scripts: add to /etc/config/sqm, then /etc/init.d/sqm restart"
    );
    let _ = writeln!(s, "config queue 'bloatlab'");
    let opt = |s: &mut String, k: &str, v: &str| {
        let _ = writeln!(s, "\toption {k} '{v}'");
    };
    opt(&mut s, "enabled", "1");
    opt(&mut s, "interface", &d.iface);
    // sqm-scripts: 0 leaves a direction unshaped.
    for (k, dir) in [("download", Direction::Down), ("upload", Direction::Up)] {
        let v = d.rates(dir).map_or(0, |b| kbit(b.base));
        opt(&mut s, k, &v.to_string());
    }
    opt(&mut s, "qdisc", "cake");
    opt(&mut s, "script", "piece_of_cake.qos");
    if let Some(fr) = d.framing {
        let layer = match fr.cells {
            Cells::Atm => "atm",
            Cells::None | Cells::Ptm => "ethernet",
        };
        opt(&mut s, "linklayer", layer);
        opt(&mut s, "overhead", &fr.overhead.to_string());
        opt(&mut s, "linklayer_adaptation_mechanism", "cake");
        if fr.mpu > 0 {
            opt(&mut s, "linklayer_advanced", "1");
            opt(&mut s, "tcMPU", &fr.mpu.to_string());
        }
        if fr.cells == Cells::Ptm {
            // sqm-scripts has no PTM link layer; CAKE's `ptm` keyword goes in as a qdisc option.
            opt(&mut s, "qdisc_advanced", "1");
            opt(&mut s, "qdisc_really_really_advanced", "1");
            opt(&mut s, "iqdisc_opts", "ptm");
            opt(&mut s, "eqdisc_opts", "ptm");
        }
    }
    s
}

fn tc(d: &Deploy) -> String {
    let mut s = String::new();
    let extra = d
        .framing
        .map(|f| format!(" {}", f.cake_words()))
        .unwrap_or_default();
    let _ = writeln!(s, "# {}", d.source);
    let _ = writeln!(
        s,
        "# tc commands (root; needs the cake qdisc, kernel 4.19 or later, sch_cake loaded)"
    );
    if let Some(b) = d.up {
        let _ = writeln!(s, "# upload: CAKE on {}'s egress", d.iface);
        let _ = writeln!(
            s,
            "tc qdisc replace dev {} root cake bandwidth {}kbit besteffort{extra}",
            d.iface,
            kbit(b.base)
        );
    }
    if let Some(b) = d.down {
        let ifb = d.ifb();
        let _ = writeln!(
            s,
            "# download: {}'s ingress redirected to {ifb}, CAKE on {ifb}'s egress",
            d.iface
        );
        let _ = writeln!(s, "ip link add name {ifb} type ifb");
        let _ = writeln!(s, "ip link set dev {ifb} up");
        let _ = writeln!(s, "tc qdisc replace dev {} handle ffff: ingress", d.iface);
        let _ = writeln!(
            s,
            "tc filter add dev {} parent ffff: protocol all prio 10 matchall action mirred egress redirect dev {ifb}",
            d.iface
        );
        let _ = writeln!(
            s,
            "tc qdisc replace dev {ifb} root cake bandwidth {}kbit besteffort ingress{extra}",
            kbit(b.base)
        );
    }
    if d.up.is_none() && d.down.is_none() {
        let _ = writeln!(s, "# no direction was measured: nothing to set");
    }
    s
}

fn cake_autorate(d: &Deploy) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "#!/usr/bin/env bash");
    let _ = writeln!(s, "# {}", d.source);
    let _ = writeln!(
        s,
        "# cake-autorate (github.com/lynxthecat/cake-autorate): save as config.primary.sh"
    );
    let _ = writeln!(s, "dl_if={} # download interface", d.ifb());
    let _ = writeln!(s, "ul_if={} # upload interface", d.iface);
    for (tag, dir) in [("dl", Direction::Down), ("ul", Direction::Up)] {
        match d.rates(dir) {
            Some(b) => {
                let _ = writeln!(s, "adjust_{tag}_shaper_rate=1");
                for (k, v) in [("min", b.min), ("base", b.base), ("max", b.max)] {
                    let _ = writeln!(s, "{k}_{tag}_shaper_rate_kbps={}", kbit(v));
                }
            }
            None => {
                let _ = writeln!(s, "adjust_{tag}_shaper_rate=0 # not measured");
            }
        }
    }
    if let Some(p) = d.params {
        let ms = |t: std::time::Duration| format!("{:.1}", t.as_secs_f64() * 1e3);
        for tag in ["dl", "ul"] {
            let _ = writeln!(s, "{tag}_owd_delta_delay_thr_ms={}", ms(p.delay_thr));
            let _ = writeln!(
                s,
                "{tag}_avg_owd_delta_max_adjust_up_thr_ms={}",
                ms(p.raise_full_delay)
            );
            let _ = writeln!(
                s,
                "{tag}_avg_owd_delta_max_adjust_down_thr_ms={}",
                ms(p.cut_full_delay)
            );
        }
        let _ = writeln!(s, "bufferbloat_detection_window={}", p.bloat_window);
        let _ = writeln!(s, "bufferbloat_detection_thr={}", p.bloat_count);
        let _ = writeln!(s, "high_load_thr={}", p.high_load);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_units::BitRate;
    use std::collections::HashMap;

    fn b(min: u64, base: u64, max: u64) -> Bounds {
        Bounds {
            min: BitRate(min),
            base: BitRate(base),
            max: BitRate(max),
        }
    }

    fn deploy(framing: Option<Framing>) -> Deploy {
        Deploy {
            source: "bloatlab tune --lab t --stage 1".into(),
            iface: "eth0".into(),
            down: Some(b(40_000_000, 85_432_999, 120_000_000)),
            up: Some(b(2_000_000, 9_500_000, 12_000_000)),
            framing,
            params: None,
        }
    }

    /// `option key 'value'` lines of the one section.
    fn sqm_options(text: &str) -> HashMap<String, String> {
        let mut sections = 0;
        let mut m = HashMap::new();
        for l in text.lines() {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                [] => {}
                [c, ..] if c.starts_with('#') => {}
                ["config", "queue", _] => sections += 1,
                ["option", k, v] => {
                    let v = v.strip_prefix('\'').and_then(|v| v.strip_suffix('\''));
                    assert!(m.insert(k.to_string(), v.unwrap().to_string()).is_none());
                }
                _ => panic!("not sqm syntax: {l:?}"),
            }
        }
        assert_eq!(sections, 1);
        m
    }

    #[test]
    fn sqm_has_rates_cake_and_framing_only_when_used() {
        let m = sqm_options(&render(Format::Sqm, &deploy(None)));
        assert_eq!(m["download"], "85432");
        assert_eq!(m["upload"], "9500");
        assert_eq!(m["qdisc"], "cake");
        assert_eq!(m["script"], "piece_of_cake.qos");
        assert_eq!(m["interface"], "eth0");
        assert!(!m.contains_key("linklayer") && !m.contains_key("overhead"));
        let atm = Framing {
            overhead: 44,
            mpu: 0,
            cells: Cells::Atm,
        };
        let m = sqm_options(&render(Format::Sqm, &deploy(Some(atm))));
        assert_eq!(
            (m["linklayer"].as_str(), m["overhead"].as_str()),
            ("atm", "44")
        );
        assert!(!m.contains_key("tcMPU"));
        let ptm = Framing {
            overhead: 30,
            mpu: 68,
            cells: Cells::Ptm,
        };
        let m = sqm_options(&render(Format::Sqm, &deploy(Some(ptm))));
        assert_eq!(m["linklayer"], "ethernet");
        assert_eq!(m["tcMPU"], "68");
        assert_eq!(m["eqdisc_opts"], "ptm");
        // A direction not measured is left unshaped (0).
        let mut d = deploy(None);
        d.up = None;
        assert_eq!(sqm_options(&render(Format::Sqm, &d))["upload"], "0");
    }

    #[test]
    fn tc_shapes_egress_and_ifb_ingress() {
        let atm = Framing {
            overhead: 44,
            mpu: 0,
            cells: Cells::Atm,
        };
        let text = render(Format::Tc, &deploy(Some(atm)));
        let cmds: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        let cake: Vec<&Vec<&str>> = cmds
            .iter()
            .filter(|c| c.starts_with(&["tc", "qdisc", "replace"]) && c.contains(&"cake"))
            .collect();
        assert_eq!(cake.len(), 2, "{text}");
        fn after(c: &[&str], k: &str) -> String {
            c[c.iter().position(|w| *w == k).unwrap() + 1].to_string()
        }
        assert_eq!(after(&cake[0][..], "dev"), "eth0");
        assert_eq!(after(&cake[0][..], "bandwidth"), "9500kbit");
        assert_eq!(after(&cake[1][..], "dev"), "ifb4eth0");
        assert_eq!(after(&cake[1][..], "bandwidth"), "85432kbit");
        assert!(cake[1].contains(&"ingress"));
        for c in &cake {
            assert!(
                c.contains(&"atm") && after(&c[..], "overhead") == "44",
                "{c:?}"
            );
        }
        let redirect = cmds
            .iter()
            .find(|c| c.contains(&"mirred"))
            .expect("an ingress redirect");
        assert_eq!(redirect.last(), Some(&"ifb4eth0"));
        assert!(!text.contains("overhead") || text.contains("atm"));
        assert!(!render(Format::Tc, &deploy(None)).contains("overhead"));
        let long = Deploy {
            iface: "enp0s31f6longname".into(),
            ..deploy(None)
        };
        assert_eq!(long.ifb(), "ifb4enp0s31f6lo");
    }

    #[test]
    fn cake_autorate_config_has_min_base_max_per_direction() {
        let mut d = deploy(None);
        d.params = Some(Params::default());
        let text = render(Format::CakeAutorate, &d);
        let mut m = HashMap::new();
        for l in text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
        {
            let kv = l.split('#').next().unwrap().trim();
            let (k, v) = kv.split_once('=').unwrap_or_else(|| panic!("{l:?}"));
            assert!(
                k.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_'),
                "shell variable name: {k:?}"
            );
            m.insert(k.to_string(), v.to_string());
        }
        let n = |k: &str| m[k].parse::<f64>().unwrap_or_else(|_| panic!("{k}"));
        assert_eq!(n("min_dl_shaper_rate_kbps"), 40000.0);
        assert_eq!(n("base_dl_shaper_rate_kbps"), 85432.0);
        assert_eq!(n("max_dl_shaper_rate_kbps"), 120000.0);
        assert_eq!(n("base_ul_shaper_rate_kbps"), 9500.0);
        assert_eq!(m["dl_if"], "ifb4eth0");
        assert_eq!(m["ul_if"], "eth0");
        assert_eq!(n("dl_owd_delta_delay_thr_ms"), 30.0);
        assert_eq!(n("bufferbloat_detection_window"), 6.0);
        // The shell accepts it.
        if let Ok(o) = std::process::Command::new("sh")
            .args(["-n", "-c", &text])
            .output()
        {
            assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        }
        d.down = None;
        assert!(render(Format::CakeAutorate, &d).contains("adjust_dl_shaper_rate=0"));
        assert_eq!("cake-autorate".parse::<Format>(), Ok(Format::CakeAutorate));
        assert!("openwrt".parse::<Format>().unwrap_err().contains("sqm, tc"));
    }
}
