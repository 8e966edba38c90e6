//! What the browser run must have shown, checked from the JSON drive.cjs prints: the
//! Agents panel and the workflow graph against the folder's resolved agents, the typed
//! conversation, History and its replay, consent, voice, push-to-talk and the resumed
//! session.

use serde_json::Value;
use switchboard_crds::RuntimeSpec;

/// The lines the text scenes type, in order.
pub const LINES: [&str; 3] = [
    "I'd like to check my balance",
    "My name is Ada Lovelace, account 12345678, sort code 12-34-56",
    "My balance please",
];

/// What one transcript shows: `(kind, agent, text)` per element.
pub fn items(result: &Value, key: &str) -> Vec<(String, String, String)> {
    let field = |item: &Value, name: &str| item[name].as_str().unwrap_or_default().to_owned();
    result[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is read: {result}"))
        .iter()
        .map(|item| {
            let kind = field(item, "kind");
            let who = match kind.as_str() {
                "handoff" => format!("{}->{}", field(item, "from"), field(item, "to")),
                "tool" => field(item, "name"),
                _ => field(item, "agent"),
            };
            (kind, who, field(item, "text"))
        })
        .collect()
}

pub fn strings(value: &Value) -> Vec<String> {
    value.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_owned)).collect()).unwrap_or_default()
}

fn users(shown: &[(String, String, String)]) -> Vec<&str> {
    shown.iter().filter(|(k, _, _)| k == "user").map(|(_, _, t)| t.as_str()).collect()
}

/// The banking script's conversation, as a transcript shows it: each typed line exactly
/// once, replies under triage, idv and banking, both handoffs, both tool calls done.
/// `lines`: the user's lines as shown (typed, or as the record keeps them).
fn transcript(shown: &[(String, String, String)], lines: &[&str], what: &str) {
    assert_eq!(users(shown), lines, "{what}: each user line exactly once, in order: {shown:#?}");
    for agent in ["triage", "idv", "banking"] {
        assert!(
            shown.iter().any(|(k, a, t)| k == "assistant" && a == agent && !t.is_empty()),
            "{what}: a reply under {agent}'s name: {shown:#?}"
        );
    }
    for route in ["triage->idv", "idv->banking"] {
        assert!(shown.iter().any(|(k, r, _)| k == "handoff" && r == route), "{what}: the divider {route}: {shown:#?}");
    }
    for tool in ["perform_idv_check", "check_balance"] {
        assert!(
            shown.iter().any(|(k, n, t)| k == "tool" && n == tool && t.contains("done")),
            "{what}: the {tool} card, done: {shown:#?}"
        );
    }
    let balance = shown.iter().rposition(|(k, a, _)| k == "assistant" && a == "banking");
    let handoff = shown.iter().position(|(k, r, _)| k == "handoff" && r == "idv->banking");
    assert!(balance > handoff, "{what}: banking answers after the handoff to it: {shown:#?}");
}

