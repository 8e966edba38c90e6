//! A set of Agents, Personas and Workflows read from YAML (a folder of the same files
//! `kubectl apply` takes), with the ConfigMaps among those files (an Agent's knowledge and
//! skills may read them, as on a cluster), and validation and resolution across them. Used by
//! `switchboard-operator render` and the local runner; the operator itself works from its
//! cluster caches with the same [`validate_agent`] and [`resolve()`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kube::ResourceExt;
use serde::de::DeserializeOwned;

use crate::agent::{ConfigMaps, referenced_config_maps};
use crate::resolve::{DEFAULT_NAMESPACE, resolve_variants};
use crate::validate::{Problem, References, VariantRefs, check_variants, validate_agent};
use crate::{Agent, Persona, RuntimeSpec, Workflow, manifests, resolve};

/// Why a set of files could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A file or folder could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A document is not YAML, or not a valid object of its kind.
    #[error("{source_name}, document {index}: {message}")]
    Invalid {
        /// The file (or other source) name.
        source_name: String,
        /// The 1-based document index within the file.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// Two documents define the same object.
    #[error("{kind} {namespace}/{name} is defined twice (in {first} and {second})")]
    Duplicate {
        /// The kind.
        kind: String,
        /// The namespace.
        namespace: String,
        /// The name.
        name: String,
        /// Where it was first defined.
        first: String,
        /// Where it was defined again.
        second: String,
    },
}

type Key = (String, String);

/// Agents, Personas and Workflows by namespace and name.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    agents: BTreeMap<Key, (Agent, String)>,
    personas: BTreeMap<Key, (Persona, String)>,
    workflows: BTreeMap<Key, (Workflow, String)>,
    /// ConfigMap documents (`v1`): their `data`, and where they were read.
    config_maps: BTreeMap<Key, (BTreeMap<String, String>, String)>,
    skipped: Vec<String>,
}

impl Catalog {
    /// An empty catalog.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads every `.yaml`/`.yml` file under each path (files or folders, recursively, in
    /// name order).
    pub fn load_paths<P: AsRef<Path>>(paths: &[P]) -> Result<Self, LoadError> {
        let mut catalog = Self::new();
        for path in paths {
            for file in yaml_files(path.as_ref())? {
                let text =
                    std::fs::read_to_string(&file).map_err(|source| LoadError::Io { path: file.clone(), source })?;
                catalog.add_yaml(&text, &file.display().to_string())?;
            }
        }
        Ok(catalog)
    }

    /// Adds every document of a (multi-document) YAML text. Switchboard objects are checked
    /// against their CRD schema; other kinds are skipped and listed in [`Catalog::skipped`].
    pub fn add_yaml(&mut self, text: &str, source_name: &str) -> Result<(), LoadError> {
        for (i, doc) in serde_yaml::Deserializer::from_str(text).enumerate() {
            let index = i + 1;
            let invalid = |message: String| LoadError::Invalid { source_name: source_name.to_owned(), index, message };
            let value =
                <serde_json::Value as serde::Deserialize>::deserialize(doc).map_err(|e| invalid(e.to_string()))?;
            if value.is_null() {
                continue;
            }
            let api_version = value.get("apiVersion").and_then(|v| v.as_str()).unwrap_or_default();
            let kind = value.get("kind").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            if api_version == "v1" && kind == "ConfigMap" {
                self.add_config_map(value, source_name).map_err(invalid)?;
                continue;
            }
            if api_version.split('/').next() != Some(crate::GROUP) {
                self.skipped.push(format!("{source_name}: {kind} ({api_version})"));
                continue;
            }
            if api_version != crate::API_VERSION {
                return Err(invalid(format!("apiVersion {api_version:?} is not served; use {}", crate::API_VERSION)));
            }
            check_schema(&kind, &value).map_err(invalid)?;
            match kind.as_str() {
                "Agent" => insert(&mut self.agents, "Agent", parse(value).map_err(invalid)?, source_name)?,
                "Persona" => insert(&mut self.personas, "Persona", parse(value).map_err(invalid)?, source_name)?,
                "Workflow" => insert(&mut self.workflows, "Workflow", parse(value).map_err(invalid)?, source_name)?,
                // Scenario tests the operator runs on a cluster: nothing local mode serves.
                "AgentTest" => self.skipped.push(format!("{source_name}: {kind} ({api_version})")),
                other => return Err(invalid(format!("unknown kind {other:?}; expected Agent, Persona or Workflow"))),
            }
        }
        Ok(())
    }

