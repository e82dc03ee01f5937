//! What else scales a Memcached's Deployment: the cluster's HorizontalPodAutoscalers and KEDA
//! ScaledObjects aimed at an `apps` Deployment, indexed by (namespace, Deployment name) with only
//! what the autoscaler-conflict rule reads. [`watch`] fills it; a review only looks it up.
//!
//! Memory: about 350 bytes per indexed object with 20-character names (its name twice, its
//! target's name twice, a controller's name, map slots and headers; namespaces are shared):
//! 10,000 HPAs take 3.3 MiB (`tests/index_memory.rs`, which holds it to 8 MiB). A re-list
//! holds a second copy until it completes. Objects aimed at anything but an `apps` Deployment
//! are not kept.

pub mod watch;

use foldhash::HashMap;
use std::sync::{Mutex, RwLock};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::metrics::Labels;

/// The kinds of autoscaler the index holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// `autoscaling/v2` HorizontalPodAutoscaler.
    Hpa,
    /// `keda.sh/v1alpha1` ScaledObject.
    ScaledObject,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Hpa, Kind::ScaledObject];

    /// The kind as the API names it.
    pub const fn name(self) -> &'static str {
        match self {
            Kind::Hpa => "HorizontalPodAutoscaler",
            Kind::ScaledObject => "ScaledObject",
        }
    }

    /// The `kind` label of the metrics.
    pub const fn label(self) -> &'static str {
        match self {
            Kind::Hpa => "horizontalpodautoscaler",
            Kind::ScaledObject => "scaledobject",
        }
    }
}

/// An HPA's controller (`metadata.ownerReferences[]` with `controller: true`), as far as the rule
/// cares: the operator's own HPA is controlled by a Memcached, KEDA's by its ScaledObject.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Controller {
    /// No controller: the operator adopts an HPA of its Memcached's name.
    None,
    /// A `memcached.c5c3.io` Memcached of this name.
    Memcached(Box<str>),
    /// A `keda.sh` ScaledObject of this name: the HPA is that ScaledObject's.
    ScaledObject(Box<str>),
    /// Anything else.
    Other,
}

/// One object as the index keeps it: only what the rule reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    pub namespace: String,
    pub name: String,
    /// `spec.scaleTargetRef.name`, when the reference is to an `apps` Deployment (kind
    /// `Deployment`, apiVersion `apps/*`; a ScaledObject's kind and apiVersion default to
    /// those); `None` for any other target.
    pub deployment: Option<String>,
    /// Only HPAs have one here (a ScaledObject's controller does not matter).
    pub controller: Controller,
}

/// Whether a `scaleTargetRef` names an `apps` Deployment (`apps/v1`, or any other `apps`
/// version a cluster may serve).
pub fn is_deployment(api_version: &str, kind: &str) -> bool {
    kind == "Deployment"
        && api_version
            .split_once('/')
            .is_some_and(|(g, _)| g == "apps")
}

/// Another autoscaler of a Deployment, as a lookup reports it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Found {
    pub kind: Kind,
    pub name: String,
    pub controller: Controller,
}

/// An entry under its target: the object's name and controller.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Entry {
    name: Box<str>,
    controller: Controller,
}

/// One kind's objects: by target for lookups, by name for updates and deletions.
#[derive(Debug, Default)]
struct Objects {
    /// namespace → Deployment name → the autoscalers aimed at it (usually one).
    by_target: HashMap<Box<str>, HashMap<Box<str>, Vec<Entry>>>,
    /// namespace → object name → Deployment name.
    by_name: HashMap<Box<str>, HashMap<Box<str>, Box<str>>>,
    len: usize,
}

impl Objects {
    fn get(&self, namespace: &str, name: &str) -> Option<(&str, &Entry)> {
        let target = self.by_name.get(namespace)?.get(name)?;
        let entry = self
            .by_target
            .get(namespace)?
            .get(target)?
            .iter()
            .find(|e| &*e.name == name)?;
        Some((target, entry))
    }

    /// Applies an added or modified object; `false` when nothing the index keeps changed.
    fn apply(&mut self, o: &Object) -> bool {
        let current = self.get(&o.namespace, &o.name);
        match (&o.deployment, current) {
            (Some(d), Some((target, entry)))
                if target == d.as_str() && entry.controller == o.controller =>
            {
                return false;
            }
            (None, None) => return false,
            _ => {}
        }
        self.remove(&o.namespace, &o.name);
        if let Some(deployment) = &o.deployment {
            self.by_target
                .entry(o.namespace.as_str().into())
                .or_default()
                .entry(deployment.as_str().into())
                .or_default()
                .push(Entry {
                    name: o.name.as_str().into(),
                    controller: o.controller.clone(),
                });
            self.by_name
                .entry(o.namespace.as_str().into())
                .or_default()
                .insert(o.name.as_str().into(), deployment.as_str().into());
            self.len += 1;
        }
        true
    }

