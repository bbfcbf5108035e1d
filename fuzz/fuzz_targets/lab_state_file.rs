//! The lab state file (`/run/bloatlab/NAME.json`): any bytes give an error or
//! a state that writes back and reads again; never a panic.
#![no_main]

use bloatlab_lab::state::LabState;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(st) = serde_json::from_slice::<LabState>(data) {
        let bytes = serde_json::to_vec(&st).expect("a loaded state serialises");
        let again: LabState = serde_json::from_slice(&bytes).expect("a saved state reloads");
        assert_eq!(again.name, st.name);
    }
});
