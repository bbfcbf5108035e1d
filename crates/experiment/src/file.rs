//! The experiment file (TOML), parsed into an [`Experiment`] with the line of every key kept,
//! so each later check can name the key and the line.
//!
//! ```toml
//! [experiment]
//! name = "shaper-sweep"          # default: the file's stem
//! description = "report 4"
//! repetitions = 2                # default 1
//! order = "sequential"           # sequential | interleaved | shuffled
//! seed = 1                       # for `shuffled`
//!
//! [lab]                          # any `bloatlab lab up` option, by its long name
//! delay = "15ms"
//! stage = ["name=router rate={rate} qdisc=fq_codel", "name=modem rate=10mbit qdisc=fifo limit=1000p"]
//!
//! [test]                         # `bloatlab test NAME` and any of its options
//! name = "rrul"
//! length = 10
//!
//! [matrix]                       # lists or ranges
//! rate = ["6mbit", "8mbit"]      # a placeholder: used as {rate} in values above
//! "test.cc" = ["cubic", "bbr"]   # an option: sets `bloatlab test --cc`
//! "lab.limit" = { from = 100, to = 300, step = 100, suffix = "p" }
//! ```
//!
//! Instead of `[test]`, a file may declare `[client]`: `bloatlab client` options by long name,
//! run from host `client` against the lab's server (`client.OPTION` sweeps one). `[server]`
//! holds `bloatlab server` options for the lab's server in either case (`server.OPTION`).

use std::collections::BTreeMap;
use toml_edit::{Document, Item, Table, Value};

/// A problem in the file: which key, on which line, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {key}: {why}")]
pub struct FileError {
    /// The file as given (or `<built-in NAME>`).
    pub file: String,
    /// 1-based line (0 when the problem has no line, e.g. an empty file).
    pub line: usize,
    /// The key as written (`matrix.rate`, `lab.stage`).
    pub key: String,
    /// What is wrong.
    pub why: String,
}

/// The order in which points and repetitions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// Every repetition of a point, then the next point.
    Sequential,
    /// Every point once, then every point again (drift over time spreads evenly).
    Interleaved,
    /// All runs in a seeded random order.
    Shuffled,
}

/// A scalar value of an option or parameter, as written in the file.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(untagged)]
pub enum Scalar {
    /// A string, passed as is.
    Str(String),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A flag: `true` passes `--key`, `false` leaves it out.
    Bool(bool),
}

impl std::fmt::Display for Scalar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Scalar::Str(s) => f.write_str(s),
            Scalar::Int(i) => write!(f, "{i}"),
            Scalar::Float(x) => write!(f, "{x}"),
            Scalar::Bool(b) => write!(f, "{b}"),
        }
    }
}

/// One option of `lab up` or `test`: a scalar or, for repeatable options, a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Opt {
    /// The option's long name (`delay`, `stage`).
    pub key: String,
    /// Its values (one unless the option was given a list).
    pub values: Vec<Scalar>,
    /// Line of the key.
    pub line: usize,
}

/// Where a matrix parameter goes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// `{NAME}` in any value of `[lab]` or `[test]`.
    Placeholder,
    /// The `lab up` option of that name.
    Lab(String),
    /// The `test` option of that name.
    Test(String),
    /// The `bloatlab client` option of that name (experiments with `[client]`).
    Client(String),
    /// The `bloatlab server` option of that name.
    Server(String),
}

/// One swept parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// As written in `[matrix]` (`rate`, `test.cc`).
    pub name: String,
    /// Where its value goes.
    pub target: Target,
    /// Its values, in order.
    pub values: Vec<Scalar>,
    /// Zipped parameters (a list of inline tables, `[{down = "6mbit", up = "700kbit"}, ..]`):
    /// per value, its fields, used as `{NAME.FIELD}`; the value itself is the table's `label`
    /// or its fields joined with `/`. Empty for plain parameters.
    pub fields: Vec<Vec<(String, Scalar)>>,
    /// Line of the key.
    pub line: usize,
}

/// A parsed experiment file.
#[derive(Debug, Clone, PartialEq)]
pub struct Experiment {
    /// The file name (for messages).
    pub file: String,
    /// The experiment's name.
    pub name: String,
    /// Free text.
    pub description: String,
    /// Runs per point.
    pub repetitions: u32,
    /// Run order.
    pub order: Order,
    /// Seed of the shuffled order.
    pub seed: u64,
    /// `lab up` options.
    pub lab: Vec<Opt>,
    /// The test to run (`bloatlab test NAME`) and the line of `test.name`.
    pub test: (String, usize),
    /// `test` options.
    pub test_opts: Vec<Opt>,
    /// `[client]`: the experiment runs `bloatlab client` with these options (and `test` is
    /// empty), with the line of `[client]`; `None` for a `[test]` experiment.
    pub client: Option<(Vec<Opt>, usize)>,
    /// `[server]`: options of the lab's `bloatlab server`.
    pub server: Vec<Opt>,
    /// `[during] args`: a `bloatlab` command run beside each test (a sidecar, such as
    /// `autorate`), with the line of `args`; `None` without `[during]`. A point whose
    /// substituted text is empty runs none; each point's is typed by [`crate::during`].
    pub during: Option<(String, usize)>,
    /// The swept parameters, in file order.
    pub matrix: Vec<Param>,
    /// `[expect]`: free key/value pairs the built-ins use for their criteria.
    pub expect: BTreeMap<String, (Scalar, usize)>,
    /// `[expect] max_probe_loss_where = { "PARAM=VALUE" = BOUND }`: the probe-loss bound of
    /// the points where a matrix parameter has a value, where the file states one of its own
    /// (its comment says why; [`crate::completeness::LossBound`]).
    pub probe_loss_where: Vec<crate::completeness::PointLossBound>,
    /// `[quick]`: what `--quick` runs instead (`None`: the generic shortening).
    pub quick: Option<Quick>,
    /// This is the `--quick` variant ([`Experiment::quick`]): recorded in `DIR/plan.json`, so
    /// a quick run never resumes a full run's directory, nor the reverse.
    pub quick_variant: bool,
    /// The file's text, as parsed (recorded in `DIR/plan.json` so a merge can judge).
    pub source: String,
    /// SHA-256 of the file's text, lowercase hex: `experiment merge` refuses shards of
    /// different files, whatever their names.
    pub digest: String,
}

/// The `[quick]` section: the experiment's own short variant, chosen so that it still shows
/// the effect it is about (where physics allows in seconds).
///
/// ```toml
/// [quick]
/// repetitions = 1                # default 1
/// length = 10                    # any `test` option: replaces the same key of [test]
/// idle = 1                       # (`idle` also replaces idle-before / idle-after)
/// matrix.load = ["one_vs_one"]   # a subset of a [matrix] parameter's values
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Quick {
    /// Line of the `[quick]` header.
    pub line: usize,
    /// Runs per point (default 1).
    pub repetitions: u32,
    /// Line of `repetitions` (0 when the section leaves it out).
    pub repetitions_line: usize,
    /// `test` options replacing those of `[test]` with the same key.
    pub test_opts: Vec<Opt>,
    /// Matrix subsets: the parameter as named in `[matrix]`, the values kept (each one of the
    /// parameter's values; zipped parameters by their label), and the line.
    pub matrix: Vec<(String, Vec<Scalar>, usize)>,
}

