//! `bloatlab lab` (work in progress: owned by the lab work stream).

/// Arguments of `bloatlab lab`.
#[derive(Debug, clap::Args)]
pub struct LabArgs {}

pub fn run(_args: LabArgs) -> anyhow::Result<()> {
    anyhow::bail!("`bloatlab lab` is not implemented yet")
}
