//! What a session cost: a price table per model, in US dollars per million tokens, split
//! by direction and (for speech-to-speech models) modality. The defaults are Amazon
//! Bedrock's on-demand list prices (us-east-1) as published when this table was written;
//! prices change and differ by region and contract, so operators set their own with
//! `--record-price` (chart value `record.prices`). A model the table does not know costs
//! nothing and is counted as unpriced.

use std::collections::BTreeMap;

use switchboard_core::protocol::TokensByModality;

/// Prices of one model, USD per million tokens.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Price {
    /// Text read.
    pub input: f64,
    /// Text generated.
    pub output: f64,
    /// Speech read (speech-to-speech models).
    pub speech_input: f64,
    /// Speech generated.
    pub speech_output: f64,
}

/// A price that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "a price is `<model id>=<input>,<output>[,<speech input>,<speech output>]` in USD per million tokens, \
     e.g. `amazon.nova-lite-v1:0=0.06,0.24`: got {0:?}"
)]
pub struct PriceError(String);

/// Prices by model id. A model id with a regional prefix (`us.amazon.nova-lite-v1:0`)
/// takes the price of the id it ends with.
#[derive(Clone, Debug)]
pub struct Prices {
    models: BTreeMap<String, Price>,
}

impl Default for Prices {
    fn default() -> Self {
        let text = |input, output| Price { input, output, speech_input: 0.0, speech_output: 0.0 };
        let models = [
            ("amazon.nova-micro-v1:0", text(0.035, 0.14)),
            ("amazon.nova-lite-v1:0", text(0.06, 0.24)),
            ("amazon.nova-pro-v1:0", text(0.8, 3.2)),
            ("amazon.nova-sonic-v1:0", Price { input: 0.06, output: 0.24, speech_input: 3.4, speech_output: 13.6 }),
            ("anthropic.claude-3-haiku-20240307-v1:0", text(0.25, 1.25)),
            ("anthropic.claude-3-5-haiku-20241022-v1:0", text(0.8, 4.0)),
        ];
        Self { models: models.into_iter().map(|(id, price)| (id.to_owned(), price)).collect() }
    }
}

impl Prices {
    /// The defaults with `overrides` (`<model>=<in>,<out>[,<speech in>,<speech out>]`) on top.
    pub fn with(overrides: &[String]) -> Result<Self, PriceError> {
        let mut prices = Self::default();
        for line in overrides {
            let bad = || PriceError(line.clone());
            let (model, numbers) = line.rsplit_once('=').ok_or_else(bad)?;
            let numbers: Vec<f64> = numbers
                .split(',')
                .map(|n| n.trim().parse::<f64>().ok().filter(|n| n.is_finite() && *n >= 0.0))
                .collect::<Option<_>>()
                .ok_or_else(bad)?;
            let price = match numbers[..] {
                [input, output] => Price { input, output, speech_input: 0.0, speech_output: 0.0 },
                [input, output, speech_input, speech_output] => Price { input, output, speech_input, speech_output },
                _ => return Err(bad()),
            };
            if model.trim().is_empty() {
                return Err(bad());
            }
            prices.models.insert(model.trim().to_owned(), price);
        }
        Ok(prices)
    }

    /// The price of `model`, if known.
    pub fn of(&self, model: &str) -> Option<Price> {
        if let Some(price) = self.models.get(model) {
            return Some(*price);
        }
        // `us.amazon.nova-lite-v1:0`, `eu.…`: a cross-region inference profile of a model.
        self.models
            .iter()
            .find(|(id, _)| model.strip_suffix(id.as_str()).is_some_and(|p| p.ends_with('.')))
            .map(|(_, p)| *p)
    }

    /// What `input` and `output` tokens (split by modality when known) of `model` cost, in
    /// USD; None for an unknown model.
    pub fn cost(&self, model: &str, input: u64, output: u64, modality: Option<&TokensByModality>) -> Option<f64> {
        let price = self.of(model)?;
        let per = |tokens: u64, usd: f64| tokens as f64 * usd / 1_000_000.0;
        Some(match modality {
            Some(m) => {
                per(m.input_text, price.input)
                    + per(m.output_text, price.output)
                    + per(m.input_speech, price.speech_input)
                    + per(m.output_speech, price.speech_output)
            }
            None => per(input, price.input) + per(output, price.output),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_speech_tokens_are_priced_by_model() {
        let prices = Prices::default();
        let cost = prices.cost("amazon.nova-lite-v1:0", 1_000_000, 500_000, None).expect("known");
        assert!((cost - 0.18).abs() < 1e-9, "{cost}");
        let split = TokensByModality { input_speech: 1000, input_text: 2000, output_speech: 500, output_text: 100 };
        let cost = prices.cost("amazon.nova-sonic-v1:0", 3000, 600, Some(&split)).expect("known");
        let want = (1000.0 * 3.4 + 2000.0 * 0.06 + 500.0 * 13.6 + 100.0 * 0.24) / 1e6;
        assert!((cost - want).abs() < 1e-12, "{cost} != {want}");
        assert_eq!(prices.cost("someone/else", 1, 1, None), None);
    }

    #[test]
    fn regional_profiles_take_the_model_price_and_overrides_win() {
        let prices = Prices::with(&["amazon.nova-lite-v1:0=1,2".into(), "my-model=0.5,0.5,1,1".into()]).expect("ok");
        assert_eq!(prices.of("us.amazon.nova-lite-v1:0").map(|p| p.output), Some(2.0));
        assert_eq!(prices.of("my-model").map(|p| p.speech_output), Some(1.0));
        assert_eq!(prices.of("xamazon.nova-lite-v1:0"), None);
        for bad in ["nope", "m=1", "m=1,x", "m=-1,2", "=1,2", "m=1,2,3"] {
            assert!(Prices::with(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
