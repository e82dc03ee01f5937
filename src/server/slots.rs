//! The webhook port's connections by what they are doing: a registry of the pre-handshake ones
//! (no slot) and of those holding one of the `--max-connections` slots, applying `eviction`'s
//! policy when a newcomer needs room, and keeping the state gauges, eviction counters and
//! pressure episodes of `metrics::Connections`.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::eviction::{self, Candidate, Episode, Phase, Reason};
use crate::metrics::Connections;

/// `Conn::phase` once its task has ended: no further gauge moves.
const CLOSED: u8 = u8::MAX;

/// How often a newcomer that found every slot holding a request in service looks again (a slot
/// freed wakes it at once; a request ending, which makes its connection evictable, does not).
const RECHECK: Duration = Duration::from_millis(50);

/// Every connection on the webhook port.
pub(crate) struct Slots {
    epoch: Instant,
    capacity: usize,
    /// Slots taken: connections in `held` that have not been told to go.
    occupied: AtomicUsize,
    /// A connection in a slot ended.
    freed: Notify,
    pre_handshake_max: usize,
    next_id: AtomicU64,
    /// Accepted, no slot yet; ordered by acceptance, so the first is the oldest.
    pending: Mutex<BTreeMap<u64, Arc<Conn>>>,
    /// Holding a slot. Locked after `pending` when both are.
    held: Mutex<Held>,
    episode: Mutex<Episode>,
    metrics: Arc<crate::metrics::Metrics>,
}

/// The connections in slots, and how many of them were told to go: their slots are already
/// the newcomers' (a connection told to go closes at once, or within a second between requests).
#[derive(Default)]
struct Held {
    /// By id, the order of acceptance: of two equally ranked victims the older goes.
    conns: BTreeMap<u64, Arc<Conn>>,
    leaving: usize,
}

