//! Fuzz the user-facing link spec parsers (tc spellings) and, for specs that validate, push a
//! few packets through the resulting link: errors, never panics.
#![no_main]

use bloatlab_emu::{
    Link, LinkConfig, LossModel, Qdisc, parse_limit, parse_percent, parse_rate, parse_size, parse_time,
};
use libfuzzer_sys::fuzz_target;
use std::time::Duration;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = parse_rate(text);
    let _ = parse_time(text);
    let _ = parse_percent(text);
    let _ = parse_limit(text);
    let _ = parse_size(text);
    let _ = text.parse::<Qdisc>();
    let _ = text.parse::<LossModel>();
    // "key=value key flag ..." applied to a config, as the CLI does.
    let mut cfg = LinkConfig::default();
    for word in text.split_whitespace().take(16) {
        // `rate=trace:PATH` reads a file: not the fuzzer's business (`/dev/stdin` would block).
        // Schedules are parsed here; traces by `capacity`'s own tests and CapacityTrace::parse.
        if word.contains("trace:") {
            if let Some((_, t)) = word.split_once("trace:") {
                let _ = bloatlab_emu::CapacityTrace::parse("fuzz", &t.replace(',', "\n"));
            }
            continue;
        }
        let r = match word.split_once('=') {
            Some((k, v)) => cfg.set(k, Some(v)),
            None => cfg.set(word, None),
        };
        if let Err(e) = r {
            let _ = e.to_string();
        }
    }
    if cfg.validate().is_err() {
        return;
    }
    // Keep runs short: a huge delay or tiny rate only means packets stay queued.
    let Ok(mut link) = Link::new(&cfg, 7) else { return };
    for (i, chunk) in data.chunks(64).take(32).enumerate() {
        link.enqueue(Duration::from_micros(i as u64 * 50), chunk.to_vec());
    }
    let _ = link.dequeue(Duration::from_secs(3600));
    let _ = link.next_event();
    assert_eq!(link.counters().conservation_gap(), (0, 0));
});
