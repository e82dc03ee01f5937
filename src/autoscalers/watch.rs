//! Keeps the [`Autoscalers`] index in step with the cluster: kube-runtime's watcher (list,
//! bookmarks, re-list on 410 Gone) over HorizontalPodAutoscalers, and over KEDA ScaledObjects
//! while discovery shows `keda.sh/v1alpha1` served (asked again every
//! `--autoscaler-discovery-interval` while it is not).
//!
//! Never a way to block writes: any failure only marks the kind unavailable (the rule is then
//! skipped with a warning), is logged once per change of reason, and is retried with
//! kube-runtime's backoff. Nothing here touches readiness.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::core::{ApiResource, DynamicResourceScope, GroupVersionKind, Resource};
use kube::runtime::watcher::{self, DefaultBackoff, Event};
use kube::{Api, Client};
use prometheus_client::metrics::counter::Counter;
use serde::Deserialize;

use super::{Autoscalers, Controller, Kind, Object, Sync, is_deployment};

/// How the watch reaches the API server.
#[derive(Clone, Debug)]
pub enum Credentials {
    /// `KUBECONFIG`, `~/.kube/config`, else the pod's service account (kube's `Config::infer`:
    /// its in-cluster token is re-read when the kubelet rotates it).
    Infer,
    /// `--kubeconfig`.
    Kubeconfig(std::path::PathBuf),
}

/// Server-side timeout of one watch request, and the client's read timeout just above it: a
/// connection to an API server that went silent is noticed within this long.
const WATCH_TIMEOUT_SECS: u32 = 60;
const READ_TIMEOUT: Duration = Duration::from_secs(75);

/// Runs until the task is aborted: builds the client, then watches HPAs and ScaledObjects.
/// `recheck`: how often discovery is asked whether KEDA's API is served (while it is not), and
/// how long building a client waits before trying again after it failed.
pub async fn run(index: Arc<Autoscalers>, credentials: Credentials, recheck: Duration) {
    let client = loop {
        match client(&credentials).await {
            Ok(client) => break client,
            Err(why) => {
                for kind in Kind::ALL {
                    index.stats.watch_errors[kind as usize].inc();
                    report(&index, kind, Sync::Unavailable(why.clone()));
                }
                tokio::time::sleep(recheck).await;
            }
        }
    };
    let errors = index.stats.watch_errors.clone();
    let hpas = watch(index.clone(), client.clone(), Kind::Hpa, errors[0].clone());
    let keda = scaled_objects(index, client, errors[1].clone(), recheck);
    tokio::join!(hpas, keda);
}

/// The API client for `credentials` (also the metrics port's, `crate::scrape::auth`).
pub(crate) async fn client(credentials: &Credentials) -> Result<Client, String> {
    let mut config = match credentials {
        Credentials::Infer => kube::Config::infer().await.map_err(|e| {
            format!(
                "no credentials for the API server (no kubeconfig and not in a pod with a \
                 service account token): {e}"
            )
        })?,
        Credentials::Kubeconfig(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
                .await
                .map_err(|e| format!("--kubeconfig {}: {e}", path.display()))?
        }
    };
    config.read_timeout = Some(READ_TIMEOUT);
    Client::try_from(config).map_err(|e| format!("cannot build the API client: {e}"))
}

/// ScaledObjects: watched while discovery shows the API served.
async fn scaled_objects(
    index: Arc<Autoscalers>,
    client: Client,
    errors: Counter,
    recheck: Duration,
) {
    loop {
        match keda_served(&client).await {
            Ok(true) => {
                watch(
                    index.clone(),
                    client.clone(),
                    Kind::ScaledObject,
                    errors.clone(),
                )
                .await;
                // The watch ended because the API went away (the CRD was deleted): look again.
            }
            Ok(false) => {
                report(&index, Kind::ScaledObject, Sync::NotServed);
                tokio::time::sleep(recheck).await;
            }
            Err(why) => {
                errors.inc();
                report(&index, Kind::ScaledObject, Sync::Unavailable(why));
                tokio::time::sleep(recheck).await;
            }
        }
    }
}

/// Whether the cluster serves `keda.sh/v1alpha1` `scaledobjects`; `Err` when it cannot be told.
async fn keda_served(client: &Client) -> Result<bool, String> {
    match client.list_api_group_resources("keda.sh/v1alpha1").await {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == "scaledobjects")),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(e) => Err(format!("discovery of keda.sh/v1alpha1 failed: {e}")),
    }
}

fn api_resource(kind: Kind) -> ApiResource {
    let (group, version, kind_name, plural) = match kind {
        Kind::Hpa => (
            "autoscaling",
            "v2",
            "HorizontalPodAutoscaler",
            "horizontalpodautoscalers",
        ),
        Kind::ScaledObject => ("keda.sh", "v1alpha1", "ScaledObject", "scaledobjects"),
    };
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind_name), plural)
}