/// One connection's state, shared by its task, its I/O wrapper and the registry.
pub(crate) struct Conn {
    id: u64,
    phase: AtomicU8,
    /// Requests in service.
    in_flight: AtomicUsize,
    /// Requests answered, counted up to two (`eviction::Uses`).
    uses: AtomicU8,
    /// Microseconds since the registry's epoch when the current phase began.
    since: AtomicU64,
    evicting: AtomicBool,
    /// The phase it was in when told to go.
    told_in: AtomicU8,
    /// Asked to close after its answer (every slot was in service when a newcomer came).
    asked: AtomicBool,
    /// Its latest answer said `Connection: close` (or HTTP/2 GOAWAY went out).
    said_close: AtomicBool,
    /// Told to go or asked to close after its answer (a notification is kept until the task
    /// looks).
    pub evict: Notify,
    /// The client's address, by which `eviction` tells a flood's connections from others'.
    source: IpAddr,
    slots: Arc<Slots>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Slots {
    pub(crate) fn new(
        capacity: u32,
        pre_handshake_max: usize,
        metrics: Arc<crate::metrics::Metrics>,
    ) -> Arc<Slots> {
        let now = Instant::now();
        Arc::new(Slots {
            epoch: now,
            capacity: capacity as usize,
            occupied: AtomicUsize::new(0),
            freed: Notify::new(),
            pre_handshake_max,
            next_id: AtomicU64::new(0),
            pending: Mutex::new(BTreeMap::new()),
            held: Mutex::new(Held::default()),
            episode: Mutex::new(Episode::new(now)),
            metrics,
        })
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn gauges(&self) -> &Connections {
        &self.metrics.connections
    }

    /// The deadline factor for connections in slots ([`eviction::factor`] of their occupancy).
    pub(crate) fn factor(&self) -> f64 {
        let used = self.occupied.load(Ordering::Relaxed);
        eviction::factor(used as f64 / self.capacity as f64)
    }

    /// Registers a just-accepted connection, closing the oldest pre-handshake one when the
    /// ceiling is reached. Returns it with the deadline factor for its first bytes.
    pub(crate) fn accepted(self: &Arc<Self>, source: IpAddr) -> (Ticket, f64) {
        let conn = Arc::new(Conn {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            phase: AtomicU8::new(Phase::PreHandshake as u8),
            in_flight: AtomicUsize::new(0),
            uses: AtomicU8::new(0),
            since: AtomicU64::new(0),
            evicting: AtomicBool::new(false),
            told_in: AtomicU8::new(Phase::PreHandshake as u8),
            asked: AtomicBool::new(false),
            said_close: AtomicBool::new(false),
            evict: Notify::new(),
            source: source.to_canonical(),
            slots: self.clone(),
        });
        self.gauges().by_state[Phase::PreHandshake as usize].inc();
        let mut pending = lock(&self.pending);
        let mut evicted = false;
        while pending.len() >= self.pre_handshake_max {
            let Some((_, oldest)) = pending.pop_first() else {
                break;
            };
            oldest.tell(Reason::PreHandshake);
            evicted = true;
        }
        pending.insert(conn.id, conn.clone());
        let occupancy = pending.len() as f64 / self.pre_handshake_max as f64;
        drop(pending);
        if evicted {
            self.short();
        }
        (Ticket(conn), eviction::factor(occupancy))
    }

    /// Closes the oldest pre-handshake connection: what `accept` does when it runs out of
    /// descriptors instead of waiting.
    pub(crate) fn shed_oldest_pending(self: &Arc<Self>) {
        let oldest = lock(&self.pending).pop_first();
        if let Some((_, oldest)) = oldest {
            oldest.tell(Reason::PreHandshake);
            self.short();
        }
    }

    /// A slot for `ticket`'s connection, at once when one is free or another connection may
    /// be told to go (`eviction::victim`: its slot passes to this one as it closes); otherwise
    /// when one frees (the caller bounds the wait). `None` when this connection was itself
    /// closed meanwhile (past the pre-handshake ceiling). The connection is then `Handshaking`.
    pub(crate) async fn take(self: &Arc<Self>, ticket: &Ticket) -> Option<()> {
        let conn = &ticket.0;
        let mut asked_one = false;
        loop {
            let freed = self.freed.notified();
            let (taken, evicted) = {
                let mut pending = lock(&self.pending);
                if !pending.contains_key(&conn.id) {
                    return None;
                }
                let mut held = lock(&self.held);
                let mut evicted = false;
                let mut room = held.conns.len() - held.leaving < self.capacity;
                if !room {
                    let candidates = held.conns.values().map(|c| (c, c.candidate()));
                    let chosen = eviction::victim(candidates, self.now_us())
                        .map(|(c, reason)| (c.clone(), reason));
                    if let Some((victim, reason)) = chosen {
                        victim.tell(reason);
                        held.leaving += 1;
                        (room, evicted) = (true, true);
                    } else if !asked_one {
                        // Every slot holds a review in service: the longest in service closes
                        // after its answer and hands its slot over (a waiter asks one at most).
                        let asked = eviction::close_after_answer(
                            held.conns.values().map(|c| (c, c.candidate())),
                        )
                        .cloned();
                        if let Some(asked) = asked {
                            asked.ask();
                            asked_one = true;
                        }
                    }
                }
                if room {
                    pending.remove(&conn.id);
                    held.conns.insert(conn.id, conn.clone());
                    self.occupied
                        .store(held.conns.len() - held.leaving, Ordering::Relaxed);
                }
                (room, evicted || !room)
            };
            if evicted {
                self.short();
            }
            if taken {
                conn.since.store(conn.now_us(), Ordering::Release);
                conn.enter(Phase::Handshaking);
                return Some(());
            }
            let _ = tokio::time::timeout(RECHECK, freed).await;
        }
    }

    /// A newcomer found no room: starts (and logs) a pressure episode if none is running.
    fn short(self: &Arc<Self>) {
        if !lock(&self.episode).short(Instant::now()) {
            return;
        }
        let held = lock(&self.held);
        let busiest = eviction::busiest(
            held.conns
                .values()
                .filter(|c| !c.evicting())
                .map(|c| c.source),
        );
        drop(held);
        let (address, slots) = busiest.map_or((String::new(), 0), |(a, n)| (a.to_string(), n));
        tracing::warn!(
            slots = self.capacity,
            pre_handshake_max = self.pre_handshake_max,
            busiest_address = %address, its_slots = slots,
            "webhook connections at their limit: closing idle and incomplete connections to \
             admit new ones, the busiest address's unproven ones first (requests in service \
             are never cut)"
        );
        let slots = self.clone();
        tokio::spawn(async move {
            let before = slots.gauges().evictions.clone().map(|c| c.get());
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let tick = lock(&slots.episode).tick(Instant::now());
                slots.gauges().pressure_seconds.inc_by(tick.seconds);
                if let Some(lasted) = tick.ended {
                    let after = slots.gauges().evictions.clone().map(|c| c.get());
                    let n = |r: Reason| after[r as usize] - before[r as usize];
                    tracing::info!(
                        lasted = ?lasted,
                        idle = n(Reason::Idle),
                        incomplete = n(Reason::Incomplete),
                        pre_handshake = n(Reason::PreHandshake),
                        asked_to_close_after_answer = n(Reason::Busy),
                        "webhook connections below their limit again: evictions stopped"
                    );
                    return;
                }
            }
        });
    }
}

impl Conn {
    fn now_us(&self) -> u64 {
        self.slots.now_us()
    }

