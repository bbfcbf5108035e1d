//! `bloatlab autorate`: an adaptive shaper controller in the class of cake-autorate
//! (github.com/lynxthecat/cake-autorate), and the shaper configurations bloatlab prints for
//! people to paste (`--emit sqm|tc|cake-autorate`).
//!
//! * [`params`]: the controller's settings (rate bounds per direction, thresholds, factors)
//!   and their checks, each error naming its `bloatlab autorate` flag.
//! * [`controller`]: the sans-IO core. It never reads a clock or touches a socket: the
//!   driver hands it delay samples and load measurements with their `now`, and it answers
//!   with rate changes. Tested on a virtual clock.
//! * [`log`]: the run's record (changes, periodic ticks, the summary the emitted
//!   configuration is made from) and its JSON form (`-o`).
//! * [`emit`]: OpenWrt sqm-scripts sections, `tc` commands and cake-autorate configs.
//!
//! docs/autorate.md documents the command and the algorithm.

#![forbid(unsafe_code)]

pub mod controller;
pub mod emit;
pub mod log;
pub mod params;

pub use controller::{Change, Controller, Direction, Reason};
pub use params::{Bounds, ParamError, Params};
