//! Typed points: every point's `[lab]`, `[server]` and `[test]` (or `[client]`) options,
//! placeholders filled in and swept values applied ([`matrix::argv`]), become the configs
//! those commands take ([`LabSpec`], [`ServerInvocation`], [`TestInvocation`] or [`ClientConfig`])
//! through the commands' own flag definitions (`bloatlab_invoke`), when the file is
//! checked and before anything runs; `[during]` too ([`crate::during`]).
//!
//! An error names the file, the line and the TOML key of the option at fault from the
//! option's own record: for a flag clap refuses, clap's context says which argument
//! ([`ContextKind::InvalidArg`]); for a value that only fails once resolved, the error
//! carries its flags ([`bloatlab_lab::SpecField`], [`bloatlab_suite::PlanError::flag`],
//! [`bloatlab_invoke::UsageError::flags`]: `[client]`'s `--trip-times` with a short
//! `--len` is at `len`'s line). The flag then leads to the option's key and line in the
//! point's option list. Nothing is recovered from a message's text.

use crate::during::During;
use crate::file::Experiment;
use crate::matrix::{self, Point, Section};
use bloatlab_engine::config::{ClientConfig, OutputFormat};
use bloatlab_invoke::UsageError;
use bloatlab_invoke::client::ClientArgs;
use bloatlab_invoke::lab::UpArgs;
use bloatlab_invoke::server::{ServerArgs, ServerInvocation};
use bloatlab_invoke::test::{TestArgs, TestInvocation};
use bloatlab_lab::LabSpec;
use bloatlab_suite::TestName;
use clap::error::{ContextKind, ContextValue};
use clap::{Args, FromArgMatches};

/// One point's commands, as the commands will take them.
#[derive(Debug)]
pub struct TypedPoint {
    /// Which point.
    pub point: Point,
    /// `lab up`'s spec.
    pub lab: LabSpec,
    /// `server`'s command line, typed (its port is the runner's to set).
    pub server: ServerInvocation,
    /// The load: a test of the suite or one `client` run.
    pub load: Load,
    /// `[during]`'s sidecar, when the point has one.
    pub during: Option<During>,
}

/// What a point runs against the server.
#[derive(Debug)]
pub enum Load {
    /// `[test]`: `bloatlab test NAME` with these options.
    Test {
        /// The test.
        name: TestName,
        /// The run, against the lab's server (its port, results file and title are the
        /// runner's to set).
        run: Box<TestInvocation>,
    },
    /// `[client]`: one `bloatlab client` run.
    Client(Box<ClientConfig>),
}

/// A point whose options a command would refuse: where (file, line, TOML key) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {context}: {message}")]
pub struct PointError {
    /// The experiment file.
    pub file: String,
    /// The line of the option at fault (its section's when no single option is).
    pub line: usize,
    /// The option's key in its section (`length`, `down-rate`), when one is at fault.
    pub key: Option<String>,
    /// `[lab] of point p002 (rate=0mbit)`, with ` under --quick` for the quick variant;
    /// or `test.name`.
    pub context: String,
    /// What is wrong, as the command would say it.
    pub message: String,
}

/// Checks every point of `exp` and, when it has one, of its `[quick]` variant (a bad
/// `[quick]` is refused by every run, not only by the first `--quick` one), and returns
/// `exp`'s points typed.
pub fn check(exp: &Experiment) -> Result<Vec<TypedPoint>, PointError> {
    let typed = typed_points(exp)?;
    if exp.quick.is_some() && !exp.quick_variant {
        typed_points(&exp.clone().quick())?;
    }
    Ok(typed)
}

/// Every point of `exp` (as it is: the full or the quick variant) typed, or the first
/// option a command would refuse.
pub fn typed_points(exp: &Experiment) -> Result<Vec<TypedPoint>, PointError> {
    matrix::points(exp)
        .into_iter()
        .map(|p| typed_point(exp, p))
        .collect()
}

fn typed_point(exp: &Experiment, point: Point) -> Result<TypedPoint, PointError> {
    let lab = self::lab(exp, &point)?;
    let server = server(exp, &point)?;
    let load = match &exp.client {
        Some((_, line)) => Load::Client(Box::new(client(exp, &point, *line)?)),
        None => test(exp, &point)?,
    };
    let during = crate::during::of_point_in(exp, &point, &lab)?;
    Ok(TypedPoint {
        point,
        lab,
        server,
        load,
        during,
    })
}

/// A section of one point: its options (`--key[=value]`, each with its TOML line) and
/// how errors name it.
struct Options<'a> {
    exp: &'a Experiment,
    point: &'a Point,
    section: Section,
    words: Vec<(String, usize)>,
    /// The line when no option is at fault.
    fallback: usize,
}

impl<'a> Options<'a> {
    fn new(exp: &'a Experiment, point: &'a Point, section: Section, fallback: usize) -> Self {
        Options {
            exp,
            point,
            section,
            words: matrix::argv(exp, section, point),
            fallback,
        }
    }