impl Experiment {
    /// The `--quick` variant. With a `[quick]` section: its repetitions, its `test` options in
    /// place of `[test]`'s, and only its subsets of the matrix. Without one: 2 s loaded, 0.5 s
    /// idle, 3 pulses, one repetition (a smoke test of the whole pipeline; too short for
    /// steady-state numbers).
    pub fn quick(mut self) -> Experiment {
        self.quick_variant = true;
        if let Some(q) = self.quick.take() {
            self.repetitions = q.repetitions;
            for o in q.test_opts {
                // `--idle-before` / `--idle-after` override `--idle`: a quick `idle` must too.
                let shadowed: &[&str] = if o.key == "idle" {
                    &["idle", "idle-before", "idle-after"]
                } else {
                    &[]
                };
                self.test_opts
                    .retain(|t| t.key != o.key && !shadowed.contains(&t.key.as_str()));
                self.test_opts.push(o);
            }
            for (name, keep, _) in q.matrix {
                let Some(p) = self.matrix.iter_mut().find(|p| p.name == name) else {
                    continue;
                };
                let kept: Vec<usize> = (0..p.values.len())
                    .filter(|&i| keep.iter().any(|k| same(k, &p.values[i])))
                    .collect();
                p.fields = kept
                    .iter()
                    .filter_map(|&i| p.fields.get(i).cloned())
                    .collect();
                p.values = kept.iter().map(|&i| p.values[i].clone()).collect();
            }
            return self.quick_client();
        }
        self.repetitions = 1;
        self.test_opts.retain(|o| {
            !["length", "idle", "idle-before", "idle-after", "pulses"].contains(&o.key.as_str())
        });
        for (k, v) in [
            ("length", Scalar::Int(2)),
            ("idle", Scalar::Float(0.5)),
            ("pulses", Scalar::Int(3)),
        ] {
            self.test_opts.push(Opt {
                key: k.into(),
                values: vec![v],
                line: 0,
            });
        }
        self.quick_client()
    }

    /// `--quick` for `[client]` runs: 2 s (`time`; a byte count `num` goes too).
    fn quick_client(mut self) -> Experiment {
        if let Some((opts, _)) = self.client.as_mut() {
            // A client experiment has no test options (quick() sets some for tests).
            self.test_opts.clear();
            opts.retain(|o| !["time", "num"].contains(&o.key.as_str()));
            opts.push(Opt {
                key: "time".into(),
                values: vec![Scalar::Int(2)],
                line: 0,
            });
            self.matrix
                .retain(|p| !matches!(&p.target, Target::Client(k) if k == "time" || k == "num"));
        }
        self
    }
}

/// Most runs an experiment may declare (points x repetitions): a typo such as a range with a
/// tiny step should not plan a year of runs.
pub const MAX_RUNS: usize = 100_000;

/// Most memory the expansion of an experiment may take, in bytes, as counted by
/// [`expansion_bytes`]: every run holds a copy of its point's values, so a short file with a
/// long range and a long suffix would otherwise plan gigabytes (issue 19: a 20 KB file with a
/// 100,000-value range and a 20,000-character suffix allocated 4 GB and aborted). Checked
/// before anything is expanded. A 1,000-run experiment with a few parameters takes well under
/// a megabyte.
pub const MAX_EXPANSION_BYTES: u64 = 64 << 20;

/// What one held value costs beyond its text: the `String` or `Scalar`, the `(name, value)`
/// pair and the `Vec` slot (an estimate on the generous side).
const VALUE_OVERHEAD: u64 = 64;

/// Bytes one value of a parameter takes in a run: its name and its text (with the fields of a
/// zipped value), plus [`VALUE_OVERHEAD`] for each.
fn value_cost(name: &str, value: &Scalar, fields: Option<&Vec<(String, Scalar)>>) -> u64 {
    let text = |v: &Scalar| match v {
        Scalar::Str(s) => s.len() as u64,
        _ => 24,
    };
    let mut n = name.len() as u64 + text(value) + VALUE_OVERHEAD;
    for (k, v) in fields.into_iter().flatten() {
        n = n.saturating_add(name.len() as u64 + 1 + k.len() as u64 + text(v) + VALUE_OVERHEAD);
    }
    n
}

/// Why an experiment's expansion is over its budget ([`MAX_RUNS`], [`MAX_EXPANSION_BYTES`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BudgetError {
    /// More runs than [`MAX_RUNS`].
    #[error("{runs} runs (at most {MAX_RUNS})")]
    Runs {
        /// Points x repetitions (saturating).
        runs: u64,
    },
    /// The runs would hold more than [`MAX_EXPANSION_BYTES`] of values.
    #[error(
        "the matrix expands to {runs} runs holding {bytes} bytes of values, more than the \
         expansion budget of {MAX_EXPANSION_BYTES} bytes (64 MiB); use fewer or shorter \
         values, or fewer repetitions"
    )]
    Bytes {
        /// Points x repetitions.
        runs: u64,
        /// [`expansion_bytes`].
        bytes: u64,
    },
}

/// Checks `exp`'s expansion against the budget without expanding anything: every variant
/// (the file as parsed, its `--quick` variant, a shard of either) is checked before its runs
/// are made, so no later step can plan what the file's check did not see (issue 19: a
/// 100,000-point file whose `[quick] repetitions = 1000` planned 10^8 runs).
pub fn check_budget(exp: &Experiment) -> Result<(), BudgetError> {
    let runs =
        (crate::matrix::point_count(exp) as u64).saturating_mul(u64::from(exp.repetitions.max(1)));
    if runs > MAX_RUNS as u64 {
        return Err(BudgetError::Runs { runs });
    }
    let bytes = expansion_bytes(exp);
    if bytes > MAX_EXPANSION_BYTES {
        return Err(BudgetError::Bytes { runs, bytes });
    }
    Ok(())
}

/// The memory the expanded runs of `exp` take (every run holds its point's values): for each
/// parameter, the sum of its values' costs times the number of points each value appears in,
/// times the repetitions. Saturates instead of overflowing. Computed without expanding.
pub fn expansion_bytes(exp: &Experiment) -> u64 {
    let points = crate::matrix::point_count(exp) as u64;
    let per_rep = exp.matrix.iter().fold(0u64, |acc, p| {
        let n = p.values.len().max(1) as u64;
        let sum = p.values.iter().enumerate().fold(0u64, |a, (i, v)| {
            a.saturating_add(value_cost(&p.name, v, p.fields.get(i)))
        });
        // Each value appears in points / n points.
        acc.saturating_add(sum.saturating_mul(points / n))
    });
    per_rep.saturating_mul(u64::from(exp.repetitions.max(1)))
}

struct Lines<'a> {
    file: &'a str,
    starts: Vec<usize>,
}

impl Lines<'_> {
    fn line(&self, span: Option<std::ops::Range<usize>>) -> usize {
        let Some(s) = span else { return 0 };
        match self.starts.binary_search(&s.start) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    fn err(&self, line: usize, key: impl Into<String>, why: impl Into<String>) -> FileError {
        FileError {
            file: self.file.to_string(),
            line,
            key: key.into(),
            why: why.into(),
        }
    }
}

fn key_line(lines: &Lines<'_>, t: &Table, key: &str) -> usize {
    lines.line(t.key(key).and_then(|k| k.span()))
}

