//! The judged question's own conversation (issue 34): in a busy channel several
//! conversations interleave at the top level, and the last N lines are mostly other
//! people's. The LLM judge is shown the lines that belong to the asker's: theirs, the
//! lines that mention or call them by name (the answers), the lines of the people they
//! called, and kuuki's lines right after any of those. Pure, like the rules.

use std::sync::Arc;

use crate::domain::{Author, BotIdentity, Message, UserId, mentioned_ids};

use super::naming::{KnownPeople, line_openings};
use super::rules::{is_question, turn};

/// The lines of `conversation` (oldest first, ending with the judged turn) that belong
/// to the judged turn's own conversation, when the turn asks something at the top
/// level while others talk among themselves (lines of two or more people left out);
/// `None` otherwise (a thread is its own conversation already; a remark, or a quiet
/// channel, is judged against the whole flow).
pub fn own_conversation(
    conversation: &[Arc<Message>],
    bot: &BotIdentity,
    people: &KnownPeople,
) -> Option<Vec<Arc<Message>>> {
    let judged = turn(conversation);
    let asker = judged.last()?;
    if asker.thread_root.is_some() || !judged.iter().any(|m| is_question(&m.text)) {
        return None;
    }
    let mut all = KnownPeople::of_messages(conversation);
    all.extend(people.clone());
    let asker_names: Vec<&str> = all.names_of(&asker.user).collect();
    // The people the asker called: by mention, or by a nick another line can be told by.
    let mut called: Vec<UserId> = Vec::new();
    for m in conversation.iter().filter(|m| m.user == asker.user) {
        called.extend(mentioned_ids(&m.text).filter(|id| !bot.is_me(id)).map(|id| UserId(id.into())));
        for nick in line_openings(&m.text) {
            called.extend(all.users_named(&nick).filter(|u| *u != asker.user));
        }
    }
    let names_asker = |m: &Message| {
        mentioned_ids(&m.text).any(|id| id == asker.user.as_str())
            || line_openings(&m.text).any(|nick| asker_names.contains(&nick.as_str()))
    };
    let mut own: Vec<Arc<Message>> = Vec::new();
    let mut left_out: Vec<&UserId> = Vec::new();
    let mut previous_kept = false;
    for m in conversation {
        let keep = match m.author {
            Author::OwnBot => previous_kept,
            _ => m.user == asker.user || called.contains(&m.user) || names_asker(m),
        };
        if keep {
            own.push(m.clone());
        } else if m.author == Author::Human && !left_out.contains(&&m.user) {
            left_out.push(&m.user);
        }
        previous_kept = keep;
    }
    // Lines of one other person may well be the asker's own talk without names (two
    // people need none); lines of two or more are another conversation going on.
    (left_out.len() >= MIN_OTHERS_LEFT_OUT).then_some(own)
}

/// How many people's lines must be left out for the rest to count as another
/// conversation rather than the asker's own.
const MIN_OTHERS_LEFT_OUT: usize = 2;
