//! The Example Bank's whole phone journey, heard: a `baresip` calls local mode's own SIP
//! edge (the example as it ships, triage speaking first) and says three phrases, each well
//! after the answer to the one before — the balance request (triage hands the caller to
//! idv), the caller's details (idv verifies them with its tool) and "my balance please" (idv
//! hands over to banking, which tells the balance). The phone hears each agent in its own
//! voice, in that order: the simulator speaks each Nova Sonic voice id at its own pitch
//! (`switchboard_sim::sonic::voice_frequency`), so the phone's recording, window by window,
//! is triage's Ava (`tiffany`), then idv's Max (`matthew`), then banking's Amy (`amy`). The
//! record has the call as one session through triage -> idv -> banking.

use std::time::Duration;

use switchboard_sim::sonic::voice_frequency;
use switchboard_tests::cluster::tools_bin;
use switchboard_tests::repo_root;
use switchboard_tests::switchboard::switchboard_binary;

use crate::local::{sip_address, start_local_with, the_session};
use crate::phone::{Options, Phone};
use crate::stack::wait_for;

/// The Example Bank's simulator script (dataplane/sim/banking.yaml) with the phone's three
/// phrase tones (500, 600 and 700 Hz: phrases 1, 2 and 3) heard as the caller's words.
fn journey_script(dir: &std::path::Path) -> std::path::PathBuf {
    let bank = std::fs::read_to_string(repo_root().join("dataplane/sim/banking.yaml")).expect("the banking script");
    assert!(!bank.contains("\nsonic:"), "the banking script has a sonic section: merge the phrases into it");
    let script = format!(
        "{bank}\nsonic:\n  phrases:\n\
         \x20   1: \"I'd like to check my balance\"\n\
         \x20   2: \"My name is Ada Lovelace, account 12345678, sort code 12-34-56\"\n\
         \x20   3: \"My balance please\"\n"
    );
    std::fs::create_dir_all(dir).expect("a folder");
    let path = dir.join("journey-script.yaml");
    std::fs::write(&path, script).expect("the script");
    path
}

/// Who spoke in each 250 ms of the phone's recording: the index into `voices` of the pitch
/// heard there, when one was clearly heard (a tone of at least 0.04 of full scale, at least
/// three times as strong as any other voice's pitch).
fn speakers(strengths: &[Vec<f64>]) -> Vec<Option<usize>> {
    let windows = strengths.iter().map(Vec::len).min().unwrap_or(0);
    (0..windows)
        .map(|w| {
            let (best, strongest) = strengths
                .iter()
                .enumerate()
                .map(|(v, s)| (v, s[w]))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .expect("voices");
            let mut others = strengths.iter().enumerate().filter(|(v, _)| *v != best).map(|(_, s)| s[w]);
            let clear = strongest >= 0.04 && others.all(|o| strongest >= 3.0 * o);
            clear.then_some(best)
        })
        .collect()
}

/// The voices in the order they spoke: runs of at least `min_run` windows of one voice,
/// consecutive runs of the same voice merged; with each voice's count of windows.
fn turns(speakers: &[Option<usize>], min_run: usize) -> Vec<(usize, usize)> {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut current: Option<(usize, usize)> = None;
    for speaker in speakers.iter().copied().chain([None]) {
        match (current, speaker) {
            (Some((v, n)), Some(s)) if v == s => current = Some((v, n + 1)),
            (last, next) => {
                if let Some((v, n)) = last.filter(|(_, n)| *n >= min_run) {
                    match runs.last_mut() {
                        Some((lv, ln)) if *lv == v => *ln += n,
                        _ => runs.push((v, n)),
                    }
                }
                current = next.map(|s| (s, 1));
            }
        }
    }
    runs
}

