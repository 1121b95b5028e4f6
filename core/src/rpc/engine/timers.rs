//! Deadlines: one min-heap of `(deadline, id)` with lazy deletion, the
//! timeouts it fires, and suspending a request's clock.

use std::cmp::Reverse;
use std::time::Instant;

use super::{Engine, F_QUIET, SHRINK_ABOVE};
use crate::rpc::error::RequestError;

impl Engine {
    /// Stops request `id`'s clock: its deadline no longer fires until
    /// [`resume_timeout`](Self::resume_timeout) (used while it waits for an
    /// authorization, which has timeouts of its own). False if it is not
    /// pending.
    pub fn suspend_timeout(&mut self, id: u64) -> bool {
        match self.pending.get_mut(id) {
            Some(p) => {
                p.deadline = None;
                true
            }
            None => false,
        }
    }

    /// Restarts request `id`'s clock from `now` (its timeout and hard
    /// maximum both count from here). False if it is not pending.
    pub fn resume_timeout(&mut self, now: Instant, id: u64) -> bool {
        let Some(p) = self.pending.get_mut(id) else {
            return false;
        };
        p.start = now;
        p.deadline = p.deadline_from(now);
        if let Some(d) = p.deadline {
            self.push_deadline(d, id);
        }
        true
    }

    /// Fires every deadline at or before `now`: each such request completes
    /// with `RequestError::Timeout` and `notifications/cancelled` is sent
    /// (never for `initialize`). Idempotent; a spurious call is a no-op.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.closed {
            return;
        }
        while let Some(&Reverse((deadline, id))) = self.deadlines.peek() {
            if deadline > now {
                break;
            }
            self.deadlines.pop();
            if self
                .pending
                .get(id)
                .is_none_or(|p| p.deadline != Some(deadline))
            {
                continue;
            }
            let Some(pending) = self.pending.remove(id) else {
                continue;
            };
            let error = RequestError::Timeout {
                ms: pending.expired_ms(deadline),
            };
            if pending.flags & F_QUIET == 0 {
                self.send_cancelled(id, &error.to_string());
            }
            self.stats.timed_out += 1;
            self.complete(id, Err(error));
        }
    }

    /// The earliest live deadline: call `handle_timeout` when it is reached.
    /// `None` when no request has one (or the engine is closed). Takes
    /// `&mut self` to drop stale deadline entries on the way.
    #[must_use]
    pub fn poll_timeout(&mut self) -> Option<Instant> {
        self.shrink_if_sparse();
        while let Some(&Reverse((deadline, id))) = self.deadlines.peek() {
            if self.is_live(deadline, id) {
                return Some(deadline);
            }
            self.deadlines.pop();
        }
        None
    }

    /// Heap entries, stale ones included (tests check they stay bounded).
    #[cfg(test)]
    pub(crate) fn deadlines_len(&self) -> usize {
        self.deadlines.len()
    }

    // ---- internals ---------------------------------------------------

    fn is_live(&self, deadline: Instant, id: u64) -> bool {
        self.pending
            .get(id)
            .is_some_and(|p| p.deadline == Some(deadline))
    }

    /// Drops stale deadlines; keeps them at most about as many as the live
    /// ones.
    fn compact_deadlines(&mut self) {
        let pending = &self.pending;
        self.deadlines
            .retain(|Reverse((d, id))| pending.get(*id).is_some_and(|p| p.deadline == Some(*d)));
    }

    /// After a burst (e.g. many requests that all timed out), gives the
    /// memory of the pending table and the deadline heap back.
    fn shrink_if_sparse(&mut self) {
        let cap = self.pending.capacity();
        if cap > SHRINK_ABOVE && self.pending.len() * 8 < cap {
            self.pending.shrink_to(self.pending.len() * 2);
            self.compact_deadlines();
            self.deadlines.shrink_to(self.deadlines.len() * 2);
        }
    }

    pub(super) fn push_deadline(&mut self, deadline: Instant, id: u64) {
        self.deadlines.push(Reverse((deadline, id)));
        // Lazy deletion leaves entries of completed requests behind; keep
        // them at most about as many as the live ones (amortized O(1)).
        if self.deadlines.len() > 2 * self.pending.len() + 64 {
            self.compact_deadlines();
        }
    }
}
