//! Schema migrations: turn a document of any older version into the current one.
//!
//! Migrations work on untyped JSON (`serde_json::Value`), so the typed structs only ever
//! describe the current version. `MIGRATIONS[i]` upgrades version `i + 1` to `i + 2`;
//! [`migrate()`] applies the chain from the file's version up to [`CURRENT_VERSION`] and
//! stamps each step's version into the document.
//!
//! Adding version N+1: bump `CURRENT_VERSION`, append a step here that rewrites a
//! version-N document, commit `tests/data/vN+1.json`, and keep `tests/data/vN.json`
//! (the tests load every committed version). The compile-time check below refuses a
//! version bump without a step.

use serde_json::Value;

use crate::schema::CURRENT_VERSION;

mod v1;
mod v2;
mod v3;
mod v4;

/// One upgrade step: a version-`k` document in, a version-`k + 1` document out.
pub type Step = fn(Value) -> Result<Value, String>;

/// The upgrade chain: version 1 -> 2 types the metadata ([`v1::to_v2`]); 2 -> 3 names
/// the derived probe RPM as such ([`v2::to_v3`]); 3 -> 4 moves the known keys of
/// `metadata.extra` into typed fields ([`v3::to_v4`]); 4 -> 5 adds the headline grade
/// to `derived` ([`v4::to_v5`]).
pub const MIGRATIONS: &[Step] = &[v1::to_v2, v2::to_v3, v3::to_v4, v4::to_v5];

const _: () = assert!(
    MIGRATIONS.len() + 1 == CURRENT_VERSION as usize,
    "every version after 1 needs a migration step"
);

/// Why a document could not be brought to the current version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MigrationError {
    /// Versions start at 1.
    #[error("unknown results file version {found}")]
    UnknownVersion {
        /// The version in the file.
        found: u64,
    },
    /// Written by a newer bloatlab.
    #[error("written by a newer bloatlab (version {found}); this build reads up to {supported}")]
    NewerVersion {
        /// The version in the file.
        found: u64,
        /// The newest this build reads.
        supported: u32,
    },
    /// A step rejected the document.
    #[error("migrating from version {from} to {}: {message}", from + 1)]
    Step {
        /// The version the failing step starts from.
        from: u32,
        /// What was wrong.
        message: String,
    },
}

/// Brings `value`, a document of version `from_version`, to [`CURRENT_VERSION`].
pub fn migrate(value: Value, from_version: u64) -> Result<Value, MigrationError> {
    migrate_with(value, from_version, MIGRATIONS)
}

/// [`migrate()`] over an explicit chain (`steps[i]` upgrades `i + 1` to `i + 2`); the
/// newest version is `steps.len() + 1`.
pub fn migrate_with(
    mut value: Value,
    from_version: u64,
    steps: &[Step],
) -> Result<Value, MigrationError> {
    let newest = steps.len() as u64 + 1;
    if from_version == 0 {
        return Err(MigrationError::UnknownVersion {
            found: from_version,
        });
    }
    if from_version > newest {
        return Err(MigrationError::NewerVersion {
            found: from_version,
            supported: u32::try_from(newest).unwrap_or(u32::MAX),
        });
    }
    // from_version <= newest <= steps.len() + 1, so these fit.
    for (i, step) in steps.iter().enumerate().skip((from_version - 1) as usize) {
        let from = (i + 1) as u32;
        value = step(value).map_err(|message| MigrationError::Step { from, message })?;
        if let Value::Object(map) = &mut value {
            map.insert("version".into(), Value::from(from + 1));
        }
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    // A pretend history: v2 renamed "a" to "b"; v3 added "c".
    fn v1_to_v2(mut v: Value) -> Result<Value, String> {
        let map = v.as_object_mut().ok_or("not an object")?;
        let a = map.remove("a").ok_or("missing field a")?;
        map.insert("b".into(), a);
        Ok(v)
    }

    fn v2_to_v3(mut v: Value) -> Result<Value, String> {
        let map = v.as_object_mut().ok_or("not an object")?;
        map.insert("c".into(), json!(true));
        Ok(v)
    }

    const STEPS: &[Step] = &[v1_to_v2, v2_to_v3];

    #[test]
    fn applies_the_chain_from_the_files_version() {
        let out = migrate_with(json!({"version": 1, "a": 5}), 1, STEPS).unwrap();
        assert_eq!(out, json!({"version": 3, "b": 5, "c": true}));
        let out = migrate_with(json!({"version": 2, "b": 5}), 2, STEPS).unwrap();
        assert_eq!(out, json!({"version": 3, "b": 5, "c": true}));
        let cur = json!({"version": 3, "b": 5, "c": false});
        assert_eq!(migrate_with(cur.clone(), 3, STEPS).unwrap(), cur);
    }

    #[test]
    fn rejects_unknown_newer_and_broken() {
        assert_eq!(
            migrate_with(json!({}), 4, STEPS),
            Err(MigrationError::NewerVersion {
                found: 4,
                supported: 3
            })
        );
        assert_eq!(
            migrate_with(json!({}), 0, STEPS),
            Err(MigrationError::UnknownVersion { found: 0 })
        );
        let e = migrate_with(json!({"version": 1}), 1, STEPS).unwrap_err();
        assert_eq!(
            e,
            MigrationError::Step {
                from: 1,
                message: "missing field a".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "migrating from version 1 to 2: missing field a"
        );
    }

    #[test]
    fn current_version_is_identity() {
        let v = json!({"version": CURRENT_VERSION, "x": [1, 2]});
        assert_eq!(migrate(v.clone(), u64::from(CURRENT_VERSION)).unwrap(), v);
        assert_eq!(
            migrate(v, u64::from(CURRENT_VERSION) + 1)
                .unwrap_err()
                .to_string(),
            format!(
                "written by a newer bloatlab (version {}); this build reads up to {CURRENT_VERSION}",
                CURRENT_VERSION + 1
            )
        );
    }
}
