//! The channels table (and the workspace memory's items in the facts table):
//! [`ChannelStateStore`] on DynamoDB.

use super::*;

/// The channels table's item for a channel: its state as JSON, with the optimistic
/// `version` (both absent reads as a fresh state at version 0), and beside it the
/// fields a judgment writes, each updated on its own without reading the item first:
/// where one is present it wins over the JSON's copy (an item written before they
/// were apart has only the JSON).
#[derive(Deserialize)]
pub(super) struct ChannelItem {
    #[serde(default, with = "json")]
    pub(super) state: ChannelState,
    #[serde(default)]
    pub(super) version: i64,
    /// JSON of a `JudgmentNote`.
    #[serde(default)]
    pub(super) last_judgment: Option<String>,
    #[serde(default)]
    pub(super) summary_due: Option<Timestamp>,
    #[serde(default)]
    pub(super) reflection_due: Option<Timestamp>,
}

impl ChannelItem {
    /// The state with the fields kept apart put in, and its version.
    pub(super) fn into_state(self) -> PortResult<(ChannelState, i64)> {
        let mut state = self.state;
        if let Some(json) = self.last_judgment {
            state.last_judgment = Some(serde_json::from_str(&json).map_err(backend("decode last judgment"))?);
        }
        state.summary_due = self.summary_due.or(state.summary_due);
        state.reflection_due = self.reflection_due.or(state.reflection_due);
        Ok((state, self.version))
    }
}

/// The attribute holding `task`'s mark (see [`ChannelItem`]).
pub(super) fn mark_attribute(task: MemoryTask) -> &'static str {
    match task {
        MemoryTask::Summary => "summary_due",
        MemoryTask::Reflection => "reflection_due",
    }
}

/// The judgment item's attribute holding `ChannelState::reflection_lull_at` (N).
pub(super) const LULL_ATTRIBUTE: &str = "reflection_lull_at";
/// The judgment item's attribute holding `ChannelState::reflection_watermark` (S).
pub(super) const WATERMARK_ATTRIBUTE: &str = "reflection_watermark";

/// Each answer's intervention is an attribute of its own, `iv#<at, 20 digits>#<thread
/// root>` (JSON), written by one update without a read; the names sort by time.
pub(super) const INTERVENTION_PREFIX: &str = "iv#";
/// Interventions past the kept ones are removed this many at a time, so trimming costs
/// a call every few answers, not one an answer.
pub(super) const INTERVENTION_TRIM_SLACK: usize = 10;

pub(super) fn intervention_attribute(intervention: &Intervention) -> String {
    let root = intervention.thread.root.as_ref().map_or("-", Ts::as_str);
    format!("{INTERVENTION_PREFIX}{:020}#{root}", intervention.at.0)
}

/// An intervention as its `iv#` attribute holds it: without its excerpt and facts
/// (only the newest keeps those, in [`ANSWERS_LAST`]).
pub(super) fn compact_json(intervention: &Intervention) -> PortResult<String> {
    let compact = Intervention { excerpt: String::new(), facts: Vec::new(), ..intervention.clone() };
    serde_json::to_string(&compact).map_err(backend("encode intervention"))
}

/// Takes the `iv#` attributes out of `item`, decoded.
pub(super) fn take_interventions(item: &mut Item) -> PortResult<Vec<Intervention>> {
    let apart: Vec<String> = item.keys().filter(|k| k.starts_with(INTERVENTION_PREFIX)).cloned().collect();
    let mut recorded = Vec::with_capacity(apart.len());
    for name in apart {
        if let Some(AttributeValue::S(json)) = item.remove(&name) {
            recorded.push(serde_json::from_str(&json).map_err(backend("decode intervention"))?);
        }
    }
    Ok(recorded)
}