    /// A ConfigMap document: its `data` (string values), kept for the Agents that read it.
    fn add_config_map(&mut self, value: serde_json::Value, source_name: &str) -> Result<(), String> {
        let meta = value.get("metadata");
        let name = meta.and_then(|m| m.get("name")).and_then(|n| n.as_str()).filter(|n| !n.is_empty());
        let Some(name) = name else { return Err("ConfigMap has no metadata.name".into()) };
        let namespace =
            meta.and_then(|m| m.get("namespace")).and_then(|n| n.as_str()).unwrap_or(DEFAULT_NAMESPACE).to_owned();
        let data: BTreeMap<String, String> = match value.get("data") {
            None | Some(serde_json::Value::Null) => BTreeMap::new(),
            Some(data) => serde_json::from_value(data.clone())
                .map_err(|e| format!("ConfigMap {name}: data must map keys to strings: {e}"))?,
        };
        let k = key(&namespace, name);
        if let Some((_, first)) = self.config_maps.get(&k) {
            return Err(format!("ConfigMap {namespace}/{name} is defined twice (in {first} and {source_name})"));
        }
        self.config_maps.insert(k, (data, source_name.to_owned()));
        Ok(())
    }

    /// The ConfigMaps of this catalog that `agent` reads, by name.
    pub fn config_maps_of(&self, agent: &Agent) -> ConfigMaps {
        let ns = namespace_of(agent);
        referenced_config_maps(&agent.spec)
            .into_iter()
            .filter_map(|name| self.config_maps.get(&key(&ns, &name)).map(|(data, _)| (name, data.clone())))
            .collect()
    }

    /// Documents that were not Switchboard objects, as `source: Kind (apiVersion)`.
    pub fn skipped(&self) -> &[String] {
        &self.skipped
    }

    /// Every Agent, in namespace and name order.
    pub fn agents(&self) -> impl Iterator<Item = &Agent> {
        self.agents.values().map(|(a, _)| a)
    }

    /// Every Persona, in namespace and name order.
    pub fn personas(&self) -> impl Iterator<Item = &Persona> {
        self.personas.values().map(|(p, _)| p)
    }

    /// Every Workflow, in namespace and name order.
    pub fn workflows(&self) -> impl Iterator<Item = &Workflow> {
        self.workflows.values().map(|(w, _)| w)
    }

    /// The Agent `namespace/name`.
    pub fn agent(&self, namespace: &str, name: &str) -> Option<&Agent> {
        self.agents.get(&key(namespace, name)).map(|(a, _)| a)
    }

    /// Every problem with an Agent of this catalog, given the other objects in it.
    pub fn validate_agent(&self, agent: &Agent) -> Vec<Problem> {
        let ns = namespace_of(agent);
        let persona = self.personas.get(&key(&ns, &agent.spec.persona_ref.name)).map(|(p, _)| &p.spec);
        let workflow = self.workflows.get(&key(&ns, &agent.spec.workflow_ref.name)).map(|(w, _)| &w.spec);
        let agent_exists = |name: &str| self.agents.contains_key(&key(&ns, name));
        let config_maps = self.config_maps_of(agent);
        let mut problems = validate_agent(
            &agent.name_any(),
            &ns,
            &agent.spec,
            References { persona, workflow, agent_exists: &agent_exists, config_maps: &config_maps },
        );
        problems.extend(self.numbers_taken(&key(&ns, &agent.name_any()), agent));
        problems.extend(check_variants(&ns, &agent.spec, &self.variant_refs(agent)));
        problems
    }

    /// The Personas and Workflows of this catalog that `agent`'s variants reference.
    fn variant_refs(&self, agent: &Agent) -> VariantRefs {
        let ns = namespace_of(agent);
        VariantRefs::gather(
            &agent.spec,
            |name| self.personas.get(&key(&ns, name)).map(|(p, _)| p.spec.clone()),
            |name| self.workflows.get(&key(&ns, name)).map(|(w, _)| w.spec.clone()),
        )
    }

