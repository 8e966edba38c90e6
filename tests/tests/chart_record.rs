//! The chart's conversation-record settings reach the gateway as the environment its flags
//! read: the database URL (from a Secret when it carries a password), retention, backlog,
//! redaction rules one a line and prices `;`-separated — and nothing when no database is
//! set. The outbound calls' status callbacks get their key from a Secret, as the end-of-call
//! report does. So do the trace exporter's headers, from a Secret, for the gateway and (through the
//! operator's flag) runtime pods.

use std::process::Command;

use switchboard_tests::cluster::tools_bin;
use switchboard_tests::repo_root;

/// The chart rendered with `values` (YAML), or helm's error.
fn render(values: &str) -> Result<String, String> {
    let file = std::env::temp_dir().join(format!("switchboard-record-values-{}.yaml", uuid()));
    std::fs::write(&file, values).expect("values");
    let chart = repo_root().join("charts/switchboard");
    let out = Command::new(tools_bin().expect("tools").join("helm"))
        .args(["template", "sb"])
        .arg(&chart)
        .arg("-f")
        .arg(&file)
        .output()
        .expect("helm runs");
    let _ = std::fs::remove_file(&file);
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn uuid() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    format!("{}-{}", std::process::id(), now.as_nanos())
}

/// The gateway container's env of the chart rendered with `values` (YAML): name -> value
/// or `secret:<name>/<key>`.
fn gateway_env(values: &str) -> Vec<(String, String)> {
    deployment_env(values, "sb-switchboard-gateway")
}

/// The first container's env of the Deployment `name` of the chart rendered with `values`.
fn deployment_env(values: &str, name: &str) -> Vec<(String, String)> {
    let rendered = render(values).unwrap_or_else(|e| panic!("helm template: {e}"));
    let docs: Vec<serde_yaml::Value> = rendered.split("\n---").filter_map(|d| serde_yaml::from_str(d).ok()).collect();
    let gateway = docs
        .iter()
        .find(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("the Deployment {name}"));
    let env = gateway["spec"]["template"]["spec"]["containers"][0]["env"].as_sequence().expect("env");
    env.iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap_or_default().to_owned();
            let value = match e["value"].as_str() {
                Some(value) => value.to_owned(),
                None => format!(
                    "secret:{}/{}",
                    e["valueFrom"]["secretKeyRef"]["name"].as_str().unwrap_or_default(),
                    e["valueFrom"]["secretKeyRef"]["key"].as_str().unwrap_or_default()
                ),
            };
            (name, value)
        })
        .collect()
}

fn get<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

const RECORD_VALUES: &str = r#"
gateway:
  record:
    databaseUrl: postgres://switchboard@db:5432/records
    retentionDays: 7
    callerRetentionDays: 90
    redact:
      account: '\b\d{8}\b'
      sort-code: '\b\d{2}-\d{2}-\d{2}\b'
    prices:
      amazon.nova-lite-v1:0: { input: 0.5, output: 2 }
      amazon.nova-sonic-v1:0: { input: 0.06, output: 0.24, speechInput: 3.4, speechOutput: 13.6 }
"#;