/// A channel's items to its state and version: the channel item's JSON and marks, and
/// the interventions of the answers item merged with those of the channel item (an
/// item written before they moved: as attributes, or as the JSON's copy), newest
/// last, at most [`ChannelState::KEPT_INTERVENTIONS`], the newest in full.
pub(super) fn channel_state_from(mut item: Item, answers: Option<Item>) -> PortResult<(ChannelState, i64)> {
    let mut recorded = take_interventions(&mut item)?;
    let mut last = None;
    if let Some(mut answers) = answers {
        recorded.extend(take_interventions(&mut answers)?);
        if let Some(AttributeValue::S(json)) = answers.get(ANSWERS_LAST) {
            last = Some(serde_json::from_str::<Intervention>(json).map_err(backend("decode last intervention"))?);
        }
    }
    let (mut state, version) = from_item::<ChannelItem>(item)?.into_state()?;
    if !recorded.is_empty() || last.is_some() {
        let mut all: std::collections::BTreeMap<String, Intervention> =
            state.interventions.drain(..).map(|i| (intervention_attribute(&i), i)).collect();
        all.extend(recorded.into_iter().map(|i| (intervention_attribute(&i), i)));
        // Written with its own `iv#` attribute in the same update; in full here.
        if let Some(last) = last {
            all.insert(intervention_attribute(&last), last);
        }
        let skip = all.len().saturating_sub(ChannelState::KEPT_INTERVENTIONS);
        state.interventions = all.into_values().skip(skip).collect();
        let newest = state.interventions.iter().map(|i| i.at).max();
        state.last_response_at = state.last_response_at.max(newest);
    }
    Ok((state, version))
}

/// The facts table's item for the workspace memory (without the channel lines).
#[derive(Serialize, Deserialize)]
pub(super) struct WorkspaceMemoryItem {
    pub(super) scope: String,
    pub(super) id: String,
    #[serde(with = "json")]
    pub(super) workspace: WorkspaceMemory,
}

/// The facts table's item for one channel's line in the workspace memory.
#[derive(Serialize, Deserialize)]
pub(super) struct ChannelLineItem {
    pub(super) scope: String,
    pub(super) id: String,
    #[serde(with = "json")]
    pub(super) line: ChannelLine,
}

impl DynamoStore {
    /// Reads a channel's whole state: the channel's item, its judgment item and its
    /// answers item in one consistent batch read.
    pub(super) async fn read_whole_state(&self, channel: &ChannelId) -> PortResult<ChannelState> {
        let (judgment_key, answers_key) = (judgment_key(channel), answers_key(channel));
        // A Slack channel also reads whether Slack's access is gone, in the same batch.
        let gone_key = (!channel.is_discord()).then(|| channel.workspace().scoped(SLACK_GONE_KEY));
        let keys: Vec<Item> = [&*channel.0, &judgment_key, &answers_key]
            .into_iter()
            .chain(gone_key.as_deref())
            .map(|key| [("channel".to_owned(), s(key))].into())
            .collect();
        let (mut main, mut judgment, mut answers, mut gone) = (None, None, None, None);
        for item in self.batch_get(&self.tables.channels, keys, true, "get channel state").await? {
            match get_s(&item, "channel") {
                Some(key) if key == judgment_key => judgment = Some(item),
                Some(key) if key == answers_key => answers = Some(item),
                Some(key) if Some(key) == gone_key.as_deref() => gone = purge::gone_at(&item)?,
                _ => main = Some(item),
            }
        }
        let main = main.unwrap_or_else(|| [("channel".to_owned(), s(&*channel.0))].into());
        let mut state = channel_state_from(main, answers)?.0;
        state.slack_gone = gone;
        let Some(judgment) = judgment else { return Ok(state) };
        state.talkativeness = super::talkativeness::talkativeness_of(&judgment)?;
        if let Some(json) = get_s(&judgment, "last_judgment") {
            state.last_judgment = Some(serde_json::from_str(json).map_err(backend("decode last judgment"))?);
        }
        // Written apart from the channel's item (see `set_reflection_watermark`); one
        // written before that is in the JSON.
        if let Some(watermark) = get_s(&judgment, WATERMARK_ATTRIBUTE) {
            state.reflection_watermark = Some(Ts::new(watermark));
        }
        // Only spares a queued job: one that cannot be read is as none (one more job),
        // not a channel whose state cannot be read.
        state.reflection_lull_at = judgment.get(LULL_ATTRIBUTE).and_then(|at| match at.as_n().map(|n| n.parse()) {
            Ok(Ok(at)) => Some(Timestamp(at)),
            _ => {
                tracing::warn!(%channel, value = ?at, "unreadable reflection_lull_at, read as none");
                None
            }
        });
        Ok(state)
    }

