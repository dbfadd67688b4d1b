use super::channels::*;
use super::facts::*;
use super::ledger::*;
use super::messages::*;
use super::*;

#[test]
fn embeddings_are_four_little_endian_bytes_a_dimension() {
    let embedding = [1.0_f32, -0.5, f32::MIN_POSITIVE, 0.1];
    let bytes = embedding_to_bytes(&embedding);
    assert_eq!(bytes.len(), 16);
    assert_eq!(&bytes[..4], &[0x00, 0x00, 0x80, 0x3f], "1.0 little-endian");
    assert_eq!(embedding_from_bytes(&bytes).unwrap(), embedding);
    assert!(embedding_from_bytes(&bytes[..5]).is_err());
    assert_eq!(embedding_from_bytes(&[]).unwrap(), Vec::<f32>::new());
}

// The layouts below are the ones the hand-built items had: existing items must read.

fn item(attributes: &[(&str, AttributeValue)]) -> Item {
    attributes.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

fn message(thread_root: Option<&str>) -> Message {
    Message {
        channel: ChannelId("C1".into()),
        ts: Ts::new("1712345678.000100"),
        thread_root: thread_root.map(Ts::new),
        user: UserId("U1".into()),
        user_name: "ana".into(),
        text: "hi".into(),
        author: Author::OtherBot,
        replies_to_bot: true,
        replies_to: None,
        in_dm: false,
        private_channel: true,
        at: Timestamp(1_712_345_678_000_100),
    }
}

#[test]
fn message_items_keep_their_layout() {
    let m = message(Some("1712345600.000001"));
    let expected = item(&[
        ("channel", s("C1")),
        ("sk", s("00000000001712345678.000100000")),
        ("ts", s("1712345678.000100")),
        ("conv", s("C1#1712345600.000001")),
        ("thread_root", s("1712345600.000001")),
        ("user", s("U1")),
        ("user_name", s("ana")),
        ("text", s("hi")),
        ("author", s("other_bot")),
        ("replies_to_bot", AttributeValue::Bool(true)),
        ("in_dm", AttributeValue::Bool(false)),
        ("private_channel", AttributeValue::Bool(true)),
        ("at", n(1_712_345_678_000_100_i64)),
        ("expires_at", n(99)),
    ]);
    assert_eq!(to_item(&MessageItem::new(&m, 99)).unwrap(), expected);
    assert_eq!(from_item::<MessageItem>(expected).unwrap().into_message(), m);
    for (author, name) in [(Author::Human, "human"), (Author::OwnBot, "own_bot"), (Author::OtherBot, "other_bot")] {
        let written = to_item(&MessageItem::new(&Message { author, ..m.clone() }, 99)).unwrap();
        assert_eq!(written.get("author"), Some(&s(name)));
    }

    let top = message(None);
    let written = to_item(&MessageItem::new(&top, 99)).unwrap();
    assert!(!written.contains_key("conv"), "a top-level message is not written to the conversation index");
    assert!(!written.contains_key("thread_root"), "no NULL attribute for a top-level message");
    // An item written before the index was sparse still reads.
    let mut before = written.clone();
    before.insert("conv".into(), s("C1#-"));
    assert_eq!(from_item::<MessageItem>(before).unwrap().into_message(), top);
    // The optional attributes may be absent.
    let mut sparse = written;
    for name in ["user_name", "text", "replies_to_bot", "in_dm", "private_channel", "expires_at"] {
        sparse.remove(name);
    }
    let read = from_item::<MessageItem>(sparse).unwrap();
    assert_eq!(read.expires_at, None);
    let read = read.into_message();
    assert_eq!((read.text.as_str(), read.replies_to_bot, read.private_channel), ("", false, false));
}

#[test]
fn channel_items_keep_their_layout() {
    let state = ChannelState {
        muted_until: Some(Timestamp(5)),
        summary_due: Some(Timestamp(7)),
        reflection_due: Some(Timestamp(8)),
        ..ChannelState::default()
    };
    let json = serde_json::to_string(&state).unwrap();
    // As written before the judgment's fields were apart: all in the JSON.
    let whole = item(&[("channel", s("C1")), ("state", s(&json)), ("version", n(3))]);
    assert_eq!(from_item::<ChannelItem>(whole.clone()).unwrap().into_state().unwrap(), (state.clone(), 3));
    // The fields written apart win over the JSON's copies.
    let note = JudgmentNote {
        at: Timestamp(9),
        ts: Ts::new("1.000001"),
        user: UserId("U1".into()),
        text: "hi".into(),
        score: 10,
        breakdown: Default::default(),
        decision: crate::domain::Decision::Skip,
        respond: false,
        response_type: None,
        reason: "low".into(),
    };
    let mut apart = whole;
    apart.insert("last_judgment".into(), s(serde_json::to_string(&note).unwrap()));
    apart.insert("summary_due".into(), n(70));
    let (read, version) = from_item::<ChannelItem>(apart).unwrap().into_state().unwrap();
    assert_eq!(version, 3);
    assert_eq!(read.last_judgment, Some(note));
    assert_eq!((read.summary_due, read.reflection_due), (Some(Timestamp(70)), Some(Timestamp(8))));
    // Only by-field writes so far (no JSON, no version): a fresh state.
    let bare = item(&[("channel", s("C1")), ("reflection_due", n(4))]);
    let (read, version) = from_item::<ChannelItem>(bare).unwrap().into_state().unwrap();
    assert_eq!(version, 0);
    assert_eq!(read, ChannelState { reflection_due: Some(Timestamp(4)), ..ChannelState::default() });
}

#[test]
fn interventions_apart_merge_with_the_json_copy() {
    let intervention = |secs: i64| Intervention {
        at: Timestamp(secs),
        thread: ThreadKey::top_level(ChannelId("C1".into())),
        response_type: crate::domain::ResponseType::ShortAck,
        excerpt: format!("at {secs}"),
        facts: Vec::new(),
        unasked_post: None,
        pick_up: false,
    };
    // The JSON copy (a whole-state write, or an item from before) holds 1 and 2.
    let state = ChannelState {
        last_response_at: Some(Timestamp(2)),
        interventions: vec![intervention(1), intervention(2)],
        ..ChannelState::default()
    };
    let mut written =
        item(&[("channel", s("C1")), ("state", s(serde_json::to_string(&state).unwrap())), ("version", n(1))]);
    // Apart: 2 again (written before that copy) and 3 to 24.
    for secs in std::iter::once(2).chain(3..=24) {
        let i = intervention(secs);
        written.insert(intervention_attribute(&i), s(serde_json::to_string(&i).unwrap()));
    }
    let (read, version) = channel_state_from(written.clone(), None).unwrap();
    assert_eq!(version, 1);
    let excerpts: Vec<&str> = read.interventions.iter().map(|i| i.excerpt.as_str()).collect();
    let newest: Vec<String> = (5..=24).map(|secs| format!("at {secs}")).collect();
    assert_eq!(excerpts, newest, "each once, newest last, the kept number");
    assert_eq!(read.last_response_at, Some(Timestamp(24)));

    // The answers item: 25 and 26 without their excerpts, 26 in full as `last`.
    let mut answers = item(&[("channel", s("#answers#C1"))]);
    for secs in [25, 26] {
        let compact = Intervention { excerpt: String::new(), ..intervention(secs) };
        answers.insert(intervention_attribute(&compact), s(serde_json::to_string(&compact).unwrap()));
    }
    answers.insert(ANSWERS_LAST.into(), s(serde_json::to_string(&intervention(26)).unwrap()));
    let (read, _) = channel_state_from(written, Some(answers)).unwrap();
    let excerpts: Vec<&str> = read.interventions.iter().map(|i| i.excerpt.as_str()).collect();
    assert_eq!(excerpts.len(), ChannelState::KEPT_INTERVENTIONS);
    assert_eq!(&excerpts[excerpts.len() - 3..], ["at 24", "", "at 26"], "the newest in full");
    assert_eq!(read.last_response_at, Some(Timestamp(26)));
    // The names sort by time.
    assert!(intervention_attribute(&intervention(9)) < intervention_attribute(&intervention(10)));
}

#[test]
fn fact_items_keep_the_embedding_apart_as_bytes() {
    let fact = Fact {
        id: "f1".into(),
        channel: ChannelId("C1".into()),
        content: "likes tea".into(),
        keywords: vec!["tea".into()],
        source_users: vec!["U1".into()],
        confidence: 0.8,
        shareable: false,
        created_at: Timestamp(1),
        confirmed_at: Timestamp(2),
        strength: 1,
        source_messages: vec![],
        embedding: None,
    };
    let json = serde_json::to_string(&fact).unwrap();
    let with = FactItem {
        scope: "C1".into(),
        id: "f1".into(),
        fact: fact.clone(),
        embedding: Some(vec![1.0, -0.5]),
        rev: Some(7),
    };
    let expected = item(&[
        ("scope", s("C1")),
        ("id", s("f1")),
        ("fact", s(&json)),
        ("embedding", AttributeValue::B(embedding_to_bytes(&[1.0, -0.5]).into())),
        ("rev", n(7)),
    ]);
    assert_eq!(to_item(&with).unwrap(), expected);
    assert_eq!(from_item::<FactItem>(expected).unwrap(), with);

    let without = FactItem { embedding: None, rev: None, ..with };
    let written = to_item(&without).unwrap();
    assert!(!written.contains_key("embedding") && !written.contains_key("rev"));
    assert_eq!(from_item::<FactItem>(written).unwrap(), without);
}

#[test]
fn note_and_profile_items_keep_their_layout() {
    let note = UserNote { channel: ChannelId("C1".into()), user: UserId("U1".into()), ..UserNote::default() };
    let json = serde_json::to_string(&note).unwrap();
    let whole = NoteItem {
        scope: "#notes#C1".into(),
        id: "U1".into(),
        note: Some(note.clone()),
        tags: None,
        summary: None,
        last_topics: None,
        updated_at: None,
    };
    let written = to_item(&whole).unwrap();
    assert_eq!(written, item(&[("scope", s("#notes#C1")), ("id", s("U1")), ("note", s(&json))]));
    let (c1, u1) = (ChannelId("C1".into()), UserId("U1".into()));
    assert_eq!(from_item::<NoteItem>(written).unwrap().into_note(&c1, &u1), note);
    // As the reflection's and the answer's updates (ADD, SET) leave it, over a note
    // stored whole: theirs win, the tags are added to.
    let stored = UserNote { tags: vec!["rust".into()], summary: "old".into(), ..note.clone() };
    let updated: NoteItem = from_item(item(&[
        ("scope", s("#notes#C1")),
        ("id", s("U1")),
        ("note", s(serde_json::to_string(&stored).unwrap())),
        ("tags", AttributeValue::Ss(vec!["infra".into(), "cats".into(), "rust".into()])),
        ("summary", s("new")),
        ("last_topics", AttributeValue::L(vec![s("deploy")])),
        ("updated_at", n(30)),
    ]))
    .unwrap();
    let read = updated.into_note(&c1, &u1);
    assert_eq!(read.tags, ["rust", "cats", "infra"]);
    assert_eq!((read.summary.as_str(), read.last_topics.as_slice()), ("new", ["deploy".to_owned()].as_slice()));
    assert_eq!(read.updated_at, Some(Timestamp(30)));

    // As the counting update (ADD, SET) leaves it.
    let profile: ProfileItem = from_item(item(&[
        ("scope", s(PROFILES_SCOPE)),
        ("id", s("U1")),
        ("interactions", n(3)),
        ("bot_mentions", n(0)),
        ("channels", AttributeValue::Ss(vec!["C2".into(), "C1".into()])),
        ("first_at", n(10)),
        ("last_at", n(20)),
    ]))
    .unwrap();
    assert_eq!((profile.interactions, profile.bot_mentions), (3, 0));
    assert_eq!(profile.channels, ["C2", "C1"]);
    assert_eq!((profile.first_at, profile.last_at), (Some(Timestamp(10)), Some(Timestamp(20))));
}

#[test]
fn ledger_items_keep_their_layout() {
    let entry = LedgerItem {
        key: "k".into(),
        status: CACHED.into(),
        until: Timestamp(7_000_000),
        expires_at: 7 + LEDGER_GRACE_SECONDS,
        value: Some("v".into()),
        posting: None,
        holder: None,
    };
    let expected = item(&[
        ("key", s("k")),
        ("status", s(CACHED)),
        ("until", n(7_000_000)),
        ("expires_at", n(7 + LEDGER_GRACE_SECONDS)),
        ("value", s("v")),
    ]);
    assert_eq!(to_item(&entry).unwrap(), expected);
    assert_eq!(from_item::<LedgerItem>(expected).unwrap(), entry);
    // A claim as the claim and posting updates leave it.
    let claim: LedgerItem = from_item(item(&[
        ("key", s("k")),
        ("status", s(IN_PROGRESS)),
        ("until", n(0)),
        ("expires_at", n(1)),
        ("posting", AttributeValue::Bool(true)),
    ]))
    .unwrap();
    assert_eq!((claim.posting, claim.value), (Some(true), None));
}
