//! The chart's monitoring (`monitoring.*`): PodMonitors, a PrometheusRule and a Grafana
//! dashboard, each off by default and rendered only when enabled. The rules pass `promtool
//! check rules` and the unit tests of every alert (`promtool test rules` on
//! tests/tests/promtool/alerts_test.yaml, each alert firing and silent); the rules and every
//! dashboard query name only series METRICS.md lists, and METRICS.md's gateway (with its
//! conversation record), SIP edge and operator tables list exactly the series those processes
//! register (the runtime's table is held to its registry by a unit test in
//! dataplane/runtime/src/metrics.rs).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize as _;
use serde_yaml::Value;
use switchboard_tests::cluster::tools_bin;
use switchboard_tests::repo_root;

/// One row of METRICS.md: name, type, labels in order.
type Row = (String, String, Vec<String>);

fn helm_template(sets: &[&str]) -> String {
    let chart = repo_root().join("charts/switchboard");
    let mut cmd = Command::new(tools_bin().expect("tools").join("helm"));
    cmd.args(["template", "sb", &chart.to_string_lossy(), "--namespace", "sb-system"]);
    for set in sets {
        cmd.args(["--set", set]);
    }
    let out = cmd.output().expect("helm runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    text
}

/// The rendered objects of `kind`.
fn objects(rendered: &str, kind: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(rendered)
        .map(|doc| Value::deserialize(doc).expect("rendered YAML"))
        .filter(|v| v["kind"].as_str() == Some(kind))
        .collect()
}

/// METRICS.md's tables, by section heading (`Runtime`, `Gateway`, `Operator`).
fn documented() -> BTreeMap<String, BTreeSet<Row>> {
    let text = std::fs::read_to_string(repo_root().join("METRICS.md")).expect("METRICS.md");
    let ticked = |cell: &str| -> Vec<String> { cell.split('`').skip(1).step_by(2).map(str::to_owned).collect() };
    let mut sections = BTreeMap::new();
    for section in text.split("\n## ").skip(1) {
        let heading = section.lines().next().unwrap_or_default().trim().to_owned();
        let rows: BTreeSet<Row> = section
            .lines()
            .filter(|l| l.starts_with("| `") && l.split(" | ").count() >= 5)
            .map(|line| {
                let cells: Vec<&str> = line.split(" | ").collect();
                (ticked(cells[0])[0].clone(), cells[1].trim().to_owned(), ticked(cells[2]))
            })
            .filter(|(_, kind, _)| ["counter", "gauge", "histogram"].contains(&kind.as_str()))
            .collect();
        if !rows.is_empty() {
            sections.insert(heading, rows);
        }
    }
    sections
}

/// Every series name a query may use: METRICS.md's families, with the `_bucket`, `_sum` and
/// `_count` series of its histograms.
fn known_series() -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (name, kind, _) in documented().into_values().flatten() {
        if kind == "histogram" {
            for suffix in ["_bucket", "_sum", "_count"] {
                names.insert(format!("{name}{suffix}"));
            }
        }
        names.insert(name);
    }
    names
}

