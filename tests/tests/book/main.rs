//! The book in `docs/` says only what is so:
//!
//! - it builds with the mdBook `tests/tools/install.sh` installs, and every internal link of
//!   the built HTML — a page, a page's `#anchor`, an asset — resolves (external links are
//!   not fetched);
//! - the shell commands the getting-started and tour pages mark run as written against a
//!   real local-mode process, and print what the pages show;
//! - every YAML block a page marks applies to the real control plane;
//! - the install page's cluster commands (`helm install`, `kubectl apply -f
//!   examples/banking`, …) run on the real control plane (`cluster.rs`);
//! - every other shell command and YAML block is on a reviewed list, with the reason it is
//!   not run and what is checked instead (`coverage.rs`): a new one fails until it is marked
//!   or listed.
//!
//! How a page marks its blocks (the fence's info string):
//!
//! - ```` ```sh,server ````: a long-running command (local mode), started in the background
//!   and kept until the page's end; the `text,output` block after it is what it prints once
//!   it is up;
//! - ```` ```sh,run ````: a command that must exit 0; a `text,stdin` block after it is what
//!   the reader types (its standard input), a `text,output` block what it must print (each
//!   line somewhere in its output);
//! - ```` ```yaml,apply ````: applied, in a namespace of the test's own;
//! - ```` ```sh,cluster ````: run with the pinned `helm` and `kubectl` against the control
//!   plane (`cluster.rs` says what it substitutes); a `text,output` block after it is what
//!   it must print.
//!
//! Commands are run as written, from the repository root, with these substitutions: `cargo
//! run -p switchboard-dataplane --bin switchboard --` and `cargo run -p switchboard-operator
//! --` are the binaries cargo built, and local mode's port 8080 is a free port
//! (`SWITCHBOARD_LOCAL_PORT`), so the test runs beside others. `HOME` is a folder of the
//! test's own (and `XDG_DATA_HOME` unset), so local mode's record is its own too. The
//! getting-started and tour pages must keep their marked commands (the test counts them);
//! other pages' marked commands run too.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::os::unix::process::CommandExt as _;
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use switchboard_tests::cluster::{TestNamespace, cluster, tools_bin};
use switchboard_tests::manifests::{apply_yaml, install_crds};
use switchboard_tests::operator::operator_binary;
use switchboard_tests::ports;
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::switchboard_binary;

mod cluster;
mod coverage;

/// How long one marked command may run: the whole Example Bank suite takes ~35 s alone.
const RUN_LIMIT: Duration = Duration::from_secs(240);
/// How long local mode may take to say it is up.
const SERVER_LIMIT: Duration = Duration::from_secs(120);

/// A fenced block of a page: its info string, its text and the line it starts on.
#[derive(Debug, Clone)]
struct Block {
    info: String,
    text: String,
    line: usize,
}

/// The fenced blocks of a Markdown page, in order (``` fences only, as the book uses).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (n, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.take() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some(Block { info: info.trim().to_owned(), text: String::new(), line: n + 1 });
                }
            }
            Some(mut block) => {
                if trimmed == "```" {
                    out.push(block);
                } else {
                    block.text.push_str(line);
                    block.text.push('\n');
                    open = Some(block);
                }
            }
        }
    }
    out
}

fn page(relative: &str) -> String {
    let path = repo_root().join("docs/src").join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

// ---------------------------------------------------------------------------------------
// Links

/// The values of every `attr="…"` in `html`.
fn attribute_values<'a>(html: &'a str, attr: &str) -> Vec<&'a str> {
    let needle = format!(" {attr}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(at) = rest.find(&needle) {
        rest = &rest[at + needle.len()..];
        if let Some(end) = rest.find('"') {
            out.push(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out
}

/// `link` (relative to the folder `from`) as a path under the book's root, or None when it
/// climbs out of it.
fn resolve(from: &Path, link: &str) -> Option<PathBuf> {
    let mut parts: Vec<Component<'_>> = from.components().collect();
    for part in Path::new(link).components() {
        match part {
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            other => parts.push(other),
        }
    }
    Some(parts.iter().collect())
}

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read the built book") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            html_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "html") {
            out.push(path);
        }
    }
}

