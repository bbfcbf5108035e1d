//! The bufferbloat test page (issue 21): a self-contained page at `/`, its
//! script and style sheet under `/browser/`, and the parameters it runs with
//! at [`PARAMS`] (`/api/v1/browser`).
//!
//! Everything is compiled into the binary (`include_str!` from
//! `crates/http/assets/`); nothing is fetched from anywhere else, and the
//! page's headers say so to the browser ([`CSP`]). The page measures with
//! the service's own RPM endpoints (`/api/v1/large`, `/api/v1/small`,
//! `/api/v1/upload`). docs/browser.md is the operator's and user's guide.
//!
//! The grade thresholds, the phase list and the statistics' parameters the
//! page uses come from [`params_json`], built from `bloatlab-stats`
//! ([`BLOAT_GRADES`], [`TRIM_FRACTION`]), so the page and `bloatlab test`
//! grade on one table that cannot drift apart.

use bloatlab_stats::grade::BLOAT_GRADES;
use bloatlab_stats::rpm::TRIM_FRACTION;
use bloatlab_stats::{Grade, bloat_grade};
use bytes::Bytes;
use std::time::Duration;

/// The page's parameters (JSON, [`params_json`]).
pub const PARAMS: &str = "/api/v1/browser";
/// Where the page's assets live.
pub const ASSET_DIR: &str = "/browser/";

/// The Content-Security-Policy of the page and its assets: only this origin,
/// no inline script or style, no plugins, no framing, no form posts.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; base-uri 'none'; \
form-action 'none'; frame-ancestors 'none'";

/// One file the page is made of.
#[derive(Debug, PartialEq, Eq)]
pub struct Asset {
    /// The path it is served at.
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    pub body: &'static str,
}

/// The page, at `/`.
pub static PAGE: Asset = Asset {
    path: "/",
    content_type: "text/html; charset=utf-8",
    body: include_str!("../assets/index.html"),
};

/// The files under [`ASSET_DIR`]; any other path there is a 404.
pub static ASSETS: [Asset; 3] = [
    Asset {
        path: "/browser/app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/browser/app.js"),
    },
    Asset {
        path: "/browser/stats.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("../assets/browser/stats.js"),
    },
    Asset {
        path: "/browser/style.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("../assets/browser/style.css"),
    },
];

impl Asset {
    /// The asset served at `path`: the page (`/`, `/index.html`) or one of
    /// [`ASSETS`].
    pub fn at(path: &str) -> Option<&'static Asset> {
        match path {
            "/" | "/index.html" => Some(&PAGE),
            _ => ASSETS.iter().find(|a| a.path == path),
        }
    }

    pub fn bytes(&self) -> Bytes {
        Bytes::from_static(self.body.as_bytes())
    }
}

/// One phase of the page's test, in order. The names are `bloatlab test`'s
/// (`idle`, and `download` / `upload` as in its `speedtest`), plus
/// `bidirectional` for both directions at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PagePhase {
    pub name: &'static str,
    /// Parallel download streams (fetches of the large object).
    pub down_streams: u32,
    /// Parallel upload streams (POSTs to the upload sink).
    pub up_streams: u32,
}

impl PagePhase {
    pub fn loaded(&self) -> bool {
        self.down_streams + self.up_streams > 0
    }
}

/// The phases. At most 6 load streams at once: a browser opens at most 6
/// HTTP/1.1 connections per origin and pool, and the load should not queue
/// inside the browser.
pub const PHASES: [PagePhase; 4] = [
    PagePhase {
        name: "idle",
        down_streams: 0,
        up_streams: 0,
    },
    PagePhase {
        name: "download",
        down_streams: 4,
        up_streams: 0,
    },
    PagePhase {
        name: "upload",
        down_streams: 0,
        up_streams: 4,
    },
    PagePhase {
        name: "bidirectional",
        down_streams: 3,
        up_streams: 3,
    },
];

/// The idle phase's length (shorter when the loaded phases are).
pub const IDLE: Duration = Duration::from_secs(5);
/// A pause between phases: probes go on but count for no phase, so the
/// queue a phase built drains before the next one is measured.
pub const SETTLE: Duration = Duration::from_secs(1);
/// Each loaded phase's length without `?duration=`, and the range allowed.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(10);
pub const MIN_DURATION: Duration = Duration::from_secs(1);
pub const MAX_DURATION: Duration = Duration::from_secs(60);
/// The latency probes' interval: 10 a second.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// The most bytes one upload request carries (less under `--max-bytes`).
pub const UPLOAD_CHUNK: u64 = 8 << 20;

/// The grade table as the page reads it: `[["A+", 5], ["A", 30], ...]`
/// (grade, bound in ms; a grade applies strictly below its bound) and the
/// grade at or above the last bound.
fn grade_table() -> serde_json::Value {
    let rows: Vec<serde_json::Value> = BLOAT_GRADES
        .iter()
        .map(|(g, below)| serde_json::json!([g.as_str(), below.as_secs_f64() * 1e3]))
        .collect();
    // The grade at or above the last bound, asked of the rule itself.
    let last = BLOAT_GRADES.last().map_or(Duration::ZERO, |(_, b)| *b);
    serde_json::json!({ "below_ms": rows, "otherwise": bloat_grade(last).as_str() })
}

