//! The pure build of a test run, from inline YAML.

use super::*;

const TEST: &str = r#"
apiVersion: switchboard.dev/v1alpha1
kind: AgentTest
metadata: {name: banking, namespace: bank, uid: 7c1e0000-0000-0000-0000-000000000001}
spec:
  agents: [{name: triage}, {name: idv}]
  apiKeySecretRef: {name: gateway-key, key: api-key}
  parallel: 2
  timeoutSeconds: 120
  scenarios:
    - name: Balance
      agent: triage
      steps:
        - say: I'd like to check my balance
          expect: {agent: idv}
    - name: Unknown request
      steps:
        - say: Sell me a car
"#;

fn test() -> AgentTest {
    serde_yaml::from_str(TEST).expect("AgentTest")
}

fn deployed(hashes: [&str; 2]) -> Vec<Deployed> {
    ["triage", "idv"]
        .iter()
        .zip(hashes)
        .map(|(a, h)| Deployed { agent: (*a).into(), config_hash: h.into(), candidate: false })
        .collect()
}

#[test]
fn the_hash_follows_the_test_and_what_each_agent_runs() {
    let t = test();
    let base = tested_hash(&t, &deployed(["a", "b"]));
    assert_eq!(base, tested_hash(&t, &deployed(["a", "b"])), "stable");
    assert_ne!(base, tested_hash(&t, &deployed(["a", "c"])), "a Persona edit rolls idv: a new run");
    let mut edited = t.clone();
    edited.spec.parallel = 3;
    assert_ne!(base, tested_hash(&edited, &deployed(["a", "b"])), "a test edit: a new run");
    assert_eq!(run_name(&t, &base), format!("banking-{}", &base[..10]));
}

#[test]
fn the_job_runs_switchboard_test_against_the_gateway_with_the_key_from_the_secret() {
    let t = test();
    let hash = tested_hash(&t, &deployed(["a", "b"]));
    let job = job(&t, &hash, ("ws://sb-gateway.sb:80", &[]), ("registry.local/sb:dev", None));
    let name = run_name(&t, &hash);
    assert_eq!(job.metadata.name.as_deref(), Some(name.as_str()));
    assert_eq!(job.metadata.namespace.as_deref(), Some("bank"));
    let owner = &job.metadata.owner_references.as_ref().expect("owned")[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str(), owner.controller), ("AgentTest", "banking", Some(true)));
    let spec = job.spec.expect("spec");
    assert_eq!((spec.backoff_limit, spec.active_deadline_seconds), (Some(0), Some(120)));
    let labels = spec.template.metadata.and_then(|m| m.labels).expect("pod labels");
    assert_eq!(labels[TEST_LABEL], "banking");
    assert_eq!(labels[RUN_LABEL], &hash[..10]);
    let pod = spec.template.spec.expect("pod");
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(pod.automount_service_account_token, Some(false));
    let c = &pod.containers[0];
    assert_eq!(c.image.as_deref(), Some("registry.local/sb:dev"));
    assert_eq!(c.command.as_deref(), Some(&["switchboard".to_owned()][..]));
    let args = c.args.clone().expect("args").join(" ");
    assert_eq!(
        args,
        "test /etc/switchboard/scenarios --gateway ws://sb-gateway.sb:80 --jobs 2 --summary-file /dev/termination-log"
    );
    let env = &c.env.as_ref().expect("env")[0];
    let secret = env.value_from.as_ref().and_then(|v| v.secret_key_ref.as_ref()).expect("from a Secret");
    assert_eq!((env.name.as_str(), secret.name.as_str(), secret.key.as_str()), (API_KEY_ENV, "gateway-key", "api-key"));
    assert!(env.value.is_none(), "the operator never holds the key");
    assert_eq!(c.termination_message_policy.as_deref(), Some("File"));
    let sc = c.security_context.as_ref().expect("security context");
    assert_eq!((sc.read_only_root_filesystem, sc.allow_privilege_escalation), (Some(true), Some(false)));
    let volume = pod.volumes.as_ref().expect("volumes").iter().find(|v| v.name == "scenarios").expect("scenarios");
    assert_eq!(volume.config_map.as_ref().map(|c| c.name.as_str()), Some(name.as_str()));
}