    /// The items of `keys` in `table` (those that exist, in no order) by BatchGetItem
    /// (at most 100 keys), asking again for the keys DynamoDB did not get to.
    pub(super) async fn batch_get(
        &self,
        table: &str,
        keys: Vec<Item>,
        consistent: bool,
        what: &'static str,
    ) -> PortResult<Vec<Item>> {
        let mut found = Vec::new();
        if keys.is_empty() {
            return Ok(found);
        }
        let mut wanted = aws_sdk_dynamodb::types::KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(consistent)
            .build()
            .map_err(backend(what))?;
        for attempt in 0..UNPROCESSED_RETRIES {
            let out = self.client.batch_get_item().request_items(table, wanted).send().await.map_err(backend(what))?;
            found.extend(out.responses.and_then(|mut r| r.remove(table)).unwrap_or_default());
            // Keys DynamoDB did not get to (throttling) are asked for again.
            match out.unprocessed_keys.and_then(|mut u| u.remove(table)) {
                Some(left) if !left.keys.is_empty() => {
                    wanted = left;
                    tokio::time::sleep(Duration::from_millis(20 << attempt)).await;
                }
                _ => return Ok(found),
            }
        }
        Err(PortError::Backend { backend: "dynamodb", message: format!("{what}: keys left unprocessed") })
    }

