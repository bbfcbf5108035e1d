//! One module per subcommand: its clap arguments and its `run`.

pub mod client;
pub mod demo;
pub mod experiment;
pub mod inlab;
pub mod lab;
pub mod opts;
pub mod ping;
pub mod report;
pub mod server;
pub mod test;
pub mod tune;
