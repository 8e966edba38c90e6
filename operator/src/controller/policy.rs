//! No privilege borrowed through the operator. The operator creates Deployments, Services
//! and ConfigMaps for whoever may write an Agent, with rights that author may not have; so
//! before it acts on an Agent it checks what the validator cannot see:
//!
//! - **ServiceAccounts.** `spec.credentials.serviceAccountName` gives the pods that account's
//!   token and, through IRSA and the like, its cloud role. An Agent may name one only if the
//!   platform team allowed it: listed in `--agent-service-accounts` (`namespace/name` or
//!   `namespace/*`; chart value `operator.agentServiceAccounts`), or annotated
//!   `switchboard.dev/agent-usable: "true"` on the ServiceAccount itself.
//! - **Names.** An Agent's children are named after it. The operator never writes over an
//!   object of that name that the Agent does not own (no controller reference to this Agent):
//!   such an Agent is not accepted, so an Agent named like the routing table cannot overwrite
//!   it, nor any other object its author could not write.
//! - **Secrets.** Whatever a Secret holds reaches the pods that mount it and the servers they
//!   call. An Agent (`credentials.secretRef`, tools' `secretHeaders`) and an AgentTest
//!   (`apiKeySecretRef`, the judge's and Polly's `credentialsSecretRef`) may name only the
//!   Secrets listed in `--agent-secrets` (chart value `operator.agentSecrets`); both are
//!   held to that one list by one check.
//!
//! Each gives `Accepted=False` with a reason that says what to do. ServiceAccounts and names
//! are checked again periodically (a ServiceAccount's annotation or a conflicting object's
//! deletion does not wake the Agent); the Secret list changes only with the operator's
//! flags, and a restarted operator looks at every object again.

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::PartialObjectMeta;
use kube::{Api, Client, Resource};
use switchboard_crds::agent::AgentSpec;
use switchboard_crds::agent_test::AgentTestSpec;

use super::error::Error;
use super::status::Verdict;

/// The annotation by which a ServiceAccount's owner lets Agents in its namespace use it.
pub const AGENT_USABLE_ANNOTATION: &str = "switchboard.dev/agent-usable";
/// `Accepted` reason: the Agent names a ServiceAccount it may not use.
pub const REASON_SERVICE_ACCOUNT: &str = "ServiceAccountNotAllowed";
/// `Accepted` reason: an object with a child's name exists and is not the Agent's.
pub const REASON_NAME_TAKEN: &str = "ChildNameTaken";

/// `Accepted` reason: the Agent names a Secret the platform team did not open to Agents.
pub const REASON_SECRET: &str = "SecretNotAllowed";

/// Which ServiceAccounts Agents may use without the annotation, and which Secrets they may
/// have mounted.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    allowed: Vec<(String, String)>,
    secrets: Vec<(String, String)>,
}

/// A list entry that is not `namespace/name` or `namespace/*`.
#[derive(Debug, thiserror::Error)]
#[error("{flag} entry {entry:?} is not `namespace/name` or `namespace/*`")]
pub struct PolicyError {
    flag: &'static str,
    entry: String,
}

fn parse_entries(entries: &[String], flag: &'static str) -> Result<Vec<(String, String)>, PolicyError> {
    entries
        .iter()
        .map(|e| e.trim())
        .filter(|e| !e.is_empty())
        .map(|e| match e.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() && ns != "*" && !name.contains('/') => {
                Ok((ns.to_owned(), name.to_owned()))
            }
            _ => Err(PolicyError { flag, entry: e.to_owned() }),
        })
        .collect()
}

impl Policy {
    /// The policy from `--agent-service-accounts` entries.
    pub fn parse(entries: &[String]) -> Result<Self, PolicyError> {
        Ok(Self { allowed: parse_entries(entries, "--agent-service-accounts")?, secrets: Vec::new() })
    }

    /// Also the Secrets of `--agent-secrets` entries.
    pub fn with_secrets(mut self, entries: &[String]) -> Result<Self, PolicyError> {
        self.secrets = parse_entries(entries, "--agent-secrets")?;
        Ok(self)
    }

    /// Whether the list allows ServiceAccount `namespace/name`.
    pub fn allows(&self, namespace: &str, name: &str) -> bool {
        self.allowed.iter().any(|(ns, n)| ns == namespace && (n == "*" || n == name))
    }

