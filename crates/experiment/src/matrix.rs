//! Matrix expansion: points (one combination of parameter values), their names, the run order
//! with repetitions, shards, and the command lines of a point.
//!
//! Points are the cartesian product of the `[matrix]` parameters in file order, the last
//! parameter varying fastest. A point's name is its 1-based number and its values
//! (`p002_rate-8mbit_cc-bbr`), so results files sort by point and say what they hold.

use crate::file::{BudgetError, Experiment, Opt, Scalar, Target, check_budget};

/// One combination of parameter values.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Point {
    /// 0-based position in the expansion.
    pub index: usize,
    /// `(parameter name as in [matrix], value)`, in file order.
    pub params: Vec<(String, Scalar)>,
}

impl Point {
    /// `p002_rate-8mbit_cc-bbr`: safe as a file name, unique within the experiment.
    pub fn name(&self) -> String {
        let mut s = format!("p{:03}", self.index + 1);
        // Zipped fields (`shaper.down`) are named by their parameter's label only.
        let top = self.params.iter().filter(|(k, _)| {
            !self.params.iter().any(|(o, _)| {
                k.strip_prefix(o.as_str())
                    .is_some_and(|r| r.starts_with('.'))
            })
        });
        for (k, v) in top {
            let short = k.rsplit('.').next().unwrap_or(k);
            s.push('_');
            s.push_str(&sanitize(short));
            s.push('-');
            s.push_str(&sanitize(&v.to_string()));
        }
        s
    }

    /// `rate=8mbit test.cc=bbr` for humans.
    pub fn label(&self) -> String {
        if self.params.is_empty() {
            return "(single point)".into();
        }
        self.params
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

fn sanitize(s: &str) -> String {
    let t: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if t.is_empty() { "empty".into() } else { t }
}

/// One run: a point and which repetition.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Run {
    /// The point.
    pub point: Point,
    /// 1-based repetition.
    pub rep: u32,
}

impl Run {
    /// `p002_rate-8mbit_r1`: the stem of the run's files.
    pub fn name(&self) -> String {
        format!("{}_r{}", self.point.name(), self.rep)
    }
}

/// Number of points of the experiment (1 without a matrix).
pub fn point_count(exp: &Experiment) -> usize {
    exp.matrix
        .iter()
        .map(|p| p.values.len())
        .fold(1usize, |a, n| a.saturating_mul(n))
}

/// Every point, in expansion order.
pub fn points(exp: &Experiment) -> Vec<Point> {
    let n = point_count(exp);
    (0..n)
        .map(|index| {
            let mut rest = index;
            let mut picks = vec![0; exp.matrix.len()];
            for (slot, p) in picks.iter_mut().zip(&exp.matrix).rev() {
                *slot = rest % p.values.len();
                rest /= p.values.len();
            }
            let mut params = Vec::new();
            for (p, &i) in exp.matrix.iter().zip(&picks) {
                params.push((p.name.clone(), p.values[i].clone()));
                for (k, v) in p.fields.get(i).into_iter().flatten() {
                    params.push((format!("{}.{k}", p.name), v.clone()));
                }
            }
            Point { index, params }
        })
        .collect()
}

/// A shard: this process runs the points whose index is `k` modulo `n` (0 <= k < n).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 0-based shard number.
    pub k: usize,
    /// Number of shards.
    pub n: usize,
}

impl std::str::FromStr for Shard {
    type Err = String;
    /// `K/N` with 0 <= K < N, as schedulers number array tasks from 0.
    fn from_str(s: &str) -> Result<Shard, String> {
        let (k, n) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected K/N, e.g. 0/4"))?;
        let k: usize = k
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: K is not a number"))?;
        let n: usize = n
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: N is not a number"))?;
        if n == 0 || k >= n {
            return Err(format!(
                "{s:?}: need 0 <= K < N (shards are numbered from 0)"
            ));
        }
        Ok(Shard { k, n })
    }
}

/// SplitMix64 steps for the shuffled order (deterministic per seed).
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The runs of the experiment (or of one shard of it) in the declared order. The budget is
/// checked first ([`check_budget`]), whatever path built `exp` (`--quick`, a merge's
/// `plan.json`), so nothing is allocated for an experiment over it.
pub fn runs(exp: &Experiment, shard: Option<Shard>) -> Result<Vec<Run>, BudgetError> {
    check_budget(exp)?;
    let pts: Vec<Point> = points(exp)
        .into_iter()
        .filter(|p| shard.is_none_or(|s| p.index % s.n == s.k))
        .collect();
    let reps = exp.repetitions.max(1);
    let mut out = Vec::with_capacity(pts.len() * reps as usize);
    match exp.order {
        crate::file::Order::Sequential | crate::file::Order::Shuffled => {
            for p in &pts {
                for rep in 1..=reps {
                    out.push(Run {
                        point: p.clone(),
                        rep,
                    });
                }
            }
        }
        crate::file::Order::Interleaved => {
            for rep in 1..=reps {
                for p in &pts {
                    out.push(Run {
                        point: p.clone(),
                        rep,
                    });
                }
            }
        }
    }
    if exp.order == crate::file::Order::Shuffled {
        let mut state = exp.seed;
        for i in (1..out.len()).rev() {
            let j = (splitmix(&mut state) % (i as u64 + 1)) as usize;
            out.swap(i, j);
        }
    }
    Ok(out)
}

