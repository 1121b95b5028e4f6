//! Waiting on a [`Waker`] from a plain thread: the calling thread parks
//! until the waker it lent is woken. The blocking adapter waits for
//! every outcome this way, and [`Notifications`](crate::Notifications)
//! offers a blocking iterator with it.

use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

struct ThreadWaker(Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    static WAKER: Waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
}

/// A waker that unparks the calling thread (one per thread, reused).
pub fn thread_waker() -> Waker {
    WAKER.with(Waker::clone)
}

/// Polls `poll` with this thread's waker, parking in between, until it is
/// ready or `deadline` passes (`None`: the deadline passed first).
/// Spurious unparks only cost another poll.
pub fn block_until<T>(
    deadline: Option<Instant>,
    mut poll: impl FnMut(&mut Context<'_>) -> Poll<T>,
) -> Option<T> {
    let waker = thread_waker();
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = poll(&mut cx) {
            return Some(v);
        }
        match deadline {
            None => std::thread::park(),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return None;
                }
                std::thread::park_timeout(d - now);
            }
        }
    }
}