/// The agent list and the Agents panel: every agent of the folder with what its resources
/// say (mode, role, description, persona, voice, tools, handoff targets).
pub fn agents(result: &Value, specs: &[RuntimeSpec]) {
    let (offered, by_handoff) = (strings(&result["agents"]), strings(&result["byHandoff"]));
    assert_eq!(offered, ["triage"], "the page offers only the exposed agents to start with: {offered:?}");
    for agent in ["idv", "banking", "disputes"] {
        assert!(by_handoff.iter().any(|a| a == agent), "{agent} is shown, as reached by handoff: {by_handoff:?}");
    }
    assert_eq!(result["selected"], "triage", "the default agent is selected");
    let panel = result["panel"].as_array().expect("the Agents panel is read");
    assert_eq!(panel.len(), specs.len(), "one card per agent of the folder: {panel:#?}");
    for spec in specs {
        let name = &spec.agent.name;
        let card = panel.iter().find(|c| c["name"] == name.as_str()).unwrap_or_else(|| panic!("{name}'s card"));
        assert_eq!(card["mode"], spec.mode.to_string(), "{name}'s mode: {card}");
        let tools: Vec<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(strings(&card["tools"]), tools, "{name}'s tools: {card}");
        let facts = &card["facts"];
        let persona = facts["Persona"].as_str().unwrap_or_default();
        assert!(persona.contains(&spec.persona.spec.display_name), "{name}'s persona: {card}");
        if spec.mode.has_audio() {
            let voice = facts["Voice"].as_str().unwrap_or_default();
            assert!(voice.starts_with(&spec.persona.spec.voice), "{name}'s voice: {card}");
        }
        let handoffs = facts["Handoffs"].as_str().unwrap_or_default();
        for target in &spec.handoffs {
            assert!(handoffs.contains(&target.agent), "{name} hands over to {}: {card}", target.agent);
        }
        if spec.handoffs.is_empty() {
            assert_eq!(handoffs, "none", "{name} hands over to no one: {card}");
        }
        let meta = card["meta"].as_str().unwrap_or_default();
        if let Some(role) = &spec.profile.role {
            assert!(meta.contains(role.as_str()), "{name}'s role: {card}");
        }
        assert_eq!(card["description"].as_str(), spec.profile.description.as_deref(), "{name}'s description");
        let workflow = facts["Workflow"].as_str().unwrap_or_default();
        assert!(workflow.starts_with(&spec.workflow.name), "{name}'s workflow: {card}");
        assert_eq!(meta.contains("by handoff"), name != "triage", "{name} is marked as reached by handoff or not");
    }
    assert!(panel.iter().any(|c| c["name"] == "banking" && c["open"] == true), "a card opens from the keyboard");
}

fn workflow<'a>(specs: &'a [RuntimeSpec], agent: &str) -> &'a switchboard_crds::WorkflowSpec {
    &specs.iter().find(|s| s.agent.name == agent).unwrap_or_else(|| panic!("agent {agent}")).workflow.spec
}

/// The workflow graph: the agent picked before connecting, then the agent serving the
/// session, its current node moving turn by turn, the path taken marked.
pub fn graph(result: &Value, specs: &[RuntimeSpec]) {
    let before = &result["graphBefore"];
    let triage = workflow(specs, "triage");
    let ids = |w: &switchboard_crds::WorkflowSpec| w.nodes.iter().map(|n| n.id.clone()).collect::<Vec<_>>();
    assert_eq!(before["agent"], "triage", "before a session, the picked agent's graph: {before}");
    assert_eq!(strings(&before["nodes"]), ids(triage), "every node of triage's workflow: {before}");
    assert_eq!(strings(&before["current"]), Vec::<String>::new(), "no current node before a session: {before}");
    let graphs = result["graphs"].as_array().expect("the graph after each turn");
    assert_eq!(
        strings(&graphs[0]["current"]),
        std::slice::from_ref(&triage.entry),
        "a new session is at the entry: {}",
        graphs[0]
    );
    let states: Vec<String> = graphs
        .iter()
        .map(|g| format!("{}:{}", g["agent"].as_str().unwrap_or(""), strings(&g["current"]).join(",")))
        .collect();
    let mut distinct = states.clone();
    distinct.dedup();
    assert!(distinct.len() >= 3, "the graph followed the session turn by turn: {states:?}");
    let last = &result["graph"];
    let banking = workflow(specs, "banking");
    assert_eq!(last["agent"], "banking", "the graph of the agent serving the session: {last}");
    assert_eq!(strings(&last["nodes"]), ids(banking), "every node of banking's workflow: {last}");
    assert_eq!(last["edges"].as_array().map(Vec::len), Some(banking.edges.len()), "every edge: {last}");
    let current = strings(&last["current"]);
    assert_eq!(current.len(), 1, "one current node: {last}");
    assert_eq!(result["now"]["node"], current[0].as_str(), "the graph's current node is the session's: {last}");
    assert_eq!(sorted(&last["taken"]), walked(result, "banking"), "banking's path is marked: {last}");
    // idv's graph, as it was when idv handed over: its whole path marked.
    let idv = graphs.iter().rev().find(|g| g["agent"] == "idv").expect("the graph showed idv's workflow");
    let idv_current = strings(&idv["current"]);
    assert_eq!(idv_current.len(), 1, "one current node: {idv}");
    let idv_walked = walked_until(result, "idv", Some(idv_current[0].as_str()));
    assert!(idv_walked.len() >= 2, "idv moved along its workflow: {}", result["now"]["path"]);
    assert_eq!(sorted(&idv["taken"]), idv_walked, "the edges idv took are marked, and only those: {idv}");
    let visited = strings(&idv["visited"]);
    assert!(!visited.is_empty(), "the nodes idv passed through are marked: {idv}");
    let title = last["title"].as_str().unwrap_or_default();
    assert!(title.contains(&format!("current node {}", current[0])), "the graph says where the session is: {title}");
    assert!(
        result["phoneGraphWidth"].as_f64().unwrap_or(1e9) <= 390.0,
        "the graph fits a phone: {}",
        result["phoneGraphWidth"]
    );
}

