//! The CRD manifests on disk are exactly what the Rust types generate.

use switchboard_crds::manifests::{crd_files, schema_of};

#[test]
fn crd_files_on_disk_match_the_types() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let chart = root.join(switchboard_crds::manifests::CHART_CRDS_DIR);
    for ((name, generated), dir) in crd_files().into_iter().flat_map(|f| [(f.clone(), root), (f, chart.as_path())]) {
        let path = dir.join(&name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "{} differs from what the Rust types generate; run `cargo run --bin crdgen` and commit the result",
            path.display()
        );
    }
}

#[test]
fn book_reference_on_disk_matches_the_types() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(switchboard_crds::reference::BOOK_REFERENCE_DIR);
    for (name, generated) in switchboard_crds::reference::reference_files() {
        let path = dir.join(&name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "{} differs from what the CRD types generate; run `cargo run --bin crdgen` and commit the result",
            path.display()
        );
    }
}

#[test]
fn schemas_carry_field_docs_and_enums() {
    let agent = schema_of("Agent").expect("Agent schema");
    let spec = &agent["properties"]["spec"]["properties"];
    let mode = &spec["mode"];
    assert_eq!(mode["enum"], serde_json::json!(["voice", "text", "hybrid"]));
    assert!(mode["description"].as_str().is_some_and(|d| d.contains("speech to speech")));
    for field in ["personaRef", "workflowRef", "model", "tools", "handoffs", "replicas", "autoscaling", "credentials"] {
        assert!(spec[field]["description"].as_str().is_some_and(|d| !d.is_empty()), "spec.{field} has no description");
    }
    let sonic_default = &spec["model"]["properties"]["voiceModelId"]["default"];
    assert_eq!(sonic_default, "amazon.nova-2-sonic-v1:0");
    let input_schema = &spec["tools"]["items"]["properties"]["inputSchema"];
    assert_eq!(input_schema["x-kubernetes-preserve-unknown-fields"], true);
    let kinds = &schema_of("Workflow").expect("Workflow schema")["properties"]["spec"]["properties"]["nodes"]["items"]
        ["properties"]["kind"]["enum"];
    assert_eq!(*kinds, serde_json::json!(["message", "tool", "decision", "handoff", "end"]));
}

#[test]
fn every_kind_has_status_printer_columns_and_short_names() {
    for crd in switchboard_crds::manifests::crds() {
        let v = &crd.spec.versions[0];
        assert!(
            v.subresources.as_ref().and_then(|s| s.status.as_ref()).is_some(),
            "{} has no status subresource",
            crd.spec.names.kind
        );
        let columns: Vec<&str> = v.additional_printer_columns.iter().flatten().map(|c| c.name.as_str()).collect();
        assert!(columns.contains(&"Accepted") && columns.contains(&"Age"), "{columns:?}");
        assert!(crd.spec.names.short_names.as_ref().is_some_and(|s| !s.is_empty()));
        assert_eq!(crd.spec.scope, "Namespaced");
    }
    let agent = switchboard_crds::manifests::crds().remove(0);
    let columns: Vec<String> =
        agent.spec.versions[0].additional_printer_columns.iter().flatten().map(|c| c.name.clone()).collect();
    assert_eq!(columns, ["Mode", "Accepted", "Ready", "Endpoint", "Age"]);
}
