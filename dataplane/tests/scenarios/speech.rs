//! `speech:` steps against a gateway, rendered by Amazon Polly through the real
//! `aws-sdk-polly` client — here the simulator's Polly endpoint, which gives each text a
//! phrase tone that the same simulator's Nova Sonic, behind the real gateway and runtime
//! processes, hears as those words. The Example Bank's spoken balance conversation passes;
//! a voice Polly does not have, or an endpoint that does not answer, fails the run at the
//! first spoken step, saying which and why.

use std::path::Path;

use crate::fleet::Fleet;
use crate::{switchboard_test_with, text};

const SCENARIO: &str = "examples/banking/tests/voice-balance.yaml";
const BALANCE: &str = "I'd like to check my balance";
const DETAILS: &str = "My name is Ada Lovelace, account 12345678, sort code 12-34-56";

/// `switchboard test SCENARIO --gateway url`, Polly at `endpoint` (trusting `ca`) speaking
/// in `voice`: the exit code and stdout.
async fn run(url: &str, endpoint: &str, ca: Option<&Path>, voice: &str) -> (Option<i32>, String) {
    let mut args = vec![SCENARIO.to_owned(), "--gateway".into(), url.to_owned()];
    args.extend(["--speech-endpoint-url".into(), endpoint.to_owned(), "--speech-voice".into(), voice.to_owned()]);
    if let Some(ca) = ca {
        args.extend(["--speech-ca-file".into(), ca.to_str().expect("utf-8").to_owned()]);
    }
    let out = tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let env = [("AWS_ACCESS_KEY_ID", "AKIDSPEECHTEST"), ("AWS_SECRET_ACCESS_KEY", "not-a-secret")];
        switchboard_test_with(&args, &env)
    })
    .await
    .expect("the runner ran");
    (out.status.code(), format!("{}\n{}", text(&out.stdout), text(&out.stderr)))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_steps_at_a_gateway_are_rendered_by_polly_and_its_failures_name_the_step() {
    let fleet = Fleet::start(&[]).await;
    let (endpoint, ca) = (fleet.sim.endpoint_url().to_owned(), fleet.sim.ca_cert_path().map(Path::to_path_buf));

    // A voice Polly does not have: the service's error, at the first spoken step.
    let (code, out) = run(&fleet.url, &endpoint, ca.as_deref(), "Bogus").await;
    assert_eq!(code, Some(1), "{out}");
    let expected = format!(
        "could not run: step 1 of 2 (line 9): speech: {BALANCE:?}: Amazon Polly could not render it: \
         ValidationException: 1 validation error detected: Value 'Bogus' at 'voiceId'"
    );
    assert!(out.contains(&expected), "the report says {expected:?}:\n{out}");
    assert!(fleet.sim.spoken_phrases().is_empty(), "nothing was rendered");

    // An endpoint where nothing listens: the connection's error, at the same step.
    let closed_port = crate::served::ClosedPort::new();
    let closed = closed_port.addr();
    let (code, out) = run(&fleet.url, &format!("http://{closed}"), None, "Joanna").await;
    assert_eq!(code, Some(1), "{out}");
    let expected =
        format!("could not run: step 1 of 2 (line 9): speech: {BALANCE:?}: Amazon Polly could not render it: ");
    assert!(out.contains(&expected) && out.contains("onnect"), "the report says {expected:?} and why:\n{out}");

    // Polly renders both texts; the simulated Nova Sonic hears them, the agents answer and
    // every expectation of the spoken conversation holds.
    let (code, out) = run(&fleet.url, &endpoint, ca.as_deref(), "Joanna").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("PASS  {SCENARIO}")) && out.contains("ok: 1 scenario(s), 1 passed"), "{out}");
    let spoken: Vec<String> = fleet.sim.spoken_phrases().into_values().collect();
    assert_eq!(spoken.len(), 2, "{spoken:?}");
    assert!(spoken.iter().any(|t| t == BALANCE) && spoken.iter().any(|t| t == DETAILS), "{spoken:?}");
}
