//! The server's notifications as a stream: `async` (`recv().await`, or a
//! [`Stream`](futures_core::Stream)) and blocking (an [`Iterator`],
//! [`Notifications::recv_timeout`]) on the same value, for every adapter.

use std::pin::Pin;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use mcpwire::mcp::ServerNotification;

use crate::sync::Subscriber;
use crate::wait::block_until;

/// Server notifications (log messages, list changes, resource updates…)
/// from the moment it was made; it ends when the connection closes. One
/// that falls more than 1024 behind skips the oldest.
pub struct Notifications {
    rx: Arc<Subscriber<ServerNotification>>,
}

impl std::fmt::Debug for Notifications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifications").finish_non_exhaustive()
    }
}

impl Notifications {
    pub(crate) fn new(rx: Arc<Subscriber<ServerNotification>>) -> Self {
        Notifications { rx }
    }

    /// The next notification; `None` once the connection is closed.
    pub async fn recv(&mut self) -> Option<ServerNotification> {
        std::future::poll_fn(|cx| self.rx.poll_recv(cx)).await
    }

    /// The next notification, blocking this thread at most `timeout`:
    /// `Err(Timeout)` if none came, `Err(Disconnected)` once the
    /// connection is closed and every notification was taken.
    pub fn recv_timeout(
        &mut self,
        timeout: Duration,
    ) -> Result<ServerNotification, RecvTimeoutError> {
        match block_until(Some(Instant::now() + timeout), |cx| self.rx.poll_recv(cx)) {
            Some(Some(n)) => Ok(n),
            Some(None) => Err(RecvTimeoutError::Disconnected),
            None => Err(RecvTimeoutError::Timeout),
        }
    }

    /// The next notification if one is waiting.
    pub fn try_recv(&mut self) -> Option<ServerNotification> {
        block_until(Some(Instant::now()), |cx| self.rx.poll_recv(cx)).flatten()
    }
}

impl futures_core::Stream for Notifications {
    type Item = ServerNotification;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.rx.poll_recv(cx)
    }
}

/// Blocks the calling thread until the next notification; `None` once the
/// connection is closed (in `async` code, use [`Notifications::recv`]).
impl Iterator for Notifications {
    type Item = ServerNotification;

    fn next(&mut self) -> Option<ServerNotification> {
        block_until(None, |cx| self.rx.poll_recv(cx)).flatten()
    }
}
