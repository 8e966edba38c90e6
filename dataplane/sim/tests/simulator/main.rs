//! Integration tests of the Bedrock simulator with the real `aws-sdk-bedrockruntime`
//! client, over TLS and HTTP/2 (and plain HTTP where said), through the `TextModel`
//! implementation and through the raw SDK; and Amazon Polly's SynthesizeSpeech with the real
//! `aws-sdk-polly` client.

mod banking;
mod common;
mod errors;
mod polly;
mod raw_sdk;
mod streaming;
mod user_agent;
