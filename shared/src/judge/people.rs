//! The channel's people the judge can tell by name ([`super::naming`]): read only for
//! a turn that opens a line with `nick:` or `nick,`, so most judgments cost nothing more.

use std::sync::Arc;

use crate::conversation::Window;
use crate::deps::Deps;
use crate::domain::{Author, Message};
use crate::ports::PortResult;

use super::naming::{self, KnownPeople};

/// The humans of `target`'s channel window, by the names their messages carry, and by
/// their display names when the turn calls a nick none of those is (Slack's messages
/// carry only an id; the client caches the names).
pub(super) async fn load(
    deps: &Deps,
    window: &Window,
    target: &Message,
    turn: &[Arc<Message>],
) -> PortResult<KnownPeople> {
    if turn.iter().all(|m| naming::line_openings(&m.text).next().is_none()) {
        return Ok(KnownPeople::default());
    }
    let since = (deps.clock.now() - deps.settings.memory.channel_buffer_ttl).min(target.at);
    let channel =
        window.recent_in_channel(deps, &target.channel, since, deps.settings.memory.channel_buffer_size).await?;
    let mut people = KnownPeople::of_messages(&channel);
    if naming::has_unknown_nick(turn, &people) {
        let humans = channel.iter().map(|m| &**m).filter(|m| m.author == Author::Human);
        let names = crate::context::display_names(deps, humans).await;
        people.extend(KnownPeople::new(names.iter().map(|(user, name)| (user, name.as_str()))));
    }
    Ok(people)
}