    /// Reads a channel's item: its state (without the last judgment written apart, see
    /// [`judgment_key`]), its version (0 when there is none yet), and the names of the
    /// attributes an item written before the answers and the judgment moved to items of
    /// their own still holds (`iv#`, `last_judgment`).
    pub(super) async fn read_state(&self, channel: &ChannelId) -> PortResult<(ChannelState, i64, Vec<String>)> {
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.channels)
            .key("channel", s(&*channel.0))
            .consistent_read(true)
            .send()
            .await
            .map_err(backend("get channel state"))?;
        let Some(item) = out.item else {
            return Ok((ChannelState::default(), 0, Vec::new()));
        };
        let left: Vec<String> =
            item.keys().filter(|k| k.starts_with(INTERVENTION_PREFIX) || *k == "last_judgment").cloned().collect();
        let (state, version) = channel_state_from(item, None)?;
        Ok((state, version, left))
    }

    /// An update of `channel`'s answers item (see [`ANSWERS_LAST`]).
    pub(super) fn update_answers(
        &self,
        channel: &ChannelId,
    ) -> aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder {
        self.client.update_item().table_name(&self.tables.channels).key("channel", s(answers_key(channel)))
    }

    /// One blind SET of `attribute` on the channel's judgment item (see [`judgment_key`]).
    pub(super) async fn set_on_judgment_item(
        &self,
        channel: &ChannelId,
        attribute: &str,
        value: AttributeValue,
        what: &'static str,
    ) -> PortResult<()> {
        self.client
            .update_item()
            .table_name(&self.tables.channels)
            .key("channel", s(judgment_key(channel)))
            .update_expression("SET #a = :a")
            .expression_attribute_names("#a", attribute)
            .expression_attribute_values(":a", value)
            .send()
            .await
            .map_err(backend(what))?;
        Ok(())
    }

    /// After `record_intervention` made the answer at `at` the one in full: an answers
    /// item written before `last_at` existed held a `last` without its time, which may
    /// have been newer; that one is put back, unless a newer answer came since.
    pub(super) async fn keep_newer_last(&self, channel: &ChannelId, before: &Item, at: Timestamp) -> PortResult<()> {
        if before.contains_key(ANSWERS_LAST_AT) {
            return Ok(());
        }
        let Some(old) = get_s(before, ANSWERS_LAST) else { return Ok(()) };
        // One that cannot be read is no answer to keep: the new one stands (failing
        // here, after the write, would only fail every redelivery the same way).
        let previous: Intervention = match serde_json::from_str(old) {
            Ok(previous) => previous,
            Err(error) => {
                tracing::warn!(%error, %channel, "the answer in full before this one could not be read; it is replaced");
                return Ok(());
            }
        };
        if previous.at <= at {
            return Ok(());
        }
        let restored = self
            .update_answers(channel)
            .update_expression("SET #last = :last, #at = :previous")
            .condition_expression("#at = :ours")
            .expression_attribute_names("#last", ANSWERS_LAST)
            .expression_attribute_names("#at", ANSWERS_LAST_AT)
            .expression_attribute_values(":last", s(old))
            .expression_attribute_values(":previous", n(previous.at.0))
            .expression_attribute_values(":ours", n(at.0))
            .send()
            .await;
        match restored {
            Ok(_) => Ok(()),
            // A newer answer took `last` meanwhile: it stays.
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(()),
            Err(e) => Err(backend("keep the newer last intervention")(e)),
        }
    }

    /// Moves what an item written before the answers and the judgment had items of their
    /// own still holds into those items, without replacing anything newer there (a
    /// repeat writes the same), so the channel item can let go of it.
    pub(super) async fn move_out(
        &self,
        channel: &ChannelId,
        interventions: &[Intervention],
        judgment: Option<&JudgmentNote>,
    ) -> PortResult<()> {
        // Each once, by its attribute (an old JSON copy may hold one twice; a SET must
        // not name an attribute twice).
        let apart: std::collections::BTreeMap<String, &Intervention> =
            interventions.iter().map(|i| (intervention_attribute(i), i)).collect();
        if !apart.is_empty() {
            let mut set = Vec::new();
            let mut update = self.update_answers(channel);
            for (i, (attribute, intervention)) in apart.iter().enumerate() {
                set.push(format!("#i{i} = :i{i}"));
                update = update
                    .expression_attribute_names(format!("#i{i}"), attribute)
                    .expression_attribute_values(format!(":i{i}"), s(compact_json(intervention)?));
            }
            update
                .update_expression(format!("SET {}", set.join(", ")))
                .send()
                .await
                .map_err(backend("move interventions"))?;
        }
        // The newest in full, with its time, only where no answer is there in full yet
        // (one written before `last_at` existed has `last` alone, and is newer).
        if let Some(newest) = interventions.iter().max_by_key(|i| i.at) {
            let moved = self
                .update_answers(channel)
                .update_expression("SET #last = :last, #at = :at")
                .condition_expression("attribute_not_exists(#last)")
                .expression_attribute_names("#last", ANSWERS_LAST)
                .expression_attribute_names("#at", ANSWERS_LAST_AT)
                .expression_attribute_values(
                    ":last",
                    s(serde_json::to_string(newest).map_err(backend("encode intervention"))?),
                )
                .expression_attribute_values(":at", n(newest.at.0))
                .send()
                .await;
            match moved {
                Ok(_) => {}
                Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => {}
                Err(e) => return Err(backend("move the last intervention")(e)),
            }
        }
        if let Some(note) = judgment {
            self.client
                .update_item()
                .table_name(&self.tables.channels)
                .key("channel", s(judgment_key(channel)))
                .update_expression("SET #j = if_not_exists(#j, :j)")
                .expression_attribute_names("#j", "last_judgment")
                .expression_attribute_values(":j", s(serde_json::to_string(note).map_err(backend("encode judgment"))?))
                .send()
                .await
                .map_err(backend("move last judgment"))?;
        }
        Ok(())
    }

    /// Read, change, write only if nobody wrote in between; again on a conflict.
    pub(super) async fn update_state(&self, channel: &ChannelId, change: impl Fn(&mut ChannelState)) -> PortResult<()> {
        for _ in 0..VERSION_RETRIES {
            let (mut state, version, left) = self.read_state(channel).await?;
            // Those are kept in their own items; a copy here would only make the item,
            // and every write to it, larger (and would outlive the answers' retention).
            // An item from before they moved holds some: they move first, then go.
            let (interventions, judgment) = (std::mem::take(&mut state.interventions), state.last_judgment.take());
            if !interventions.is_empty() || judgment.is_some() {
                self.move_out(channel, &interventions, judgment.as_ref()).await?;
            }
            change(&mut state);
            let json = serde_json::to_string(&state).map_err(backend("encode channel state"))?;
            // An update, not a put: the fields written apart stay. The marks are written
            // with the JSON, so the one the closure left (or cleared) is the one read.
            let (mut set, mut remove) = (vec!["#s = :s", "#v = :next"], Vec::new());
            let mut update = self
                .client
                .update_item()
                .table_name(&self.tables.channels)
                .key("channel", s(&*channel.0))
                .expression_attribute_names("#s", "state")
                .expression_attribute_values(":s", s(json))
                .expression_attribute_values(":next", n(version + 1));
            for (task, mark, name, value) in [
                (MemoryTask::Summary, state.summary_due, "#sd", ":sd"),
                (MemoryTask::Reflection, state.reflection_due, "#rd", ":rd"),
            ] {
                update = update.expression_attribute_names(name, mark_attribute(task));
                match mark {
                    Some(at) => {
                        set.push(if task == MemoryTask::Summary { "#sd = :sd" } else { "#rd = :rd" });
                        update = update.expression_attribute_values(value, n(at.0));
                    }
                    None => remove.push(name),
                }
            }
            let left_names: Vec<String> = (0..left.len()).map(|i| format!("#o{i}")).collect();
            for (name, attribute) in left_names.iter().zip(&left) {
                update = update.expression_attribute_names(name, attribute);
            }
            remove.extend(left_names.iter().map(String::as_str));
            let mut expression = format!("SET {}", set.join(", "));
            if !remove.is_empty() {
                expression.push_str(&format!(" REMOVE {}", remove.join(", ")));
            }
            update = update.update_expression(expression);
            update = if version == 0 {
                update.condition_expression("attribute_not_exists(#v)")
            } else {
                update.condition_expression("#v = :v").expression_attribute_values(":v", n(version))
            };
            match update.expression_attribute_names("#v", "version").send().await {
                Ok(_) => return Ok(()),
                Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => continue,
                Err(e) => return Err(backend("put channel state")(e)),
            }
        }
        Err(PortError::Backend {
            backend: "dynamodb",
            message: format!("channel state of {channel} kept changing under {VERSION_RETRIES} attempts"),
        })
    }
}

