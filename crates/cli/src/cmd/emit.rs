//! `--emit sqm|tc|cake-autorate` of `bloatlab tune` and `bloatlab autorate`: the flags, the
//! lab stage lookups they need (the stage's name per direction, its framing), and the
//! printing. The text itself comes from `bloatlab_autorate::emit`.

use bloatlab_autorate::emit::{self, Cells, Deploy, Format, Framing};
use bloatlab_lab::status::StatusReport;

/// `--emit` and `--emit-iface` values, checked where the flags are defined.
pub use bloatlab_invoke::autorate::{check_iface_name, formats};

/// Lab stage `stage` (name or 1-based position, `path` excluded) of direction `dir`
/// (`up`/`down`) in a lab's status: its name and its framing, if it has any.
pub fn lab_stage(
    report: &StatusReport,
    dir: &str,
    stage: &str,
) -> Result<(String, Option<Framing>), String> {
    let s = bloatlab_lab::stages::controllable_stage(&report.spec, dir, stage)?;
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

    fn report(stages: &[&str]) -> StatusReport {
        let mut spec = bloatlab_lab::LabSpec::new("h23e");
        for l in [&mut spec.up, &mut spec.down] {
            l.stages = stages.iter().map(|s| s.parse().unwrap()).collect();
            l.delay = Some(std::time::Duration::from_millis(10).into());
        }
        StatusReport {
            name: "h23e".into(),
            backend: spec.backend,
            phase: bloatlab_lab::state::Phase::Running,
            pid: 0,
            emulator_alive: true,
            problem: None,
            hosts: vec![],
            spec,
            counters: None,
        }
    }

    #[test]
    fn a_lab_stage_is_found_by_name_or_position_with_its_framing() {
        let r = report(&[
            "name=router rate=9mbit qdisc=fq_codel overhead=44 framing=atm",
            "rate=10mbit qdisc=fifo limit=100p",
        ]);
        let (name, f) = lab_stage(&r, "up", "router").unwrap();
        assert_eq!(name, "router");
        assert_eq!(
            f,
            Some(Framing {
                overhead: 44,
                mpu: 0,
                cells: Cells::Atm
            })
        );
        assert_eq!(lab_stage(&r, "down", "1").unwrap().0, "router");
        assert_eq!(lab_stage(&r, "down", "2").unwrap(), ("2".to_string(), None));
        let e = lab_stage(&r, "up", "path").unwrap_err();
        assert!(
            e.contains("--stage \"path\"") && e.contains("router, 2"),
            "{e}"
        );
        let e = lab_stage(&report(&[]), "up", "1").unwrap_err();
        assert!(e.contains("no stages"), "{e}");
    }

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
