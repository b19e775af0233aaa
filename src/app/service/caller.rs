//! What the service knows of whoever sent a request, and the ways back to them that the
//! edge provides: the principal a transport verified, the client's name, a question the
//! user can be asked, where a run's progress goes, and when a created run may start.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::domain::{DomainError, Principal, TaskId};
use crate::ports::ProgressEntry;

/// The sender of one request, as the service sees it. The edge implements it for its
/// connections (a stdio line, an HTTP request).
#[async_trait::async_trait]
pub trait Caller: Send + Sync {
    /// The principal the transport verified already (HTTP); `None` where the service
    /// reads the configured token source (stdio).
    fn principal(&self) -> Option<&Principal>;

    /// The client's name (`clientInfo.name`, or an HTTP `User-Agent` product).
    fn client_name(&self) -> Option<&str>;

    /// Whether the user can be asked a question on this request.
    fn can_ask(&self) -> bool;

    /// Asks the user the yes/no question `question`, waiting at most `wait` for the answer.
    ///
    /// # Errors
    /// When the question cannot be put (the store that carries answers is down, or too
    /// many questions are open).
    async fn confirm(&self, question: &str, wait: Duration) -> Result<Answer, DomainError>;

    /// Holds `run` until the answer to this request is on its way.
    fn hold(&self, run: Begin);

    /// This request now waits for `task` (only the first call counts).
    fn waits_for_task(&self, task: TaskId);
}

/// The user's answer to a confirmation question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// An explicit yes.
    Yes,
    /// Answered, but not yes.
    No,
    /// The user declined to answer.
    Declined,
    /// The user dismissed the question.
    Cancelled,
    /// An answer that could not be read.
    Unreadable,
    /// The client answered that it could not ask.
    CouldNotAsk,
    /// No answer within the wait, or the connection closed.
    None,
}

impl Answer {
    /// Why the call was not confirmed, in the user's terms (`None` for a yes).
    pub fn refusal(self) -> Option<&'static str> {
        Some(match self {
            Answer::Yes => return None,
            Answer::No => "answered no",
            Answer::Declined => "declined",
            Answer::Cancelled => "cancelled",
            Answer::Unreadable => "unreadable answer",
            Answer::CouldNotAsk => "the client could not ask",
            Answer::None => "no answer",
        })
    }
}

/// Where a run's progress goes besides the store: the client that asked for it. Reports
/// must not block (a slow client loses steps, not the run its time).
pub trait ProgressListener: Send + Sync {
    /// One new step of `task`.
    fn progress(&self, task: TaskId, entry: &ProgressEntry);
}

/// The progress listener of a request, when the client asked to follow its progress.
pub type Progress = Option<Arc<dyn ProgressListener>>;

/// A created task's run, held back until dropped: the child's spawn (a fork that blocks
/// its thread for a millisecond or more) comes after the answer with the handle.
#[must_use = "the run starts when this is dropped"]
pub struct Begin {
    _run: oneshot::Sender<()>,
}

impl Begin {
    /// A hold, and what the run awaits (it resolves when the hold is dropped).
    pub fn new() -> (Begin, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        (Begin { _run: tx }, rx)
    }
}
