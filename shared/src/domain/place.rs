//! Where a message lives (issue 45): the platform, the workspace, the channel. Read
//! from a channel's id here and nowhere else, so a second workspace or a third platform
//! is a new value of these types, not a new guess at an id's shape in every place that
//! needs to know.
//!
//! A Slack channel of a workspace kuuki serves among others is written `T…/C…` (the
//! team, or an Enterprise Grid org's `E…`, then the channel); a channel of the one
//! workspace a deployment serves, a Discord channel and a replayed one are written as
//! their platform names them, and live in the shared workspace.

use super::{ChannelId, UserId};

/// The chat platform a channel or a person is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Platform {
    Slack,
    Discord,
}

impl Platform {
    /// The platform an id (a channel's or a person's) is from: Discord's are snowflakes,
    /// digits only; Slack's start with a letter (`C…`, `D…`, `G…`, `U…`, `B…`), and
    /// so do the names of replayed channels.
    pub fn of_id(id: &str) -> Platform {
        if is_snowflake(id) { Platform::Discord } else { Platform::Slack }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Slack => "slack",
            Platform::Discord => "discord",
        }
    }
}

/// Whose data a channel's is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workspace<'a> {
    /// The one Slack workspace a deployment serves alone, a Discord server's channels
    /// (their ids are unique across servers), a replay.
    Shared,
    /// A Slack workspace among several on one deployment: its team id (`T…`), or the
    /// org's (`E…`) for an org-wide install.
    Slack(&'a str),
}

impl<'a> Workspace<'a> {
    /// The workspace's id: `None` for the shared one.
    pub fn id(&self) -> Option<&'a str> {
        match self {
            Workspace::Shared => None,
            Workspace::Slack(id) => Some(id),
        }
    }

    /// A store key of this workspace: `base` itself for the shared one (so a deployment
    /// serving one workspace keeps the keys it always had), `base#T…` otherwise.
    pub fn scoped(&self, base: &str) -> String {
        match self {
            Workspace::Shared => base.to_owned(),
            Workspace::Slack(id) => format!("{base}#{id}"),
        }
    }

    /// An id (a person's) as a store keys it in this workspace: as it is in the shared
    /// one, `T…/U…` otherwise, as a channel among several workspaces is written.
    pub fn qualify(&self, id: &str) -> String {
        match self {
            Workspace::Shared => id.to_owned(),
            Workspace::Slack(workspace) => format!("{workspace}/{id}"),
        }
    }

    /// The id a key [`Workspace::qualify`] made holds, when the key is this workspace's.
    pub fn unqualify<'k>(&self, key: &'k str) -> Option<&'k str> {
        match self {
            Workspace::Shared => (!key.contains('/')).then_some(key),
            Workspace::Slack(workspace) => key.strip_prefix(workspace).and_then(|rest| rest.strip_prefix('/')),
        }
    }
}

/// Where a channel is: its platform, its workspace, and its id as the platform knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place<'a> {
    pub platform: Platform,
    pub workspace: Workspace<'a>,
    /// The id the platform's API takes.
    pub channel: &'a str,
}

/// Whether `id` is a Discord snowflake: digits only (an application's, a channel's, a
/// person's).
pub fn is_snowflake(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit())
}

/// A Slack id: an uppercase letter, then uppercase letters and digits.
fn is_slack_shaped(id: &str, first: &[u8]) -> bool {
    id.len() >= 2
        && first.contains(&id.as_bytes()[0])
        && id.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit())
}

impl ChannelId {
    /// Where this channel is: the one parser of a channel's id.
    pub fn place(&self) -> Place<'_> {
        let id = self.as_str();
        if let Some((workspace, channel)) = id.split_once('/')
            && is_slack_shaped(workspace, b"TE")
            && is_slack_shaped(channel, b"CDG")
        {
            return Place { platform: Platform::Slack, workspace: Workspace::Slack(workspace), channel };
        }
        Place { platform: Platform::of_id(id), workspace: Workspace::Shared, channel: id }
    }

    /// A Slack channel of a workspace among several: `T…/C…` ([`ChannelId::place`]).
    pub fn slack_in(workspace: &str, channel: &str) -> ChannelId {
        ChannelId(format!("{workspace}/{channel}").into())
    }

    /// Whose data this channel's is.
    pub fn workspace(&self) -> Workspace<'_> {
        self.place().workspace
    }

    /// The platform this channel is on.
    pub fn platform(&self) -> Platform {
        self.place().platform
    }

    /// Whether this channel is on Discord.
    pub fn is_discord(&self) -> bool {
        self.platform() == Platform::Discord
    }
}

impl UserId {
    /// The platform this person (or bot) is on.
    pub fn platform(&self) -> Platform {
        Platform::of_id(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_channels_id_tells_its_place() {
        // The place of `id`, with its borrowed parts made owned for comparing.
        let place = |id: &str| {
            let channel = ChannelId(id.into());
            let p = channel.place();
            let workspace = match p.workspace {
                Workspace::Shared => None,
                Workspace::Slack(w) => Some(w.to_owned()),
            };
            (p.platform, workspace, p.channel.to_owned())
        };
        let shared = |platform, channel: &str| (platform, None, channel.to_owned());
        assert_eq!(place("C0123"), shared(Platform::Slack, "C0123"));
        assert_eq!(place("dev"), shared(Platform::Slack, "dev"), "a replayed channel");
        assert_eq!(place("80351110224678912"), shared(Platform::Discord, "80351110224678912"));
        assert_eq!(place("T0123/C0456"), (Platform::Slack, Some("T0123".to_owned()), "C0456".to_owned()));
        assert_eq!(place("E0123/G0456").1.as_deref(), Some("E0123"), "an org-wide install");
        for not_qualified in ["t1/c1", "dev/x", "T1/", "/C1", "T1/C1/C2", "U1/C1"] {
            assert_eq!(place(not_qualified), shared(Platform::Slack, not_qualified), "{not_qualified}");
        }
        assert!(ChannelId("80351110224678912".into()).is_discord());
        assert!(!ChannelId("T1/C1".into()).is_discord());
    }

    #[test]
    fn a_workspace_scopes_keys_and_only_its_own_read_back() {
        let shared = Workspace::Shared;
        let t1 = Workspace::Slack("T1");
        assert_eq!((shared.scoped("#profiles"), t1.scoped("#profiles")), ("#profiles".into(), "#profiles#T1".into()));
        assert_eq!((shared.qualify("U1"), t1.qualify("U1")), ("U1".into(), "T1/U1".into()));
        assert_eq!(t1.unqualify("T1/U1"), Some("U1"));
        for not_t1s in ["U1", "T10/U1", "T2/U1", "T1U1"] {
            assert_eq!(t1.unqualify(not_t1s), None, "{not_t1s}");
        }
        assert_eq!((shared.unqualify("U1"), shared.unqualify("T1/U1")), (Some("U1"), None));
        assert_eq!(ChannelId("T1/C1".into()).workspace().id(), Some("T1"));
        assert_eq!(ChannelId("C1".into()).workspace(), Workspace::Shared);
    }

    #[test]
    fn snowflakes_are_digits_only() {
        assert!(!is_snowflake("") && !is_snowflake("C0123") && is_snowflake("80351110224678912"));
        assert_eq!(UserId("U0123".into()).platform(), Platform::Slack);
        assert_eq!(UserId("80351110224678912".into()).platform(), Platform::Discord);
        assert_eq!(Platform::Discord.as_str(), "discord");
    }
}
