//! A phone call's numbers through the gateway: the `x-switchboard-phone` header of a session
//! request puts the caller's number and the number dialled in the session's memory — and so
//! in the signed grant each runtime gets, where the Persona's `{memory}` shows it to the
//! model — only when the request's credential is a SIP edge's (`calls=edge`). The same
//! header from an app's key is ignored: the model never sees a number it sent. Real runtime
//! processes; the simulator answers with what the system prompt says of the call.

use switchboard_core::protocol::{ClientMessage, ServerMessage, SessionStart};
use switchboard_gateway::auth::Auth;

use crate::client::{Client, replies};
use crate::fleet::Fleet;

fn digest(key: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(key.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_sip_edges_key_puts_a_callers_number_in_the_session() {
    let script = switchboard_sim::Script::parse(
        "timing: { timeToFirstTokenMs: 0, tokensPerSecond: 0 }\n\
         rules:\n\
         \x20 - name: number\n\
         \x20   when: { system: \"phoneCall: (?P<call>[^\\n]*)\", userText: \"which number\" }\n\
         \x20   reply: { text: \"The call: {call}\" }\n\
         default: { text: \"No call.\" }\n",
    )
    .expect("script");
    let keys = format!("edge {} calls=edge\napp {}\n", digest("edge-key"), digest("app-key"));
    let auth = Auth::new(Some(&keys), vec![]).expect("keys");
    let fleet = Fleet::with_script(&[], auth, Default::default(), Default::default(), script).await;
    let header = r#"{"caller":"+442079460018","dialled":"+442079460000"}"#;
    for (key, vouched) in [("edge-key", true), ("app-key", false)] {
        let bearer = format!("Bearer {key}");
        let headers = [("authorization", bearer.as_str()), ("x-switchboard-phone", header)];
        let mut client = Client::connect_with(&fleet.url, &headers).await;
        client.send(&ClientMessage::SessionStart(SessionStart::default())).await;
        client.until(|m| matches!(m, ServerMessage::BidiTranscriptStream { is_final: true, .. })).await;
        client.say("which number did I call from?").await;
        let said = replies(&client.turn().await).join(" ");
        if vouched {
            assert!(
                said.contains(r#"The call: {"caller":"+442079460018","dialled":"+442079460000"}"#),
                "the edge's call reached the runtime's prompt: {said}"
            );
        } else {
            assert!(said.contains("No call.") && !said.contains("+44"), "{key}'s header was ignored: {said}");
        }
        client.close().await;
    }
}
