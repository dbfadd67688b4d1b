//! SQS behind the queue port: one standard queue per worker (judge, respond), jobs as
//! versioned JSON, per-message `DelaySeconds` up to 900 (longer waits go through the
//! scheduler, see `Deps::enqueue_after`).

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;

use crate::domain::{Job, JobEnvelope};
use crate::ports::{MAX_QUEUE_DELAY, PortError, PortResult, Queue};

/// The queue URLs (settings `JUDGE_QUEUE_URL`, `RESPOND_QUEUE_URL`).
#[derive(Debug, Clone)]
pub struct QueueUrls {
    pub judge: String,
    pub respond: String,
}

impl QueueUrls {
    pub fn for_job(&self, job: &Job) -> &str {
        match job {
            Job::Judge { .. } => &self.judge,
            Job::Respond { .. } => &self.respond,
        }
    }
}

pub struct SqsQueue {
    client: Client,
    urls: QueueUrls,
}

impl SqsQueue {
    pub fn new(client: Client, urls: QueueUrls) -> Self {
        SqsQueue { client, urls }
    }
}

/// A job as a queue message body.
pub fn encode_job(job: &Job) -> String {
    serde_json::to_string(&JobEnvelope::new(job.clone())).expect("jobs serialize")
}

/// A queue message body back to a job; a body of another version or shape is an error.
pub fn decode_job(body: &str) -> Result<Job, String> {
    let envelope: JobEnvelope = serde_json::from_str(body).map_err(|e| format!("not a kuuki job: {e}"))?;
    if envelope.v != JobEnvelope::VERSION {
        return Err(format!("job version {} (this build reads {})", envelope.v, JobEnvelope::VERSION));
    }
    Ok(envelope.job)
}

#[async_trait]
impl Queue for SqsQueue {
    async fn enqueue(&self, job: Job, delay: Duration) -> PortResult<()> {
        if delay > MAX_QUEUE_DELAY {
            return Err(PortError::Backend {
                backend: "sqs",
                message: format!("a delay of {} s is beyond SQS's 900 s; use the scheduler", delay.as_secs()),
            });
        }
        self.client
            .send_message()
            .queue_url(self.urls.for_job(&job))
            .message_body(encode_job(&job))
            .delay_seconds(delay.as_secs() as i32)
            .send()
            .await
            .map_err(|e| PortError::Backend {
                backend: "sqs",
                message: format!("send message: {e:?}").chars().take(500).collect(),
            })?;
        Ok(())
    }
}