/// The page's parameters: phases, lengths, probe interval, upload size and
/// the statistics' definitions (grade table, RPM trim), all from Rust.
/// `max_bytes` is the server's `--max-bytes`.
pub fn params_json(max_bytes: u64) -> String {
    let ms = |d: Duration| d.as_millis() as u64;
    let phases: Vec<serde_json::Value> = PHASES
        .iter()
        .map(|p| {
            serde_json::json!({
                "name": p.name,
                "kind": if p.loaded() { "loaded" } else { "idle" },
                "down_streams": p.down_streams,
                "up_streams": p.up_streams,
            })
        })
        .collect();
    let grades = [
        Grade::APlus,
        Grade::A,
        Grade::B,
        Grade::C,
        Grade::D,
        Grade::F,
    ]
    .map(Grade::as_str);
    let v = serde_json::json!({
        "version": 1,
        "phases": phases,
        "idle_ms": ms(IDLE),
        "settle_ms": ms(SETTLE),
        "duration_s": {
            "default": DEFAULT_DURATION.as_secs(),
            "min": MIN_DURATION.as_secs(),
            "max": MAX_DURATION.as_secs(),
        },
        "probe_interval_ms": ms(PROBE_INTERVAL),
        "upload_bytes": UPLOAD_CHUNK.min(max_bytes),
        "urls": {
            "large": crate::routes::LARGE,
            "small": crate::routes::SMALL,
            "upload": crate::routes::UPLOAD,
            "start": crate::record::http::START,
            "result": crate::record::http::RESULT,
        },
        "grade": grade_table(),
        "grade_rule": "the worst loaded phase: the largest, over the loaded phases, of each \
            phase's median probe round trip minus the idle phase's median (zero if it fell), \
            graded on the table; never a mean over phases",
        "quantile": "linear interpolation between closest ranks (Hyndman and Fan type 7)",
        "rpm_trim_fraction": TRIM_FRACTION,
        "grades": grades,
    });
    let mut s = v.to_string();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grade_table_is_bloatlab_tests() {
        let v: serde_json::Value = serde_json::from_str(&params_json(1 << 40)).unwrap();
        let rows = v["grade"]["below_ms"].as_array().unwrap();
        assert_eq!(rows.len(), BLOAT_GRADES.len());
        for (row, (g, below)) in rows.iter().zip(BLOAT_GRADES) {
            assert_eq!(row[0], g.as_str());
            assert_eq!(row[1].as_f64().unwrap(), below.as_secs_f64() * 1e3);
        }
        assert_eq!(v["grade"]["otherwise"], "F");
        // Spot checks against the known table, so a change is seen here too.
        assert_eq!(rows[0], serde_json::json!(["A+", 5.0]));
        assert_eq!(rows[4], serde_json::json!(["D", 400.0]));
        assert_eq!(v["rpm_trim_fraction"], 0.05);
    }

    #[test]
    fn params_name_the_phases_and_bound_the_upload() {
        let v: serde_json::Value = serde_json::from_str(&params_json(1000)).unwrap();
        let names: Vec<&str> = v["phases"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["idle", "download", "upload", "bidirectional"]);
        assert_eq!(v["phases"][0]["kind"], "idle");
        assert_eq!(v["phases"][3]["kind"], "loaded");
        assert_eq!(v["upload_bytes"], 1000);
        assert_eq!(v["duration_s"]["default"], 10);
        assert_eq!(v["probe_interval_ms"], 100);
        let v: serde_json::Value = serde_json::from_str(&params_json(1 << 40)).unwrap();
        assert_eq!(v["upload_bytes"], UPLOAD_CHUNK);
        for p in PHASES {
            assert!(p.down_streams + p.up_streams <= 6, "{p:?}");
        }
    }

    #[test]
    fn assets_are_found_by_path_and_nothing_else_is() {
        assert_eq!(Asset::at("/"), Some(&PAGE));
        assert_eq!(Asset::at("/index.html"), Some(&PAGE));
        for a in &ASSETS {
            assert_eq!(Asset::at(a.path).map(|x| x.path), Some(a.path));
            assert!(a.path.starts_with(ASSET_DIR));
        }
        for none in [
            "/browser/",
            "/browser/app.js/",
            "/browser/../Cargo.toml",
            "/app.js",
        ] {
            assert_eq!(Asset::at(none), None, "{none}");
        }
    }

    #[test]
    fn the_page_loads_only_its_own_assets() {
        let page = PAGE.body;
        for a in &ASSETS {
            assert!(page.contains(a.path), "the page does not load {}", a.path);
        }
        for a in std::iter::once(&PAGE).chain(&ASSETS) {
            // Nothing from elsewhere, and nothing inline the CSP would block.
            assert!(!a.body.contains("http://"), "{}", a.path);
            assert!(!a.body.contains("https://"), "{}", a.path);
            assert!(!a.body.contains("style=\""), "{}", a.path);
            assert!(!a.body.contains(" onclick="), "{}", a.path);
        }
        assert!(!page.contains("<script>"), "inline script");
        assert!(!page.contains("<style"), "inline style");
    }
}
