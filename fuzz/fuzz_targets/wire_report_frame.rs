//! bloatlab report frame: the streaming helper and parse never panic and agree;
//! parse -> emit reproduces the frame bytes.
#![no_main]

use bloatlab_wire::{ReportFrame, ReportFrameRepr, report_frame_bytes_needed};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let needed = report_frame_bytes_needed(data);
    if let Ok(r) = ReportFrameRepr::parse(&ReportFrame::new_unchecked(data)) {
        assert_eq!(needed, Ok(0));
        let out = r.to_vec();
        assert_eq!(&data[..out.len()], &out[..]);
    }
});
