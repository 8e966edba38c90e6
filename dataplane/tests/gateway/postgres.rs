//! A real PostgreSQL server for the record's tests.
//!
//! It serves on a Unix socket in its own folder and on no TCP port: a port chosen free and
//! released before PostgreSQL binds it may be taken by another process meanwhile (and a
//! restart on the same port has that window again), while no other process uses our
//! folder. `pg_ctl -w` waits for this data directory's own server to accept connections.

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A real PostgreSQL server (Debian's, from tests/tools/install.sh) in a temporary folder,
/// on a Unix socket there; stopped on drop. As root it runs as the `postgres` user (it refuses root).
pub struct Postgres {
    /// Its URL (user `switchboard`, trusted; database `postgres`; the socket's folder as
    /// `host`, which sqlx reads as a Unix socket).
    pub url: String,
    dir: PathBuf,
    bin: PathBuf,
}

/// The port number in the socket's name (`.s.PGSQL.5432`); no TCP port is opened.
const PORT: u16 = 5432;

impl Postgres {
    /// Initialises and starts one.
    pub fn start() -> Self {
        let bin = crate::tools::tools_bin();
        let dir = std::env::temp_dir().join(format!("switchboard-pg-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).expect("dir");
        if is_root() {
            run(Command::new("chown").args(["postgres:postgres"]).arg(&dir));
        }
        let url = format!("postgres://switchboard@localhost/postgres?host={}&port={PORT}", dir.display());
        let pg = Self { url, dir, bin };
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
        let options = format!("-p {PORT} -k {} -c listen_addresses='' -c fsync=off", self.dir.display());
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