fn scalar(v: &Value) -> Option<Scalar> {
    match v {
        Value::String(s) => Some(Scalar::Str(s.value().clone())),
        Value::Integer(i) => Some(Scalar::Int(*i.value())),
        Value::Float(f) => Some(Scalar::Float(*f.value())),
        Value::Boolean(b) => Some(Scalar::Bool(*b.value())),
        _ => None,
    }
}

/// `[expect] max_probe_loss_where = { "PARAM=VALUE" = BOUND, .. }`: each key names a
/// `[matrix]` parameter and one of its values (a zipped value by its label), each bound is a
/// fraction in 0..=1.
fn loss_where(
    lines: &Lines<'_>,
    v: &Value,
    line: usize,
    matrix: &[Param],
) -> Result<Vec<crate::completeness::PointLossBound>, FileError> {
    let key = "expect.max_probe_loss_where";
    let Value::InlineTable(t) = v else {
        return Err(lines.err(
            line,
            key,
            "expected an inline table { \"PARAM=VALUE\" = BOUND }",
        ));
    };
    let mut out = Vec::new();
    for (k, b) in t.iter() {
        let line = lines.line(t.key(k).and_then(|k| k.span()));
        let Some((param, value)) = k.split_once('=') else {
            return Err(lines.err(line, key, format!("{k:?}: expected \"PARAM=VALUE\"")));
        };
        let Some(p) = matrix.iter().find(|p| p.name == param) else {
            return Err(lines.err(line, key, format!("{param:?} is not a [matrix] parameter")));
        };
        if !p.values.iter().any(|x| x.to_string() == value) {
            return Err(lines.err(line, key, format!("{param} has no value {value:?}")));
        }
        let bound = match scalar(b) {
            Some(Scalar::Float(x)) => x,
            Some(Scalar::Int(i)) => i as f64,
            _ => f64::NAN,
        };
        if !(0.0..=1.0).contains(&bound) {
            return Err(lines.err(line, key, format!("{k:?}: expected a fraction 0..1")));
        }
        out.push(crate::completeness::PointLossBound {
            param: param.to_string(),
            value: value.to_string(),
            bound,
        });
    }
    Ok(out)
}

/// A section as a table (`[lab]`) or inline table (`lab = {..}`): its keys, values and lines.
fn entries<'a>(
    lines: &Lines<'_>,
    item: &'a Item,
    section: &str,
) -> Result<Vec<(String, &'a Value, usize)>, FileError> {
    match item {
        Item::Table(t) => t
            .iter()
            .map(|(k, v)| match v.as_value() {
                Some(v) => Ok((k.to_string(), v, key_line(lines, t, k))),
                None => Err(lines.err(
                    key_line(lines, t, k),
                    format!("{section}.{k}"),
                    "expected a value, not a table",
                )),
            })
            .collect(),
        Item::Value(Value::InlineTable(t)) => Ok(t
            .iter()
            .map(|(k, v)| {
                let line = lines.line(t.key(k).and_then(|k| k.span()));
                (k.to_string(), v, line)
            })
            .collect()),
        _ => Err(lines.err(
            lines.line(item.span()),
            section,
            "expected a table ([section])",
        )),
    }
}

/// One option's value: a scalar, or a list of scalars for a repeated option.
fn option(
    lines: &Lines<'_>,
    section: &str,
    key: String,
    v: &Value,
    line: usize,
) -> Result<Opt, FileError> {
    let values = match v {
        Value::Array(a) => a
            .iter()
            .map(|x| {
                scalar(x).ok_or_else(|| {
                    lines.err(
                        line,
                        format!("{section}.{key}"),
                        "list items must be scalars",
                    )
                })
            })
            .collect::<Result<Vec<_>, _>>()?,
        v => vec![scalar(v).ok_or_else(|| {
            lines.err(
                line,
                format!("{section}.{key}"),
                "expected a string, number, boolean or list",
            )
        })?],
    };
    Ok(Opt { key, values, line })
}

fn options(lines: &Lines<'_>, item: &Item, section: &str) -> Result<Vec<Opt>, FileError> {
    entries(lines, item, section)?
        .into_iter()
        .map(|(k, v, line)| option(lines, section, k, v, line))
        .collect()
}

/// Two values are the same matrix value when they read the same (`false` and `"false"`).
fn same(a: &Scalar, b: &Scalar) -> bool {
    a.to_string() == b.to_string()
}

/// The `[quick]` section, checked against the already parsed `[matrix]`: its `matrix.NAME`
/// subsets must name a parameter and only values it has. Its `test` options are checked with
/// every point's, as `[test]`'s are (by the caller, who knows the test's options).
fn quick(lines: &Lines<'_>, root: &Table, matrix: &[Param]) -> Result<Option<Quick>, FileError> {
    let Some(item) = root.get("quick") else {
        return Ok(None);
    };
    let mut q = Quick {
        line: key_line(lines, root, "quick"),
        repetitions: 1,
        repetitions_line: 0,
        test_opts: Vec::new(),
        matrix: Vec::new(),
    };
    let items: Vec<(String, &Item, usize)> = match item {
        Item::Table(t) => t
            .iter()
            .map(|(k, v)| (k.to_string(), v, key_line(lines, t, k)))
            .collect(),
        _ => return Err(lines.err(q.line, "quick", "expected a table ([quick])")),
    };
    for (k, v, line) in items {
        let key = format!("quick.{k}");
        match (k.as_str(), v) {
            ("matrix", Item::Table(_) | Item::Value(Value::InlineTable(_))) => {
                for (name, v, line) in entries(lines, v, "quick.matrix")? {
                    let key = format!("quick.matrix.{name}");
                    let Some(p) = matrix.iter().find(|p| p.name == name) else {
                        let known: Vec<&str> = matrix.iter().map(|p| p.name.as_str()).collect();
                        return Err(lines.err(
                            line,
                            key,
                            format!(
                                "not a [matrix] parameter (it has: {})",
                                if known.is_empty() {
                                    "none".into()
                                } else {
                                    known.join(", ")
                                }
                            ),
                        ));
                    };
                    let Value::Array(a) = v else {
                        return Err(lines.err(line, key, "expected a list of the values to keep"));
                    };
                    let mut keep = Vec::new();
                    for x in a.iter() {
                        let x = scalar(x)
                            .ok_or_else(|| lines.err(line, &key, "list items must be scalars"))?;
                        if !p.values.iter().any(|v| same(v, &x)) {
                            let have: Vec<String> = p
                                .values
                                .iter()
                                .map(|v| format!("{:?}", v.to_string()))
                                .collect();
                            return Err(lines.err(
                                line,
                                key,
                                format!(
                                    "{:?} is not one of matrix.{name}'s values ({})",
                                    x.to_string(),
                                    have.join(", ")
                                ),
                            ));
                        }
                        keep.push(x);
                    }
                    if keep.is_empty() {
                        return Err(lines.err(line, key, "empty list: nothing to run"));
                    }
                    q.matrix.push((name, keep, line));
                }
            }
            ("matrix", _) => {
                return Err(lines.err(
                    line,
                    key,
                    "expected a table of subsets (matrix.NAME = [values to keep])",
                ));
            }
            ("repetitions", Item::Value(Value::Integer(i))) if (1..=1000).contains(i.value()) => {
                q.repetitions = *i.value() as u32;
                q.repetitions_line = line;
            }
            ("repetitions", _) => return Err(lines.err(line, key, "must be 1 to 1000")),
            ("name", _) => {
                return Err(lines.err(
                    line,
                    key,
                    "the quick variant runs [test]'s test; narrow the matrix instead",
                ));
            }
            (_, Item::Value(v)) => q.test_opts.push(option(lines, "quick", k, v, line)?),
            _ => {
                return Err(lines.err(
                    line,
                    key,
                    "expected a `test` option's value (or matrix.NAME = [..])",
                ));
            }
        }
    }
    Ok(Some(q))
}

