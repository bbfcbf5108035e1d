//! The bloatlab lab: network namespaces joined through an emulated link.
//!
//! * [`spec`]: what a lab is (hosts, addresses, the two link directions).
//! * [`lab`]: [`Lab::build`] creates it behind Drop guards; dropping it
//!   (or [`lab::remove_by_name`] after a crash) removes every object.
//! * [`driver`]: one forwarding thread per direction between TUN devices,
//!   around the sans-IO `bloatlab_emu` link model ([`model`]).
//! * [`netns`], [`netlink`], [`tun`], [`sysctl`]: thin syscall modules
//!   (no shelling out to `ip` or `tc`).
//! * [`state`]: `/run/bloatlab/NAME.json`, the record `lab status`,
//!   `lab down` and `lab list` read; [`status`] reads it as one typed
//!   record and [`status_text`] renders that as `lab status` text.
//! * [`control`]: the `bloatlab lab` subcommands (the emulator daemon and
//!   its readiness report, `exec`, `down`, `list`, `set`) as functions the
//!   binary calls after parsing its flags.
//! * [`exec_env`]: the environment `lab exec` gives its commands ([`LabEnv`]), written
//!   and read in that one place.
//!
//! Every namespace is named `bl-LAB-HOST`; interfaces are created inside
//! lab namespaces only, so nothing outside the lab is ever touched.

#![forbid(unsafe_code)]

pub mod control;
pub mod driver;
pub mod error;
pub mod exec_env;
pub mod hostctl;
pub mod kernel;
pub mod lab;
pub mod model;
pub mod names;
pub mod netlink;
pub mod netns;
pub mod offload;
pub mod ratectl;
pub mod signals;
pub mod spec;
pub mod stages;
pub mod state;
pub mod status;
pub mod status_text;
pub mod sysctl;
pub mod trace_file;
pub mod tun;
pub mod userspace;

pub use error::{LabError, Result, SpecField};
pub use exec_env::LabEnv;
pub use lab::{Lab, LabStatus};
pub use spec::{Backend, LabSpec, LinkSpec};
