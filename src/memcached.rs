//! The Memcached resource (`memcached.c5c3.io/v1beta1`) as the webhooks see it: a borrowed view
//! of just the fields the defaulting and validation rules read (`memcached/view.rs`), built in one
//! pass over the tape (`memcached/read.rs`). Everything else in the object (metadata, status, unknown fields) is
//! skipped, never copied. The rules live beside it: [`defaults`] and [`validate`].

pub mod defaults;
pub mod duration;
pub mod image;
pub mod quantity;
mod read;
pub mod validate;
mod view;

pub use read::{Malformed, read};
pub use view::{
    Autoscaling, GracefulShutdown, HighAvailability, IntOrString, Memcached, MemcachedConfig,
    Monitoring, PodDisruptionBudget, READ, Requested, Resources, SecretFeature, Security,
    ServiceMonitor, Spec,
};

/// The resource's names, kept in [`crate::crd`] (which the autoscaler watch reads too).
pub use crate::crd::{GROUP, KIND};