    fn phase(&self) -> Phase {
        Phase::from_u8(self.phase.load(Ordering::Acquire))
    }

    fn candidate(&self) -> Candidate {
        Candidate {
            phase: self.phase(),
            in_flight: self.in_flight.load(Ordering::Acquire),
            uses: eviction::Uses::from_u8(self.uses.load(Ordering::Acquire)),
            since_us: self.since.load(Ordering::Acquire),
            evicting: self.evicting.load(Ordering::Acquire),
            asked: self.asked.load(Ordering::Acquire),
            source: self.source,
        }
    }

    /// Asks the connection to close after its answer (`close::says_close`).
    fn ask(&self) {
        self.asked.store(true, Ordering::Release);
        self.evict.notify_one();
        self.slots.gauges().evictions[Reason::Busy as usize].inc();
    }

    /// Told to go to make room (rather than asked to close after its answer).
    pub(crate) fn evicting(&self) -> bool {
        self.evicting.load(Ordering::Acquire)
    }

    pub(crate) fn asked(&self) -> bool {
        self.asked.load(Ordering::Acquire)
    }

    /// Its next answer says `Connection: close` (an evicted connection with a head arriving).
    pub(crate) fn close_after_answer(&self) {
        self.asked.store(true, Ordering::Release);
    }

    /// An HTTP/1 request head is arriving, to be answered before the close
    /// ([`eviction::answers_head`]).
    pub(crate) fn reading_with_room_to_linger(&self) -> bool {
        let (told_in, slots) = (self.told_in.load(Ordering::Acquire), &self.slots);
        self.phase() == Phase::Reading
            && eviction::answers_head(
                Phase::from_u8(told_in),
                || lock(&slots.held).leaving,
                slots.capacity,
            )
    }

    /// Its answer (or GOAWAY) says close: the end that follows is the server's, race-free.
    pub(crate) fn say_close(&self) {
        self.said_close.store(true, Ordering::Release);
    }

    /// What the close policy sees of it as it ends (`close::ended`).
    pub(crate) fn seen(&self) -> super::close::Seen {
        super::close::Seen {
            said_close: self.said_close.load(Ordering::Acquire),
            idle: self.phase() == Phase::Idle && !self.in_service(),
        }
    }

    fn tell(&self, reason: Reason) {
        let phase = self.phase.load(Ordering::Acquire);
        self.told_in.store(phase, Ordering::Release);
        self.evicting.store(true, Ordering::Release);
        self.evict.notify_one();
        self.slots.gauges().evictions[reason as usize].inc();
    }

    /// Moves to `to`, keeping the state gauges in step; nothing once closed (an HTTP/2
    /// stream's task may outlive its connection's).
    fn enter(&self, to: Phase) {
        let mut from = self.phase.load(Ordering::Acquire);
        loop {
            if from == CLOSED {
                return;
            }
            match self
                .phase
                .compare_exchange(from, to as u8, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break,
                Err(actual) => from = actual,
            }
        }
        let (from, to) = (Phase::from_u8(from).gauge(), to.gauge());
        if from != to {
            let gauges = &self.slots.gauges().by_state;
            gauges[from].dec();
            gauges[to].inc();
        }
    }