/// Every broken internal link of the book built in `out`: `page: link (why)`.
fn broken_links(out: &Path) -> Vec<String> {
    let mut pages = Vec::new();
    html_files(out, &mut pages);
    let ids: BTreeMap<PathBuf, BTreeSet<String>> = pages
        .iter()
        .map(|p| {
            let html = std::fs::read_to_string(p).expect("read page");
            let ids = attribute_values(&html, "id").into_iter().map(str::to_owned).collect();
            (p.strip_prefix(out).expect("under the book").to_owned(), ids)
        })
        .collect();
    let mut broken = Vec::new();
    for page in &pages {
        let relative = page.strip_prefix(out).expect("under the book");
        // print.html is every page again (its links rewritten into anchors of itself) and
        // 404.html is mdBook's own page, whose links are absolute to the site root.
        if relative == Path::new("print.html") || relative == Path::new("404.html") {
            continue;
        }
        let html = std::fs::read_to_string(page).expect("read page");
        let from = relative.parent().unwrap_or(Path::new(""));
        for link in attribute_values(&html, "href").into_iter().chain(attribute_values(&html, "src")) {
            if link.contains("://") || link.starts_with("mailto:") || link.starts_with("//") {
                continue;
            }
            let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
            let target = if path.is_empty() {
                Some(relative.to_owned())
            } else {
                resolve(from, path).map(|t| if path.ends_with('/') { t.join("index.html") } else { t })
            };
            let Some(target) = target else {
                broken.push(format!("{}: {link} (outside the book)", relative.display()));
                continue;
            };
            if !out.join(&target).is_file() {
                broken.push(format!("{}: {link} (no such file)", relative.display()));
            } else if !fragment.is_empty() && !ids.get(&target).is_some_and(|ids| ids.contains(fragment)) {
                broken.push(format!("{}: {link} (no #{fragment} in {})", relative.display(), target.display()));
            }
        }
    }
    broken
}

/// Every broken relative link of README.md: a file of the repository that is not there, or
/// an anchor of a book page (`docs/src/<page>.md#<id>`) that the page built in `book` lacks.
fn broken_readme_links(book: &Path) -> Vec<String> {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let mut broken = Vec::new();
    let mut rest = readme.as_str();
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let link = &rest[..end];
        rest = &rest[end..];
        if link.contains("://") || link.starts_with('#') {
            continue;
        }
        let (path, fragment) = link.split_once('#').unwrap_or((link, ""));
        if !root.join(path).exists() {
            broken.push(format!("{link} (no such file)"));
            continue;
        }
        if fragment.is_empty() {
            continue;
        }
        let page =
            path.strip_prefix("docs/src/").and_then(|p| p.strip_suffix(".md")).map(|p| book.join(format!("{p}.html")));
        let ids = page.and_then(|p| std::fs::read_to_string(p).ok()).unwrap_or_default();
        if !attribute_values(&ids, "id").contains(&fragment) {
            broken.push(format!("{link} (no #{fragment} in the book's page)"));
        }
    }
    broken
}

fn build_book(dest: &Path) {
    let mdbook = tools_bin().expect("tests/tools/install.sh").join("mdbook");
    let out = Command::new(&mdbook)
        .arg("build")
        .arg(repo_root().join("docs"))
        .arg("--dest-dir")
        .arg(dest)
        .output()
        .expect("mdbook runs");
    let log = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "mdbook build docs failed:\n{log}");
    assert!(!log.contains("WARN") && !log.contains("ERROR"), "mdbook build docs warned:\n{log}");
}

#[test]
fn the_book_builds_and_every_internal_link_resolves() {
    let dest = tempdir("book");
    build_book(&dest);
    let broken = broken_links(&dest);
    assert!(broken.is_empty(), "broken links in the book:\n{}", broken.join("\n"));
    let broken = broken_readme_links(&dest);
    assert!(broken.is_empty(), "broken links in README.md:\n{}", broken.join("\n"));
    // The check itself finds what it must: a page and an anchor that are there, and not
    // ones that are not.
    assert!(dest.join("reference/agent.html").is_file());
    std::fs::write(
        dest.join("concepts/broken.html"),
        r#"<a href="../tour.html#no-such-part">x</a><a href="missing.html">y</a><a href="../tour.html#a-voice-call">z</a>"#,
    )
    .expect("write");
    let found = broken_links(&dest);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.iter().any(|b| b.contains("no #no-such-part")) && found.iter().any(|b| b.contains("missing.html")));
    let _ = std::fs::remove_dir_all(&dest);
}

// ---------------------------------------------------------------------------------------
// Commands

