//! The integration tests of the `bloatlab` binary, as one test binary: one module per
//! area (`engine_tcp`, `lab_calibration`, ...) and a shared [`harness`] (process guards
//! with readiness checks, free ports, temp dirs, labs, and the load lock that keeps
//! timing-sensitive tests away from load-generating ones).
//!
//! Run one area with `cargo test -p bloatlab --test it engine_tcp::`. Tests that need
//! root skip for a normal user and fail under `BLOATLAB_TEST_TIER=full` (the README's test
//! command): `bloatlab_testkit::tier`.

#![forbid(unsafe_code)]

mod harness;

mod attacks;
mod attacks_caps;
mod attacks_http;
mod attacks_more;
mod attacks_reflection;
mod autorate_lab;
mod browser_lab;
mod browser_page;
mod browser_record;
mod cf_speedtest;
mod engine_tcp;
mod engine_udp;
mod experiment_cli;
mod experiment_slurm;
mod flent_export;
mod honest_ends;
mod http_load;
mod http_service;
mod interop_iperf2;
mod lab_accuracy;
mod lab_calibration;
mod lab_chain;
mod lab_cli;
mod lab_ecn_flow;
mod lab_ipv6;
mod lab_kernel;
mod lab_physics;
mod lab_run;
mod lab_trace;
mod ping_loopback;
mod report_cli;
mod rpm_client;
mod rpm_interop;
mod suite_clean_phases;
mod suite_demo;
mod suite_download_sender;
mod suite_test;
mod test_rpm;
mod tune_lab;
