//! A connection's deadlines in its slot: which shrink as the slots fill, and which never do.

use super::*;

/// A connection in a slot, done with its handshake, whose phase began at the registry's epoch
/// (a second and more ago, so that a deadline shrunk to [`eviction::FLOOR`] has passed).
async fn idle_for_a_second() -> (Arc<Slots>, Ticket) {
    let slots = Slots::new(4, 4, Arc::new(crate::metrics::Metrics::new()));
    let (ticket, _) = slots.accepted([127, 0, 0, 1].into());
    slots.take(&ticket).await.expect("a free slot");
    ticket.0.handshake_done();
    tokio::time::sleep(eviction::FLOOR + Duration::from_millis(100)).await;
    ticket.0.since.store(0, Ordering::Release);
    (slots, ticket)
}

#[tokio::test]
async fn the_idle_timeout_does_not_shrink_under_pressure_a_head_s_deadline_does() {
    // At full occupancy both would be 1 s, scaled; only the head's is.
    let (ten_s, full) = (Duration::from_secs(10), eviction::factor(1.0));
    assert_eq!(eviction::scaled(ten_s, full), eviction::FLOOR);
    let (_slots, ticket) = idle_for_a_second().await;
    let conn = &ticket.0;
    // Unused since its handshake (the API server's parked dial, or a flood's): the race of
    // closing it is the client's to avoid, at its own idle timeout.
    assert_eq!(conn.expired(ten_s, ten_s, full), None);
    assert_eq!(
        conn.expired(ten_s, eviction::FLOOR, 1.0),
        Some(super::super::close::Reason::IdleTimeout),
        "the configured idle timeout itself"
    );
    conn.on_read();
    conn.since.store(0, Ordering::Release);
    assert_eq!(
        conn.expired(ten_s, ten_s, full),
        Some(super::super::close::Reason::HeaderTimeout),
        "a head arriving for a second, slots full"
    );
    assert_eq!(conn.expired(ten_s, ten_s, 1.0), None, "and with room");
}
