//! The eviction order and its thresholds, connection by connection.

use super::*;

/// The tests' clock: times are microseconds before it, so `ago(SLOW_REQUEST)` is just old enough.
const NOW: u64 = 100_000_000;

fn ago(d: Duration) -> u64 {
    NOW - d.as_micros() as u64
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn conn(phase: Phase, uses: Uses, since_us: u64) -> Candidate {
    Candidate {
        phase,
        in_flight: usize::from(phase == Phase::Busy),
        uses,
        since_us,
        evicting: false,
        asked: false,
        source: API_SERVER,
    }
}

/// The address `conn` gives every connection; [`FLOOD`] is another.
const API_SERVER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1));
const FLOOD: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 244, 1, 7));

fn from(source: IpAddr, c: Candidate) -> Candidate {
    Candidate { source, ..c }
}

fn first<K: Copy>(slots: &[(K, Candidate)]) -> Option<(K, Reason)> {
    victim(slots.iter().copied(), NOW)
}

/// Evicts from `slots` until nothing is left to evict: the order, with each reason.
fn order(mut slots: Vec<(&'static str, Candidate)>) -> Vec<(&'static str, Reason)> {
    let mut gone = Vec::new();
    while let Some((name, reason)) = first(&slots) {
        slots.retain(|(n, _)| *n != name);
        gone.push((name, reason));
    }
    gone
}

#[test]
fn a_floods_connections_go_first_then_newcomers_then_a_pools() {
    use Phase::{Busy, Handshaking, Reading};
    use Reason::Incomplete;
    const IDLE: Phase = Phase::Idle;
    // Given out of order, as `slots` would.
    let slots = vec![
        ("fresh head", conn(Reading, Uses::Reused, ago(ms(5)))),
        ("reused, idle 50 ms", conn(IDLE, Uses::Reused, ago(ms(50)))),
        (
            "reused, idle 60 s",
            conn(IDLE, Uses::Reused, ago(ms(60_000))),
        ),
        ("handshake 5 ms", conn(Handshaking, Uses::None, ago(ms(5)))),
        (
            "handshake 900 ms",
            conn(Handshaking, Uses::None, ago(ms(900))),
        ),
        (
            "answered once 100 ms ago",
            conn(IDLE, Uses::Once, ago(ms(100))),
        ),
        (
            "handshake 3 s",
            conn(Handshaking, Uses::None, ago(ms(3_000))),
        ),
        (
            "answered once, 250 ms",
            conn(IDLE, Uses::Once, ago(ms(250))),
        ),
        (
            "answered once, quiet 5 s",
            conn(IDLE, Uses::Once, ago(ms(5_000))),
        ),
        ("slow head", conn(Reading, Uses::None, ago(SLOW_REQUEST))),
        ("never used, 20 ms", conn(IDLE, Uses::None, ago(ms(20)))),
        ("never used, 400 ms", conn(IDLE, Uses::None, ago(ms(400)))),
        ("busy", conn(Busy, Uses::Reused, 0)),
    ];
    let expected = [
        ("never used, 400 ms", Incomplete),
        ("slow head", Incomplete),
        ("answered once, quiet 5 s", Reason::Idle),
        ("answered once, 250 ms", Reason::Idle),
        ("answered once 100 ms ago", Reason::Idle),
        ("never used, 20 ms", Incomplete),
        ("handshake 3 s", Incomplete),
        ("handshake 900 ms", Incomplete),
        ("handshake 5 ms", Incomplete),
        ("reused, idle 60 s", Reason::Idle),
        ("reused, idle 50 ms", Reason::Idle),
        ("fresh head", Incomplete),
    ];
    assert_eq!(order(slots), expected);
}

/// Who goes first of `slots`, beside two reviews in service (so newcomers are few).
fn first_of(slots: Vec<(&'static str, Candidate)>) -> &'static str {
    let busy = conn(Phase::Busy, Uses::Reused, 0);
    let mut slots = slots;
    slots.extend([("busy", busy), ("busy too", busy)]);
    first(&slots).expect("a victim").0
}

#[test]
fn slow_request_is_where_a_head_or_an_unused_connection_changes_rank() {
    use Phase::{Idle, Reading};
    let just_under = ago(SLOW_REQUEST - Duration::from_micros(1));
    let reused = conn(Idle, Uses::Reused, ago(ms(60_000)));
    let answered = conn(Idle, Uses::Once, ago(ms(1)));
    // Who waits for a request, and whom it passes once it has waited SLOW_REQUEST.
    let cases = [
        ("a head arriving", Reading, reused),
        ("unused", Idle, answered),
    ];
    for (what, phase, other) in cases {
        let slots = |since| vec![("other", other), (what, conn(phase, Uses::None, since))];
        assert_eq!(first_of(slots(just_under)), "other", "{what}");
        assert_eq!(first_of(slots(ago(SLOW_REQUEST))), what, "{what}");
    }
}

#[test]
fn newcomers_holding_half_the_slots_give_way_to_one_another_not_to_a_pool() {
    use Phase::{Busy, Handshaking, Idle};
    let quiet = (
        "answered once, quiet",
        conn(Idle, Uses::Once, ago(ms(5_000))),
    );
    let reused = ("reused", conn(Idle, Uses::Reused, ago(ms(60_000))));
    let newcomer = |name, age| (name, conn(Handshaking, Uses::None, ago(ms(age))));
    let mut slots = vec![quiet, reused, newcomer("older newcomer", 20)];
    // One newcomer in four slots: the keep-alive that answered once goes.
    slots.push(("busy", conn(Busy, Uses::Reused, 0)));
    assert_eq!(first(&slots).map(|v| v.0), Some("answered once, quiet"));
    // Two in four: a flood of handshakes, the oldest of which goes.
    slots[3] = newcomer("newer newcomer", 5);
    assert_eq!(first(&slots), Some(("older newcomer", Reason::Incomplete)));
    // Of newcomers, one done with its handshake goes before one in it, however old.
    let mut with_done = slots.clone();
    with_done[3] = ("done, silent", conn(Idle, Uses::None, ago(ms(1))));
    assert_eq!(first(&with_done).map(|v| v.0), Some("done, silent"));
    // Two in five: few again; unless the fifth is on its way out, no slot to weigh.
    let mut fifth = conn(Busy, Uses::Reused, 0);
    slots.push(("fifth", fifth));
    assert_eq!(first(&slots).map(|v| v.0), Some("answered once, quiet"));
    fifth.evicting = true;
    slots[4] = ("fifth, leaving", fifth);
    assert_eq!(first(&slots).map(|v| v.0), Some("older newcomer"));
}

#[test]
fn of_unproven_connections_the_address_holding_the_most_gives_way_first() {
    use Phase::{Handshaking, Idle};
    let api = vec![
        // Alone, the parked dial would go first: unused for a second.
        ("parked dial", conn(Idle, Uses::None, ago(ms(1_000)))),
        ("answered once", conn(Idle, Uses::Once, ago(ms(300)))),
        ("api handshake", conn(Handshaking, Uses::None, ago(ms(2)))),
        ("reused", conn(Idle, Uses::Reused, ago(ms(60_000)))),
    ];
    let flood = |name, phase, age| (name, from(FLOOD, conn(phase, Uses::None, ago(ms(age)))));
    let mut slots = api.clone();
    slots.extend([
        flood("flood unused 10 ms", Idle, 10),
        flood("flood handshake 3 ms", Handshaking, 3),
        flood("flood unused 5 ms", Idle, 5),
        flood("flood handshake 1 ms", Handshaking, 1),
        flood("flood handshake 2 ms", Handshaking, 2),
    ]);
    // Five unproven against three: the flood's go, in the class order among themselves
    // (newcomers hold half the slots: done with the handshake first, oldest first). At three
    // against three the class order alone decides, across addresses; a pool's reused
    // keep-alive goes after every unproven connection of either.
    let gone: Vec<&str> = order(slots).into_iter().map(|(name, _)| name).collect();
    assert_eq!(
        gone,
        [
            "flood unused 10 ms",
            "flood unused 5 ms",
            "parked dial",
            "flood handshake 3 ms",
            "api handshake",
            "flood handshake 2 ms",
            // One against one, three slots, one newcomer: few, and the once-used goes first.
            "answered once",
            "flood handshake 1 ms",
            "reused",
        ]
    );
    // All from one address: the class order alone, the parked dial first.
    assert_eq!(first_of(api.clone()), "parked dial");
}

#[test]
fn a_pool_s_reused_keep_alives_do_not_count_against_its_address() {
    use Phase::{Handshaking, Idle};
    let mut slots: Vec<_> = (0..10)
        .map(|_| ("reused", conn(Idle, Uses::Reused, ago(ms(60_000)))))
        .collect();
    slots.push(("parked dial", conn(Idle, Uses::None, ago(ms(1_000)))));
    slots.push((
        "other's handshake",
        from(FLOOD, conn(Handshaking, Uses::None, ago(ms(2)))),
    ));
    slots.push((
        "other's unused",
        from(FLOOD, conn(Idle, Uses::None, ago(ms(1)))),
    ));
    // Two unproven on the other address against one here, however many this one reuses.
    assert_eq!(first(&slots).map(|v| v.0), Some("other's unused"));
}

#[test]
fn of_two_ranked_alike_the_first_given_goes() {
    let slots = [
        ("accepted first", conn(Phase::Idle, Uses::Reused, 70)),
        ("accepted second", conn(Phase::Idle, Uses::Reused, 70)),
    ];
    assert_eq!(first(&slots), Some(("accepted first", Reason::Idle)));
}

#[test]
fn uses_count_up_to_reused() {
    assert_eq!(Uses::from_u8(0), Uses::None);
    assert_eq!(Uses::from_u8(1), Uses::Once);
    assert_eq!(Uses::from_u8(2), Uses::Reused);
    assert_eq!(Uses::from_u8(u8::MAX), Uses::Reused);
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
    let mut asked = conn(Phase::Busy, Uses::Reused, 1);
    asked.asked = true;
    let slots = [
        ("since 30", conn(Phase::Busy, Uses::Reused, 30)),
        ("asked", asked),
        ("since 10", conn(Phase::Busy, Uses::None, 10)),
        ("idle", conn(Phase::Idle, Uses::Reused, 5)),
    ];
    assert_eq!(close_after_answer(slots), Some("since 10"));
    assert_eq!(close_after_answer([("asked", asked)]), None);
}

#[test]
fn a_request_in_service_is_never_cut_and_no_one_is_told_twice() {
    let mut idle_with_stream = conn(Phase::Idle, Uses::None, 0);
    idle_with_stream.in_flight = 1; // an HTTP/2 stream racing the phase change
    let mut closing = conn(Phase::Idle, Uses::None, 0);
    closing.evicting = true;
    let slots = [
        (1, conn(Phase::Busy, Uses::None, 0)),
        (2, idle_with_stream),
        (3, closing),
    ];
    assert_eq!(first(&slots), None);
    assert_eq!(first::<u8>(&[]), None);
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

#[test]
fn the_pressure_log_names_the_address_holding_the_most_slots() {
    let sources = [API_SERVER, FLOOD, FLOOD, API_SERVER, FLOOD];
    assert_eq!(busiest(sources), Some((FLOOD, 3)));
    assert_eq!(busiest([]), None);
}
