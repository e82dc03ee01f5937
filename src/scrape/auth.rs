//! Who may scrape, asked of the API server as controller-runtime's
//! `filters.WithAuthenticationAndAuthorization` asks it: a TokenReview of the bearer token, then
//! a SubjectAccessReview of that user's `get` on the nonResourceURL `/metrics`. Answers are
//! cached ([`super::cache`]); an API server that cannot answer makes the scrape a 503, never
//! touching readiness or the webhook port.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hyper::HeaderMap;
use hyper::header::AUTHORIZATION;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tokio::sync::{OnceCell, Semaphore};

use super::cache::{self, Cache, Decision};
use crate::autoscalers::watch::{self, Credentials};

/// The one path served, and the nonResourceURL RBAC grants `get` on.
pub const PATH: &str = "/metrics";
/// How long both reviews together may take: within Prometheus's default 10 s scrape timeout,
/// so that a slow API server shows as a 503 with its reason, not as a scrape timeout.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);
/// Reviews in flight at most. A scraper's token is almost always cached; tokens never seen
/// before beyond this get 503 at once, so a flood of them cannot turn into a flood of API calls.
const MAX_REVIEWS: usize = 4;

/// Why a scrape is not answered with the metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization: Bearer` header: 401.
    NoToken,
    /// The TokenReview did not authenticate the token: 401.
    Unauthenticated(String),
    /// The user may not `get /metrics`: 403.
    Forbidden { user: String, reason: String },
    /// The API server could not be asked, or did not answer: 503.
    Unavailable(String),
}

impl Refusal {
    pub fn status(&self) -> u16 {
        match self {
            Refusal::NoToken | Refusal::Unauthenticated(_) => 401,
            Refusal::Forbidden { .. } => 403,
            Refusal::Unavailable(_) => 503,
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NoToken => write!(
                f,
                "Unauthorized: {PATH} needs a bearer token (Authorization: Bearer <token>) of an \
                 account allowed to get {PATH}"
            ),
            Refusal::Unauthenticated(why) if why.is_empty() => {
                write!(
                    f,
                    "Unauthorized: the API server did not authenticate the token"
                )
            }
            Refusal::Unauthenticated(why) => write!(
                f,
                "Unauthorized: the API server did not authenticate the token: {why}"
            ),
            Refusal::Forbidden { user, reason } => {
                write!(
                    f,
                    "Forbidden: user \"{user}\" may not get {PATH} (bind it to the \
                     memcached-webhook-metrics-reader ClusterRole)"
                )?;
                if !reason.is_empty() {
                    write!(f, ": {reason}")?;
                }
                Ok(())
            }
            Refusal::Unavailable(why) => write!(
                f,
                "Service Unavailable: cannot check the scrape's token with the API server: {why}"
            ),
        }
    }
}

impl From<Decision> for Result<(), Refusal> {
    fn from(decision: Decision) -> Self {
        match decision {
            Decision::Allowed => Ok(()),
            Decision::Unauthenticated(why) => Err(Refusal::Unauthenticated(why)),
            Decision::Forbidden { user, reason } => Err(Refusal::Forbidden { user, reason }),
        }
    }
}

/// The API client (built on first use, again after a failure) and the decisions made.
pub struct Auth {
    credentials: Credentials,
    client: OnceCell<kube::Client>,
    cache: Mutex<Cache>,
    reviews: Semaphore,
}

impl Auth {
    pub fn new(credentials: Credentials) -> Self {
        Auth {
            credentials,
            client: OnceCell::new(),
            cache: Mutex::new(Cache::new(cache::CAPACITY)),
            reviews: Semaphore::new(MAX_REVIEWS),
        }
    }

    /// Whether the request's bearer token may `get /metrics`.
    pub async fn check(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let token = bearer(headers).ok_or(Refusal::NoToken)?;
        let key = cache::key(token);
        if let Some(decision) = self.cache().get(&key, Instant::now()) {
            return decision.into();
        }
        let Ok(_permit) = self.reviews.try_acquire() else {
            return Err(Refusal::Unavailable(format!(
                "{MAX_REVIEWS} reviews of other tokens are in flight; try again"
            )));
        };
        let decision = tokio::time::timeout(REVIEW_TIMEOUT, self.review(token))
            .await
            .map_err(|_| {
                Refusal::Unavailable(format!(
                    "no answer from the API server within {REVIEW_TIMEOUT:?}"
                ))
            })??;
        self.cache().insert(key, decision.clone(), Instant::now());
        decision.into()
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        // Nothing panics while holding it; a poisoned cache is still a valid cache.
        self.cache.lock().unwrap_or_else(|e| e.into_inner())
    }

