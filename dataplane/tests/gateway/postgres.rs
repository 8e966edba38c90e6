//! A real PostgreSQL server for the record's tests.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A real PostgreSQL server (Debian's, from tests/tools/install.sh) in a temporary folder,
/// on a free port; stopped on drop. As root it runs as the `postgres` user (it refuses root).
pub struct Postgres {
    /// Its URL (user `switchboard`, trusted; database `postgres`).
    pub url: String,
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
}

impl Postgres {
    /// Initialises and starts one.
    pub fn start() -> Self {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/tools/install.sh");
        let out = Command::new("bash").arg(&script).output().expect("runs tests/tools/install.sh");
        assert!(out.status.success(), "tests/tools/install.sh failed: {}", String::from_utf8_lossy(&out.stderr));
        let bin = PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or_default().trim());
        let dir = std::env::temp_dir().join(format!("switchboard-pg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        if is_root() {
            run(Command::new("chown").args(["postgres:postgres"]).arg(&dir));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
        let pg = Self { url: format!("postgres://switchboard@127.0.0.1:{port}/postgres"), dir, bin, port };
        run(pg.command("initdb").args(["-U", "switchboard", "--auth=trust", "-E", "UTF8", "-D"]).arg(pg.data()));
        pg.start_again();
        pg
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn command(&self, tool: &str) -> Command {
        // The link's target: the `postgres` user cannot look into root's cache.
        let path = std::fs::canonicalize(self.bin.join(tool)).expect("installed");
        if is_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    /// Starts it (again).
    pub fn start_again(&self) {
        let options = format!("-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off", self.port, self.dir.display());
        let log = self.dir.join("log");
        run(self
            .command("pg_ctl")
            .args(["-w", "-t", "60", "-D"])
            .arg(self.data())
            .args(["-o", &options, "-l"])
            .arg(log)
            .arg("start"));
    }

    /// Stops it (fast shutdown).
    pub fn stop(&self) {
        run(self.command("pg_ctl").args(["-w", "-m", "fast", "-D"]).arg(self.data()).arg("stop"));
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["-m", "immediate", "-D"])
            .arg(self.data())
            .arg("stop")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn run(command: &mut Command) {
    let out = command.output().expect("runs");
    assert!(
        out.status.success(),
        "{command:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
