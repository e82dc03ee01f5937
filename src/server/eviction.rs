//! Which connection gives way when the webhook port runs short, and how its deadlines shrink
//! as it fills: the policy, as plain functions over what a connection is doing. `slots` applies
//! it; nothing here touches a socket.
//!
//! The order is by worth to the API server, as Envoy's overload manager and nginx do it, not first
//! come first served: a connection in the middle of a review is never cut. First go the connections
//! no client's pool keeps like this (longest first: a flood's): one idle since its handshake or
//! with a request head arriving, for [`SLOW_REQUEST`]. Then a keep-alive that answered a single
//! request (a flood that sends one review per connection), then a newcomer (one just done with its
//! handshake, then one in it, oldest first: perhaps the API server's own dial), then a reused
//! keep-alive (longest idle first: the bottom of a LIFO pool like Go's, the least likely to be
//! reused in the instant of its close, `close`), last a head that has just begun (its client
//! writing a request: answered first, `conn`). While newcomers hold half the slots, they go before
//! every keep-alive. Of the connections no pool has reused yet, those of the address holding the
//! most such go first: a flood from one address gives way to itself, not the API server's parked
//! dial that looks like it (spread over many addresses, a flood meets the order above alone). When
//! every slot holds a review in service, the longest in service is asked to close after its answer.
//! A connection that has sent no byte holds no slot at all; past its own ceiling the oldest such
//! one is closed.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// What a connection is doing (the `state` label of `memcached_webhook_connections`, with
/// `Reading` and `Busy` both shown as `active`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Phase {
    /// Accepted, no slot: waiting for its first bytes, or for a slot after them.
    PreHandshake = 0,
    /// In a slot, in the TLS handshake.
    Handshaking = 1,
    /// Between requests (or before the first one).
    Idle = 2,
    /// An HTTP/1 request head is arriving: not yet a request in service.
    Reading = 3,
    /// At least one request in service (its body may still be arriving).
    Busy = 4,
}

impl Phase {
    /// Its index among the gauge's `state` labels: `Reading` and `Busy` are both `active`.
    pub(crate) fn gauge(self) -> usize {
        match self {
            Phase::PreHandshake => 0,
            Phase::Handshaking => 1,
            Phase::Idle => 2,
            Phase::Reading | Phase::Busy => 3,
        }
    }

    pub(crate) fn from_u8(v: u8) -> Phase {
        match v {
            0 => Phase::PreHandshake,
            1 => Phase::Handshaking,
            2 => Phase::Idle,
            3 => Phase::Reading,
            _ => Phase::Busy,
        }
    }
}

/// Why a connection was closed to make room (the `reason` label of
/// `memcached_webhook_connection_evictions_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reason {
    /// A keep-alive connection between requests, after at least one answered request.
    Idle = 0,
    /// A connection in a slot that has not completed a request: handshaking, never sent one,
    /// or a request head still arriving.
    Incomplete = 1,
    /// Past `--max-pre-handshake-connections`: no slot, no TLS state.
    PreHandshake = 2,
    /// Every slot held a request in service: asked to close after its answer (not cut).
    Busy = 3,
}

/// What the policy sees of a connection holding a slot. Times are microseconds on one clock
/// (milliseconds tie: a client on loopback finishes two requests in one).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Candidate {
    pub phase: Phase,
    /// Requests in service: never cut while there are any.
    pub in_flight: usize,
    /// Requests it has answered, counted up to [`Uses::Reused`].
    pub uses: Uses,
    /// When the current phase began (for a handshake: when it took its slot).
    pub since_us: u64,
    /// Already told to go: not chosen twice.
    pub evicting: bool,
    /// Already asked to close after its answer: not asked twice.
    pub asked: bool,
    /// The client's address (an IPv4-mapped one as IPv4), as the server sees it: behind a
    /// Service, kube-proxy's DNAT keeps it, or masquerades it as the client's node's.
    pub source: IpAddr,
}

