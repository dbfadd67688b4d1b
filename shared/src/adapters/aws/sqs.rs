//! SQS behind the queue port: one standard queue per job kind (judge, respond,
//! summarize, reflect, forget), jobs as versioned JSON, per-message `DelaySeconds` up to 900
//! (longer waits go through the scheduler, see `Deps::enqueue_after`).

use std::time::Duration;

use async_trait::async_trait;
use aws_sdk_sqs::Client;
use aws_sdk_sqs::operation::receive_message::ReceiveMessageError;

use crate::budget::JobKind;
use crate::domain::Job;
use crate::ports::{MAX_QUEUE_DELAY, PortError, PortResult, Queue};

/// The queue URLs (settings `JUDGE_QUEUE_URL`, `RESPOND_QUEUE_URL`).
#[derive(Debug, Clone)]
pub struct QueueUrls {
    pub judge: String,
    pub respond: String,
    pub summarize: String,
    pub reflect: String,
    pub forget: String,
}

impl QueueUrls {
    /// The queue of the worker that runs `kind`.
    pub fn for_kind(&self, kind: JobKind) -> &str {
        match kind {
            JobKind::Judge => &self.judge,
            JobKind::Respond => &self.respond,
            JobKind::Summarize => &self.summarize,
            JobKind::Reflect => &self.reflect,
            JobKind::Forget => &self.forget,
        }
    }

    /// The kind whose queue has the ARN `arn` (an SQS event record's source), by the
    /// queue's name, the last part of both its URL and its ARN.
    pub fn kind_of_arn(&self, arn: &str) -> Option<JobKind> {
        let name = arn.rsplit(':').next()?;
        JobKind::ALL.into_iter().find(|kind| self.for_kind(*kind).rsplit('/').next() == Some(name))
    }

    /// The queue of the worker that runs `job` ([`JobKind::of`] says which).
    pub fn for_job(&self, job: &Job) -> &str {
        self.for_kind(JobKind::of(job))
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

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub fn urls(&self) -> &QueueUrls {
        &self.urls
    }
}

/// Batches one poller runs at once, like a Lambda event source's concurrency.
const CONCURRENT_BATCHES: usize = 4;

/// Receives from the `kind` worker's queue and runs what arrives until the task is dropped: the
/// in-process stand-in for Lambda's event source mapping (`kuuki serve --aws`).
/// Succeeded messages are deleted; failed ones become visible again after their
/// [`crate::worker::redelivery_delay`], as the worker Lambdas set it. A batch that runs
/// past `WORKER_TIMEOUT_SECONDS` is stopped, as Lambda would stop it, and its messages
/// come back after the visibility timeout.
pub async fn poll_forever(deps: std::sync::Arc<crate::deps::Deps>, client: Client, kind: JobKind, url: String) {
    let batches = std::sync::Arc::new(tokio::sync::Semaphore::new(CONCURRENT_BATCHES));
    loop {
        let slot = batches.clone().acquire_owned().await.expect("the semaphore is never closed");
        let received = receive_batch(&client, &url).await;
        let messages = match received {
            Ok(messages) => messages,
            Err(error) => {
                tracing::warn!(?error, %url, "receiving from SQS failed; trying again shortly");
                tokio::time::sleep(Duration::from_secs(2)).await;
                continue;
            }
        };
        if messages.is_empty() {
            continue;
        }
        let (deps, client, url) = (deps.clone(), client.clone(), url.clone());
        tokio::spawn(async move {
            run_received(&deps, &client, kind, &url, messages).await;
            drop(slot);
        });
    }
}

/// Up to ten messages from `url`, waiting up to 5 s for one (a long poll). Outside any
/// job: the poll keeps the longest cut-offs, not a small budget's, which could end an
/// attempt before SQS answers an empty queue (and lose what it received then until the
/// visibility timeout).
pub async fn receive_batch(
    client: &Client,
    url: &str,
) -> Result<Vec<aws_sdk_sqs::types::Message>, aws_sdk_sqs::error::SdkError<ReceiveMessageError>> {
    let out = client
        .receive_message()
        .queue_url(url)
        .max_number_of_messages(10)
        .wait_time_seconds(5)
        .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::ApproximateReceiveCount)
        .customize()
        .config_override(aws_sdk_sqs::config::Builder::default().timeout_config(super::config::outside_job_timeouts()))
        .send()
        .await?;
    Ok(out.messages.unwrap_or_default())
}

