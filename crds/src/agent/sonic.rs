//! The Nova Sonic speech-to-speech models an Agent may name in `spec.model.voiceModelId`,
//! and the voices each one speaks with.
//!
//! Sources: the Amazon Nova user guides (v1 "Voices available for Amazon Nova Sonic";
//! Nova 2 "Language support and multilingual capabilities"), cross-checked with the voice
//! lists shipped by LiveKit's AWS plugin 1.8.9 (`experimental/realtime/types.py`:
//! `SONIC1_VOICES`, `SONIC2_VOICES`, the latter also for `with_nova_sonic_2_5`) and the
//! model ids Pipecat 1.14 (default `amazon.nova-2-5-sonic`), Strands 1.62 and LiveKit use.
//! Nova 2.5 Sonic's id has no version suffix.
//!
//! A model id this table does not know (a custom model, a provisioned ARN, a test
//! endpoint's model) is not judged; a known one must be available and the Persona's voice
//! must be one of its voices.

/// One Nova Sonic model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SonicModel {
    /// The Bedrock model id.
    pub id: &'static str,
    /// What people call it.
    pub name: &'static str,
    /// The voice ids it speaks with.
    pub voices: &'static [&'static str],
    /// When the model stopped being served, for retired models (ISO 8601 date).
    pub end_of_life: Option<&'static str>,
}

/// Nova Sonic (v1): English (US, GB), French, Italian, German, Spanish.
const SONIC1_VOICES: &[&str] =
    &["matthew", "tiffany", "amy", "ambre", "florian", "beatrice", "lorenzo", "greta", "lennart", "lupe", "carlos"];

/// Nova 2 Sonic and Nova 2.5 Sonic: adds Portuguese (BR) and Hindi, `olivia` (English,
/// US) and `tina` (German) in place of `greta`; `matthew` and `tiffany` are polyglot.
const SONIC2_VOICES: &[&str] = &[
    "matthew", "tiffany", "amy", "olivia", "lupe", "carlos", "ambre", "florian", "tina", "lennart", "beatrice",
    "lorenzo", "carolina", "leo", "arjun", "kiara",
];

/// Every Nova Sonic model, newest first.
pub const SONIC_MODELS: &[SonicModel] = &[
    SonicModel { id: "amazon.nova-2-5-sonic", name: "Nova 2.5 Sonic", voices: SONIC2_VOICES, end_of_life: None },
    SonicModel { id: "amazon.nova-2-sonic-v1:0", name: "Nova 2 Sonic", voices: SONIC2_VOICES, end_of_life: None },
    SonicModel {
        id: "amazon.nova-sonic-v1:0",
        name: "Nova Sonic (v1)",
        voices: SONIC1_VOICES,
        end_of_life: Some("2026-09-14"),
    },
];

/// Cross-region inference profile prefixes Bedrock puts before a model id.
const PROFILE_PREFIXES: [&str; 5] = ["us.", "eu.", "apac.", "us-gov.", "global."];

/// The model `model_id` names (a cross-region inference profile id such as
/// `us.amazon.nova-2-sonic-v1:0` names its model), if this table knows it.
pub fn sonic_model(model_id: &str) -> Option<&'static SonicModel> {
    let id = PROFILE_PREFIXES.iter().find_map(|p| model_id.strip_prefix(p)).unwrap_or(model_id);
    SONIC_MODELS.iter().find(|m| m.id == id)
}

/// Why `voice` cannot be used with `model_id`, if it cannot: a retired model, or a voice
/// the model does not have. Unknown model ids pass (see the module docs).
pub fn check_sonic_voice(model_id: &str, voice: &str) -> Result<(), String> {
    let Some(model) = sonic_model(model_id) else {
        return Ok(());
    };
    let current =
        || SONIC_MODELS.iter().filter(|m| m.end_of_life.is_none()).map(|m| m.id).collect::<Vec<_>>().join(" or ");
    if let Some(date) = model.end_of_life {
        return Err(format!("{} ({model_id}) reached end of life on {date}; use {}", model.name, current()));
    }
    if !model.voices.contains(&voice) {
        return Err(format!(
            "{} ({model_id}) has no voice {voice:?}; its voices are {}",
            model.name,
            model.voices.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_model_knows_its_voices_and_profiles_name_their_model() {
        assert_eq!(check_sonic_voice("amazon.nova-2-sonic-v1:0", "olivia"), Ok(()));
        assert_eq!(check_sonic_voice("amazon.nova-2-5-sonic", "kiara"), Ok(()));
        assert_eq!(check_sonic_voice("us.amazon.nova-2-sonic-v1:0", "tiffany"), Ok(()));
        let error = check_sonic_voice("amazon.nova-2-sonic-v1:0", "greta").expect_err("v1 only");
        assert!(error.contains("no voice \"greta\"") && error.contains("tina"), "{error}");
        let error = check_sonic_voice("amazon.nova-sonic-v1:0", "matthew").expect_err("retired");
        assert!(error.contains("2026-09-14") && error.contains("amazon.nova-2-5-sonic"), "{error}");
        assert_eq!(check_sonic_voice("arn:aws:bedrock:us-east-1:123456789012:custom-model/x", "anyone"), Ok(()));
        assert_eq!(sonic_model("eu.amazon.nova-2-5-sonic").map(|m| m.name), Some("Nova 2.5 Sonic"));
    }

    #[test]
    fn voice_lists_are_sorted_out_once() {
        for model in SONIC_MODELS {
            let mut voices = model.voices.to_vec();
            voices.sort_unstable();
            voices.dedup();
            assert_eq!(voices.len(), model.voices.len(), "{} lists a voice twice", model.id);
            assert!(model.voices.iter().all(|v| v.bytes().all(|b| b.is_ascii_lowercase())), "{}", model.id);
        }
    }
}