#[test]
fn the_record_settings_reach_the_gateway_and_none_without_a_database() {
    let off = gateway_env("{}");
    assert!(off.iter().all(|(name, _)| !name.starts_with("SWITCHBOARD_RECORD_")), "{off:?}");

    let env = gateway_env(RECORD_VALUES);
    assert_eq!(get(&env, "SWITCHBOARD_RECORD_DATABASE_URL"), Some("postgres://switchboard@db:5432/records"));
    assert_eq!(get(&env, "SWITCHBOARD_RECORD_RETENTION_DAYS"), Some("7"));
    assert_eq!(get(&env, "SWITCHBOARD_RECORD_CALLER_RETENTION_DAYS"), Some("90"));
    assert_eq!(get(&env, "SWITCHBOARD_RECORD_BACKLOG"), Some("200000"));
    assert_eq!(
        get(&env, "SWITCHBOARD_RECORD_REDACT"),
        Some("account=\\b\\d{8}\\b\nsort-code=\\b\\d{2}-\\d{2}-\\d{2}\\b"),
        "one rule a line, the regex as written"
    );
    // The same rules go to runtime pods through the operator, for opted-in trace content.
    let operator = deployment_env(RECORD_VALUES, "sb-switchboard");
    assert_eq!(get(&operator, "SWITCHBOARD_RUNTIME_RECORD_REDACT"), get(&env, "SWITCHBOARD_RECORD_REDACT"));
    let none = deployment_env("{}", "sb-switchboard");
    assert_eq!(get(&none, "SWITCHBOARD_RUNTIME_RECORD_REDACT"), None);
    assert_eq!(
        get(&env, "SWITCHBOARD_RECORD_PRICES"),
        Some("amazon.nova-lite-v1:0=0.5,2;amazon.nova-sonic-v1:0=0.06,0.24,3.4,13.6")
    );

    assert_eq!(get(&env, "SWITCHBOARD_RECORD_SUMMARY_MODEL"), None, "no summary unless a model is named");

    let summary = gateway_env(
        "gateway: { record: { databaseUrl: postgres://db/r, summary: { modelId: amazon.nova-lite-v1:0, region: eu-west-2 } } }",
    );
    assert_eq!(get(&summary, "SWITCHBOARD_RECORD_SUMMARY_MODEL"), Some("amazon.nova-lite-v1:0"));
    assert_eq!(get(&summary, "SWITCHBOARD_RECORD_SUMMARY_REGION"), Some("eu-west-2"));
    assert_eq!(get(&summary, "SWITCHBOARD_RECORD_SUMMARY_ENDPOINT_URL"), None);
    let rendered =
        render("gateway: { serviceAccountAnnotations: { eks.amazonaws.com/role-arn: arn:aws:iam::1:role/gw } }")
            .expect("renders");
    assert!(
        rendered.contains("eks.amazonaws.com/role-arn: arn:aws:iam::1:role/gw"),
        "the gateway's ServiceAccount is annotated"
    );

    let secret = gateway_env("gateway: { record: { existingSecret: records-db, databaseUrl: ignored } }");
    assert_eq!(get(&secret, "SWITCHBOARD_RECORD_DATABASE_URL"), Some("secret:records-db/database-url"));
    assert_eq!(get(&secret, "SWITCHBOARD_RECORD_WEBHOOK_URL"), None);
}

#[test]
fn the_end_of_call_webhook_gets_its_secret_as_a_file_and_is_refused_without_one() {
    let values = "gateway: { record: { databaseUrl: postgres://db/r, webhook: { url: https://hooks.bank.example/calls, existingSecret: hook } } }";
    let env = gateway_env(values);
    assert_eq!(get(&env, "SWITCHBOARD_RECORD_WEBHOOK_URL"), Some("https://hooks.bank.example/calls"));
    assert_eq!(get(&env, "SWITCHBOARD_RECORD_WEBHOOK_SECRET_FILE"), Some("/etc/switchboard-gateway-webhook/secret"));
    let rendered = render(values).expect("renders");
    assert!(rendered.contains("secretName: hook") && rendered.contains("path: secret"), "the Secret is mounted");
    let refused = render("gateway: { record: { databaseUrl: postgres://db/r, webhook: { url: https://h/x } } }")
        .expect_err("no secret");
    assert!(refused.contains("needs gateway.record.webhook.existingSecret"), "{refused}");
    let refused =
        render("gateway: { record: { webhook: { url: https://h/x, existingSecret: hook } } }").expect_err("no record");
    assert!(refused.contains("needs the record"), "{refused}");
}

