//! The checks of an AgentTest on its own: its name, Agents, judge, speech, audio ConfigMaps
//! and the outline of each scenario.

use super::{
    AUDIO_DIR, AgentTestSpec, JudgeSpec, MAX_AUDIO, MAX_NAME_LEN, MAX_SCENARIO_BYTES, MAX_SCENARIOS, SpeechSpec,
};
use crate::common::ObjectRef;
use crate::validate::{Problem, Reason, duplicates, is_dns_label};

/// Every problem with an AgentTest named `name`, on its own (whether its Agents exist is
/// the operator's check).
pub fn validate_agent_test(name: &str, spec: &AgentTestSpec) -> Vec<Problem> {
    let mut problems = Vec::new();
    let invalid = |field: String, message: String| Problem::new(Reason::InvalidField, field, message);
    if name.len() > MAX_NAME_LEN {
        problems.push(invalid(
            "metadata.name".into(),
            format!("is {} characters; at most {MAX_NAME_LEN} (its Jobs add 11)", name.len()),
        ));
    }
    if spec.agents.is_empty() {
        problems.push(invalid("spec.agents".into(), "name at least one Agent under test".into()));
    }
    for (i, agent) in spec.agents.iter().enumerate() {
        if !is_dns_label(&agent.name) {
            problems.push(invalid(format!("spec.agents[{i}].name"), format!("{:?} is not an Agent name", agent.name)));
        }
    }
    for dup in duplicates(spec.agents.iter().map(|a| a.name.as_str())) {
        problems.push(Problem::new(Reason::DuplicateName, "spec.agents", format!("Agent {dup:?} is listed twice")));
    }
    if spec.scenarios.is_empty() || spec.scenarios.len() > MAX_SCENARIOS {
        problems.push(invalid(
            "spec.scenarios".into(),
            format!("holds {} scenarios; give between 1 and {MAX_SCENARIOS}", spec.scenarios.len()),
        ));
    }
    let size = serde_json::to_string(&spec.scenarios).map_or(usize::MAX, |s| s.len());
    if size > MAX_SCENARIO_BYTES {
        problems.push(invalid(
            "spec.scenarios".into(),
            format!("are {size} bytes as JSON; at most {MAX_SCENARIO_BYTES}: split them over several AgentTests"),
        ));
    }
    if let Some(judge) = &spec.judge {
        problems.extend(check_judge(judge));
    }
    if let Some(speech) = &spec.speech {
        problems.extend(check_speech(speech));
    }
    if spec.audio.len() > MAX_AUDIO {
        problems
            .push(invalid("spec.audio".into(), format!("lists {} ConfigMaps; at most {MAX_AUDIO}", spec.audio.len())));
    }
    for (i, audio) in spec.audio.iter().enumerate() {
        if !is_dns_label(&audio.name) {
            problems
                .push(invalid(format!("spec.audio[{i}].name"), format!("{:?} is not a ConfigMap name", audio.name)));
        }
    }
    let audio: Vec<&str> = spec.audio.iter().map(|a| a.name.as_str()).collect();
    let mut names = Vec::new();
    for (i, scenario) in spec.scenarios.iter().enumerate() {
        problems.extend(check_scenario(i, scenario, &audio, spec.speech.is_some()));
        if let Some(name) = scenario.get("name").and_then(|n| n.as_str()) {
            names.push(name);
        }
    }
    for dup in duplicates(names) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.scenarios",
            format!("two scenarios are named {dup:?}: the report could not tell them apart"),
        ));
    }
    if !(1..=16).contains(&spec.parallel) {
        problems.push(invalid("spec.parallel".into(), format!("is {}; give 1 to 16", spec.parallel)));
    }
    if !(30..=3600).contains(&spec.timeout_seconds) {
        problems.push(invalid("spec.timeoutSeconds".into(), format!("is {}; give 30 to 3600", spec.timeout_seconds)));
    }
    problems
}

/// The judge's fields: what reaches the Job's command line must be plain.
fn check_judge(judge: &JudgeSpec) -> Vec<Problem> {
    let invalid = |field: &str, message: String| Problem::new(Reason::InvalidField, field, message);
    let mut problems = Vec::new();
    let plain = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || "-_.:/".contains(c));
    if judge.model.is_empty() || judge.model.len() > 200 || !plain(&judge.model) {
        problems.push(invalid("spec.judge.model", format!("{:?} is not a Bedrock model id", judge.model)));
    }
    let access = (judge.region.as_deref(), judge.endpoint_url.as_deref(), judge.credentials_secret_ref.as_ref());
    problems.extend(check_aws("spec.judge", "the judge's", access));
    problems
}