/// A range `{ from, to, step [, suffix] }`: `from`, `from + step`, ... up to `to` inclusive.
fn range(
    lines: &Lines<'_>,
    t: &toml_edit::InlineTable,
    key: &str,
    line: usize,
) -> Result<Vec<Scalar>, FileError> {
    let err = |why: String| lines.err(line, format!("matrix.{key}"), why);
    for k in t.iter().map(|(k, _)| k) {
        if !["from", "to", "step", "suffix"].contains(&k) {
            return Err(err(format!(
                "unknown range key `{k}` (a range has from, to, step and optional suffix)"
            )));
        }
    }
    let num = |k: &str| -> Result<f64, FileError> {
        match t.get(k) {
            Some(Value::Integer(i)) => Ok(*i.value() as f64),
            Some(Value::Float(f)) => Ok(*f.value()),
            Some(_) => Err(err(format!("range `{k}` must be a number"))),
            None => Err(err(format!("range needs `{k}`"))),
        }
    };
    let (from, to, step) = (num("from")?, num("to")?, num("step")?);
    if step.is_nan() || step <= 0.0 || !from.is_finite() || !to.is_finite() {
        return Err(err("range `step` must be greater than zero".into()));
    }
    if to < from {
        return Err(err(format!("range `to` ({to}) is below `from` ({from})")));
    }
    let n = ((to - from) / step + 1e-9).floor() as usize + 1;
    if n > MAX_RUNS {
        return Err(err(format!("range has {n} values (at most {MAX_RUNS})")));
    }
    let suffix = match t.get("suffix") {
        None => String::new(),
        Some(Value::String(s)) => s.value().clone(),
        Some(_) => return Err(err("range `suffix` must be a string".into())),
    };
    // The values alone, before they are made (the whole expansion is checked in `parse`).
    let each = value_cost(key, &Scalar::Str(suffix.clone()), None) + 24;
    let bytes = (n as u64).saturating_mul(each);
    if bytes > MAX_EXPANSION_BYTES {
        return Err(err(format!(
            "range has {n} values of up to {each} bytes each with its {}-character suffix: \
             {bytes} bytes, more than the expansion budget of {MAX_EXPANSION_BYTES} bytes \
             (64 MiB); use fewer values or a shorter suffix",
            suffix.chars().count()
        )));
    }
    let integral = [from, step].iter().all(|x| x.fract() == 0.0);
    Ok((0..n)
        .map(|i| {
            let x = from + step * i as f64;
            let x = if integral {
                format!("{}", x as i64)
            } else {
                // Round away binary noise (0.1 + 0.2) without losing the user's precision.
                format!("{}", (x * 1e9).round() / 1e9)
            };
            if suffix.is_empty() {
                match x.parse::<i64>() {
                    Ok(i) => Scalar::Int(i),
                    Err(_) => Scalar::Float(x.parse().unwrap_or(0.0)),
                }
            } else {
                Scalar::Str(format!("{x}{suffix}"))
            }
        })
        .collect())
}

fn matrix(lines: &Lines<'_>, item: &Item) -> Result<Vec<Param>, FileError> {
    let mut out = Vec::new();
    for (k, v, line) in entries(lines, item, "matrix")? {
        let target = match k.split_once('.') {
            Some(("lab", o)) if !o.is_empty() => Target::Lab(o.to_string()),
            Some(("test", o)) if !o.is_empty() => Target::Test(o.to_string()),
            Some(("client", o)) if !o.is_empty() => Target::Client(o.to_string()),
            Some(("server", o)) if !o.is_empty() => Target::Server(o.to_string()),
            Some(_) => {
                return Err(lines.err(
                    line,
                    format!("matrix.{k}"),
                    "a parameter is `lab.OPTION`, `test.OPTION`, `client.OPTION`, `server.OPTION`, or a placeholder NAME used as {NAME}",
                ));
            }
            None => {
                if k.is_empty()
                    || !k
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    return Err(lines.err(
                        line,
                        format!("matrix.{k}"),
                        "placeholder names are letters, digits, '-' and '_'",
                    ));
                }
                Target::Placeholder
            }
        };
        let mut fields = Vec::new();
        let values = match v {
            Value::Array(a) if a.iter().next().is_some_and(|x| x.is_inline_table()) => {
                if target != Target::Placeholder {
                    return Err(lines.err(
                        line,
                        format!("matrix.{k}"),
                        "a list of tables (zipped values) must be a placeholder, used as {NAME.FIELD}",
                    ));
                }
                let mut labels = Vec::new();
                for x in a.iter() {
                    let bad = || {
                        lines.err(
                            line,
                            format!("matrix.{k}"),
                            "zipped values are inline tables of scalars with the same keys",
                        )
                    };
                    let t = x.as_inline_table().ok_or_else(bad)?;
                    let mut f = Vec::new();
                    let mut label = None;
                    for (fk, fv) in t.iter() {
                        let sv = scalar(fv).ok_or_else(bad)?;
                        if fk == "label" {
                            label = Some(sv);
                        } else {
                            f.push((fk.to_string(), sv));
                        }
                    }
                    if fields.first().is_some_and(|g: &Vec<(String, Scalar)>| {
                        g.iter().map(|(a, _)| a).ne(f.iter().map(|(a, _)| a))
                    }) {
                        return Err(bad());
                    }
                    let joined = f
                        .iter()
                        .map(|(_, v)| v.to_string())
                        .collect::<Vec<_>>()
                        .join("/");
                    labels.push(label.unwrap_or(Scalar::Str(joined)));
                    fields.push(f);
                }
                labels
            }
            Value::Array(a) => a
                .iter()
                .map(|x| match x {
                    Value::Array(_) | Value::InlineTable(_) => None,
                    x => scalar(x),
                })
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    lines.err(line, format!("matrix.{k}"), "list items must be scalars")
                })?,
            Value::InlineTable(t) => range(lines, t, &k, line)?,
            _ => {
                return Err(lines.err(
                    line,
                    format!("matrix.{k}"),
                    "expected a list [..] or a range { from, to, step }",
                ));
            }
        };
        if values.is_empty() {
            return Err(lines.err(line, format!("matrix.{k}"), "empty list: nothing to run"));
        }
        out.push(Param {
            name: k,
            target,
            values,
            fields,
            line,
        });
    }
    Ok(out)
}

const SECTIONS: &str = "experiment, lab, test, client, server, during, matrix, expect, quick";

