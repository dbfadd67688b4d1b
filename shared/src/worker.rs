//! Runs queued jobs: the in-process stand-in for SQS delivering to the judge and
//! respond functions, with redelivery after a failure and a dead-letter limit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use crate::budget::JobKind;
use crate::deps::Deps;
use crate::domain::{EventKind, Job, RespondMode, Timestamp};
use crate::ports::{Delivery, InProcessQueue, JobObserver, JobOutcome, PortError, PortResult};
use crate::record::record;
use crate::{judge, respond};

/// A failed job's first redelivery comes this long after the failure; each later one
/// waits four times longer (see [`redelivery_delay`]).
pub const REDELIVERY_DELAY: Duration = Duration::from_secs(30);
/// Deliveries before a job goes to the dead letters (SQS maxReceiveCount).
pub const MAX_DELIVERIES: u32 = 5;

/// One delivery of one job to its worker. A job of a Slack workspace among several
/// that has no installation (uninstalled since it was queued) is dropped with one line.
pub async fn run_job(deps: &Deps, job: &Job) -> PortResult<()> {
    // A forget is carried out though the workspace uninstalled kuuki since it was asked
    // (what it stored of the person must still go).
    let forget = matches!(job, Job::Forget { .. } | Job::ForgetLate { .. });
    if let (Some(workspaces), crate::domain::Workspace::Slack(workspace), false) =
        (&deps.workspaces, job.channel().workspace(), forget)
    {
        match workspaces.installed(workspace).await? {
            Some(installed) => deps.know_workspace_bot(workspace, &installed.bot_user),
            None => {
                tracing::info!(kind = job.kind_name(), workspace, "dropped: the Slack workspace is not installed");
                return Ok(());
            }
        }
    }
    match job {
        Job::Judge { thread, ts } => judge::handle(deps, thread, ts).await,
        Job::PickUp { thread, ts } => judge::pickup::handle(deps, thread, ts).await,
        Job::Respond { thread, ts, mode, response_type, emoji } => {
            respond::handle(deps, thread, ts, *mode, *response_type, emoji.as_deref()).await
        }
        Job::Summarize { channel, ts } => crate::memory::summarize::handle(deps, channel, ts).await,
        Job::Reflect { channel, ts } => crate::memory::reflect::handle(deps, channel, ts).await,
        Job::SweepFacts => crate::memory::reflect::sweep(deps).await,
        Job::Remember { thread, ts } => crate::memory::remember(deps, thread, ts).await,
        Job::Open { thread, ts } => respond::opener::handle(deps, thread, ts).await,
        Job::Forget { channel, user, whom, ts, reply, server } => {
            crate::memory::forget::carry_out(deps, channel, user, whom, ts, reply, server.as_deref()).await
        }
        Job::ForgetLate { channel, ts, user, name, channels, server } => {
            let late = crate::memory::forget::Late { channel, ts, user, name, channels, server: server.as_deref() };
            crate::memory::forget::look_again(deps, &late).await
        }
        Job::PurgeSlack { team, gone_at, workspace } => {
            crate::memory::purge::purge_slack(deps, team, gone_at, workspace.as_deref()).await
        }
    }
}

/// Which worker pool a job waits for in `kuuki serve`: a slow model answering one
/// channel must never hold up reactions, judgments or mentions elsewhere, so each kind
/// of work has its own slots (as each has its own Lambda in AWS).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pool {
    /// Answers to mentions, replies and name calls.
    RespondDirect,
    /// Answers kuuki decided to give unasked (reactions included).
    RespondAmbient,
    Judge,
    /// Summaries, reflections, the fact sweep.
    Memory,
    /// Forget requests (and their second looks): someone waits for the answer, so they
    /// never wait for slots that reflections hold while the model thinks (in AWS, the
    /// forget queue's own concurrency).
    Forget,
}

impl Pool {
    pub const ALL: [Pool; 5] = [Pool::RespondDirect, Pool::RespondAmbient, Pool::Judge, Pool::Memory, Pool::Forget];

