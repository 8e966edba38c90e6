//! An Agent's knowledge and skills: their sources read from the ConfigMaps it references
//! (missing ones and missing keys reported), the size limit, and the skills' own rules
//! (unique names, tools the Agent defines, `delegatesTo` naming other skills). Reading and
//! checking are one pass, so what validation accepts is exactly what resolution produces.

use super::{Problem, Reason, duplicates};
use crate::agent::{AgentSpec, ConfigMapKeyRef, ConfigMaps, ContextSource, Skill, USE_SKILL_TOOL};
use crate::runtime::{KnowledgeFile, ResolvedKnowledge};

/// An Agent's knowledge and skills with their sources read, and what was wrong on the way.
#[derive(Clone, Debug, Default)]
pub struct Gathered {
    /// The agent-level knowledge.
    pub knowledge: ResolvedKnowledge,
    /// The skills, each `dataContext` inline text.
    pub skills: Vec<Skill>,
    /// Missing ConfigMaps or keys, and a knowledge over its size limit.
    pub problems: Vec<Problem>,
}

/// Reads every knowledge source of `spec` from `config_maps` (the referenced ConfigMaps
/// that exist, in `namespace`) and checks the total against `knowledge.maxBytes`.
pub fn gather_knowledge(spec: &AgentSpec, namespace: &str, config_maps: &ConfigMaps) -> Gathered {
    let mut problems = Vec::new();
    let mut read = |field: String, source: &ContextSource| -> String {
        match (&source.text, source.config_map()) {
            (Some(text), _) => text.clone(),
            (None, Some(r)) => match lookup(namespace, config_maps, r, &format!("{field}.configMapRef")) {
                Ok(entries) => join(&entries),
                Err(problem) => {
                    problems.push(problem);
                    String::new()
                }
            },
            (None, None) => String::new(),
        }
    };
    let data_context =
        spec.knowledge.data_context.as_ref().map(|c| read("spec.knowledge.dataContext".into(), c)).unwrap_or_default();
    let skills: Vec<Skill> = spec
        .skills
        .iter()
        .enumerate()
        .map(|(i, skill)| {
            let data_context = skill.data_context.as_ref().map(|c| read(format!("spec.skills[{i}].dataContext"), c));
            Skill { data_context: data_context.map(ContextSource::text), ..skill.clone() }
        })
        .collect();
    let mut files = Vec::new();
    for (i, r) in spec.knowledge.files.iter().enumerate() {
        match lookup(namespace, config_maps, r, &format!("spec.knowledge.files[{i}]")) {
            Ok(entries) => files.extend(entries.into_iter().map(|(name, text)| KnowledgeFile { name, text })),
            Err(problem) => problems.push(problem),
        }
    }
    let knowledge = ResolvedKnowledge { data_context, files };
    if let Some(problem) = check_size(spec, &knowledge, &skills) {
        problems.push(problem);
    }
    Gathered { knowledge, skills, problems }
}

