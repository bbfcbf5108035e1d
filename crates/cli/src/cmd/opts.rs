//! Option value parsers: defined once, in `bloatlab_invoke::opts`, beside the
//! flag definitions that use them; re-exported for the commands not moved there yet.

pub use bloatlab_invoke::opts::*;

/// The key in [`PERMIT_KEY_ENV`], checked as `--permit-key` is (unset or empty: none);
/// a bad one is a usage error (exit 2).
pub fn permit_key_env() -> anyhow::Result<Option<String>> {
    bloatlab_invoke::opts::permit_key_env().map_err(|e| crate::exit::usage(e.message))
}
