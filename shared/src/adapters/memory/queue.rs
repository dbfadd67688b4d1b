use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

// foldhash, not SipHash: every delivery is looked up by its number a few times.
use foldhash::{HashMap, HashSet};
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
    /// Shared with the delivery's invisible copy.
    job: Arc<Job>,
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
    /// Visible jobs, soonest first.
    heap: BinaryHeap<Scheduled>,
    next_seq: u64,
    /// Delivered and not settled yet: each comes back, visible again, at its `due`.
    in_flight: HashMap<u64, Scheduled>,
    /// (visible again at, seq) of the deliveries, oldest first (one visibility timeout
    /// for all keeps them in order); a settled one is skipped when reached.
    invisible: VecDeque<(Timestamp, u64)>,
    /// How long a delivered job stays invisible (read with the jobs, under one lock).
    visibility_timeout: Duration,
    /// Deliveries settled after they had come back (a late acknowledgement): their
    /// visible copies are dropped when reached, as SQS deletes the message.
    settled_late: HashSet<u64>,
}

impl Jobs {
    /// Drops settled deliveries from the front of `invisible`, and makes the ones whose
    /// visibility ended by `now` visible again.
    fn settle(&mut self, now: Timestamp) {
        while let Some(&(until, seq)) = self.invisible.front() {
            if !self.in_flight.contains_key(&seq) {
                self.invisible.pop_front();
            } else if until <= now {
                self.invisible.pop_front();
                let back = self.in_flight.remove(&seq).expect("in flight");
                self.heap.push(back);
            } else {
                break;
            }
        }
    }

    /// When the next job is visible: the soonest waiting one, or an unsettled delivery
    /// coming back.
    fn next_due(&self) -> Option<Timestamp> {
        let coming_back = self.invisible.front().map(|(until, _)| *until);
        match (self.heap.peek().map(|s| s.due), coming_back) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn deliver(&mut self, delivered: Scheduled, invisible_until: Timestamp) {
        let seq = delivered.seq;
        let copy = Scheduled { due: invisible_until, deliveries: delivered.deliveries + 1, ..delivered };
        self.in_flight.insert(seq, copy);
        match self.invisible.back() {
            Some((last, _)) if *last > invisible_until => {
                // The visibility timeout was shortened: kept in order all the same.
                let at = self.invisible.partition_point(|(t, _)| *t <= invisible_until);
                self.invisible.insert(at, (invisible_until, seq));
            }
            _ => self.invisible.push_back((invisible_until, seq)),
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
    scheduled_once: std::sync::atomic::AtomicU64,
    /// Wakes a real-time driver when a job arrives.
    arrived: tokio::sync::Notify,
}

impl MemoryQueue {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        let default_budget = Duration::from_secs(crate::budget::DEFAULT_WORKER_TIMEOUT_SECONDS);
        Self {
            clock,
            inner: Mutex::new(Jobs {
                visibility_timeout: default_budget * crate::budget::VISIBILITY_PER_WORKER_TIMEOUT,
                ..Jobs::default()
            }),
            scheduled_once: Default::default(),
            arrived: tokio::sync::Notify::new(),
        }
    }

    fn push(&self, job: Arc<Job>, due: Timestamp, deliveries: u32) {
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
        inner.heap.len() + inner.in_flight.len() - inner.settled_late.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// When each waiting job `picked` chooses is due, soonest first (jobs in delivery
    /// left out): what a test asks about the work queued for later.
    pub fn waiting(&self, picked: impl Fn(&Job) -> bool) -> Vec<Timestamp> {
        let inner = self.inner.lock().expect("queue lock");
        let mut due: Vec<Timestamp> = inner
            .heap
            .iter()
            .filter(|s| !inner.settled_late.contains(&s.seq) && picked(&s.job))
            .map(|s| s.due)
            .collect();
        due.sort();
        due
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
        self.inner.lock().expect("queue lock").visibility_timeout = timeout;
    }

    fn next_due(&self) -> Option<Timestamp> {
        let mut inner = self.inner.lock().expect("queue lock");
        // Only drops settled deliveries: none comes back before the beginning of time.
        inner.settle(Timestamp(i64::MIN));
        // A copy settled late is not due: dropped here, so a driver never waits for it.
        while let Some(top) = inner.heap.peek() {
            let seq = top.seq;
            if !inner.settled_late.remove(&seq) {
                break;
            }
            inner.heap.pop();
        }
        inner.next_due()
    }

    /// The job stays in the queue, invisible, until acknowledged or put back.
    fn pop_due(&self, now: Timestamp) -> Option<Delivery> {
        let mut inner = self.inner.lock().expect("queue lock");
        let visibility = inner.visibility_timeout;
        inner.settle(now);
        if inner.heap.peek().is_none_or(|s| s.due > now) {
            return None;
        }
        let delivered = inner.heap.pop()?;
        if inner.settled_late.remove(&delivered.seq) {
            drop(inner);
            return self.pop_due(now);
        }
        let delivery =
            Delivery { job: delivered.job.clone(), deliveries: delivered.deliveries, receipt: delivered.seq };
        inner.deliver(delivered, now + visibility);
        Some(delivery)
    }

    fn ack(&self, delivery: &Delivery) {
        let mut inner = self.inner.lock().expect("queue lock");
        if inner.in_flight.remove(&delivery.receipt).is_none() && inner.heap.iter().any(|s| s.seq == delivery.receipt) {
            // Rare (a worker past its timeout), so the heap is searched.
            inner.settled_late.insert(delivery.receipt);
        }
    }

    fn redeliver(&self, delivery: Delivery, after: Duration) {
        self.ack(&delivery);
        let due = self.clock.now() + after;
        self.push(delivery.job, due, delivery.deliveries + 1);
    }

    fn put_back(&self, delivery: Delivery) {
        self.ack(&delivery);
        self.push(delivery.job, self.clock.now(), delivery.deliveries);
    }

    async fn arrived(&self) {
        self.arrived.notified().await;
    }
}

#[async_trait]
impl Scheduler for MemoryQueue {
    async fn schedule_once(&self, job: Job, at: Timestamp) -> PortResult<()> {
        self.scheduled_once.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.push(Arc::new(job), at, 0);
        Ok(())
    }
}

#[async_trait]
impl Queue for MemoryQueue {
    async fn enqueue(&self, job: Job, delay: Duration) -> PortResult<()> {
        let due = self.clock.now() + delay;
        self.push(Arc::new(job), due, 0);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapters::memory::VirtualClock;

    #[tokio::test]
    async fn the_in_process_queue_keeps_the_queue_contract() {
        let clock = Arc::new(VirtualClock::new(Timestamp(0)));
        let queue = MemoryQueue::new(clock.clone());
        crate::adapters::contract::in_process_queue(&queue, &clock).await;
        assert!(queue.is_empty());
    }
}
