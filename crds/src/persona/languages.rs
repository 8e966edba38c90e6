//! The other languages a Persona speaks on a call (`spec.languages`), each with its voice.
//!
//! A call starts in the Persona's `language`, with its `voice`. When the caller speaks one of
//! these languages instead (told from what they say, see the runtime), the agent switches to
//! it for the rest of the call: its voice, and a line in its system prompt telling the model
//! to speak that language. It switches back the same way. Languages are told apart by their
//! primary subtag (`es` of `es-US`), so each may appear once, and only the languages Nova
//! Sonic speaks and the runtime can recognise are accepted ([`SPOKEN_LANGUAGES`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The most languages a Persona may list besides its own.
pub const MAX_LANGUAGES: usize = 8;

/// The languages (BCP 47 primary subtags) a Persona may switch to, with their English names:
/// those Nova 2 Sonic speaks.
pub const SPOKEN_LANGUAGES: &[(&str, &str)] = &[
    ("en", "English"),
    ("es", "Spanish"),
    ("fr", "French"),
    ("de", "German"),
    ("it", "Italian"),
    ("pt", "Portuguese"),
    ("hi", "Hindi"),
];

/// Another language the agent speaks.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Language {
    /// The language as a BCP 47 tag, e.g. `es-US`: one of English (`en`), Spanish (`es`),
    /// French (`fr`), German (`de`), Italian (`it`), Portuguese (`pt`) or Hindi (`hi`), each
    /// at most once and not the Persona's own `language`.
    #[schemars(regex(pattern = r"^[a-zA-Z]{2,3}(-[a-zA-Z0-9]{2,8})*$"))]
    pub code: String,

    /// The Nova Sonic voice id the agent speaks this language with, e.g. `lupe` for `es-US`.
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[a-z][a-z0-9_-]*$"))]
    pub voice: String,
}

/// The primary subtag of a BCP 47 tag, lowercase (`es` of `es-US`).
pub fn primary(code: &str) -> String {
    code.split('-').next().unwrap_or("").to_ascii_lowercase()
}

/// The English name of the language of `code`, if it is one a Persona may switch to.
pub fn language_name(code: &str) -> Option<&'static str> {
    let primary = primary(code);
    SPOKEN_LANGUAGES.iter().find(|(tag, _)| *tag == primary).map(|(_, name)| *name)
}

#[cfg(test)]
mod tests {
    use crate::persona::PersonaSpec;
    use crate::validate::validate_persona;

    fn persona(language: &str, languages: serde_json::Value) -> PersonaSpec {
        serde_json::from_value(serde_json::json!({
            "displayName": "Ava", "systemPrompt": "x", "voice": "tiffany", "language": language, "languages": languages
        }))
        .expect("a persona")
    }

    fn problems(spec: &PersonaSpec) -> Vec<(String, String)> {
        validate_persona(spec).into_iter().map(|p| (p.field, p.message)).collect()
    }

    #[test]
    fn other_languages_are_known_each_once_and_not_the_persona_s_own() {
        let good = persona(
            "en-US",
            serde_json::json!([{"code": "es-US", "voice": "lupe"}, {"code": "fr-FR", "voice": "ambre"}]),
        );
        assert_eq!(problems(&good), []);
        assert_eq!(serde_json::to_value(&good).expect("json")["languages"][0]["voice"], "lupe");
        let none = persona("en-US", serde_json::json!([]));
        assert!(serde_json::to_value(&none).expect("json").get("languages").is_none(), "left out when empty");

        let bad = persona(
            "en-US",
            serde_json::json!([
                {"code": "ja-JP", "voice": "kazuha"},
                {"code": "en-GB", "voice": "amy"},
                {"code": "es-US", "voice": "lupe"},
                {"code": "es-ES", "voice": "Lucia"}
            ]),
        );
        let found = problems(&bad);
        let at = |field: &str| found.iter().find(|(f, _)| f == field).map(|(_, m)| m.clone()).unwrap_or_default();
        assert!(at("spec.languages[0].code").contains("Spanish (es)"), "{found:?}");
        assert!(at("spec.languages[1].code").contains("the Persona's own language (en-US)"), "{found:?}");
        assert!(at("spec.languages[3].code").contains("lists es a second time"), "{found:?}");
        assert!(at("spec.languages[3].voice").contains("not a Nova Sonic voice id"), "{found:?}");
        assert_eq!(found.len(), 4, "{found:?}");

        let unknown_own = persona("ja-JP", serde_json::json!([{"code": "es-US", "voice": "lupe"}]));
        let found = problems(&unknown_own);
        assert!(found.iter().any(|(f, m)| f == "spec.language" && m.contains("switch back")), "{found:?}");
        let nine: Vec<_> = (0..9).map(|_| serde_json::json!({"code": "es-US", "voice": "lupe"})).collect();
        let found = problems(&persona("en-US", serde_json::Value::Array(nine)));
        assert!(found.iter().any(|(f, m)| f == "spec.languages" && m.contains("at most 8")), "{found:?}");
    }
}
