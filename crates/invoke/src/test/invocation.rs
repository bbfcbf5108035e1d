//! A whole `bloatlab test NAME HOST` run as one typed value: the plan's knobs
//! ([`TestParams`]), where the server is, where the results go, the host's ECN, the
//! `rpm` test's options, and the permit key (passed by [`child_env`], never on the
//! command line). [`TestArgs::invocation`] builds it; [`to_argv`](TestInvocation::to_argv)
//! writes it back for a child (`bloatlab experiment` runs its tests this way).

use super::{EcnMode, RpmTestOptions, TestArgs, TestParams, push_params};
use crate::opts::PERMIT_KEY_ENV;
use std::path::PathBuf;

/// One `bloatlab test` run (not `--list`, not `--recover`).
#[derive(Debug, Clone, PartialEq)]
pub struct TestInvocation {
    /// The test's name, as given (the suite parses it into its `TestName`).
    pub test: String,
    /// HOST (`None`: in a lab, `$BLOATLAB_SERVER`).
    pub host: Option<String>,
    /// `--v6`: the server's IPv6 address for a dual-stack test.
    pub v6: Option<String>,
    /// `-p`: the server's port.
    pub port: u16,
    /// The plan's knobs; `params.ecn_mix` is `ecn == Some(EcnMode::Mix)`.
    pub params: TestParams,
    /// `--ecn on|off|mix`.
    pub ecn: Option<EcnMode>,
    /// `-o`: the results file (`None`: a name with the test and the time, here).
    pub output: Option<PathBuf>,
    /// `--json`: the results document on stdout.
    pub json: bool,
    /// `--title`.
    pub title: Option<String>,
    /// The `rpm` test's options.
    pub rpm: RpmTestOptions,
    /// `--permit-key` or `$BLOATLAB_PERMIT_KEY`.
    pub permit_key: Option<String>,
    /// Check that the server answers before the run (false: `--no-preflight`).
    pub preflight: bool,
}

impl EcnMode {
    /// `--ecn`'s spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            EcnMode::On => "on",
            EcnMode::Off => "off",
            EcnMode::Mix => "mix",
        }
    }
}

impl TestArgs {
    /// The run these flags ask for; `None` for `--list` and `--recover` (no run).
    /// Every value was checked by its parser; the checks that need the test's name
    /// (`suite::plan`), the machine or the network are the binary's.
    pub fn invocation(&self) -> Option<TestInvocation> {
        if self.list || self.recover.is_some() {
            return None;
        }
        Some(TestInvocation {
            test: self.name.clone()?,
            host: self.host.clone(),
            v6: self.v6.clone(),
            port: self.port,
            params: self.resolve(),
            ecn: self.ecn,
            output: self.output.clone(),
            json: self.json,
            title: self.title.clone(),
            rpm: self.rpm.resolve(),
            permit_key: self.permit_key.clone(),
            preflight: !self.no_preflight,
        })
    }
}

/// The variable a child running [`TestInvocation::to_argv`] takes the key from, and the
/// key (`None`: remove an inherited one).
pub fn child_env(t: &TestInvocation) -> (&'static str, Option<&str>) {
    (PERMIT_KEY_ENV, t.permit_key.as_deref())
}

impl TestInvocation {
    /// A run of `test` against `host` with every option at its default.
    pub fn new(test: &str, host: Option<&str>) -> TestInvocation {
        TestInvocation {
            test: test.to_owned(),
            host: host.map(str::to_owned),
            v6: None,
            port: 5001,
            params: TestParams::default(),
            ecn: None,
            output: None,
            json: false,
            title: None,
            rpm: RpmTestOptions::default(),
            permit_key: None,
            preflight: true,
        }
    }

    /// The `bloatlab test` command line (after the program name) whose
    /// [`TestArgs::invocation`], with [`child_env`]'s key, is `self`. Options at their
    /// defaults are left out; values that may start with `-` are written `--flag=VALUE`.
    /// The key is never written: a command line is world-readable.
    pub fn to_argv(&self) -> Vec<String> {
        let mut a = vec!["test".to_owned(), self.test.clone()];
        a.extend(self.host.clone());
        push_params(&mut a, &self.params);
        let mut opt = |flag: &str, value: String| a.push(format!("{flag}={value}"));
        if self.port != 5001 {
            opt("--port", self.port.to_string());
        }
        if let Some(v6) = &self.v6 {
            opt("--v6", v6.clone());
        }
        if let Some(e) = self.ecn {
            opt("--ecn", e.as_str().to_owned());
        }
        if let Some(o) = &self.output {
            opt("--output", o.display().to_string());
        }
        if let Some(t) = &self.title {
            opt("--title", t.clone());
        }
        self.rpm.push_argv(&mut a);
        let flags = [(self.json, "--json"), (!self.preflight, "--no-preflight")];
        crate::push_switches(&mut a, &flags);
        a
    }
}