/// The edges `agent` took, `from>to`, from the path the page's side panel shows
/// (`agent: a → b → c; other: …`).
fn walked(result: &Value, agent: &str) -> Vec<String> {
    walked_until(result, agent, None)
}

/// [`walked`] as it was when `agent` was last at node `until` (`None`: to the end).
fn walked_until(result: &Value, agent: &str, until: Option<&str>) -> Vec<String> {
    let path = result["now"]["path"].as_str().unwrap_or_default();
    let prefix = format!("{agent}: ");
    let segments: Vec<Vec<&str>> =
        path.split("; ").filter_map(|p| p.strip_prefix(prefix.as_str())).map(|p| p.split(" → ").collect()).collect();
    let mut edges = Vec::new();
    for (i, nodes) in segments.iter().enumerate() {
        let mut nodes = nodes.as_slice();
        if let (Some(node), true) = (until, i + 1 == segments.len()) {
            let at = nodes.iter().rposition(|n| *n == node).unwrap_or_else(|| panic!("{agent} reached {node}: {path}"));
            nodes = &nodes[..=at];
        }
        edges.extend(nodes.windows(2).map(|w| format!("{}>{}", w[0], w[1])));
    }
    edges.sort();
    edges.dedup();
    edges
}

/// `value`'s strings, sorted.
fn sorted(value: &Value) -> Vec<String> {
    let mut all = strings(value);
    all.sort();
    all
}

/// The typed conversation.
pub fn conversation(result: &Value) {
    let shown = items(result, "text");
    transcript(&shown, &LINES, "the live conversation");
    let figures: Vec<&str> = shown.iter().filter(|(k, _, _)| k == "figures").map(|(_, _, t)| t.as_str()).collect();
    assert!(figures.len() >= 3, "figures for each turn: {figures:?}");
    for line in &figures {
        assert!(line.contains("first token") && line.contains(" ms") && line.contains("out tokens"), "{line}");
        assert!(!line.contains("first token –"), "the first token was timed: {line}");
        assert!(!line.contains("first audio"), "a typed turn has no first-audio time: {line}");
    }
    let memory = result["memory"].to_string();
    assert!(memory.contains("verifiedUser") && memory.contains("Ada Lovelace"), "the memory view: {memory}");
    // Redacted as the record is: idv's own rule (spec.record.redact `account`) holds from
    // the moment the session reached idv.
    assert!(memory.contains("[redacted:account]"), "the account number redacted in the memory view: {memory}");
    // And by the gateway's own rule (`--record-redact`, the recorder's in main.rs).
    assert!(memory.contains("[redacted:account-status]"), "the gateway's rule in the memory view: {memory}");
    assert!(!memory.contains("12345678"), "no account number in the clear: {memory}");
    cost(result, &figures);
    assert_eq!(result["now"]["agent"], "banking", "the agent now serving: {}", result["now"]);
    let path = result["now"]["path"].as_str().unwrap_or_default();
    assert!(path.contains("idv: collect → verify → choose"), "the workflow path idv took: {path}");
    assert!(!result["now"]["tokens"].as_str().unwrap_or_default().starts_with("0 in"), "tokens: {}", result["now"]);
    assert!(result["turns"].as_array().is_some_and(|t| t.len() >= 3), "the turns table: {}", result["turns"]);
    assert_eq!(result["cardOpened"], true, "a tool card opens from the keyboard");
    assert!(result["phoneOverflow"].as_i64().unwrap_or(1) <= 0, "fits a phone's width: {}", result["phoneOverflow"]);
}

