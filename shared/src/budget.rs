//! One time budget for the at-least-once machinery (docs/design.md §5): what one job may
//! spend on the model and the platform fits inside the worker's timeout, a claim's
//! lease outlives one attempt, and the queue's visibility timeout outlives the lease,
//! so a job whose worker died comes back to find the claim expired and takes it over.
//!
//! ```text
//! LLM calls × (LLM_TIMEOUT_SECONDS × attempts + retry waits) + post + margin + settle
//!   < WORKER_TIMEOUT_SECONDS < claim lease < visibility timeout (6 × the worker timeout)
//! ```
//!
//! The SAM template, `kuuki setup-aws` and the workers read these numbers from here.

use std::time::Duration;

use crate::domain::Job;

/// The worker timeout when `WORKER_TIMEOUT_SECONDS` is not set (each worker Lambda's
/// `Timeout` in the template).
pub const DEFAULT_WORKER_TIMEOUT_SECONDS: u64 = 240;
/// AWS's advice for SQS event sources: a visibility timeout of at least six times the
/// function's timeout, so retries of a throttled batch do not make it visible early.
pub const VISIBILITY_PER_WORKER_TIMEOUT: u32 = 6;
/// One chat API call's share of the time budget is that of this many attempts and the
/// longest wait between them ([`chat_call`]); within it every 429 is waited out.
pub const CHAT_ATTEMPTS: u32 = 2;
/// Attempts of one chat API call at most, however short the waits (a server that
/// answers 429 with no wait at all is not hammered).
pub const CHAT_MAX_ATTEMPTS: u32 = 10;
/// The longest `Retry-After` one LLM call waits out between attempts.
pub const MAX_LLM_RETRY_WAIT: Duration = Duration::from_secs(5);

/// One attempt of an AWS call (DynamoDB, SQS, the scheduler, Secrets Manager) is cut
/// off after this long at most (less in a small budget, [`TimeBudget::aws_attempt`]);
/// SQS's long polls (5 s) fit inside.
pub const AWS_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// One AWS call with the SDK's retries at its worst, at most (less in a small budget,
/// [`TimeBudget::aws_call`]): the default budget's margin (30 s) holds it.
pub const AWS_CALL_TIMEOUT: Duration = Duration::from_secs(20);
/// The shortest cut-off of one attempt of an AWS call: a new TLS connection, or an
/// emulator's first read of a table, can take most of a second.
pub const AWS_MIN_ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// The shortest cut-off of one AWS call (two of the shortest attempts). The ingress
/// cuts its calls here, well inside its own 10 s timeout; a job's calls come to it when
/// the margin is shorter (`WORKER_TIMEOUT_SECONDS` under 32), and then the job's
/// deadline, not the margin, is what stops a call that never gets an answer.
pub const AWS_MIN_CALL_TIMEOUT: Duration = Duration::from_secs(4);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBudget {
    /// How long a worker may run one delivery (a batch) before it is stopped (Lambda's
    /// timeout; `kuuki serve` stops it the same way).
    pub worker_timeout: Duration,
    /// One LLM call at its worst: every attempt timing out, every wait at its longest.
    pub llm_call: Duration,
    /// One chat API call at its worst (a post, a reaction, a lookup).
    pub chat_call: Duration,
    /// Store reads and writes around the calls.
    pub margin: Duration,
    /// After a batch's jobs: telling SQS when its failed messages should come back
    /// (one ChangeMessageVisibilityBatch call), before the worker's timeout stops it.
    pub settle: Duration,
}

impl TimeBudget {
    /// The budget of a worker that may run `worker_timeout`, whose LLM calls may take
    /// `llm_timeout` an attempt with `llm_max_retries` retries, and whose chat calls
    /// `chat_timeout` an attempt (the settings: `Settings::time_budget`).
    pub fn new(worker_timeout: Duration, llm_timeout: Duration, llm_max_retries: u32, chat_timeout: Duration) -> Self {
        let attempts = llm_max_retries + 1;
        let llm_wait = llm_retry_wait_cap(llm_timeout);
        TimeBudget {
            worker_timeout,
            llm_call: llm_timeout * attempts + llm_wait * llm_max_retries,
            chat_call: chat_call(chat_timeout),
            margin: worker_timeout / 8,
            settle: worker_timeout / 32,
        }
    }