    pub fn of(job: &Job) -> Self {
        match job {
            Job::Respond { mode: RespondMode::Direct, .. } => Pool::RespondDirect,
            Job::Respond { .. } | Job::Open { .. } => Pool::RespondAmbient,
            Job::Judge { .. } | Job::PickUp { .. } => Pool::Judge,
            Job::Summarize { .. } | Job::Reflect { .. } | Job::SweepFacts | Job::Remember { .. } => Pool::Memory,
            Job::Forget { .. } | Job::ForgetLate { .. } | Job::PurgeSlack { .. } => Pool::Forget,
        }
    }

    /// Jobs of this kind `kuuki serve` runs at once.
    pub fn slots(self) -> usize {
        match self {
            Pool::RespondDirect => 8,
            Pool::RespondAmbient => 4,
            Pool::Judge => 8,
            Pool::Memory => 2,
            Pool::Forget => 2,
        }
    }
}

/// Runs jobs as they come due on the real clock until the task is dropped: the
/// in-process stand-in for SQS pollers and Lambda (see [`run_until_stopped`]).
pub async fn run_forever(deps: Arc<Deps>, queue: Arc<dyn InProcessQueue>) {
    let (_never, stopping) = tokio::sync::watch::channel(false);
    run_until_stopped(deps, queue, stopping, Duration::ZERO, None).await;
}

/// Runs jobs as they come due on the real clock (`kuuki serve`) until `stopping` turns
/// true: then takes no more and gives the running ones up to `drain` to finish. One
/// still running after that is stopped unsettled: its job comes back (a durable
/// queue's next process takes it up at once). Each pool runs its own jobs at once up to
/// its slots; a job that runs past `WORKER_TIMEOUT_SECONDS` is stopped as Lambda would
/// stop it, and comes back after the visibility timeout. `observer` hears how each
/// delivery ended and how long it ran.
pub async fn run_until_stopped(
    deps: Arc<Deps>,
    queue: Arc<dyn InProcessQueue>,
    mut stopping: tokio::sync::watch::Receiver<bool>,
    drain: Duration,
    observer: Option<Arc<dyn JobObserver>>,
) {
    queue.set_visibility_timeout(deps.budget.visibility_timeout());
    let pools: HashMap<Pool, Arc<Semaphore>> =
        Pool::ALL.into_iter().map(|pool| (pool, Arc::new(Semaphore::new(pool.slots())))).collect();
    let mut running = tokio::task::JoinSet::new();
    while !*stopping.borrow() {
        while let Some(delivery) = queue.pop_due(deps.clock.now()) {
            let slots = pools[&Pool::of(&delivery.job)].clone();
            let (deps, queue, mut stop) = (deps.clone(), queue.clone(), stopping.clone());
            let observer = observer.clone();
            running.spawn(async move {
                // A job still waiting for a slot when kuuki stops never starts: it goes
                // back as it was, its delivery not counted (stops never dead-letter it).
                let _slot = tokio::select! {
                    biased;
                    () = stopped(&mut stop) => {
                        queue.put_back(delivery);
                        return;
                    }
                    slot = slots.acquire_owned() => slot.expect("the semaphore is never closed"),
                };
                let timeout = deps.settings.budget.worker_timeout;
                let job = delivery.job.clone();
                let started = tokio::time::Instant::now();
                let outcome = match tokio::time::timeout(timeout, delivered(&deps, &*queue, delivery)).await {
                    Ok(outcome) => outcome,
                    Err(_) => {
                        tracing::error!(
                            ?job,
                            ?timeout,
                            "job stopped at the worker timeout; it will be delivered again"
                        );
                        JobOutcome::TimedOut
                    }
                };
                if let Some(observer) = observer {
                    observer.job_finished(JobKind::of(&job), outcome, started.elapsed());
                }
            });
        }
        // Finished jobs leave the set as they go, so it holds only running ones.
        while running.try_join_next().is_some() {}
        let wait = match queue.next_due() {
            Some(due) => Duration::from_micros((due.as_micros() - deps.clock.now().as_micros()).max(0) as u64),
            None => Duration::from_secs(3600),
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = queue.arrived() => {}
            () = stopped(&mut stopping) => {}
        }
    }
    if running.is_empty() {
        return;
    }
    tracing::info!(jobs = running.len(), ?drain, "stopping: letting the running jobs finish");
    if tokio::time::timeout(drain, async { while running.join_next().await.is_some() {} }).await.is_err() {
        tracing::warn!(jobs = running.len(), "stopped jobs still running; they come back when kuuki starts again");
        running.abort_all();
    }
}