/// Each live turn's cost, at the price the gateway gave for the session's model (the
/// record's table), as its tokens say: in the figures line and the turns table.
fn cost(result: &Value, figures: &[&str]) {
    let model = result["price"]["model"].as_str().unwrap_or_default();
    let want = switchboard_record::Prices::default().of(model).unwrap_or_else(|| panic!("{model} is priced"));
    let price = &result["price"]["price"];
    assert_eq!(price["input"].as_f64(), Some(want.input), "the price of {model}: {price}");
    assert_eq!(price["output"].as_f64(), Some(want.output), "the price of {model}: {price}");
    for line in figures {
        assert!(line.contains(" · $"), "the turn's cost in its figures: {line}");
    }
    let rows = result["turns"].as_array().cloned().unwrap_or_default();
    for row in &rows {
        let cells = strings(row);
        let (tokens, cost) = (&cells[4], &cells[5]);
        let (input, output) = tokens.split_once(" / ").expect("in / out");
        let (input, output): (f64, f64) = (input.parse().expect("in"), output.parse().expect("out"));
        let shown: f64 = cost.strip_prefix('$').and_then(|c| c.parse().ok()).unwrap_or_else(|| panic!("a cost: {row}"));
        let expected = (input * want.input + output * want.output) / 1e6;
        assert!(
            input > 0.0 && (shown - expected).abs() < 1e-5,
            "turn cost {shown} for {input} in / {output} out: {expected}"
        );
    }
}

/// The first session, from History.
pub fn history(result: &Value) {
    let item = result["historyItem"].as_str().unwrap_or_default();
    assert!(item.contains("triage → idv → banking"), "History lists the agents of the session: {item}");
    // The record keeps the caller's details redacted by the banking Agents' rules.
    let recorded =
        [LINES[0], "My name is Ada Lovelace, account [redacted:account], sort code [redacted:sort-code]", LINES[2]];
    transcript(&items(result, "past"), &recorded, "the past session from History");
    let summary = result["pastSummary"].as_str().unwrap_or_default();
    assert!(summary.contains("turns"), "the past session's summary: {summary}");
    assert_eq!(result["pastClosed"], true, "Escape closes the past session");
}

/// The replay: stopped part way at 1x (and nothing drawn after Stop), then whole at 5x,
/// paced by the record's timestamps, ending with what opening the session drew.
pub fn replay(result: &Value) {
    let replay = &result["replay"];
    let whole = items(result, "past");
    let stopped = replay["stoppedItems"].as_u64().unwrap_or(0) as usize;
    assert!(
        stopped > 0 && stopped < whole.len(),
        "a second at 1x shows part of the session: {stopped} of {}",
        whole.len()
    );
    assert_eq!(replay["laterItems"], replay["stoppedItems"], "nothing is drawn after Stop: {replay}");
    assert_eq!(items(replay, "items"), whole, "the replay ends with the session as opened");
    assert_eq!(replay["state"], "replayed", "the replay says it finished: {replay}");
    let shown = replay["shown"].as_array().expect("the events drawn");
    for event in shown {
        let (at, pos) = (event["at"].as_f64().unwrap_or(-1.0), event["pos"].as_f64().unwrap_or(-1.0));
        assert!(pos >= at, "no event is drawn before its time: {event}");
    }
    let span = shown.last().and_then(|e| e["at"].as_f64()).unwrap_or(0.0);
    assert!(span > 500.0, "the session lasted long enough for pacing to show: {span} ms");
    let wall = replay["wallMs"].as_f64().unwrap_or(0.0);
    assert!(wall >= span / 5.0 * 0.9, "5x replays {span} ms in no less than a fifth of it: {wall} ms");
    assert!(wall <= span / 5.0 + 10_000.0, "5x replays {span} ms in about a fifth of it: {wall} ms");
}

