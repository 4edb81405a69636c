"""Platform simulators (Telegram, Discord, Slack) on 127.0.0.1."""
