//! bloatlab results files: one JSON document per run.
//!
//! * [`schema`]: the current (version 5) schema, documented field by field. Raw samples
//!   (`raw`) are kept apart from the numbers computed from them (`derived`), so any run
//!   can be re-analysed and redrawn later without re-running it.
//! * [`load()`] / [`from_slice`]: parse, check the `format` marker, migrate older
//!   versions ([`migrate`](mod@migrate)), type-check and validate, with a typed [`LoadError`] for
//!   each way a file can be wrong (truncated, corrupt, not ours, too new, …).
//! * [`save()`]: atomic write (temp file in the same directory, fsync, rename, fsync the
//!   directory).
//!
//! Conversions to and from `bloatlab-stats` types live in [`convert`]; the `derived`
//! section is computed by [`Derived::compute`].

#![forbid(unsafe_code)]

pub mod convert;
pub mod derived;
pub mod lab;
pub mod load;
pub mod migrate;
pub mod save;
pub mod schema;

pub use convert::RawError;
pub use derived::Derived;
pub use load::{LoadError, from_slice, load};
pub use migrate::{MigrationError, migrate};
pub use save::{SaveError, save, to_vec, write_atomic};
pub use schema::{CURRENT_VERSION, FORMAT, Metadata, Raw, ResultsFile};
