//! Every shell command and YAML block of the book is run by a test, or is on the reviewed
//! list below with the reason it is not and what is checked instead.
//!
//! A block counts when its language (the fence's info string before any comma) is a shell
//! (`sh`, `bash`, `shell`, `console`) or YAML (`yaml`, `yml`). It is run when it carries a
//! marker (`sh,run`, `sh,server`, `sh,cluster`, `yaml,apply`: see the crate's doc); any
//! other marker is a mistake and fails. Every unmarked block must match exactly one entry of
//! [`NOT_RUN`] (its page, and a piece of its text), and every entry must still match a
//! block: a new command or YAML block in the book fails the test until it is marked or
//! listed here, with its reason, in review.
//!
//! Not run does not mean not checked: a production command ([`Handling::Flags`]) has every
//! `--flag` of its `switchboard` invocations checked against that command's `--help`, and
//! chart values ([`Handling::ChartValues`]) are keys of the chart's `values.yaml` that
//! `helm template` renders. README.md's shell commands are the book's run commands, line
//! for line (or `./test.sh`, the suite itself).

use std::collections::BTreeSet;
use std::process::Command;

use switchboard_tests::helm::{chart, helm};
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::switchboard_binary;

use super::{Block, blocks, markdown_pages, page, tempdir};

/// What the test does with a block it does not run.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Handling {
    /// Not run here: why, and where it is run or checked instead.
    Exempt(&'static str),
    /// A production command that needs what the test machine lacks (why): every `--flag` of
    /// its `switchboard` invocations is one that command's `--help` lists. Its other
    /// commands (curl, kubectl) are not checked.
    Flags(&'static str),
    /// The chart's values: every key is one of `values.yaml`'s (below a free-form `{}` or a
    /// list, not checked), and `helm template` renders the chart with them, differently.
    ChartValues,
}

use Handling::{ChartValues, Exempt, Flags};

const FRAGMENT: &str = "a fragment of a resource (`# ...` or a part of its spec), not applicable alone; \
     the whole resources are applied by the `yaml,apply` blocks and the examples";
const SUITE: &str = "./test.sh is the whole suite: CI runs it; the first command is the page's `sh,server` block";
const REAL_NODE: &str = "needs the real node (kubelet, containerd, the image): the real-node stage of ./test.sh \
     (tests/cluster/e2e-smoke.sh) runs the same steps with tests/cluster/install.sh";

/// The book's blocks that are not run, by page and a piece of their text, with the reason.
pub(crate) const NOT_RUN: &[(&str, &str, Handling)] = &[
    ("getting-started.md", "./test.sh", Exempt(SUITE)),
    ("development/index.md", "./test.sh", Exempt(SUITE)),
    (
        "protocol/index.md",
        "--bin protocol-schema",
        Exempt(
            "regenerates the committed schema and clients; their drift checks run the same generators \
             (core's schema test, `generate.mjs --check`, `generate.py --check` in the clients' suites)",
        ),
    ),
    ("protocol/index.md", "name: pick_account", Exempt(FRAGMENT)),
    ("protocol/index.md", "name: show_card", Exempt(FRAGMENT)),
    (
        "concepts/agents.md",
        "{{#include ../../../examples/banking/triage.yaml}}",
        Exempt("examples/banking/triage.yaml itself: the install page's `sh,cluster` block applies examples/banking"),
    ),
    (
        "clients/index.md",
        "npm publish",
        Exempt(
            "publishing needs registry accounts; the clients' package tests (dataplane/tests/clients) run \
             `npm pack` and `python -m build` and install what they make",
        ),
    ),
    (
        "concepts/gateway.md",
        "switchboard gateway --gateway-key-file",
        Flags("the gateway's key file, in the chart's pod"),
    ),
    ("concepts/handoffs.md", "- agent: idv", Exempt(FRAGMENT)),
    ("concepts/workflows.md", "- id: advice", Exempt(FRAGMENT)),
    ("concepts/turn-taking.md", "languages:", Exempt(FRAGMENT)),
    ("clients/sip.md", "switchboard sip --listen 0.0.0.0:5060", Flags("a SIP trunk, port 5060 and a gateway")),
    ("clients/sip.md", "sip:\n  enabled: true", ChartValues),
    (
        "clients/sip.md",
        "switchboard local examples/banking\n# ...",
        Flags("port 5060 for SIP; tour.md runs local mode"),
    ),
    ("clients/sip.md", "--trunk pbx=", Flags("SIP trunks and their credentials files")),
    (
        "clients/sip.md",
        "--tls-listen 0.0.0.0:5061",
        Flags("a certificate for the edge's name, port 5061 and a gateway"),
    ),
    ("clients/sip.md", "name: check_card", Exempt(FRAGMENT)),
    ("clients/sip.md", "mode: hybrid          # a text-only Agent", Exempt(FRAGMENT)),
    ("clients/sip.md", "--outbound-trunk", Flags("an outbound SIP trunk and a gateway with an operator's key")),
    ("clients/sip.md", "transferTimeoutSeconds", Exempt(FRAGMENT)),
    ("clients/sip.md", "answeringMachine:", Exempt(FRAGMENT)),
    ("clients/sip.md", "sendDigits: true", Exempt(FRAGMENT)),
    ("operating/capacity.md", "--capacity-quota", Flags("Redis and the gateway's key")),
    ("operating/capacity.md", "gateway:\n  redis:", ChartValues),
    ("operating/capacity.md", "whenFull", Exempt(FRAGMENT)),
    (
        "operating/install.md",
        "docker build",
        Exempt(
            "needs Docker and a registry; the real-node stage builds the image from the same paths \
             (tests/cluster/image.sh)",
        ),
    ),
    (
        "operating/load-testing.md",
        "--speech-endpoint-url",
        Flags("a simulator started with its own port and CA file, in the page's earlier steps"),
    ),
    ("operating/local-cluster.md", "tests/cluster/install.sh          #", Exempt(REAL_NODE)),
    ("operating/local-cluster.md", ". /tmp/switchboard-cluster/node/env", Exempt(REAL_NODE)),
    (
        "operating/record.md",
        "switchboard sessions list --since 24h",
        Flags("a record of its own sessions and, for curl, a cluster's gateway"),
    ),
    ("operating/record.md", "switchboard callers delete", Flags("a record with that caller")),
    ("operating/record.md", "analysis:", Exempt(FRAGMENT)),
    ("operating/reliability.md", "outage:", Exempt(FRAGMENT)),
    (
        "operating/reliability.md",
        "active: true                                   # every Agent of the folder",
        Exempt(
            "local mode's outage file (tools/outage.yaml), not a resource: dataplane/tests/gateway/outage_local.rs \
             writes its keys (active, message, agents) under a live `switchboard local` and checks each",
        ),
    ),
    (
        "operating/reliability.md",
        "kubectl -n bank create configmap switchboard-outage",
        Exempt(
            "the namespace's outage switch: tests/tests/operator_outage.rs creates, changes and deletes this \
             ConfigMap on the real control plane and checks the routing table and the Events",
        ),
    ),
    (
        "operating/values.md",
        "{{#include ../../../charts/switchboard/values.yaml}}",
        Exempt("the chart's values.yaml itself: tests/tests/chart.rs lints and renders it"),
    ),
    ("operating/variants.md", "$ switchboard variants compare", Flags("a record with sessions of variants")),
    (
        "testing/agent-tests.md",
        "kubectl get agenttests -n bank",
        Exempt("an AgentTest run by a running operator: tests/tests/operator_agent_test.rs reads these columns"),
    ),
    (
        "testing/scenarios.md",
        "name: Balance after identity verification",
        Exempt("every kind of expectation, for show; examples/banking/tests holds runnable ones, run by tour.md"),
    ),
    ("testing/scenarios.md", "--junit report.xml", Flags("a cluster's gateway for the last line")),
    (
        "testing/scenarios.md",
        "keys: \"12345678#\"",
        Exempt(
            "the steps of examples/banking/tests/keypad-verification.yaml, which the Example Bank's suite runs \
             (the tour's `switchboard test examples/banking` and the scenarios tests)",
        ),
    ),
    ("testing/simulator.md", "-- sim            #", Flags("port 8443, fixed; the tests start it on free ports")),
];

/// The languages of blocks a reader runs.
const SHELLS: &[&str] = &["sh", "bash", "shell", "console"];
const YAML: &[&str] = &["yaml", "yml"];
/// The markers of blocks the book's tests run.
const RUN: &[&str] = &["sh,run", "sh,server", "sh,cluster", "yaml,apply"];

/// Every block of the book a reader would run: (page, block).
fn runnable_blocks() -> Vec<(String, Block)> {
    let mut out = Vec::new();
    for name in markdown_pages() {
        for block in blocks(&page(&name)) {
            let language = block.info.split(',').next().unwrap_or_default();
            if SHELLS.contains(&language) || YAML.contains(&language) {
                out.push((name.clone(), block));
            }
        }
    }
    out
}

/// How the test treats each unmarked runnable block; panics with every block that is
/// neither marked nor listed, every unknown marker, and every stale entry.
fn unmarked() -> Vec<(String, Block, Handling)> {
    let mut problems = Vec::new();
    let mut used = BTreeSet::new();
    let mut out = Vec::new();
    for (name, block) in runnable_blocks() {
        let at = format!("{name}:{}", block.line);
        if block.info.contains(',') {
            if !RUN.contains(&block.info.as_str()) {
                problems.push(format!("{at}: unknown marker `{}` (known: {RUN:?})", block.info));
            }
            continue;
        }
        let matching: Vec<usize> =
            (0..NOT_RUN.len()).filter(|&i| NOT_RUN[i].0 == name && block.text.contains(NOT_RUN[i].1)).collect();
        match matching[..] {
            [i] => {
                used.insert(i);
                out.push((name, block, NOT_RUN[i].2));
            }
            [] => problems.push(format!(
                "{at}: a `{}` block no test runs: mark it ({RUN:?}) or list it in NOT_RUN with the reason:\n{}",
                block.info, block.text
            )),
            _ => problems.push(format!("{at}: matches several NOT_RUN entries {matching:?}")),
        }
    }
    for (i, (name, needle, _)) in NOT_RUN.iter().enumerate() {
        if !used.contains(&i) {
            problems.push(format!("NOT_RUN[{i}] ({name}: {needle:?}) matches no unmarked block any more: remove it"));
        }
    }
    assert!(problems.is_empty(), "the book's commands and YAML:\n{}", problems.join("\n"));
    out
}

#[test]
fn every_command_and_yaml_of_the_book_is_run_or_listed_with_a_reason() {
    let listed = unmarked();
    for (name, block, handling) in &listed {
        let (Exempt(why) | Flags(why)) = handling else { continue };
        assert!(why.len() > 20, "{name}:{}: say why it is not run", block.line);
        eprintln!("{name}:{}: not run: {why}", block.line);
    }
    let run = runnable_blocks().len() - listed.len();
    // The pages the other tests run must keep their blocks marked.
    assert!(run >= 15, "{run} marked blocks");
    eprintln!("{run} blocks run, {} not run (listed with reasons)", listed.len());
}

// ---------------------------------------------------------------------------------------
// Flags

/// Joins `\`-continued lines, drops comments and a `$ ` prompt: the commands of `text`.
pub(crate) fn command_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let line = line.trim();
        let line = line.strip_prefix("$ ").unwrap_or(line);
        if current.is_empty() && (line.is_empty() || line.starts_with('#')) {
            continue;
        }
        let code = line.find(" #").map_or(line, |at| &line[..at]).trim_end();
        match code.strip_suffix('\\') {
            Some(head) => {
                current.push_str(head.trim_end());
                current.push(' ');
            }
            None => {
                current.push_str(code);
                out.push(std::mem::take(&mut current).trim().to_owned());
            }
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_owned());
    }
    out
}