    /// Removes an object; `false` when it was not there.
    fn remove(&mut self, namespace: &str, name: &str) -> bool {
        let Some(names) = self.by_name.get_mut(namespace) else {
            return false;
        };
        let Some(target) = names.remove(name) else {
            return false;
        };
        if names.is_empty() {
            self.by_name.remove(namespace);
        }
        if let Some(targets) = self.by_target.get_mut(namespace) {
            if let Some(entries) = targets.get_mut(&target) {
                entries.retain(|e| &*e.name != name);
                if entries.is_empty() {
                    targets.remove(&target);
                }
            }
            if targets.is_empty() {
                self.by_target.remove(namespace);
            }
        }
        self.len -= 1;
        true
    }

    fn aimed_at(&self, namespace: &str, deployment: &str) -> &[Entry] {
        self.by_target
            .get(namespace)
            .and_then(|t| t.get(deployment))
            .map_or(&[], Vec::as_slice)
    }
}

/// The index's metrics (registered by [`crate::metrics`]), by [`Kind`] where per kind.
#[derive(Clone, Debug, Default)]
pub struct Stats {
    /// Reviews admitted without the rule because the index could not be trusted.
    pub unchecked: Counter,
    /// Objects in the index.
    pub objects: [Gauge; 2],
    /// 1 when synced or not served.
    pub synced: [Gauge; 2],
    /// Failed lists, watches and discoveries.
    pub watch_errors: [Counter; 2],
}

impl Stats {
    /// The index's and the watch's metrics, a series per kind created up front.
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let by_kind = |family: &Family<Labels, Gauge>| {
            Kind::ALL.map(|k| family.get_or_create(&vec![("kind", k.label())]).clone())
        };
        let objects = Family::<Labels, Gauge>::default();
        let synced = Family::<Labels, Gauge>::default();
        let watch_errors = Family::<Labels, Counter>::default();
        let stats = Stats {
            objects: by_kind(&objects),
            synced: by_kind(&synced),
            watch_errors: Kind::ALL.map(|k| {
                watch_errors
                    .get_or_create(&vec![("kind", k.label())])
                    .clone()
            }),
            ..Stats::default()
        };
        registry.register(
            "memcached_webhook_autoscaler_conflicts_unchecked",
            "Validations admitted without the autoscaler-conflict rule because the index could \
             not be trusted (not listed yet, API server unreachable or forbidden)",
            stats.unchecked.clone(),
        );
        registry.register(
            "memcached_webhook_autoscaler_index_objects",
            "HPAs and ScaledObjects aimed at an apps Deployment, in the index, by kind",
            objects,
        );
        registry.register(
            "memcached_webhook_autoscaler_watch_synced",
            "1 when the kind is listed and watched (or not served by the cluster), else 0",
            synced,
        );
        registry.register(
            "memcached_webhook_autoscaler_watch_errors",
            "Failed lists, watches and discoveries of the autoscaler watch, by kind",
            watch_errors,
        );
        stats
    }
}

/// Where one kind's watch stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Sync {
    /// The first list has not completed.
    Starting,
    /// Listed and watching: the index is the cluster's state.
    Synced,
    /// The API server cannot be read (unreachable, forbidden, ...): why, for the warning.
    Unavailable(String),
    /// The cluster does not serve the API (no KEDA): nothing of this kind can conflict.
    NotServed,
}

/// The answer to a lookup.
#[derive(Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The index is the cluster's state; these other autoscalers aim at the Deployment (sorted,
    /// usually none: then nothing is allocated).
    Checked(Vec<Found>),
    /// The index cannot be trusted now; why.
    Unchecked(String),
}

#[derive(Debug)]
struct State {
    objects: [Objects; 2],
    sync: [Sync; 2],
}

/// The index, shared by the watch (writer) and the reviews (readers).
#[derive(Debug)]
pub struct Autoscalers {
    state: RwLock<State>,
    /// Objects of a list in progress, per kind: swapped in whole when the list completes, so a
    /// re-list (after 410 Gone) never shows a half-filled index.
    relist: [Mutex<Option<Objects>>; 2],
    pub stats: Stats,
}