/// Words `[during] args` may use besides the matrix's placeholders: the lab's name and the
/// run's sidecar output file (`runs/RUN.during.json`), filled in by the runner.
pub const DURING_WORDS: [&str; 2] = ["lab", "out"];

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Parses an experiment file. `file` names it in messages; `stem` is the default name.
pub fn parse(file: &str, stem: &str, text: &str) -> Result<Experiment, FileError> {
    let mut starts = vec![0];
    starts.extend(text.match_indices('\n').map(|(i, _)| i + 1));
    let lines = Lines { file, starts };
    let doc = Document::parse(text).map_err(|e| {
        let line = lines.line(e.span());
        let msg = e.message().to_string();
        lines.err(line, "(syntax)", msg)
    })?;
    let root = doc.as_table();
    for (k, _) in root.iter() {
        if !SECTIONS.split(", ").any(|s| s == k) {
            return Err(lines.err(
                key_line(&lines, root, k),
                k,
                format!("unknown section (expected {SECTIONS})"),
            ));
        }
    }
    let mut exp = Experiment {
        file: file.to_string(),
        name: stem.to_string(),
        description: String::new(),
        repetitions: 1,
        order: Order::Sequential,
        seed: 1,
        lab: Vec::new(),
        test: (String::new(), 0),
        test_opts: Vec::new(),
        client: None,
        server: Vec::new(),
        during: None,
        matrix: Vec::new(),
        expect: BTreeMap::new(),
        probe_loss_where: Vec::new(),
        quick: None,
        quick_variant: false,
        source: text.to_string(),
        digest: sha256_hex(text.as_bytes()),
    };
    if let Some(item) = root.get("experiment") {
        for (k, v, line) in entries(&lines, item, "experiment")? {
            let key = format!("experiment.{k}");
            let bad = |why: &str| lines.err(line, key.clone(), why.to_string());
            match (k.as_str(), v) {
                ("name", Value::String(s)) => {
                    let s = s.value();
                    if s.is_empty()
                        || !s
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                    {
                        return Err(bad("letters, digits, '-' and '_' only"));
                    }
                    exp.name = s.clone();
                }
                ("description", Value::String(s)) => exp.description = s.value().clone(),
                ("repetitions", Value::Integer(i)) => {
                    let n = *i.value();
                    if !(1..=1000).contains(&n) {
                        return Err(bad("must be 1 to 1000"));
                    }
                    exp.repetitions = n as u32;
                }
                ("order", Value::String(s)) => {
                    exp.order = match s.value().as_str() {
                        "sequential" => Order::Sequential,
                        "interleaved" => Order::Interleaved,
                        "shuffled" => Order::Shuffled,
                        _ => return Err(bad("expected sequential, interleaved or shuffled")),
                    }
                }
                ("seed", Value::Integer(i)) if *i.value() >= 0 => exp.seed = *i.value() as u64,
                ("name" | "description" | "order", _) => return Err(bad("expected a string")),
                ("repetitions" | "seed", _) => return Err(bad("expected a whole number >= 0")),
                _ => {
                    return Err(bad(
                        "unknown key (expected name, description, repetitions, order, seed)",
                    ));
                }
            }
        }
    }
    if let Some(item) = root.get("lab") {
        exp.lab = options(&lines, item, "lab")?;
    }
    if let Some(item) = root.get("server") {
        exp.server = options(&lines, item, "server")?;
    }
    if let Some(item) = root.get("during") {
        for (k, v, line) in entries(&lines, item, "during")? {
            match (k.as_str(), v) {
                ("args", Value::String(s)) => exp.during = Some((s.value().clone(), line)),
                _ => {
                    return Err(lines.err(
                        line,
                        format!("during.{k}"),
                        "expected `args = \"SUBCOMMAND OPTIONS...\"` (a bloatlab command run beside each test; {lab} and {out} are filled in)",
                    ));
                }
            }
        }
    }
    let test_line = key_line(&lines, root, "test");
    let client_line = key_line(&lines, root, "client");
    let item = match (root.get("test"), root.get("client")) {
        (Some(_), Some(_)) => {
            return Err(lines.err(
                test_line.max(client_line),
                if test_line > client_line { "test" } else { "client" },
                "an experiment runs either a `bloatlab test` ([test]) or `bloatlab client` ([client]), not both",
            ));
        }
        (None, Some(item)) => {
            exp.client = Some((options(&lines, item, "client")?, client_line));
            None
        }
        (Some(item), None) => Some(item),
        (None, None) => {
            return Err(lines.err(
                0,
                "test",
                "missing: every experiment runs a `bloatlab test` ([test] name = \"rrul\") or `bloatlab client` ([client])",
            ));
        }
    };
    for o in item
        .map(|i| options(&lines, i, "test"))
        .transpose()?
        .unwrap_or_default()
    {
        if o.key == "name" {
            match o.values.as_slice() {
                [Scalar::Str(s)] => exp.test = (s.clone(), o.line),
                _ => {
                    return Err(lines.err(
                        o.line,
                        "test.name",
                        "expected the test's name, a string",
                    ));
                }
            }
        } else {
            exp.test_opts.push(o);
        }
    }
    if exp.test.0.is_empty() && exp.client.is_none() {
        return Err(lines.err(
            test_line,
            "test.name",
            "missing: the test to run (`bloatlab test --list`)",
        ));
    }
    if let Some(item) = root.get("matrix") {
        exp.matrix = matrix(&lines, item)?;
    }
    if let Some(item) = root.get("expect") {
        for (k, v, line) in entries(&lines, item, "expect")? {
            if k == "max_probe_loss_where" {
                exp.probe_loss_where = loss_where(&lines, v, line, &exp.matrix)?;
                continue;
            }
            let s = scalar(v)
                .ok_or_else(|| lines.err(line, format!("expect.{k}"), "expected a scalar"))?;
            exp.expect.insert(k, (s, line));
        }
    }
    let matrix_line = key_line(&lines, root, "matrix");
    if root.get("matrix").is_some() && exp.matrix.is_empty() {
        return Err(lines.err(
            matrix_line,
            "matrix",
            "empty matrix: declare at least one parameter, or leave [matrix] out",
        ));
    }
    exp.quick = quick(&lines, root, &exp.matrix)?;
    if exp.client.is_some()
        && let Some(o) = exp.quick.as_ref().and_then(|q| q.test_opts.first())
    {
        // A [client] experiment runs no `bloatlab test`: its quick variant shortens the
        // client runs (2 s) and may narrow the matrix or the repetitions, nothing else.
        return Err(lines.err(
            o.line,
            format!("quick.{}", o.key),
            "a [client] experiment's [quick] takes only `repetitions` and `matrix.NAME` (its client runs are shortened to 2 s)",
        ));
    }
    check_placeholders(&lines, &exp)?;
    // Every run holds its point's values: bound what they take before anything expands
    // them (`--list-points` included).
    match check_budget(&exp) {
        Ok(()) => {}
        Err(e @ BudgetError::Runs { .. }) => {
            return Err(lines.err(matrix_line, "matrix", e.to_string()));
        }
        Err(e @ BudgetError::Bytes { .. }) => {
            // Name the parameter that weighs most.
            let heaviest = exp.matrix.iter().max_by_key(|p| {
                p.values.iter().enumerate().fold(0u64, |a, (i, v)| {
                    a.saturating_add(value_cost(&p.name, v, p.fields.get(i)))
                })
            });
            let (line, key) = heaviest.map_or((matrix_line, "matrix".to_owned()), |p| {
                (p.line, format!("matrix.{}", p.name))
            });
            return Err(lines.err(line, key, e.to_string()));
        }
    }
    // The quick variant has its own repetitions: a file within the budget may plan far more
    // runs under `--quick` (it narrows the matrix, so only its repetitions can grow it).
    if let Some(q) = &exp.quick
        && let Err(e) = check_budget(&exp.clone().quick())
    {
        let (line, key) = if q.repetitions_line > 0 {
            (q.repetitions_line, "quick.repetitions")
        } else {
            (q.line, "quick")
        };
        return Err(lines.err(line, key, format!("under --quick: {e}")));
    }
    Ok(exp)
}

