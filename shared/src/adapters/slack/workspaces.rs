//! Slack for many workspaces on one deployment (issue 45): each call made with the
//! token of the workspace its channel is in (`T…/C…`), looked up through
//! [`SlackTokens`]. A token Slack refuses is let go, so the next call reads the
//! installation again (an uninstall, a reinstall with a new token).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use secrecy::ExposeSecret;

use super::SlackClient;
use crate::domain::{ChannelId, CommandReply, Ts, UserId};
use crate::ports::{Chat, FoundPost, PortError, PortResult, Post, SlackTokens};

/// Slack's answers that say a token is dead, not wrong for a moment.
const DEAD_TOKEN: &[&str] = &["invalid_auth", "token_revoked", "account_inactive", "not_authed", "token_expired"];

pub struct SlackWorkspaces {
    /// Calls no workspace's method with a token (command answers go to their URL).
    tokenless: SlackClient,
    tokens: Arc<dyn SlackTokens>,
    clients: Mutex<HashMap<String, Arc<SlackClient>>>,
}

impl SlackWorkspaces {
    /// `client` gives the API base, the timeouts and the connections (its own token is
    /// not used).
    pub fn new(client: SlackClient, tokens: Arc<dyn SlackTokens>) -> Self {
        SlackWorkspaces { tokenless: client.with_token(""), tokens, clients: Mutex::new(HashMap::new()) }
    }

    /// The client for `channel`'s workspace, with its token now.
    async fn client(&self, channel: &ChannelId) -> PortResult<(Arc<SlackClient>, String)> {
        let Some(workspace) = channel.workspace().id() else {
            return Err(PortError::Rejected {
                backend: "slack",
                message: format!("{channel} names no workspace, and this deployment serves many"),
            });
        };
        let Some(token) = self.tokens.bot_token(workspace).await? else {
            return Err(PortError::Rejected {
                backend: "slack",
                message: format!("the Slack workspace {workspace} is not installed"),
            });
        };
        let mut clients = self.clients.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let client = match clients.get(workspace) {
            Some(client) if client.has_token(token.expose_secret()) => client.clone(),
            _ => {
                let client = Arc::new(self.tokenless.with_token(token.expose_secret()));
                clients.insert(workspace.to_owned(), client.clone());
                client
            }
        };
        Ok((client, workspace.to_owned()))
    }

    /// `result`, after letting a refused token go.
    fn checked<T>(&self, workspace: &str, result: PortResult<T>) -> PortResult<T> {
        if let Err(PortError::Rejected { message, .. }) = &result
            && DEAD_TOKEN.iter().any(|error| message.contains(&format!("({error})")))
        {
            tracing::warn!(workspace, "Slack refused the workspace's token; its installation is read again next time");
            self.tokens.token_refused(workspace);
            self.clients.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).remove(workspace);
        }
        result
    }
}

#[async_trait]
impl Chat for SlackWorkspaces {
    async fn post_message(&self, post: &Post) -> PortResult<Ts> {
        let (client, workspace) = self.client(&post.channel).await?;
        self.checked(&workspace, client.post_message(post).await)
    }

    async fn add_reaction(&self, channel: &ChannelId, ts: &Ts, emoji: &str) -> PortResult<()> {
        let (client, workspace) = self.client(channel).await?;
        self.checked(&workspace, client.add_reaction(channel, ts, emoji).await)
    }

    async fn find_post(
        &self,
        channel: &ChannelId,
        thread_root: Option<&Ts>,
        after: &Ts,
        tag: &str,
    ) -> PortResult<Option<FoundPost>> {
        let (client, workspace) = self.client(channel).await?;
        self.checked(&workspace, client.find_post(channel, thread_root, after, tag).await)
    }

    async fn user_name(&self, channel: &ChannelId, user: &UserId) -> PortResult<String> {
        let (client, workspace) = self.client(channel).await?;
        self.checked(&workspace, client.user_name(channel, user).await)
    }

    async fn answer_command(&self, reply: &CommandReply, text: &str) -> PortResult<()> {
        self.tokenless.answer_command(reply, text).await
    }

    async fn is_workspace_admin(&self, channel: &ChannelId, user: &UserId) -> PortResult<bool> {
        let (client, workspace) = self.client(channel).await?;
        self.checked(&workspace, client.is_workspace_admin(channel, user).await)
    }

    fn max_message_chars(&self, channel: &ChannelId) -> Option<usize> {
        self.tokenless.max_message_chars(channel)
    }

    fn threads(&self, channel: &ChannelId) -> bool {
        self.tokenless.threads(channel)
    }
}