/// Whether `word` may be a subcommand: a lower-case word (not a flag, path or value).
fn is_subcommand(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase()) && word.chars().all(|c| c.is_ascii_lowercase() || c == '-')
}

/// Each `switchboard` invocation of `line`: its subcommand words and its `--flags`.
fn invocations(line: &str) -> Vec<(Vec<String>, Vec<String>)> {
    let line = line.replace("cargo run -p switchboard-dataplane --bin switchboard --", "switchboard");
    let mut out = Vec::new();
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut i = 0;
    while i < words.len() {
        if words[i] != "switchboard" {
            i += 1;
            continue;
        }
        i += 1;
        let mut path = Vec::new();
        while i < words.len() && is_subcommand(words[i]) {
            path.push(words[i].to_owned());
            i += 1;
        }
        let mut flags = Vec::new();
        while i < words.len() && !["|", "&&", "||", ";", "&"].contains(&words[i]) {
            if let Some(flag) = words[i].strip_prefix("--") {
                flags.push(format!("--{}", flag.split('=').next().unwrap_or_default()));
            }
            i += 1;
        }
        out.push((path, flags));
    }
    out
}

#[test]
fn the_production_commands_flags_are_the_binarys() {
    let binary = switchboard_binary().expect("the switchboard binary");
    let mut checked = 0;
    for (name, block, handling) in unmarked() {
        let Flags(why) = handling else { continue };
        let found: Vec<_> = command_lines(&block.text).iter().flat_map(|l| invocations(l)).collect();
        assert!(!found.is_empty(), "{name}:{}: no `switchboard` command ({why})", block.line);
        for (path, flags) in found {
            let out = Command::new(&binary).args(&path).arg("--help").output().expect("switchboard --help");
            let help = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "{name}:{}: switchboard {} --help failed", block.line, path.join(" "));
            for flag in flags {
                let listed = help.match_indices(&flag).any(|(at, _)| {
                    !help[at + flag.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-')
                });
                assert!(listed, "{name}:{}: `switchboard {}` has no {flag}:\n{help}", block.line, path.join(" "));
                checked += 1;
            }
        }
    }
    assert!(checked > 20, "{checked} flags checked");
}

