use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{Job, Timestamp};
use crate::ports::{Clock, PortResult, Queue, Scheduler};

/// A job waiting for its time, with how often it was delivered before.
#[derive(Debug, Clone)]
pub struct Scheduled {
    pub due: Timestamp,
    seq: u64,
    pub job: Job,
    pub deliveries: u32,
}

impl PartialEq for Scheduled {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.seq) == (other.due, other.seq)
    }
}
impl Eq for Scheduled {}
impl PartialOrd for Scheduled {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Scheduled {
    // Reversed: the heap's top is the earliest job, first come first served on ties.
    fn cmp(&self, other: &Self) -> Ordering {
        (other.due, other.seq).cmp(&(self.due, self.seq))
    }
}

/// Delayed jobs on a timer heap over the [`Clock`]; a driver pops what is due
/// (replay: on the virtual clock; serve: on the real one). It is the in-process
/// scheduler too: a timer heap has no delay limit.
pub struct MemoryQueue {
    clock: Arc<dyn Clock>,
    inner: Mutex<(BinaryHeap<Scheduled>, u64)>,
    scheduled_once: std::sync::atomic::AtomicU64,
    /// Wakes a real-time driver when a job arrives.
    arrived: tokio::sync::Notify,
}

impl MemoryQueue {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            clock,
            inner: Mutex::new((BinaryHeap::new(), 0)),
            scheduled_once: Default::default(),
            arrived: tokio::sync::Notify::new(),
        }
    }

    fn push(&self, job: Job, due: Timestamp, deliveries: u32) {
        let mut inner = self.inner.lock().expect("queue lock");
        inner.1 += 1;
        let seq = inner.1;
        inner.0.push(Scheduled {
            due,
            seq,
            job,
            deliveries,
        });
        drop(inner);
        self.arrived.notify_one();
    }

    /// Completes when a job was added since the last call (or is added now).
    pub async fn arrived(&self) {
        self.arrived.notified().await;
    }

    /// When the earliest job is due.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.inner.lock().expect("queue lock").0.peek().map(|s| s.due)
    }

    /// The earliest job due at or before `now`.
    pub fn pop_due(&self, now: Timestamp) -> Option<Scheduled> {
        let mut inner = self.inner.lock().expect("queue lock");
        if inner.0.peek().is_some_and(|s| s.due <= now) {
            inner.0.pop()
        } else {
            None
        }
    }

    /// Puts a job back after a failed delivery, like a message becoming visible again.
    pub fn redeliver(&self, scheduled: Scheduled, after: Duration) {
        let due = self.clock.now() + after;
        self.push(scheduled.job, due, scheduled.deliveries + 1);
    }

    pub fn len(&self) -> usize {
        self.inner.lock().expect("queue lock").0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many jobs came through the scheduler port.
    pub fn scheduled_once(&self) -> u64 {
        self.scheduled_once.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[async_trait]
impl Scheduler for MemoryQueue {
    async fn schedule_once(&self, job: Job, at: Timestamp) -> PortResult<()> {
        self.scheduled_once.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.push(job, at, 0);
        Ok(())
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn enqueue(&self, job: Job, delay: Duration) -> PortResult<()> {
        let due = self.clock.now() + delay;
        self.push(job, due, 0);
        Ok(())
    }
}
