//! Everything a worker needs, built once (per cold start, per replay) and passed in.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::config::Settings;
use crate::domain::Job;
use crate::domain::{BotIdentity, ChannelId, Persona, UserId};
use crate::ports::{
    ChannelStateStore, Chat, Clock, DecisionLog, Embedder, FactStore, Ledger, Llm, MAX_QUEUE_DELAY, MessageStore,
    PortResult, Queue, Scheduler,
};
use crate::prompts::Prompts;

pub struct Deps {
    pub settings: Settings,
    /// The time budget the settings give (claims' leases, the workers' timeouts).
    pub budget: crate::budget::TimeBudget,
    /// Who kuuki is where a deployment serves one Slack workspace, Discord, a replay;
    /// [`Deps::bot_in`] for any channel.
    pub bot: Arc<BotIdentity>,
    /// Many Slack workspaces on one deployment (`SLACK_CLIENT_ID`): their
    /// installations. `None` for one workspace.
    pub workspaces: Option<Arc<crate::workspaces::Workspaces>>,
    /// kuuki's bot in each of them, as their installations say (filled as events and
    /// jobs of each come).
    workspace_bots: std::sync::RwLock<std::collections::HashMap<String, Arc<BotIdentity>>>,
    pub persona: Persona,
    pub prompts: Prompts,
    pub messages: Arc<dyn MessageStore>,
    pub channels: Arc<dyn ChannelStateStore>,
    pub facts: Arc<dyn FactStore>,
    pub ledger: Arc<dyn Ledger>,
    pub queue: Arc<dyn Queue>,
    pub scheduler: Arc<dyn Scheduler>,
    /// `None` runs on rules only (`--llm none`).
    pub llm: Option<Arc<dyn Llm>>,
    /// Vector fact search: `Some` only with `VECTOR_SEARCH_ENABLED`.
    pub embedder: Option<Arc<dyn Embedder>>,
    pub chat: Arc<dyn Chat>,
    pub clock: Arc<dyn Clock>,
    pub log: Arc<dyn DecisionLog>,
    /// The lull reflections this process queued (the jobs of a batch run together).
    pub lull_reflections: crate::memory::lull::LullReflections,
    rng: Mutex<fastrand::Rng>,
}

/// The adapters behind the ports, handed to [`Deps::new`].
pub struct Adapters {
    pub messages: Arc<dyn MessageStore>,
    pub channels: Arc<dyn ChannelStateStore>,
    pub facts: Arc<dyn FactStore>,
    pub ledger: Arc<dyn Ledger>,
    pub queue: Arc<dyn Queue>,
    pub scheduler: Arc<dyn Scheduler>,
    pub llm: Option<Arc<dyn Llm>>,
    /// `None` (vector search off) unless [`Adapters::with_embedder`] gives one.
    pub embedder: Option<Arc<dyn Embedder>>,
    pub chat: Arc<dyn Chat>,
    pub clock: Arc<dyn Clock>,
    pub log: Arc<dyn DecisionLog>,
}

/// Where the clock, platform, model and decision log come from; the stores and queues
/// are given by the adapter family (in-process or AWS).
pub struct Surroundings {
    pub chat: Arc<dyn Chat>,
    pub llm: Option<Arc<dyn Llm>>,
    pub clock: Arc<dyn Clock>,
    pub log: Arc<dyn DecisionLog>,
}

impl Adapters {
    /// Every port from one store that keeps every memory tier, a queue and a scheduler.
    pub fn from_store<S>(
        store: Arc<S>,
        queue: Arc<dyn Queue>,
        scheduler: Arc<dyn Scheduler>,
        around: Surroundings,
    ) -> Self
    where
        S: MessageStore + ChannelStateStore + FactStore + Ledger + 'static,
    {
        Adapters {
            messages: store.clone(),
            channels: store.clone(),
            facts: store.clone(),
            ledger: store,
            queue,
            scheduler,
            llm: around.llm,
            embedder: None,
            chat: around.chat,
            clock: around.clock,
            log: around.log,
        }
    }

    /// With vector fact search through `embedder` (`adapters::llm::embedder_from_settings`).
    pub fn with_embedder(mut self, embedder: Option<Arc<dyn Embedder>>) -> Self {
        self.embedder = embedder;
        self
    }
}

impl Deps {
    /// `persona` replaces the name, aliases and topics of `settings` (the persona file
    /// wins); `seed` makes the judge's jitter reproducible.
    /// The same bot also answers on another platform, as `user_id` there.
    pub fn also_known_as(mut self, user_id: UserId) -> Self {
        self.bot = Arc::new((*self.bot).clone().also(user_id));
        self
    }

