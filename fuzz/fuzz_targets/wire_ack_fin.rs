//! UDP AckFIN (`server_hdr`): parse and the derived statistics never panic;
//! parse -> emit -> parse is stable.
#![no_main]

use bloatlab_wire::{AckFin, ServerReportRepr};
use libfuzzer_sys::fuzz_target;

fn reparse(r: &ServerReportRepr) -> ServerReportRepr {
    let mut out = vec![0u8; r.buffer_len()];
    r.emit(&mut AckFin::new_unchecked(&mut out[..]));
    ServerReportRepr::parse(&AckFin::new_unchecked(&out[..])).expect("re-parse")
}

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = ServerReportRepr::parse(&AckFin::new_unchecked(data)) {
        let _ = r.jitter.to_duration();
        if let Some(e) = &r.ext {
            let _ = (
                e.transit_stdev(),
                e.mean_transit.to_f64(),
                e.min_transit.to_micros(),
            );
        }
        // Emit normalises once (e.g. a microsecond field >= 1e6 folds into
        // seconds, which then saturate); after that parse/emit is a fixpoint.
        let once = reparse(&r);
        assert_eq!(reparse(&once), once);
        assert_eq!(
            (once.lost, once.datagrams, once.jitter, once.ext),
            (r.lost, r.datagrams, r.jitter, r.ext)
        );
    }
});
