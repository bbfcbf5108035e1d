//! The TCP trip-times burst de-framing state machine (`tcp::recv`) on
//! arbitrary streams and read sizes: it never panics, never allows a
//! zero-byte read, and completes at most one burst per 92 bytes.
#![no_main]

use bloatlab_engine::tcp::recv::deframe_for_fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&r, stream)) = data.split_first() else {
        return;
    };
    // Read sizes from 1 byte to 64 KiB, chosen by the first input byte.
    let max_read = 1usize << (r % 17);
    let (bursts, _broken) = deframe_for_fuzzing(stream, max_read);
    assert!(bursts <= stream.len() / 92, "{bursts} bursts in {} bytes", stream.len());
});