    /// Serving many Slack workspaces through their installations.
    pub fn with_workspaces(mut self, workspaces: Arc<crate::workspaces::Workspaces>) -> Self {
        self.workspaces = Some(workspaces);
        self
    }

    /// Who kuuki is in `channel`: in a Slack workspace among several, the bot user its
    /// installation has ([`Deps::know_workspace_bot`]).
    pub fn bot_in(&self, channel: &ChannelId) -> Arc<BotIdentity> {
        let crate::domain::Workspace::Slack(workspace) = channel.workspace() else { return self.bot.clone() };
        let bots = self.workspace_bots.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        bots.get(workspace).cloned().unwrap_or_else(|| self.bot.clone())
    }

    /// `bot_user` is kuuki in Slack workspace `workspace` (as its installation says).
    pub fn know_workspace_bot(&self, workspace: &str, bot_user: &UserId) {
        let bots = self.workspace_bots.read().unwrap_or_else(|poisoned| poisoned.into_inner());
        if bots.get(workspace).is_some_and(|bot| bot.is_me(bot_user.as_str())) {
            return;
        }
        drop(bots);
        let persona = &self.persona;
        let bot = Arc::new(BotIdentity::new(bot_user.clone(), &persona.name, &persona.aliases));
        self.workspace_bots.write().unwrap_or_else(|poisoned| poisoned.into_inner()).insert(workspace.to_owned(), bot);
    }

    pub fn new(mut settings: Settings, persona: Persona, bot_user_id: UserId, adapters: Adapters, seed: u64) -> Self {
        settings.bot.name = persona.name.clone();
        settings.bot.aliases = persona.aliases.clone();
        settings.bot.topics = persona.topics.clone();
        let settings = settings.for_llm(adapters.llm.is_some());
        let bot = Arc::new(BotIdentity::new(bot_user_id, &persona.name, &persona.aliases));
        Self {
            prompts: Prompts::new(settings.bot.prompt_language),
            budget: settings.time_budget(),
            settings,
            bot,
            workspaces: None,
            workspace_bots: Default::default(),
            persona,
            messages: adapters.messages,
            channels: adapters.channels,
            facts: adapters.facts,
            ledger: adapters.ledger,
            queue: adapters.queue,
            scheduler: adapters.scheduler,
            llm: adapters.llm,
            embedder: adapters.embedder,
            chat: adapters.chat,
            clock: adapters.clock,
            log: adapters.log,
            lull_reflections: Default::default(),
            rng: Mutex::new(fastrand::Rng::with_seed(seed)),
        }
    }

    /// Queues `job` after `delay`: on the queue up to its limit (900 s), through the
    /// scheduler beyond.
    pub async fn enqueue_after(&self, job: Job, delay: Duration) -> PortResult<()> {
        if delay <= MAX_QUEUE_DELAY {
            self.queue.enqueue(job, delay).await
        } else {
            self.scheduler.schedule_once(job, self.clock.now() + delay).await
        }
    }

    /// Queues `jobs` as [`Deps::enqueue_after`] does, those within the queue's reach in
    /// one call ([`crate::ports::Queue::enqueue_all`]).
    pub async fn enqueue_all_after(&self, jobs: Vec<(Job, Duration)>) -> PortResult<()> {
        let (queued, scheduled): (Vec<_>, Vec<_>) = jobs.into_iter().partition(|(_, delay)| *delay <= MAX_QUEUE_DELAY);
        for (job, delay) in scheduled {
            self.scheduler.schedule_once(job, self.clock.now() + delay).await?;
        }
        match queued.len() {
            0 => Ok(()),
            _ => self.queue.enqueue_all(queued).await,
        }
    }

    /// `JUDGE_MIN_WAIT_SECONDS` ± up to `JUDGE_JITTER_RATIO` of it.
    pub fn judge_wait(&self) -> Duration {
        let base = self.settings.judge.min_wait.as_secs_f64();
        let ratio = self.settings.judge.jitter_ratio;
        let unit = self.rng.lock().expect("rng lock").f64();
        Duration::from_secs_f64((base * (1.0 + ratio * (2.0 * unit - 1.0))).max(0.0))
    }
}

impl Deps {
    /// Whose messages kuuki judges and lets supersede queued work: humans, and other
    /// bots when `IGNORE_OTHER_BOTS` is off.
    pub fn is_participant(&self, message: &crate::domain::Message) -> bool {
        use crate::domain::Author;
        match message.author {
            Author::Human => true,
            Author::OtherBot => !self.settings.judge.ignore_other_bots,
            Author::OwnBot => false,
        }
    }
}
