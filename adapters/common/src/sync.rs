//! Two runtime-neutral primitives: tasks that can be aborted, and the
//! notification broadcast.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};

use crate::handlers::BoxFuture;
use crate::runtime::{Runtime, SpawnError};

/// Locks, ignoring poisoning (nothing here panics while holding a lock).
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Spawns `task` on `R`, abortable through the returned handle; `Err`
/// (with the task dropped) if `R` cannot spawn.
pub(crate) fn spawn_abortable<R: Runtime>(task: BoxFuture<()>) -> Result<AbortHandle, SpawnError> {
    let slot = Arc::new(Slot {
        state: Mutex::new(SlotState {
            task: Some(task),
            waker: None,
        }),
    });
    R::spawn(Box::pin(Abortable(Arc::clone(&slot))))?;
    Ok(AbortHandle { slot })
}

/// Stops a task started by [`spawn_abortable`].
#[derive(Clone)]
pub(crate) struct AbortHandle {
    slot: Arc<Slot>,
}

impl std::fmt::Debug for AbortHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AbortHandle").finish_non_exhaustive()
    }
}

struct Slot {
    state: Mutex<SlotState>,
}

struct SlotState {
    /// The task, until it ends or is aborted.
    task: Option<BoxFuture<()>>,
    waker: Option<Waker>,
}

impl AbortHandle {
    /// Drops the task's future, here and now: when this returns, the task
    /// is not being polled and never will be again (so it sends nothing
    /// more, and what it owned, sockets included, is closed). Idempotent.
    /// Must not be called from inside the task itself.
    pub(crate) fn abort(&self) {
        let (task, waker) = {
            let mut state = lock(&self.slot.state);
            (state.task.take(), state.waker.take())
        };
        drop(task);
        if let Some(w) = waker {
            w.wake(); // lets the executor retire the empty shell
        }
    }
}

/// The spawned shell around an abortable task. A poll holds the slot's
/// lock, so `abort` waits for a poll in progress to end.
struct Abortable(Arc<Slot>);

impl Future for Abortable {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = lock(&self.0.state);
        let Some(task) = state.task.as_mut() else {
            return Poll::Ready(());
        };
        match task.as_mut().poll(cx) {
            Poll::Ready(()) => {
                state.task = None;
                state.waker = None;
                Poll::Ready(())
            }
            Poll::Pending => {
                match &mut state.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    w => *w = Some(cx.waker().clone()),
                }
                Poll::Pending
            }
        }
    }
}

/// Most notifications a subscriber may fall behind before the oldest are
/// skipped.
const BROADCAST_CAPACITY: usize = 1024;

/// A one-to-many queue of clonable values: every subscriber gets every
/// value sent after it subscribed, until [`Broadcast::close`].
pub(crate) struct Broadcast<T> {
    /// `None` once closed.
    subscribers: Mutex<Option<Vec<Weak<Subscriber<T>>>>>,
}

/// One receiving end of a [`Broadcast`].
pub(crate) struct Subscriber<T> {
    state: Mutex<SubState<T>>,
}

struct SubState<T> {
    queue: VecDeque<T>,
    closed: bool,
    /// Values skipped since the last receive.
    lagged: u64,
    waker: Option<Waker>,
}

impl<T: Clone> Broadcast<T> {
    pub(crate) fn new() -> Self {
        Broadcast {
            subscribers: Mutex::new(Some(Vec::new())),
        }
    }

    /// A new subscriber (ended at once if the broadcast is closed).
    pub(crate) fn subscribe(&self) -> Arc<Subscriber<T>> {
        let mut subs = lock(&self.subscribers);
        let sub = Arc::new(Subscriber {
            state: Mutex::new(SubState {
                queue: VecDeque::new(),
                closed: subs.is_none(),
                lagged: 0,
                waker: None,
            }),
        });
        if let Some(list) = subs.as_mut() {
            list.push(Arc::downgrade(&sub));
        }
        sub
    }

    /// Gives every live subscriber a copy of `value`.
    pub(crate) fn send(&self, value: T) {
        let mut subs = lock(&self.subscribers);
        let Some(list) = subs.as_mut() else { return };
        list.retain(|weak| {
            let Some(sub) = weak.upgrade() else {
                return false;
            };
            let mut state = lock(&sub.state);
            state.queue.push_back(value.clone());
            if state.queue.len() > BROADCAST_CAPACITY {
                state.queue.pop_front();
                state.lagged += 1;
            }
            if let Some(w) = state.waker.take() {
                w.wake();
            }
            true
        });
    }

    /// Ends every subscriber's stream (after what is queued).
    pub(crate) fn close(&self) {
        let list = lock(&self.subscribers).take().unwrap_or_default();
        for sub in list.iter().filter_map(Weak::upgrade) {
            let mut state = lock(&sub.state);
            state.closed = true;
            if let Some(w) = state.waker.take() {
                w.wake();
            }
        }
    }
}

impl<T> Subscriber<T> {
    /// The next value; `None` once closed and drained.
    pub(crate) fn poll_recv(&self, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut state = lock(&self.state);
        if state.lagged > 0 {
            tracing::warn!("notification stream lagged; {} skipped", state.lagged);
            state.lagged = 0;
        }
        if let Some(v) = state.queue.pop_front() {
            return Poll::Ready(Some(v));
        }
        if state.closed {
            return Poll::Ready(None);
        }
        state.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