async fn run_received(
    deps: &crate::deps::Deps,
    client: &Client,
    kind: JobKind,
    url: &str,
    messages: Vec<aws_sdk_sqs::types::Message>,
) {
    use crate::worker::{QueueMessage, run_batch};
    use aws_sdk_sqs::types::MessageSystemAttributeName;

    let batch: Vec<QueueMessage> = messages
        .iter()
        .map(|m| {
            let receives =
                m.attributes.as_ref().and_then(|a| a.get(&MessageSystemAttributeName::ApproximateReceiveCount));
            queue_message(
                m.message_id.clone().unwrap_or_default(),
                m.body.as_deref().unwrap_or_default(),
                receives.map(String::as_str),
            )
        })
        .collect();
    let timeout = deps.settings.budget.worker_timeout;
    let stop_after = deps.budget.job_deadline();
    let Ok(failed) = tokio::time::timeout(timeout, run_batch(deps, kind, &batch, stop_after)).await else {
        tracing::error!(?timeout, %url, "a batch was stopped at the worker timeout; SQS will deliver it again");
        return;
    };
    let receipt_of = |id: &str| {
        messages.iter().find(|m| m.message_id.as_deref() == Some(id)).and_then(|m| m.receipt_handle.as_deref())
    };
    retry_later(client, url, &failed, receipt_of, deps.budget.settle).await;
    for m in &messages {
        if failed.iter().any(|f| Some(&f.id) == m.message_id.as_ref()) {
            continue;
        }
        if let Some(handle) = &m.receipt_handle
            && let Err(error) = client.delete_message().queue_url(url).receipt_handle(handle).send().await
        {
            tracing::warn!(?error, "deleting a handled SQS message failed; it may be delivered again");
        }
    }
}

/// Makes each failed message of a batch visible again after its delay (its receipt
/// handle found by `receipt_of` from its id), ten to a ChangeMessageVisibilityBatch
/// call, instead of after the visibility timeout every delivery starts with, which must
/// outlast the longest job and would hold a job that failed in a second for 24 minutes.
/// A message this does not reach (no delay, no receipt handle, a call that fails or runs
/// past `within`, which the time budget leaves for it) comes back at the visibility
/// timeout: later, never lost.
pub async fn retry_later<'m>(
    client: &Client,
    url: &str,
    failed: &[crate::worker::FailedMessage],
    receipt_of: impl Fn(&str) -> Option<&'m str>,
    within: Duration,
) {
    use aws_sdk_sqs::types::ChangeMessageVisibilityBatchRequestEntry as Entry;
    let failed: Vec<(&str, Duration)> =
        failed.iter().filter_map(|f| Some((receipt_of(&f.id)?, f.retry_after?))).collect();
    let calls = failed.chunks(10).map(|chunk| async move {
        let entries = chunk.iter().enumerate().map(|(i, (handle, after))| {
            // SQS takes whole seconds up to 12 hours: rounded up, never sooner than asked.
            let seconds = i32::try_from(after.as_secs_f64().ceil() as u64).unwrap_or(i32::MAX).min(43_200);
            Entry::builder().id(i.to_string()).receipt_handle(*handle).visibility_timeout(seconds).build()
        });
        let entries = entries.collect::<Result<Vec<_>, _>>().expect("id and receipt handle are set");
        let call = client
            .change_message_visibility_batch()
            .queue_url(url)
            .set_entries(Some(entries))
            // Inside the settle window, with time for a retry: the job's own cut-offs
            // (10 s an attempt by default) would spend the window on one stalled attempt.
            .customize()
            .config_override(aws_sdk_sqs::config::Builder::default().timeout_config(settle_timeouts(within)));
        match call.send().await {
            Ok(out) => {
                for refused in out.failed {
                    tracing::warn!(code = %refused.code, message = ?refused.message, %url,
                        "SQS kept a failed message's visibility timeout; it comes back later");
                }
            }
            Err(error) => tracing::warn!(?error, %url,
                "setting when failed messages come back failed; they come back at the visibility timeout"),
        }
    });
    if tokio::time::timeout(within, futures_util::future::join_all(calls)).await.is_err() {
        tracing::warn!(?within, %url, "setting when failed messages come back took too long; they come back at the visibility timeout");
    }
}

