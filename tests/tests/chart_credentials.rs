//! The Helm chart's settings for the gateway's callers' credentials, rendered: each API key
//! and JWT subject has a cap on its live sessions by default, and the host app's context keys
//! come from a Secret with the issuer and audience the gateway checks them against.

use switchboard_tests::helm::{chart, document, helm};

/// A fresh install caps each credential's live sessions: an API key that sets none, and each
/// JWT subject; 0 lifts a cap.
#[test]
fn every_credential_has_a_session_cap_by_default() {
    let chart = chart();
    let env = |sets: &[&str], name: &str| {
        let mut args = vec!["template", "sb", chart.as_str()];
        for set in sets {
            args.extend(["--set", set]);
        }
        let (ok, rendered) = helm(None, &args);
        assert!(ok, "{rendered}");
        let gateway = document(&rendered, "Deployment", "sb-switchboard-gateway");
        let deployment: k8s_openapi::api::apps::v1::Deployment = serde_yaml::from_str(gateway).expect("gateway");
        let env = deployment.spec.and_then(|s| s.template.spec).and_then(|p| p.containers[0].env.clone());
        env.unwrap_or_default().into_iter().find(|e| e.name == name).and_then(|e| e.value)
    };
    assert_eq!(env(&[], "SWITCHBOARD_MAX_SESSIONS_PER_KEY").as_deref(), Some("1000"));
    assert_eq!(env(&["gateway.maxSessionsPerKey=0"], "SWITCHBOARD_MAX_SESSIONS_PER_KEY").as_deref(), Some("0"));
    let jwt = "gateway.jwt.jwksConfigMap=jwks,gateway.jwt.issuer=https://idp.example,gateway.jwt.audience=sb";
    assert_eq!(env(&[jwt], "SWITCHBOARD_JWT_MAX_SESSIONS_PER_SUBJECT").as_deref(), Some("10"));
    let lifted = [jwt, "gateway.jwt.maxSessionsPerSubject=0"];
    assert_eq!(env(&lifted, "SWITCHBOARD_JWT_MAX_SESSIONS_PER_SUBJECT").as_deref(), Some("0"));
}

/// The host app's context keys: from a Secret, mounted where the gateway reads them, with
/// the issuer and audience it needs; without them nothing is set, and a Secret without an
/// issuer or audience is refused at render.
#[test]
fn app_context_keys_come_from_a_secret_with_their_issuer_and_audience() {
    let render = |sets: &[&str]| {
        let chart = chart();
        let mut args = vec!["template", "sb", chart.as_str()];
        for set in sets {
            args.extend(["--set", set]);
        }
        helm(None, &args)
    };
    let (ok, off) = render(&[]);
    assert!(ok && !off.contains("APP_CONTEXT"), "nothing by default\n{off}");
    let keys = "gateway.appContext.jwksSecret=bank-app-keys";
    let (ok, missing) = render(&[keys]);
    assert!(!ok && missing.contains("gateway.appContext.issuer is required"), "{missing}");
    let (ok, rendered) =
        render(&[keys, "gateway.appContext.issuer=https://app.bank.example", "gateway.appContext.audience=sb"]);
    assert!(ok, "{rendered}");
    let gateway: k8s_openapi::api::apps::v1::Deployment =
        serde_yaml::from_str(document(&rendered, "Deployment", "sb-switchboard-gateway")).expect("gateway");
    let pod = gateway.spec.and_then(|s| s.template.spec).expect("pod");
    let env = pod.containers[0].env.clone().unwrap_or_default();
    let value = |name: &str| env.iter().find(|e| e.name == name).and_then(|e| e.value.clone());
    assert_eq!(
        value("SWITCHBOARD_APP_CONTEXT_JWKS_FILE").as_deref(),
        Some("/etc/switchboard-gateway-app-context/jwks.json")
    );
    assert_eq!(value("SWITCHBOARD_APP_CONTEXT_ISSUER").as_deref(), Some("https://app.bank.example"));
    assert_eq!(value("SWITCHBOARD_APP_CONTEXT_AUDIENCE").as_deref(), Some("sb"));
    assert_eq!(value("SWITCHBOARD_APP_CONTEXT_RELOAD_SECONDS").as_deref(), Some("10"));
    let volume = pod.volumes.unwrap_or_default().into_iter().find(|v| v.name == "app-context-keys").expect("volume");
    let secret = volume.secret.expect("from a Secret");
    assert_eq!(secret.secret_name.as_deref(), Some("bank-app-keys"));
    assert_eq!(secret.items.expect("items")[0].key, "jwks.json");
    let mounts = pod.containers[0].volume_mounts.clone().unwrap_or_default();
    assert!(
        mounts.iter().any(|m| m.name == "app-context-keys" && m.mount_path == "/etc/switchboard-gateway-app-context")
    );
    assert_eq!(value("SWITCHBOARD_APP_CONTEXT_BIND_SUBJECT"), None, "tokens are not bound to their client by default");

    // Bound to their client: only where clients present credentials.
    let bound = [
        keys,
        "gateway.appContext.issuer=https://app.bank.example",
        "gateway.appContext.audience=sb",
        "gateway.appContext.bindSubject=true",
    ];
    let (ok, refused) = render(&bound);
    assert!(!ok && refused.contains("gateway.appContext.bindSubject binds each token"), "{refused}");
    let (ok, rendered) = render(&[&bound[..], &["gateway.apiKeysSecret=api-keys"]].concat());
    assert!(ok, "{rendered}");
    let gateway: k8s_openapi::api::apps::v1::Deployment =
        serde_yaml::from_str(document(&rendered, "Deployment", "sb-switchboard-gateway")).expect("gateway");
    let env = gateway.spec.and_then(|s| s.template.spec).expect("pod").containers[0].env.clone().unwrap_or_default();
    assert!(env.iter().any(|e| e.name == "SWITCHBOARD_APP_CONTEXT_BIND_SUBJECT" && e.value.as_deref() == Some("true")));
}
