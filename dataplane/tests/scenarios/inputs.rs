//! Steps whose input is not typed text: keys pressed (one `bidi_dtmf` a key, as the SIP
//! edge forwards them; keys no keypad has refused with their line), a WAV file, and words
//! rendered as the simulator's phrase tones.

use crate::{read_summary, scenario_dir, switchboard_test, text};

const KEYS_PRESSED: &str = "\
name: Keys pressed reach the agent as the caller's input
agent: triage
steps:
  - keys: \"42#\"
    expect:
      agent: triage
      transcript: { contains: 'You said: \"The caller pressed 4 2 #\"' }
      noError: true
";

const BAD_KEYS: &str = "\
name: Keys no keypad has
steps:
  - keys: \"12 3#\"
  - keys: 1234
";

#[test]
fn key_steps_press_keys_as_the_sip_edge_forwards_them_and_bad_keys_are_refused_with_their_line() {
    // The keys reach the agent as the caller's input: the simulator's default answer echoes it.
    let dir = scenario_dir(&[("keys.yaml", KEYS_PRESSED)]);
    let out = switchboard_test(&[dir.to_str().expect("utf-8"), "--agents", "examples/banking"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("ok: 1 scenario(s), 1 passed, 0 failed"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
    // Keys no keypad has, and keys YAML reads as a number, are refused before anything runs.
    let dir = scenario_dir(&[("bad-keys.yaml", BAD_KEYS)]);
    let out = switchboard_test(&[dir.to_str().expect("utf-8"), "--agents", "examples/banking"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(!out.status.success() && !stdout.contains("Running"), "nothing runs: {stdout}\n{stderr}");
    let bad = dir.join("bad-keys.yaml").display().to_string();
    assert!(
        stderr.contains(&format!("{bad}:4: ")) && stderr.contains(r#"quote the keys pressed, keys: "1234""#),
        "a number for keys is refused with its line and what to write: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    let dir = scenario_dir(&[("bad-keys.yaml", "name: n\nsteps:\n  - keys: \"12 3#\"\n")]);
    let out = switchboard_test(&[dir.to_str().expect("utf-8"), "--agents", "examples/banking"]);
    let stderr = text(&out.stderr);
    let bad = dir.join("bad-keys.yaml").display().to_string();
    assert!(
        stderr.contains(&format!(
            "{bad}:3: steps[0].keys: \"12 3#\" holds ' ', which is no key on a phone's keypad: press 0-9, *, # or A-D"
        )),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 16 kHz mono PCM16 WAV file of `pcm`.
fn wav(pcm: &[u8]) -> Vec<u8> {
    let mut out = b"RIFF".to_vec();
    out.extend((36 + pcm.len() as u32).to_le_bytes());
    out.extend(b"WAVEfmt ");
    out.extend(16u32.to_le_bytes());
    out.extend(1u16.to_le_bytes()); // PCM
    out.extend(1u16.to_le_bytes()); // mono
    out.extend(16_000u32.to_le_bytes());
    out.extend(32_000u32.to_le_bytes());
    out.extend(2u16.to_le_bytes());
    out.extend(16u16.to_le_bytes());
    out.extend(b"data");
    out.extend((pcm.len() as u32).to_le_bytes());
    out.extend(pcm);
    out
}

const SPOKEN: &str = "\
name: The balance request as a WAV file, then spoken words that go wrong
agent: triage
steps:
  - audio: WAV_PATH
    expect:
      agent: idv
      handoffs: [{ from: triage, to: idv }]
  - speech: My name is Ada Lovelace, account 12345678, sort code 12-34-56
    expect:
      tools:
        - name: perform_idv_check
          args: { accountNumber: \"87654321\" }
";

#[test]
fn speech_steps_send_a_wav_file_or_words_rendered_for_the_simulator() {
    // The WAV carries phrase 7's tone; the simulator's script (given with --sim-script) says
    // what phrase 7 means. The second step's words get a phrase of their own from the runner.
    // The WAV lies in a folder of its own, named by its absolute path, as an AgentTest's
    // Job has it (`/etc/switchboard/audio/<ConfigMap>/<key>`, beside the scenarios' mount).
    let tone = switchboard_sim::sonic::phrase_tone(7, 1200, 8000);
    let audio = scenario_dir(&[]);
    let caller = audio.join("caller.wav");
    std::fs::write(&caller, wav(&tone)).expect("the WAV is written");
    let dir = scenario_dir(&[("spoken.yaml", &SPOKEN.replace("WAV_PATH", caller.to_str().expect("utf-8")))]);
    let script = dir.join("script.yaml");
    let with_phrase = format!(
        "{}\nsonic:\n  phrases: {{7: \"I'd like to check my balance\"}}\n",
        switchboard_sim::BANKING_SCRIPT_YAML
    );
    std::fs::write(&script, with_phrase).expect("the script is written");
    let summary_file = dir.join("summary.json");
    let args = [
        dir.join("spoken.yaml").to_str().expect("utf-8").to_owned(),
        "--agents".into(),
        "examples/banking".into(),
        "--sim-script".into(),
        script.to_str().expect("utf-8").into(),
        "--summary-file".into(),
        summary_file.to_str().expect("utf-8").into(),
    ];
    let out = switchboard_test(&args.iter().map(String::as_str).collect::<Vec<_>>());
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(1), "the second step must fail:\n{stdout}\n{stderr}");
    // The WAV step passed (the failure is at step 2), and the spoken words reached the model.
    for phrase in [
        "step 2 of 2 (say: \"(speech) My name is Ada Lovelace, account 12345678, sort code 12-34-56\")",
        "tools[0] (first divergence)",
        "got:      tool calls: perform_idv_check {\"accountNumber\":\"12345678\"",
    ] {
        assert!(stdout.contains(phrase), "the report says {phrase:?}:\n{stdout}");
    }
    let summary = read_summary(&summary_file);
    assert!(summary.first_divergence.is_some_and(|d| d.contains("step 2 of 2")), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&audio);
}