    /// The most one job of this kind may spend (its LLM calls, its posts, the margin),
    /// and the settling of its batch after it.
    /// A reply's first part is what the budget must cover: once it is posted the
    /// answer is complete, and a later part lost to a timeout is not posted twice.
    pub fn needed_for(&self, kind: JobKind) -> Duration {
        let (llm_calls, chat_calls) = match kind {
            // The conversation's display names (looked up together, bounded by one call).
            JobKind::Judge => (1, 1),
            // A reflection asks the model once.
            JobKind::Reflect => (1, 0),
            // Forgetting someone asks no model: it looks up the person's display name and
            // sends the answer.
            JobKind::Forget => (0, 2),
            // A lookup for an earlier attempt's post, the display names, the post.
            JobKind::Respond => (1, 3),
            // The channel's memory, then the workspace's.
            JobKind::Summarize => (2, 0),
        };
        self.llm_call * llm_calls + self.chat_call * chat_calls + self.margin + self.settle
    }

    /// How long one job of a queue batch may run before the worker stops it: the worker
    /// timeout less the time it leaves to settle the batch. A job within its budget
    /// ([`TimeBudget::needed_for`]) never reaches it.
    pub fn job_deadline(&self) -> Duration {
        self.worker_timeout.saturating_sub(self.settle)
    }

    /// One AWS call a job makes, at its worst (the SDK's retries included): inside the
    /// margin, so a call that never gets an answer fails its job before the job's
    /// deadline stops it; between [`AWS_MIN_CALL_TIMEOUT`] (the margin of a worker
    /// timeout under 32 s is shorter) and [`AWS_CALL_TIMEOUT`].
    pub fn aws_call(&self) -> Duration {
        self.margin.clamp(AWS_MIN_CALL_TIMEOUT, AWS_CALL_TIMEOUT)
    }

    /// One attempt of such a call: half of [`TimeBudget::aws_call`], so the SDK has
    /// time for a retry; between [`AWS_MIN_ATTEMPT_TIMEOUT`] and [`AWS_ATTEMPT_TIMEOUT`].
    pub fn aws_attempt(&self) -> Duration {
        (self.aws_call() / 2).clamp(AWS_MIN_ATTEMPT_TIMEOUT, AWS_ATTEMPT_TIMEOUT)
    }

    /// How long a claim protects work in progress: one attempt and a margin, so it
    /// has run out by the time the queue delivers the job again.
    pub fn claim_lease(&self) -> Duration {
        self.worker_timeout + self.margin
    }

    /// The worker queues' visibility timeout.
    pub fn visibility_timeout(&self) -> Duration {
        self.worker_timeout * VISIBILITY_PER_WORKER_TIMEOUT
    }

    /// Every inequality of the budget, or the first one that fails, in words.
    pub fn check(&self) -> Result<(), String> {
        for kind in JobKind::ALL {
            let needed = self.needed_for(kind);
            if needed >= self.worker_timeout {
                return Err(format!(
                    "a {} job may need {} s (LLM calls of up to {} s each with LLM_TIMEOUT_SECONDS and LLM_MAX_RETRIES, chat calls of up to {} s, a margin of {} s, {} s to settle its batch), not less than WORKER_TIMEOUT_SECONDS ({} s)",
                    kind.as_str(),
                    needed.as_secs(),
                    self.llm_call.as_secs(),
                    self.chat_call.as_secs(),
                    self.margin.as_secs(),
                    self.settle.as_secs_f64(),
                    self.worker_timeout.as_secs()
                ));
            }
        }
        if self.claim_lease() >= self.visibility_timeout() {
            return Err("the claim lease must end before the queue delivers a job again".into());
        }
        Ok(())
    }
}

/// The longest `Retry-After` one LLM call waits out.
pub fn llm_retry_wait_cap(llm_timeout: Duration) -> Duration {
    llm_timeout.min(MAX_LLM_RETRY_WAIT)
}

/// The longest `Retry-After` one chat call waits out.
pub fn chat_retry_wait_cap(chat_timeout: Duration) -> Duration {
    chat_timeout
}

