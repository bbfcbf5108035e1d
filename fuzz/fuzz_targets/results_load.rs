//! Results file loader: any bytes give a typed error or a valid file, never a panic;
//! a file that loads also saves, reloads to the same value, and its derived section
//! can be recomputed.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(file) = bloatlab_results::from_slice(data) {
        let bytes = bloatlab_results::to_vec(&file).expect("a loaded file serialises");
        let again = bloatlab_results::from_slice(&bytes).expect("a saved file reloads");
        assert_eq!(again, file);
        // Loading validated the timeline, so recomputing cannot fail.
        bloatlab_results::Derived::compute(&file.raw).expect("derived from a valid file");
    }
});