impl Default for Autoscalers {
    fn default() -> Self {
        Autoscalers::new(Stats::default())
    }
}

impl Autoscalers {
    pub fn new(stats: Stats) -> Self {
        Autoscalers {
            state: RwLock::new(State {
                objects: [Objects::default(), Objects::default()],
                sync: [Sync::Starting, Sync::Starting],
            }),
            relist: [Mutex::new(None), Mutex::new(None)],
            stats,
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, State> {
        // A panic while writing leaves maps that are still consistent (each change is one
        // insert or remove), so a poisoned lock is used as is.
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// An added or modified object (a watch's `ADDED`/`MODIFIED`).
    pub fn apply(&self, kind: Kind, o: &Object) {
        // Most events are status updates that change nothing kept here: decided under the
        // read lock, so reviews never wait for them.
        {
            let state = self.read();
            let objects = &state.objects[kind as usize];
            let unchanged = match (&o.deployment, objects.get(&o.namespace, &o.name)) {
                (Some(d), Some((t, e))) => t == d.as_str() && e.controller == o.controller,
                (None, None) => true,
                _ => false,
            };
            if unchanged {
                return;
            }
        }
        let mut state = self.write();
        state.objects[kind as usize].apply(o);
        self.count(kind, &state);
    }

    fn count(&self, kind: Kind, state: &State) {
        self.stats.objects[kind as usize].set(state.objects[kind as usize].len as i64);
    }

    /// A deleted object (`DELETED`).
    pub fn delete(&self, kind: Kind, namespace: &str, name: &str) {
        let mut state = self.write();
        state.objects[kind as usize].remove(namespace, name);
        self.count(kind, &state);
    }

    /// A list starts (the first, or a re-list): its objects are collected aside.
    pub fn list_started(&self, kind: Kind) {
        *lock(&self.relist[kind as usize]) = Some(Objects::default());
    }

    /// An object of the list in progress.
    pub fn listed(&self, kind: Kind, o: &Object) {
        lock(&self.relist[kind as usize])
            .get_or_insert_with(Objects::default)
            .apply(o);
    }

    /// The list completed: its objects replace the kind's, and the kind is synced.
    pub fn list_done(&self, kind: Kind) {
        let listed = lock(&self.relist[kind as usize]).take().unwrap_or_default();
        let mut state = self.write();
        state.objects[kind as usize] = listed;
        state.sync[kind as usize] = Sync::Synced;
        self.count(kind, &state);
        self.stats.synced[kind as usize].set(1);
    }

    /// Sets a kind's state; returns the previous one. `NotServed` also empties the kind.
    pub fn set_sync(&self, kind: Kind, sync: Sync) -> Sync {
        let mut state = self.write();
        if sync == Sync::NotServed {
            state.objects[kind as usize] = Objects::default();
            self.count(kind, &state);
        }
        let ok = matches!(sync, Sync::Synced | Sync::NotServed);
        self.stats.synced[kind as usize].set(i64::from(ok));
        std::mem::replace(&mut state.sync[kind as usize], sync)
    }

    pub fn sync(&self, kind: Kind) -> Sync {
        self.read().sync[kind as usize].clone()
    }

    /// How many objects of a kind are indexed.
    pub fn len(&self, kind: Kind) -> usize {
        self.read().objects[kind as usize].len
    }

    pub fn is_empty(&self) -> bool {
        Kind::ALL.iter().all(|&k| self.len(k) == 0)
    }

    /// The autoscalers aimed at `apps` Deployment `namespace/deployment`, or why the index
    /// cannot say. No allocation when there are none.
    pub fn lookup(&self, namespace: &str, deployment: &str) -> Lookup {
        let state = self.read();
        for kind in Kind::ALL {
            let why = match &state.sync[kind as usize] {
                Sync::Synced | Sync::NotServed => continue,
                Sync::Starting => format!("the {}s of the cluster are not listed yet", kind.name()),
                Sync::Unavailable(reason) => {
                    format!("the {}s cannot be read: {reason}", kind.name())
                }
            };
            return Lookup::Unchecked(why);
        }
        let mut found = Vec::new();
        for kind in Kind::ALL {
            for e in state.objects[kind as usize].aimed_at(namespace, deployment) {
                found.push(Found {
                    kind,
                    name: e.name.to_string(),
                    controller: e.controller.clone(),
                });
            }
        }
        found.sort();
        Lookup::Checked(found)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
