//! Commands run inside a lab (`bloatlab lab exec LAB HOST -- bloatlab client|ping|test`)
//! watch the lab's emulator: `lab exec` names the lab in `BLOATLAB_LAB`, and a run
//! through a lab whose emulator is dead, or died during the run, exits 1 naming that
//! cause instead of reporting the loss or silence it causes as a measurement (issue 11).
//!
//! Checked when the command starts and when it has finished: the emulator cannot come
//! back (the watch pins its PID and start time), so a death at any moment in between is
//! seen at the end.

use bloatlab_lab::state::{EmulatorWatch, StateDir};

use crate::exit::{Exit, FAILURE};

/// The lab this process runs in, if any, and its emulator.
#[derive(Debug)]
pub struct InLab(Option<EmulatorWatch>);

fn failure(message: String) -> anyhow::Error {
    anyhow::Error::new(Exit {
        code: FAILURE,
        message,
    })
}

impl InLab {
    /// Outside a lab: nothing to watch. Inside one: exit 1 unless its emulator runs.
    pub fn start() -> anyhow::Result<InLab> {
        let Some(name) = bloatlab_lab::LabEnv::from_env().lab else {
            return Ok(InLab(None));
        };
        EmulatorWatch::start(&StateDir::default(), &name)
            .map(|w| InLab(Some(w)))
            .map_err(|e| {
                failure(format!(
                    "{e} (BLOATLAB_LAB={name}: this runs inside that lab)"
                ))
            })
    }

    /// Exit 1 when the emulator seen at the start is no longer running.
    pub fn check(&self) -> anyhow::Result<()> {
        match &self.0 {
            Some(w) => w.check().map_err(|e| {
                failure(format!(
                    "{e}: it died during the run, so the results are not a measurement"
                ))
            }),
            None => Ok(()),
        }
    }
}