#[async_trait]
impl ChannelStateStore for DynamoStore {
    async fn channel_state(&self, channel: &ChannelId) -> PortResult<Arc<ChannelState>> {
        Ok(Arc::new(self.read_whole_state(channel).await?))
    }

    async fn record_intervention(&self, channel: &ChannelId, intervention: Intervention) -> PortResult<()> {
        // One blind update of its own attribute (repeating it writes the same one), and
        // of `last` unless a newer answer is there already (a resumed, older answer
        // must not take its place). The item as it was comes back without a read (no read
        // capacity): when too many have piled up, the oldest go in one more update.
        let full = serde_json::to_string(&intervention).map_err(backend("encode intervention"))?;
        let compact = compact_json(&intervention)?;
        let attribute = intervention_attribute(&intervention);
        let as_newest = self
            .update_answers(channel)
            .update_expression("SET #i = :i, #last = :last, #at = :at")
            .condition_expression("attribute_not_exists(#at) OR #at <= :at")
            .expression_attribute_names("#i", &attribute)
            .expression_attribute_names("#last", ANSWERS_LAST)
            .expression_attribute_names("#at", ANSWERS_LAST_AT)
            .expression_attribute_values(":i", s(&compact))
            .expression_attribute_values(":last", s(full))
            .expression_attribute_values(":at", n(intervention.at.0))
            .return_values(ReturnValue::AllOld)
            .send()
            .await;
        let before = match as_newest {
            Ok(out) => {
                let before = out.attributes.unwrap_or_default();
                self.keep_newer_last(channel, &before, intervention.at).await?;
                before
            }
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => self
                .update_answers(channel)
                .update_expression("SET #i = :i")
                .expression_attribute_names("#i", &attribute)
                .expression_attribute_values(":i", s(compact))
                .return_values(ReturnValue::AllOld)
                .send()
                .await
                .map_err(backend("record intervention"))?
                .attributes
                .unwrap_or_default(),
            Err(e) => return Err(backend("record intervention")(e)),
        };
        let mut recorded: Vec<String> = before
            .into_keys()
            .filter(|k| k.starts_with(INTERVENTION_PREFIX))
            .chain(std::iter::once(attribute))
            .collect();
        recorded.sort();
        recorded.dedup();
        if recorded.len() <= ChannelState::KEPT_INTERVENTIONS + INTERVENTION_TRIM_SLACK {
            return Ok(());
        }
        let stale = &recorded[..recorded.len() - ChannelState::KEPT_INTERVENTIONS];
        let names: Vec<String> = (0..stale.len()).map(|i| format!("#r{i}")).collect();
        let mut trim = self.update_answers(channel).update_expression(format!("REMOVE {}", names.join(", ")));
        for (name, attribute) in names.iter().zip(stale) {
            trim = trim.expression_attribute_names(name, attribute);
        }
        trim.send().await.map_err(backend("trim interventions"))?;
        Ok(())
    }

