//! `kuuki discord register`: installs the `/kuuki` application command (a bulk
//! overwrite of the application's global commands, so running it again is harmless).

use std::collections::HashMap;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use kuuki::adapters::discord::DiscordClient;
use kuuki::config::Settings;
use kuuki::ingest::discord::command_definitions;
use kuuki::secrecy::ExposeSecret;

#[derive(Args)]
pub struct DiscordArgs {
    #[command(subcommand)]
    command: DiscordCommand,
}

#[derive(Subcommand)]
enum DiscordCommand {
    /// Install `/kuuki` (status, why, mute, unmute, shadow, ask, quieter, louder, talkativeness, …) for the application
    /// DISCORD_APPLICATION_ID, with DISCORD_BOT_TOKEN.
    Register,
}

pub async fn run(args: DiscordArgs) -> anyhow::Result<()> {
    match args.command {
        DiscordCommand::Register => register().await,
    }
}

async fn register() -> anyhow::Result<()> {
    let vars: HashMap<String, String> = std::env::vars().collect();
    let settings = Settings::from_vars(&vars)?;
    let token = settings.platforms.discord_bot_token.expose_secret();
    if token.is_empty() {
        bail!("DISCORD_BOT_TOKEN is not set: registering commands needs the bot's token");
    }
    if settings.platforms.discord_application_id.trim().is_empty() {
        bail!("DISCORD_APPLICATION_ID is not set: the commands are registered under the application");
    }
    let client =
        DiscordClient::new(&settings.platforms.discord_api_base_url, token).with_timeout(settings.budget.chat_timeout);
    let count = client
        .register_commands(settings.platforms.discord_application_id.trim(), &command_definitions())
        .await
        .with_context(|| format!("registering /kuuki at {}", settings.platforms.discord_api_base_url))?;
    println!(
        "registered {count} command(s) for application {}: /kuuki",
        settings.platforms.discord_application_id.trim()
    );
    println!(
        "invite the bot with: {}",
        kuuki::adapters::discord::invite::invite_url(&settings.platforms.discord_application_id)
    );
    Ok(())
}
