//! Questions of the server surfaced to the application as
//! [`Output::ServerRequest`]s under ids of the connection's own (a
//! 2026-07-28 call's `input_required` round, a task's `inputRequests`):
//! the open ones by id, and the ones withdrawn lately, so that a late
//! answer to one is told `Withdrawn` while any other id is left to the
//! engine.

use std::collections::{HashMap, VecDeque};

use super::types::Output;
use crate::rpc::RequestId;

/// Withdrawn ids remembered (oldest forgotten first).
const MAX_WITHDRAWN: usize = 4096;

/// See the [module docs](self).
#[derive(Debug, Default)]
pub(super) struct Inputs {
    /// Open questions → (the call or task follow they belong to, key).
    open: HashMap<RequestId, (u64, String)>,
    withdrawn: VecDeque<RequestId>,
}

impl Inputs {
    /// Question `key` of `owner` is surfaced as `id`.
    pub(super) fn open(&mut self, id: RequestId, owner: u64, key: String) {
        self.open.insert(id, (owner, key));
    }

    /// The application answers `id`: its (owner, key); `Err(true)` when it
    /// was withdrawn lately, `Err(false)` when it is not one of ours.
    pub(super) fn answer(&mut self, id: &RequestId) -> Result<(u64, String), bool> {
        self.open
            .remove(id)
            .ok_or_else(|| self.withdrawn.contains(id))
    }

    /// Withdraws the open questions of `owner` whose key `which` picks:
    /// each gets its [`Output::ServerRequestCancelled`] with `why`.
    pub(super) fn withdraw(
        &mut self,
        out: &mut VecDeque<Output>,
        owner: u64,
        which: impl Fn(&str) -> bool,
        why: &str,
    ) {
        let ids: Vec<RequestId> = self
            .open
            .iter()
            .filter(|(_, (o, k))| *o == owner && which(k))
            .map(|(id, _)| id.clone())
            .collect();
        for id in ids {
            self.open.remove(&id);
            if self.withdrawn.len() >= MAX_WITHDRAWN {
                self.withdrawn.pop_front();
            }
            self.withdrawn.push_back(id.clone());
            out.push_back(Output::ServerRequestCancelled {
                id,
                reason: Some(why.to_owned()),
            });
        }
    }
}
