//! The scrape decisions of the last minute, so that a Prometheus scraping every 15 s costs the
//! API server one TokenReview and one SubjectAccessReview a minute, not two calls a scrape.
//! Keyed by the token's SHA-256 (the token itself is never kept), bounded in entries.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long an allowed decision is reused: controller-runtime's authentication cache keeps a
/// token's review for a minute too. A revoked token or binding stops working within it.
pub const ALLOWED_TTL: Duration = Duration::from_secs(60);
/// How long a refusal (401 or 403) is reused: short, so that a binding just created takes
/// effect within seconds, yet a client retrying a bad token in a loop costs nothing.
pub const DENIED_TTL: Duration = Duration::from_secs(10);
/// Entries at most: a handful of scrapers each hold one; the rest is room for refusals.
pub const CAPACITY: usize = 256;

/// A token's SHA-256.
pub type Key = [u8; 32];

pub fn key(token: &str) -> Key {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    let mut key = [0; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

/// What the API server said about a token's right to `get /metrics`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// The TokenReview did not authenticate it (the API server's error, if it gave one).
    Unauthenticated(String),
    /// Authenticated as `user`, whom the SubjectAccessReview did not allow (its reason).
    Forbidden {
        user: String,
        reason: String,
    },
}

impl Decision {
    fn ttl(&self) -> Duration {
        match self {
            Decision::Allowed => ALLOWED_TTL,
            Decision::Unauthenticated(_) | Decision::Forbidden { .. } => DENIED_TTL,
        }
    }
}

/// Decisions by token, each until it expires. Times are passed in, so tests need no clock.
#[derive(Debug)]
pub struct Cache {
    entries: HashMap<Key, (Decision, Instant)>,
    capacity: usize,
}

impl Cache {
    pub fn new(capacity: usize) -> Self {
        Cache {
            entries: HashMap::with_capacity(capacity),
            capacity,
        }
    }

    /// The decision for `key`, unless there is none or it has expired at `now`.
    pub fn get(&mut self, key: &Key, now: Instant) -> Option<Decision> {
        match self.entries.get(key) {
            Some((decision, expires)) if now < *expires => Some(decision.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Stores `decision`, made at `now`, for as long as its kind is reused. When full, expired
    /// entries go first, then the one that would expire soonest: refusals before the scrapers'
    /// allowed decisions, so a flood of bad tokens does not push Prometheus's out.
    pub fn insert(&mut self, key: Key, decision: Decision, now: Instant) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            self.entries.retain(|_, (_, expires)| now < *expires);
            if self.entries.len() >= self.capacity {
                let soonest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(key, _)| *key);
                if let Some(soonest) = soonest {
                    self.entries.remove(&soonest);
                }
            }
        }
        let expires = now + decision.ttl();
        self.entries.insert(key, (decision, expires));
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forbidden() -> Decision {
        Decision::Forbidden {
            user: "system:serviceaccount:x:y".into(),
            reason: String::new(),
        }
    }

    #[test]
    fn an_allowed_decision_is_reused_until_it_expires() {
        let mut cache = Cache::new(4);
        let t0 = Instant::now();
        cache.insert(key("a"), Decision::Allowed, t0);
        assert_eq!(cache.get(&key("a"), t0), Some(Decision::Allowed));
        let before = t0 + ALLOWED_TTL - Duration::from_millis(1);
        assert_eq!(cache.get(&key("a"), before), Some(Decision::Allowed));
        assert_eq!(cache.get(&key("a"), t0 + ALLOWED_TTL), None);
        assert!(cache.is_empty(), "an expired entry is dropped when found");
        assert_eq!(cache.get(&key("b"), t0), None);
    }

    #[test]
    fn refusals_are_cached_too_but_shorter() {
        assert!(DENIED_TTL < ALLOWED_TTL);
        let mut cache = Cache::new(4);
        let t0 = Instant::now();
        cache.insert(key("bad"), Decision::Unauthenticated("expired".into()), t0);
        cache.insert(key("stranger"), forbidden(), t0);
        let within = t0 + DENIED_TTL - Duration::from_millis(1);
        assert_eq!(
            cache.get(&key("bad"), within),
            Some(Decision::Unauthenticated("expired".into()))
        );
        assert_eq!(cache.get(&key("stranger"), within), Some(forbidden()));
        let after = t0 + DENIED_TTL;
        assert_eq!(cache.get(&key("bad"), after), None);
        assert_eq!(cache.get(&key("stranger"), after), None);
    }

    #[test]
    fn the_bound_holds_and_refusals_go_before_allowed_decisions() {
        let mut cache = Cache::new(3);
        let t0 = Instant::now();
        cache.insert(key("prometheus"), Decision::Allowed, t0);
        for i in 0..100 {
            let at = t0 + Duration::from_millis(i);
            cache.insert(key(&format!("garbage-{i}")), forbidden(), at);
            assert!(cache.len() <= 3, "{} entries", cache.len());
        }
        let now = t0 + Duration::from_millis(100);
        assert_eq!(cache.get(&key("prometheus"), now), Some(Decision::Allowed));
        assert_eq!(cache.get(&key("garbage-99"), now), Some(forbidden()));
        assert_eq!(cache.get(&key("garbage-0"), now), None, "evicted first");
    }

    #[test]
    fn a_full_cache_drops_expired_entries_first_and_replaces_in_place() {
        let mut cache = Cache::new(2);
        let t0 = Instant::now();
        cache.insert(key("old"), forbidden(), t0);
        cache.insert(key("kept"), Decision::Allowed, t0);
        let later = t0 + DENIED_TTL;
        cache.insert(key("kept"), Decision::Allowed, later);
        assert_eq!(cache.len(), 2, "a key stored again replaces its entry");
        cache.insert(key("new"), forbidden(), later);
        assert_eq!(cache.len(), 2);
        assert_eq!(cache.get(&key("kept"), later), Some(Decision::Allowed));
        assert_eq!(cache.get(&key("new"), later), Some(forbidden()));
    }

    #[test]
    fn keys_are_the_token_s_sha256() {
        assert_eq!(
            key("abc")[..4],
            [0xba, 0x78, 0x16, 0xbf],
            "SHA-256(\"abc\") starts ba7816bf"
        );
        assert_ne!(key("a"), key("b"));
    }
}