/// The entries a reference names: one key, or every key of the ConfigMap in key order.
fn lookup(
    namespace: &str,
    config_maps: &ConfigMaps,
    r: &ConfigMapKeyRef,
    field: &str,
) -> Result<Vec<(String, String)>, Problem> {
    let Some(data) = config_maps.get(&r.name) else {
        return Err(Problem::new(
            Reason::ConfigMapNotFound,
            field,
            format!(
                "ConfigMap {:?} does not exist in namespace {namespace:?}; create it (e.g. kubectl create configmap {} --from-file=...) or fix the name",
                r.name, r.name
            ),
        ));
    };
    match &r.key {
        Some(key) => match data.get(key) {
            Some(text) => Ok(vec![(key.clone(), text.clone())]),
            None => {
                let keys: Vec<&str> = data.keys().map(String::as_str).collect();
                let keys =
                    if keys.is_empty() { "it has none".to_owned() } else { format!("it has {}", keys.join(", ")) };
                Err(Problem::new(
                    Reason::ConfigMapNotFound,
                    format!("{field}.key"),
                    format!("ConfigMap {:?} has no key {key:?} in its data ({keys}); add the key or fix it", r.name),
                ))
            }
        },
        None => Ok(data.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
    }
}

/// One text of several entries: a single entry as it is, several each under its key.
fn join(entries: &[(String, String)]) -> String {
    match entries {
        [(_, text)] => text.clone(),
        _ => entries.iter().map(|(k, v)| format!("## {k}\n{}", v.trim_end())).collect::<Vec<_>>().join("\n\n"),
    }
}

fn check_size(spec: &AgentSpec, knowledge: &ResolvedKnowledge, skills: &[Skill]) -> Option<Problem> {
    let limit = spec.knowledge.max_bytes as usize;
    let context = knowledge.data_context.len();
    let files: usize = knowledge.files.iter().map(|f| f.text.len()).sum();
    let per_skill: Vec<(&str, usize)> = skills
        .iter()
        .filter_map(|s| s.data_context.as_ref().and_then(|c| c.text.as_ref()).map(|t| (s.name.as_str(), t.len())))
        .collect();
    let total = context + files + per_skill.iter().map(|(_, n)| n).sum::<usize>();
    if total <= limit {
        return None;
    }
    let mut parts = vec![format!("data context {context}"), format!("files {files}")];
    parts.extend(per_skill.iter().map(|(name, n)| format!("skill {name} {n}")));
    Some(Problem::new(
        Reason::KnowledgeTooLarge,
        "spec.knowledge.maxBytes",
        format!(
            "the agent's knowledge is {total} bytes ({}), more than spec.knowledge.maxBytes {limit}; shorten it or raise maxBytes (at most {})",
            parts.join(", "),
            crate::agent::MAX_KNOWLEDGE_BYTES
        ),
    ))
}

/// The skills' own rules: unique names, known tools, `delegatesTo` naming other skills,
/// and no tool of the Agent named like the built-in `use_skill`.
pub(super) fn check_skills(spec: &AgentSpec, problems: &mut Vec<Problem>) {
    for dup in duplicates(spec.skills.iter().map(|s| s.name.as_str())) {
        problems.push(Problem::new(
            Reason::DuplicateName,
            "spec.skills",
            format!("skill name {dup:?} is used more than once; skill names must be unique"),
        ));
    }
    if let Some(i) = spec.tools.iter().position(|t| t.name == USE_SKILL_TOOL) {
        problems.push(Problem::new(
            Reason::InvalidField,
            format!("spec.tools[{i}].name"),
            format!("{USE_SKILL_TOOL:?} is the built-in tool that uses a skill; rename this tool"),
        ));
    }
    for (i, skill) in spec.skills.iter().enumerate() {
        let field = format!("spec.skills[{i}]");
        if !is_skill_name(&skill.name) {
            problems.push(Problem::new(
                Reason::InvalidField,
                format!("{field}.name"),
                format!(
                    "{:?} is not a valid skill name (a lowercase letter, then lowercase letters, digits, '_' or '-', at most 63)",
                    skill.name
                ),
            ));
        }
        for (j, tool) in skill.tools.iter().enumerate() {
            if !spec.tools.iter().any(|t| &t.name == tool) {
                problems.push(Problem::new(
                    Reason::UnknownTool,
                    format!("{field}.tools[{j}]"),
                    format!(
                        "skill {:?} needs tool {tool:?}, which this agent does not define; add it to spec.tools or remove it from the skill",
                        skill.name
                    ),
                ));
            }
        }
        for (j, other) in skill.delegates_to.iter().enumerate() {
            let message = if other == &skill.name {
                Some(format!("skill {:?} cannot delegate to itself", skill.name))
            } else if !spec.skills.iter().any(|s| &s.name == other) {
                Some(format!(
                    "skill {:?} delegates to {other:?}, which is not among spec.skills; add that skill or remove it here",
                    skill.name
                ))
            } else {
                None
            };
            if let Some(message) = message {
                problems.push(Problem::new(Reason::UnknownSkill, format!("{field}.delegatesTo[{j}]"), message));
            }
        }
    }
    if let Some(avatar) = &spec.avatar
        && !(avatar.starts_with("https://") || avatar.starts_with("http://") || avatar.starts_with("data:image/"))
    {
        problems.push(Problem::new(
            Reason::InvalidField,
            "spec.avatar",
            "must be an https:// or http:// URL, or a data:image/... URI",
        ));
    }
}

fn is_skill_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name.as_bytes()[0].is_ascii_lowercase()
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}
