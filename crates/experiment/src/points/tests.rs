use super::*;

fn check_text(text: &str) -> Result<Vec<TypedPoint>, PointError> {
    check(&crate::parse("t.toml", "t", text).unwrap())
}

#[test]
fn points_become_the_commands_typed_configs() {
    let t = "[lab]\ndelay = \"15ms\"\nstage = [\"rate={r} qdisc=fq_codel\"]\n[server]\nenhanced = true\n[test]\nname = \"tcp_upload\"\nlength = 5\n[matrix]\nr = [\"9mbit\", \"11mbit\"]\n\"test.cc\" = [\"cubic\", \"bbr\"]\n";
    let typed = check_text(t).unwrap();
    assert_eq!(typed.len(), 4);
    let last = &typed[3];
    assert_eq!(last.point.name(), "p004_r-11mbit_cc-bbr");
    let stages: Vec<&str> = last.lab.up.stages.iter().map(|s| s.text()).collect();
    assert_eq!(stages, ["rate=11mbit qdisc=fq_codel"]);
    assert!(last.server.engine.enhanced);
    match &last.load {
        Load::Test { name, run } => {
            assert_eq!(*name, TestName::TcpUpload);
            assert_eq!(run.params.loaded, std::time::Duration::from_secs(5));
            assert_eq!(run.params.cc, ["bbr"]);
            assert_eq!(run.test, "tcp_upload");
        }
        other => panic!("{other:?}"),
    }
    let c = check_text("[client]\ntime = 3\ntcp-congestion = \"reno\"\n").unwrap();
    match &c[0].load {
        Load::Client(c) => assert_eq!(c.socket.congestion.as_ref().unwrap(), "reno"),
        other => panic!("{other:?}"),
    }
}

/// The key and line come from the option's own record: clap's context for a flag it
/// refuses, the lab spec's typed field, the plan error's flag.
#[test]
fn errors_carry_the_options_key_and_line() {
    let e = check_text("[lab]\ndelay = \"5ms\"\ndown-loss = \"150%\"\n[test]\nname = \"rrul\"\n")
        .unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (3, Some("down-loss")), "{e}");
    assert!(
        e.message
            .starts_with("invalid value '150%' for '--down-loss"),
        "{e}"
    );
    // The spec's field names `--limit/--up-limit`: the option given is the one at fault.
    let e =
        check_text("[lab]\nstage = \"rate=9mbit\"\nup-limit = \"10p\"\n[test]\nname = \"rrul\"\n")
            .unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (3, Some("up-limit")), "{e}");
    // Unknown keys and conflicts.
    let e = check_text("[test]\nname = \"rrul\"\nidle = 1\nlenght = 5\n").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (4, Some("lenght")), "{e}");
    let e =
        check_text("[test]\nname = \"rpm\"\nrpm-url = \"h\"\nsequential = true\nrpm-port = 1\n")
            .unwrap_err();
    assert_eq!(e.line, 3, "{e}");
    // A swept value: the matrix line; the point and the variant are named.
    let e = check_text(
        "[test]\nname = \"tcp_nup\"\n[matrix]\n\"test.flows\" = [2, 65]\n[quick]\nlength = 1\n",
    )
    .unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (4, Some("flows")), "{e}");
    assert!(
        e.context.contains("p002") && !e.context.contains("quick"),
        "{e}"
    );
    let e = check_text("[test]\nname = \"rrul\"\n[quick]\nprobe-interval = 0\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (4, Some("probe-interval")),
        "{e}"
    );
    assert!(e.context.ends_with("under --quick"), "{e}");
    // A key spelled as the flag's alias: clap names the flag, the alias leads to the line.
    let e = check_text("[test]\nname = \"rrul\"\nidle = 1\ndscp = \"cs9\"\n").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (4, Some("dscp")), "{e}");
    // An optional value: `--near-congestion[=<W>]` in clap's context.
    let e = check_text("[client]\n[matrix]\n\"client.near-congestion\" = [0.4, -1]\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (3, Some("near-congestion")),
        "{e}"
    );
    // A client error that spans options: the line of the one it names first (`len`),
    // whichever order the file gives them in, swept or not.
    let e = check_text("[server]\nenhanced = true\n[client]\ntrip-times = true\nlen = 50\n")
        .unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (5, Some("len")), "{e}");
    assert!(e.message.contains("92 bytes"), "{e}");
    let e = check_text("[client]\nlen = 50\ntime = 1\ntrip-times = true\n").unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (2, Some("len")), "{e}");
    let e = check_text("[client]\ntrip-times = true\n[matrix]\n\"client.len\" = [100, 50]\n")
        .unwrap_err();
    assert_eq!((e.line, e.key.as_deref()), (4, Some("len")), "{e}");
    assert!(e.context.contains("p002"), "{e}");
    // The other flag when only it is in the file, by the name the file uses.
    let e = check_text("[client]\nbandwidth = \"1m\"\nnear-congestion = 0.5\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (3, Some("near-congestion")),
        "{e}"
    );
    // An error about one flag.
    let e = check_text("[client]\nnotsent-lowat = \"5G\"\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_deref()),
        (2, Some("notsent-lowat")),
        "{e}"
    );
}
