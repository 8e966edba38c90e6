//! The AgentTest reconcile: validate (pure) -> the Secrets it names open to Agents
//! (`--agent-secrets`, the same check as an Agent's: [`policy::test_secrets`]) -> fetch the Agents under test and their
//! Deployments -> wait until each has rolled out its accepted spec -> the run for what they
//! run now (its hash: the test's spec and each Agent's pod config hash, which changes with
//! the Agent, its Persona, its Workflow and the ConfigMaps it reads) -> create its
//! ConfigMap and Job unless they exist, prune older runs -> read the Job's outcome -> status.
//!
//! The Job runs `switchboard test` against the gateway URL the operator is given
//! (`--agent-test-gateway`), never one the AgentTest names: the API key Secret it mounts
//! goes only to the platform's gateway. Without that URL AgentTests are not accepted.
//! [`run`] wires the controller: AgentTests (generation changes), their Jobs, and the
//! metadata of Agents' Deployments (a rollout starting or finishing wakes the AgentTests
//! that test that Agent).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::events::EventType;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use switchboard_crds::agent_test::{AgentTestStatus, TestResult, validate_agent_test};
use switchboard_crds::contract::{AGENT_LABEL, MANAGED_BY};
use switchboard_crds::{Agent, AgentTest};
use tokio_util::sync::CancellationToken;

use super::agent_test_build::{self as build, COMPONENT, CONTAINER, Deployed, RUN_LABEL, TEST_LABEL};
use super::agent_test_status::{Run, outcome, rolled_out, test_status};
use super::apply::apply_status;
use super::rollout;
use super::status::{Verdict, accepted};
use super::{Context, Error, error_policy, key_of, policy};
use crate::build::FIELD_MANAGER;
use crate::build::candidate;
use crate::settings::RunArgs;
use crate::triggers::{FirstSight, changes, generation, objects};
use crate::watch::{owned_watch_config, scoped, watch_config};

/// The metrics label of AgentTest reconciles.
pub const KIND: &str = "agent_test";
/// How often an AgentTest waiting for a rollout, or whose Job runs, is looked at again
/// besides the watches that wake it.
pub const RECHECK: Duration = Duration::from_secs(30);

/// Reconciles one AgentTest; failures are counted, logged as Events and retried.
pub async fn reconcile(test: Arc<AgentTest>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _timer = ctx.metrics.reconcile(KIND);
    match reconcile_inner(&test, &ctx).await {
        Ok(action) => {
            ctx.succeeded(&key_of(KIND, test.as_ref()));
            Ok(action)
        }
        Err(e) => {
            ctx.metrics.failure(KIND, e.metric_label());
            ctx.event(test.as_ref(), EventType::Warning, "ReconcileFailed", e.to_string()).await;
            Err(e)
        }
    }
}

fn refused(reason: &str, message: String) -> Verdict {
    Verdict { ok: false, reason: reason.into(), message }
}

