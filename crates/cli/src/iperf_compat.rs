//! iperf 2 habits: `bloatlab -s ...` and `bloatlab -c HOST ...`.
//!
//! iperf 2 selects the role with a flag; bloatlab uses subcommands. We rewrite
//! the first argument before clap sees it so both spellings reach the same
//! parser and every other flag keeps its iperf 2 meaning.

use std::ffi::OsString;

/// Rewrites `bloatlab -s ARGS` to `bloatlab server ARGS` and
/// `bloatlab -c HOST ARGS` (or `-cHOST`, `--client HOST`) to `bloatlab client HOST ARGS`.
pub fn rewrite_args(mut argv: Vec<OsString>) -> Vec<OsString> {
    let Some(first) = argv.get(1).and_then(|a| a.to_str()).map(str::to_owned) else {
        return argv;
    };
    match first.as_str() {
        "-s" | "--server" => argv[1] = "server".into(),
        "-c" | "--client" => argv[1] = "client".into(),
        s if s.starts_with("-c") && s.len() > 2 => {
            let host = s[2..].to_owned();
            argv[1] = "client".into();
            argv.insert(2, host.into());
        }
        s if s.starts_with("--client=") => {
            let host = s["--client=".len()..].to_owned();
            argv[1] = "client".into();
            argv.insert(2, host.into());
        }
        _ => {}
    }
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(args: &[&str]) -> Vec<String> {
        rewrite_args(args.iter().map(OsString::from).collect())
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect()
    }

    #[test]
    fn server_flag_becomes_subcommand() {
        assert_eq!(
            rw(&["bloatlab", "-s", "-p", "5002"]),
            ["bloatlab", "server", "-p", "5002"]
        );
    }

    #[test]
    fn client_flag_forms_become_subcommand() {
        assert_eq!(
            rw(&["b", "-c", "h", "-t", "1"]),
            ["b", "client", "h", "-t", "1"]
        );
        assert_eq!(
            rw(&["b", "-ch", "-t", "1"]),
            ["b", "client", "h", "-t", "1"]
        );
        assert_eq!(rw(&["b", "--client=h"]), ["b", "client", "h"]);
    }

    #[test]
    fn subcommands_pass_through() {
        assert_eq!(rw(&["b", "lab", "list"]), ["b", "lab", "list"]);
        assert_eq!(rw(&["b"]), ["b"]);
    }
}
