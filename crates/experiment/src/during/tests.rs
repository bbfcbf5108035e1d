use super::*;
use crate::points::check;
use clap::Parser;

fn exp(text: &str) -> Experiment {
    crate::parse("t.toml", "t", text).unwrap()
}

/// variable-link's shape: the command in a zipped matrix field, empty for the other arm.
const ARMS: &str = r#"[lab]
down-stage = "name=shaper rate={arm.rate} qdisc=fq_codel"
[test]
name = "rrul"
[during]
args = "{arm.during}"
[matrix]
arm = [{rate = "1gbit", during = "", label = "none"},
       {rate = "20mbit", label = "autorate", during = "autorate --lab {lab} --stage shaper --direction down --min 2mbit --base 10mbit --max 20mbit --cut-max 0.3 -o {out}"}]
"#;

/// The plan a sidecar's command line resolves to, as `bloatlab autorate` would.
fn reparse(argv: &[String]) -> Plan {
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: AutorateArgs,
    }
    Cli::try_parse_from(argv).unwrap().a.resolve().unwrap()
}

#[test]
fn a_point_s_sidecar_is_autorate_s_plan_started_on_the_run_s_lab() {
    let e = exp(ARMS);
    let p = matrix::points(&e);
    assert_eq!(of_point(&e, &p[0]).unwrap(), None);
    let d = of_point(&e, &p[1]).unwrap().unwrap();
    assert_eq!(d.plan().params.cut_max, 0.3);
    assert_eq!(d.plan().down.unwrap().base.0, 10_000_000);
    assert_eq!(d.plan().up, None);
    // The run's lab and output file, written back from the plan (not the file's words).
    let argv = d.to_argv("ex42", Path::new("/r/p002.during.json"));
    assert_eq!(
        argv[..5],
        ["autorate", "--lab", "ex42", "--stage", "shaper"]
    );
    let back = reparse(&argv);
    let mut want = d.plan().clone();
    want.place = Place::Lab {
        lab: "ex42".into(),
        stage: "shaper".into(),
    };
    want.output = Some("/r/p002.during.json".into());
    assert_eq!(back, want);
    // Without -o {out}: no output file.
    let e = exp(&ARMS.replace(" -o {out}", ""));
    let d = of_point(&e, &matrix::points(&e)[1]).unwrap().unwrap();
    assert_eq!(reparse(&d.to_argv("ex1", Path::new("o.json"))).output, None);
    // Without [during], none; the checked points carry it.
    let e = exp("[test]\nname = \"rrul\"\n");
    assert_eq!(of_point(&e, &matrix::points(&e)[0]).unwrap(), None);
    let typed = check(&exp(ARMS)).unwrap();
    assert!(typed[0].during.is_none() && typed[1].during.is_some());
    // A placeholder [matrix] does not declare is refused by the file's parser; {lab} and
    // {out} are the runner's.
    let bad = ARMS.replace("{arm.during}", "autorate {nope} {lab} {out}");
    let err = crate::parse("d", "d", &bad).unwrap_err();
    assert_eq!(err.key, "during.args", "{err}");
    assert!(err.why.contains("{nope}"), "{err}");
}

/// A bad sidecar is refused when the file is checked, at the line of the word at fault
/// (the matrix parameter's for a swept value, `args`' for its own words).
#[test]
fn a_bad_sidecar_is_refused_at_check_time_with_its_line() {
    let swept = |from: &str, to: &str| check(&exp(&ARMS.replace(from, to))).unwrap_err();
    // A value autorate's resolve refuses, in the matrix's arm (line 8).
    let e = swept("--cut-max 0.3", "--cut-max 1.5");
    assert_eq!((e.line, e.key.as_deref()), (8, Some("arm")), "{e}");
    assert!(e.message.starts_with("--cut-max 1.5"), "{e}");
    assert!(
        e.context.starts_with("[during] of point p002_arm-autorate"),
        "{e}"
    );
    // One clap refuses, and an unknown flag.
    let e = swept("--min 2mbit", "--bloat-count many");
    assert!(e.message.contains("--bloat-count"), "{e}");
    assert_eq!(e.line, 8, "{e}");
    let e = swept("--cut-max 0.3", "--bogus");
    assert!(e.message.contains("--bogus"), "{e}");
    // The run's lab and output only, and no --duration.
    for (from, to, want) in [
        ("--lab {lab}", "--lab mylab", "--lab {lab}"),
        ("-o {out}", "-o /tmp/x.json", "-o {out}"),
        ("-o {out}", "--duration 5s", "--duration"),
        ("autorate", "ping", "`autorate`"),
    ] {
        let e = swept(from, to);
        assert!(e.message.contains(want), "{to}: {e}");
        assert_eq!(e.line, 8, "{to}: {e}");
    }
    // Words of `args` itself: its line and key.
    let own = "[test]\nname = \"rrul\"\n[during]\nargs = \"autorate --lab {lab} --stage 1 --min 2mbit --base 1mbit --max 3mbit\"\n";
    let e = check(&exp(own)).unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (4, Some("args")), "{e}");
    assert!(e.message.starts_with("--base down"), "{e}");
}

#[test]
fn the_builtin_variable_link_checks_with_its_autorate_arm_typed() {
    let text = crate::builtin::get("variable-link").unwrap();
    let e = crate::parse("<built-in variable-link>", "variable-link", text).unwrap();
    let typed = check(&e).unwrap();
    let arms: Vec<bool> = typed.iter().map(|t| t.during.is_some()).collect();
    assert_eq!(arms, [false, false, true]);
    let d = typed[2].during.as_ref().unwrap();
    assert_eq!(d.plan().params.cut_max, 0.3);
    assert_eq!(d.plan().interval, std::time::Duration::from_millis(25));
    assert!(d.output);
}

/// A `--stage` the point's lab does not have (or a lab without stages) is refused when the
/// file is checked, at the line of the word, naming the stages there are; a stage by its
/// 1-based position is found as autorate finds it.
#[test]
fn a_stage_the_lab_does_not_have_is_refused_at_check_time() {
    let e = check(&exp(&ARMS.replace("--stage shaper", "--stage modem"))).unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (8, Some("arm")), "{e}");
    assert!(
        e.message.contains("\"modem\"") && e.message.contains("stages: shaper"),
        "{e}"
    );
    // The stage is the down direction's: a lab whose stages are all upstream has none there.
    let up_only = ARMS.replace("down-stage", "up-stage");
    let e = check(&exp(&up_only)).unwrap_err();
    assert!(
        e.message.contains("down direction") && e.message.contains("no stages"),
        "{e}"
    );
    assert!(check(&exp(&ARMS.replace("--stage shaper", "--stage 1"))).is_ok());
    assert!(check(&exp(&ARMS.replace("--stage shaper", "--stage 2"))).is_err());
}