/// A dispute answered by clicking Allow.
pub fn consent(dispute: &Value) {
    let consent = dispute["consent"].as_str().unwrap_or_default();
    assert!(consent.contains("open_dispute") && consent.contains("Allowed"), "the consent, allowed: {dispute}");
    let card = dispute["disputeCard"].as_str().unwrap_or_default();
    assert!(card.contains("done"), "the dispute was opened after the click: {card}");
    let shown = items(dispute, "log");
    assert_eq!(users(&shown).len(), 4, "each user line once: {shown:#?}");
    assert!(
        shown.iter().any(|(k, a, t)| k == "assistant" && a == "disputes" && t.contains("dispute is open")),
        "disputes confirms the dispute: {shown:#?}"
    );
}

/// `"523 ms"` or `"1.20 s"` as milliseconds; `None` for `"–"`.
fn millis(text: &str) -> Option<f64> {
    if let Some(ms) = text.strip_suffix(" ms") {
        return ms.parse().ok();
    }
    text.strip_suffix(" s").and_then(|s| s.parse::<f64>().ok()).map(|s| s * 1000.0)
}

/// The voice turns' first-audio times in the turns table (column 3) are there and honest:
/// at least one, each no shorter than the simulator's 400 ms end-of-turn silence (it is
/// counted from the caller's last spoken frame, not from when the server said so), and
/// none absurd.
fn first_audio_timed(voice: &Value) -> bool {
    let rows = voice["turns"].as_array().cloned().unwrap_or_default();
    let timed: Vec<f64> = rows.iter().filter_map(|r| r[2].as_str().and_then(millis)).collect();
    assert!(timed.iter().all(|ms| (300.0..15_000.0).contains(ms)), "first audio after 400 ms of silence: {timed:?}");
    !timed.is_empty()
}

/// Voice with the microphone open.
pub fn voice(voice: &Value) {
    let barge = &voice["bargeIn"];
    let played = barge["played"].as_f64().unwrap_or(-1.0);
    assert!((200.0..1000.0).contains(&played), "what was played of 1 s cut after 500 ms: {barge}");
    assert_eq!(barge["newErrors"], 0, "the runtime took bidi_audio_played: {barge}");
    assert_eq!(barge["open"], true, "the session goes on: {barge}");
    assert_eq!(voice["voiceDefaults"], serde_json::json!([true, true, true]), "echo cancellation etc. on by default");
    let shown = items(voice, "log");
    let heard = |text: &str| shown.iter().any(|(k, _, t)| k == "user" && t.contains(text));
    assert!(heard("I'd like to check my balance"), "triage heard the request: {shown:#?}");
    assert!(shown.iter().any(|(k, r, _)| k == "handoff" && r == "triage->idv"), "triage handed over: {shown:#?}");
    assert!(heard("My name is Ada Lovelace"), "the heard utterance is shown: {shown:#?}");
    assert!(shown.iter().any(|(k, n, _)| k == "tool" && n == "perform_idv_check"), "the check ran: {shown:#?}");
    assert!(
        shown.iter().any(|(k, a, t)| k == "assistant" && a == "idv" && t.to_lowercase().contains("verified")),
        "the spoken reply's transcript is shown under idv: {shown:#?}"
    );
    assert!(
        shown.iter().any(|(k, _, t)| k == "figures" && t.contains("first audio") && !t.contains("first audio –")),
        "a voice turn's figures give its first-audio time: {shown:#?}"
    );
    assert!(first_audio_timed(voice), "the turns table gives the first-audio time: {}", voice["turns"]);
    let counters = &voice["counters"];
    assert!(counters["framesSent"].as_u64().unwrap_or(0) > 50, "the microphone streamed: {counters}");
    let (received, scheduled) = (counters["audioSamples"].as_u64(), counters["scheduledSamples"].as_u64());
    assert!(received.unwrap_or(0) > 24_000 / 2, "at least half a second of reply audio arrived: {counters}");
    assert_eq!(received, scheduled, "every received sample was scheduled for playback: {counters}");
    assert_eq!(counters["playbackState"], "running", "the playback context runs: {counters}");
    assert_eq!(
        voice["transport"],
        serde_json::json!({"text": "WebSocket (WebRTC unticked)", "kind": "websocket"}),
        "the page says its voice runs on the WebSocket"
    );
}

