//! Exit codes and error reporting for the binary.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | success |
//! | 1 | the run failed (network error, peer misbehaved, lab failure) |
//! | 2 | bad usage: an option or argument value was rejected |
//! | 3 | a privilege is missing (root / CAP_NET_ADMIN for the lab) |

use std::io::IsTerminal;
use std::process::ExitCode;

pub const FAILURE: u8 = 1;
pub const USAGE: u8 = 2;
pub const PRIVILEGE: u8 = 3;

/// An error that already knows which exit code it maps to.
#[derive(Debug)]
pub struct Exit {
    pub code: u8,
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// A usage error (exit status 2) naming the option and the rejected value.
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code: USAGE,
        message: message.into(),
    })
}

/// Logs go to stderr so stdout stays clean for `--json` and `-y C`.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("BLOATLAB_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}

/// Prints the error chain as `bloatlab: error: ...` and picks the exit code.
pub fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            let code = err
                .chain()
                .find_map(|e| e.downcast_ref::<Exit>().map(|x| x.code))
                .unwrap_or(FAILURE);
            eprintln!("bloatlab: error: {err:#}");
            ExitCode::from(code)
        }
    }
}