/// Every `{NAME}` in a value is a declared placeholder, and every placeholder is used.
fn check_placeholders(lines: &Lines<'_>, exp: &Experiment) -> Result<(), FileError> {
    let declared: Vec<&Param> = exp
        .matrix
        .iter()
        .filter(|p| p.target == Target::Placeholder)
        .collect();
    let mut used = vec![false; declared.len()];
    let declares = |p: &Param, name: &str| {
        name == p.name
            || name.strip_prefix(&format!("{}.", p.name)).is_some_and(|f| {
                p.fields
                    .first()
                    .is_some_and(|g| g.iter().any(|(k, _)| k == f))
            })
    };
    let name_opt = Opt {
        key: "name".into(),
        values: vec![Scalar::Str(exp.test.0.clone())],
        line: exp.test.1,
    };
    let test_all: Vec<Opt> = exp.test_opts.iter().cloned().chain([name_opt]).collect();
    let client = exp.client.as_ref().map_or(&[][..], |(o, _)| o.as_slice());
    let quick_opts = exp.quick.as_ref().map_or(&[][..], |q| &q.test_opts[..]);
    let during: Vec<Opt> = exp
        .during
        .iter()
        .map(|(s, line)| Opt {
            key: "args".into(),
            values: vec![Scalar::Str(s.clone())],
            line: *line,
        })
        .collect();
    for (section, opts) in [
        ("lab", &exp.lab[..]),
        ("test", &test_all[..]),
        ("client", client),
        ("server", &exp.server[..]),
        ("quick", quick_opts),
        ("during", &during[..]),
    ] {
        for o in opts.iter() {
            for v in &o.values {
                let Scalar::Str(s) = v else { continue };
                for name in placeholders(s) {
                    if section == "during" && DURING_WORDS.contains(&name) {
                        continue;
                    }
                    match declared.iter().position(|p| declares(p, name)) {
                        Some(i) => used[i] = true,
                        None => {
                            return Err(lines.err(
                                o.line,
                                format!("{section}.{}", o.key),
                                format!("uses {{{name}}}, which [matrix] does not declare"),
                            ));
                        }
                    }
                }
            }
        }
    }
    if let Some(i) = used.iter().position(|u| !u) {
        let p = declared[i];
        return Err(lines.err(
            p.line,
            format!("matrix.{}", p.name),
            format!(
                "`{}` is not an option and no value uses {{{}}}: write `lab.{}` or `test.{}` for an option",
                p.name, p.name, p.name, p.name
            ),
        ));
    }
    Ok(())
}