/// The cut-offs of a settle call given `within`: two attempts when each can have
/// [`crate::budget::AWS_MIN_ATTEMPT_TIMEOUT`] (and at most the job calls' longest),
/// else one attempt of the whole window (shorter attempts would fail on a cold
/// connection, and the SDK's backoff would leave no time to retry).
fn settle_timeouts(within: Duration) -> aws_config::timeout::TimeoutConfig {
    use crate::budget::{AWS_ATTEMPT_TIMEOUT, AWS_MIN_ATTEMPT_TIMEOUT};
    let attempt = if within >= AWS_MIN_ATTEMPT_TIMEOUT * 2 { (within / 2).min(AWS_ATTEMPT_TIMEOUT) } else { within };
    super::config::timeouts(attempt, within)
}

/// Creates kuuki's queues (one per [`JobKind`]) where they do not exist and returns their URLs and
/// ARNs (`kuuki setup-aws`; in AWS the SAM template owns them), each made visible
/// again `visibility` after a delivery that did not finish (the time budget's).
pub async fn create_queues(
    client: &Client,
    prefix: &str,
    visibility: Duration,
) -> Result<(QueueUrls, Vec<String>), super::SetupError> {
    use aws_sdk_sqs::types::QueueAttributeName;
    async fn create(
        client: &Client,
        name: &str,
        attributes: &[(QueueAttributeName, String)],
    ) -> Result<(String, String), super::SetupError> {
        use super::SetupError;
        let mut create = client.create_queue().queue_name(name);
        for (k, v) in attributes {
            create = create.attributes(k.clone(), v.clone());
        }
        let url = create.send().await.map_err(SetupError::of(format!("create queue {name}")))?.queue_url.ok_or_else(
            || SetupError { action: format!("create queue {name}"), detail: "no URL in the answer".into() },
        )?;
        let arn = client
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await
            .map_err(SetupError::of(format!("queue attributes of {url}")))?
            .attributes
            .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
            .unwrap_or_default();
        Ok((url, arn))
    }
    let mut urls = Vec::new();
    let mut arns = Vec::new();
    // As in the SAM template: a dead-letter queue after five deliveries, and the
    // budget's visibility timeout.
    let visibility = visibility.as_secs();
    for name in JobKind::ALL.map(JobKind::as_str) {
        let (_, dead_letters) = create(client, &format!("{prefix}-{name}-dead-letters"), &[]).await?;
        let redrive = format!(r#"{{"deadLetterTargetArn":"{dead_letters}","maxReceiveCount":"5"}}"#);
        let (url, arn) = create(
            client,
            &format!("{prefix}-{name}"),
            &[
                (QueueAttributeName::RedrivePolicy, redrive),
                (QueueAttributeName::VisibilityTimeout, visibility.to_string()),
            ],
        )
        .await?;
        urls.push(url);
        arns.push(arn);
    }
    Ok((
        QueueUrls {
            judge: urls[0].clone(),
            respond: urls[1].clone(),
            summarize: urls[2].clone(),
            reflect: urls[3].clone(),
            forget: urls[4].clone(),
        },
        arns,
    ))
}

pub use crate::domain::{decode_job, encode_job};

/// A received message as the worker takes it: its id, its decoded job, and how often
/// it was delivered before (from SQS's `ApproximateReceiveCount`, which counts this
/// delivery; none read as a first delivery).
pub fn queue_message(id: String, body: &str, receive_count: Option<&str>) -> crate::worker::QueueMessage {
    let deliveries = receive_count.and_then(|n| n.parse::<u32>().ok()).map_or(0, |n| n.saturating_sub(1));
    crate::worker::QueueMessage { id, job: decode_job(body), deliveries }
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

    /// One SendMessageBatch per queue (up to ten jobs each, billed as one request);
    /// a job SQS did not take fails the call, and the caller's redelivery queues them
    /// all again (the workers' claims make a second copy harmless).
    async fn enqueue_all(&self, jobs: Vec<(Job, Duration)>) -> PortResult<()> {
        use aws_sdk_sqs::types::SendMessageBatchRequestEntry;
        if let [(job, delay)] = &jobs[..] {
            return self.enqueue(job.clone(), *delay).await;
        }
        let failed = |message: String| PortError::Backend { backend: "sqs", message };
        let mut by_queue: Vec<(&str, Vec<SendMessageBatchRequestEntry>)> = Vec::new();
        for (i, (job, delay)) in jobs.iter().enumerate() {
            if *delay > MAX_QUEUE_DELAY {
                return Err(failed(format!("a delay of {} s is beyond SQS's 900 s", delay.as_secs())));
            }
            let entry = SendMessageBatchRequestEntry::builder()
                .id(i.to_string())
                .message_body(encode_job(job))
                .delay_seconds(delay.as_secs() as i32)
                .build()
                .map_err(|e| failed(format!("a batch entry: {e}")))?;
            let url = self.urls.for_job(job);
            match by_queue.iter_mut().find(|(u, entries)| *u == url && entries.len() < 10) {
                Some((_, entries)) => entries.push(entry),
                None => by_queue.push((url, vec![entry])),
            }
        }
        for (url, entries) in by_queue {
            let sent = self
                .client
                .send_message_batch()
                .queue_url(url)
                .set_entries(Some(entries))
                .send()
                .await
                .map_err(|e| failed(format!("send message batch: {e:?}").chars().take(500).collect()))?;
            if let Some(entry) = sent.failed.first() {
                return Err(failed(format!("send message batch: entry {} refused: {}", entry.id, entry.code)));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQS counts the delivery in hand; a count that is missing or unreadable reads as
    /// a first delivery (the shortest redelivery delay), never as an error.
    #[test]
    fn a_receive_count_is_the_deliveries_before_this_one() {
        let body = encode_job(&Job::SweepFacts);
        let deliveries = |count| queue_message("m".into(), &body, count).deliveries;
        assert_eq!(deliveries(Some("1")), 0);
        assert_eq!(deliveries(Some("3")), 2);
        assert_eq!(deliveries(None), 0);
        assert_eq!(deliveries(Some("many")), 0);
        assert_eq!(deliveries(Some("0")), 0);
    }

    #[test]
    fn the_templates_sweep_message_is_a_job() {
        // infra/template.yaml's FactSweepSchedule sends exactly this.
        assert_eq!(decode_job(r#"{"v":1,"job":"sweep_facts"}"#), Ok(Job::SweepFacts));
        assert_eq!(decode_job(&encode_job(&Job::SweepFacts)), Ok(Job::SweepFacts));
    }

    #[test]
    fn a_remember_job_is_a_new_kind_on_the_summarize_queue() {
        use crate::domain::{ChannelId, ThreadKey, Ts};
        let thread = ThreadKey::top_level(ChannelId("C1".into()));
        let remember = Job::Remember { thread: thread.clone(), ts: Ts::new("1700000000.000100") };
        let body = encode_job(&remember);
        assert!(body.starts_with(r#"{"v":1,"job":"remember","#), "{body}");
        assert_eq!(decode_job(&body), Ok(remember.clone()));
        // A body queued before this kind existed still reads the same.
        assert_eq!(
            decode_job(r#"{"v":1,"job":"judge","thread":{"channel":"C1","root":null},"ts":"1700000000.000100"}"#),
            Ok(Job::Judge { thread, ts: Ts::new("1700000000.000100") })
        );
        let urls = QueueUrls {
            judge: "judge".into(),
            respond: "respond".into(),
            summarize: "summarize".into(),
            reflect: "reflect".into(),
            forget: "https://sqs.eu-west-1.amazonaws.com/123456789012/kuuki-forget".into(),
        };
        assert_eq!(urls.for_job(&remember), "summarize");
        assert_eq!(crate::budget::JobKind::of(&remember), crate::budget::JobKind::Summarize);
        assert_eq!(crate::worker::Pool::of(&remember), crate::worker::Pool::Memory);
        assert_eq!(urls.kind_of_arn("arn:aws:sqs:eu-west-1:123456789012:kuuki-forget"), Some(JobKind::Forget));
        // A forget bounded to a server travels as version 2, and this build reads it.
        let bounded = Job::sample_forget(Some("41771983423143937"));
        let body = encode_job(&bounded);
        assert!(body.starts_with(r#"{"v":2,"job":"forget","#), "{body}");
        assert_eq!(decode_job(&body), Ok(bounded));
        // A forget's second look goes to the forget queue as version 3: a build from
        // before it refuses it by its version and leaves it for a newer worker.
        let late = Job::ForgetLate {
            channel: ChannelId("C1".into()),
            ts: crate::domain::Ts::new("1.000001"),
            user: crate::domain::UserId("U1".into()),
            name: "alice".into(),
            channels: vec![ChannelId("C1".into()), ChannelId("C2".into())],
            server: Some("41771983423143937".into()),
        };
        let body = encode_job(&late);
        assert!(body.starts_with(r#"{"v":3,"job":"forget_late","#), "{body}");
        assert_eq!(decode_job(&body), Ok(late.clone()));
        assert_eq!(urls.for_job(&late), urls.forget.as_str());
        assert!(JobKind::Forget.runs(&late) && JobKind::Reflect.runs(&late) && !JobKind::Judge.runs(&late));
        assert_eq!(crate::worker::Pool::of(&late), crate::worker::Pool::Forget);
        // A Slack workspace's purge after an uninstall: the forget queue, version 4.
        let purge = Job::PurgeSlack {
            team: "T1".into(),
            gone_at: crate::domain::Ts::new("1700000000.000000"),
            workspace: None,
        };
        let body = encode_job(&purge);
        assert!(body.starts_with(r#"{"v":4,"job":"purge_slack","#), "{body}");
        assert_eq!(decode_job(&body), Ok(purge.clone()));
        assert_eq!(urls.for_job(&purge), urls.forget.as_str());
        assert!(JobKind::Forget.runs(&purge) && JobKind::Reflect.runs(&purge) && !JobKind::Respond.runs(&purge));
        assert_eq!(crate::worker::Pool::of(&purge), crate::worker::Pool::Forget);
        // A question's pick-up and its answer: version 5.
        let pick_up = Job::PickUp {
            thread: crate::domain::ThreadKey::top_level(crate::domain::ChannelId("C1".into())),
            ts: crate::domain::Ts::new("1700000000.000100"),
        };
        let body = encode_job(&pick_up);
        assert!(body.starts_with(r#"{"v":5,"job":"pick_up","#), "{body}");
        assert_eq!(decode_job(&body), Ok(pick_up.clone()));
        assert_eq!(urls.for_job(&pick_up), urls.judge.as_str());
        // A job of a workspace among several, and its purge: version 6.
        let elsewhere = Job::PickUp {
            thread: crate::domain::ThreadKey::top_level(crate::domain::ChannelId("T1/C1".into())),
            ts: crate::domain::Ts::new("1700000000.000100"),
        };
        let body = encode_job(&elsewhere);
        assert!(body.starts_with(r#"{"v":6,"job":"pick_up","#), "{body}");
        assert_eq!(decode_job(&body), Ok(elsewhere));
        let purge_one = Job::PurgeSlack {
            team: "T1".into(),
            gone_at: crate::domain::Ts::new("1700000000.000000"),
            workspace: Some("T1".into()),
        };
        let purge_two = Job::PurgeSlack {
            team: "T2".into(),
            gone_at: crate::domain::Ts::new("1700000000.000000"),
            workspace: Some("T2".into()),
        };
        assert_ne!(purge_one.dedup_key(), purge_two.dedup_key(), "each workspace's purge its own, marks at one time");
        let body = encode_job(&purge_one);
        assert!(body.starts_with(r#"{"v":6,"job":"purge_slack","#) && body.contains(r#""workspace":"T1""#), "{body}");
        assert_eq!(decode_job(&body), Ok(purge_one));
        assert!(decode_job(&body.replacen(r#""v":6"#, r#""v":7"#, 1)).is_err(), "a newer version is refused");
        assert_eq!(urls.kind_of_arn("arn:aws:sqs:eu-west-1:123456789012:kuuki-forget-dead-letters"), None);
    }

    /// A settle window of the default budget (7.5 s) gets two attempts; a small one
    /// (under 4 s) one attempt of the whole window, not two too short to connect; a
    /// large one attempts no longer than a job's calls (10 s).
    #[test]
    fn a_settle_window_is_split_into_attempts_only_when_they_can_connect() {
        let attempt = |ms: u64| {
            let config = settle_timeouts(Duration::from_millis(ms));
            (config.operation_attempt_timeout(), config.operation_timeout())
        };
        let ms = |ms: u64| Some(Duration::from_millis(ms));
        assert_eq!(attempt(7_500), (ms(3_750), ms(7_500)));
        assert_eq!(attempt(3_999), (ms(3_999), ms(3_999)));
        assert_eq!(attempt(375), (ms(375), ms(375)));
        assert_eq!(attempt(28_125), (ms(10_000), ms(28_125)));
    }
}