/// How many requests a connection has answered, as far as the policy tells them apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Uses {
    None,
    Once,
    /// Twice or more: reused, as a client's pool reuses its connections.
    Reused,
}

impl Uses {
    pub(crate) fn from_u8(v: u8) -> Uses {
        match v {
            0 => Uses::None,
            1 => Uses::Once,
            _ => Uses::Reused,
        }
    }
}

/// How long a client that means to send a request may leave a slot waiting for it before the
/// connection ranks with a flood's: from its handshake to its first request, and from a head's
/// first byte to its last. A client writes its request right after its handshake (the API
/// server's parked dials aside: they wait here after this), and a head in one go; its segments
/// arrive within a round trip. Closing a head is gentle anyway: it is answered first if it
/// arrives within 1 s (`conn`).
pub(crate) const SLOW_REQUEST: Duration = Duration::from_millis(50);

/// Where a connection stands in the eviction order, by what it is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Idle since its handshake, or a head arriving, for [`SLOW_REQUEST`].
    Spent,
    /// Idle after its only answer.
    Once,
    /// Unused since its handshake, for less than [`SLOW_REQUEST`]: its request is due.
    Unused,
    /// In its TLS handshake.
    Handshake,
    /// Idle after its second answer or later.
    Reused,
    /// A head that has just begun.
    FreshHead,
}

/// The order, lowest first, while newcomers are few, and while they hold half the slots. A
/// newcomer is worth more than a keep-alive that answered once: a client that dials per request
/// (or the API server's new dial) must get in under a flood that sends one review per
/// connection, and a cut handshake fails its request for sure (its client may have sent its
/// request with its last handshake bytes) while a reset keep-alive costs one only if its client
/// takes it in the reset's flight. But when newcomers hold half the slots, they are a flood of
/// handshakes: then they give way to one another and a pool's connections are kept, as they are
/// before a reused keep-alive always. Closing a keep-alive may meet a request its client is
/// writing (`close`). Of newcomers, one done with its handshake goes before one in it: a
/// client's request follows at once, and under a flood of handshakes the API server's own
/// dials are among those in it, however long the starved server takes over them.
const FEW: [Class; 6] = [
    Class::Spent,
    Class::Once,
    Class::Unused,
    Class::Handshake,
    Class::Reused,
    Class::FreshHead,
];
const CROWD: [Class; 6] = [
    Class::Spent,
    Class::Unused,
    Class::Handshake,
    Class::Once,
    Class::Reused,
    Class::FreshHead,
];

/// The class at `now_us`: `None` for a connection that is never cut to make room.
fn class(c: &Candidate, now_us: u64) -> Option<Class> {
    if c.evicting || c.in_flight > 0 {
        return None;
    }
    let age = Duration::from_micros(now_us.saturating_sub(c.since_us));
    Some(match (c.phase, c.uses) {
        (Phase::Busy | Phase::PreHandshake, _) => return None,
        (Phase::Idle, Uses::None) | (Phase::Reading, _) if age >= SLOW_REQUEST => Class::Spent,
        (Phase::Idle, Uses::Once) => Class::Once,
        (Phase::Idle, Uses::None) => Class::Unused,
        (Phase::Handshaking, _) => Class::Handshake,
        (Phase::Idle, Uses::Reused) => Class::Reused,
        // Most likely its client writing a request now: last, as old as the head.
        (Phase::Reading, _) => Class::FreshHead,
    })
}

impl Class {
    /// No pool has reused it yet: what a flood's connections are, whatever they do.
    fn unproven(self) -> bool {
        matches!(
            self,
            Class::Spent | Class::Once | Class::Unused | Class::Handshake
        )
    }
}

