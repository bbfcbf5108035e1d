//! `bloatlab server --results-dir DIR` and the `--browser-*` caps: the
//! operator's record of browser tests (docs/browser.md), resolved into the
//! HTTP service's [`RecordConfig`].

use super::opts;
use bloatlab_engine::config::Bytes;
use bloatlab_http::{RecordConfig, TestCaps};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The browser test flags of `bloatlab server`.
#[derive(Debug, Clone, clap::Args)]
pub struct BrowserArgs {
    /// --http / --https: keep every completed browser test as the bloatlab
    /// results file DIR/ID.json (`bloatlab report` reads it) and show it to
    /// the user at /result/ID. The directory must exist and be writable.
    #[arg(long = "results-dir", value_name = "DIR")]
    pub results_dir: Option<PathBuf>,
    /// Browser tests one source (IPv4 address or IPv6 /64) may start in any hour.
    #[arg(long = "browser-tests-per-hour", value_name = "N", default_value_t = TestCaps::default().per_source_per_hour,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub browser_tests_per_hour: u32,
    /// Browser tests running at once, all sources together.
    #[arg(long = "browser-max-tests", value_name = "N", default_value_t = TestCaps::default().concurrent,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub browser_max_tests: u32,
    /// Longest browser test in seconds, from its start to its result; a page
    /// asking for a longer ?duration= is refused, a later result too.
    #[arg(long = "browser-max-duration", value_name = "S", default_value = "300",
          value_parser = opts::positive_seconds)]
    pub browser_max_duration: Duration,
    /// Largest result a browser test may post (K/M = 1024-based).
    #[arg(long = "browser-max-result", value_name = "BYTES", default_value = "1M",
          value_parser = opts::nonzero_bytes)]
    pub browser_max_result: Bytes,
}

impl BrowserArgs {
    /// The record's configuration; the results directory is checked now, so
    /// a wrong one is an error at start, not a lost result later.
    pub fn to_config(&self) -> anyhow::Result<RecordConfig> {
        if let Some(dir) = &self.results_dir {
            check_dir(dir)?;
        }
        Ok(RecordConfig {
            results_dir: self.results_dir.clone(),
            caps: TestCaps {
                per_source_per_hour: self.browser_tests_per_hour,
                concurrent: self.browser_max_tests,
                max_duration: self.browser_max_duration,
                max_result_bytes: self.browser_max_result.0,
            },
        })
    }
}

/// The directory exists and a file can be made in it (and is removed).
fn check_dir(dir: &Path) -> anyhow::Result<()> {
    let usage = |why: String| crate::exit::usage(format!("--results-dir {}: {why}", dir.display()));
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(usage("not a directory".into())),
        Err(e) => return Err(usage(e.to_string())),
    }
    let probe = dir.join(format!(".bloatlab-write-test-{}", std::process::id()));
    std::fs::write(&probe, b"").map_err(|e| usage(format!("cannot write there: {e}")))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, clap::Parser)]
    struct T {
        #[command(flatten)]
        b: BrowserArgs,
    }

    #[test]
    fn browser_caps_default_and_parse() {
        let a = T::try_parse_from(["t"]).unwrap().b;
        let c = a.to_config().unwrap();
        assert_eq!(c.caps, TestCaps::default());
        assert_eq!(c.caps.max_result_bytes, 1 << 20);
        assert_eq!(c.results_dir, None);
        let a = T::try_parse_from([
            "t",
            "--browser-tests-per-hour",
            "3",
            "--browser-max-tests",
            "2",
            "--browser-max-duration",
            "60",
            "--browser-max-result",
            "64K",
        ])
        .unwrap()
        .b;
        let c = a.to_config().unwrap().caps;
        assert_eq!(
            (
                c.per_source_per_hour,
                c.concurrent,
                c.max_duration,
                c.max_result_bytes
            ),
            (3, 2, Duration::from_secs(60), 65536)
        );
        for bad in [
            &["t", "--browser-max-tests", "0"][..],
            &["t", "--browser-tests-per-hour", "0"],
            &["t", "--browser-max-duration", "0"],
            &["t", "--browser-max-result", "0"],
        ] {
            assert!(T::try_parse_from(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_results_dir_must_be_a_writable_directory() {
        let d = tempfile::tempdir().unwrap();
        let a = T::try_parse_from(["t", "--results-dir", d.path().to_str().unwrap()])
            .unwrap()
            .b;
        a.to_config().unwrap();
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        let missing = d.path().join("missing");
        let a = T::try_parse_from(["t", "--results-dir", missing.to_str().unwrap()])
            .unwrap()
            .b;
        let e = a.to_config().unwrap_err().to_string();
        assert!(e.contains("--results-dir") && e.contains("missing"), "{e}");
    }
}