/// Completes once `stopping` turns true; never when nobody can stop it any more.
async fn stopped(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    if stopping.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Runs every job due at or before `until`, oldest first, moving the clock to each
/// job's time with `advance`. Returns how many deliveries failed.
pub async fn run_due(deps: &Deps, queue: &dyn InProcessQueue, until: Timestamp, advance: impl Fn(Timestamp)) -> u32 {
    let mut failures = 0;
    while let Some(due) = queue.next_due().filter(|due| *due <= until) {
        advance(due);
        let Some(delivery) = queue.pop_due(due) else { break };
        if !deliver(deps, queue, delivery).await {
            failures += 1;
        }
    }
    failures
}

/// One delivery: a failed job comes back after [`redelivery_delay`] (when another
/// delivery holds its claim, once that claim has run out), until [`MAX_DELIVERIES`]
/// send it to the dead letters. Returns whether it succeeded.
pub async fn deliver(deps: &Deps, queue: &dyn InProcessQueue, delivery: Delivery) -> bool {
    delivered(deps, queue, delivery).await == JobOutcome::Done
}

/// [`deliver`], saying how the delivery ended.
async fn delivered(deps: &Deps, queue: &dyn InProcessQueue, delivery: Delivery) -> JobOutcome {
    if delivery.deliveries >= MAX_DELIVERIES {
        // Delivered that often without an answer (its workers died): dead letters.
        dead_letter(deps, &delivery.job, "its workers stopped before finishing");
        queue.ack(&delivery);
        return JobOutcome::DeadLettered;
    }
    let error = match run_job(deps, &delivery.job).await {
        Ok(()) => {
            queue.ack(&delivery);
            return JobOutcome::Done;
        }
        Err(error) => error,
    };
    tracing::warn!(%error, job = ?delivery.job, "job failed; it will be delivered again");
    if delivery.deliveries + 1 >= MAX_DELIVERIES {
        dead_letter(deps, &delivery.job, &error.to_string());
        queue.ack(&delivery);
        JobOutcome::DeadLettered
    } else {
        let after = redelivery_delay(&error, delivery.deliveries, deps.budget.visibility_timeout());
        queue.redeliver(delivery, after);
        JobOutcome::Failed
    }
}

/// When a job that failed on its `deliveries`+1st delivery comes back: after
/// [`REDELIVERY_DELAY`] growing fourfold with each delivery (30 s, 2 min, 8 min, …), so a
/// short outage is ridden out within a minute and a long one is not hammered, or later
/// when a busy service asked for longer (a rate limit that outlasted the wait inside
/// the call: coming back at once would spend the deliveries on it) or another delivery
/// holds the job's claim for longer; never later than `longest` (the visibility
/// timeout, which a delivery that dies waits anyway). In process and on SQS alike.
pub fn redelivery_delay(error: &PortError, deliveries: u32, longest: Duration) -> Duration {
    let backoff = REDELIVERY_DELAY.saturating_mul(4u32.saturating_pow(deliveries));
    let wait = match error {
        PortError::Busy { retry_after, .. } => backoff.max(*retry_after),
        _ => backoff,
    };
    wait.min(longest)
}

fn dead_letter(deps: &Deps, job: &Job, error: &str) {
    let stage = crate::budget::JobKind::of(job).stage();
    record(
        deps,
        job.channel(),
        job.thread().root.clone(),
        job.ts().clone(),
        EventKind::Dropped { stage, reason: format!("dead letter after {MAX_DELIVERIES} deliveries: {error}") },
    );
}

/// One message of a queue batch (an SQS record), decoded by the queue's adapter: the
/// job, or why its body is not one.
#[derive(Debug, Clone)]
pub struct QueueMessage {
    pub id: String,
    pub job: Result<Job, crate::domain::JobDecodeError>,
    /// Deliveries of this message before this one (SQS's ApproximateReceiveCount - 1).
    pub deliveries: u32,
}

/// A message of a batch that failed, and when it should come back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailedMessage {
    pub id: String,
    /// [`redelivery_delay`] for a job that failed; `None` (the queue's visibility
    /// timeout) for a body this build cannot run, which a newer build being deployed
    /// may: it waits longest before it tries again on its way to the dead letters.
    pub retry_after: Option<Duration>,
}

