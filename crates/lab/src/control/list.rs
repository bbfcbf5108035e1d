//! `lab list` as text, rendered from the record `lab list --json` prints.

use crate::spec::Backend;
use crate::state::StateDir;
use crate::status::LabList;
use std::fmt::Write as _;

/// Every lab in `dir`, and leftover lab namespaces no lab owns.
pub fn read(dir: &StateDir) -> LabList {
    crate::status::list(dir, crate::netns::list())
}

/// The backend as `lab up --backend` and the JSON spell it.
fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Userspace => "userspace",
        Backend::Kernel => "kernel",
    }
}

/// `lab list` text: one line per lab (name, backend, whether its emulator
/// runs, hosts), then the leftover namespaces.
pub fn render(list: &LabList) -> String {
    let mut out = String::new();
    if list.labs.is_empty() {
        out.push_str("no labs\n");
    }
    for l in &list.labs {
        let _ = writeln!(
            out,
            "{:<16} {:<9} {:<8} {}",
            l.name,
            backend_name(l.backend),
            if l.emulator_alive { "running" } else { "DEAD" },
            l.hosts.join(",")
        );
    }
    if !list.orphan_namespaces.is_empty() {
        let _ = writeln!(
            out,
            "leftover namespaces without a lab (remove with `bloatlab lab down NAME`): {}",
            list.orphan_namespaces.join(" ")
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::LabSpec;
    use crate::state::LabState;
    use crate::status::LabListEntry;

    #[test]
    fn backend_names_are_the_json_ones() {
        for b in [Backend::Userspace, Backend::Kernel] {
            assert_eq!(
                serde_json::to_value(b).unwrap(),
                serde_json::Value::from(backend_name(b))
            );
        }
    }

    #[test]
    fn labs_and_leftovers_are_listed() {
        let empty = LabList {
            labs: vec![],
            orphan_namespaces: vec![],
        };
        assert_eq!(render(&empty), "no labs\n");
        let mut spec = LabSpec::new("h14ls");
        spec.backend = Backend::Kernel;
        let st = LabState::new(&spec, &StateDir::default());
        let list = LabList {
            labs: vec![LabListEntry::of(&st)],
            orphan_namespaces: vec!["bl-h14old-client".into(), "bl-h14old-server".into()],
        };
        assert_eq!(
            render(&list),
            "h14ls            kernel    DEAD     client,server\n\
             leftover namespaces without a lab (remove with `bloatlab lab down NAME`): \
             bl-h14old-client bl-h14old-server\n"
        );
    }
}