/// Watches one kind across all namespaces. Returns only for a ScaledObject watch whose API is
/// no longer served; otherwise restarts (with a fresh list) after each failure, with backoff.
async fn watch(index: Arc<Autoscalers>, client: Client, kind: Kind, errors: Counter) {
    let resource = api_resource(kind);
    let mut backoff = DefaultBackoff::default();
    loop {
        let api: Api<Watched> = Api::all_with(client.clone(), &resource);
        let config = watcher::Config::default().timeout(WATCH_TIMEOUT_SECS);
        let mut stream = std::pin::pin!(watcher::watcher(api, config));
        let failure = loop {
            match stream.next().await {
                Some(Ok(event)) => apply(&index, kind, event),
                // 410 Gone: the watcher lists again by itself; the index stays as it is until
                // the new list completes.
                Some(Err(watcher::Error::WatchError(status))) if status.code == 410 => {}
                Some(Err(e)) => break e.to_string(),
                None => break "the watch stream ended".to_owned(),
            }
        };
        errors.inc();
        if kind == Kind::ScaledObject && keda_served(&client).await == Ok(false) {
            report(&index, kind, Sync::NotServed);
            return;
        }
        report(&index, kind, Sync::Unavailable(failure));
        let delay = backoff.next().unwrap_or(Duration::from_secs(30));
        tokio::time::sleep(delay).await;
    }
}

fn apply(index: &Autoscalers, kind: Kind, event: Event<Watched>) {
    match event {
        Event::Init => index.list_started(kind),
        Event::InitApply(w) => index.listed(kind, &w.into_object(kind)),
        Event::InitDone => {
            index.list_done(kind);
            report(index, kind, Sync::Synced);
        }
        Event::Apply(w) => index.apply(kind, &w.into_object(kind)),
        Event::Delete(w) => {
            let o = w.into_object(kind);
            index.delete(kind, &o.namespace, &o.name);
        }
    }
}

/// Sets a kind's state, logging the change once (not every retry of the same failure).
fn report(index: &Autoscalers, kind: Kind, sync: Sync) {
    let previous = index.set_sync(kind, sync.clone());
    if previous == sync {
        return;
    }
    let what = kind.name();
    match sync {
        Sync::Synced => tracing::info!(
            kind = what,
            objects = index.len(kind),
            "autoscaler conflicts: {what}s listed and watched; the rule is checked"
        ),
        Sync::NotServed => tracing::info!(
            kind = what,
            "autoscaler conflicts: the cluster does not serve {what}s (discovery asks again \
             every --autoscaler-discovery-interval)"
        ),
        Sync::Unavailable(why) => tracing::warn!(
            kind = what,
            "autoscaler conflicts are not checked (admitted with a warning) until the {what}s \
             can be read again: {why}"
        ),
        Sync::Starting => {}
    }
}

/// An HPA or ScaledObject with only what the index keeps (`metadata` and `scaleTargetRef`;
/// everything else is skipped by the JSON reader, never stored).
#[derive(Clone, Debug, Deserialize)]
struct Watched {
    #[serde(deserialize_with = "thin_meta")]
    metadata: ObjectMeta,
    #[serde(default)]
    spec: Option<WatchedSpec>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct WatchedSpec {
    #[serde(default)]
    scale_target_ref: Option<TargetRef>,
}

/// `spec.scaleTargetRef` (`CrossVersionObjectReference`, or KEDA's `ScaleTarget`).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TargetRef {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
    #[serde(default)]
    name: String,
}

/// The metadata the watcher and the index read: no labels, annotations or managedFields.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ThinMeta {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    #[serde(default)]
    owner_references: Option<Vec<OwnerReference>>,
}

fn thin_meta<'de, D: serde::Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    let m = ThinMeta::deserialize(d)?;
    Ok(ObjectMeta {
        name: m.name,
        namespace: m.namespace,
        resource_version: m.resource_version,
        owner_references: m.owner_references,
        ..ObjectMeta::default()
    })
}

impl Resource for Watched {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }
    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }
    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }
    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }
    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl Watched {
    fn into_object(self, kind: Kind) -> Object {
        let target = self.spec.and_then(|s| s.scale_target_ref);
        let deployment = target.and_then(|t| {
            let (api_version, target_kind) = match kind {
                // KEDA defaults both (ScaleTarget's kubebuilder defaults and its webhook).
                Kind::ScaledObject => (
                    t.api_version
                        .filter(|v| !v.is_empty())
                        .unwrap_or_else(|| "apps/v1".into()),
                    t.kind
                        .filter(|k| !k.is_empty())
                        .unwrap_or_else(|| "Deployment".into()),
                ),
                Kind::Hpa => (
                    t.api_version.unwrap_or_default(),
                    t.kind.unwrap_or_default(),
                ),
            };
            is_deployment(&api_version, &target_kind).then_some(t.name)
        });
        let controller = match kind {
            Kind::Hpa => controller(
                self.metadata
                    .owner_references
                    .as_deref()
                    .unwrap_or_default(),
            ),
            Kind::ScaledObject => Controller::None,
        };
        Object {
            namespace: self.metadata.namespace.unwrap_or_default(),
            name: self.metadata.name.unwrap_or_default(),
            deployment,
            controller,
        }
    }
}