/// The test to run at `point` (`[test] name` may use placeholders).
pub fn test_name(exp: &Experiment, point: &Point) -> String {
    substitute(&exp.test.0, point)
}

/// `{NAME}` replaced by the point's value of placeholder NAME.
pub(crate) fn substitute(s: &str, point: &Point) -> String {
    let mut out = s.to_string();
    for (k, v) in &point.params {
        out = out.replace(&format!("{{{k}}}"), &v.to_string());
    }
    out
}

/// `--key=value` (one word, so a value starting with `-` is never taken for an option),
/// `--key` for `true`, nothing for `false`.
fn push_opt(argv: &mut Vec<String>, key: &str, v: &Scalar, point: &Point) {
    match v {
        Scalar::Bool(true) => argv.push(format!("--{key}")),
        Scalar::Bool(false) => {}
        Scalar::Str(s) => argv.push(format!("--{key}={}", substitute(s, point))),
        v => argv.push(format!("--{key}={v}")),
    }
}

/// Which command a set of options is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Section {
    /// `bloatlab lab up NAME ...`
    Lab,
    /// `bloatlab test TEST HOST ...`
    Test,
    /// `bloatlab client HOST ...` (`[client]`)
    Client,
    /// `bloatlab server ...` (`[server]`)
    Server,
}

