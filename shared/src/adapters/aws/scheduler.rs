//! EventBridge Scheduler behind the scheduler port: a one-time `at()` schedule that
//! sends the job to its worker's queue and deletes itself after (`ActionAfterCompletion:
//! DELETE`). The schedule's name comes from the job and the time, so scheduling the same
//! job twice is one schedule.

use async_trait::async_trait;
use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::error::SdkError;
use aws_sdk_scheduler::types::{ActionAfterCompletion, FlexibleTimeWindow, FlexibleTimeWindowMode, Target};
use sha2::{Digest, Sha256};

use super::sqs::encode_job;
use crate::budget::JobKind;
use crate::domain::{Job, Timestamp};
use crate::ports::{PortError, PortResult, Scheduler};

/// Where one-time schedules go (settings `SCHEDULE_GROUP`, `SCHEDULER_ROLE_ARN`,
/// `JUDGE_QUEUE_ARN`, `RESPOND_QUEUE_ARN`).
#[derive(Debug, Clone)]
pub struct ScheduleTargets {
    pub group: String,
    pub role_arn: String,
    pub judge_queue_arn: String,
    pub respond_queue_arn: String,
    pub summarize_queue_arn: String,
    pub reflect_queue_arn: String,
    pub forget_queue_arn: String,
}

pub struct EventBridgeScheduler {
    client: Client,
    targets: ScheduleTargets,
}

impl EventBridgeScheduler {
    pub fn new(client: Client, targets: ScheduleTargets) -> Self {
        EventBridgeScheduler { client, targets }
    }
}

/// `at(2026-01-05T09:00:00)`, UTC.
pub fn at_expression(at: Timestamp) -> String {
    let utc = at.to_utc_string();
    format!("at({}T{})", &utc[..10], &utc[11..19])
}

/// A schedule name (at most 64 of `[0-9A-Za-z-_.]`) unique to the job and the time.
pub fn schedule_name(job: &Job, at: Timestamp) -> String {
    let digest = Sha256::digest(format!("{}@{}", job.dedup_key(), at.as_micros()));
    format!("kuuki-{}", &hex::encode(digest)[..40])
}

fn backend(message: String) -> PortError {
    PortError::Backend { backend: "scheduler", message: message.chars().take(500).collect() }
}

#[async_trait]
impl Scheduler for EventBridgeScheduler {
    async fn schedule_once(&self, job: Job, at: Timestamp) -> PortResult<()> {
        // The queue of the worker that runs the job, as `QueueUrls::for_job` picks it.
        let arn = match JobKind::of(&job) {
            JobKind::Judge => &self.targets.judge_queue_arn,
            JobKind::Respond => &self.targets.respond_queue_arn,
            JobKind::Summarize => &self.targets.summarize_queue_arn,
            JobKind::Reflect => &self.targets.reflect_queue_arn,
            JobKind::Forget => &self.targets.forget_queue_arn,
        };
        let target = Target::builder()
            .arn(arn)
            .role_arn(&self.targets.role_arn)
            .input(encode_job(&job))
            .build()
            .map_err(|e| backend(e.to_string()))?;
        let window = FlexibleTimeWindow::builder()
            .mode(FlexibleTimeWindowMode::Off)
            .build()
            .map_err(|e| backend(e.to_string()))?;
        let result = self
            .client
            .create_schedule()
            .name(schedule_name(&job, at))
            .group_name(&self.targets.group)
            .schedule_expression(at_expression(at))
            .schedule_expression_timezone("UTC")
            .flexible_time_window(window)
            .target(target)
            .action_after_completion(ActionAfterCompletion::Delete)
            .send()
            .await;
        match result {
            Ok(_) => Ok(()),
            // The same job at the same time was scheduled already.
            Err(SdkError::ServiceError(e)) if e.err().is_conflict_exception() => Ok(()),
            Err(e) => Err(backend(format!("create schedule: {e:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn at_expressions_are_utc_without_zone() {
        assert_eq!(at_expression(Timestamp(1_767_603_600 * 1_000_000)), "at(2026-01-05T09:00:00)");
    }
}