    async fn record_judgment(
        &self,
        channel: &ChannelId,
        note: JudgmentNote,
        reflection_lull_at: Option<Timestamp>,
    ) -> PortResult<()> {
        // Every judgment writes this: one blind update of its own small item, no read.
        let json = serde_json::to_string(&note).map_err(backend("encode last judgment"))?;
        let update = self
            .client
            .update_item()
            .table_name(&self.tables.channels)
            .key("channel", s(judgment_key(channel)))
            .expression_attribute_names("#j", "last_judgment")
            .expression_attribute_values(":j", s(json));
        let update = match reflection_lull_at {
            Some(at) => update
                .update_expression("SET #j = :j, #l = :l")
                .expression_attribute_names("#l", LULL_ATTRIBUTE)
                .expression_attribute_values(":l", n(at.0)),
            None => update.update_expression("SET #j = :j"),
        };
        update.send().await.map_err(backend("update last judgment"))?;
        Ok(())
    }

    async fn note_lull_reflection(&self, channel: &ChannelId, at: Timestamp) -> PortResult<()> {
        self.set_on_judgment_item(channel, LULL_ATTRIBUTE, n(at.0), "note lull reflection").await
    }

    async fn set_muted(&self, channel: &ChannelId, until: Option<Timestamp>) -> PortResult<()> {
        self.update_state(channel, |state| state.muted_until = until).await
    }

    async fn set_opener(&self, channel: &ChannelId, opener: OpenerState) -> PortResult<()> {
        self.update_state(channel, |state| state.opener = opener.clone()).await
    }

    async fn set_shadow(&self, channel: &ChannelId, shadow: Option<Shadow>) -> PortResult<()> {
        self.update_state(channel, |state| state.shadow = shadow).await
    }

    async fn set_channel_memory(&self, channel: &ChannelId, memory: ChannelMemory) -> PortResult<bool> {
        // Decided on the state the conditional write replaces (the last attempt's).
        let stored = std::sync::atomic::AtomicBool::new(false);
        self.update_state(channel, |state| {
            let newer = memory.generation >= state.memory.generation;
            stored.store(newer, std::sync::atomic::Ordering::Relaxed);
            if newer {
                state.memory = memory.clone();
                state.clear_marks(MemoryTask::Summary);
            }
        })
        .await?;
        Ok(stored.load(std::sync::atomic::Ordering::Relaxed))
    }