// ---------------------------------------------------------------------------------------
// Chart values

/// The keys of `values` (dotted) that the chart's `defaults` lack: below a default that is
/// an empty map (free-form) or a list, nothing is checked.
fn unknown_keys(values: &serde_yaml::Value, defaults: &serde_yaml::Value, at: &str, out: &mut Vec<String>) {
    let (Some(values), Some(defaults)) = (values.as_mapping(), defaults.as_mapping()) else { return };
    if defaults.is_empty() {
        return;
    }
    for (key, value) in values {
        let name = format!("{at}{}", key.as_str().unwrap_or("?"));
        match defaults.get(key) {
            None => out.push(name),
            Some(default) => unknown_keys(value, default, &format!("{name}."), out),
        }
    }
}

#[test]
fn the_books_chart_values_are_the_charts_and_render() {
    let defaults: serde_yaml::Value = serde_yaml::from_str(
        &std::fs::read_to_string(repo_root().join("charts/switchboard/values.yaml")).expect("read"),
    )
    .expect("values.yaml");
    let dir = tempdir("values");
    let (ok, plain) = helm(None, &["template", "sb", &chart()]);
    assert!(ok, "{plain}");
    let mut rendered = 0;
    for (name, block, handling) in unmarked() {
        let ChartValues = handling else { continue };
        let at = format!("{name}:{}", block.line);
        let values: serde_yaml::Value = serde_yaml::from_str(&block.text).unwrap_or_else(|e| panic!("{at}: {e}"));
        let mut unknown = Vec::new();
        unknown_keys(&values, &defaults, "", &mut unknown);
        assert!(unknown.is_empty(), "{at}: keys the chart does not have: {unknown:?}");
        let file = dir.join(format!("{}.yaml", block.line));
        std::fs::write(&file, &block.text).expect("write");
        let (ok, out) = helm(None, &["template", "sb", &chart(), "-f", &file.to_string_lossy()]);
        assert!(ok, "{at}: helm template with these values failed:\n{out}");
        assert_ne!(out, plain, "{at}: the values change nothing");
        rendered += 1;
    }
    assert!(rendered >= 2, "{rendered} values blocks");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---------------------------------------------------------------------------------------
// README

#[test]
fn the_readmes_commands_are_the_books_run_commands() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let mut run = BTreeSet::new();
    for (_, block) in runnable_blocks() {
        if RUN.contains(&block.info.as_str()) {
            run.extend(command_lines(&block.text));
        }
    }
    let mut commands = 0;
    for block in blocks(&readme) {
        if !SHELLS.contains(&block.info.as_str()) {
            continue;
        }
        for line in command_lines(&block.text) {
            assert!(
                line == "./test.sh" || run.contains(&line),
                "README.md:{}: `{line}` is not a command the book's tests run",
                block.line
            );
            commands += 1;
        }
    }
    assert!(commands >= 8, "{commands} commands in README.md");
}

#[test]
fn command_lines_join_continuations_and_drop_comments() {
    let text = "# a comment\n$ switchboard sip --listen a \\\n  --advertise b   # why\nkubectl get x # y\n";
    assert_eq!(command_lines(text), ["switchboard sip --listen a --advertise b", "kubectl get x"]);
    let found = invocations("AWS=x switchboard sessions list --since 24h --agent=a | head; switchboard sim --help");
    assert_eq!(found[0], (vec!["sessions".to_owned(), "list".to_owned()], vec!["--since".into(), "--agent".into()]));
    assert_eq!(found[1], (vec!["sim".to_owned()], vec!["--help".to_owned()]));
}