/// The conversation a voice scene heard: triage heard the request and handed over, idv
/// heard the details, ran the check and answered.
fn heard_and_verified(shown: &[(String, String, String)]) {
    let heard = |text: &str| shown.iter().any(|(k, _, t)| k == "user" && t.contains(text));
    assert!(heard("I'd like to check my balance"), "triage heard the request: {shown:#?}");
    assert!(shown.iter().any(|(k, r, _)| k == "handoff" && r == "triage->idv"), "triage handed over: {shown:#?}");
    assert!(heard("My name is Ada Lovelace"), "idv heard the details: {shown:#?}");
    assert!(
        shown.iter().any(|(k, n, t)| k == "tool" && n == "perform_idv_check" && t.contains("done")),
        "the check ran: {shown:#?}"
    );
    assert!(
        shown.iter().any(|(k, a, t)| k == "assistant" && a == "idv" && t.to_lowercase().contains("verified")),
        "idv's spoken answer is shown under its name: {shown:#?}"
    );
}

/// Voice by default, over WebRTC.
pub fn webrtc_voice(call: &Value) {
    assert_eq!(call["ticked"], true, "WebRTC is ticked by default: {call}");
    assert_eq!(call["transport"], serde_json::json!({"text": "WebRTC", "kind": "webrtc"}), "the page says WebRTC");
    heard_and_verified(&items(call, "log"));
    let stats = &call["stats"];
    assert_eq!(stats["transport"], "udp", "the call's media went over UDP: {stats}");
    // 20 ms packets: the microphone for the whole scene, the agent's speech both turns.
    assert!(stats["packetsSent"].as_u64().unwrap_or(0) > 250, "the microphone went on the call's track: {stats}");
    assert!(stats["packetsReceived"].as_u64().unwrap_or(0) > 50, "the agent's voice came on the call's track: {stats}");
    assert!(stats["audioEnergy"].as_f64().unwrap_or(0.0) > 0.0, "and it was not silence: {stats}");
    let audible = call["callAudibleMs"].as_u64().unwrap_or(0);
    assert!(audible >= 500, "at least half a second of the agent's voice was heard in the page: {call}");
    let playing = &call["remotePlaying"];
    assert_eq!(
        playing,
        &serde_json::json!({"attached": true, "paused": false, "tracks": 1}),
        "the <audio> element plays the call"
    );
    let counters = &call["counters"];
    assert_eq!(counters["audioChunks"], 0, "no reply audio came as session messages: {counters}");
    assert_eq!(counters["framesSent"], 0, "no microphone frames went as session messages: {counters}");
    let events = strings(&counters["events"]);
    for needed in
        ["bidi_connection_start", "bidi_transcript_stream", "handoff", "tool_complete", "bidi_response_complete"]
    {
        assert!(events.iter().any(|e| e == needed), "{needed} came on the data channel: {events:?}");
    }
    assert!(!events.iter().any(|e| e == "bidi_error"), "no errors: {events:?}");
    let settings = &counters["micSettings"];
    assert_eq!(settings["echoCancellation"], true, "the browser's echo cancellation is on: {settings}");
    assert!(first_audio_timed(call), "the first-audio time of a turn over WebRTC: {}", call["turns"]);
    assert_eq!(call["callEnded"], true, "a new conversation ends the call");
}