    async fn set_reflection_watermark(&self, channel: &ChannelId, ts: Ts) -> PortResult<()> {
        // In the small judgment item, by one blind update: the channel's item is large
        // and charged by size, and read first to be written whole.
        self.set_on_judgment_item(channel, WATERMARK_ATTRIBUTE, s(ts.as_str()), "update reflection watermark").await
    }

    async fn mark_due(
        &self,
        channel: &ChannelId,
        task: MemoryTask,
        due: Timestamp,
        now: Timestamp,
    ) -> PortResult<bool> {
        // `ChannelState::mark_due`'s rule as the condition of one update, no read. It
        // bumps the version, so a whole-state write that read the old mark retries. (An
        // item written before the marks were apart keeps its mark in the JSON only,
        // which this does not see: once, a second job may be queued, and its claim
        // dedupes it.)
        let result = self
            .client
            .update_item()
            .table_name(&self.tables.channels)
            .key("channel", s(&*channel.0))
            .update_expression("SET #d = :due ADD #v :one")
            .condition_expression("attribute_not_exists(#d) OR #d <= :now OR #d > :due")
            .expression_attribute_names("#d", mark_attribute(task))
            .expression_attribute_names("#v", "version")
            .expression_attribute_values(":due", n(due.0))
            .expression_attribute_values(":now", n(now.0))
            .expression_attribute_values(":one", n(1))
            .send()
            .await;
        match result {
            Ok(_) => Ok(true),
            Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(false),
            Err(e) => Err(backend("mark channel state")(e)),
        }
    }

    async fn defer(&self, channel: &ChannelId, task: MemoryTask, until: Timestamp) -> PortResult<()> {
        self.update_state(channel, |state| state.defer(task, until)).await
    }

    async fn clear_marks(&self, channel: &ChannelId, task: MemoryTask) -> PortResult<()> {
        self.update_state(channel, |state| state.clear_marks(task)).await
    }