#[test]
fn without_a_secret_the_job_has_no_key() {
    let mut t = test();
    t.spec.api_key_secret_ref = None;
    let job = job(&t, "0123456789abcdef", ("ws://gw:80", &[]), ("img", None));
    let pod = job.spec.and_then(|s| s.template.spec).expect("pod");
    assert!(pod.containers[0].env.is_none());
    assert!(!pod.containers[0].args.iter().flatten().any(|a| a == "--candidate"));
}

#[test]
fn a_run_of_a_held_rollout_asks_for_the_candidate_routes_and_records_what_passed() {
    let t = test();
    let job = job(&t, "0123456789abcdef", ("ws://gw:80", &["triage", "idv"]), ("img", None));
    let pod = job.spec.and_then(|s| s.template.spec).expect("pod");
    let args = pod.containers[0].args.clone().unwrap_or_default();
    assert_eq!(args[args.len() - 4..], ["--candidate", "triage", "--candidate", "idv"]);
    let configs = passed_configs(&deployed(["a", "b"]));
    assert_eq!(configs.into_iter().collect::<Vec<_>>(), [("idv".into(), "b".into()), ("triage".into(), "a".into())]);
}

#[test]
fn the_config_map_holds_each_scenario_as_a_file_in_order() {
    let t = test();
    let cm = config_map(&t, "0123456789abcdef", None);
    assert_eq!(cm.metadata.name.as_deref(), Some("banking-0123456789"));
    let data = cm.data.expect("data");
    assert_eq!(data.keys().collect::<Vec<_>>(), ["scenario-01.yaml", "scenario-02.yaml"]);
    let first: serde_json::Value = serde_yaml::from_str(&data["scenario-01.yaml"]).expect("YAML");
    assert_eq!(first, t.spec.scenarios[0]);
}

#[test]
fn a_judge_reaches_the_command_line_and_its_credentials_only_the_pod() {
    let mut t = test();
    t.spec.judge = Some(
        serde_json::from_value(serde_json::json!({"model": "amazon.nova-pro-v1:0", "region": "eu-west-1",
        "endpointUrl": "https://bedrock.example", "credentialsSecretRef": {"name": "judge-aws"}}))
        .expect("judge"),
    );
    let job = job(&t, "0123456789abcdef", ("ws://gw:80", &[]), ("img", None));
    let pod = job.spec.and_then(|s| s.template.spec).expect("pod");
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap_or_default().join(" ");
    assert!(
        args.ends_with(
            "--judge-model amazon.nova-pro-v1:0 --judge-region eu-west-1 --judge-endpoint-url https://bedrock.example"
        ),
        "{args}"
    );
    let env: Vec<_> = c.env.iter().flatten().map(|e| (e.name.as_str(), e.value.as_deref())).collect();
    assert!(env.contains(&("SWITCHBOARD_CREDENTIALS_DIR", Some("/etc/switchboard/credentials"))), "{env:?}");
    let mount = c.volume_mounts.iter().flatten().find(|m| m.name == JUDGE_CREDENTIALS).expect("mounted");
    assert_eq!((mount.mount_path.as_str(), mount.read_only), ("/etc/switchboard/credentials", Some(true)));
    let volume = pod.volumes.iter().flatten().find(|v| v.name == JUDGE_CREDENTIALS).expect("volume");
    assert_eq!(volume.secret.as_ref().and_then(|s| s.secret_name.as_deref()), Some("judge-aws"));
    assert_ne!(
        tested_hash(&t, &deployed(["a", "b"])),
        tested_hash(&test(), &deployed(["a", "b"])),
        "a new judge: a new run"
    );
}