/// One chat API call at its worst, its attempts and waits: [`CHAT_ATTEMPTS`] attempts
/// of `chat_timeout` and the longest wait between each two.
pub fn chat_call(chat_timeout: Duration) -> Duration {
    chat_timeout * CHAT_ATTEMPTS + chat_retry_wait_cap(chat_timeout) * (CHAT_ATTEMPTS - 1)
}

/// The kinds of queued work, each with its own worker (and Lambda).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    Judge,
    Respond,
    Summarize,
    Reflect,
    /// Forgetting a person on request (and each forget's second look): a queue of its
    /// own, so an answer the person waits for never queues behind reflections that wait
    /// for the model; the reflect worker runs it (it already changes facts and notes).
    Forget,
}

impl JobKind {
    pub const ALL: [JobKind; 5] =
        [JobKind::Judge, JobKind::Respond, JobKind::Summarize, JobKind::Reflect, JobKind::Forget];

    pub fn of(job: &Job) -> Self {
        match job {
            Job::Judge { .. } | Job::PickUp { .. } => JobKind::Judge,
            // An opener posts: the respond worker's work.
            Job::Respond { .. } | Job::Open { .. } => JobKind::Respond,
            // Runs on the summarize worker; it asks no model itself.
            Job::Summarize { .. } | Job::Remember { .. } => JobKind::Summarize,
            Job::Reflect { .. } | Job::SweepFacts => JobKind::Reflect,
            // A workspace's purge after an uninstall forgets too, on the same queue.
            Job::Forget { .. } | Job::ForgetLate { .. } | Job::PurgeSlack { .. } => JobKind::Forget,
        }
    }

    /// Whether a worker reading this kind's queue runs `job`: jobs of its kind, and on
    /// the reflect queue also FORGET jobs queued there before forgetting had a queue of
    /// its own (the reflect worker runs both).
    pub fn runs(self, job: &Job) -> bool {
        let of = JobKind::of(job);
        of == self || (self == JobKind::Reflect && of == JobKind::Forget)
    }

