//! What the userspace backend (the emulator between TUN devices, built by
//! `Lab::build`) checks before it creates anything: that each direction
//! becomes a valid emulator configuration. The values were parsed when they
//! were read; this is where they meet each other in the emulator's model (a
//! qdisc parameter the chosen qdisc does not have, CoDel's interval below
//! its target, a Gilbert-Elliott loss that never leaves its bad state, ...).
//! `--offload`, `--trace` and the delay calibration need this backend; the
//! kernel backend refuses them (crate::kernel::check).

use crate::error::Result;
use crate::model::link_config;
use crate::spec::LabSpec;
use crate::stages::stage_configs;

/// Checks that both directions of `spec` can be emulated.
pub fn check(spec: &LabSpec) -> Result<()> {
    for (dir, l) in [("up", &spec.up), ("down", &spec.down)] {
        if stage_configs(dir, l)?.is_none() {
            link_config(dir, l)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bloatlab_emu::Spelled;

    fn spec() -> LabSpec {
        LabSpec::new("h15u")
    }

    #[test]
    fn fields_that_contradict_in_the_emulator_are_refused_naming_the_option() {
        let mut s = spec();
        s.down.params = vec![Spelled::parse("target=5ms").unwrap()];
        let e = check(&s).unwrap_err().to_string();
        assert!(
            e.contains("--qdisc-param/--down-qdisc-param") && e.contains("target"),
            "{e}"
        );
        let mut s = spec();
        s.up.qdisc = Some(Spelled::parse("codel").unwrap());
        s.up.params = ["target=5ms", "interval=2ms"]
            .map(|p| Spelled::parse(p).unwrap())
            .to_vec();
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("--qdisc-param/--up-qdisc-param"), "{e}");
        let mut s = spec();
        s.up.loss = Some(Spelled::parse("gemodel 1% 0%").unwrap());
        let e = check(&s).unwrap_err().to_string();
        assert!(e.contains("--loss/--up-loss"), "{e}");
        let mut s = spec();
        s.up.qdisc = Some(Spelled::parse("fq_codel").unwrap());
        s.up.params = vec![Spelled::parse("flows=64").unwrap()];
        s.down.stages = vec![Spelled::parse("rate=9mbit qdisc=cake").unwrap()];
        s.down.delay = Some(Spelled::parse("10ms").unwrap());
        check(&s).unwrap();
    }
}
