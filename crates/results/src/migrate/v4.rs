//! Version 4 -> 5: the `derived` section gains `run_grade`, the run's headline grade (its
//! reference series' worst loaded phase, `bloatlab_stats::analysis::run_grade`). It is
//! computed here from the document's own `raw`, as the writer computes it, so an older
//! file reads with the same headline a new one has. A document without a derived section
//! keeps none; one whose `raw` does not read gets `null` (the type check after the
//! migrations reports what is wrong with `raw`). Nothing else changes.

use serde_json::Value;

use crate::schema::Raw;

/// The migration step (see [`crate::migrate::MIGRATIONS`]).
pub fn to_v5(mut doc: Value) -> Result<Value, String> {
    let grade = doc
        .get("raw")
        .and_then(|raw| serde_json::from_value::<Raw>(raw.clone()).ok())
        .and_then(|raw| {
            let timeline = raw.timeline().ok()?;
            crate::derived::run_grade_of(&raw.latency_series(), &timeline)
        });
    if let Some(derived) = doc.get_mut("derived").and_then(Value::as_object_mut) {
        let v = serde_json::to_value(grade).map_err(|e| e.to_string())?;
        derived.insert("run_grade".to_owned(), v);
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_derived_section_gains_the_headline_grade_from_raw() {
        const MS: u64 = 1_000_000;
        // Idle 20 ms; download +1 ms, upload +55 ms: a mean (28 ms) would be an A, the
        // worst loaded phase is a B.
        let probe = |t: u64, d: u64| json!({"sent_ns": t, "delay_ns": d});
        let doc = json!({"version": 4, "raw": {
            "phases": [
                {"kind": "idle", "name": "idle", "start_ns": 0, "end_ns": 10},
                {"kind": "loaded", "name": "download", "start_ns": 10, "end_ns": 20},
                {"kind": "loaded", "name": "upload", "start_ns": 20, "end_ns": 30}],
            "latency": [{"name": "udp_be", "kind": "rtt",
                "samples": [probe(1, 20 * MS), probe(11, 21 * MS), probe(21, 75 * MS)]}],
            "throughput": []},
            "derived": {"latency": [], "throughput": []}});
        let v5 = to_v5(doc).unwrap();
        assert_eq!(
            v5["derived"]["run_grade"],
            json!({"series": "udp_be", "phase": "upload", "increase_ns": 55 * MS, "grade": "B"})
        );
    }

    #[test]
    fn no_derived_section_stays_none_and_unreadable_raw_grades_null() {
        let doc = json!({"version": 4, "raw": {"phases": []}});
        assert_eq!(to_v5(doc.clone()).unwrap(), doc);
        let doc = json!({"version": 4, "raw": 7, "derived": {"latency": []}});
        assert_eq!(to_v5(doc).unwrap()["derived"]["run_grade"], Value::Null);
    }
}