/// The address holding the most of `sources` (slots), and how many: what the pressure log names,
/// so that an operator sees whose flood it is.
pub(crate) fn busiest(sources: impl IntoIterator<Item = IpAddr>) -> Option<(IpAddr, usize)> {
    let mut held: HashMap<IpAddr, usize> = HashMap::new();
    for source in sources {
        *held.entry(source).or_default() += 1;
    }
    held.into_iter().max_by_key(|&(_, n)| n)
}

fn tier(order: &[Class; 6], class: Class) -> usize {
    order
        .iter()
        .position(|&c| c == class)
        .unwrap_or(order.len())
}

/// The connection to close so a new one gets a slot, and why; `None` when every slot holds a
/// request in service (or one already closing), and the newcomer must wait. Of the connections
/// no pool has reused yet (the classes before [`Class::Reused`]), those of the address that
/// holds the most such go first, in the class order among themselves: a flood from one address
/// gives way to itself, and the API server's parked dial (unused, like the flood's) stays while
/// the flood holds any. Of two ranked alike, the first given goes (`slots` gives them in the
/// order they were accepted).
pub(crate) fn victim<K>(
    candidates: impl IntoIterator<Item = (K, Candidate)>,
    now_us: u64,
) -> Option<(K, Reason)> {
    let (mut slots, mut newcomers) = (0usize, 0usize);
    let mut unproven: HashMap<IpAddr, usize> = HashMap::new();
    let ranked: Vec<(K, Class, IpAddr, u64)> = candidates
        .into_iter()
        .filter_map(|(k, c)| {
            slots += usize::from(c.phase != Phase::PreHandshake && !c.evicting);
            let class = class(&c, now_us)?;
            newcomers += usize::from(matches!(class, Class::Unused | Class::Handshake));
            if class.unproven() {
                *unproven.entry(c.source).or_default() += 1;
            }
            Some((k, class, c.source, c.since_us))
        })
        .collect();
    let order = if newcomers * 2 >= slots { &CROWD } else { &FEW };
    let (k, class, ..) = ranked
        .into_iter()
        .min_by_key(|(_, class, source, since_us)| {
            let crowd = if class.unproven() {
                unproven[source]
            } else {
                0
            };
            let later = usize::from(!class.unproven());
            (later, Reverse(crowd), tier(order, *class), *since_us)
        })?;
    let reason = match class {
        Class::Once | Class::Reused => Reason::Idle,
        _ => Reason::Incomplete,
    };
    Some((k, reason))
}

/// When [`victim`] found none: the connection to ask to close after its answer (its slot frees
/// then, race-free), the longest in service first; `None` when each is already asked or going.
pub(crate) fn close_after_answer<K>(
    candidates: impl IntoIterator<Item = (K, Candidate)>,
) -> Option<K> {
    candidates
        .into_iter()
        .filter(|(_, c)| c.in_flight > 0 && !c.evicting && !c.asked)
        .min_by_key(|(_, c)| c.since_us)
        .map(|(k, _)| k)
}

/// Whether a connection told to go whose HTTP/1 request head is arriving is answered first
/// (`Connection: close`; cut if not in service within a second) rather than cut. Always when
/// it was chosen between requests: its client took it for a request in the instant the server
/// chose it, the race `close` is about, and the request was sent. One chosen with its head
/// already arriving only while at most an eighth of the slots (`leaving` of `capacity`) linger
/// so, which bounds what a churning flood of slow heads holds.
pub(crate) fn answers_head(
    told_in: Phase,
    leaving: impl FnOnce() -> usize,
    capacity: usize,
) -> bool {
    told_in != Phase::Reading || leaving() <= capacity.div_ceil(8)
}

/// Occupancy (0 to 1) above which deadlines start to shrink.
pub(crate) const SHRINK_FROM: f64 = 0.5;
/// Deadlines at full occupancy, as a fraction of the configured ones.
pub(crate) const SHRINK_TO: f64 = 0.1;
/// No deadline shrinks below this (or below its configured value, if that is lower): a
/// ClientHello and a request head take milliseconds, an apiserver under load may take longer.
/// (A TLS handshake in a slot does not shrink at all: `conn`.)
pub(crate) const FLOOR: Duration = Duration::from_secs(1);

