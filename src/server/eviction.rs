//! Which connection gives way when the webhook port runs short, and how its deadlines shrink
//! as it fills: the policy, as plain functions over what a connection is doing. `slots` applies
//! it; nothing here touches a socket.
//!
//! The order is by worth to the API server, as Envoy's overload manager and nginx do it, not
//! first come first served: a connection in the middle of a review is never cut; one idle
//! since its handshake goes first (longest idle first: a flood's), then one in its handshake
//! (oldest first), then an idle keep-alive (longest idle first: the bottom of a LIFO pool like
//! Go's, the least likely to be reused in the instant of its close, `close`), then one whose
//! head is arriving (closed after its answer, `conn`). When every
//! slot holds a review in service, the longest in service is asked to close after its answer.
//! A connection that has sent no byte holds no slot at all; past its own ceiling the oldest
//! such one is closed.

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
    /// It has answered a request: an idle keep-alive rather than an incomplete connection.
    pub completed: bool,
    pub accepted_us: u64,
    /// When the current phase began.
    pub since_us: u64,
    /// Already told to go: not chosen twice.
    pub evicting: bool,
    /// Already asked to close after its answer: not asked twice.
    pub asked: bool,
}

/// The eviction order: `None` for a connection that is never cut to make room; otherwise lower
/// goes first (idle since its handshake, handshaking, idle keep-alives, a head arriving; in
/// each, the earlier time). A keep-alive goes after handshakes: under a flood those are the
/// flood's, and closing a keep-alive may meet a request its client is writing (`close`).
fn rank(c: &Candidate) -> Option<(u8, u64, Reason)> {
    if c.evicting || c.in_flight > 0 {
        return None;
    }
    match c.phase {
        Phase::Busy | Phase::PreHandshake => None,
        Phase::Idle if !c.completed => Some((0, c.since_us, Reason::Incomplete)),
        Phase::Handshaking => Some((1, c.accepted_us, Reason::Incomplete)),
        Phase::Idle => Some((2, c.since_us, Reason::Idle)),
        // Most likely its client writing a request now: last, as old as the head.
        Phase::Reading => Some((3, c.since_us, Reason::Incomplete)),
    }
}

