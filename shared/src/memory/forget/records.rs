//! What a forget keeps in the ledger, typed, each with its key in one place: the
//! person's mark (read by all memory work), a request's progress and whether its answer
//! went out, a run's end (for its second look), and the marks that say a channel's
//! memory is owed a remake after an interrupted attempt. Stored texts are unchanged from
//! earlier builds, so a request in flight across an upgrade still reads its own.

use std::time::Duration;

use super::Forgotten;
use crate::deps::Deps;
use crate::domain::{ChannelId, Timestamp, Ts, UserId};
use crate::ports::PortResult;

/// How long a forget is remembered for memory work that read the person's messages
/// before it and stores what it learned after it (see [`forgotten_since`]): far past
/// any job's lease.
pub(super) const FORGOTTEN_KEEP: Duration = Duration::from_secs(24 * 60 * 60);

/// The person's mark (`forgotten:{user}`): a forget of them is under way, or ended at
/// a time, and by which display name (empty when unknown) facts may name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum PersonMark {
    InProgress { name: String },
    Ended { at: Timestamp, name: String },
}

impl PersonMark {
    fn key(user: &UserId) -> String {
        format!("forgotten:{user}")
    }

    /// `{at}\t{name}`, `at` = `i64::MAX` while in progress; marks written before the
    /// name was kept hold the time alone.
    fn encode(&self) -> String {
        match self {
            PersonMark::InProgress { name } => format!("{}\t{name}", i64::MAX),
            PersonMark::Ended { at, name } => format!("{}\t{name}", at.0),
        }
    }

    fn decode(marked: &str) -> Option<PersonMark> {
        let (at, name) = marked.split_once('\t').unwrap_or((marked, ""));
        let at: i64 = at.parse().ok()?;
        let name = name.to_owned();
        Some(if at == i64::MAX {
            PersonMark::InProgress { name }
        } else {
            PersonMark::Ended { at: Timestamp(at), name }
        })
    }

    /// Whether work that read at `read_at` counts the person forgotten, and by which name.
    fn forgotten_for(&self, read_at: Timestamp) -> Option<&str> {
        match self {
            PersonMark::InProgress { name } => Some(name),
            PersonMark::Ended { at, name } => (*at >= read_at).then_some(name),
        }
    }
}

/// Notes that `user` (display name `name`, may be empty) is being forgotten (`done:
/// false`: whatever read their messages before the forget ends counts as before it)
/// or was just forgotten, with the time.
pub(super) async fn mark_forgotten(deps: &Deps, user: &UserId, name: &str, done: bool) -> PortResult<()> {
    let now = deps.clock.now();
    // "In progress" outlives a failed attempt until its redelivery (which marks it
    // again), not a day: a forget that never finishes does not silence memory work.
    let (mark, keep) = if done {
        (PersonMark::Ended { at: now, name: name.to_owned() }, FORGOTTEN_KEEP)
    } else {
        (PersonMark::InProgress { name: name.to_owned() }, deps.budget.visibility_timeout() * 2)
    };
    deps.ledger.cache_put(&PersonMark::key(user), &mark.encode(), now + keep).await
}

/// Whether `user` was forgotten at or after `read_at`, and then by which display name
/// (empty when unknown): memory work that read their messages, or messages about them,
/// then and stores what it learned now must keep nothing of them (the forget may have
/// removed their facts and notes before this work wrote its own).
pub async fn forgotten_since(deps: &Deps, user: &UserId, read_at: Timestamp) -> PortResult<Option<String>> {
    Ok(forgotten_among(deps, std::slice::from_ref(user), read_at).await?.pop().flatten())
}

/// [`forgotten_since`] of each of `users`, in their order, in one read.
pub async fn forgotten_among(deps: &Deps, users: &[UserId], read_at: Timestamp) -> PortResult<Vec<Option<String>>> {
    let keys: Vec<String> = users.iter().map(PersonMark::key).collect();
    let marks = deps.ledger.cache_get_many(&keys, deps.clock.now()).await?;
    Ok(marks
        .into_iter()
        .map(|marked| PersonMark::decode(&marked?)?.forgotten_for(read_at).map(str::to_owned))
        .collect())
}

/// Whether a forget of `user` is being carried out now (its mark says in progress).
pub(super) async fn forget_in_progress(deps: &Deps, user: &UserId) -> PortResult<bool> {
    let mark = deps.ledger.cache_get(&PersonMark::key(user), deps.clock.now()).await?;
    Ok(matches!(mark.as_deref().and_then(PersonMark::decode), Some(PersonMark::InProgress { .. })))
}

