//! `bloatlab server` (work in progress: owned by the server work stream).

/// Arguments of `bloatlab server`.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {}

pub fn run(_args: ServerArgs) -> anyhow::Result<()> {
    anyhow::bail!("`bloatlab server` is not implemented yet")
}