    /// The handshake is done: idle until the first request (not on the header deadline: Go's
    /// http.Transport, the apiserver's client, parks a freshly dialed connection unused when
    /// another became free first, and closing it early would race the client's reuse of it).
    pub(crate) fn handshake_done(&self) {
        self.since.store(self.now_us(), Ordering::Release);
        self.enter(Phase::Idle);
    }

    /// Bytes arrived: on an idle HTTP/1 connection they start a request head.
    pub(crate) fn on_read(&self) {
        if self.in_flight.load(Ordering::Acquire) != 0 || self.phase() != Phase::Idle {
            return;
        }
        // The head's start before its phase: `eviction` ranks a head by how long it has been
        // arriving, and must never see one with the time of the answer before it. Should the
        // phase change first, the time is that of a request in service, never ranked.
        self.since.store(self.now_us(), Ordering::Release);
        if self
            .phase
            .compare_exchange(
                Phase::Idle as u8,
                Phase::Reading as u8,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            let gauges = &self.slots.gauges().by_state;
            gauges[Phase::Idle.gauge()].dec();
            gauges[Phase::Reading.gauge()].inc();
        }
    }

    /// A request enters service; dropping the guard ends it and starts the idle clock.
    pub(crate) fn begin(self: &Arc<Self>) -> Busy {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            self.enter(Phase::Busy);
        }
        Busy(self.clone())
    }

    /// Requests in service or a head arriving: what eviction turns into a graceful close
    /// (after the answer) rather than a cut.
    pub(crate) fn worth_keeping(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
            || (self.phase() == Phase::Idle && self.completed())
    }

    /// It has answered a request: an idle keep-alive rather than an incomplete connection.
    fn completed(&self) -> bool {
        self.uses.load(Ordering::Acquire) > 0
    }

    pub(crate) fn in_service(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) > 0
    }

    /// Why the connection should be closed now, if it should: the header deadline for a head
    /// that is arriving (scaled by `factor`), `--idle-timeout` between requests whatever the
    /// pressure. That is longer than the API server's 90 s pool, so its client closes first,
    /// race-free, a spare dial it parked unused included; a flood's idle connections give way
    /// by eviction when a newcomer needs the room, not before.
    pub(crate) fn expired(
        &self,
        headers: Duration,
        idle: Duration,
        factor: f64,
    ) -> Option<super::close::Reason> {
        use super::close::Reason::{HeaderTimeout, IdleTimeout};
        if self.in_service() {
            return None;
        }
        let elapsed = Duration::from_micros(
            self.now_us()
                .saturating_sub(self.since.load(Ordering::Acquire)),
        );
        match self.phase() {
            Phase::Reading => {
                (elapsed >= eviction::scaled(headers, factor)).then_some(HeaderTimeout)
            }
            Phase::Idle => (elapsed >= idle).then_some(IdleTimeout),
            _ => None,
        }
    }
}

/// Marks a request in service; dropping it starts the idle clock.
pub(crate) struct Busy(Arc<Conn>);

impl Drop for Busy {
    fn drop(&mut self) {
        let conn = &self.0;
        conn.since.store(conn.now_us(), Ordering::Release);
        let _ = conn
            .uses
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < 2).then_some(n + 1)
            });
        if conn.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            conn.enter(Phase::Idle);
        }
    }
}

/// A connection's place in the registry, held by its task: dropping it (however the task
/// ends) removes the connection and its count.
pub(crate) struct Ticket(pub Arc<Conn>);

impl Drop for Ticket {
    fn drop(&mut self) {
        let conn = &self.0;
        let slots = &conn.slots;
        let phase = Phase::from_u8(conn.phase.swap(CLOSED, Ordering::AcqRel));
        if phase == Phase::PreHandshake {
            lock(&slots.pending).remove(&conn.id);
        } else {
            let mut held = lock(&slots.held);
            held.conns.remove(&conn.id);
            // Only a connection in a slot is told to go through `held` once it is there.
            if conn.evicting.load(Ordering::Acquire) {
                held.leaving -= 1;
            }
            slots
                .occupied
                .store(held.conns.len() - held.leaving, Ordering::Relaxed);
            drop(held);
            slots.freed.notify_one();
        }
        slots.gauges().by_state[phase.gauge()].dec();
    }
}

#[cfg(test)]
mod tests;
