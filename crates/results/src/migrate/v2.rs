//! Version 2 -> 3: the `derived` figure that was called `rpm` (and `rpm_class`) is the
//! **probe RPM**, `probe_rpm` and `probe_rpm_class` (issue 20): 60000 / trimmed mean of
//! one probe series' round trips, which must not be taken for the draft's responsiveness
//! that `bloatlab rpm` measures. Nothing else changes.

use serde_json::Value;

/// The migration step (see [`crate::migrate::MIGRATIONS`]).
pub fn to_v3(mut doc: Value) -> Result<Value, String> {
    let Some(series) = doc
        .get_mut("derived")
        .and_then(|d| d.get_mut("latency"))
        .and_then(Value::as_array_mut)
    else {
        // No derived section (it is optional): nothing to rename.
        return Ok(doc);
    };
    for s in series {
        let Some(phases) = s.get_mut("phases").and_then(Value::as_array_mut) else {
            continue;
        };
        for p in phases.iter_mut().filter_map(Value::as_object_mut) {
            for (old, new) in [("rpm", "probe_rpm"), ("rpm_class", "probe_rpm_class")] {
                if let Some(v) = p.remove(old) {
                    p.insert(new.to_owned(), v);
                }
            }
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renames_the_probe_rpm_and_leaves_the_rest() {
        let v2 = json!({"version": 2, "raw": {"x": 1}, "derived": {"latency": [
            {"name": "udp_be", "phases": [{"phase": "loaded", "rpm": 405.2, "rpm_class": "Fair", "grade": "C"},
                                          {"phase": "idle", "rpm": null, "rpm_class": null}]}],
            "throughput": []}});
        let v3 = to_v3(v2).unwrap();
        let p = &v3["derived"]["latency"][0]["phases"];
        assert_eq!(p[0]["probe_rpm"], 405.2);
        assert_eq!(p[0]["probe_rpm_class"], "Fair");
        assert_eq!(p[0]["grade"], "C");
        assert!(p[0].get("rpm").is_none() && p[1].get("rpm_class").is_none());
        assert_eq!(p[1]["probe_rpm"], Value::Null);
        assert_eq!(v3["raw"]["x"], 1);
        // No derived section: unchanged.
        let bare = json!({"version": 2, "raw": {}});
        assert_eq!(to_v3(bare.clone()).unwrap(), bare);
    }
}