/// The connection to close so a new one gets a slot, and why; `None` when every slot holds a
/// request in service (or one already closing), and the newcomer must wait. Of two ranked
/// alike, the first given goes (`slots` gives them in the order they were accepted).
pub(crate) fn victim<K>(
    candidates: impl IntoIterator<Item = (K, Candidate)>,
) -> Option<(K, Reason)> {
    candidates
        .into_iter()
        .filter_map(|(k, c)| rank(&c).map(|r| (k, r)))
        .min_by_key(|(_, (tier, at, _))| (*tier, *at))
        .map(|(k, (_, _, reason))| (k, reason))
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
mod tests {
    use super::*;

    fn conn(phase: Phase, completed: bool, accepted_us: u64, since_us: u64) -> Candidate {
        Candidate {
            phase,
            in_flight: usize::from(phase == Phase::Busy),
            completed,
            accepted_us,
            since_us,
            evicting: false,
            asked: false,
        }
    }

    #[test]
    fn a_connection_that_never_carried_a_request_goes_before_a_keep_alive() {
        let slots = [
            ("idle since 20", conn(Phase::Idle, true, 30, 20)),
            ("handshaking", conn(Phase::Handshaking, false, 10, 10)),
            ("never used", conn(Phase::Idle, false, 35, 36)),
            ("never used, newer", conn(Phase::Idle, false, 5, 40)),
            ("busy", conn(Phase::Busy, true, 0, 0)),
        ];
        assert_eq!(victim(slots), Some(("never used", Reason::Incomplete)));
    }

    #[test]
    fn then_the_longest_idle_keep_alive() {
        let slots = [
            ("idle since 50", conn(Phase::Idle, true, 2, 50)),
            ("idle since 20", conn(Phase::Idle, true, 30, 20)),
            ("next head arriving", conn(Phase::Reading, true, 1, 10)),
            ("busy", conn(Phase::Busy, true, 0, 0)),
        ];
        assert_eq!(victim(slots), Some(("idle since 20", Reason::Idle)));
    }

    #[test]
    fn of_two_ranked_alike_the_first_given_goes() {
        let slots = [
            ("accepted first", conn(Phase::Idle, true, 1, 70)),
            ("accepted second", conn(Phase::Idle, true, 2, 70)),
        ];
        assert_eq!(victim(slots), Some(("accepted first", Reason::Idle)));
    }

    #[test]
    fn a_handshake_before_a_keep_alive_and_a_head_arriving_last() {
        let slots = [
            ("slow head", conn(Phase::Reading, false, 10, 11)),
            ("handshaking", conn(Phase::Handshaking, false, 20, 20)),
            ("idle", conn(Phase::Idle, true, 30, 30)),
        ];
        assert_eq!(victim(slots), Some(("handshaking", Reason::Incomplete)));
        let slots = [
            ("slow head", conn(Phase::Reading, false, 10, 11)),
            ("idle", conn(Phase::Idle, true, 30, 30)),
        ];
        assert_eq!(victim(slots), Some(("idle", Reason::Idle)));
        // Of two heads arriving, the one arriving longest, whether first or next.
        let slots = [
            ("first head", conn(Phase::Reading, false, 1, 50)),
            ("next head", conn(Phase::Reading, true, 0, 5)),
        ];
        assert_eq!(victim(slots), Some(("next head", Reason::Incomplete)));
    }

    #[test]
    fn a_head_that_began_after_its_connection_was_chosen_is_answered_whatever_lingers() {
        let (capacity, few, many) = (256, || 32, || 33);
        assert!(
            answers_head(Phase::Idle, many, capacity),
            "chosen idle: the race"
        );
        assert!(answers_head(Phase::Reading, few, capacity));
        assert!(
            !answers_head(Phase::Reading, many, capacity),
            "chosen mid-head, with an eighth of the slots lingering"
        );
    }

    #[test]
    fn with_every_slot_in_service_the_longest_in_service_is_asked_once() {
        let mut asked = conn(Phase::Busy, true, 0, 1);
        asked.asked = true;
        let slots = [
            ("since 30", conn(Phase::Busy, true, 1, 30)),
            ("asked", asked),
            ("since 10", conn(Phase::Busy, false, 2, 10)),
            ("idle", conn(Phase::Idle, true, 3, 5)),
        ];
        assert_eq!(close_after_answer(slots), Some("since 10"));
        assert_eq!(close_after_answer([("asked", asked)]), None);
    }

    #[test]
    fn a_request_in_service_is_never_cut_and_no_one_is_told_twice() {
        let mut idle_with_stream = conn(Phase::Idle, true, 0, 0);
        idle_with_stream.in_flight = 1; // an HTTP/2 stream racing the phase change
        let mut closing = conn(Phase::Idle, true, 0, 0);
        closing.evicting = true;
        let slots = [
            (1, conn(Phase::Busy, false, 0, 0)),
            (2, idle_with_stream),
            (3, closing),
        ];
        assert_eq!(victim(slots), None);
        assert_eq!(victim(Vec::<(u8, Candidate)>::new()), None);
    }

    #[test]
    fn reasons_index_the_metric_s_labels() {
        use Reason::*;
        for reason in [Idle, Incomplete, PreHandshake, Busy] {
            // A match: a new reason cannot go without its label.
            let label = match reason {
                Idle => "idle",
                Incomplete => "incomplete",
                PreHandshake => "pre_handshake",
                Busy => "busy",
            };
            assert_eq!(crate::metrics::EVICTION_REASONS[reason as usize], label);
        }
    }

    #[test]
    fn deadlines_shrink_with_occupancy_and_come_back() {
        let handshake = Duration::from_secs(10);
        assert_eq!(scaled(handshake, factor(0.0)), handshake);
        assert_eq!(scaled(handshake, factor(SHRINK_FROM)), handshake);
        let at_75 = scaled(handshake, factor(0.75));
        assert!(
            at_75 < handshake && at_75 > Duration::from_secs(1),
            "{at_75:?}"
        );
        assert_eq!(scaled(handshake, factor(1.0)), Duration::from_secs(1));
        assert_eq!(
            scaled(Duration::from_secs(120), factor(1.0)),
            Duration::from_secs(12)
        );
        // Falling occupancy gives the configured value back.
        assert_eq!(scaled(handshake, factor(0.2)), handshake);
        // Never below the floor, nor above what was configured when that is lower.
        assert_eq!(scaled(Duration::from_secs(2), factor(1.0)), FLOOR);
        let short = Duration::from_millis(300);
        assert_eq!(scaled(short, factor(1.0)), short);
        assert!(factor(0.9) < factor(0.6));
    }

    #[test]
    fn the_pre_handshake_ceiling_follows_the_descriptor_limit() {
        assert_eq!(pre_handshake_ceiling(1024, 256), 1024 - 256 - 64);
        assert_eq!(pre_handshake_ceiling(1 << 20, 256), 8_192);
        assert_eq!(pre_handshake_ceiling(100, 256), 1);
    }

    #[test]
    fn an_episode_counts_seconds_to_its_last_shortage_and_ends_after_a_quiet_spell() {
        let t0 = Instant::now();
        let s = |n: u64| t0 + Duration::from_secs(n);
        let mut e = Episode::new(t0);
        assert!(e.short(s(1)), "the first shortage starts an episode");
        assert!(!e.short(s(3)), "later ones do not start another");
        let tick = e.tick(s(4));
        assert_eq!((tick.seconds, tick.ended), (2.0, None));
        assert!(!e.short(s(5)));
        let tick = e.tick(s(6));
        assert_eq!((tick.seconds, tick.ended), (2.0, None));
        let tick = e.tick(s(5) + QUIET);
        assert_eq!(tick.seconds, 0.0);
        assert_eq!(tick.ended, Some(Duration::from_secs(4)));
        assert!(e.short(s(30)), "a new shortage starts a new episode");
    }
}