/// The controller among `ownerReferences`, as the rule tells them apart.
pub(crate) fn controller(owners: &[OwnerReference]) -> Controller {
    let Some(owner) = owners.iter().find(|o| o.controller == Some(true)) else {
        return Controller::None;
    };
    let group = owner.api_version.split_once('/').map_or("", |(g, _)| g);
    match (group, owner.kind.as_str()) {
        (crate::crd::GROUP, crate::crd::KIND) => Controller::Memcached(owner.name.as_str().into()),
        ("keda.sh", "ScaledObject") => Controller::ScaledObject(owner.name.as_str().into()),
        _ => Controller::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(kind: Kind, json: serde_json::Value) -> Object {
        serde_json::from_value::<Watched>(json)
            .unwrap()
            .into_object(kind)
    }

    #[test]
    fn an_hpa_keeps_its_target_and_controller() {
        let o = parse(
            Kind::Hpa,
            serde_json::json!({
                "metadata": {"name": "cache", "namespace": "ns", "resourceVersion": "7",
                    "managedFields": [{"manager": "x"}], "labels": {"a": "b"},
                    "ownerReferences": [
                        {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "1"},
                        {"apiVersion": "memcached.c5c3.io/v1beta1", "kind": "Memcached",
                         "name": "cache", "uid": "2", "controller": true}]},
                "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment",
                    "name": "cache"}, "maxReplicas": 3},
                "status": {"currentReplicas": 1}
            }),
        );
        assert_eq!(o.namespace, "ns");
        assert_eq!(o.name, "cache");
        assert_eq!(o.deployment.as_deref(), Some("cache"));
        assert_eq!(o.controller, Controller::Memcached("cache".into()));
    }

    #[test]
    fn targets_other_than_an_apps_deployment_are_not_kept() {
        let hpa = |api_version: &str, kind: &str| {
            parse(
                Kind::Hpa,
                serde_json::json!({"metadata": {"name": "h", "namespace": "ns"},
                    "spec": {"scaleTargetRef": {"apiVersion": api_version, "kind": kind,
                        "name": "cache"}}}),
            )
            .deployment
        };
        assert_eq!(hpa("apps/v1", "Deployment").as_deref(), Some("cache"));
        assert_eq!(hpa("apps/v1beta2", "Deployment").as_deref(), Some("cache"));
        assert_eq!(hpa("apps/v1", "StatefulSet"), None);
        assert_eq!(hpa("example.com/v1", "Deployment"), None);
        assert_eq!(hpa("", "Deployment"), None);
        let no_spec = parse(Kind::Hpa, serde_json::json!({"metadata": {"name": "h"}}));
        assert_eq!(no_spec.deployment, None);
    }

    #[test]
    fn a_scaled_object_s_target_defaults_to_an_apps_v1_deployment() {
        let so = |target: serde_json::Value| {
            parse(
                Kind::ScaledObject,
                serde_json::json!({"metadata": {"name": "so", "namespace": "ns"},
                    "spec": {"scaleTargetRef": target}}),
            )
            .deployment
        };
        assert_eq!(
            so(serde_json::json!({"name": "cache"})).as_deref(),
            Some("cache")
        );
        assert_eq!(
            so(serde_json::json!({"name": "cache", "kind": "Deployment"})).as_deref(),
            Some("cache")
        );
        assert_eq!(
            so(serde_json::json!({"name": "cache", "kind": "StatefulSet"})),
            None
        );
        assert_eq!(
            so(
                serde_json::json!({"name": "cache", "apiVersion": "argoproj.io/v1alpha1",
                "kind": "Rollout"})
            ),
            None
        );
    }

    #[test]
    fn controllers_are_told_apart() {
        let owner = |api_version: &str, kind: &str, controller: Option<bool>| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "n".into(),
            uid: "u".into(),
            controller,
            ..OwnerReference::default()
        };
        assert_eq!(controller(&[]), Controller::None);
        assert_eq!(
            controller(&[owner("memcached.c5c3.io/v1beta1", "Memcached", None)]),
            Controller::None,
            "an owner that is not the controller does not count"
        );
        assert_eq!(
            controller(&[owner("memcached.c5c3.io/v1alpha1", "Memcached", Some(true))]),
            Controller::Memcached("n".into())
        );
        assert_eq!(
            controller(&[owner("keda.sh/v1alpha1", "ScaledObject", Some(true))]),
            Controller::ScaledObject("n".into())
        );
        assert_eq!(
            controller(&[owner("example.com/v1", "Memcached", Some(true))]),
            Controller::Other
        );
    }
}