fn tempdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("switchboard-book-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The binaries the pages' `cargo run` commands build and run.
struct Binaries {
    switchboard: PathBuf,
    operator: PathBuf,
}

impl Binaries {
    fn build() -> Self {
        Self {
            switchboard: switchboard_binary().expect("the switchboard binary"),
            operator: operator_binary().expect("the switchboard-operator binary"),
        }
    }
}

/// What a page's command becomes here: the built binaries for `cargo run`, the test's port.
fn rewrite(text: &str, binaries: &Binaries, port: u16) -> String {
    text.replace("cargo run -p switchboard-dataplane --bin switchboard --", &binaries.switchboard.display().to_string())
        .replace("cargo run -p switchboard-operator --", &binaries.operator.display().to_string())
        .replace("127.0.0.1:8080", &format!("127.0.0.1:{port}"))
}

/// A marked command as the test runs it: `bash -c`, from the repository root.
fn command(script: &str, home: &Path, port: u16, log: &Path) -> Command {
    let file = std::fs::File::create(log).expect("log file");
    let mut command = Command::new("bash");
    command
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(repo_root())
        .env("HOME", home)
        // Where local mode keeps its record, and `switchboard sessions` reads it.
        .env_remove("XDG_DATA_HOME")
        .env("SWITCHBOARD_LOCAL_PORT", port.to_string())
        .env("NO_COLOR", "1")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .stdout(file.try_clone().expect("log file"))
        .stderr(file)
        // A group of its own, so that what it started goes with it.
        .process_group(0);
    command
}

/// Ends `child` and every process of its group.
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill").args(["-TERM", "--", &format!("-{}", child.id())]).status();
    let _ = child.kill();
    let _ = child.wait();
}

/// A command started in the background, killed with its page.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        kill_group(&mut self.0);
    }
}

fn missing_lines(output: &str, expected: &str) -> Vec<String> {
    expected.lines().map(str::trim).filter(|l| !l.is_empty() && !output.contains(*l)).map(str::to_owned).collect()
}

/// Runs every marked command of `page_path` in order; returns how many of each kind ran.
/// The page's port (127.0.0.1:8080 in its text) is one free now and reserved for this test
/// ([`ports`]); when some other program took it before the page's server bound it (the
/// server exits saying so), the page runs again from its start on another.
fn run_page(page_path: &str, binary: &Binaries) -> (usize, usize) {
    let mut log = String::new();
    for _ in 0..5 {
        let port = ports::free_port(ports::TCP);
        match run_page_on(page_path, binary, port) {
            Ok(counts) => return counts,
            Err(output) => log = output,
        }
        eprintln!("{page_path}: another program took port {port} before its server bound it; picking another");
    }
    panic!("{page_path}: its server found its port taken five times; the last time:\n{log}")
}

