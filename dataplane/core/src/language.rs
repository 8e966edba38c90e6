//! Which language a call is in, for a Persona that speaks several (`spec.languages`): each
//! final transcript of the caller's words is identified by `whatlang` (trigram statistics,
//! judged among the Persona's languages only), and when it is clearly another language the
//! Persona speaks, the call switches to it: the voice that language is spoken with, and a
//! line for the system prompt telling the model to speak it. Short transcripts ("OK", "sí",
//! a name, a number) and unsure ones never switch.
//!
//! Nova Sonic's output names no language (its transcripts carry none), so the caller's words
//! are the evidence. The language is the session's memory (`language`, a BCP 47 tag), so a
//! call handed to another agent or resumed elsewhere starts in it where that Persona speaks it.

use switchboard_crds::persona::PersonaSpec;
use switchboard_crds::persona::languages::{language_name, primary};
use whatlang::{Detector, Lang};

/// Letters a transcript needs before its language is judged.
pub const MIN_LETTERS: usize = 12;
/// How sure the detector must be (0 to 1) to switch.
pub const MIN_CONFIDENCE: f64 = 0.5;
/// The session memory key that holds the call's language.
pub const MEMORY_KEY: &str = "language";

/// whatlang's language for a BCP 47 primary subtag the Persona may list.
fn detected_as(primary: &str) -> Option<Lang> {
    Some(match primary {
        "en" => Lang::Eng,
        "es" => Lang::Spa,
        "fr" => Lang::Fra,
        "de" => Lang::Deu,
        "it" => Lang::Ita,
        "pt" => Lang::Por,
        "hi" => Lang::Hin,
        _ => return None,
    })
}

/// A language the agent speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spoken {
    /// Its BCP 47 tag, as the Persona writes it.
    pub code: String,
    /// The voice it is spoken with.
    pub voice: String,
    /// Its English name.
    pub name: &'static str,
    lang: Lang,
}

impl Spoken {
    /// The system prompt's line for a call in this language.
    pub fn prompt_line(&self) -> String {
        format!(
            "The caller speaks {name}. From now on speak and reply only in {name} ({code}), whatever language earlier turns were in.",
            name = self.name,
            code = self.code
        )
    }
}

/// The languages of a call and the one it is in.
pub struct Languages {
    /// The Persona's own language first.
    spoken: Vec<Spoken>,
    current: usize,
    detector: Detector,
}

impl std::fmt::Debug for Languages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Languages").field("spoken", &self.spoken).field("current", &self.current).finish()
    }
}

impl Languages {
    /// The languages of a call with `persona`; `None` when it speaks only its own (or its
    /// own is not one the runtime can recognise: there would be no way back to it).
    pub fn new(persona: &PersonaSpec) -> Option<Self> {
        let own = std::iter::once((&persona.language, &persona.voice));
        let others = persona.languages.iter().map(|l| (&l.code, &l.voice));
        let mut spoken: Vec<Spoken> = Vec::new();
        for (n, (code, voice)) in own.chain(others).enumerate() {
            let (Some(lang), Some(name)) = (detected_as(&primary(code)), language_name(code)) else {
                if n == 0 {
                    return None;
                }
                continue;
            };
            if spoken.iter().all(|s| s.lang != lang) {
                spoken.push(Spoken { code: code.clone(), voice: voice.clone(), name, lang });
            }
        }
        if spoken.len() < 2 {
            return None;
        }
        let detector = Detector::with_allowlist(spoken.iter().map(|s| s.lang).collect());
        Some(Self { spoken, current: 0, detector })
    }

    /// The language the call is in.
    pub fn current(&self) -> &Spoken {
        &self.spoken[self.current]
    }

    /// Whether the call is in the Persona's own language.
    pub fn at_home(&self) -> bool {
        self.current == 0
    }

