//! The bot's invite link: the OAuth2 scopes and the channel permissions kuuki uses.

/// The permissions kuuki needs in a channel, by what it does there (Discord's bits).
pub const PERMISSIONS: &[(&str, u64)] = &[
    // Add Reactions: react-only answers.
    ("Add Reactions", 1 << 6),
    // View Channels: receive the channel's messages at all.
    ("View Channels", 1 << 10),
    // Send Messages: answers in a channel.
    ("Send Messages", 1 << 11),
    // Read Message History: the message an answer replies to.
    ("Read Message History", 1 << 16),
    // Send Messages in Threads: answers in a thread, which Send Messages does not cover.
    ("Send Messages in Threads", 1 << 38),
];

/// The permission integer of [`PERMISSIONS`].
pub fn permission_bits() -> u64 {
    PERMISSIONS.iter().map(|(_, bit)| bit).fold(0, |all, bit| all | bit)
}

/// The URL that adds the bot of `application_id` to a server with `/kuuki` and
/// [`PERMISSIONS`].
pub fn invite_url(application_id: &str) -> String {
    format!(
        "https://discord.com/oauth2/authorize?client_id={}&scope=bot+applications.commands&permissions={}",
        application_id.trim(),
        permission_bits()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_invite_asks_for_threads_and_everything_kuuki_does() {
        let url = invite_url(" 1234 ");
        assert_eq!(
            url,
            "https://discord.com/oauth2/authorize?client_id=1234&scope=bot+applications.commands&permissions=274877975616"
        );
        let names: Vec<&str> = PERMISSIONS.iter().map(|(name, _)| *name).collect();
        assert!(names.contains(&"Send Messages in Threads"));
        assert_eq!(permission_bits() & (1 << 38), 1 << 38);
    }
}