    /// `COMMAND ARGS... OPTIONS...`, as the command's child would get them.
    fn argv(&self, command: &str, args: &[String]) -> Vec<String> {
        std::iter::once(command.to_owned())
            .chain(args.iter().cloned())
            .chain(self.words.iter().map(|(w, _)| w.clone()))
            .collect()
    }

    /// The error about the first of `flags` that the section has (they come most at fault
    /// first), else about the section. The message's first line is kept (clap's usage
    /// lines below it are for a command line, not a file).
    fn error(&self, flags: &[&str], message: String) -> PointError {
        let first = message
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or(&message)
            .trim();
        let message = first.trim_start_matches("error: ").to_owned();
        let at_fault = flags.iter().find_map(|f| {
            self.words
                .iter()
                .map(|(w, l)| (w.split('=').next().unwrap_or(w), *l))
                .find(|(w, _)| w == f)
        });
        let name = match self.section {
            Section::Lab => "lab",
            Section::Server => "server",
            Section::Client => "client",
            Section::Test => "test",
        };
        let quick = if self.exp.quick_variant {
            " under --quick"
        } else {
            ""
        };
        PointError {
            file: self.exp.file.clone(),
            line: at_fault.map_or(self.fallback, |(_, l)| l),
            key: at_fault.map(|(f, _)| f.trim_start_matches("--").to_owned()),
            context: format!(
                "[{name}] of point {} ({}){quick}",
                self.point.name(),
                self.point.label()
            ),
            message,
        }
    }

    /// clap's refusal: the argument it names in its context, its message's first line.
    fn clap_error(&self, cmd: &clap::Command, e: &clap::Error) -> PointError {
        let flags = clap_flags(cmd, e);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        self.error(&flags, e.to_string())
    }

    /// A resolve error of command `A`, at the first of its flags the section has.
    fn usage_error<A: Args>(&self, command: &'static str, e: &UsageError) -> PointError {
        let flags = with_aliases(&A::augment_args(clap::Command::new(command)), &e.flags);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        self.error(&flags, e.message.clone())
    }

    /// Options the runner sets itself, or that would keep it from talking to the server.
    fn refuse(&self, keys: &[(&str, &str)]) -> Result<(), PointError> {
        for (w, _) in &self.words {
            let flag = w.split('=').next().unwrap_or(w);
            if let Some((_, why)) = keys
                .iter()
                .find(|(k, _)| flag.strip_prefix("--") == Some(*k))
            {
                return Err(self.error(&[flag], format!("{flag}: {why}; leave it out")));
            }
        }
        Ok(())
    }

    /// The flags parsed as the command `A` parses them.
    fn parse<A: Args + FromArgMatches>(
        &self,
        command: &'static str,
        args: &[String],
    ) -> Result<A, PointError> {
        let cmd = A::augment_args(clap::Command::new(command));
        cmd.clone()
            .try_get_matches_from(self.argv(command, args))
            .and_then(|m| A::from_arg_matches(&m))
            .map_err(|e| self.clap_error(&cmd, &e))
    }
}

/// The argument clap names in its context (`--down-loss <DOWN_LOSS>`,
/// `--near-congestion[=<W>]`, `--bogus`: the leading name), with its other names.
pub(crate) fn clap_flags(cmd: &clap::Command, e: &clap::Error) -> Vec<String> {
    match e.get(ContextKind::InvalidArg) {
        Some(ContextValue::String(arg)) => {
            let flag: String = arg
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
                .collect();
            with_aliases(cmd, &[flag.as_str()])
        }
        _ => Vec::new(),
    }
}

/// `flags` (`--long` names) in order, each followed by its other names in `cmd`: its
/// aliases (a file may write `dscp` for `markings`) and its short form (`-o`).
pub(crate) fn with_aliases(cmd: &clap::Command, flags: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for f in flags {
        out.push((*f).to_owned());
        let long = f.strip_prefix("--");
        let Some(arg) = cmd
            .get_arguments()
            .find(|a| long.is_some() && a.get_long() == long)
        else {
            continue;
        };
        let aliases = arg.get_all_aliases().unwrap_or_default();
        out.extend(aliases.iter().map(|a| format!("--{a}")));
        out.extend(arg.get_short().map(|c| format!("-{c}")));
    }
    out
}

/// `[lab]` of point `p`, as `lab up` parses and checks it (without building anything).
/// The spec is named `check`; a runner gives the lab its own name.
pub fn lab(exp: &Experiment, p: &Point) -> Result<LabSpec, PointError> {
    let fallback = exp.lab.first().map_or(0, |o| o.line);
    let o = Options::new(exp, p, Section::Lab, fallback);
    let a: UpArgs = o.parse("up", &["check".into()])?;
    a.resolve().map_err(|e| {
        let mut flags: Vec<&str> = match &e {
            bloatlab_lab::LabError::Spec { field, .. } => {
                field.flags.iter().map(String::as_str).collect()
            }
            _ => Vec::new(),
        };
        // The most specific first: `--up-rate` rather than `--rate`.
        flags.sort_by_key(|f| std::cmp::Reverse(f.len()));
        o.error(&flags, e.to_string())
    })
}

