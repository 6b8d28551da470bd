//! The admin server's connection slots: at most a fixed number of connections at once, and
//! when they are all taken a newcomer takes the slot of the connection that has waited
//! longest for a request head (since it was accepted, or since its last request was
//! answered), which is closed. A connection whose request is being answered is never
//! evicted; only when every slot holds one is the newcomer refused. Why this rule, see
//! [`super::server`].
//!
//! The order is kept with a counter, not a clock: each admission and each answered request
//! takes the next stamp, and the lowest stamp of a waiting connection is the one evicted.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::oneshot;

/// The slots, shared by the accept loop (which admits) and the connections (which report
/// their requests and free their slot on drop).
#[derive(Debug)]
pub(crate) struct Slots {
    capacity: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// The next stamp (and connection id: both only grow).
    next: u64,
    held: HashMap<u64, Held>,
}

/// One connection holding a slot.
#[derive(Debug)]
struct Held {
    /// `Some(stamp)` while it waits for a request head (from the stamp on), `None` while a
    /// request of it is being answered.
    waiting_since: Option<u64>,
    /// Closes the connection when its slot is taken.
    evict: oneshot::Sender<()>,
}

/// What [`Slots::admit`] did with a newcomer.
#[derive(Debug)]
pub(crate) enum Admission {
    /// A slot was free.
    Admitted(Slot),
    /// Every slot was taken: the connection that had waited longest for a request head was
    /// told to close, and its slot is the newcomer's.
    Evicting(Slot),
    /// Every slot holds a connection whose request is being answered.
    Refused,
}

impl Slots {
    /// `capacity` slots, all free.
    pub(crate) fn new(capacity: usize) -> Arc<Slots> {
        Arc::new(Slots { capacity, table: Mutex::new(Table::default()) })
    }

    /// A slot for a new connection, waiting for its first request head from now on.
    pub(crate) fn admit(self: &Arc<Self>) -> Admission {
        let mut t = self.lock();
        let evicting = t.held.len() >= self.capacity;
        if evicting {
            let oldest = t.held.iter().filter_map(|(id, h)| Some((h.waiting_since?, *id))).min();
            let Some((_, id)) = oldest else { return Admission::Refused };
            if let Some(victim) = t.held.remove(&id) {
                // A connection that ended meanwhile has nothing left to close.
                let _ = victim.evict.send(());
            }
        }
        let (evict, evicted) = oneshot::channel();
        let id = t.stamp();
        t.held.insert(id, Held { waiting_since: Some(id), evict });
        let slot = Slot { slots: Arc::clone(self), id, evicted };
        if evicting {
            Admission::Evicting(slot)
        } else {
            Admission::Admitted(slot)
        }
    }

    /// Connections holding a slot.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.lock().held.len()
    }

    /// A panic while the table was held left it consistent (every change is one statement):
    /// go on with it.
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Table {
    fn stamp(&mut self) -> u64 {
        self.next += 1;
        self.next
    }
}

/// A connection's slot, freed when dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    slots: Arc<Slots>,
    id: u64,
    evicted: oneshot::Receiver<()>,
}

impl Slot {
    /// A handle the connection's request handler reports through.
    pub(crate) fn requests(&self) -> Requests {
        Requests { slots: Arc::clone(&self.slots), id: self.id }
    }

    /// Resolves once the slot has been given to a newcomer: the connection is to be closed.
    pub(crate) async fn evicted(&mut self) {
        // The sender is gone without a word only when the slot was freed, which needs `self`.
        let _ = (&mut self.evicted).await;
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.slots.lock().held.remove(&self.id);
    }
}

/// Reports a connection's requests to its slot.
#[derive(Debug, Clone)]
pub(crate) struct Requests {
    slots: Arc<Slots>,
    id: u64,
}

impl Requests {
    /// A whole request head has arrived: the connection is not to be evicted while it is
    /// answered.
    pub(crate) fn started(&self) {
        self.set_waiting(false);
    }

    /// Its answer is made: from now on the connection waits for its next request head.
    pub(crate) fn answered(&self) {
        self.set_waiting(true);
    }

    fn set_waiting(&self, waiting: bool) {
        let mut t = self.slots.lock();
        let stamp = t.stamp();
        if let Some(h) = t.held.get_mut(&self.id) {
            h.waiting_since = waiting.then_some(stamp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn admitted(a: Admission) -> Slot {
        match a {
            Admission::Admitted(s) => s,
            other => panic!("not admitted at once: {other:?}"),
        }
    }

    fn evicting(a: Admission) -> Slot {
        match a {
            Admission::Evicting(s) => s,
            other => panic!("not admitted by evicting: {other:?}"),
        }
    }

    /// Whether `slot` has been told to close.
    fn is_evicted(slot: &mut Slot) -> bool {
        futures::executor::block_on(async { futures::poll!(std::pin::pin!(slot.evicted())).is_ready() })
    }

    #[test]
    fn a_full_table_evicts_the_connection_that_has_waited_longest_for_a_head() {
        let slots = Slots::new(3);
        let mut a = admitted(slots.admit());
        let mut b = admitted(slots.admit());
        let mut c = admitted(slots.admit());
        // a sends a request and is answered: it waits again, from now on (after c).
        a.requests().started();
        a.requests().answered();
        let mut d = evicting(slots.admit());
        assert!(is_evicted(&mut b), "b waited longest");
        assert!(!is_evicted(&mut a) && !is_evicted(&mut c) && !is_evicted(&mut d));
        assert_eq!(slots.held(), 3);
        let _e = evicting(slots.admit());
        assert!(is_evicted(&mut c), "then c");
        let _f = evicting(slots.admit());
        assert!(is_evicted(&mut a), "then a, answered before d and e came");
        assert!(!is_evicted(&mut d));
        assert_eq!(slots.held(), 3);
    }

    #[test]
    fn a_connection_being_answered_is_never_evicted_and_all_answering_refuses() {
        let slots = Slots::new(2);
        let mut a = admitted(slots.admit());
        let mut b = admitted(slots.admit());
        a.requests().started();
        let _c = evicting(slots.admit());
        assert!(is_evicted(&mut b) && !is_evicted(&mut a), "b, though a is older");
        _c.requests().started();
        assert!(matches!(slots.admit(), Admission::Refused));
        assert_eq!(slots.held(), 2);
    }

    #[test]
    fn a_dropped_slot_is_free_again_and_an_evicted_one_reports_nothing_more() {
        let slots = Slots::new(1);
        let a = admitted(slots.admit());
        drop(a);
        assert_eq!(slots.held(), 0);
        let b = admitted(slots.admit());
        let requests = b.requests();
        let c = evicting(slots.admit());
        // b's handler reports after its eviction: c's slot is not touched.
        requests.started();
        c.requests().started();
        requests.answered();
        assert!(matches!(slots.admit(), Admission::Refused), "c is being answered");
        drop(b);
        assert_eq!(slots.held(), 1, "dropping the evicted b frees nothing of c's");
    }
}