async fn reconcile_inner(test: &AgentTest, ctx: &Context) -> Result<Action, Error> {
    let namespace = test.namespace().ok_or_else(|| Error::Unexpected("an AgentTest without a namespace".into()))?;
    let name = test.name_any();
    let problems = validate_agent_test(&name, &test.spec);
    if !problems.is_empty() {
        return finish(test, ctx, &accepted(&problems), Run::None, Action::await_change(), None).await;
    }
    // Its Job mounts the Secrets it names and sends them on: only those open to Agents.
    if let Some(refused) = policy::test_secrets(&ctx.policy, &namespace, &test.spec) {
        return finish(test, ctx, &refused, Run::None, Action::await_change(), None).await;
    }
    let Some(gateway) = ctx.settings.agent_test_gateway.clone() else {
        let message = "the operator has no gateway URL for test Jobs: start it with --agent-test-gateway \
                       (the Helm chart sets it when it runs the gateway)";
        return finish(test, ctx, &refused("NoGateway", message.into()), Run::None, Action::await_change(), None).await;
    };

    // Fetch the Agents under test and their Deployments.
    let agents: Api<Agent> = Api::namespaced(ctx.client.clone(), &namespace);
    let deployments: Api<Deployment> = Api::namespaced(ctx.client.clone(), &namespace);
    let (mut missing, mut deployed, mut waiting) = (Vec::new(), Vec::new(), Vec::new());
    for reference in &test.spec.agents {
        let what = format!("reading Agent {namespace}/{}", reference.name);
        let Some(agent) = agents.get_opt(&reference.name).await.map_err(|e| Error::kube(what, e))? else {
            missing.push(reference.name.clone());
            continue;
        };
        // A held rollout (`rollout.rs`) is tested on its candidate pods, which only test
        // sessions reach; any other Agent on its live pods.
        let held = rollout::is_held(agent.status.as_ref());
        let child = if held { candidate::name(&reference.name) } else { reference.name.clone() };
        let what = format!("reading Deployment {namespace}/{child}");
        let deployment = deployments.get_opt(&child).await.map_err(|e| Error::kube(what, e))?;
        let uid = agent.metadata.uid.as_deref();
        let deployment = deployment.filter(|d| policy::may_write(Some(&d.metadata), uid));
        match rolled_out(&agent, deployment.as_ref()) {
            Ok(config_hash) => deployed.push(Deployed { agent: reference.name.clone(), config_hash, candidate: held }),
            Err(why) if held => waiting.push(format!("the candidate of {why}")),
            Err(why) => waiting.push(why),
        }
    }
    if !missing.is_empty() {
        let message = format!(
            "no Agent {} in namespace {namespace}: create it, or list only Agents that exist in spec.agents",
            missing.join(", ")
        );
        return finish(test, ctx, &refused("AgentNotFound", message), Run::None, Action::await_change(), None).await;
    }
    let valid = accepted(&[]);
    if !waiting.is_empty() {
        return finish(test, ctx, &valid, Run::Waiting(waiting.join("; ")), Action::requeue(RECHECK), None).await;
    }

    // The run for what the Agents run now.
    let hash = build::tested_hash(test, &deployed);
    let run_name = build::run_name(test, &hash);
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &namespace);
    let uid = test.metadata.uid.as_deref();
    let existing = jobs.get_opt(&run_name).await.map_err(|e| Error::kube(format!("reading Job {run_name}"), e))?;
    let run = match existing {
        Some(job) if !policy::may_write(Some(&job.metadata), uid) => {
            let taken = policy::name_taken("Job", &namespace, &run_name);
            return finish(test, ctx, &taken, Run::None, Action::requeue(RECHECK), None).await;
        }
        Some(job) => {
            let message = termination_message(ctx, &namespace, &name, &hash).await?;
            match outcome(&job, message.as_deref()) {
                Some(outcome) => Run::Finished { job: run_name, hash, outcome },
                None => Run::Running { job: run_name, hash },
            }
        }
        None => {
            if let Some(taken) = start(test, ctx, &namespace, (&hash, &deployed), &gateway).await? {
                return finish(test, ctx, &taken, Run::None, Action::requeue(RECHECK), None).await;
            }
            Run::Running { job: run_name, hash }
        }
    };
    let then = match run {
        Run::Finished { .. } => Action::await_change(),
        _ => Action::requeue(RECHECK),
    };
    let passed = match &run {
        Run::Finished { outcome, .. } if outcome.result == TestResult::Passed => Some(build::passed_configs(&deployed)),
        Run::Finished { .. } => Some(Default::default()),
        _ => None,
    };
    let decides = test.spec.gate_rollout && passed.is_some();
    let then = finish(test, ctx, &valid, run, then, passed).await?;
    // A finished run of a gating test decides held rollouts: wake its Agents (once its
    // status, which they read, is written).
    if decides {
        for d in deployed.iter().filter(|d| d.candidate) {
            ctx.trigger_agent(&namespace, &d.agent);
        }
    }
    Ok(then)
}

/// Creates the run's ConfigMap and Job, then deletes the AgentTest's older runs. Returns a
/// verdict when the ConfigMap's name is taken by an object the AgentTest does not own.
async fn start(
    test: &AgentTest,
    ctx: &Context,
    namespace: &str,
    (hash, deployed): (&str, &[Deployed]),
    gateway: &str,
) -> Result<Option<Verdict>, Error> {
    // The platform's Bedrock CA bundle as the operator has it now (it reads it at start).
    let ca = ctx.settings.runtime_bedrock_ca.as_ref();
    let config_map = build::config_map(test, hash, ca);
    let candidates: Vec<&str> = deployed.iter().filter(|d| d.candidate).map(|d| d.agent.as_str()).collect();
    let job = build::job(test, hash, (gateway, &candidates), (&ctx.settings.runtime_image, ca));
    let name = build::run_name(test, hash);
    let config_maps: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let existing = config_maps
        .get_metadata_opt(&name)
        .await
        .map_err(|e| Error::kube(format!("reading ConfigMap {namespace}/{name}"), e))?;
    if !policy::may_write(existing.as_ref().map(|m| &m.metadata), test.metadata.uid.as_deref()) {
        return Ok(Some(policy::name_taken("ConfigMap", namespace, &name)));
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    config_maps
        .patch(&name, &params, &Patch::Apply(&config_map))
        .await
        .map_err(|e| Error::kube(format!("applying ConfigMap {namespace}/{name}"), e))?;
    let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), namespace);
    jobs.patch(&name, &params, &Patch::Apply(&job))
        .await
        .map_err(|e| Error::kube(format!("applying Job {namespace}/{name}"), e))?;
    ctx.metrics.child_apply("Job", true);
    // Older runs: their Jobs (with their pods) and ConfigMaps.
    let older = format!(
        "app.kubernetes.io/managed-by={MANAGED_BY},{TEST_LABEL}={},{RUN_LABEL}!={}",
        test.name_any(),
        build::run_id(hash)
    );
    let (list, delete) = (ListParams::default().labels(&older), DeleteParams::background());
    jobs.delete_collection(&delete, &list)
        .await
        .map_err(|e| Error::kube(format!("deleting the older test Jobs of {namespace}/{}", test.name_any()), e))?;
    config_maps.delete_collection(&delete, &list).await.map_err(|e| {
        Error::kube(format!("deleting the older test ConfigMaps of {namespace}/{}", test.name_any()), e)
    })?;
    ctx.event(test, EventType::Normal, "TestStarted", format!("Job {name} runs the scenarios")).await;
    Ok(None)
}

