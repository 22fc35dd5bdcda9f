//! The writer threads of the event and metric files. Producers queue messages on a bounded
//! channel (a full channel blocks them: backpressure, never a drop); one thread receives them
//! and group-commits what has queued up. Producers need not wait for the commits, so readers
//! wait instead: `settled` resolves once every message queued before it is finished, which
//! gives read-your-writes to anyone whose write returned before their read began.

use super::StoreError;
use crate::runtime::Locked;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;
use tokio::sync::watch;

/// A read waits this long at most for earlier writes (a wedged writer must not wedge reads).
pub const SETTLE_WAIT: Duration = Duration::from_secs(10);

/// Messages queued and messages finished, counted in channel order: the first `finished`
/// messages sent are done, so once `finished` reaches what `queued` was when a read began,
/// every message whose send had completed by then is done too.
struct Mark {
    queued: AtomicU64,
    finished: watch::Sender<u64>,
}

pub struct Writer<M> {
    sender: Mutex<Option<mpsc::SyncSender<M>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    mark: Arc<Mark>,
}

/// The writer thread's end of the channel.
pub struct Inbox<M> {
    rx: mpsc::Receiver<M>,
    received: u64,
    mark: Arc<Mark>,
}

impl<M> Inbox<M> {
    fn counted(&mut self, msg: M) -> M {
        self.received += 1;
        msg
    }

    pub(crate) fn recv_timeout(&mut self, wait: Duration) -> Result<M, mpsc::RecvTimeoutError> {
        let msg = self.rx.recv_timeout(wait)?;
        Ok(self.counted(msg))
    }

    /// The next message: within `wait` when there is work left for idle time, else however
    /// long it takes (an idle writer thread wakes for nothing).
    pub(crate) fn recv_within(
        &mut self,
        wait: Option<Duration>,
    ) -> Result<M, mpsc::RecvTimeoutError> {
        match wait {
            Some(wait) => self.recv_timeout(wait),
            None => {
                let msg = self
                    .rx
                    .recv()
                    .map_err(|_| mpsc::RecvTimeoutError::Disconnected)?;
                Ok(self.counted(msg))
            }
        }
    }

    /// A message already queued, without waiting.
    pub(crate) fn try_recv(&mut self) -> Option<M> {
        let msg = self.rx.try_recv().ok()?;
        Some(self.counted(msg))
    }

    /// Marks every message received so far as finished (committed or failed).
    pub(crate) fn finished(&self) {
        self.mark.finished.send_replace(self.received);
    }
}

impl<M> Drop for Inbox<M> {
    /// A writer thread that is gone (closed or panicked) holds no read back.
    fn drop(&mut self) {
        self.mark.finished.send_replace(u64::MAX);
    }
}

impl<M: Send + 'static> Writer<M> {
    /// A writer whose channel holds `capacity` messages; the thread starts with `spawn`.
    pub(crate) fn new(capacity: usize) -> (Self, Inbox<M>) {
        let (tx, rx) = mpsc::sync_channel(capacity);
        let mark = Arc::new(Mark {
            queued: AtomicU64::new(0),
            finished: watch::Sender::new(0),
        });
        let writer = Writer {
            sender: Mutex::new(Some(tx)),
            thread: Mutex::new(None),
            mark: mark.clone(),
        };
        let inbox = Inbox {
            rx,
            received: 0,
            mark,
        };
        (writer, inbox)
    }

    pub(crate) fn spawn(
        &self,
        name: &str,
        run: impl FnOnce() + Send + 'static,
    ) -> Result<(), StoreError> {
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(run)
            .map_err(|e| StoreError::Internal(e.to_string()))?;
        *self.thread.locked() = Some(handle);
        Ok(())
    }

    /// Queues a message, blocking while the channel is full; gives it back once the writer is
    /// closed.
    pub(crate) fn send(&self, msg: M) -> Result<(), M> {
        let sender = self.sender.locked().clone();
        let Some(sender) = sender else {
            return Err(msg);
        };
        self.mark.queued.fetch_add(1, Ordering::SeqCst);
        sender.send(msg).map_err(|mpsc::SendError(msg)| {
            self.mark.queued.fetch_sub(1, Ordering::SeqCst);
            msg
        })
    }

    /// Resolves once every message queued before this call is finished, or after
    /// `SETTLE_WAIT`.
    pub(crate) async fn settled(&self) {
        let target = self.mark.queued.load(Ordering::SeqCst);
        let mut finished = self.mark.finished.subscribe();
        let _ = tokio::time::timeout(SETTLE_WAIT, finished.wait_for(|f| *f >= target)).await;
    }

    /// Stops the thread once it has finished everything queued.
    pub(crate) fn close(&self) {
        self.sender.locked().take();
        if let Some(handle) = self.thread.locked().take() {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A write queued before a read is seen by it even though the writer commits late; a
    /// read that began first does not wait for later writes.
    #[tokio::test]
    async fn reads_wait_for_earlier_writes_only() {
        let (writer, mut inbox) = Writer::<u32>::new(8);
        let writer = Arc::new(writer);
        let committed = Arc::new(Mutex::new(Vec::new()));
        let (go, gate) = mpsc::channel::<()>();
        let store = committed.clone();
        writer
            .spawn("test-writer", move || {
                while let Ok(first) = inbox.recv_timeout(Duration::from_secs(60)) {
                    let mut batch = vec![first];
                    batch.extend(inbox.try_recv());
                    // The commit waits for the test to let it through.
                    if gate.recv().is_err() {
                        return;
                    }
                    store.lock().unwrap().extend(batch);
                    inbox.finished();
                }
            })
            .unwrap();
        writer.settled().await;
        writer.send(1).unwrap();
        let reader = tokio::spawn({
            let (writer, committed) = (writer.clone(), committed.clone());
            async move {
                writer.settled().await;
                committed.lock().unwrap().clone()
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!reader.is_finished(), "the read waits for the queued write");
        go.send(()).unwrap();
        assert_eq!(reader.await.unwrap(), [1]);
        writer.send(2).unwrap();
        go.send(()).unwrap();
        writer.settled().await;
        assert_eq!(*committed.lock().unwrap(), [1, 2]);
        drop(go);
        writer.close();
        assert!(
            writer.send(3).is_err(),
            "a closed writer gives the message back"
        );
        writer.settled().await;
    }
}