/// Where a Job reaches an AWS service, under `at`: a region, an `https://` endpoint (the
/// credentials of `whose` go there) and a credentials Secret's name.
fn check_aws(
    at: &str,
    whose: &str,
    (region, url, secret): (Option<&str>, Option<&str>, Option<&ObjectRef>),
) -> Vec<Problem> {
    let invalid = |field: &str, message: String| Problem::new(Reason::InvalidField, format!("{at}.{field}"), message);
    let mut problems = Vec::new();
    if let Some(region) = region
        && !(is_dns_label(region) && region.len() <= 64)
    {
        problems.push(invalid("region", format!("{region:?} is not an AWS region (e.g. us-east-1)")));
    }
    if let Some(url) = url
        && !https_url(url)
    {
        let message = format!("{url:?} is not an https:// URL with a host: {whose} credentials go there");
        problems.push(invalid("endpointUrl", message));
    }
    if let Some(secret) = secret
        && !is_dns_label(&secret.name)
    {
        problems.push(invalid("credentialsSecretRef.name", format!("{:?} is not a Secret name", secret.name)));
    }
    problems
}

/// The speech settings: what reaches the Job's command line must be plain.
fn check_speech(speech: &SpeechSpec) -> Vec<Problem> {
    let invalid = |field: &str, message: String| Problem::new(Reason::InvalidField, field, message);
    let mut problems = Vec::new();
    if let Some(voice) = &speech.voice
        && !((1..=32).contains(&voice.len()) && voice.bytes().all(|b| b.is_ascii_alphabetic()))
    {
        problems.push(invalid("spec.speech.voice", format!("{voice:?} is not a Polly voice id (e.g. Joanna)")));
    }
    if let Some(engine) = &speech.engine
        && !ENGINES.contains(&engine.as_str())
    {
        problems.push(invalid("spec.speech.engine", format!("{engine:?} is not one of {}", ENGINES.join(", "))));
    }
    let access = (speech.region.as_deref(), speech.endpoint_url.as_deref(), speech.credentials_secret_ref.as_ref());
    problems.extend(check_aws("spec.speech", "Polly's", access));
    problems
}

/// Amazon Polly's engines.
const ENGINES: [&str; 4] = ["standard", "neural", "long-form", "generative"];

/// Whether `url` is an `https://` URL with a host, of plain characters, at most 512 long.
fn https_url(url: &str) -> bool {
    let host = url.strip_prefix("https://").unwrap_or_default();
    !host.is_empty() && !host.starts_with('/') && url.len() <= 512 && url.chars().all(|c| c.is_ascii_graphic())
}

/// Whether `path` names a file of one of the `audio` ConfigMaps' mounts:
/// `/etc/switchboard/audio/<listed name>/<key>`, nothing else.
fn mounted_audio(path: &str, audio: &[&str]) -> bool {
    let Some(rest) = path.strip_prefix(AUDIO_DIR).and_then(|r| r.strip_prefix('/')) else { return false };
    let Some((name, key)) = rest.split_once('/') else { return false };
    let key_ok = !key.is_empty()
        && key.len() <= 253
        && key != "."
        && key != ".."
        && key.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    audio.contains(&name) && key_ok
}

