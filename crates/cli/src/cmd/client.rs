//! `bloatlab client` (work in progress: owned by the client work stream).

/// Arguments of `bloatlab client`.
#[derive(Debug, clap::Args)]
pub struct ClientArgs {}

pub fn run(_args: ClientArgs) -> anyhow::Result<()> {
    anyhow::bail!("`bloatlab client` is not implemented yet")
}