/// One forget request (`Job::Forget`): asked in `channel` by its `ts`, about `user`.
pub(super) struct RequestRecord {
    /// The request's claim (one run at a time; completed once answered).
    pub claim: String,
    progress: String,
    unsent: String,
}

/// How far a request got: begun (a run that dies leaves only this), or finished with
/// what it removed (kept until the answer is out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum RequestProgress {
    Started,
    Finished(Forgotten),
}

/// Marks a request that began without finishing.
const STARTED: &str = "started";

impl RequestRecord {
    pub fn new(channel: &ChannelId, user: &UserId, ts: &Ts) -> RequestRecord {
        let claim = format!("forget:{channel}:{user}:{ts}");
        RequestRecord { progress: format!("{claim}:removed"), unsent: format!("{claim}:unsent"), claim }
    }

    /// What an earlier attempt got to; a progress this build cannot read counts as
    /// begun (the run is redone, which is safe).
    pub async fn progress(&self, deps: &Deps) -> PortResult<Option<RequestProgress>> {
        let stored = deps.ledger.cache_get(&self.progress, deps.clock.now()).await?;
        Ok(stored.map(|text| match serde_json::from_str(&text) {
            Ok(removed) if text != STARTED => RequestProgress::Finished(removed),
            _ => RequestProgress::Started,
        }))
    }

    pub async fn set_progress(&self, deps: &Deps, progress: &RequestProgress, until: Timestamp) -> PortResult<()> {
        let text = match progress {
            RequestProgress::Started => STARTED.to_owned(),
            RequestProgress::Finished(removed) => serde_json::to_string(removed).expect("counts encode"),
        };
        deps.ledger.cache_put(&self.progress, &text, until).await
    }

    /// Whether the last send of the answer is known not to have gone out (the platform
    /// refused it), as opposed to one that may have.
    pub async fn answer_known_unsent(&self, deps: &Deps) -> PortResult<bool> {
        Ok(deps.ledger.cache_get(&self.unsent, deps.clock.now()).await?.as_deref() == Some("1"))
    }

    pub async fn set_answer_known_unsent(&self, deps: &Deps, unsent: bool, until: Timestamp) -> PortResult<()> {
        deps.ledger.cache_put(&self.unsent, if unsent { "1" } else { "0" }, until).await
    }
}

/// One forget run's second look (`Job::ForgetLate`), queued with `late_ts` by the run
/// of a request made in `requested_in`.
pub(super) struct LookRecord {
    /// The look's claim.
    pub claim: String,
    ended: String,
    progress: String,
}

impl LookRecord {
    pub fn new(requested_in: &ChannelId, user: &UserId, late_ts: &Ts) -> LookRecord {
        LookRecord {
            claim: format!("forget-late:{requested_in}:{user}:{late_ts}"),
            ended: format!("forget-ended:{requested_in}:{user}:{late_ts}"),
            progress: format!("forget-late:{requested_in}:{user}:{late_ts}:removed"),
        }
    }

    /// When the run that queued this look ended (written by the run, read by the look).
    pub async fn run_ended(&self, deps: &Deps) -> PortResult<Option<Timestamp>> {
        let ended = deps.ledger.cache_get(&self.ended, deps.clock.now()).await?;
        Ok(ended.and_then(|at| at.parse().ok()).map(Timestamp))
    }

    pub async fn set_run_ended(&self, deps: &Deps, at: Timestamp, until: Timestamp) -> PortResult<()> {
        deps.ledger.cache_put(&self.ended, &at.0.to_string(), until).await
    }

    /// What earlier attempts of the look removed, so its log line counts the whole look.
    pub async fn removed(&self, deps: &Deps) -> PortResult<Forgotten> {
        let earlier = deps.ledger.cache_get(&self.progress, deps.clock.now()).await?;
        Ok(earlier.and_then(|json| serde_json::from_str(&json).ok()).unwrap_or_default())
    }

    pub async fn set_removed(&self, deps: &Deps, removed: &Forgotten, until: Timestamp) -> PortResult<()> {
        let json = serde_json::to_string(removed).expect("counts encode");
        deps.ledger.cache_put(&self.progress, &json, until).await
    }

    /// The mark that `channel`'s memory is owed a remake by this look.
    pub fn remake_mark(&self, channel: &ChannelId) -> String {
        format!("{}:remake:{channel}", self.claim)
    }
}

/// The mark that `channel`'s memory is owed a remake by a forget of `user` (any run:
/// the next one finds no message of theirs there, with no profile left to say they
/// wrote there).
pub(super) fn working_mark(user: &UserId, channel: &ChannelId) -> String {
    format!("forgetting:{user}:{channel}")
}