    /// The stage whose work this is, in decision records.
    pub fn stage(self) -> crate::domain::Stage {
        use crate::domain::Stage;
        match self {
            JobKind::Judge => Stage::Judge,
            JobKind::Respond => Stage::Respond,
            JobKind::Summarize => Stage::Summarize,
            // Forgetting is memory upkeep, recorded with the reflections.
            JobKind::Reflect | JobKind::Forget => Stage::Reflect,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Judge => "judge",
            JobKind::Respond => "respond",
            JobKind::Summarize => "summarize",
            JobKind::Reflect => "reflect",
            JobKind::Forget => "forget",
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Settings;
    use std::collections::HashMap;

    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, crate::config::ConfigError> {
        let vars: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_vars(&vars)
    }

    #[test]
    fn the_defaults_fit_with_room_to_spare() {
        let budget = Settings::time_budget(&settings(&[]).unwrap());
        assert_eq!(budget.worker_timeout, Duration::from_secs(DEFAULT_WORKER_TIMEOUT_SECONDS));
        // 30 s × 3 attempts + 2 waits of 5 s.
        assert_eq!(budget.llm_call, Duration::from_secs(100));
        // 10 s × 2 attempts + one wait of 10 s.
        assert_eq!(budget.chat_call, Duration::from_secs(30));
        assert_eq!(budget.settle, Duration::from_millis(7500));
        assert_eq!(budget.needed_for(JobKind::Respond), Duration::from_millis((100 + 90 + 30) * 1000 + 7500));
        assert_eq!(budget.needed_for(JobKind::Summarize), Duration::from_millis((200 + 30) * 1000 + 7500));
        assert_eq!(budget.needed_for(JobKind::Reflect), Duration::from_millis((100 + 30) * 1000 + 7500));
        assert_eq!(budget.needed_for(JobKind::Forget), Duration::from_millis((60 + 30) * 1000 + 7500));
        assert!(budget.check().is_ok());
        assert!(budget.needed_for(JobKind::Summarize) < budget.worker_timeout);
        assert!(budget.worker_timeout < budget.claim_lease());
        assert!(budget.claim_lease() < budget.visibility_timeout());
        assert_eq!(budget.visibility_timeout(), Duration::from_secs(1440));
        assert_eq!((budget.aws_attempt(), budget.aws_call()), (AWS_ATTEMPT_TIMEOUT, AWS_CALL_TIMEOUT));
    }

    /// An AWS call at its worst fits in a job's margin with every worker timeout the
    /// settings take whose margin holds the shortest call (32 s and up), is the shortest
    /// below that, and leaves room for one retry of an attempt.
    #[test]
    fn an_aws_call_fits_in_the_margin_of_every_budget() {
        let mut taken = 0;
        for seconds in 2..=900 {
            let vars = HashMap::from(
                [
                    ("WORKER_TIMEOUT_SECONDS", seconds.to_string().as_str()),
                    ("LLM_TIMEOUT_SECONDS", "1"),
                    ("LLM_MAX_RETRIES", "0"),
                    ("CHAT_TIMEOUT_SECONDS", "1"),
                ]
                .map(|(k, v)| (k.to_string(), v.to_string())),
            );
            // A worker timeout too short for the LLM and chat calls is refused.
            let Ok(settings) = Settings::from_vars(&vars) else { continue };
            taken += 1;
            let budget = Settings::time_budget(&settings);
            let (attempt, call) = (budget.aws_attempt(), budget.aws_call());
            if budget.margin >= AWS_MIN_CALL_TIMEOUT {
                assert!(call <= budget.margin, "{seconds} s: {budget:?}");
            } else {
                assert_eq!(call, AWS_MIN_CALL_TIMEOUT, "{seconds} s: the shortest call, not a shorter one");
            }
            assert!((AWS_MIN_CALL_TIMEOUT..=AWS_CALL_TIMEOUT).contains(&call), "{seconds} s: {call:?}");
            assert!((AWS_MIN_ATTEMPT_TIMEOUT..=AWS_ATTEMPT_TIMEOUT).contains(&attempt), "{seconds} s: {attempt:?}");
            assert!(attempt * 2 <= call, "{seconds} s: room for a retry");
        }

        assert!(taken > 850, "the settings took {taken} worker timeouts of 899");
    }

    /// Forget requests have a queue of their own; the reflect worker runs them, and
    /// also those queued on its own queue before that queue existed.
    #[test]
    fn forget_requests_have_their_own_queue_and_the_reflect_worker_runs_them() {
        let forget = Job::sample_forget(None);
        assert_eq!(JobKind::of(&forget), JobKind::Forget);
        assert!(JobKind::Forget.runs(&forget) && JobKind::Reflect.runs(&forget));
        assert!(JobKind::Reflect.runs(&Job::SweepFacts) && !JobKind::Forget.runs(&Job::SweepFacts));
        for other in [JobKind::Judge, JobKind::Respond, JobKind::Summarize] {
            assert!(!other.runs(&forget), "{}", other.as_str());
        }
    }

    #[test]
    fn llm_settings_that_outlast_the_worker_are_refused_at_start_up() {
        let error = settings(&[("LLM_TIMEOUT_SECONDS", "60")]).unwrap_err().to_string();
        assert!(error.contains("WORKER_TIMEOUT_SECONDS"), "{error}");
        assert!(error.contains("a judge job may need 257 s"), "{error}");
        let error = settings(&[("WORKER_TIMEOUT_SECONDS", "200")]).unwrap_err().to_string();
        assert!(error.contains("WORKER_TIMEOUT_SECONDS"), "{error}");
        // A longer worker timeout makes room for them.
        assert!(settings(&[("LLM_TIMEOUT_SECONDS", "60"), ("WORKER_TIMEOUT_SECONDS", "480")]).is_ok());
    }

    #[test]
    fn a_small_budget_for_tests_still_holds_every_inequality() {
        let s = settings(&[
            ("WORKER_TIMEOUT_SECONDS", "12"),
            ("LLM_TIMEOUT_SECONDS", "1"),
            ("LLM_MAX_RETRIES", "0"),
            ("CHAT_TIMEOUT_SECONDS", "1"),
        ])
        .unwrap();
        let budget = Settings::time_budget(&s);
        assert!(budget.check().is_ok());
        assert_eq!(budget.visibility_timeout(), Duration::from_secs(72));
    }
}