/// The options of `section` for `point`: the file's options with placeholders filled in, and
/// the matrix's options of that section replacing an option of the same key. Each argument
/// comes with the line it came from (for messages).
pub fn argv(exp: &Experiment, section: Section, point: &Point) -> Vec<(String, usize)> {
    let opts: &[Opt] = match section {
        Section::Lab => &exp.lab,
        Section::Test => &exp.test_opts,
        Section::Client => exp.client.as_ref().map_or(&[][..], |(o, _)| o.as_slice()),
        Section::Server => &exp.server,
    };
    let value = |name: &str| point.params.iter().find(|(k, _)| k == name).map(|(_, v)| v);
    let swept: Vec<(&str, &Scalar, usize)> = exp
        .matrix
        .iter()
        .filter_map(|p| match (&p.target, section) {
            (Target::Lab(k), Section::Lab)
            | (Target::Test(k), Section::Test)
            | (Target::Client(k), Section::Client)
            | (Target::Server(k), Section::Server) => {
                value(&p.name).map(|v| (k.as_str(), v, p.line))
            }
            _ => None,
        })
        .collect();
    let mut out = Vec::new();
    for o in opts {
        if swept.iter().any(|(k, _, _)| *k == o.key) {
            continue;
        }
        for v in &o.values {
            let mut a = Vec::new();
            push_opt(&mut a, &o.key, v, point);
            out.extend(a.into_iter().map(|s| (s, o.line)));
        }
    }
    for (k, v, line) in swept {
        let mut a = Vec::new();
        push_opt(&mut a, k, v, point);
        out.extend(a.into_iter().map(|s| (s, line)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::parse;

    const T: &str = r#"
[experiment]
repetitions = 2
[lab]
delay = "15ms"
stage = ["name=router rate={rate} qdisc=fq_codel", "name=modem rate=10mbit qdisc=fifo limit=1000p"]
ecn = false
[test]
name = "rrul"
length = 10
no-preflight = true
[matrix]
rate = ["6mbit", "8mbit", "9mbit"]
"test.length" = [5, 10]
"#;

    fn exp(order: &str) -> Experiment {
        let text = T.replace(
            "repetitions = 2",
            &format!("repetitions = 2\norder = \"{order}\""),
        );
        parse("t.toml", "t", &text).unwrap()
    }

    #[test]
    fn points_are_the_cartesian_product_last_fastest() {
        let e = exp("sequential");
        let p = points(&e);
        assert_eq!(p.len(), 6);
        let labels: Vec<String> = p.iter().map(Point::label).collect();
        assert_eq!(labels[0], "rate=6mbit test.length=5");
        assert_eq!(labels[1], "rate=6mbit test.length=10");
        assert_eq!(labels[5], "rate=9mbit test.length=10");
        assert_eq!(p[3].name(), "p004_rate-8mbit_length-10");
        let names: std::collections::BTreeSet<String> = p.iter().map(Point::name).collect();
        assert_eq!(names.len(), 6);
    }

    #[test]
    fn zipped_values_move_together() {
        let t = r#"
[lab]
up-stage = ["rate={shaper.up}"]
down-stage = ["rate={shaper.down}"]
[test]
name = "{t}"
[matrix]
shaper = [{down = "6mbit", up = "700kbit"}, {down = "1gbit", up = "1gbit", label = "SQM off"}]
t = ["rrul", "tcp_upload"]
"#;
        let e = parse("z.toml", "z", t).unwrap();
        let p = points(&e);
        assert_eq!(p.len(), 4);
        assert_eq!(
            p[0].label(),
            "shaper=6mbit/700kbit shaper.down=6mbit shaper.up=700kbit t=rrul"
        );
        assert_eq!(p[3].name(), "p004_shaper-SQM-off_t-tcp-upload");
        let lab: Vec<String> = argv(&e, Section::Lab, &p[0])
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(lab, ["--up-stage=rate=700kbit", "--down-stage=rate=6mbit"]);
        assert_eq!(test_name(&e, &p[3]), "tcp_upload");
        let bad = t.replace("{shaper.up}", "{shaper.sideways}");
        assert!(
            parse("z.toml", "z", &bad)
                .unwrap_err()
                .why
                .contains("shaper.sideways")
        );
    }

    #[test]
    fn orders_and_repetitions() {
        let seq: Vec<String> = runs(&exp("sequential"), None)
            .unwrap()
            .iter()
            .map(Run::name)
            .collect();
        assert_eq!(seq.len(), 12);
        assert_eq!(
            &seq[..3],
            [
                "p001_rate-6mbit_length-5_r1",
                "p001_rate-6mbit_length-5_r2",
                "p002_rate-6mbit_length-10_r1"
            ]
        );
        let il: Vec<String> = runs(&exp("interleaved"), None)
            .unwrap()
            .iter()
            .map(Run::name)
            .collect();
        assert_eq!(il[1], "p002_rate-6mbit_length-10_r1");
        assert_eq!(il[6], "p001_rate-6mbit_length-5_r2");
        let sh: Vec<String> = runs(&exp("shuffled"), None)
            .unwrap()
            .iter()
            .map(Run::name)
            .collect();
        assert_ne!(sh, seq);
        let mut a = sh.clone();
        let mut b = seq.clone();
        a.sort();
        b.sort();
        assert_eq!(a, b, "a shuffle runs the same runs");
        assert_eq!(
            sh,
            runs(&exp("shuffled"), None)
                .unwrap()
                .iter()
                .map(Run::name)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn shards_partition_the_points() {
        let e = exp("sequential");
        let all: Vec<String> = runs(&e, None).unwrap().iter().map(Run::name).collect();
        let mut joined: Vec<String> = (0..4)
            .flat_map(|k| runs(&e, Some(Shard { k, n: 4 })).unwrap())
            .map(|r| r.name())
            .collect();
        joined.sort();
        let mut all_sorted = all.clone();
        all_sorted.sort();
        assert_eq!(joined, all_sorted);
        assert_eq!(
            runs(&e, Some(Shard { k: 3, n: 4 })).unwrap().len(),
            2,
            "point 4 and its 2 reps"
        );
        assert_eq!("1/4".parse::<Shard>().unwrap(), Shard { k: 1, n: 4 });
        assert!("4/4".parse::<Shard>().is_err());
        assert!("1/0".parse::<Shard>().is_err());
        assert!("x".parse::<Shard>().is_err());
    }

    #[test]
    fn client_and_server_argv_take_placeholders_and_swept_options() {
        let t = r#"
[server]
enhanced = true
window = "128K"
[client]
time = 10
trip-times = true
near-congestion = "{weight}"
[matrix]
weight = ["0.4", "0"]
"server.window" = ["1M"]
"client.tcp-congestion" = ["cubic"]
"#;
        let e = parse("c.toml", "c", t).unwrap();
        let p = &points(&e)[1];
        assert_eq!(p.name(), "p002_weight-0_window-1M_tcp-congestion-cubic");
        let words =
            |s: Section| -> Vec<String> { argv(&e, s, p).into_iter().map(|(a, _)| a).collect() };
        assert_eq!(
            words(Section::Client),
            [
                "--time=10",
                "--trip-times",
                "--near-congestion=0",
                "--tcp-congestion=cubic"
            ]
        );
        assert_eq!(words(Section::Server), ["--enhanced", "--window=1M"]);
        assert!(words(Section::Test).is_empty());
    }

    #[test]
    fn argv_fills_placeholders_and_swept_options_replace_fixed_ones() {
        let e = exp("sequential");
        let p = &points(&e)[3];
        let lab: Vec<String> = argv(&e, Section::Lab, p)
            .into_iter()
            .map(|(s, _)| s)
            .collect();
        assert_eq!(
            lab,
            [
                "--delay=15ms",
                "--stage=name=router rate=8mbit qdisc=fq_codel",
                "--stage=name=modem rate=10mbit qdisc=fifo limit=1000p"
            ]
        );
        let test = argv(&e, Section::Test, p);
        let words: Vec<&str> = test.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(words, ["--no-preflight", "--length=10"]);
        // The swept value carries the matrix's line.
        assert_eq!(test[1].1, 15);
    }
}
