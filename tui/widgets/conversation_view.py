"""The recorded conversation of one sample: a header, then each message in a bordered box.

Contract: :meth:`ConversationView.show` replaces what the view shows with a
:class:`~miles_tui.core.dump.trajectory.Conversation` (None: a note that the
run recorded none for this sample). The text comes from
:mod:`miles_tui.tui.views.conversation_lines`; the view only mounts it and
scrolls. Each message is a Static with the class ``message`` and its role's
class (``-user``, ``-assistant``, ...), styled by the screen's CSS.
:meth:`ConversationView.toggle_fold` folds system and tool messages to one line
each, and back (kept for the next sample shown). It never reads files.
"""

from __future__ import annotations

from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from miles_tui.core.base.inert_text import inert
from miles_tui.core.dump import Conversation
from miles_tui.tui.views.conversation_lines import FOLDABLE_ROLES, NO_CONVERSATION, header, message_lines


class ConversationView(VerticalScroll):
    """A sample's conversation, scrolled as one column of messages."""

    folded: bool = False
    """Whether system and tool messages are folded to one line (:data:`FOLDABLE_ROLES`)."""

    _shown: tuple[Conversation | None, str | None] = (None, None)

    def show(self, conversation: Conversation | None, problem: str | None = None) -> None:
        """Show ``conversation`` in place of what was shown (``problem``: why the sidecar was not read)."""
        self._shown = (conversation, problem)
        self.remove_children()
        self.mount_all(_widgets(conversation, problem, self.folded))

    def toggle_fold(self) -> int:
        """Fold (or unfold) the system and tool messages; how many there are."""
        self.folded = not self.folded
        conversation, problem = self._shown
        self.show(conversation, problem)
        return 0 if conversation is None else sum(m.role in FOLDABLE_ROLES for m in conversation.messages)


def _widgets(conversation: Conversation | None, problem: str | None, folded: bool) -> list[Static]:
    if conversation is None:
        return [Static(Content(inert(problem)) if problem else NO_CONVERSATION, classes="no-conversation")]
    widgets = [Static(header(conversation), classes="conversation-header")]
    for number, message in enumerate(conversation.messages):
        lines = message_lines(message, folded=folded and message.role in FOLDABLE_ROLES, number=number)
        widget = Static(lines.body, classes=f"message {lines.role_class}")
        widget.border_title = lines.title
        widgets.append(widget)
    return widgets
