use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// `hookd` with a clean environment (no HOOKD_* from the caller) in directory `dir`.
pub fn hookd(dir: &Path) -> Command {
    let mut cmd = hookd_bin();
    cmd.current_dir(dir);
    cmd.env("HOOKD_BIND", "127.0.0.1:0")
        .env("RUST_BACKTRACE", "1");
    cmd
}

/// The binary with no HOOKD_* from the caller but the test databases' `secret_keys`
/// (`store::testing::TEST_KEYS`), so it opens what the tests' own stores sealed.
pub fn hookd_bin() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_hookd"));
    for (k, _) in std::env::vars() {
        if k.starts_with("HOOKD_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("HOOKD_SECRET_KEYS", store::testing::TEST_KEYS);
    cmd
}

/// Runs to completion with a deadline.
pub fn run(cmd: &mut Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn hookd");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("hookd did not finish within 60 s")
        .expect("wait for hookd")
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `hookd tenant create --json` in `dir`: the new tenant's id and API key.
pub fn create_tenant(dir: &Path) -> (String, String) {
    let out = run(hookd(dir).args([
        "tenant",
        "create",
        "--name",
        "Acme",
        "--email",
        "ops@acme.test",
        "--json",
    ]));
    assert!(out.status.success(), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("one JSON object");
    let field = |k: &str| v[k].as_str().expect(k).to_owned();
    (field("tenant_id"), field("api_key"))
}

/// A failed run must explain itself on one line, without a panic or backtrace.
pub fn assert_clean_failure(o: &Output, must_mention: &[&str]) {
    let err = stderr(o);
    assert!(
        !o.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    let lines: Vec<_> = err
        .lines()
        .filter(|l| l.starts_with("hookd: error:"))
        .collect();
    assert_eq!(lines.len(), 1, "one error line expected, stderr: {err}");
    for word in must_mention {
        assert!(
            lines[0].contains(word),
            "error should mention {word:?}: {}",
            lines[0]
        );
    }
    assert!(
        !err.contains("panicked") && !err.contains("stack backtrace"),
        "{err}"
    );
}

/// A running `hookd serve`.
pub struct Server {
    pub child: Child,
    pub base: String,
    /// Kept so the reader thread keeps draining hookd's stderr.
    pub _log: mpsc::Receiver<String>,
    /// The lines logged up to "listening on".
    pub started_log: Vec<String>,
}

impl Server {
    /// Starts `cmd serve` and waits for its "listening on" line.
    pub fn start(mut cmd: Command) -> Server {
        let child = cmd
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn hookd serve");
        let (tx, rx) = mpsc::channel();
        // Owned by `Server` at once, so its Drop kills and reaps the child on any panic below.
        let mut server = Server {
            child,
            base: String::new(),
            _log: rx,
            started_log: Vec::new(),
        };
        let stderr = server.child.stderr.take().expect("stderr");
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let line = server
                ._log
                .recv_timeout(left)
                .expect("hookd serve did not report listening within 30 s");
            server.started_log.push(line.clone());
            if let Some(rest) = line.split("listening on http://").nth(1) {
                // Text or JSON logs (with fields after the message): the address is the run
                // of host and port characters.
                let addr = rest
                    .split(|c: char| !(c.is_ascii_alphanumeric() || ".:[]".contains(c)))
                    .next()
                    .unwrap_or_default();
                server.base = format!("http://{addr}");
                return server;
            }
        }
    }

    /// Stops it (SIGTERM) and returns all it logged.
    pub fn stop_and_log(mut self) -> String {
        self.signal("TERM");
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().expect("try_wait").is_none()
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut lines = std::mem::take(&mut self.started_log);
        // The reader thread ends with hookd's stderr.
        while let Ok(line) = self._log.recv_timeout(Duration::from_secs(5)) {
            lines.push(line);
        }
        lines.join("\n")
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(ok.success());
    }

    /// Waits for exit after a signal; returns the exit code.
    pub fn wait_exit(mut self, within: Duration) -> Option<i32> {
        let deadline = std::time::Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code();
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("hookd did not exit within {within:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `program script` with `input` on stdin; `need` says what to install when the program is
/// missing.
pub fn run_script(program: &str, script: &str, input: &[u8], need: &str) -> Output {
    use std::io::Write;
    let mut child = Command::new(program)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{program} is needed for this test ({need}): {e}"));
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// An HTTP server of the test's own on a free loopback port (one worker), with the routes and
/// data `configure` adds: its base URL and the handle that stops it.
pub fn loopback_server(
    configure: impl Fn(&mut actix_web::web::ServiceConfig) + Clone + Send + 'static,
) -> (String, actix_web::dev::ServerHandle) {
    let server =
        actix_web::HttpServer::new(move || actix_web::App::new().configure(configure.clone()))
            .workers(1)
            .bind("127.0.0.1:0")
            .unwrap();
    let base = format!("http://{}", server.addrs()[0]);
    let server = server.run();
    let handle = server.handle();
    tokio::spawn(server);
    (base, handle)
}
