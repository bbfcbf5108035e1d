//! bloatlab's command lines as typed values, in ripgrep's three layers
//! (`crates/core/flags/`: definitions, low-level args, high-level args):
//!
//! 1. **Flag definitions**: clap derive structs ([`client::ClientArgs`],
//!    [`common::CommonArgs`], [`test::TestArgs`], [`server::ServerArgs`],
//!    [`lab::UpArgs`], [`ping::PingArgs`], [`rpm::RpmArgs`],
//!    [`autorate::AutorateArgs`]), each value parsed by one function of [`opts`]
//!    (iperf 2's spellings) or by the type's own rule
//!    ([`bloatlab_units::CongestionControl::new`]).
//! 2. **`resolve()`**: the parsed flags become the typed config the code
//!    that acts on them takes ([`bloatlab_engine::config::ClientConfig`],
//!    [`test::TestInvocation`] around [`test::TestParams`],
//!    [`server::ServerInvocation`] around [`bloatlab_engine::config::ServerConfig`],
//!    [`bloatlab_lab::LabSpec`], [`ping`]'s and [`rpm`]'s configs, [`autorate`]'s plan),
//!    with the checks that span several flags. Errors are [`UsageError`]s naming
//!    their flags (`lab up`'s are the lab's `LabError::Spec`, `server`'s a
//!    [`server::ServerError`], both naming their flags too), which the binary maps to
//!    exit status 2.
//! 3. **`to_argv()`**, the inverse, for the child processes that
//!    `bloatlab test` and `bloatlab experiment` start (they stay processes:
//!    `bloatlab_suite::driver` says why). For every config `x` that
//!    `resolve` can produce, `resolve(parse(to_argv(x))) == x`
//!    (a property test beside each command).
//!
//! A new option is added once: a field in the config, a flag in the args
//! struct, a line in `resolve`, a line in `to_argv`; the property test's
//! generator then covers it.

#![forbid(unsafe_code)]

pub mod autorate;
pub mod client;
pub mod common;
mod decimal;
pub mod lab;
pub mod opts;
pub mod ping;
pub mod rpm;
pub mod server;
pub mod test;

/// A command line that parsed but asks for something impossible (options that
/// exclude each other, a value out of range for this combination). It names the
/// flags it is about, so a caller that took the flags from somewhere else (an
/// experiment file's TOML keys) can point at the right one without reading the
/// message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UsageError {
    /// What is wrong, as the command says it.
    pub message: String,
    /// The flags at fault by their long names (`--len`), the one to change first
    /// (`--len` of "-l/--len must be at least 92 bytes with --trip-times") leading.
    /// Empty when no flag is (a missing HOST, an environment variable).
    pub flags: Vec<&'static str>,
}

impl UsageError {
    /// An error about no flag in particular.
    pub fn new(message: impl Into<String>) -> UsageError {
        UsageError {
            message: message.into(),
            flags: Vec::new(),
        }
    }

    /// An error about `flags` (long names, the one to change first leading).
    pub fn about(flags: &[&'static str], message: impl Into<String>) -> UsageError {
        UsageError {
            message: message.into(),
            flags: flags.to_vec(),
        }
    }
}

/// Appends to `argv` the flag of every `(on, flag)` pair that is on, in order: the
/// switches of a `to_argv()` (flags that take no value).
pub(crate) fn push_switches(argv: &mut Vec<String>, switches: &[(bool, &str)]) {
    argv.extend(
        switches
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, f)| (*f).to_owned()),
    );
}
