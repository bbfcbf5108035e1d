//! The bloatlab lab: network namespaces joined through an emulated link.
//!
//! * [`spec`]: what a lab is (hosts, addresses, the two link directions).
//! * [`lab`]: [`Lab::build`] creates it behind Drop guards; dropping it
//!   (or `lab down` after a crash) removes every object.
//! * [`driver`]: one forwarding thread per direction between TUN devices,
//!   around the sans-IO `bloatlab_emu` link model (`model`, private; its
//!   counters are [`LinkCounters`]).
//! * [`netns`], `netlink`, `tun`, `sysctl`: thin syscall modules
//!   (no shelling out to `ip` or `tc`).
//! * [`state`]: `/run/bloatlab/NAME.json`, the record `lab status`,
//!   `lab down` and `lab list` read; [`status`] reads it as one typed
//!   record and [`status_text`] renders that as `lab status` text.
//! * [`control`]: the `bloatlab lab` subcommands (the emulator daemon and
//!   its readiness report, `exec`, `down`, `list`, `set`) as functions the
//!   binary calls after parsing its flags.
//! * `exec_env`: the environment `lab exec` gives its commands ([`LabEnv`]), written
//!   and read in that one place.
//!
//! Modules no other crate uses are private; the few items outsiders need
//! from them are re-exported here. The feature `internals` makes `netlink`,
//! `offload`, `signals`, `tun` and `driver::timing` public for the fuzz targets
//! (fuzz/) and the `tun_copy` example, nothing else.
//!
//! Every namespace is named `bl-LAB-HOST`; interfaces are created inside
//! lab namespaces only, so nothing outside the lab is ever touched.

#![forbid(unsafe_code)]

// Used by the binary, the suite and the experiment crates.
pub mod control;
pub mod driver;
pub mod hostctl;
pub mod lab;
pub mod names;
pub mod netns;
pub mod spec;
pub mod stages;
pub mod state;
pub mod status;
pub mod status_text;

// No other crate uses these: public only with the `internals` feature, which the
// fuzz targets (netlink replies, TUN frames) and the `tun_copy` bench floor
// (examples/, which opens TUNs in namespaces the way the lab does) enable.
#[cfg(feature = "internals")]
pub mod netlink;
#[cfg(not(feature = "internals"))]
mod netlink;
#[cfg(feature = "internals")]
pub mod offload;
#[cfg(not(feature = "internals"))]
mod offload;
#[cfg(feature = "internals")]
pub mod signals;
#[cfg(not(feature = "internals"))]
mod signals;
#[cfg(feature = "internals")]
pub mod tun;
#[cfg(not(feature = "internals"))]
mod tun;

mod error;
mod exec_env;
mod kernel;
mod model;
mod ratectl;
mod sysctl;
mod trace_file;
mod userspace;

pub use error::{LabError, Result, SpecField};
pub use exec_env::LabEnv;
pub use lab::{Lab, LabStatus};
pub use model::LinkCounters;
pub use spec::{Backend, LabSpec, LinkSpec};
