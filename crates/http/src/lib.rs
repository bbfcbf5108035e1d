//! bloatlab's HTTP test service: the server side of the responsiveness test
//! (RPM, draft-ietf-ippm-responsiveness) that every RPM client can use.
//!
//! * Plain HTTP/1.1 and h2c (HTTP/2 with prior knowledge; the `Upgrade: h2c`
//!   dance is not supported, as hyper does not), and HTTPS with TLS 1.3 and
//!   ALPN `h2`, `http/1.1` ([`tls`]).
//! * The routes ([`routes`]): `/.well-known/nq` (the config), a large
//!   object, a 1-byte object and an upload sink that discards; and the
//!   browser bufferbloat test page at `/` ([`browser`]); Cloudflare's
//!   speed-test API `/__down`, `/__up` ([`cloudflare`]).
//! * The server's caps ([`Caps`]): connections in all and per source (over
//!   them: `429` with `Retry-After`), a lifetime per connection
//!   (`--max-duration`), an idle timeout, deadlines for the TLS handshake
//!   and the request heads ([`deadlines`]), rate caps as budgets per source
//!   and in all ([`budget`]), `--max-bytes` per request, `--permit-key`.
//! * `TCP_NOTSENT_LOWAT` on every test connection ([`conn::NOTSENT_LOWAT`]).
//! * The operator's record of browser tests ([`record`]): tests started by
//!   the server (id + token, the `--browser-*` caps), their results kept as
//!   results files with `--results-dir` and shown at `/result/ID`.
//!
//! [`start`] returns once the listeners are bound; the service runs on its
//! own threads until the [`Service`] is dropped. docs/http.md is the user's
//! guide; docs/security.md says what a public server exposes.

#![forbid(unsafe_code)]

pub mod body;
pub mod browser;
pub mod budget;
pub mod caps;
pub mod cloudflare;
pub mod conn;
pub mod deadlines;
pub mod error;
pub mod record;
pub mod routes;
pub mod service;
pub mod stats;
pub mod tls;

pub use error::HttpError;
pub use record::RecordConfig;
pub use record::ledger::TestCaps;
pub use service::{Caps, HttpConfig, Service, start};
pub use stats::StatsSnapshot;
pub use tls::TlsSource;

#[cfg(test)]
mod tests;