/// The outline of one scenario: an object with a name and steps, WAV files only from the
/// `audio` ConfigMaps' mounts, `speech:` only when the AgentTest says how to render it (`speaks`).
fn check_scenario(i: usize, scenario: &serde_json::Value, audio: &[&str], speaks: bool) -> Vec<Problem> {
    let field = |f: &str| format!("spec.scenarios[{i}]{f}");
    let invalid = |f: &str, message: &str| Problem::new(Reason::InvalidField, field(f), message.to_owned());
    let Some(object) = scenario.as_object() else {
        return vec![invalid("", "must be a scenario (a mapping with name and steps)")];
    };
    let mut problems = Vec::new();
    match object.get("name").and_then(|n| n.as_str()) {
        Some(name) if !name.trim().is_empty() && name.len() <= 200 => {}
        _ => problems.push(invalid(".name", "give the scenario a name (1 to 200 characters)")),
    }
    match object.get("steps").and_then(|s| s.as_array()) {
        Some(steps) if !steps.is_empty() && steps.len() <= 100 => {
            for (j, step) in steps.iter().enumerate() {
                if let Some(path) = step.get("audio")
                    && !path.as_str().is_some_and(|p| mounted_audio(p, audio))
                {
                    problems.push(invalid(
                        &format!(".steps[{j}].audio"),
                        "the Job has only the WAV files of spec.audio's ConfigMaps: name one as \
                         /etc/switchboard/audio/<ConfigMap>/<key>, with the ConfigMap listed in spec.audio",
                    ));
                }
                if step.get("speech").is_some() && !speaks {
                    problems.push(invalid(
                        &format!(".steps[{j}].speech"),
                        "speech: is rendered by Amazon Polly in the Job: set spec.speech (its voice, region and \
                         credentials), or give the words as say: or a WAV file as audio:",
                    ));
                }
            }
        }
        _ => problems.push(invalid(".steps", "give 1 to 100 steps")),
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use super::*;

    fn test(spec: serde_json::Value) -> AgentTest {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "switchboard.dev/v1alpha1", "kind": "AgentTest", "metadata": {"name": "t"}, "spec": spec
        }))
        .expect("AgentTest")
    }

    fn scenario(name: &str) -> serde_json::Value {
        serde_json::json!({"name": name, "agent": "triage", "steps": [{"say": "hello", "expect": {"agent": "triage"}}]})
    }

    #[test]
    fn a_valid_test_has_defaults_and_no_problems() {
        let t = test(serde_json::json!({"agents": [{"name": "triage"}], "scenarios": [scenario("a"), scenario("b")]}));
        assert_eq!((t.spec.parallel, t.spec.timeout_seconds), (4, 600));
        assert_eq!(validate_agent_test("t", &t.spec), vec![]);
        assert_eq!(kube::core::cel::validate_cel(&t).map_err(|e| e.to_string()), Ok(()));
    }

    #[test]
    fn each_problem_is_named_with_its_field() {
        let mut bad_steps = scenario("c");
        bad_steps["steps"] = serde_json::json!([{"audio": "caller.wav"}, {"speech": "Hello"}]);
        let t = test(serde_json::json!({
            "agents": [{"name": "triage"}, {"name": "triage"}, {"name": "Bad_Name"}],
            "scenarios": [scenario("a"), scenario("a"), {"steps": []}, bad_steps, "text"],
            "parallel": 0, "timeoutSeconds": 5
        }));
        let problems: Vec<String> =
            validate_agent_test(&"x".repeat(53), &t.spec).iter().map(|p| p.to_string()).collect();
        for expected in [
            "metadata.name: is 53 characters",
            "spec.agents[2].name: \"Bad_Name\" is not an Agent name",
            "DuplicateName: spec.agents: Agent \"triage\" is listed twice",
            "spec.scenarios[2].name: give the scenario a name",
            "spec.scenarios[2].steps: give 1 to 100 steps",
            "spec.scenarios[3].steps[0].audio: the Job has only the WAV files of spec.audio",
            "spec.scenarios[3].steps[1].speech: speech: is rendered by Amazon Polly in the Job: set spec.speech",
            "spec.scenarios[4]: must be a scenario",
            "two scenarios are named \"a\"",
            "spec.parallel: is 0",
            "spec.timeoutSeconds: is 5",
        ] {
            assert!(problems.iter().any(|p| p.contains(expected)), "{expected:?} not in {problems:#?}");
        }
    }

    #[test]
    fn cel_rules_refuse_what_the_validator_refuses() {
        let twice = test(serde_json::json!({"agents": [{"name": "a"}, {"name": "a"}], "scenarios": [scenario("s")]}));
        let err = kube::core::cel::validate_cel(&twice).expect_err("duplicate agents").to_string();
        assert!(err.contains("each Agent is listed once"), "{err}");
        assert!(!validate_agent_test("t", &twice.spec).is_empty());
        let same = test(serde_json::json!({"agents": [{"name": "a"}], "scenarios": [scenario("s"), scenario("s")]}));
        let err = kube::core::cel::validate_cel(&same).expect_err("duplicate scenarios").to_string();
        assert!(err.contains("scenario names must be unique"), "{err}");
        assert!(!validate_agent_test("t", &same.spec).is_empty());
    }

    #[test]
    fn wav_files_come_only_from_the_listed_config_maps() {
        let with = |audio: serde_json::Value, path: &str| {
            let mut s = scenario("s");
            s["steps"] = serde_json::json!([{"audio": path}]);
            let t = test(serde_json::json!({"agents": [{"name": "a"}], "scenarios": [s], "audio": audio}));
            validate_agent_test("t", &t.spec).iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        let listed = serde_json::json!([{"name": "caller-wavs"}]);
        assert_eq!(with(listed.clone(), "/etc/switchboard/audio/caller-wavs/balance.wav"), Vec::<String>::new());
        for bad in [
            "caller.wav",
            "/etc/switchboard/audio/other/balance.wav",
            "/etc/switchboard/audio/caller-wavs/../../scenarios/x",
            "/etc/switchboard/audio/caller-wavs/",
            "/etc/passwd",
        ] {
            let problems = with(listed.clone(), bad);
            assert!(problems.iter().any(|p| p.contains("spec.scenarios[0].steps[0].audio")), "{bad}: {problems:?}");
        }
        let problems = with(serde_json::json!([{"name": "Bad_Name"}]), "/etc/switchboard/audio/Bad_Name/x.wav");
        assert!(problems.iter().any(|p| p.contains("spec.audio[0].name")), "{problems:?}");
    }

    #[test]
    fn a_judge_is_checked_before_it_reaches_a_command_line() {
        let judged = |judge: serde_json::Value| {
            let t = test(serde_json::json!({"agents": [{"name": "a"}], "scenarios": [scenario("s")], "judge": judge}));
            validate_agent_test("t", &t.spec).iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        let ok = serde_json::json!({"model": "amazon.nova-pro-v1:0", "region": "eu-west-1",
            "endpointUrl": "https://bedrock.vpce.example", "credentialsSecretRef": {"name": "judge-aws"}});
        assert_eq!(judged(ok), Vec::<String>::new());
        let bad = judged(serde_json::json!({"model": "m --gateway ws://evil", "region": "Not A Region",
            "endpointUrl": "http://plain.example", "credentialsSecretRef": {"name": "Bad_Name"}}));
        for field in
            ["spec.judge.model", "spec.judge.region", "spec.judge.endpointUrl", "spec.judge.credentialsSecretRef.name"]
        {
            assert!(bad.iter().any(|p| p.starts_with(&format!("InvalidField: {field}: "))), "{field}: {bad:?}");
        }
    }

    #[test]
    fn speech_steps_need_spec_speech_whose_fields_are_checked() {
        let spoken = |speech: Option<serde_json::Value>| {
            let mut s = scenario("s");
            s["steps"] = serde_json::json!([{"speech": "I'd like to check my balance"}]);
            let mut spec = serde_json::json!({"agents": [{"name": "a"}], "scenarios": [s]});
            if let Some(speech) = speech {
                spec["speech"] = speech;
            }
            validate_agent_test("t", &test(spec).spec).iter().map(|p| p.to_string()).collect::<Vec<_>>()
        };
        let refused = spoken(None);
        assert!(
            refused.iter().any(|p| p.contains("steps[0].speech: speech: is rendered by Amazon Polly")),
            "{refused:?}"
        );
        assert_eq!(spoken(Some(serde_json::json!({}))), Vec::<String>::new(), "Polly's defaults");
        let ok = serde_json::json!({"voice": "Matthew", "engine": "standard", "region": "eu-west-1",
            "endpointUrl": "https://polly.vpce.example", "credentialsSecretRef": {"name": "polly-aws"}});
        assert_eq!(spoken(Some(ok)), Vec::<String>::new());
        let bad = spoken(Some(serde_json::json!({"voice": "Joanna --gateway ws://evil", "engine": "turbo",
            "region": "Not A Region", "endpointUrl": "http://plain.example", "credentialsSecretRef": {"name": "Bad_Name"}})));
        for field in [
            "spec.speech.voice",
            "spec.speech.engine",
            "spec.speech.region",
            "spec.speech.endpointUrl",
            "spec.speech.credentialsSecretRef.name",
        ] {
            assert!(bad.iter().any(|p| p.starts_with(&format!("InvalidField: {field}: "))), "{field}: {bad:?}");
        }
    }

    #[test]
    fn oversized_scenarios_are_refused() {
        let mut big = scenario("big");
        big["description"] = serde_json::Value::String("x".repeat(MAX_SCENARIO_BYTES));
        let t = test(serde_json::json!({"agents": [{"name": "a"}], "scenarios": [big]}));
        let problems = validate_agent_test("t", &t.spec);
        assert!(problems.iter().any(|p| p.message.contains("split them over several AgentTests")), "{problems:?}");
    }
}