    async fn workspace_memory(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory> {
        // One Query reads the memory and every channel's line (a page holds 1 MB).
        let mut memory = None;
        let mut lines = Vec::new();
        let scope = workspace.scoped(WORKSPACE_SCOPE);
        for item in self.scope_items(&scope, "query workspace memory", false).await? {
            match get_s(&item, "id") {
                Some(WORKSPACE_MEMORY_ID) => memory = Some(from_item::<WorkspaceMemoryItem>(item)?.workspace),
                Some(_) => lines.push(from_item::<ChannelLineItem>(item)?.line),
                None => {}
            }
        }
        let memory = match memory {
            Some(memory) => memory,
            None => self.legacy_workspace_memory(workspace).await?,
        };
        Ok(WorkspaceMemory { channel_lines: crate::adapters::memory::newest_first(lines), ..memory })
    }

    async fn workspace_memory_without_lines(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory> {
        let scope = workspace.scoped(WORKSPACE_SCOPE);
        let out = self.get_facts_item(scope, WORKSPACE_MEMORY_ID, "get workspace memory").await?;
        match out.item {
            Some(item) => Ok(from_item::<WorkspaceMemoryItem>(item)?.workspace),
            None => self.legacy_workspace_memory(workspace).await,
        }
    }

    async fn set_workspace_memory(&self, workspace: Workspace<'_>, memory: WorkspaceMemory) -> PortResult<()> {
        // The item the memory was kept in before (read while the one below is missing)
        // goes first, at every write (once an hour at most, and one unit): a forget's
        // wipe that dies halfway leaves no copy behind (its retry reads the memory
        // again), and neither does an old version that wrote it again during a deploy.
        self.client
            .delete_item()
            .table_name(&self.tables.channels)
            .key("channel", s(LEGACY_WORKSPACE_KEY))
            .send()
            .await
            .map_err(backend("delete the old workspace memory"))?;
        let item = WorkspaceMemoryItem {
            scope: workspace.scoped(WORKSPACE_SCOPE),
            id: WORKSPACE_MEMORY_ID.into(),
            workspace: WorkspaceMemory { channel_lines: Vec::new(), ..memory },
        };
        self.put_facts_item(&item, "put workspace memory").await
    }

    async fn set_channel_line(&self, channel: &ChannelId, line: Option<ChannelLine>) -> PortResult<()> {
        // An item of its own per channel: a summary's write is charged for its line,
        // not for every channel's, and no number of channels fills an item.
        let id = format!("{CHANNEL_LINE_PREFIX}{channel}");
        let scope = channel.workspace().scoped(WORKSPACE_SCOPE);
        let Some(line) = line else {
            self.delete_facts_item(scope, &id, "delete a channel line").await?;
            // And its copy in the old item, if that is still there (a forget's remake
            // of this channel's memory, a channel gone private).
            let removed = self
                .client
                .update_item()
                .table_name(&self.tables.channels)
                .key("channel", s(LEGACY_WORKSPACE_KEY))
                .update_expression("REMOVE #line")
                .condition_expression("attribute_exists(channel)")
                .expression_attribute_names("#line", id)
                .send()
                .await;
            return match removed {
                Ok(_) => Ok(()),
                Err(SdkError::ServiceError(e)) if e.err().is_conditional_check_failed_exception() => Ok(()),
                Err(e) => Err(backend("remove a channel line from the old workspace memory")(e)),
            };
        };
        let item = ChannelLineItem { scope, id, line };
        self.put_facts_item(&item, "put a channel line").await
    }

    async fn apply_feedback(
        &self,
        channel: &ChannelId,
        change: &crate::domain::talkativeness::FeedbackChange,
        now: Timestamp,
        limits: &crate::domain::talkativeness::TalkativenessLimits,
    ) -> PortResult<Option<crate::domain::talkativeness::FeedbackOutcome>> {
        self.apply_talkativeness(channel, change, now, limits).await
    }

    async fn state_channels(&self) -> PortResult<Vec<ChannelId>> {
        self.state_channels_scanned().await
    }

    async fn delete_channel_state(&self, channel: &ChannelId) -> PortResult<()> {
        self.delete_state_items(channel).await?;
        self.set_channel_line(channel, None).await
    }

    async fn slack_gone(&self, workspace: Workspace<'_>) -> PortResult<Option<Timestamp>> {
        self.read_slack_gone(workspace).await
    }

    async fn mark_slack_gone(&self, workspace: Workspace<'_>, at: Timestamp) -> PortResult<bool> {
        self.change_slack_gone(workspace, at, true).await
    }

    async fn clear_slack_gone(&self, workspace: Workspace<'_>, at: Timestamp) -> PortResult<bool> {
        self.change_slack_gone(workspace, at, false).await
    }
}

impl DynamoStore {
    /// The workspace memory where it was kept before 2026-11-27 (the channels table's
    /// `#workspace` item, beside every channel's line): read until the memory is
    /// written where it is now, so an upgrade keeps the workspace's history. Its lines
    /// are not read: each channel's comes back with its next summary. Only the shared
    /// workspace had one.
    pub(super) async fn legacy_workspace_memory(&self, workspace: Workspace<'_>) -> PortResult<WorkspaceMemory> {
        if workspace != Workspace::Shared {
            return Ok(WorkspaceMemory::default());
        }
        let out = self
            .client
            .get_item()
            .table_name(&self.tables.channels)
            .key("channel", s(LEGACY_WORKSPACE_KEY))
            .projection_expression("workspace")
            .send()
            .await
            .map_err(backend("get the old workspace memory"))?;
        let memory = out.item.as_ref().and_then(|item| get_s(item, "workspace"));
        Ok(memory
            .map(serde_json::from_str::<WorkspaceMemory>)
            .transpose()
            .map_err(backend("decode the old workspace memory"))?
            .unwrap_or_default())
    }
}
