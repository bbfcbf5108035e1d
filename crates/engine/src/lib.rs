//! Traffic engine: iperf 2 compatible TCP and UDP clients and servers.
//!
//! The drivers here move bytes between sockets and the sans-IO accumulators of
//! `bloatlab-metrics`; wire layouts come from `bloatlab-wire`. The CLI turns
//! options into a [`config::ClientConfig`] / [`config::ServerConfig`] and calls
//! the entry points.

pub mod clock;
pub mod config;
pub mod console;
pub mod flow_table;
pub mod limits;
pub mod loglimit;
pub mod pacer;
pub mod sock;
pub mod suffix;
pub mod sum;
pub mod tcp;
pub mod tcpinfo;
pub mod udp;
