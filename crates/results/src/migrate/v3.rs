//! Version 3 -> 4: the keys of `metadata.extra` that bloatlab itself wrote and read back
//! become typed metadata fields (issue 22): `cpu_utilisation` (an array of fractions),
//! `notes` (an array of strings) and `incomplete` (a journal recovery's record). Each is
//! moved only when its value has the field's shape; anything else stays in `extra`
//! untouched, so no file that loaded before fails to load now. Nothing else changes.

use serde_json::{Map, Value};

/// The migration step (see [`crate::migrate::MIGRATIONS`]).
pub fn to_v4(mut doc: Value) -> Result<Value, String> {
    let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) else {
        // The type check after the migrations reports a missing metadata object.
        return Ok(doc);
    };
    let Some(extra) = meta.get_mut("extra").and_then(Value::as_object_mut) else {
        // No extra (it is optional): nothing to move.
        return Ok(doc);
    };
    let mut moved = Map::new();
    for key in ["cpu_utilisation", "notes", "incomplete"] {
        if extra.get(key).is_some_and(|v| fits(key, v))
            && let Some(v) = extra.remove(key)
        {
            moved.insert(key.to_owned(), v);
        }
    }
    meta.extend(moved);
    Ok(doc)
}

/// Whether `v` reads as the typed field `key`.
fn fits(key: &str, v: &Value) -> bool {
    let all = |v: &Value, f: fn(&Value) -> bool| v.as_array().is_some_and(|a| a.iter().all(f));
    match key {
        "cpu_utilisation" => all(v, Value::is_number),
        "notes" => all(v, Value::is_string),
        "incomplete" => {
            serde_json::from_value::<crate::schema::IncompleteRecord>(v.clone()).is_ok()
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn moves_the_known_keys_and_keeps_the_rest() {
        let v3 = json!({"version": 3, "metadata": {"test": "rrul", "extra": {
            "cpu_utilisation": [0.25, 0.5],
            "notes": ["flow tcp_up_be: refused"],
            "incomplete": {"phase_reached": "loaded", "reached_ns": 7,
                           "runners_missing": ["tcp_up_be"], "reason": "killed"},
            "recovered_from_journal": true,
            "flow_failures": {"tcp_up_be": "refused"}}}, "raw": {"x": 1}});
        let v4 = to_v4(v3).unwrap();
        let m = &v4["metadata"];
        assert_eq!(m["cpu_utilisation"], json!([0.25, 0.5]));
        assert_eq!(m["notes"], json!(["flow tcp_up_be: refused"]));
        assert_eq!(m["incomplete"]["reached_ns"], 7);
        assert_eq!(
            m["extra"],
            json!({"recovered_from_journal": true, "flow_failures": {"tcp_up_be": "refused"}})
        );
        assert_eq!(v4["raw"]["x"], 1);
    }

    #[test]
    fn a_value_of_another_shape_stays_in_extra() {
        let v3 = json!({"metadata": {"extra": {
            "cpu_utilisation": "high", "notes": [1, 2], "incomplete": true}}});
        let v4 = to_v4(v3.clone()).unwrap();
        assert_eq!(v4, v3);
        // No extra at all: unchanged.
        let bare = json!({"metadata": {"test": "ping"}});
        assert_eq!(to_v4(bare.clone()).unwrap(), bare);
        assert_eq!(to_v4(json!({"raw": {}})).unwrap(), json!({"raw": {}}));
    }
}
