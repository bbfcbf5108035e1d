//! docs/experiments.md's Slurm recipe, as written, on a single-node Slurm that the test brings
//! up itself: `munged`, `slurmctld` and `slurmd` (Debian's `munge` and `slurm-wlm`, installed
//! by scripts/setup.sh) run in the foreground as this test's children (no systemd), with their
//! config, state, sockets and free ports in a temporary directory. A 2-task job array runs a
//! `--quick` two-point experiment, one shard per task, and `experiment merge` joins the shards.
//! Skips, saying why, only where those programs are not installed.

use bloatlab_testkit::tier;

use crate::harness::lab::*;
use crate::harness::{free_port, load, tempdir};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const FILE: &str = r#"
[experiment]
name = "slurmtiny"

[lab]
delay = "5ms"
rate = "{rate}"

[test]
name = "tcp_upload"
length = 1
idle = 0.5

[matrix]
rate = ["9mbit", "12mbit"]
"#;

/// The daemons, killed by PID (and reaped) when the test ends, however it ends.
struct Daemons(Vec<Child>);

impl Drop for Daemons {
    fn drop(&mut self) {
        for c in self.0.iter_mut().rev() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn missing_programs() -> Vec<&'static str> {
    ["munged", "slurmctld", "slurmd", "sbatch", "sinfo"]
        .into_iter()
        .filter(|p| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {p}")])
                .stdout(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .collect()
}

fn spawn(dir: &Path, conf: &Path, argv: &[&str]) -> Child {
    Command::new(argv[0])
        .args(&argv[1..])
        .env("SLURM_CONF", conf)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", argv[0]))
}

#[test]
fn slurm_job_array_runs_shards_that_merge() {
    if !tier::root("slurm_job_array_runs_shards_that_merge") {
        return;
    }
    let missing = missing_programs();
    if !missing.is_empty() {
        eprintln!(
            "skipped slurm_job_array_runs_shards_that_merge: {} not installed (Debian's slurm-wlm and munge; scripts/setup.sh installs them)",
            missing.join(", ")
        );
        return;
    }
    let _load = load::shared();
    let tmp = tempdir();
    let d = tmp.path().to_path_buf();
    for sub in ["spool", "state", "log", "munge"] {
        std::fs::create_dir_all(d.join(sub)).unwrap();
    }
    let host = String::from_utf8(Command::new("hostname").arg("-s").output().unwrap().stdout)
        .unwrap()
        .trim()
        .to_string();
    let socket = d.join("munge/munge.socket");
    let (ctld_port, d_port) = (free_port(), free_port());
    let conf = d.join("slurm.conf");
    let p = |s: &str| d.join(s).display().to_string();
    std::fs::write(
        &conf,
        format!(
            "ClusterName=bl{ctld_port}\nSlurmctldHost={host}\nSlurmctldPort={ctld_port}\nSlurmdPort={d_port}\n\
             AuthType=auth/munge\nAuthInfo=socket={}\nCredType=cred/munge\nSlurmUser=root\nSlurmdUser=root\n\
             StateSaveLocation={}\nSlurmdSpoolDir={}\nSlurmctldPidFile={}\nSlurmdPidFile={}\n\
             SlurmctldLogFile={}\nSlurmdLogFile={}\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nReturnToService=2\nMpiDefault=none\n\
             JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
             NodeName={host} CPUs={} State=UNKNOWN\nPartitionName=bl Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n",
            socket.display(),
            p("state"),
            p("spool"),
            p("slurmctld.pid"),
            p("slurmd.pid"),
            p("log/slurmctld.log"),
            p("log/slurmd.log"),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        ),
    )
    .unwrap();
    let sock = socket.display().to_string();
    let (pid, log, seed) = (
        p("munge/munged.pid"),
        p("munge/munged.log"),
        p("munge/seed"),
    );
    let mut daemons = Daemons(vec![spawn(
        &d,
        &conf,
        &[
            "munged",
            "-F",
            "--force",
            "--socket",
            &sock,
            "--pid-file",
            &pid,
            "--log-file",
            &log,
            "--seed-file",
            &seed,
        ],
    )]);
    assert!(
        wait_until(Duration::from_secs(10), || socket.exists()),
        "munged did not start"
    );
    daemons.0.push(spawn(&d, &conf, &["slurmctld", "-D"]));
    daemons.0.push(spawn(&d, &conf, &["slurmd", "-D"]));
    let idle = wait_until(Duration::from_secs(30), || {
        Command::new("sinfo")
            .args(["-h", "-o", "%t"])
            .env("SLURM_CONF", &conf)
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
    });
    let logs = || {
        format!(
            "{}{}",
            std::fs::read_to_string(d.join("log/slurmctld.log")).unwrap_or_default(),
            std::fs::read_to_string(d.join("log/slurmd.log")).unwrap_or_default()
        )
    };
    assert!(idle, "the node did not come up: {}", logs());

    // The docs' recipe, with 2 tasks and --quick.
    std::fs::write(d.join("sweep.toml"), FILE).unwrap();
    let bin_dir = Path::new(BIN).parent().unwrap().display().to_string();
    std::fs::write(
        d.join("job.sh"),
        format!(
            "#!/bin/bash\n#SBATCH --array=0-1\n#SBATCH --cpus-per-task=1\n#SBATCH --output={}/job-%a.out\n\
             export PATH={bin_dir}:$PATH\ncd {}\n\
             bloatlab experiment run sweep.toml --quick --shard \"$SLURM_ARRAY_TASK_ID/2\" --out \"shard-$SLURM_ARRAY_TASK_ID\"\n",
            d.display(),
            d.display()
        ),
    )
    .unwrap();
    let o = Command::new("timeout")
        .args(["300", "sbatch", "--wait", "job.sh"])
        .env("SLURM_CONF", &conf)
        .current_dir(&d)
        .output()
        .unwrap();
    let jobs = || {
        (0..2)
            .map(|k| std::fs::read_to_string(d.join(format!("job-{k}.out"))).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(
        o.status.success(),
        "sbatch: {}{}\njobs: {}\n{}",
        stdout(&o),
        stderr(&o),
        jobs(),
        logs()
    );
    let all = d.join("all");
    let m = bl(&[
        "experiment",
        "merge",
        d.join("shard-0").to_str().unwrap(),
        d.join("shard-1").to_str().unwrap(),
        "--out",
        all.to_str().unwrap(),
    ]);
    assert!(
        m.status.success(),
        "{}{}\n{}",
        stdout(&m),
        stderr(&m),
        jobs()
    );
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(all.join("summary.json")).unwrap()).unwrap();
    let runs: Vec<&str> = summary["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["run"].as_str())
        .collect();
    assert_eq!(
        runs,
        ["p001_rate-9mbit_r1", "p002_rate-12mbit_r1"],
        "{summary}"
    );
    assert_eq!(summary["quick"], true);
    assert_eq!(summary["partial"], false);
    drop(daemons);
}