/// `[server]` of point `p`, as `bloatlab server` parses and resolves it (the port is
/// the default; a runner sets its own).
pub fn server(exp: &Experiment, p: &Point) -> Result<ServerInvocation, PointError> {
    let fallback = exp.server.first().map_or(0, |o| o.line);
    let o = Options::new(exp, p, Section::Server, fallback);
    o.refuse(&[
        ("port", "the experiment chooses the port"),
        ("one-off", "the server must outlive the readiness probe"),
        (
            "udp",
            "experiments run TCP servers (UDP runs are not supported yet)",
        ),
        (
            "no-probes",
            "the experiment waits until the server answers latency probes",
        ),
        (
            "no-iperf",
            "the experiment waits until the server answers latency probes",
        ),
        (
            "permit-key",
            "the experiment's readiness probe carries no key",
        ),
        (
            "near-congestion",
            "a client option, which the server ignores",
        ),
    ])?;
    let a: ServerArgs = o.parse("server", &[])?;
    // No key from this process's environment: the section has none (refused above).
    a.resolve(None)
        .map_err(|e| o.error(e.flags(), e.to_string()))
}

/// `[client]`, as `bloatlab client` parses and resolves it.
fn client(exp: &Experiment, p: &Point, section_line: usize) -> Result<ClientConfig, PointError> {
    let o = Options::new(exp, p, Section::Client, section_line);
    let json = "the experiment always reads the client's --json document";
    o.refuse(&[
        ("port", "the experiment chooses the port"),
        ("json", json),
        ("reportstyle", json),
        (
            "udp",
            "experiments run TCP clients (UDP runs are not supported yet)",
        ),
        ("permit-key", "the experiment's server runs without a key"),
        (
            "ipv6_domain",
            "the lab's server is reached at its IPv4 address",
        ),
    ])?;
    let host = bloatlab_suite::session::server_addr().to_string();
    let a: ClientArgs = o.parse("client", &[host])?;
    // A resolve error may span options (`--trip-times` with a short `--len`): it names
    // them, the one to change first leading.
    a.resolve(None)
        .map_err(|e| o.usage_error::<ClientArgs>("client", &e))
}

/// `[test]`: the test's name and options, as `bloatlab test` checks them.
fn test(exp: &Experiment, p: &Point) -> Result<Load, PointError> {
    let name = matrix::test_name(exp, p);
    let test: TestName = name
        .parse()
        .map_err(|e: bloatlab_suite::UnknownTest| PointError {
            file: exp.file.clone(),
            line: exp.test.1,
            key: Some("name".into()),
            context: "test.name".into(),
            message: e.to_string(),
        })?;
    let o = Options::new(exp, p, Section::Test, exp.test.1);
    let host = bloatlab_suite::session::server_addr().to_string();
    let a: TestArgs = o.parse("test", &[name, host])?;
    bloatlab_suite::plan(test, &a.resolve()).map_err(|e| o.error(&[e.flag()], e.to_string()))?;
    let output = "the experiment chooses each run's results file";
    o.refuse(&[
        ("output", output),
        ("json", output),
        ("port", "the experiment chooses the port"),
        (
            "title",
            "the experiment titles each run (its point and repetition)",
        ),
        ("permit-key", "the experiment's server takes no key"),
        ("list", "the experiment runs the test"),
        ("recover", "the experiment runs the test"),
    ])?;
    let run = a
        .invocation()
        .ok_or_else(|| o.error(&[], "not a run of the test".into()))?;
    Ok(Load::Test {
        name: test,
        run: Box::new(run),
    })
}

/// `[test]` of point `p` as the runner runs it: against the lab's server on `port`,
/// writing `output`, titled `title`. `None` for a point with a `[client]` instead.
pub fn test_run(
    exp: &Experiment,
    p: &Point,
    port: u16,
    output: std::path::PathBuf,
    title: String,
) -> Result<Option<TestInvocation>, PointError> {
    if exp.client.is_some() {
        return Ok(None);
    }
    let Load::Test { run, .. } = test(exp, p)? else {
        return Ok(None);
    };
    let mut run = *run;
    run.port = port;
    run.output = Some(output);
    run.title = Some(title);
    Ok(Some(run))
}

/// `[client]` of point `p` as the runner runs it: against the lab's server on `port`, one
/// `--json` document on stdout (the runner reads it). `None` for a point with a `[test]`.
pub fn client_run(
    exp: &Experiment,
    p: &Point,
    port: u16,
) -> Result<Option<ClientConfig>, PointError> {
    let Some((_, line)) = &exp.client else {
        return Ok(None);
    };
    let mut c = client(exp, p, *line)?;
    c.port = port;
    c.format = OutputFormat::Json;
    Ok(Some(c))
}

#[cfg(test)]
mod client_survival_tests;
#[cfg(test)]
mod survival_tests;
#[cfg(test)]
mod tests;