#[test]
fn a_phone_goes_triage_idv_banking_and_hears_each_agent_in_its_own_voice() {
    let tools = tools_bin().expect("tests/tools/install.sh");
    let binary = switchboard_binary().expect("the switchboard binary");
    let name = "switchboard-sip-journey";
    let dir = std::env::temp_dir().join(format!("{name}-script-{}", std::process::id()));
    let script = journey_script(&dir);
    let script_arg = script.to_string_lossy().into_owned();
    let (stack_dir, record, local) =
        start_local_with(&binary, name, "local-sip-journey", &["--sim-script", &script_arg], |triage| triage);
    let sip = sip_address(&local);
    let dial = format!("/dial sip:triage@{sip};transport=udp");
    // 10 s for triage's greeting (about 4.5 s: the simulator speaks 60 ms a character), then
    // phrase 1 (1.5 s); 30 s for triage's handoff line and idv's question; phrase 2 (2 s)
    // and 24 s for idv's check and its answer; phrase 3 (2 s) and 24 s for idv's handoff
    // line and banking's balance. Measured on two shared cores at load 10: each answer was
    // over 14.5, 12 and 8.6 s after its phrase ended, so every phrase is spoken after the
    // answer before it, by 10 s or more. In each gap the agent then asks "Are you still
    // there?" (the Personas' default re-prompt after 10 s of quiet), in its own voice too.
    // The phone hangs up at the end of the WAV (about 94 s).
    let options = Options {
        lead: Some(10),
        tone: Some((1.5, 500)),
        then: Some((600, 2)),
        after: Some(24),
        more: &[(700, 2, 24)],
        ..Options::default()
    };
    let (phone, _) =
        Phone::start_with(&stack_dir, &tools, "caller", "caller", 30, 150, "udp", "", "", Some(&dial), options);
    phone.wait_over(Duration::from_secs(150));
    let log = phone.log();
    let context = || format!("{log}\n--- local ---\n{}", local.log_text());
    assert!(log.contains("Call established"), "{}", context());

    // Who the phone heard, window by window: Ava (tiffany), Max (matthew), Amy (amy).
    let names = ["tiffany (triage)", "matthew (idv)", "amy (banking)"];
    let pitches: Vec<f64> = ["tiffany", "matthew", "amy"].into_iter().map(|v| voice_frequency(Some(v))).collect();
    for (a, b) in [(0, 1), (0, 2), (1, 2)] {
        assert!((pitches[a] - pitches[b]).abs() > 40.0, "{} and {} sound different: {pitches:?}", names[a], names[b]);
    }
    let sox = tools.join("sox");
    let strengths: Vec<Vec<f64>> = pitches.iter().map(|&hz| phone.heard_tone(&sox, hz)).collect();
    let heard = speakers(&strengths);
    let spoken = turns(&heard, 2);
    let order: Vec<&str> = spoken.iter().map(|&(v, _)| names[v]).collect();
    let timeline: String = heard.iter().map(|s| s.map_or('.', |v| ['T', 'M', 'A'][v])).collect::<String>();
    eprintln!("the phone heard, 250 ms a character (T tiffany, M matthew, A amy, . neither):\n{timeline}");
    assert_eq!(
        order,
        names,
        "the phone heard triage, then idv, then banking, each in its own voice (250 ms a character: T tiffany, M \
         matthew, A amy, . neither):\n{timeline}\n{}",
        context()
    );
    // Each said something of length: triage its greeting and handoff line (about 10 s), idv
    // its question, check and handoff line (about 20 s), banking the balance (about 4 s):
    // at least 2 s each.
    for (v, windows) in spoken {
        assert!(windows >= 8, "{} spoke for {windows} windows of 250 ms:\n{timeline}", names[v]);
    }

    // The record: one session, through triage -> idv -> banking, the balance given.
    let show = || the_session(&binary, &record);
    wait_for(
        "the call is in the record, through banking",
        Duration::from_secs(20),
        || show().contains("default/triage -> default/idv -> default/banking"),
        || format!("{}\n--- local ---\n{}", show(), local.log_text()),
    );
    let session = show();
    eprintln!("{session}");
    for needle in ["perform_idv_check", "check_balance", "1234.56"] {
        assert!(session.contains(needle), "{needle} in the record:\n{session}");
    }
    let local_log = local.log_text();
    assert!(!local_log.contains("unsupported_modality"), "banking took the caller's audio:\n{local_log}");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(&stack_dir);
}

/// The analysis itself: a lone window of another voice is a blip, not a turn; a voice
/// heard again after a blip or a pause is the same turn; a window two voices share is
/// nobody's.
#[test]
fn the_phone_s_speakers_are_read_in_turns() {
    let heard = [None, Some(0), Some(0), Some(1), Some(0), Some(0), None, Some(1), Some(1), Some(2), Some(2)];
    assert_eq!(turns(&heard, 2), [(0, 4), (1, 2), (2, 2)]);
    let strengths = [vec![0.1, 0.01, 0.1], vec![0.01, 0.1, 0.05]];
    assert_eq!(speakers(&strengths), [Some(0), Some(1), None]);
}