#[test]
fn pollys_settings_reach_the_command_line_and_its_credentials_only_the_pod() {
    let mut t = test();
    t.spec.speech = Some(
        serde_json::from_value(serde_json::json!({"voice": "Matthew", "engine": "standard", "region": "eu-west-1",
        "endpointUrl": "https://polly.example", "credentialsSecretRef": {"name": "polly-aws"}}))
        .expect("speech"),
    );
    let run = job(&t, "0123456789abcdef", ("ws://gw:80", &[]), ("img", None));
    let pod = run.spec.and_then(|s| s.template.spec).expect("pod");
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap_or_default().join(" ");
    let expected = "--speech-voice Matthew --speech-engine standard --speech-region eu-west-1 \
                    --speech-endpoint-url https://polly.example --speech-credentials-dir /etc/switchboard/speech-credentials";
    assert!(args.ends_with(expected), "{args}");
    let mount = c.volume_mounts.iter().flatten().find(|m| m.name == SPEECH_CREDENTIALS).expect("mounted");
    assert_eq!((mount.mount_path.as_str(), mount.read_only), ("/etc/switchboard/speech-credentials", Some(true)));
    let volume = pod.volumes.iter().flatten().find(|v| v.name == SPEECH_CREDENTIALS).expect("volume");
    assert_eq!(volume.secret.as_ref().and_then(|s| s.secret_name.as_deref()), Some("polly-aws"));
    // Polly's defaults: no flag, no Secret.
    t.spec.speech = Some(serde_json::from_value(serde_json::json!({})).expect("speech"));
    let run = job(&t, "0123456789abcdef", ("ws://gw:80", &[]), ("img", None));
    let pod = run.spec.and_then(|s| s.template.spec).expect("pod");
    assert!(
        !pod.containers[0].args.iter().flatten().any(|a| a.starts_with("--speech")),
        "{:?}",
        pod.containers[0].args
    );
    assert!(!pod.volumes.iter().flatten().any(|v| v.name == SPEECH_CREDENTIALS));
    assert_ne!(
        tested_hash(&t, &deployed(["a", "b"])),
        tested_hash(&test(), &deployed(["a", "b"])),
        "speech settings: a new run"
    );
}

#[test]
fn speech_steps_wav_files_are_mounted_from_their_config_maps() {
    let mut t = test();
    t.spec.audio = vec![serde_json::from_value(serde_json::json!({"name": "caller-wavs"})).expect("ref")];
    let job = job(&t, "0123456789abcdef", ("ws://gw:80", &[]), ("img", None));
    let pod = job.spec.and_then(|s| s.template.spec).expect("pod");
    let mount = pod.containers[0].volume_mounts.iter().flatten().find(|m| m.name == "audio-0").expect("mounted");
    assert_eq!((mount.mount_path.as_str(), mount.read_only), ("/etc/switchboard/audio/caller-wavs", Some(true)));
    let volume = pod.volumes.iter().flatten().find(|v| v.name == "audio-0").expect("volume");
    let source = volume.config_map.as_ref().expect("a ConfigMap");
    assert_eq!((source.name.as_str(), source.optional), ("caller-wavs", Some(false)));
}

/// The test with a judge and Polly as `judge` and `speech` say (`Some(endpoint)`: on it).
fn with_aws(judge: Option<Option<&str>>, speech: Option<Option<&str>>) -> AgentTest {
    let mut t = test();
    t.spec.judge = judge.map(|url| {
        serde_json::from_value(serde_json::json!({"model": "amazon.nova-pro-v1:0", "endpointUrl": url})).expect("judge")
    });
    t.spec.speech = speech.map(|url| serde_json::from_value(serde_json::json!({"endpointUrl": url})).expect("speech"));
    t
}