/// The `{NAME}` placeholders in `s`, in order.
pub fn placeholders(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find('{') {
        let after = &rest[i + 1..];
        match after.find('}') {
            Some(j) => {
                out.push(&after[..j]);
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWEEP: &str = r#"
[experiment]
name = "sweep"
repetitions = 2
order = "interleaved"

[lab]
delay = "15ms"
stage = ["name=router rate={rate} qdisc=fq_codel", "name=modem rate=10mbit qdisc=fifo limit=1000p"]

[test]
name = "rrul"
length = 10

[matrix]
rate = ["6mbit", "8mbit"]
"test.cc" = ["cubic", "bbr"]
"lab.limit" = { from = 100, to = 300, step = 100, suffix = "p" }
"#;

    #[test]
    fn a_full_file_parses_with_lines() {
        let e = parse("x.toml", "x", SWEEP).unwrap();
        assert_eq!(e.name, "sweep");
        assert_eq!(e.repetitions, 2);
        assert_eq!(e.order, Order::Interleaved);
        assert_eq!(e.test, ("rrul".to_string(), 12));
        assert_eq!(e.lab[1].key, "stage");
        assert_eq!(e.lab[1].values.len(), 2);
        assert_eq!(e.lab[1].line, 9);
        assert_eq!(e.test_opts[0].values, [Scalar::Int(10)]);
        let names: Vec<_> = e.matrix.iter().map(|p| (p.name.as_str(), p.line)).collect();
        assert_eq!(names, [("rate", 16), ("test.cc", 17), ("lab.limit", 18)]);
        assert_eq!(e.matrix[1].target, Target::Test("cc".into()));
        let limits: Vec<String> = e.matrix[2].values.iter().map(|v| v.to_string()).collect();
        assert_eq!(limits, ["100p", "200p", "300p"]);
    }

    #[test]
    fn a_long_range_with_a_long_suffix_is_refused_before_it_expands() {
        // Issue 19: this 20 KB file allocated 4 GB under `--list-points` and aborted.
        let suffix = "x".repeat(20_000);
        let t = format!(
            "[test]\nname = \"rrul\"\n[matrix]\n\"lab.limit\" = {{ from = 1, to = 100000, step = 1, suffix = \"{suffix}\" }}\n"
        );
        let e = err(&t);
        assert_eq!((e.line, e.key.as_str()), (4, "matrix.lab.limit"), "{e}");
        assert!(e.why.contains("expansion budget"), "{e}");
        // The same range with a short suffix is within the budget.
        let ok = t.replace(&suffix, "p");
        assert_eq!(
            parse("ok", "ok", &ok).unwrap().matrix[0].values.len(),
            100_000
        );
    }

    #[test]
    fn a_quick_variant_over_the_budget_is_refused_naming_its_repetitions() {
        // Issue 19: 100,000 points are within the budget, but `[quick] repetitions = 1000`
        // planned 10^8 runs, and `matrix::runs` asked for gigabytes at once.
        let t = "[test]\nname = \"rrul\"\n[matrix]\n\"lab.limit\" = { from = 1, to = 100000, step = 1, suffix = \"p\" }\n[quick]\nrepetitions = 1000\n";
        let e = err(t);
        assert_eq!((e.line, e.key.as_str()), (6, "quick.repetitions"), "{e}");
        assert_eq!(e.why, "under --quick: 100000000 runs (at most 100000)");
        // A quick variant that narrows the matrix may repeat more.
        let narrowed = t.replace(
            "[quick]\n",
            "[quick]\nmatrix.\"lab.limit\" = [\"1p\", \"2p\"]\n",
        );
        let q = parse("q", "q", &narrowed).unwrap().quick();
        assert_eq!(crate::matrix::runs(&q, None).unwrap().len(), 2000);
        // An experiment built past the parser (as a merge rebuilds one) is checked again
        // before its runs are made.
        let mut e = parse("q", "q", &narrowed).unwrap();
        e.repetitions = 1000;
        assert_eq!(
            crate::matrix::runs(&e, None).unwrap_err(),
            BudgetError::Runs { runs: 100_000_000 }
        );
    }

    #[test]
    fn a_matrix_whose_runs_hold_too_much_is_refused_naming_the_heaviest_parameter() {
        // Each list is small (the file is ~ 90 KB), but 10 x 10 x 1000 runs each hold a copy
        // of a 4,000-character value: about 400 MB.
        let long: Vec<String> = (0..10)
            .map(|i| format!("\"{}{i}\"", "y".repeat(4000)))
            .collect();
        let t = format!(
            "[lab]\nrate = \"{{a}}\"\n[test]\nname = \"rrul\"\ntitle = \"{{b}}\"\n[experiment]\nrepetitions = 1000\n[matrix]\na = [{}]\nb = [1,2,3,4,5,6,7,8,9,10]\n",
            long.join(",")
        );
        let e = err(&t);
        assert_eq!((e.line, e.key.as_str()), (9, "matrix.a"), "{e}");
        assert!(e.why.contains("100000 runs"), "{e}");
        // Ten repetitions are fine.
        let ok = t.replace("repetitions = 1000", "repetitions = 10");
        let exp = parse("ok", "ok", &ok).unwrap();
        assert!(expansion_bytes(&exp) < MAX_EXPANSION_BYTES);
        assert_eq!(crate::matrix::runs(&exp, None).unwrap().len(), 1000);
    }

    #[test]
    fn float_ranges_keep_their_precision() {
        let t = "[test]\nname = \"ping\"\n[matrix]\n\"test.probe-interval\" = { from = 0.1, to = 0.3, step = 0.1 }\n";
        let e = parse("f", "f", t).unwrap();
        assert_eq!(
            e.matrix[0].values,
            [Scalar::Float(0.1), Scalar::Float(0.2), Scalar::Float(0.3)]
        );
    }

    fn err(text: &str) -> FileError {
        parse("bad.toml", "bad", text).unwrap_err()
    }

    #[test]
    fn bad_input_names_the_key_and_the_line() {
        let e = err("[test]\nname = \"rrul\"\n\n[labb]\nrate = \"1mbit\"\n");
        assert_eq!((e.line, e.key.as_str()), (4, "labb"), "{e}");
        let e = err("[experiment]\nrepetition = 2\n[test]\nname = \"rrul\"\n");
        assert_eq!(
            (e.line, e.key.as_str()),
            (2, "experiment.repetition"),
            "{e}"
        );
        let e = err("[test]\nname = \"rrul\"\n[matrix]\nrate = []\n");
        assert_eq!((e.line, e.key.as_str()), (4, "matrix.rate"), "{e}");
        assert!(e.why.contains("empty"), "{e}");
        let e = err("[test]\nname = \"rrul\"\n[matrix]\n");
        assert_eq!(e.key, "matrix", "{e}");
        assert!(e.why.contains("empty matrix"), "{e}");
        // A bare name nobody uses is neither an option nor a placeholder.
        let e = err("[test]\nname = \"rrul\"\n[matrix]\nrate = [\"1mbit\"]\n");
        assert_eq!((e.line, e.key.as_str()), (4, "matrix.rate"), "{e}");
        assert!(e.why.contains("lab.rate"), "{e}");
        let e = err("[lab]\nstage = [\"rate={r}\"]\n[test]\nname = \"rrul\"\n");
        assert_eq!((e.line, e.key.as_str()), (2, "lab.stage"), "{e}");
        let e = err("[lab]\nrate = \n");
        assert_eq!((e.line, e.key.as_str()), (2, "(syntax)"), "{e}");
        let e = err("[lab]\nrate = \"1mbit\"\n");
        assert_eq!(e.key, "test", "{e}");
        let e = err(
            "[test]\nname = \"rrul\"\n[matrix]\n\"lab.limit\" = { from = 3, to = 1, step = 1 }\n",
        );
        assert_eq!(e.line, 4, "{e}");
        let e = err(
            "[test]\nname = \"rrul\"\n[matrix]\n\"lab.limit\" = { from = 1, to = 9, step = 0 }\n",
        );
        assert!(e.why.contains("step"), "{e}");
        let e = err("[test]\nname = \"rrul\"\n[matrix]\n\"net.limit\" = [1]\n");
        assert!(e.why.contains("lab.OPTION"), "{e}");
        assert_eq!(
            e.to_string(),
            format!("bad.toml:4: matrix.net.limit: {}", e.why)
        );
    }

    const CLIENT: &str = r#"
[lab]
rate = "100mbit"

[server]
enhanced = true

[client]
time = 10
trip-times = true
near-congestion = "{weight}"

[matrix]
weight = ["0.4", "0"]
"client.tcp-congestion" = ["cubic", "bbr"]
"server.window" = ["256K"]
"#;

    #[test]
    fn a_client_server_file_parses_with_lines() {
        let e = parse("c.toml", "c", CLIENT).unwrap();
        assert_eq!(e.test.0, "", "no test: the client runs");
        assert!(e.test_opts.is_empty());
        let (client, line) = e.client.as_ref().unwrap();
        assert_eq!(*line, 8);
        let keys: Vec<_> = client.iter().map(|o| (o.key.as_str(), o.line)).collect();
        assert_eq!(
            keys,
            [("time", 9), ("trip-times", 10), ("near-congestion", 11)]
        );
        assert_eq!(e.server[0].key, "enhanced");
        assert_eq!(e.server[0].values, [Scalar::Bool(true)]);
        assert_eq!(e.matrix[1].target, Target::Client("tcp-congestion".into()));
        assert_eq!(e.matrix[2].target, Target::Server("window".into()));
        // --quick shortens the client's runs and sets no test options.
        let q = e.quick();
        let (client, _) = q.client.as_ref().unwrap();
        let time: Vec<_> = client.iter().filter(|o| o.key == "time").collect();
        assert_eq!(time.len(), 1);
        assert_eq!(time[0].values, [Scalar::Int(2)]);
        assert!(q.test_opts.is_empty());
        // A [quick] section may narrow a client experiment's matrix, and its runs are still
        // shortened; test options in it are refused with their line.
        let narrowed = format!("{CLIENT}[quick]\nmatrix.weight = [\"0.4\"]\n");
        let q = parse("c.toml", "c", &narrowed).unwrap().quick();
        assert_eq!(q.matrix[0].values.len(), 1);
        let (client, _) = q.client.as_ref().unwrap();
        assert!(
            client
                .iter()
                .any(|o| o.key == "time" && o.values == [Scalar::Int(2)])
        );
        let e = err(&format!("{CLIENT}[quick]\nlength = 5\n"));
        assert_eq!((e.line, e.key.as_str()), (18, "quick.length"), "{e}");
    }

    #[test]
    fn a_file_runs_a_test_or_a_client_and_client_placeholders_count() {
        let both = format!("{CLIENT}[test]\nname = \"rrul\"\n");
        let e = err(&both);
        assert_eq!((e.line, e.key.as_str()), (17, "test"), "{e}");
        assert!(e.why.contains("not both"), "{e}");
        let e = err("[server]\nenhanced = true\n");
        assert!(e.why.contains("[client]"), "{e}");
        // A placeholder only [client] uses is used; one nobody uses is not.
        let unused = CLIENT.replace("\"{weight}\"", "0.4");
        let e = err(&unused);
        assert_eq!((e.line, e.key.as_str()), (14, "matrix.weight"), "{e}");
        let e = err("[client]\ntime = \"{t}\"\n");
        assert_eq!((e.line, e.key.as_str()), (2, "client.time"), "{e}");
        let e = err("[client]\n[matrix]\n\"cleint.time\" = [1]\n");
        assert!(e.why.contains("client.OPTION"), "{e}");
    }

    const QUICK: &str = r#"[test]
name = "{load}"
length = 60
idle-before = 5
cc = "cubic"

[matrix]
load = ["one_vs_one", "one_vs_pulses"]
"lab.ecn" = [false, "all"]
shaper = [{down = "6mbit", up = "700kbit"}, {down = "1gbit", up = "1gbit", label = "SQM off"}]

[lab]
down-rate = "{shaper.down}"
up-rate = "{shaper.up}"

[quick]
repetitions = 2
length = 10
idle = 1
matrix.load = ["one_vs_one"]
matrix."lab.ecn" = ["false", "all"]
matrix.shaper = ["SQM off"]
"#;

    #[test]
    fn a_probe_loss_bound_per_point_names_a_parameter_and_one_of_its_values() {
        let base = r#"[test]
name = "rrul"
[matrix]
shaper = [{down = "6mbit", up = "700kbit"}, {down = "1gbit", up = "1gbit", label = "SQM off"}]
[lab]
down-rate = "{shaper.down}"
up-rate = "{shaper.up}"
[expect]
max_probe_loss = 0.1
"#;
        let e = parse(
            "ok",
            "ok",
            &format!("{base}max_probe_loss_where = {{ \"shaper=SQM off\" = 0.3 }}\n"),
        )
        .unwrap();
        assert_eq!(
            e.probe_loss_where,
            [crate::completeness::PointLossBound {
                param: "shaper".into(),
                value: "SQM off".into(),
                bound: 0.3
            }]
        );
        let b = crate::completeness::probe_loss_bound(&e);
        assert_eq!((b.default, b.points.len()), (0.1, 1));
        assert!(!e.expect.contains_key("max_probe_loss_where"));
        for (bad, why) in [
            ("{ \"rate=SQM off\" = 0.3 }", "not a [matrix] parameter"),
            ("{ \"shaper=SQM of\" = 0.3 }", "has no value \"SQM of\""),
            ("{ \"shaper\" = 0.3 }", "expected \"PARAM=VALUE\""),
            ("{ \"shaper=SQM off\" = 1.5 }", "expected a fraction"),
            ("0.3", "expected an inline table"),
        ] {
            let e = err(&format!("{base}max_probe_loss_where = {bad}\n"));
            assert_eq!(e.key, "expect.max_probe_loss_where", "{e}");
            assert!(e.why.contains(why), "{bad}: {e}");
        }
    }

    /// `key=first value` of every `test` option.
    fn first_values(e: &Experiment) -> Vec<String> {
        e.test_opts
            .iter()
            .map(|o| format!("{}={}", o.key, o.values[0]))
            .collect()
    }

    #[test]
    fn quick_section_parses_and_applies() {
        let e = parse("q.toml", "q", QUICK).unwrap();
        let q = e.quick.clone().unwrap();
        assert_eq!((q.line, q.repetitions), (16, 2));
        let keys: Vec<_> = q
            .test_opts
            .iter()
            .map(|o| (o.key.as_str(), o.line))
            .collect();
        assert_eq!(keys, [("length", 18), ("idle", 19)]);
        let subsets: Vec<_> = q
            .matrix
            .iter()
            .map(|(n, v, l)| (n.as_str(), v.len(), *l))
            .collect();
        assert_eq!(
            subsets,
            [("load", 1, 20), ("lab.ecn", 2, 21), ("shaper", 1, 22)]
        );
        // The full variant is untouched by [quick].
        assert_eq!(e.repetitions, 1);
        assert_eq!(crate::matrix::point_count(&e), 8);

        assert!(!e.quick_variant);
        let q = e.quick();
        assert!(q.quick.is_none() && q.quick_variant);
        assert_eq!(q.repetitions, 2);
        // `length` replaced, `idle` replaces `idle-before` (which would override it), `cc` kept.
        let opts = first_values(&q);
        assert_eq!(opts, ["cc=cubic", "length=10", "idle=1"]);
        let labels: Vec<String> = crate::matrix::points(&q)
            .iter()
            .map(|p| p.label())
            .collect();
        assert_eq!(
            labels,
            [
                "load=one_vs_one lab.ecn=false shaper=SQM off shaper.down=1gbit shaper.up=1gbit",
                "load=one_vs_one lab.ecn=all shaper=SQM off shaper.down=1gbit shaper.up=1gbit",
            ]
        );
    }

    #[test]
    fn without_quick_section_quick_is_the_generic_shortening() {
        let e = parse("x.toml", "x", SWEEP).unwrap();
        assert!(e.quick.is_none());
        let q = e.quick();
        assert_eq!(q.repetitions, 1);
        let opts = first_values(&q);
        assert_eq!(opts, ["length=2", "idle=0.5", "pulses=3"]);
        assert_eq!(crate::matrix::point_count(&q), 12);
    }

    #[test]
    fn bad_quick_sections_name_the_key_and_the_line() {
        let base = "[test]\nname = \"{load}\"\n[matrix]\nload = [\"one_vs_one\", \"tcp_upload\"]\n[quick]\n";
        let e = err(&format!("{base}length = 5\nmatrix.load = [\"rrul\"]\n"));
        assert_eq!((e.line, e.key.as_str()), (7, "quick.matrix.load"), "{e}");
        assert!(
            e.why
                .contains("\"rrul\" is not one of matrix.load's values")
                && e.why.contains("\"one_vs_one\", \"tcp_upload\""),
            "{e}"
        );
        let e = err(&format!("{base}matrix.rate = [\"1mbit\"]\n"));
        assert_eq!((e.line, e.key.as_str()), (6, "quick.matrix.rate"), "{e}");
        assert!(
            e.why.contains("not a [matrix] parameter (it has: load)"),
            "{e}"
        );
        let e = err(&format!("{base}\n[quick.matrix]\nload = []\n"));
        assert_eq!((e.line, e.key.as_str()), (8, "quick.matrix.load"), "{e}");
        let e = err(&format!("{base}matrix.load = \"one_vs_one\"\n"));
        assert!(e.why.contains("list"), "{e}");
        let e = err(&format!("{base}repetitions = 0\n"));
        assert_eq!((e.line, e.key.as_str()), (6, "quick.repetitions"), "{e}");
        let e = err(&format!("{base}name = \"rrul\"\n"));
        assert_eq!((e.line, e.key.as_str()), (6, "quick.name"), "{e}");
        let e = err(&format!("{base}cc = {{ a = 1 }}\n"));
        assert_eq!((e.line, e.key.as_str()), (6, "quick.cc"), "{e}");
        let e = err(&format!("{base}length = \"{{x}}\"\n"));
        assert_eq!((e.line, e.key.as_str()), (6, "quick.length"), "{e}");
        let e = err("quick = 1\n[test]\nname = \"ping\"\n");
        assert_eq!((e.line, e.key.as_str()), (1, "quick"), "{e}");
    }

    #[test]
    fn placeholders_are_found_in_order() {
        assert_eq!(placeholders("rate={a} x={b}c"), ["a", "b"]);
        assert!(placeholders("no braces").is_empty());
        assert!(placeholders("open {x").is_empty());
    }
}