    /// Whether Agents may have Secret `namespace/name` mounted or in their environment.
    pub fn allows_secret(&self, namespace: &str, name: &str) -> bool {
        self.secrets.iter().any(|(ns, n)| ns == namespace && (n == "*" || n == name))
    }
}

/// `Accepted=False` when the Agent names a Secret (its `credentials.secretRef`, its tools'
/// `secretHeaders`) that `--agent-secrets` does not list. The operator cannot ask the
/// Secret itself (it has no rights on Secrets), so only the platform team's list counts:
/// otherwise an Agent author could have any Secret of the namespace sent to a tool server
/// of their choosing.
pub fn secrets(policy: &Policy, namespace: &str, spec: &AgentSpec) -> Option<Verdict> {
    let mut named: Vec<(&str, &'static str)> = Vec::new();
    if let Some(secret) = spec.credentials.as_ref().and_then(|c| c.secret_ref.as_ref()) {
        named.push((&secret.name, "spec.credentials.secretRef"));
    }
    for tool in &spec.tools {
        if let Some((_, headers)) = tool.headers() {
            named.extend(headers.iter().map(|h| (h.secret_key_ref.name.as_str(), "a tool's secretHeaders")));
        }
    }
    unlisted(policy, namespace, named, "an Agent's Secrets reach its pods and the servers its tools call")
}

/// [`secrets`] for an AgentTest: its `apiKeySecretRef` and the judge's and Polly's
/// `credentialsSecretRef`. Its Job's pod mounts them and sends them on (the API key to the
/// gateway, AWS requests signed with the others to the `endpointUrl` the author chose), so
/// an AgentTest may name only the Secrets an Agent of its namespace may: otherwise a test
/// would open what the platform team kept from Agents.
pub fn test_secrets(policy: &Policy, namespace: &str, spec: &AgentTestSpec) -> Option<Verdict> {
    let named = [
        spec.api_key_secret_ref.as_ref().map(|r| (r.name.as_str(), "spec.apiKeySecretRef")),
        spec.judge
            .as_ref()
            .and_then(|j| j.credentials_secret_ref.as_ref())
            .map(|r| (r.name.as_str(), "spec.judge.credentialsSecretRef")),
        spec.speech
            .as_ref()
            .and_then(|s| s.credentials_secret_ref.as_ref())
            .map(|r| (r.name.as_str(), "spec.speech.credentialsSecretRef")),
    ];
    let reach = "an AgentTest's Secrets reach its Job's pod and the endpoints it calls (the gateway, the judge's \
                 and Polly's endpointUrl)";
    unlisted(policy, namespace, named.into_iter().flatten(), reach)
}

/// The allowlist check of [`secrets`] and [`test_secrets`]: `Accepted=False` naming every
/// Secret of `named` (a name and the field that names it) that `--agent-secrets` does not
/// list, and why it matters (`reach`: where those Secrets go).
fn unlisted<'a>(
    policy: &Policy,
    namespace: &str,
    named: impl IntoIterator<Item = (&'a str, &'static str)>,
    reach: &str,
) -> Option<Verdict> {
    let mut refused: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, field) in named.into_iter().filter(|(name, _)| !policy.allows_secret(namespace, name)) {
        match refused.iter_mut().find(|(n, _)| *n == name) {
            Some((_, fields)) if !fields.contains(&field) => fields.push(field),
            Some(_) => {}
            None => refused.push((name, vec![field])),
        }
    }
    let where_ = refused.iter().map(|(name, fields)| format!("{namespace}/{name} (in {})", fields.join(" and ")));
    let names = refused.iter().map(|(name, _)| format!("{namespace}/{name}")).collect::<Vec<_>>().join(", ");
    let (what, are) = match refused.len() {
        0 => return None,
        1 => ("Secret", "is"),
        _ => ("Secrets", "are"),
    };
    Some(Verdict {
        ok: false,
        reason: REASON_SECRET.into(),
        message: format!(
            "{what} {} {are} not open to Agents: {reach}, so the platform team lists those Agents may use. \
             Ask them to add {names} (or {namespace}/*) to the operator's --agent-secrets (chart value \
             operator.agentSecrets), or name another Secret",
            where_.collect::<Vec<_>>().join(", ")
        ),
    })
}

