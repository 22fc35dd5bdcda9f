//! Locks taken whatever a panicking holder left: what svc's locks guard (caches, watcher lists,
//! statuses) is not left half-changed in a way that matters more than keeping the process up,
//! and a worker that panicked is restarted (`worker`), so a poisoned lock is taken as it is.
//! One helper for it instead of the same `unwrap_or_else` at every site.

use std::sync::{Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};

pub trait Locked<T: ?Sized> {
    /// `lock`, poisoned or not.
    fn locked(&self) -> MutexGuard<'_, T>;
}

impl<T: ?Sized> Locked<T> for Mutex<T> {
    fn locked(&self) -> MutexGuard<'_, T> {
        self.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub trait RwLocked<T: ?Sized> {
    /// `read`, poisoned or not.
    fn read_now(&self) -> RwLockReadGuard<'_, T>;
    /// `write`, poisoned or not.
    fn write_now(&self) -> RwLockWriteGuard<'_, T>;
}

impl<T: ?Sized> RwLocked<T> for RwLock<T> {
    fn read_now(&self) -> RwLockReadGuard<'_, T> {
        self.read().unwrap_or_else(|e| e.into_inner())
    }

    fn write_now(&self) -> RwLockWriteGuard<'_, T> {
        self.write().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock whose holder panicked is taken as it was left.
    #[test]
    fn a_poisoned_lock_is_taken_as_it_is() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let r = std::sync::Arc::new(RwLock::new(1));
        let (m2, r2) = (m.clone(), r.clone());
        let _ = std::thread::spawn(move || {
            let _held = (m2.lock().unwrap(), r2.write().unwrap());
            panic!("poison both");
        })
        .join();
        assert!(m.is_poisoned() && r.is_poisoned());
        *m.locked() += 1;
        *r.write_now() += 1;
        assert_eq!((*m.locked(), *r.read_now()), (2, 2));
    }
}