#[test]
fn the_outbound_calls_status_callbacks_get_their_key_as_a_file_their_receivers_and_none_without_a_secret() {
    let hooks = "allowedUrlPrefixes: [https://hooks.example.com/calls, http://crm.bank.svc:8080/hooks]";
    let env = gateway_env(&format!(
        "gateway: {{ callsWebhook: {{ existingSecret: calls-hook, timeoutSeconds: 3, {hooks} }} }}"
    ));
    let file = "/etc/switchboard-gateway-calls-webhook/secret";
    assert_eq!(get(&env, "SWITCHBOARD_CALLS_WEBHOOK_SECRET_FILE"), Some(file));
    assert_eq!(get(&env, "SWITCHBOARD_CALLS_WEBHOOK_TIMEOUT_SECONDS"), Some("3"));
    let allow = "https://hooks.example.com/calls,http://crm.bank.svc:8080/hooks";
    assert_eq!(get(&env, "SWITCHBOARD_CALLS_WEBHOOK_ALLOW"), Some(allow));
    let rendered =
        render(&format!("gateway: {{ callsWebhook: {{ existingSecret: calls-hook, {hooks} }} }}")).expect("renders");
    assert!(rendered.contains("secretName: calls-hook"), "the Secret is mounted");
    assert!(rendered.contains("mountPath: /etc/switchboard-gateway-calls-webhook"), "where the flag reads it");
    // A key without receivers would make any caller's URL a target: refused, saying what to write.
    let refused = render("gateway: { callsWebhook: { existingSecret: calls-hook } }").expect_err("no receivers");
    assert!(refused.contains("needs gateway.callsWebhook.allowedUrlPrefixes"), "{refused}");
    let none = gateway_env("gateway: {}");
    assert_eq!(get(&none, "SWITCHBOARD_CALLS_WEBHOOK_SECRET_FILE"), None);
    assert_eq!(get(&none, "SWITCHBOARD_CALLS_WEBHOOK_ALLOW"), None);
}

#[test]
fn the_trace_exporters_headers_come_from_a_secret_for_the_gateway_and_runtime_pods() {
    let values = "telemetry: { otlp: { endpoint: https://collector.example:4318, headersSecret: otlp-auth } }";
    let gateway = gateway_env(values);
    assert_eq!(get(&gateway, "OTEL_EXPORTER_OTLP_HEADERS"), Some("secret:otlp-auth/headers"));
    let operator = deployment_env(values, "sb-switchboard");
    assert_eq!(get(&operator, "SWITCHBOARD_RUNTIME_OTLP_HEADERS_SECRET"), Some("otlp-auth/headers"));
    let none = gateway_env("telemetry: { otlp: { endpoint: https://collector.example:4318 } }");
    assert_eq!(get(&none, "OTEL_EXPORTER_OTLP_HEADERS"), None);
}

#[test]
fn the_trace_protocol_reaches_the_gateway_and_runtime_pods_and_an_unknown_one_is_refused() {
    let values = "telemetry: { otlp: { endpoint: http://collector.example:4317, protocol: grpc } }";
    assert_eq!(get(&gateway_env(values), "OTEL_EXPORTER_OTLP_PROTOCOL"), Some("grpc"));
    let operator = deployment_env(values, "sb-switchboard");
    assert_eq!(get(&operator, "SWITCHBOARD_RUNTIME_OTLP_PROTOCOL"), Some("grpc"));
    let default = "telemetry: { otlp: { endpoint: http://collector.example:4318 } }";
    assert_eq!(get(&gateway_env(default), "OTEL_EXPORTER_OTLP_PROTOCOL"), None, "the runtime's default");
    assert_eq!(get(&deployment_env(default, "sb-switchboard"), "SWITCHBOARD_RUNTIME_OTLP_PROTOCOL"), None);
    let refused = render("telemetry: { otlp: { endpoint: http://c:4317, protocol: http/json } }").expect_err("refused");
    assert!(refused.contains("telemetry.otlp.protocol \"http/json\": use grpc or http/protobuf"), "{refused}");
}