/// The test container's arguments, the CA bundle's mount and volume, the scenarios'
/// volume items and the run's ConfigMap keys, for `t` with the platform's bundle `ca`.
fn run_with_ca(t: &AgentTest, ca: Option<&CaBundle>) -> (String, Option<VolumeMount>, Option<Volume>, Vec<String>) {
    let run = job(t, "0123456789abcdef", ("ws://gw:80", &[]), ("img", ca));
    let pod = run.spec.and_then(|s| s.template.spec).expect("pod");
    let c = &pod.containers[0];
    let args = c.args.clone().unwrap_or_default().join(" ");
    let mount = c.volume_mounts.iter().flatten().find(|m| m.name == BEDROCK_CA).cloned();
    let volume = pod.volumes.iter().flatten().find(|v| v.name == BEDROCK_CA).cloned();
    let scenarios = pod.volumes.iter().flatten().find(|v| v.name == "scenarios").expect("scenarios");
    let items = scenarios.config_map.as_ref().and_then(|c| c.items.clone()).expect("items");
    assert_eq!(
        items.iter().map(|i| (i.key.as_str(), i.path.as_str())).collect::<Vec<_>>(),
        [("scenario-01.yaml", "scenario-01.yaml"), ("scenario-02.yaml", "scenario-02.yaml")],
        "the scenarios' folder holds the scenarios only"
    );
    let keys = config_map(t, "0123456789abcdef", ca).data.expect("data").into_keys().collect();
    (args, mount, volume, keys)
}

#[test]
fn the_platforms_bedrock_ca_reaches_a_judge_and_polly_on_their_own_endpoints() {
    let ca = CaBundle("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n".into());
    let sim = Some("https://10.0.0.5:28443");
    let file = "/etc/switchboard/bedrock-ca/bedrock-ca.pem";
    // (judge, speech) -> whether the judge, Polly are given the bundle.
    let cases = [
        ((Some(sim), None), (true, false)),
        ((None, Some(sim)), (false, true)),
        ((Some(sim), Some(sim)), (true, true)),
        ((None, None), (false, false)),
        // On AWS's public endpoints the public roots verify them: a CA file would replace those.
        ((Some(None), Some(None)), (false, false)),
        ((Some(sim), Some(None)), (true, false)),
    ];
    for ((judge, speech), (judge_ca, speech_ca)) in cases {
        let t = with_aws(judge, speech);
        let what = format!("judge {judge:?}, speech {speech:?}");
        let (args, mount, volume, keys) = run_with_ca(&t, Some(&ca));
        assert_eq!(args.contains(&format!("--judge-ca-file {file}")), judge_ca, "{what}: {args}");
        assert_eq!(args.contains(&format!("--speech-ca-file {file}")), speech_ca, "{what}: {args}");
        assert_eq!(trusts_bedrock_ca(&t), (judge_ca, speech_ca), "{what}");
        let used = judge_ca || speech_ca;
        assert_eq!(keys.contains(&"bedrock-ca.pem".to_owned()), used, "{what}: {keys:?}");
        if !used {
            assert!(mount.is_none() && volume.is_none(), "{what}: nothing mounted");
            continue;
        }
        let mount = mount.expect("the bundle is mounted");
        assert_eq!((mount.mount_path.as_str(), mount.read_only), ("/etc/switchboard/bedrock-ca", Some(true)), "{what}");
        let source = volume.and_then(|v| v.config_map).expect("from a ConfigMap");
        assert_eq!(source.name, "banking-0123456789", "the run's own ConfigMap: {what}");
        assert_eq!(source.optional, Some(false));
        let items: Vec<_> = source.items.iter().flatten().map(|i| (i.key.as_str(), i.path.as_str())).collect();
        assert_eq!(items, [("bedrock-ca.pem", "bedrock-ca.pem")], "{what}");
        assert_eq!(
            config_map(&t, "0123456789abcdef", Some(&ca)).data.expect("data")["bedrock-ca.pem"],
            ca.0,
            "the bundle as the operator read it"
        );
        // Without a bundle, the same test trusts the system's roots: no flag, no mount, no key.
        let (args, mount, volume, keys) = run_with_ca(&t, None);
        assert!(!args.contains("-ca-file"), "{what}: {args}");
        assert!(mount.is_none() && volume.is_none() && !keys.contains(&"bedrock-ca.pem".to_owned()), "{what}");
    }
}
