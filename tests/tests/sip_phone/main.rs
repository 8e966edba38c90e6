//! A real SIP phone calls the agents: Debian's `baresip` (headless: it dials, plays a WAV and
//! writes what it hears to a WAV) calls `switchboard sip`, the SIP edge, in front of a real
//! `switchboard local` (its gateway, runtimes and the Bedrock simulator, offline). The phone
//! says a phrase tone (500 Hz: the simulator hears "phrase 1"), the voice agent's reply is
//! heard in the phone's recording (measured with sox), the session is in the conversation
//! record with its agent and ends when the phone hangs up; the agent's side ending (local
//! mode stopped) hangs the phone up. Calls to an unknown, an unexposed and a text-only agent
//! are refused with 404, 403 and 488 and the gateway's reason; a call to the number triage
//! claims (`spec.telephony.numbers`) reaches triage, one to a number nobody claims gets
//! 404; garbage sent to the edge's
//! SIP and RTP ports during a call does not disturb it; a call signalled over TCP works as
//! one over UDP; keys pressed on the phone (RFC 4733) reach the agent as the caller's input,
//! told once at the `#`, and the edge logs how many, never which. A call through a trunk
//! (digest credentials) carries the caller's number and the number dialled into the session
//! (a tool bound to them receives them), and a keypad input typed on the phone reaches the
//! tool and nothing else (not the model, not the record, not a log); keys the agent presses
//! (`send_digits`) reach the phone as RFC 4733 telephone events, in order ([`digits`]). The edge's own
//! `/metrics` (`--metrics-listen`) count what the phones did: calls answered and how they
//! ended, refusals by reason, the phones' RTP, the flood guard's drops, outage fallbacks.
//! The tools come from tests/tools/install.sh.
//!
//! One module per concept: [`stack`] starts what a call reaches (local mode and the edge)
//! and reads what it recorded; [`phone`] drives the baresip phones (callers and callees);
//! the tests are grouped by what they prove: [`calls`] (inbound calls, refusals, hang-ups,
//! hostile input), [`trunks`], [`keypad`], [`outbound`], [`transfer`], [`bridge`] (a transfer
//! the edge dials and bridges itself where REFER is not taken), [`warm`] (warm transfers: the
//! caller on hold while the agent briefs the person), [`outage`] (an Agent
//! in outage mode: the call goes to its fallback person, after the outage recording when
//! there is one), [`proxy`] (a carrier's SIP proxy,
//! Debian's kamailio, between the phone and the edge), [`queue`] (the gateway's capacity
//! queue: 182 Queued while a call waits, 503 with Retry-After when refused), [`amd`]
//! (answering-machine detection on outbound calls: a person, a machine left a message
//! after its beep, a machine hung up on), [`callbacks`] (outbound calls' status callbacks
//! to a real HTTP receiver), [`resume`] (a call whose connection to the gateway is cut mid-call: the
//! edge resumes the session and the call goes on; [`relay`] is the TCP relay cut), [`transports`] (outbound calls over TCP and TLS
//! trunks, one whose certificate is not trusted), [`tls`] (SIP over TLS), [`srtp`] (SRTP on
//! calls over TLS, refused where keys would travel in the clear), [`wideband`] (G.722 and Opus
//! phones: a baresip speaking only G.722, one offering it after PCMU, one speaking only
//! Opus, one offering it after G.722 and PCMU, and outbound calls to G.722-only and
//! Opus-only phones) and [`local`] (local mode's
//! own edge, answering
//! and placing calls, and dialling a person to bridge a caller to), [`local_trunks`] (local
//! mode's edge with several outbound trunks) and [`example`] (the Example Bank as it ships:
//! its number, triage speaking first, its advisor) and [`journey`] (the Example Bank's
//! whole call: triage -> idv -> banking, each agent heard in its own voice).

mod agent_hangup;
mod amd;
mod announce;
mod bridge;
mod callbacks;
mod calls;
mod digits;
mod example;
mod journey;
mod keypad;
mod local;
mod local_trunks;
mod loss;
mod outage;
mod outbound;
mod phone;
mod proxy;
mod queue;
mod relay;
mod resume;
mod silence_resume;
mod srtp;
mod stack;
mod tls;
mod transfer;
mod transports;
mod trunks;
mod warm;
mod wideband;