/// `Accepted=False` when an Agent in `namespace` may not use ServiceAccount `name`: not
/// allowed by `policy`, so its annotation is read through `client`.
pub async fn service_account(
    client: &Client,
    policy: &Policy,
    namespace: &str,
    name: &str,
) -> Result<Option<Verdict>, Error> {
    if policy.allows(namespace, name) {
        return Ok(None);
    }
    let api: Api<PartialObjectMeta<ServiceAccount>> = Api::namespaced(client.clone(), namespace);
    let account = api
        .get_metadata_opt(name)
        .await
        .map_err(|e| Error::kube(format!("reading ServiceAccount {namespace}/{name}"), e))?;
    let opted_in = account.as_ref().is_some_and(|a| {
        a.meta().annotations.as_ref().and_then(|m| m.get(AGENT_USABLE_ANNOTATION)).is_some_and(|v| v == "true")
    });
    if opted_in {
        return Ok(None);
    }
    let state = if account.is_some() { "is not open to Agents" } else { "does not exist" };
    Ok(Some(Verdict {
        ok: false,
        reason: REASON_SERVICE_ACCOUNT.into(),
        message: format!(
            "ServiceAccount {namespace}/{name} {state}: Agents may only run as ServiceAccounts the platform \
             team allowed. Ask them to annotate it ({AGENT_USABLE_ANNOTATION}: \"true\") or to list \
             {namespace}/{name} in the operator's --agent-service-accounts (chart value \
             operator.agentServiceAccounts), or remove spec.credentials.serviceAccountName \
             (at spec.credentials.serviceAccountName)"
        ),
    }))
}

/// Whether `existing` (the object of a child's name, if any) may be written by the Agent
/// with uid `owner`: it does not exist, or the Agent owns it.
pub fn may_write(existing: Option<&kube::api::ObjectMeta>, owner: Option<&str>) -> bool {
    let Some(meta) = existing else { return true };
    let Some(owner) = owner else { return false };
    meta.owner_references.as_ref().is_some_and(|refs| refs.iter().any(|r| r.uid == owner))
}