    /// A phone number is one Agent's: of the folder's Agents that list it, the first by
    /// `namespace/name` keeps it (a cluster's operator goes by creation time instead).
    fn numbers_taken(&self, me: &Key, agent: &Agent) -> Vec<Problem> {
        let mut problems = Vec::new();
        for number in &agent.spec.telephony.numbers {
            let first = self.agents.iter().find(|(k, (a, _))| a.spec.telephony.numbers.contains(number) && *k < me);
            if let Some(((namespace, name), _)) = first {
                problems.push(Problem::new(
                    crate::validate::Reason::DuplicateName,
                    "spec.telephony.numbers",
                    format!(
                        "{number} is claimed by Agent {namespace}/{name} too: a call to a number reaches one Agent; \
                         remove it from one of them"
                    ),
                ));
            }
        }
        problems
    }

    /// The RuntimeSpec of an Agent, or every problem that prevents it.
    pub fn resolve_agent(&self, agent: &Agent) -> Result<RuntimeSpec, Vec<Problem>> {
        let problems = self.validate_agent(agent);
        if !problems.is_empty() {
            return Err(problems);
        }
        let ns = namespace_of(agent);
        let persona = &self.personas[&key(&ns, &agent.spec.persona_ref.name)].0;
        let workflow = &self.workflows[&key(&ns, &agent.spec.workflow_ref.name)].0;
        let mut spec = resolve(agent, persona, workflow, &self.config_maps_of(agent));
        spec.variants = resolve_variants(&agent.spec, &self.variant_refs(agent));
        Ok(spec)
    }
}

/// An object's namespace, `default` when it names none.
pub fn namespace_of<K: ResourceExt>(obj: &K) -> String {
    obj.namespace().unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned())
}

fn key(namespace: &str, name: &str) -> Key {
    (namespace.to_owned(), name.to_owned())
}

fn parse<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, String> {
    serde_json::from_value(value).map_err(|e| e.to_string())
}

fn insert<K: ResourceExt>(
    map: &mut BTreeMap<Key, (K, String)>,
    kind: &str,
    obj: K,
    source: &str,
) -> Result<(), LoadError> {
    let k = key(&namespace_of(&obj), &obj.name_any());
    if let Some((_, first)) = map.get(&k) {
        return Err(LoadError::Duplicate {
            kind: kind.to_owned(),
            namespace: k.0,
            name: k.1,
            first: first.clone(),
            second: source.to_owned(),
        });
    }
    map.insert(k, (obj, source.to_owned()));
    Ok(())
}

/// Checks a document against its CRD's openAPIV3Schema, as the API server would.
fn check_schema(kind: &str, value: &serde_json::Value) -> Result<(), String> {
    static VALIDATORS: OnceLock<BTreeMap<&'static str, jsonschema::Validator>> = OnceLock::new();
    let validators = VALIDATORS.get_or_init(|| {
        ["Agent", "Persona", "Workflow"]
            .into_iter()
            .filter_map(|k| {
                let schema = manifests::schema_of(k)?;
                jsonschema::validator_for(&schema).ok().map(|v| (k, v))
            })
            .collect()
    });
    let Some(validator) = validators.get(kind) else {
        return Ok(());
    };
    if value.get("metadata").and_then(|m| m.get("name")).and_then(|n| n.as_str()).is_none_or(str::is_empty) {
        return Err(format!("{kind} has no metadata.name"));
    }
    let errors: Vec<String> = validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path =
                if path.is_empty() { "(root)".to_owned() } else { path.trim_start_matches('/').replace('/', ".") };
            format!("{path}: {e}")
        })
        .collect();
    if errors.is_empty() { Ok(()) } else { Err(format!("{kind} does not match its schema: {}", errors.join("; "))) }
}

fn yaml_files(path: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let io = |source| LoadError::Io { path: path.to_owned(), source };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_file() {
        return Ok(vec![path.to_owned()]);
    }
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(path).map_err(io)?.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    let mut files = Vec::new();
    for entry in entries {
        if entry.is_dir() {
            files.extend(yaml_files(&entry)?);
        } else if entry.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            files.push(entry);
        }
    }
    Ok(files)
}
