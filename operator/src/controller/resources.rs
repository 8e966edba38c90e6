//! The Persona and Workflow reconciles: each sets its own `Accepted` condition from the API
//! crate's validator (the Agents that use them are re-reconciled by the Agent controller's
//! own triggers).

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Api, ResourceExt};
use switchboard_crds::validate::{validate_persona, validate_workflow};
use switchboard_crds::{Persona, Workflow};

use super::apply::apply_status;
use super::status::{accepted, resource_status};
use super::{Context, Error, key_of};

/// The metrics label of Persona reconciles.
pub const PERSONA: &str = "persona";
/// The metrics label of Workflow reconciles.
pub const WORKFLOW: &str = "workflow";

/// Sets a Persona's `Accepted` condition.
pub async fn reconcile_persona(persona: Arc<Persona>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(PERSONA);
    let verdict = accepted(&validate_persona(&persona.spec));
    let status = resource_status(persona.metadata.generation, persona.status.as_ref(), &verdict, Timestamp::now());
    if persona.status.as_ref() != Some(&status) {
        let api: Api<Persona> = Api::namespaced(ctx.client.clone(), &persona.namespace().unwrap_or_default());
        finish(PERSONA, persona.as_ref(), apply_status(&api, persona.as_ref(), &status).await, &ctx).await?;
        if !verdict.ok {
            ctx.event(persona.as_ref(), EventType::Warning, &verdict.reason, verdict.message).await;
        }
    }
    ctx.succeeded(&key_of(PERSONA, persona.as_ref()));
    Ok(Action::await_change())
}

/// Sets a Workflow's `Accepted` condition.
pub async fn reconcile_workflow(workflow: Arc<Workflow>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(WORKFLOW);
    let verdict = accepted(&validate_workflow(&workflow.spec));
    let status = resource_status(workflow.metadata.generation, workflow.status.as_ref(), &verdict, Timestamp::now());
    if workflow.status.as_ref() != Some(&status) {
        let api: Api<Workflow> = Api::namespaced(ctx.client.clone(), &workflow.namespace().unwrap_or_default());
        finish(WORKFLOW, workflow.as_ref(), apply_status(&api, workflow.as_ref(), &status).await, &ctx).await?;
        if !verdict.ok {
            ctx.event(workflow.as_ref(), EventType::Warning, &verdict.reason, verdict.message).await;
        }
    }
    ctx.succeeded(&key_of(WORKFLOW, workflow.as_ref()));
    Ok(Action::await_change())
}

async fn finish<K>(kind: &'static str, obj: &K, result: Result<(), Error>, ctx: &Context) -> Result<(), Error>
where
    K: kube::Resource<DynamicType = ()>,
{
    match result {
        Ok(()) => {
            ctx.metrics.status_write(kind);
            Ok(())
        }
        Err(e) => {
            ctx.metrics.failure(kind, e.metric_label());
            ctx.event(obj, EventType::Warning, "StatusWriteFailed", e.to_string()).await;
            Err(e)
        }
    }
}