/// The metric names a PromQL expression selects (ours: `switchboard_*`, `gen_ai_*`), with
/// label matchers, grouping clauses, strings and ranges taken out first (label names such
/// as `gen_ai_token_type` share the prefix).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut bare = String::new();
    let (mut braces, mut brackets, mut quote) = (0, 0, None);
    for c in expr.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'' | '`') => quote = Some(c),
            (None, '{') => braces += 1,
            (None, '}') => braces -= 1,
            (None, '[') => brackets += 1,
            (None, ']') => brackets -= 1,
            (None, c) if braces == 0 && brackets == 0 => bare.push(c),
            _ => bare.push(' '),
        }
    }
    // Scan identifiers, skipping the label lists of `by (...)`, `without (...)`, `on (...)`,
    // `ignoring (...)`, `group_left (...)` and `group_right (...)`, and numbers.
    let grouping = ["by", "without", "on", "ignoring", "group_left", "group_right"];
    let chars: Vec<char> = bare.chars().collect();
    let word_char = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    let (mut out, mut i) = (BTreeSet::new(), 0);
    while i < chars.len() {
        if !word_char(chars[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < chars.len() && (word_char(chars[i]) || chars[i] == '.') {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        let mut next = i;
        while next < chars.len() && chars[next].is_whitespace() {
            next += 1;
        }
        if grouping.contains(&word.as_str()) && chars.get(next) == Some(&'(') {
            while next < chars.len() && chars[next] != ')' {
                next += 1;
            }
            i = next + 1;
        } else if word.starts_with("switchboard_") || word.starts_with("gen_ai_") {
            out.insert(word);
        }
    }
    out
}

fn assert_documented(what: &str, expr: &str, known: &BTreeSet<String>) {
    let names = metric_names(expr);
    assert!(!names.is_empty(), "{what} names no Switchboard series: {expr}");
    for name in names {
        assert!(known.contains(&name), "{what} uses {name}, which METRICS.md does not list: {expr}");
    }
}

#[test]
fn metric_names_are_read_from_promql() {
    let expr = r#"sum by (namespace, gen_ai_token_type) (rate(gen_ai_client_token_usage_sum{gen_ai_system="x",le=~"a|switchboard_no"}[5m])) / on (agent) group_left (mode) switchboard_sessions_active"#;
    let names: Vec<String> = metric_names(expr).into_iter().collect();
    assert_eq!(names, ["gen_ai_client_token_usage_sum", "switchboard_sessions_active"]);
}

#[test]
fn monitoring_is_off_by_default() {
    let rendered = helm_template(&[]);
    for kind in ["PodMonitor", "PrometheusRule", "ServiceMonitor"] {
        assert!(objects(&rendered, kind).is_empty(), "no {kind} unless enabled");
    }
    assert!(!rendered.contains("grafana_dashboard"), "no dashboard unless enabled");
}

/// A scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn promtool(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(tools_bin().expect("tools").join("promtool"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "promtool {args:?}:\n{text}");
    text
}

#[test]
fn every_alert_passes_promtool_and_fires_and_stays_silent_in_its_unit_tests() {
    let rendered = helm_template(&["monitoring.prometheusRule.enabled=true"]);
    let rules = objects(&rendered, "PrometheusRule");
    assert_eq!(rules.len(), 1, "{rendered}");
    let spec = &rules[0]["spec"];
    let dir = Scratch(std::env::temp_dir().join(format!("switchboard-alerts-{}", std::process::id())));
    std::fs::create_dir_all(&dir.0).expect("scratch dir");
    std::fs::write(dir.0.join("rules.yaml"), serde_yaml::to_string(spec).expect("YAML")).expect("write");
    let tests = repo_root().join("tests/tests/promtool/alerts_test.yaml");
    std::fs::copy(&tests, dir.0.join("alerts_test.yaml")).expect("copy");
    let checked = promtool(&dir.0, &["check", "rules", "rules.yaml"]);
    assert!(checked.contains("SUCCESS"), "{checked}");
    promtool(&dir.0, &["test", "rules", "alerts_test.yaml"]);

    // Every alert has a case where it fires and one where it stays silent.
    let alerts: BTreeSet<String> = spec["groups"]
        .as_sequence()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_sequence().cloned().unwrap_or_default())
        .map(|r| r["alert"].as_str().expect("alerting rules only").to_owned())
        .collect();
    assert!(alerts.len() >= 10, "{alerts:?}");
    let cases: Value = serde_yaml::from_str(&std::fs::read_to_string(&tests).expect("tests")).expect("YAML");
    let (mut firing, mut silent) = (BTreeSet::new(), BTreeSet::new());
    for case in cases["tests"].as_sequence().into_iter().flatten() {
        for check in case["alert_rule_test"].as_sequence().into_iter().flatten() {
            let name = check["alertname"].as_str().unwrap_or_default().to_owned();
            let fires = check["exp_alerts"].as_sequence().is_some_and(|a| !a.is_empty());
            if fires { &mut firing } else { &mut silent }.insert(name);
        }
    }
    assert_eq!(firing, alerts, "every alert fires in a unit test");
    assert_eq!(silent, alerts, "every alert stays silent in a unit test");

    // The rules name only series that exist.
    let known = known_series();
    for rule in spec["groups"].as_sequence().into_iter().flatten().flat_map(|g| g["rules"].as_sequence().cloned()) {
        for rule in rule {
            assert_documented(rule["alert"].as_str().unwrap_or_default(), rule["expr"].as_str().expect("expr"), &known);
        }
    }

    // alertLabels reach every alert; without the gateway, its key's alert is not rendered.
    let rendered = helm_template(&[
        "monitoring.prometheusRule.enabled=true",
        "monitoring.prometheusRule.alertLabels.team=platform",
        "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
        "gateway.enabled=false",
    ]);
    let rule = &objects(&rendered, "PrometheusRule")[0];
    assert_eq!(rule["metadata"]["labels"]["release"].as_str(), Some("kube-prometheus-stack"));
    let rendered_rules: Vec<Value> = rule["spec"]["groups"]
        .as_sequence()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_sequence().cloned().unwrap_or_default())
        .collect();
    assert_eq!(rendered_rules.len(), alerts.len() - 1);
    for r in &rendered_rules {
        assert_eq!(r["labels"]["team"].as_str(), Some("platform"), "{r:?}");
        assert_ne!(r["alert"].as_str(), Some("SwitchboardGatewayKeyMissing"));
    }
}