/// [`run_page`] on `port`: the server's output when it found a port taken.
fn run_page_on(page_path: &str, binary: &Binaries, port: u16) -> Result<(usize, usize), String> {
    let all = blocks(&page(page_path));
    let home = tempdir(&page_path.replace('/', "-"));
    let mut servers = Vec::new();
    let (mut started, mut ran) = (0, 0);
    for (i, block) in all.iter().enumerate() {
        let kind = match block.info.as_str() {
            "sh,server" => "server",
            "sh,run" => "run",
            _ => continue,
        };
        // The text blocks that belong to this command: those up to the next command.
        let following = all[i + 1..].iter().take_while(|b| b.info.starts_with("text,"));
        let mut stdin = None;
        let mut expected = String::new();
        for b in following {
            match b.info.as_str() {
                "text,stdin" => stdin = Some(b.text.clone()),
                "text,output" => expected.push_str(&rewrite(&b.text, binary, port)),
                other => panic!("{page_path}:{}: unknown block {other}", b.line),
            }
        }
        let script = rewrite(&block.text, binary, port);
        let what = format!("{page_path}:{} `{}`", block.line, block.text.trim());
        let log = home.join(format!("block-{}.log", block.line));
        let mut cmd = command(&script, &home, port, &log);
        cmd.stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() });
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{what}: {e}"));
        if let Some(text) = stdin {
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(text.as_bytes()).unwrap_or_else(|e| panic!("{what}: writing its input: {e}"));
        }
        let read = || std::fs::read_to_string(&log).unwrap_or_default();
        if kind == "server" {
            let deadline = Instant::now() + SERVER_LIMIT;
            // Up once it printed what the page shows (at least that it serves the port).
            let ready = if expected.is_empty() { format!("127.0.0.1:{port}") } else { expected.clone() };
            while !missing_lines(&read(), &ready).is_empty() {
                if let Ok(Some(status)) = child.try_wait() {
                    if ports::address_in_use(&read()) {
                        kill_group(&mut child);
                        return Err(read());
                    }
                    panic!("{what} exited ({status}) before it was up:\n{}", read());
                }
                if Instant::now() > deadline {
                    kill_group(&mut child);
                    panic!("{what} was not up within {SERVER_LIMIT:?}:\n{}", read());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            servers.push(Server(child));
            started += 1;
        } else {
            let deadline = Instant::now() + RUN_LIMIT;
            let status = loop {
                if let Some(status) = child.try_wait().expect("wait") {
                    break status;
                }
                if Instant::now() > deadline {
                    kill_group(&mut child);
                    panic!("{what} ran past {RUN_LIMIT:?}:\n{}", read());
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            let output = read();
            assert!(status.success(), "{what} failed ({status}):\n{output}");
            let missing = missing_lines(&output, &expected);
            assert!(missing.is_empty(), "{what} did not print {missing:?}; it printed:\n{output}");
            ran += 1;
        }
    }
    drop(servers);
    let _ = std::fs::remove_dir_all(&home);
    Ok((started, ran))
}

#[test]
fn getting_started_and_the_tour_run_as_written() {
    let binaries = Binaries::build();
    let (servers, runs) = run_page("getting-started.md", &binaries);
    assert_eq!((servers, runs), (1, 0), "getting-started.md: the marked local-mode command");
    let (servers, runs) = run_page("tour.md", &binaries);
    // Local mode; chat, the record, the voice call and the suite.
    assert_eq!((servers, runs), (1, 4), "tour.md: its marked commands");
}

#[test]
fn the_other_pages_marked_commands_run_as_written() {
    let binaries = Binaries::build();
    let mut ran = Vec::new();
    for page_path in markdown_pages() {
        if page_path == "getting-started.md" || page_path == "tour.md" {
            continue;
        }
        let (servers, runs) = run_page(&page_path, &binaries);
        if servers + runs > 0 {
            ran.push(page_path);
        }
    }
    for page_path in ["operating/install.md", "testing/scenarios.md"] {
        assert!(ran.iter().any(|p| p == page_path), "{page_path} has no marked command any more: {ran:?}");
    }
}

// ---------------------------------------------------------------------------------------
// YAML

/// Every page of the book, as paths relative to `docs/src`, in order.
fn markdown_pages() -> Vec<String> {
    fn markdown(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("docs/src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                markdown(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let src = repo_root().join("docs/src");
    let mut files = Vec::new();
    markdown(&src, &mut files);
    let mut pages: Vec<String> =
        files.iter().map(|f| f.strip_prefix(&src).expect("under docs/src").display().to_string()).collect();
    pages.sort();
    pages
}

/// Every `yaml,apply` block of the book's pages: (page:line, YAML).
fn yaml_to_apply() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for name in markdown_pages() {
        for block in blocks(&page(&name)) {
            if block.info == "yaml,apply" {
                out.push((format!("{name}:{}", block.line), block.text));
            }
        }
    }
    out
}

#[tokio::test]
async fn the_books_yaml_applies_to_the_control_plane() {
    let blocks = yaml_to_apply();
    let places: Vec<&str> = blocks.iter().map(|(at, _)| at.as_str()).collect();
    assert!(places.iter().any(|p| p.starts_with("concepts/agents.md")), "{places:?}");
    assert!(places.iter().any(|p| p.starts_with("testing/agent-tests.md")), "{places:?}");
    let cluster = cluster().await.expect("control plane");
    install_crds(&cluster.client).await.expect("CRDs");
    let ns = TestNamespace::new(&cluster, "book").await.expect("namespace");
    for (at, yaml) in &blocks {
        let applied = apply_yaml(&ns.client(), &ns.name, yaml).await.unwrap_or_else(|e| panic!("{at}: {e:#}"));
        assert!(!applied.is_empty(), "{at}: nothing applied");
    }
}

#[test]
fn blocks_are_read_with_their_info_and_line() {
    let found = blocks("a\n```sh,run\necho hi\n```\n\n```text,output\nhi\n```\n");
    assert_eq!(found.len(), 2);
    assert_eq!((found[0].info.as_str(), found[0].text.as_str(), found[0].line), ("sh,run", "echo hi\n", 2));
    assert_eq!(found[1].info, "text,output");
    let binaries = Binaries { switchboard: PathBuf::from("/b/sb"), operator: PathBuf::from("/b/op") };
    let chat = "cargo run -p switchboard-dataplane --bin switchboard -- chat ws://127.0.0.1:8080/v1";
    assert_eq!(rewrite(chat, &binaries, 9), "/b/sb chat ws://127.0.0.1:9/v1");
    assert_eq!(rewrite("cargo run -p switchboard-operator -- render -f x", &binaries, 9), "/b/op render -f x");
}
