"""The recorded conversation of one sample: a header, then each message in a bordered box.

Contract: :meth:`ConversationView.show` replaces what the view shows with a
:class:`~miles_tui.core.dump.trajectory.Conversation` (None: a note that the
run recorded none for this sample). The text comes from
:mod:`miles_tui.tui.conversation_lines`; the view only mounts it and
scrolls. Each message is a Static with the class ``message`` and its role's
class (``-user``, ``-assistant``, ...), styled by the screen's CSS. It never
reads files.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import Conversation
from miles_tui.tui.conversation_lines import NO_CONVERSATION, header, message_lines


class ConversationView(VerticalScroll):
    """A sample's conversation, scrolled as one column of messages."""

    def show(self, conversation: Conversation | None, problem: str | None = None) -> None:
        """Show ``conversation`` in place of what was shown (``problem``: why the sidecar was not read)."""
        self.remove_children()
        self.mount_all(_widgets(conversation, problem))


def _widgets(conversation: Conversation | None, problem: str | None) -> list[Static]:
    if conversation is None:
        return [Static(Content(inert(problem)) if problem else NO_CONVERSATION, classes="no-conversation")]
    widgets = [Static(header(conversation), classes="conversation-header")]
    for message in conversation.messages:
        lines = message_lines(message)
        widget = Static(lines.body, classes=f"message {lines.role_class}")
        widget.border_title = lines.title
        widgets.append(widget)
    return widgets