/// The test container's termination message in the run's pod (the newest that has one).
async fn termination_message(ctx: &Context, namespace: &str, test: &str, hash: &str) -> Result<Option<String>, Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), namespace);
    let selector = format!("{TEST_LABEL}={test},{RUN_LABEL}={}", build::run_id(hash));
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|e| Error::kube(format!("listing the pods of test run {namespace}/{test}"), e))?;
    let mut messages: Vec<(Option<Timestamp>, String)> = list
        .items
        .iter()
        .flat_map(|p| p.status.iter().flat_map(|s| s.container_statuses.iter().flatten()))
        .filter(|c| c.name == CONTAINER)
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref())
        .filter_map(|t| Some((t.finished_at.as_ref().map(|f| f.0), t.message.clone()?)))
        .collect();
    messages.sort_by_key(|(at, _)| *at);
    Ok(messages.pop().map(|(_, m)| m))
}

/// Writes the status for `verdict` and `run` unless unchanged (an Event when a run's
/// outcome, or the verdict, is new), then comes back per `then`.
async fn finish(
    test: &AgentTest,
    ctx: &Context,
    verdict: &Verdict,
    run: Run,
    then: Action,
    passed_configs: Option<BTreeMap<String, String>>,
) -> Result<Action, Error> {
    let previous = test.status.as_ref();
    let mut status = test_status(test.metadata.generation, previous, verdict, &run, Timestamp::now());
    if let Some(passed) = passed_configs {
        status.passed_configs = passed;
    }
    if previous == Some(&status) {
        return Ok(then);
    }
    let api: Api<AgentTest> = Api::namespaced(ctx.client.clone(), &test.namespace().unwrap_or_default());
    apply_status(&api, test, &status).await?;
    ctx.metrics.status_write(KIND);
    if let Some((type_, reason, note)) = event_of(previous, &status, verdict, &run) {
        ctx.event(test, type_, reason, note).await;
    }
    Ok(then)
}

/// The Event a status change deserves: a newly finished run, or a new refusal.
fn event_of(
    previous: Option<&AgentTestStatus>,
    status: &AgentTestStatus,
    verdict: &Verdict,
    run: &Run,
) -> Option<(EventType, &'static str, String)> {
    if !verdict.ok {
        let same = previous.and_then(|p| p.conditions.first()).is_some_and(|c| c.message == verdict.message);
        return (!same).then(|| (EventType::Warning, "NotAccepted", verdict.message.clone()));
    }
    let Run::Finished { job, outcome, .. } = run else { return None };
    let new = previous.is_none_or(|p| p.job.as_deref() != Some(job.as_str()) || p.result != status.result);
    let note = format!("Job {job}: {}", outcome.message.as_deref().unwrap_or("every scenario passed"));
    match outcome.result {
        TestResult::Passed => new.then_some((EventType::Normal, "TestsPassed", note)),
        TestResult::Failed => new.then_some((EventType::Warning, "TestsFailed", note)),
        _ => new.then_some((EventType::Warning, "TestsErrored", note)),
    }
}

/// Runs the AgentTest controller until `stop`; nothing when the AgentTest CRD is not
/// installed (an older chart's CRDs), which it says once.
pub async fn run(client: &Client, args: &RunArgs, ctx: Arc<Context>, stop: CancellationToken) {
    let ns = args.namespace.as_deref();
    let api = scoped::<AgentTest>(client.clone(), ns);
    if let Err(e) = api.list_metadata(&ListParams::default().limit(1)).await {
        tracing::warn!("AgentTests are not run: listing them failed ({e}); install the AgentTest CRD and restart");
        return;
    }
    let (store, writer) = reflector::store::<AgentTest>();
    let events = watcher(api, watch_config()).default_backoff().reflect(writer);
    let tests = objects(changes(events, generation, FirstSight::Pass));
    let runs = format!("app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component={COMPONENT}");
    let jobs = scoped::<Job>(client.clone(), ns);
    let deployment_api: Api<PartialObjectMeta<Deployment>> = match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let deployments = watcher(deployment_api, owned_watch_config()).default_backoff().touched_objects();
    let testers = store.clone();
    Controller::for_stream(tests, store)
        .owns(jobs, watcher::Config::default().labels(&runs))
        .watches_stream(deployments, move |d: PartialObjectMeta<Deployment>| {
            let agent = d.labels().get(AGENT_LABEL).cloned().unwrap_or_default();
            let namespace = d.namespace();
            testers
                .state()
                .iter()
                .filter(|t| t.namespace() == namespace && t.spec.agents.iter().any(|a| a.name == agent))
                .map(|t| ObjectRef::from_obj(t.as_ref()))
                .collect::<Vec<_>>()
        })
        .with_config(Config::default().concurrency(args.concurrency))
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile, error_policy(KIND), ctx)
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!("agent test controller: {e}");
            }
            std::future::ready(())
        })
        .await;
}