/// Runs a batch from the queue of the `kind` worker, each job on its own and all at
/// once (so a batch takes as long as its slowest job, which the time budget bounds):
/// returns the ones that failed (SQS `batchItemFailures`) and when each should come
/// back, so only those are delivered again. A body that is not a job, or a job of another kind (whose worker
/// has other permissions), fails alone and goes to the dead letters after its
/// deliveries.
///
/// A job still running after `stop_after` (at most [`crate::budget::TimeBudget::job_deadline`];
/// less when the platform says the worker has less time left) is stopped.
pub async fn run_batch(
    deps: &Deps,
    kind: JobKind,
    messages: &[QueueMessage],
    stop_after: Duration,
) -> Vec<FailedMessage> {
    use tracing::Instrument;
    let longest = deps.budget.visibility_timeout();
    let outcomes = messages.iter().map(|message| {
        let span = tracing::info_span!("job", message_id = %message.id);
        async move {
            let job = message.job.as_ref().map_err(|reason| {
                tracing::error!(%reason, "a queue message that is not a kuuki job");
                None
            })?;
            if !kind.runs(job) {
                let reason = format!("a {} job on the {} worker's queue", JobKind::of(job).as_str(), kind.as_str());
                tracing::error!(%reason, ?job, "a job for another worker; it is not run");
                return Err(None);
            }
            // Stopped before the worker's own timeout, as a crash would stop it (claims
            // and posting marks make that safe): the batch's other jobs are still
            // reported, and this one comes back once any claim it took has run out
            // (a stopped job releases none), not after the visibility timeout. Only a
            // job that ignores its budget gets here.
            let outcome = match tokio::time::timeout(stop_after, run_job(deps, job)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(PortError::Busy {
                    message: format!("stopped after {:.1} s, before the worker's timeout", stop_after.as_secs_f64()),
                    retry_after: deps.budget.claim_lease() + Duration::from_secs(1),
                }),
            };
            outcome.map_err(|error| {
                let after = redelivery_delay(&error, message.deliveries, longest);
                tracing::warn!(%error, ?job, ?after, "job failed; SQS will deliver it again");
                Some(after)
            })
        }
        .instrument(span)
    });
    futures_util::future::join_all(outcomes)
        .await
        .into_iter()
        .zip(messages)
        .filter_map(|(outcome, message)| {
            outcome.err().map(|retry_after| FailedMessage { id: message.id.clone(), retry_after })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_job_comes_back_sooner_than_the_visibility_timeout_and_later_each_time() {
        let longest = Duration::from_secs(1440);
        let failed = PortError::Backend { backend: "dynamodb", message: "throttled".into() };
        let waits: Vec<u64> = (0..5).map(|n| redelivery_delay(&failed, n, longest).as_secs()).collect();
        assert_eq!(waits, [30, 120, 480, 1440, 1440], "fourfold, up to the visibility timeout");
        let busy = PortError::Busy { message: "rate limited".into(), retry_after: Duration::from_secs(2) };
        assert_eq!(redelivery_delay(&busy, 0, longest), Duration::from_secs(30), "no sooner than a failure");
        let busy = PortError::Busy { message: "rate limited".into(), retry_after: Duration::from_secs(90) };
        assert_eq!(redelivery_delay(&busy, 0, longest), Duration::from_secs(90), "as late as the service asked");
        let held = PortError::Busy { message: "claim".into(), retry_after: Duration::from_secs(9000) };
        assert_eq!(redelivery_delay(&held, 0, longest), longest, "never past the visibility timeout");
    }
}