    /// Starts the call in `code` (the session's memory from an earlier agent or pod), if it
    /// is one of these languages; whether it did.
    pub fn start_in(&mut self, code: &str) -> bool {
        let Some(lang) = detected_as(&primary(code)) else { return false };
        match self.spoken.iter().position(|s| s.lang == lang) {
            Some(at) => {
                self.current = at;
                true
            }
            None => false,
        }
    }

    /// The caller said `text` (a final transcript): the language the call switches to, if
    /// they clearly spoke another one of these.
    pub fn heard(&mut self, text: &str) -> Option<&Spoken> {
        if text.chars().filter(|c| c.is_alphabetic()).count() < MIN_LETTERS {
            return None;
        }
        let info = self.detector.detect(text)?;
        if info.confidence() < MIN_CONFIDENCE {
            return None;
        }
        let to = self.spoken.iter().position(|s| s.lang == info.lang())?;
        if to == self.current {
            return None;
        }
        self.current = to;
        Some(&self.spoken[to])
    }

    /// The system prompt's line for the call's language; `None` in the Persona's own.
    pub fn prompt_line(&self) -> Option<String> {
        (!self.at_home()).then(|| self.current().prompt_line())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_crds::persona::Language;

    fn persona(languages: &[(&str, &str)]) -> PersonaSpec {
        let mut spec: PersonaSpec =
            serde_json::from_value(serde_json::json!({"displayName": "Ava", "systemPrompt": "x", "voice": "matthew"}))
                .expect("a persona");
        spec.languages = languages.iter().map(|(c, v)| Language { code: (*c).into(), voice: (*v).into() }).collect();
        spec
    }

    #[test]
    fn a_caller_speaking_another_language_switches_the_call_and_back() {
        let mut languages = Languages::new(&persona(&[("es-US", "lupe"), ("fr-FR", "ambre")])).expect("several");
        assert_eq!(languages.current().code, "en-US");
        assert_eq!(languages.prompt_line(), None);
        assert!(languages.heard("I'd like to check my balance please").is_none(), "already English");
        let to = languages.heard("Hola, quiero saber el saldo de mi cuenta, por favor").expect("Spanish");
        assert_eq!((to.code.as_str(), to.voice.as_str(), to.name), ("es-US", "lupe", "Spanish"));
        let line = languages.prompt_line().expect("a line");
        assert!(line.contains("only in Spanish (es-US)"), "{line}");
        assert!(languages.heard("¿Y cuánto dinero tengo en la cuenta de ahorros?").is_none(), "still Spanish");
        let back = languages.heard("Sorry, can we speak English again? I would prefer that.").expect("English");
        assert_eq!((back.code.as_str(), back.voice.as_str()), ("en-US", "matthew"));
        assert_eq!(languages.prompt_line(), None);
        let french = languages.heard("Bonjour, je voudrais connaître le solde de mon compte").expect("French");
        assert_eq!(french.voice, "ambre");
    }

    #[test]
    fn short_or_unclear_words_do_not_switch() {
        let mut languages = Languages::new(&persona(&[("es-US", "lupe")])).expect("two");
        for text in ["Sí", "Hola", "OK, gracias", "12345678", "Ada Lovelace", "", "¿¿¿!!!"] {
            assert!(languages.heard(text).is_none(), "{text:?} switched");
        }
        assert!(languages.at_home());
    }

    #[test]
    fn one_language_or_an_unknown_own_language_means_no_switching() {
        assert!(Languages::new(&persona(&[])).is_none());
        let mut japanese = persona(&[("es-US", "lupe")]);
        japanese.language = "ja-JP".into();
        assert!(Languages::new(&japanese).is_none(), "no way back to Japanese");
        let mut languages = Languages::new(&persona(&[("es-US", "lupe")])).expect("two");
        assert!(languages.start_in("es-MX") && languages.current().code == "es-US");
        assert!(!languages.start_in("de-DE"));
        assert!(!languages.start_in("nonsense"));
    }
}