    async fn review(&self, token: &str) -> Result<Decision, Refusal> {
        let client = self
            .client
            .get_or_try_init(|| watch::client(&self.credentials))
            .await
            .map_err(|e| Refusal::Unavailable(e.clone()))?;
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_owned(),
                audiences: None,
            },
            ..Default::default()
        };
        let review = Api::<TokenReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| unavailable("TokenReview", e))?;
        let status = review.status.unwrap_or_default();
        if status.authenticated != Some(true) {
            return Ok(Decision::Unauthenticated(status.error.unwrap_or_default()));
        }
        let user = status.user.unwrap_or_default();
        let username = user.username.clone().unwrap_or_default();
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(PATH.to_owned()),
                    verb: Some("get".to_owned()),
                }),
                resource_attributes: None,
            },
            ..Default::default()
        };
        let access = Api::<SubjectAccessReview>::all(client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|e| unavailable("SubjectAccessReview", e))?;
        let status = access.status.unwrap_or_default();
        if status.allowed {
            return Ok(Decision::Allowed);
        }
        let reason = [status.reason, status.evaluation_error]
            .into_iter()
            .flatten()
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join("; ");
        Ok(Decision::Forbidden {
            user: username,
            reason,
        })
    }
}

/// A review the API server did not answer: what it said, or why it could not be reached.
fn unavailable(what: &str, e: kube::Error) -> Refusal {
    Refusal::Unavailable(match e {
        kube::Error::Api(status) => format!(
            "the API server refused the {what} ({}): {}",
            status.code, status.message
        ),
        e => {
            // kube's own message ends at "client error (Connect)": the causes say which.
            let mut message = format!("the {what} failed: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                let cause_text = cause.to_string();
                if !message.ends_with(&cause_text) {
                    message.push_str(": ");
                    message.push_str(&cause_text);
                }
                source = cause.source();
            }
            message
        }
    })
}

/// The token of `Authorization: Bearer <token>`, as the API server's own bearer-token
/// authenticator reads it (scheme case-insensitive, surrounding spaces ignored).
fn bearer(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim_start();
    let token = token.split(' ').next().unwrap_or_default();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(value: &'static str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_static(value));
        headers
    }

    #[test]
    fn bearer_tokens_are_read_as_the_api_server_reads_them() {
        assert_eq!(bearer(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer(&headers("Basic abc")), None);
        assert_eq!(bearer(&headers("Bearer")), None);
        assert_eq!(bearer(&headers("Bearer ")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[tokio::test]
    async fn no_token_is_401_before_any_api_call() {
        // A kubeconfig that does not exist: any API call would be a 503 naming it.
        let auth = Auth::new(Credentials::Kubeconfig("/nonexistent/kubeconfig".into()));
        let refusal = auth.check(&HeaderMap::new()).await.unwrap_err();
        assert_eq!(refusal, Refusal::NoToken);
        assert_eq!(refusal.status(), 401);
        let refusal = auth.check(&headers("Bearer abc")).await.unwrap_err();
        assert_eq!(refusal.status(), 503, "{refusal}");
        assert!(
            refusal.to_string().contains("/nonexistent/kubeconfig"),
            "{refusal}"
        );
        assert!(
            auth.cache().is_empty(),
            "an unanswered review is not cached"
        );
    }

    #[test]
    fn refusals_say_what_to_do() {
        let forbidden = Refusal::Forbidden {
            user: "system:serviceaccount:monitoring:prometheus".into(),
            reason: String::new(),
        };
        assert_eq!(forbidden.status(), 403);
        assert!(
            forbidden
                .to_string()
                .contains("\"system:serviceaccount:monitoring:prometheus\" may not get /metrics"),
            "{forbidden}"
        );
        assert!(forbidden.to_string().contains("metrics-reader"));
        assert_eq!(Refusal::Unauthenticated(String::new()).status(), 401);
    }
}