/// Envoy's `reduce_timeouts`: 1 up to [`SHRINK_FROM`] occupancy, then linearly down to
/// [`SHRINK_TO`] when every slot is taken; back up as occupancy falls.
pub(crate) fn factor(occupancy: f64) -> f64 {
    let o = occupancy.clamp(0.0, 1.0);
    if o <= SHRINK_FROM {
        1.0
    } else {
        1.0 - (1.0 - SHRINK_TO) * (o - SHRINK_FROM) / (1.0 - SHRINK_FROM)
    }
}

/// A configured deadline at `factor`, never below [`FLOOR`] unless configured lower.
pub(crate) fn scaled(configured: Duration, factor: f64) -> Duration {
    configured
        .mul_f64(factor.clamp(SHRINK_TO, 1.0))
        .max(FLOOR.min(configured))
}

/// File descriptors kept out of the pre-handshake ceiling: listeners, the certificate watch,
/// /proc reads for metrics, the health and metrics ports' connections.
pub(crate) const FD_RESERVE: u64 = 64;
/// The default ceiling's upper bound, for memory: each such connection costs 0.7-1.7 KiB
/// (docs/memory.md), so this is 6-14 MiB at most.
pub(crate) const PRE_HANDSHAKE_CAP: u64 = 8_192;

/// `--max-pre-handshake-connections` when not given: what the descriptor limit leaves after
/// the slots and a reserve, at most [`PRE_HANDSHAKE_CAP`], at least 1.
pub(crate) fn pre_handshake_ceiling(fd_limit: u64, max_connections: u32) -> usize {
    let left = fd_limit.saturating_sub(u64::from(max_connections) + FD_RESERVE);
    usize::try_from(left.clamp(1, PRE_HANDSHAKE_CAP)).unwrap_or(1)
}

/// How long slots must stay available before an eviction episode counts as over: the log
/// says "started" and "stopped" at most once per this.
pub(crate) const QUIET: Duration = Duration::from_secs(10);

/// One stretch of time over the eviction threshold (a newcomer found no free slot, or the
/// pre-handshake ceiling was reached), for the pressure counter and the two log lines.
#[derive(Debug)]
pub(crate) struct Episode {
    started: Option<Instant>,
    /// The latest shortage.
    last: Instant,
    /// Pressure seconds already counted up to here.
    counted: Instant,
}

/// What [`Episode::tick`] found.
#[derive(Debug, PartialEq)]
pub(crate) struct Tick {
    /// Seconds over the threshold since the last tick.
    pub seconds: f64,
    /// Set when the episode ended: how long it lasted, to its last shortage.
    pub ended: Option<Duration>,
}

impl Episode {
    pub(crate) fn new(now: Instant) -> Self {
        Episode {
            started: None,
            last: now,
            counted: now,
        }
    }

    /// A shortage now; true when it starts an episode (log it, start ticking).
    pub(crate) fn short(&mut self, now: Instant) -> bool {
        self.last = now;
        if self.started.is_some() {
            return false;
        }
        self.started = Some(now);
        self.counted = now;
        true
    }

    /// Called every second or so while active: the seconds to add, and whether it ended.
    pub(crate) fn tick(&mut self, now: Instant) -> Tick {
        let Some(started) = self.started else {
            return Tick {
                seconds: 0.0,
                ended: None,
            };
        };
        let seconds = self
            .last
            .saturating_duration_since(self.counted)
            .as_secs_f64();
        self.counted = self.counted.max(self.last);
        let ended = (now.saturating_duration_since(self.last) >= QUIET).then(|| {
            self.started = None;
            self.last.saturating_duration_since(started)
        });
        Tick { seconds, ended }
    }
}

#[cfg(test)]
mod tests;
