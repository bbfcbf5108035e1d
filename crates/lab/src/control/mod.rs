//! The `bloatlab lab` subcommands as library functions: what the binary
//! calls after parsing its flags. Each returns a typed error
//! ([`LabError`](crate::LabError), or a small enum where a subcommand has
//! failures of its own); the binary maps errors to messages and exit codes.
//!
//! * [`up`]: claim a name, and the summary `lab up` prints.
//! * [`daemon`]: the emulator process (background or foreground) and its
//!   readiness report to `lab up`.
//! * [`exec`]: run a command inside a lab host's namespace.
//! * [`teardown`]: `lab down`, and ending the commands `lab exec` started.
//! * [`list`]: `lab list` as text.
//! * [`set`]: `lab set` (ECN, stage rates) on a running lab.
//!
//! `lab status` text is rendered by [`crate::status_text`] from the record
//! [`crate::status::read`] returns.
//!
//! Nothing here writes to stdout unless rendering is the function's job, and
//! then it writes to a `&mut dyn Write` the caller passes (the daemon's
//! readiness line is the one exception: its stdout *is* the pipe to `lab up`).

pub mod daemon;
pub mod exec;
pub mod list;
pub mod set;
pub mod teardown;
pub mod up;