/// The verdict for an Agent whose child `kind` `namespace/name` is taken by another object.
pub fn name_taken(kind: &str, namespace: &str, name: &str) -> Verdict {
    Verdict {
        ok: false,
        reason: REASON_NAME_TAKEN.into(),
        message: format!(
            "a {kind} named {namespace}/{name} already exists and does not belong to this Agent; the \
             operator will not overwrite it. Rename the Agent (its children take its name), or delete \
             that {kind} if it is a leftover of an earlier Agent (at metadata.name)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

    #[test]
    fn the_allowlist_takes_names_and_whole_namespaces() {
        let p = Policy::parse(&["bank/bedrock".into(), " team-b/* ".into(), String::new()]).expect("valid");
        assert!(p.allows("bank", "bedrock"));
        assert!(!p.allows("bank", "payments"));
        assert!(p.allows("team-b", "anything"));
        assert!(!p.allows("team-c", "bedrock"));
        for bad in ["bedrock", "*/bedrock", "bank/", "a/b/c"] {
            assert!(Policy::parse(&[bad.into()]).is_err(), "{bad}");
        }
        let with = Policy::default().with_secrets(&["bank/crm-token".into(), "ops/*".into()]).expect("valid");
        assert!(with.allows_secret("bank", "crm-token") && with.allows_secret("ops", "x"));
        assert!(!with.allows_secret("bank", "payroll") && !with.allows("bank", "crm-token"));
        let error = Policy::default().with_secrets(&["*/x".into()]).expect_err("no wildcard namespace");
        assert!(error.to_string().contains("--agent-secrets"), "{error}");
    }

    /// An AgentTest naming a Secret for each of its three uses.
    fn agent_test(judge: &str, speech: &str) -> AgentTestSpec {
        let yaml = format!(
            "agents: [{{name: bank}}]
apiKeySecretRef: {{name: gateway-key, key: api-key}}
judge: {{model: amazon.nova-pro-v1:0, endpointUrl: 'https://judge.example', credentialsSecretRef: {{name: {judge}}}}}
speech: {{voice: Matthew, credentialsSecretRef: {{name: {speech}}}}}
scenarios: [{{name: Greets, steps: [{{say: Hello}}]}}]
"
        );
        serde_yaml::from_str(&yaml).expect("AgentTestSpec")
    }

    #[test]
    fn an_agent_test_names_only_secrets_open_to_agents() {
        let spec = agent_test("payroll-aws", "payroll-aws");
        // No list: every Secret an AgentTest names is refused, as an Agent's are.
        let refused = test_secrets(&Policy::default(), "bank", &spec).expect("refused");
        assert_eq!((refused.ok, refused.reason.as_str()), (false, REASON_SECRET));
        let m = &refused.message;
        assert!(m.starts_with("Secrets bank/gateway-key (in spec.apiKeySecretRef), bank/payroll-aws (in spec.judge.credentialsSecretRef and spec.speech.credentialsSecretRef) are not open to Agents"), "{m}");
        assert!(
            m.contains("Ask them to add bank/gateway-key, bank/payroll-aws (or bank/*)")
                && m.contains("--agent-secrets"),
            "{m}"
        );
        assert!(m.contains("endpointUrl"), "says where the Secrets go: {m}");

        // Only the unlisted one is named.
        let some =
            Policy::default().with_secrets(&["bank/gateway-key".into(), "bank/polly-aws".into()]).expect("valid");
        let m = test_secrets(&some, "bank", &agent_test("judge-aws", "polly-aws")).expect("refused").message;
        assert!(
            m.starts_with("Secret bank/judge-aws (in spec.judge.credentialsSecretRef) is not open to Agents"),
            "{m}"
        );
        assert!(!m.contains("gateway-key") && !m.contains("polly-aws"), "{m}");

        // Listed by name or by namespace: accepted; another namespace's list does not count.
        let named =
            some.clone().with_secrets(&["bank/gateway-key".into(), "bank/judge-aws".into(), "bank/polly-aws".into()]);
        assert_eq!(test_secrets(&named.expect("valid"), "bank", &agent_test("judge-aws", "polly-aws")), None);
        let whole = Policy::default().with_secrets(&["bank/*".into()]).expect("valid");
        assert_eq!(test_secrets(&whole, "bank", &spec), None);
        assert!(test_secrets(&whole, "ops", &spec).is_some());

        // No Secret at all: nothing to refuse.
        let mut bare = spec;
        (bare.api_key_secret_ref, bare.judge, bare.speech) = (None, None, None);
        assert_eq!(test_secrets(&Policy::default(), "bank", &bare), None);
    }

    #[test]
    fn an_agent_and_an_agent_test_meet_the_same_list() {
        let agent: AgentSpec = serde_yaml::from_str(
            "mode: text\npersonaRef: {name: p}\nworkflowRef: {name: wf}\ncredentials: {secretRef: {name: payroll-aws}}\n",
        )
        .expect("AgentSpec");
        let test = agent_test("payroll-aws", "payroll-aws");
        let list = Policy::default().with_secrets(&["bank/gateway-key".into()]).expect("valid");
        let (a, t) =
            (secrets(&list, "bank", &agent).expect("refused"), test_secrets(&list, "bank", &test).expect("refused"));
        assert_eq!((a.reason.as_str(), t.reason.as_str()), (REASON_SECRET, REASON_SECRET));
        assert!(
            a.message.starts_with(
                "Secret bank/payroll-aws (in spec.credentials.secretRef) is not open to Agents: an Agent's"
            ),
            "{}",
            a.message
        );
        let open = list.with_secrets(&["bank/gateway-key".into(), "bank/payroll-aws".into()]).expect("valid");
        assert_eq!((secrets(&open, "bank", &agent), test_secrets(&open, "bank", &test)), (None, None));
    }

    #[test]
    fn only_an_absent_object_or_one_the_agent_owns_may_be_written() {
        let owned = |uid: &str| ObjectMeta {
            owner_references: Some(vec![OwnerReference { uid: uid.into(), ..Default::default() }]),
            ..Default::default()
        };
        assert!(may_write(None, Some("agent-uid")));
        assert!(may_write(Some(&owned("agent-uid")), Some("agent-uid")));
        assert!(!may_write(Some(&owned("other-uid")), Some("agent-uid")));
        assert!(!may_write(Some(&ObjectMeta::default()), Some("agent-uid")), "no owner at all");
        assert!(!may_write(Some(&owned("agent-uid")), None));
    }
}
