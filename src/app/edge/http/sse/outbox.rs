//! The body of an SSE response: it polls the stream's pump, which leaves one event at a
//! time in the outbox for it.

use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use axum::body::Bytes;
use hyper::body::{Body, Frame};

/// The event the pump has written and the body not yet taken.
#[derive(Default)]
pub(super) struct Outbox(Mutex<Option<Bytes>>);

impl Outbox {
    fn lock(&self) -> MutexGuard<'_, Option<Bytes>> {
        // Only a panic between two statements below could poison it; the slot is whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Leaves `event` for the body once it has taken the one before.
    ///
    /// While the outbox is full this is pending without a waker: only [`Pumped`] polls
    /// the pump, and it polls again right after taking the event out.
    pub(super) async fn put(&self, event: Bytes) {
        let mut event = Some(event);
        std::future::poll_fn(|_| {
            let mut slot = self.lock();
            if slot.is_some() {
                return Poll::Pending;
            }
            *slot = event.take();
            Poll::Ready(())
        })
        .await;
    }

    fn take(&self) -> Option<Bytes> {
        self.lock().take()
    }
}

/// The stream's pump, boxed.
type Pump = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The response body: each frame is the pump's next event; it ends after the pump's last.
pub(super) struct Pumped {
    pump: Option<Pump>,
    outbox: Arc<Outbox>,
}

impl Pumped {
    pub(super) fn new(pump: Pump, outbox: Arc<Outbox>) -> Pumped {
        Pumped {
            pump: Some(pump),
            outbox,
        }
    }
}

impl Body for Pumped {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        loop {
            if let Some(event) = self.outbox.take() {
                return Poll::Ready(Some(Ok(Frame::data(event))));
            }
            let Some(pump) = self.pump.as_mut() else {
                return Poll::Ready(None);
            };
            match pump.as_mut().poll(cx) {
                // Its last event, if any, is taken on the next turn.
                Poll::Ready(()) => self.pump = None,
                // It may have left an event before it waits.
                Poll::Pending if self.outbox.lock().is_some() => {}
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.pump.is_none() && self.outbox.lock().is_none()
    }
}
