//! A loaded run: the results file plus everything recomputed from its raw samples.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bloatlab_results::{Derived, ResultsFile};
use bloatlab_stats::{FlowSeries, LatencySeries, Timeline};

use crate::ReportError;

/// One run, ready to be tabulated and drawn.
#[derive(Debug, Clone)]
pub struct Run {
    /// A short, unique (within one report) name: the file stem, disambiguated.
    pub label: String,
    /// The file it came from, if any.
    pub source: Option<PathBuf>,
    /// The file as loaded (migrated to the current schema).
    pub file: ResultsFile,
    /// The validated phases.
    pub timeline: Timeline,
    /// Latency probe series.
    pub latency: Vec<LatencySeries>,
    /// Load flows.
    pub flows: Vec<FlowSeries>,
    /// Every figure, recomputed from `raw` (the file's own `derived` is ignored).
    pub derived: Derived,
}

impl Run {
    /// Builds a run from a loaded file.
    pub fn new(label: impl Into<String>, file: ResultsFile) -> Result<Run, ReportError> {
        let label = label.into();
        let raw_err = |source| ReportError::Raw {
            label: label.clone(),
            source,
        };
        let timeline = file.raw.timeline().map_err(raw_err)?;
        let derived = Derived::compute(&file.raw).map_err(raw_err)?;
        Ok(Run {
            latency: file.raw.latency_series(),
            flows: file.raw.flows(),
            label,
            source: None,
            file,
            timeline,
            derived,
        })
    }

    /// The end of the run: the last phase end, or the last sample if one lies later.
    pub fn end(&self) -> Duration {
        let phases = self.timeline.phases().iter().map(|p| p.end);
        let probes = self
            .latency
            .iter()
            .flat_map(|s| s.samples.iter().map(|p| p.sent));
        let flows = self
            .flows
            .iter()
            .flat_map(|f| f.samples.iter().map(|s| s.end));
        phases.chain(probes).chain(flows).max().unwrap_or_default()
    }
}

/// The label for a file: its stem without `.json`.
fn stem(path: &Path) -> String {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    name.strip_suffix(".json").unwrap_or(&name).to_owned()
}

/// Makes labels unique by appending ` (2)`, ` (3)`, … to repeats.
pub fn unique_labels(labels: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    labels
        .into_iter()
        .map(|l| {
            let mut candidate = l.clone();
            let mut n = 2;
            while !seen.insert(candidate.clone()) {
                candidate = format!("{l} ({n})");
                n += 1;
            }
            candidate
        })
        .collect()
}

/// Loads every file, in order. The first failure is returned, naming its file.
pub fn load_runs(paths: &[PathBuf]) -> Result<Vec<Run>, ReportError> {
    let labels = unique_labels(paths.iter().map(|p| stem(p)).collect());
    paths
        .iter()
        .zip(labels)
        .map(|(path, label)| {
            let file = bloatlab_results::load(path).map_err(|source| ReportError::Load {
                path: path.clone(),
                source,
            })?;
            let mut run = Run::new(label, file).map_err(|e| match e {
                // Name the file rather than the label.
                ReportError::Raw { source, .. } => ReportError::Load {
                    path: path.clone(),
                    source: bloatlab_results::LoadError::Raw(source),
                },
                other => other,
            })?;
            run.source = Some(path.clone());
            Ok(run)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_stems_made_unique() {
        assert_eq!(stem(Path::new("/a/fifo.json")), "fifo");
        assert_eq!(stem(Path::new("run.v2")), "run.v2");
        assert_eq!(
            unique_labels(vec!["a".into(), "b".into(), "a".into(), "a".into()]),
            ["a", "b", "a (2)", "a (3)"]
        );
    }
}
