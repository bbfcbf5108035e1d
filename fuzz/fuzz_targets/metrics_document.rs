//! `metrics::Document::from_json` (a saved `--json` output, read back by
//! `report` and the suite) on arbitrary text: errors, never panics, and a
//! document that parses serialises and parses again.
#![no_main]

use bloatlab_metrics::json::Document;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(doc) = Document::from_json(text) {
        let again = doc.to_json_pretty();
        assert!(Document::from_json(&again).is_ok(), "re-parse failed: {again}");
    }
});