#[test]
fn the_dashboard_and_pod_monitors_render_and_name_only_documented_series() {
    let sets = [
        "monitoring.dashboard.enabled=true",
        "monitoring.dashboard.annotations.grafana_folder=Switchboard",
        "monitoring.podMonitor.enabled=true",
        "monitoring.podMonitor.labels.release=kube-prometheus-stack",
    ];
    let rendered = helm_template(&sets);
    let maps: Vec<Value> = objects(&rendered, "ConfigMap")
        .into_iter()
        .filter(|m| m["metadata"]["labels"]["grafana_dashboard"].as_str() == Some("1"))
        .collect();
    assert_eq!(maps.len(), 1, "one dashboard ConfigMap labelled for Grafana's sidecar");
    assert_eq!(maps[0]["metadata"]["annotations"]["grafana_folder"].as_str(), Some("Switchboard"));
    let json = maps[0]["data"]["switchboard.json"].as_str().expect("the dashboard");
    let file = std::fs::read_to_string(repo_root().join("charts/switchboard/files/dashboards/switchboard.json"))
        .expect("the dashboard file");
    assert_eq!(json.trim(), file.trim(), "the ConfigMap carries the file as it is");
    let dashboard: serde_json::Value = serde_json::from_str(json).expect("dashboard JSON");
    let known = known_series();
    let mut used = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("expr");
            assert_documented(panel["title"].as_str().unwrap_or_default(), expr, &known);
            used.extend(metric_names(expr));
        }
    }
    // What the issue asks a dashboard to show.
    for series in [
        "switchboard_gateway_sessions_live",
        "switchboard_turn_latency_seconds_bucket",
        "gen_ai_server_time_to_first_token_seconds_bucket",
        "switchboard_time_to_first_audio_seconds_bucket",
        "gen_ai_client_token_usage_sum",
        "switchboard_tool_errors_total",
        "switchboard_model_stream_restarts_total",
        "switchboard_gateway_handoffs_total",
        "switchboard_gateway_handoff_gap_seconds_bucket",
    ] {
        assert!(used.contains(series), "the dashboard shows {series}: {used:?}");
    }
    for variable in dashboard["templating"]["list"].as_array().expect("variables") {
        if let Some(query) = variable["query"]["query"].as_str() {
            assert_documented("the dashboard's variables", query, &known);
        }
    }

    // PodMonitors: the operator, the gateway, and every Agent's pods in every namespace (or
    // the watched one).
    let monitors = objects(&rendered, "PodMonitor");
    let port = |m: &Value| m["spec"]["podMetricsEndpoints"][0]["port"].as_str().map(str::to_owned);
    let names: Vec<(String, Option<String>)> =
        monitors.iter().map(|m| (m["metadata"]["name"].as_str().unwrap_or_default().to_owned(), port(m))).collect();
    let expected =
        [("sb-switchboard-operator", "metrics"), ("sb-switchboard-gateway", "http"), ("sb-switchboard-agents", "http")];
    assert_eq!(names, expected.map(|(n, p)| (n.to_owned(), Some(p.to_owned()))));
    for m in &monitors {
        assert_eq!(m["metadata"]["labels"]["release"].as_str(), Some("kube-prometheus-stack"));
        assert_eq!(m["spec"]["podMetricsEndpoints"][0]["path"].as_str(), Some("/metrics"));
    }
    let agents = &monitors[2]["spec"];
    assert_eq!(agents["namespaceSelector"]["any"].as_bool(), Some(true));
    assert_eq!(agents["selector"]["matchLabels"]["app.kubernetes.io/name"].as_str(), Some("switchboard-agent"));
    let rendered = helm_template(&["monitoring.podMonitor.enabled=true", "operator.watchNamespace=bank"]);
    let agents = objects(&rendered, "PodMonitor").pop().expect("the agents' PodMonitor");
    assert_eq!(agents["spec"]["namespaceSelector"]["matchNames"][0].as_str(), Some("bank"));

    // With the SIP edge, a fourth: its pods' port `metrics`, selected as its Deployment's.
    let rendered = helm_template(&["monitoring.podMonitor.enabled=true", "sip.enabled=true"]);
    let sip = objects(&rendered, "PodMonitor").pop().expect("the SIP edge's PodMonitor");
    assert_eq!(sip["metadata"]["name"].as_str(), Some("sb-switchboard-sip"));
    assert_eq!(port(&sip).as_deref(), Some("metrics"));
    let deployment = objects(&rendered, "Deployment")
        .into_iter()
        .find(|d| d["metadata"]["name"].as_str() == Some("sb-switchboard-sip"))
        .expect("the SIP edge's Deployment");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    let selector = sip["spec"]["selector"]["matchLabels"].as_mapping().expect("matchLabels");
    assert!(!selector.is_empty());
    for (key, value) in selector {
        assert_eq!(&pod_labels[key], value, "the PodMonitor selects the edge's pods");
    }
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let ports = container["ports"].as_sequence().expect("ports");
    assert!(ports.iter().any(|p| p["name"].as_str() == Some("metrics")), "the pod names the port: {ports:?}");
}

