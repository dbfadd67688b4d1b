//! Facts, people's notes and counters in the in-process store: [`FactStore`].

use super::*;

/// Stores `fact` with a new revision, replacing the one with its id.
pub(super) fn store_fact(inner: &mut Inner, fact: &Fact) {
    inner.fact_revisions += 1;
    let revision = inner.fact_revisions;
    slot(&mut inner.facts, &fact.channel).insert(fact.id.clone(), (fact.clone(), revision));
}

/// `user`'s note in `channel`, made empty if there is none.
pub(super) fn note_of<'a>(inner: &'a mut Inner, channel: &ChannelId, user: &UserId) -> &'a mut UserNote {
    inner.notes.entry((channel.clone(), user.clone())).or_insert_with(|| UserNote {
        channel: channel.clone(),
        user: user.clone(),
        ..UserNote::default()
    })
}

/// Channel lines most recently updated first, ties by channel id (a stable order).
pub(crate) fn newest_first(mut lines: Vec<ChannelLine>) -> Vec<ChannelLine> {
    lines.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.channel.0.cmp(&b.channel.0)));
    lines
}

#[async_trait]
impl FactStore for MemoryStore {
    async fn facts(&self, channel: &ChannelId) -> PortResult<Vec<Fact>> {
        Ok(self.lock().facts.get(channel).map(|f| f.values().map(|(f, _)| f.clone()).collect()).unwrap_or_default())
    }

    async fn facts_as_read(&self, channel: &ChannelId) -> PortResult<Vec<(Fact, FactRevision)>> {
        let inner = self.lock();
        let facts = inner.facts.get(channel).into_iter().flat_map(|f| f.values());
        Ok(facts.map(|(fact, revision)| (fact.clone(), FactRevision(*revision))).collect())
    }

    async fn put_fact(&self, fact: &Fact) -> PortResult<()> {
        store_fact(&mut self.lock(), fact);
        Ok(())
    }

    async fn put_fact_if_unchanged(&self, fact: &Fact, read: Option<FactRevision>) -> PortResult<bool> {
        let mut inner = self.lock();
        let stored = inner.facts.get(&fact.channel).and_then(|f| f.get(&fact.id)).map(|(_, r)| FactRevision(*r));
        if stored != read || self.refused_fact_writes.take() {
            return Ok(false);
        }
        store_fact(&mut inner, fact);
        Ok(true)
    }

    async fn delete_fact(&self, channel: &ChannelId, id: &str) -> PortResult<()> {
        if let Some(facts) = self.lock().facts.get_mut(channel) {
            facts.remove(id);
        }
        Ok(())
    }

    async fn fact_channels(&self) -> PortResult<Vec<ChannelId>> {
        Ok(self.lock().facts.iter().filter(|(_, f)| !f.is_empty()).map(|(c, _)| c.clone()).collect())
    }

    async fn user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<Option<UserNote>> {
        Ok(self.lock().notes.get(&(channel.clone(), user.clone())).cloned())
    }

    async fn note_reflection(
        &self,
        channel: &ChannelId,
        user: &UserId,
        tags: &[String],
        summary: &str,
        at: Timestamp,
    ) -> PortResult<()> {
        let mut inner = self.lock();
        note_of(&mut inner, channel, user).add_reflection(tags, summary, at);
        Ok(())
    }

    async fn note_topics(
        &self,
        channel: &ChannelId,
        user: &UserId,
        topics: &[String],
        at: Timestamp,
    ) -> PortResult<()> {
        let mut inner = self.lock();
        let note = note_of(&mut inner, channel, user);
        note.last_topics = topics.to_vec();
        note.updated_at = Some(at);
        Ok(())
    }

    async fn delete_user_note(&self, channel: &ChannelId, user: &UserId) -> PortResult<()> {
        self.lock().notes.remove(&(channel.clone(), user.clone()));
        Ok(())
    }

    async fn profile(&self, workspace: Workspace<'_>, user: &UserId) -> PortResult<Option<UserProfile>> {
        Ok(self.lock().profiles.get(&profile_key(workspace, user)).map(|stored| stored.profile.clone()))
    }

    async fn count_message(
        &self,
        user: &UserId,
        channel: &ChannelId,
        at: Timestamp,
        called_bot: bool,
    ) -> PortResult<()> {
        let key = profile_key(channel.workspace(), user);
        let mut inner = self.lock();
        let stored = match inner.profiles.get_mut(&key) {
            Some(stored) => stored,
            None => inner.profiles.entry(key).or_insert_with(|| StoredProfile {
                profile: UserProfile { user: user.clone(), ..Default::default() },
                channels: Default::default(),
            }),
        };
        // Looked up before it is cloned: a person's channel is nearly always listed.
        let listed = stored.channels.contains(channel);
        if !listed {
            stored.channels.insert(channel.clone());
        }
        stored.profile.count(channel, at, called_bot, listed);
        Ok(())
    }

    async fn delete_profile(&self, workspace: Workspace<'_>, user: &UserId) -> PortResult<()> {
        self.lock().profiles.remove(&profile_key(workspace, user));
        Ok(())
    }

    async fn noted_users(&self, channel: &ChannelId) -> PortResult<Vec<UserId>> {
        Ok(self.noted_users_now(channel))
    }

    async fn profiled_users(&self, workspace: Workspace<'_>) -> PortResult<Vec<UserId>> {
        Ok(self.profiled_users_now(workspace))
    }
}

/// Where the profiles map keeps `user`'s profile in `workspace`: the shared workspace's
/// under their id (cloned, not built), another's under `T…/U…`.
pub(super) fn profile_key(workspace: Workspace<'_>, user: &UserId) -> UserId {
    match workspace {
        Workspace::Shared => user.clone(),
        workspace => UserId(workspace.qualify(user.as_str()).into()),
    }
}
