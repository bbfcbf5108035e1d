//! `bloatlab server --results-dir DIR` and the `--browser-*` caps: the
//! operator's record of browser tests (docs/browser.md), resolved by
//! `bloatlab_invoke::server` into the HTTP service's [`RecordConfig`]; the
//! directory is checked here.

use bloatlab_http::RecordConfig;
use std::path::Path;

/// The record's configuration; the results directory is checked now, so
/// a wrong one is an error at start, not a lost result later.
pub fn record_config(r: &RecordConfig) -> anyhow::Result<RecordConfig> {
    if let Some(dir) = &r.results_dir {
        check_dir(dir)?;
    }
    Ok(r.clone())
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
    use bloatlab_http::TestCaps;
    use bloatlab_invoke::server::BrowserArgs;
    use clap::Parser;
    use std::time::Duration;

    #[derive(Debug, clap::Parser)]
    struct T {
        #[command(flatten)]
        b: BrowserArgs,
    }

    #[test]
    fn browser_caps_default_and_parse() {
        let a = T::try_parse_from(["t"]).unwrap().b;
        let c = record_config(&a.record()).unwrap();
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
        let c = record_config(&a.record()).unwrap().caps;
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
        record_config(&a.record()).unwrap();
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
        let missing = d.path().join("missing");
        let a = T::try_parse_from(["t", "--results-dir", missing.to_str().unwrap()])
            .unwrap()
            .b;
        let e = record_config(&a.record()).unwrap_err().to_string();
        assert!(e.contains("--results-dir") && e.contains("missing"), "{e}");
    }
}
