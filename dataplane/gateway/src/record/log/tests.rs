use switchboard_core::protocol::ServerMessage;

use super::*;
use crate::record::{Prices, RecordConfig, RecordMetrics, Store};

#[tokio::test]
async fn a_fallbacks_tokens_are_counted_and_priced_as_the_model_that_answered() {
    let dir = std::env::temp_dir().join(format!("switchboard-log-{}", uuid::Uuid::new_v4()));
    let store = Store::file(&dir.join("record.db")).expect("store");
    let metrics = RecordMetrics::new().expect("metrics");
    let (recorder, _writer) =
        Recorder::new(store, RecordConfig::default(), Redactor::default(), Prices::default(), metrics);
    let mut log = SessionLog::new(recorder.clone(), "gw-1");
    // The session's model, as its bidi_connection_start named it.
    log.model = "amazon.nova-lite-v1:0".into();
    let usage = |model: Option<&str>| ServerMessage::BidiUsage {
        input_tokens: 1_000_000,
        output_tokens: 0,
        total_tokens: 1_000_000,
        modality: None,
        model: model.map(str::to_owned),
    };
    log.message("bank/banking", usage(Some("amazon.nova-pro-v1:0@us-west-2")));
    log.message("bank/banking", usage(None));
    let prices = &recorder.prices;
    let pro = prices.cost("amazon.nova-pro-v1:0", 1_000_000, 0, None).expect("Nova Pro is priced");
    let lite = prices.cost("amazon.nova-lite-v1:0", 1_000_000, 0, None).expect("Nova Lite is priced");
    assert_ne!(pro, lite);
    let text = recorder.metrics.render();
    let line = |name: &str, model: &str| {
        let prefix = format!("{name}{{agent=\"bank/banking\",");
        let found = text.lines().find(|l| l.starts_with(&prefix) && l.contains(&format!("model=\"{model}\"")));
        found.and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse::<f64>().ok())
    };
    let micro = |usd: f64| (usd * 1e6).round();
    assert_eq!(
        line("switchboard_gateway_cost_microdollars_total", "amazon.nova-pro-v1:0@us-west-2"),
        Some(micro(pro)),
        "{text}"
    );
    assert_eq!(
        line("switchboard_gateway_cost_microdollars_total", "amazon.nova-lite-v1:0"),
        Some(micro(lite)),
        "{text}"
    );
    assert_eq!(line("switchboard_gateway_tokens_total", "amazon.nova-pro-v1:0@us-west-2"), Some(1_000_000.0), "{text}");
    assert!(!text.contains("switchboard_gateway_unpriced_usage_total{"), "both are priced: {text}");
    let _ = std::fs::remove_dir_all(dir);
}