/// WebRTC that cannot connect: the WebSocket, and the page says so.
pub fn fallback(fallback: &Value) {
    assert_eq!(fallback["offerStatus"], 201, "the edge answered the offer: {fallback}");
    assert!(fallback["stripped"].as_u64().unwrap_or(0) > 0, "the answer's candidates were taken out: {fallback}");
    let transport = &fallback["transport"];
    assert_eq!(transport["kind"], "websocket", "voice fell back to the WebSocket: {transport}");
    let text = transport["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with("WebSocket (fallback: WebRTC did not connect"),
        "the page says it fell back, and why: {text}"
    );
    let waited = fallback["fellBackMs"].as_u64().unwrap_or(0);
    assert!(
        (7_500..20_000).contains(&waited),
        "it fell back after the bound (8 s), not before nor much after: {waited} ms"
    );
    assert_eq!(
        fallback["deletes"],
        serde_json::json!([200]),
        "the call that did not connect was ended once: {fallback}"
    );
    assert_eq!(fallback["call"], Value::Null, "no call is in use: {fallback}");
    let counters = &fallback["counters"];
    assert!(counters["framesSent"].as_u64().unwrap_or(0) > 50, "the microphone streamed on the WebSocket: {counters}");
    assert!(counters["audioChunks"].as_u64().unwrap_or(0) > 0, "the agent's voice came on the WebSocket: {counters}");
    let shown = items(fallback, "log");
    assert!(
        shown.iter().any(|(k, _, t)| k == "user" && t.contains("check my balance")),
        "the request was heard over the WebSocket: {shown:#?}"
    );
}

/// Push-to-talk on Space.
pub fn push_to_talk(ptt: &Value) {
    assert_eq!(ptt["pressed"], "true", "the talk button shows it is held: {ptt}");
    assert_eq!(ptt["released"], "false", "and released: {ptt}");
    let (at_release, after) = (&ptt["atRelease"], &ptt["counters"]);
    assert!(at_release["framesSent"].as_u64().unwrap_or(0) > 25, "audio went while Space was held: {at_release}");
    assert_eq!(after["framesSent"], at_release["framesSent"], "no audio goes once released: {after}");
    assert_eq!(after["inputEnds"], 1, "releasing sent bidi_audio_input_end once: {after}");
    let events = strings(&after["events"]);
    assert!(!events.iter().any(|e| e == "bidi_error"), "the session took bidi_audio_input_end: {events:?}");
    let shown = items(ptt, "log");
    assert!(shown.iter().any(|(k, _, t)| k == "user" && t.contains("check my balance")), "heard: {shown:#?}");
    assert!(shown.iter().any(|(k, r, _)| k == "handoff" && r == "triage->idv"), "triage handed over: {shown:#?}");
    assert!(shown.iter().any(|(k, a, _)| k == "assistant" && a == "idv"), "idv answered: {shown:#?}");
    assert!(after["scheduledSamples"].as_u64().unwrap_or(0) > 0, "the reply was heard: {after}");
    assert!(first_audio_timed(ptt), "the first-audio time after release: {}", ptt["turns"]);
}

/// The session cut by the relay and resumed from the banner.
pub fn reconnect(resumed: &Value) {
    assert!(resumed["cut"].as_u64().unwrap_or(0) >= 1, "the relay cut the live connection: {resumed}");
    let banner = resumed["banner"].as_str().unwrap_or_default();
    assert!(banner.contains("closed"), "the banner says the connection closed: {banner}");
    assert_eq!(resumed["focused"], "reconnect", "the banner puts the focus on Reconnect");
    assert!(resumed["before"].is_string(), "a session id: {resumed}");
    assert_eq!(resumed["after"], resumed["before"], "Reconnect resumed the same session");
    assert!(strings(&resumed["memoryAfter"]).contains(&"verifiedUser".to_owned()), "memory kept: {resumed}");
    let shown = items(resumed, "log");
    assert_eq!(users(&shown), LINES, "each line once, across the cut: {shown:#?}");
    let cut_at = shown.iter().position(|(_, _, t)| t == LINES[1]);
    assert!(
        shown.iter().enumerate().any(|(i, (k, a, t))| Some(i) > cut_at
            && k == "assistant"
            && a == "banking"
            && t.to_lowercase().contains("balance")),
        "banking answers the verified caller's balance after the resume: {shown:#?}"
    );
}
