//! Shared helpers for the report tests.
#![allow(dead_code)] // Each test binary uses a different subset.

use std::path::PathBuf;

use bloatlab_report::Run;
use bloatlab_testkit::sample::{Queue, rrul_like};

/// The committed version 1 sample of the results crate.
pub fn v1_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/tests/data/v1.json")
}

/// The v1 sample as a run.
pub fn v1() -> Run {
    let file = bloatlab_report::results::load(&v1_path()).expect("v1.json loads");
    Run::new("v1", file).expect("v1.json is consistent")
}

/// The committed version 2 sample (typed metadata, one flow with TCP_INFO).
pub fn v2() -> Run {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../results/tests/data/v2.json");
    let file = bloatlab_report::results::load(&path).expect("v2.json loads");
    Run::new("v2", file).expect("v2.json is consistent")
}

/// Two synthetic runs: a deep FIFO and FQ-CoDel.
pub fn fifo_vs_fqcodel() -> Vec<Run> {
    vec![
        Run::new("fifo", rrul_like(Queue::DeepFifo)).unwrap(),
        Run::new("fq_codel", rrul_like(Queue::FqCodel)).unwrap(),
    ]
}

/// Decodes an 8-bit RGB or RGBA PNG: (width, height, distinct colours).
pub fn png_stats(bytes: &[u8]) -> (u32, u32, usize) {
    let decoder = png::Decoder::new(bytes);
    let mut reader = decoder.read_info().expect("PNG header");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("PNG data");
    let channels = info.color_type.samples();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let mut colours = std::collections::HashSet::new();
    for px in buf[..info.buffer_size()].chunks(channels) {
        colours.insert(px[..3].to_vec());
    }
    (info.width, info.height, colours.len())
}

/// The markup of an HTML page: every `<...>` tag, without the text between tags (where
/// escaped user text lives), plus the contents of `<style>` blocks.
fn markup(html: &str) -> String {
    let mut out = String::new();
    for part in html.split('<').skip(1) {
        let tag = part.split('>').next().unwrap_or("");
        out.push('<');
        out.push_str(tag);
        out.push_str(">\n");
    }
    for style in html.split("<style>").skip(1) {
        out.push_str(style.split("</style>").next().unwrap_or(""));
    }
    out.to_ascii_lowercase()
}

/// Asserts that an HTML page fetches nothing: no tag with a `src`/`href`/URL
/// attribute, no script, link, frame or embedded object, no `url(`/`@import` in CSS.
pub fn assert_self_contained(html: &str) {
    let m = markup(html);
    for bad in [
        "src=", "href=", "url(", "@import", "<script", "<link", "<iframe", "<object", "<embed",
        "<img", "http://", "https://", "ftp://",
    ] {
        assert!(!m.contains(bad), "HTML markup contains {bad:?}");
    }
}

/// A real `bloatlab test rrul46` run (lab, 20 Mbit/s, 2 x 5 ms, `-l 1 --idle 0.5
/// --probe-interval 0.2`), written by the suite: series over IPv4 and IPv6.
pub fn rrul46() -> Run {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/rrul46.json");
    let file = bloatlab_report::results::load(&path).expect("rrul46.json loads");
    Run::new("rrul46", file).expect("rrul46.json is consistent")
}
