use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;

use crate::domain::{Job, Timestamp};
use crate::ports::{Clock, Delivery, InProcessQueue, PortResult, Queue, Scheduler};

/// A job waiting for its time, with how often it was delivered before.
#[derive(Debug, Clone)]
struct Scheduled {
    due: Timestamp,
    /// Names the queue message: a delivery's invisible copy carries the same one.
    seq: u64,
    job: Job,
    deliveries: u32,
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

#[derive(Default)]
struct Jobs {
    heap: BinaryHeap<Scheduled>,
    next_seq: u64,
    /// Messages whose delivery ended (done, or put back): their invisible copies in
    /// the heap are skipped.
    acked: HashSet<u64>,
}

impl Jobs {
    /// Drops finished messages' copies from the top of the heap.
    fn settle_top(&mut self) {
        while let Some(top) = self.heap.peek() {
            if !self.acked.remove(&top.seq) {
                break;
            }
            self.heap.pop();
        }
    }
}

/// Delayed jobs on a timer heap over the [`Clock`]; a driver pops what is due
/// (replay: on the virtual clock; serve: on the real one). Like SQS, a delivered job
/// stays in the queue, invisible for the visibility timeout, until its delivery is
/// acknowledged: a worker that dies or times out loses nothing, the job comes back.
/// It is the in-process scheduler too: a timer heap has no delay limit.
pub struct MemoryQueue {
    clock: Arc<dyn Clock>,
    inner: Mutex<Jobs>,
    visibility_timeout: Mutex<Duration>,
    scheduled_once: std::sync::atomic::AtomicU64,
    /// Wakes a real-time driver when a job arrives.
    arrived: tokio::sync::Notify,
}

impl MemoryQueue {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let default_budget = Duration::from_secs(crate::budget::DEFAULT_WORKER_TIMEOUT_SECONDS);
        Self {
            clock,
            inner: Mutex::new(Jobs::default()),
            visibility_timeout: Mutex::new(default_budget * crate::budget::VISIBILITY_PER_WORKER_TIMEOUT),
            scheduled_once: Default::default(),
            arrived: tokio::sync::Notify::new(),
        }
    }

    fn push(&self, job: Job, due: Timestamp, deliveries: u32) {
        let mut inner = self.inner.lock().expect("queue lock");
        inner.next_seq += 1;
        let seq = inner.next_seq;
        inner.heap.push(Scheduled { due, seq, job, deliveries });
        drop(inner);
        self.arrived.notify_one();
    }

    /// Jobs waiting or in delivery.
    pub fn len(&self) -> usize {
        let inner = self.inner.lock().expect("queue lock");
        inner.heap.len() - inner.acked.len()
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
impl InProcessQueue for MemoryQueue {
    /// The time budget's visibility timeout.
    fn set_visibility_timeout(&self, timeout: Duration) {
        *self.visibility_timeout.lock().expect("queue lock") = timeout;
    }

    fn next_due(&self) -> Option<Timestamp> {
        let mut inner = self.inner.lock().expect("queue lock");
        inner.settle_top();
        inner.heap.peek().map(|s| s.due)
    }

    /// The job stays in the queue, invisible, until acknowledged or put back.
    fn pop_due(&self, now: Timestamp) -> Option<Delivery> {
        let visibility = *self.visibility_timeout.lock().expect("queue lock");
        let mut inner = self.inner.lock().expect("queue lock");
        inner.settle_top();
        if inner.heap.peek().is_none_or(|s| s.due > now) {
            return None;
        }
        let delivered = inner.heap.pop()?;
        inner.heap.push(Scheduled { due: now + visibility, deliveries: delivered.deliveries + 1, ..delivered.clone() });
        Some(Delivery { job: delivered.job, deliveries: delivered.deliveries, receipt: delivered.seq })
    }

    fn ack(&self, delivery: &Delivery) {
        self.inner.lock().expect("queue lock").acked.insert(delivery.receipt);
    }

    fn redeliver(&self, delivery: Delivery, after: Duration) {
        self.ack(&delivery);
        let due = self.clock.now() + after;
        self.push(delivery.job, due, delivery.deliveries + 1);
    }

    async fn arrived(&self) {
        self.arrived.notified().await;
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
