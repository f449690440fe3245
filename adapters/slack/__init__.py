"""Slack adapter (slack-bolt): events and button clicks in, Block Kit answers out. See docs/SLACK.md."""
from adapters.slack.app import EVENTS_PATH, SlackBot, SlackConfig

__all__ = ["EVENTS_PATH", "SlackBot", "SlackConfig"]
