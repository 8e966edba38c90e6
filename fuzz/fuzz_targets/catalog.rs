//! Agent, Persona and Workflow YAML as `switchboard local` and the tools load it
//! (`switchboard_crds::catalog::Catalog::add_yaml`: multi-document YAML, schema check,
//! typed parse), then the validator and resolver on every Agent of the catalog.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchboard_crds::catalog::Catalog;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let mut catalog = Catalog::new();
    if catalog.add_yaml(text, "fuzz.yaml").is_err() {
        return;
    }
    for agent in catalog.agents() {
        match catalog.resolve_agent(agent) {
            Ok(spec) => {
                // The RuntimeSpec is handed to pods as JSON: it must read back the same.
                let json = serde_json::to_string(&spec).expect("a RuntimeSpec serialises");
                let again: switchboard_crds::runtime::RuntimeSpec =
                    serde_json::from_str(&json).expect("a serialised RuntimeSpec reads back");
                assert_eq!(again, spec, "RuntimeSpec round trip through {json}");
            }
            Err(problems) => {
                assert!(!problems.is_empty(), "resolve failed without a problem");
                std::hint::black_box(switchboard_crds::validate::summarize(&problems));
            }
        }
    }
});
