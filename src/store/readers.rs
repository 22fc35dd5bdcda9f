//! The threads blocking storage work runs on (a read transaction, an event or metric file
//! read): a few of their own, not tokio's blocking pool. A burst of API reads then keeps the
//! allocator's pages of `READERS` threads, not of as many threads as the burst was wide (each
//! thread keeps its own: the notify bench's peak, docs/performance.md); and what else blocks
//! on tokio's pool (a name lookup for an outbound request waiting out a dead resolver, a file
//! read) never leaves the store's reads waiting behind it.

use super::StoreError;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex, OnceLock};

/// Threads the store's blocking work runs on: the reads are short and a gateway has two to
/// four cores.
const READERS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

/// The queue the reader threads take jobs from, started at its first use.
fn queue() -> &'static Sender<Job> {
    static QUEUE: OnceLock<Sender<Job>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (send, receive) = channel::<Job>();
        let receive = Arc::new(Mutex::new(receive));
        for n in 0..READERS {
            let receive = receive.clone();
            // A thread that cannot start leaves the others; with none, `run` says so.
            let _ = std::thread::Builder::new()
                .name(format!("svc-read-{n}"))
                .spawn(move || serve(&receive));
        }
        send
    })
}

fn serve(jobs: &Mutex<Receiver<Job>>) {
    loop {
        let next = match jobs.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        match next {
            Ok(job) => job(),
            Err(_) => return,
        }
    }
}

/// Runs `f` on a reader thread; a panic in it is an internal error of this call alone.
pub(super) async fn run<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    let (done, answer) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
            .unwrap_or_else(|_| Err(StoreError::Internal("a storage read panicked".into())));
        let _ = done.send(result);
    });
    queue()
        .send(job)
        .map_err(|_| StoreError::Internal("the storage readers are gone".into()))?;
    answer
        .await
        .map_err(|_| StoreError::Internal("the storage readers are gone".into()))?
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Work runs off the caller's thread, a panic fails only its own call, `READERS` calls run
    /// at once (each waits for the others), and more calls than threads all finish.
    #[tokio::test]
    async fn reads_run_on_the_readers_and_a_panic_fails_only_its_call() {
        let name = run(|| Ok(std::thread::current().name().map(str::to_string)))
            .await
            .unwrap();
        assert!(name.unwrap_or_default().starts_with("svc-read-"));
        let panicked = run(|| -> Result<(), StoreError> { panic!("a test panic") }).await;
        assert!(matches!(panicked, Err(StoreError::Internal(_))));
        let together = Arc::new(std::sync::Barrier::new(READERS));
        let many = futures_util::future::join_all((0..READERS * 8).map(|i| {
            let together = together.clone();
            run(move || {
                if i < READERS {
                    together.wait();
                }
                Ok(i)
            })
        }))
        .await;
        let sum: usize = many.into_iter().map(Result::unwrap).sum();
        assert_eq!(sum, (0..READERS * 8).sum::<usize>());
    }
}
