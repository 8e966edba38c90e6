//! Amazon Polly's SynthesizeSpeech with the real `aws-sdk-polly` client, over TLS: the
//! answer is accepted as Polly's (audio, content type, characters), and the simulator's
//! refusals arrive as the SDK's modelled errors.

use aws_sdk_polly::error::ProvideErrorMetadata;
use aws_sdk_polly::operation::synthesize_speech::SynthesizeSpeechError;
use aws_sdk_polly::types::{Engine, OutputFormat, VoiceId};
use switchboard_models::bedrock;
use switchboard_sim::banking_script;
use switchboard_sim::polly::PHRASE_MS;

use crate::common::{config, start};

async fn client(sim: &switchboard_sim::SimHandle) -> aws_sdk_polly::Client {
    let aws = config(sim);
    let shared = bedrock::sdk_config(&aws).await;
    let mut builder = aws_sdk_polly::config::Builder::from(&shared).endpoint_url(sim.endpoint_url());
    if let Some(http) = bedrock::custom_http_client(&aws).await.expect("the simulator's CA") {
        builder = builder.http_client(http);
    }
    aws_sdk_polly::Client::from_conf(builder.build())
}

#[tokio::test]
async fn the_sdk_takes_the_rendered_phrase_and_the_modelled_errors() {
    let sim = start(banking_script().expect("script")).await;
    let polly = client(&sim).await;
    let speak = |text: &str, rate: &str| {
        polly
            .synthesize_speech()
            .text(text)
            .voice_id(VoiceId::Joanna)
            .engine(Engine::Neural)
            .output_format(OutputFormat::Pcm)
            .sample_rate(rate)
    };
    let out = speak("My balance please", "16000").send().await.expect("rendered");
    assert_eq!((out.content_type(), out.request_characters()), (Some("audio/pcm"), 17));
    let audio = out.audio_stream.collect().await.expect("the audio").into_bytes();
    assert_eq!(audio.len() as u64, PHRASE_MS * 32, "{PHRASE_MS} ms of 16 kHz PCM16");
    assert_eq!(sim.spoken_phrases(), [(1, "My balance please".to_owned())].into());

    let error = speak("Hello", "22050").send().await.expect_err("no such PCM rate").into_service_error();
    assert!(matches!(error, SynthesizeSpeechError::InvalidSampleRateException(_)), "{error:?}");
    let error = speak("Hello", "16000").voice_id(VoiceId::from("Bogus")).send().await.expect_err("no such voice");
    let error = error.into_service_error();
    assert_eq!(error.code(), Some("ValidationException"), "{error:?}");
    assert!(error.message().is_some_and(|m| m.contains("Value 'Bogus' at 'voiceId'")), "{error:?}");
    let error = speak(&"a".repeat(3_001), "16000").send().await.expect_err("too long").into_service_error();
    assert!(matches!(error, SynthesizeSpeechError::TextLengthExceededException(_)), "{error:?}");
    assert_eq!(sim.spoken_phrases().len(), 1, "refused texts get no phrase");
    sim.shutdown().await;
}