/// The families a process's registry renders: name -> (type, label names in order of
/// first appearance; `le` left out).
fn rendered_families(text: &str) -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut families: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE line");
            families.insert(name.to_owned(), (kind.to_owned(), BTreeSet::new()));
        } else if !line.starts_with('#') && !line.is_empty() {
            let (series, labels) = line.split_once('{').unwrap_or((line.split(' ').next().unwrap_or_default(), ""));
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| series.strip_suffix(s).filter(|f| families.contains_key(*f)))
                .unwrap_or(series);
            let entry = families.get_mut(family).unwrap_or_else(|| panic!("a sample of an unknown family: {line}"));
            for pair in labels.split("\",").filter(|p| p.contains('=')) {
                let name = pair.split('=').next().unwrap_or_default().trim_start_matches(',');
                if name != "le" {
                    entry.1.insert(name.to_owned());
                }
            }
        }
    }
    families
}

fn assert_table(section: &str, text: &str) {
    let rendered = rendered_families(text);
    let table = documented().remove(section).unwrap_or_else(|| panic!("METRICS.md has a {section} section"));
    let rendered: BTreeSet<(String, String, BTreeSet<String>)> =
        rendered.into_iter().map(|(name, (kind, labels))| (name, kind, labels)).collect();
    let table: BTreeSet<(String, String, BTreeSet<String>)> =
        table.into_iter().map(|(name, kind, labels)| (name, kind, labels.into_iter().collect())).collect();
    assert_eq!(rendered, table, "METRICS.md's {section} table and the {section}'s registry");
}

