//! The names of the custom resource the webhooks serve: its API group, kind and plural.
//! They live apart from [`crate::memcached`] (the resource's view and rules) so that the cluster
//! watch ([`crate::autoscalers`]), which the rules read, can name the resource without importing
//! the rules back: every arrow points one way.

/// The API group the webhooks serve.
pub const GROUP: &str = "memcached.c5c3.io";
/// The kind the webhooks serve.
pub const KIND: &str = "Memcached";
/// The resource (plural) the webhook configurations and policies name.
pub const RESOURCE: &str = "memcacheds";
