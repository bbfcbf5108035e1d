//! `--emit sqm|tc|cake-autorate` of `bloatlab tune` and `bloatlab autorate`: the flags, the
//! lab stage lookups they need (the stage's name per direction, its framing), and the
//! printing. The text itself comes from `bloatlab_autorate::emit`.

use bloatlab_autorate::emit::{self, Cells, Deploy, Format, Framing};
use bloatlab_lab::status::StatusReport;

/// `--emit` values: each a format, repeatable or comma-separated.
pub fn formats(values: &[String]) -> Result<Vec<Format>, String> {
    let mut out = Vec::new();
    for v in values.iter().flat_map(|v| v.split(',')) {
        let f = v
            .trim()
            .parse::<Format>()
            .map_err(|e| format!("--emit: {e}"))?;
        if !out.contains(&f) {
            out.push(f);
        }
    }
    Ok(out)
}

/// `--emit-iface`: an interface name as `ip link` takes it.
pub fn check_iface_name(v: &str) -> Result<(), String> {
    let ok = !v.is_empty()
        && v.len() < 16
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.@".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(format!("--emit-iface {v:?}: not an interface name"))
    }
}

/// Lab stage `stage` (name or 1-based position, `path` excluded) of direction `dir`
/// (`up`/`down`) in a lab's status: its name and its framing, if it has any.
pub fn lab_stage(
    report: &StatusReport,
    dir: &str,
    stage: &str,
) -> Result<(String, Option<Framing>), String> {
    let link = if dir == "up" {
        &report.spec.up
    } else {
        &report.spec.down
    };
    let stages: Vec<_> = bloatlab_lab::stages::stage_configs(dir, link)
        .map_err(|e| e.to_string())?
        .unwrap_or_default()
        .into_iter()
        .filter(|s| s.name != "path")
        .collect();
    if stages.is_empty() {
        return Err(format!(
            "--stage {stage}: the {dir} direction of lab {} has no stages (lab up --stage ...)",
            report.name
        ));
    }
    let by_position = stage
        .parse::<usize>()
        .ok()
        .filter(|k| (1..=stages.len()).contains(k))
        .map(|k| &stages[k - 1]);
    let s = stages
        .iter()
        .find(|s| s.name == stage)
        .or(by_position)
        .ok_or_else(|| {
            let names: Vec<&str> = stages.iter().map(|s| s.name.as_str()).collect();
            format!(
                "--stage {stage:?}: the {dir} direction of lab {} has no such stage (stages: {})",
                report.name,
                names.join(", ")
            )
        })?;
    let o = s.link.overhead;
    let cells = match o.framing {
        bloatlab_emu::Framing::None => Cells::None,
        bloatlab_emu::Framing::Atm => Cells::Atm,
        bloatlab_emu::Framing::Ptm => Cells::Ptm,
    };
    let framing = Framing {
        overhead: o.bytes,
        mpu: o.mpu,
        cells,
    }
    .nontrivial();
    Ok((s.name.clone(), framing))
}

/// Prints each format to stdout, a blank line between them.
pub fn print(formats: &[Format], d: &Deploy) {
    for (i, f) in formats.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!("{}", emit::render(*f, d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_flags_are_checked() {
        assert_eq!(
            formats(&["sqm,tc".into(), "tc".into()]).unwrap(),
            [Format::Sqm, Format::Tc]
        );
        let e = formats(&["openwrt".into()]).unwrap_err();
        assert!(
            e.starts_with("--emit") && e.contains("cake-autorate"),
            "{e}"
        );
        assert!(check_iface_name("eth0.2").is_ok());
        assert!(
            check_iface_name("eth0; rm -rf /")
                .unwrap_err()
                .starts_with("--emit-iface")
        );
    }
}
