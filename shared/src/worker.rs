//! Runs queued jobs: the in-process stand-in for SQS delivering to the judge and
//! respond functions, with redelivery after a failure and a dead-letter limit.

use std::time::Duration;

use crate::adapters::memory::MemoryQueue;
use crate::adapters::memory::queue::Scheduled;
use crate::deps::Deps;
use crate::domain::{EventKind, Job, Stage, Timestamp};
use crate::ingest::record;
use crate::ports::PortResult;
use crate::{judge, respond};

/// Like an SQS visibility timeout: a failed job comes back after this long.
pub const REDELIVERY_DELAY: Duration = Duration::from_secs(30);
/// Deliveries before a job goes to the dead letters (SQS maxReceiveCount).
pub const MAX_DELIVERIES: u32 = 5;

/// One delivery of one job to its worker.
pub async fn run_job(deps: &Deps, job: &Job) -> PortResult<()> {
    match job {
        Job::Judge { thread, ts } => judge::handle(deps, thread, ts).await,
        Job::Respond {
            thread,
            ts,
            mode,
            response_type,
            emoji,
        } => respond::handle(deps, thread, ts, *mode, *response_type, emoji.as_deref()).await,
        Job::Summarize { channel, ts } => crate::memory::summarize::handle(deps, channel, ts).await,
        Job::Reflect { channel, ts } => crate::memory::reflect::handle(deps, channel, ts).await,
        Job::SweepFacts => crate::memory::reflect::sweep(deps).await,
    }
}

/// Jobs `kuuki serve` runs at once: one slow model call or a Slack rate limit must
/// not hold up every other channel.
pub const CONCURRENT_JOBS: usize = 16;

/// Runs jobs as they come due on the real clock until the task is dropped: the
/// in-process stand-in for SQS pollers (`kuuki serve`), several at a time.
pub async fn run_forever(deps: std::sync::Arc<Deps>, queue: std::sync::Arc<MemoryQueue>) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(CONCURRENT_JOBS));
    loop {
        while let Some(scheduled) = queue.pop_due(deps.clock.now()) {
            let permit = slots.clone().acquire_owned().await.expect("the semaphore is never closed");
            let (deps, queue) = (deps.clone(), queue.clone());
            tokio::spawn(async move {
                deliver(&deps, &queue, scheduled).await;
                drop(permit);
            });
        }
        let wait = match queue.next_due() {
            Some(due) => Duration::from_micros((due.as_micros() - deps.clock.now().as_micros()).max(0) as u64),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = queue.arrived() => {}
        }
    }
}

/// Runs every job due at or before `until`, oldest first, moving the clock to each
/// job's time with `advance`. Returns how many deliveries failed.
pub async fn run_due(deps: &Deps, queue: &MemoryQueue, until: Timestamp, advance: impl Fn(Timestamp)) -> u32 {
    let mut failures = 0;
    while let Some(due) = queue.next_due().filter(|due| *due <= until) {
        advance(due);
        let Some(scheduled) = queue.pop_due(due) else { break };
        if !deliver(deps, queue, scheduled).await {
            failures += 1;
        }
    }
    failures
}

/// One delivery: a failed job comes back after [`REDELIVERY_DELAY`], until
/// [`MAX_DELIVERIES`] send it to the dead letters. Returns whether it succeeded.
async fn deliver(deps: &Deps, queue: &MemoryQueue, scheduled: Scheduled) -> bool {
    let Err(error) = run_job(deps, &scheduled.job).await else {
        return true;
    };
    tracing::warn!(%error, job = ?scheduled.job, "job failed; it will be delivered again");
    if scheduled.deliveries + 1 >= MAX_DELIVERIES {
        let job = &scheduled.job;
        let stage = match job {
            Job::Judge { .. } => Stage::Judge,
            Job::Respond { .. } => Stage::Respond,
            Job::Summarize { .. } => Stage::Summarize,
            Job::Reflect { .. } | Job::SweepFacts => Stage::Reflect,
        };
        record(
            deps,
            job.channel(),
            job.thread().root.clone(),
            job.ts().clone(),
            EventKind::Dropped {
                stage,
                reason: format!("dead letter after {MAX_DELIVERIES} failed deliveries: {error}"),
            },
        );
    } else {
        queue.redeliver(scheduled, REDELIVERY_DELAY);
    }
    false
}

/// One message of a queue batch (an SQS record).
#[derive(Debug, Clone)]
pub struct QueueMessage {
    pub id: String,
    pub body: String,
}

/// Runs a batch of queued jobs, each on its own: returns the ids of the ones that
/// failed (SQS `batchItemFailures`), so only those are delivered again. A body that is
/// not a job fails alone and goes to the dead letters after its deliveries.
pub async fn run_batch(deps: &Deps, messages: &[QueueMessage]) -> Vec<String> {
    use tracing::Instrument;
    let mut failed = Vec::new();
    for message in messages {
        let span = tracing::info_span!("job", message_id = %message.id);
        let outcome = async {
            let job = crate::adapters::aws::sqs::decode_job(&message.body).map_err(|reason| {
                tracing::error!(%reason, "a queue message that is not a kuuki job");
                reason
            })?;
            run_job(deps, &job).await.map_err(|error| {
                tracing::warn!(%error, ?job, "job failed; SQS will deliver it again");
                error.to_string()
            })
        }
        .instrument(span)
        .await;
        if outcome.is_err() {
            failed.push(message.id.clone());
        }
    }
    failed
}