#[test]
fn metrics_md_lists_exactly_the_gateways_the_sip_edges_and_the_operators_series() {
    // Every labelled family gets a sample, so that it renders.
    let gateway = switchboard_gateway::metrics::Metrics::new().expect("gateway metrics");
    gateway.live.with_label_values(&["bank/triage"]).inc();
    gateway.routed.with_label_values(&["bank/triage"]).inc();
    gateway.refused.with_label_values(&["no_ready_pod"]).inc();
    gateway.handoffs.with_label_values(&["bank/triage", "bank/idv"]).inc();
    gateway.handoff_gap.with_label_values(&["bank/triage", "bank/idv"]).observe(0.1);
    gateway.migrated.with_label_values(&["bank/triage", "pod_lost"]).inc();
    gateway.parked.with_label_values(&["bank/triage"]).inc();
    gateway.resumed.with_label_values(&["bank/triage"]).inc();
    gateway.agent_ready_pods.with_label_values(&["bank/triage"]).set(2.0);
    gateway.variant_sessions.with_label_values(&["bank/triage", "concise"]).inc();
    gateway.outbound_calls.with_label_values(&["completed"]).inc();
    gateway.outbound_answered_by.with_label_values(&["machine"]).inc();
    gateway.call_webhook_deliveries.with_label_values(&["delivered"]).inc();
    gateway.app_context.with_label_values(&["bank/triage", "verified"]).inc();
    // The conversation record's series, which the gateway serves after its own.
    let record = switchboard_gateway::record::RecordMetrics::new().expect("record metrics");
    record.dropped.with_label_values(&["queue_full"]).inc();
    record.cost.with_label_values(&["bank/triage", "amazon.nova-lite-v1:0"]).inc();
    record.tokens.with_label_values(&["bank/triage", "amazon.nova-lite-v1:0", "input"]).inc();
    record.unpriced.with_label_values(&["some-model"]).inc();
    record.webhook.with_label_values(&["delivered"]).inc();
    record.summaries.with_label_values(&["written"]).inc();
    record.analyses.with_label_values(&["written"]).inc();
    record.resolved.with_label_values(&["bank/triage", "concise", "true"]).inc();
    // The WebRTC edge's, which the gateway serves as a channel's.
    let webrtc = switchboard_webrtc_edge::Metrics::new().expect("WebRTC edge metrics");
    webrtc.calls.with_label_values(&["ended"]).inc();
    webrtc.ice.with_label_values(&["connected", "host", "tcp"]).inc();
    webrtc.tcp_refused.with_label_values(&["memory_budget"]).inc();
    webrtc.tcp_bytes.with_label_values(&["in"]).inc_by(100);
    webrtc.audio_packets.with_label_values(&["stale"]).inc();
    webrtc.transcoding.with_label_values(&["in"]).inc_by(0.5);
    // The shared model quota's, which the gateway serves after its own.
    let capacity = switchboard_gateway::capacity::metrics::CapacityMetrics::new().expect("capacity metrics");
    capacity.quota.with_label_values(&["default/us-east-1"]).set(40.0);
    capacity.guaranteed.with_label_values(&["default/us-east-1", "bank"]).set(10.0);
    capacity.in_use.with_label_values(&["default/us-east-1", "bank"]).set(1.0);
    capacity.queued.with_label_values(&["default/us-east-1", "bank"]).set(0.0);
    capacity.wait.with_label_values(&["bank", "served"]).observe(0.5);
    capacity.refused.with_label_values(&["bank", "queue_full"]).inc();
    capacity.region_fallbacks.with_label_values(&["default/us-east-1", "default/us-west-2", "full"]).inc();
    capacity.region_failing.with_label_values(&["default/us-east-1"]).inc();
    // Outage mode's, which the gateway serves after capacity's.
    let outage = switchboard_gateway::outage::OutageMetrics::new().expect("outage metrics");
    outage.state.with_label_values(&["bank/triage"]).set(2.0);
    outage.trips.with_label_values(&["bank/triage", "errors"]).inc();
    outage.recoveries.with_label_values(&["bank/triage"]).inc();
    outage.fallbacks.with_label_values(&["bank/triage", "breaker"]).inc();
    outage.turns.with_label_values(&["bank/triage", "good"]).inc();
    outage.text.with_label_values(&["bank/triage", "breaker"]).inc();
    outage.learned.with_label_values(&["bank/triage"]).inc();
    let rendered = gateway.render() + &record.render() + &webrtc.render() + &capacity.render() + &outage.render();
    assert_table("Gateway", &rendered);

    // The SIP edge's (`switchboard sip`, or local mode's edge after the runtime's).
    let sip = switchboard_sip_edge::Metrics::new().expect("SIP edge metrics");
    sip.refused_by_gateway(&switchboard_sip_edge::gateway::Refused::Outage(Box::new(
        switchboard_sip_edge::gateway::Fallback {
            agent: "bank/triage".into(),
            cause: "switch".into(),
            message: "We are closed".into(),
            person: None,
            retry_after_seconds: None,
        },
    )));
    drop(sip.answered(switchboard_sip_edge::metrics::Direction::Inbound));
    sip.transfer(switchboard_sip_edge::metrics::TransferOutcome::Busy);
    sip.announcement(switchboard_sip_edge::announce::Purpose::Hold);
    sip.dropped(&switchboard_sip_edge::metrics::Dropped::RateLimited);
    sip.tls_connection(switchboard_sip_edge::metrics::TlsConnection::HandshakeTimeout);
    sip.trunk_connection(
        switchboard_sip_edge::Transport::Tls,
        switchboard_sip_edge::metrics::TrunkConnection::HandshakeFailed,
    );
    sip.srtp(&switchboard_sip_edge::metrics::SrtpCounts { auth_failed: 1, ..Default::default() });
    sip.gateway_resume("resumed");
    assert_table("SIP edge", &sip.render());

    let operator = switchboard_operator::metrics::Metrics::new().expect("operator metrics");
    drop(operator.reconcile("Agent"));
    operator.failure("Agent", "kube");
    operator.status_write("Agent");
    operator.child_apply("Deployment", true);
    operator.event("Normal");
    assert_table("Operator", &operator.render());
}
