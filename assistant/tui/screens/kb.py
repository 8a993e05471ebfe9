"""A KB article, rendered as Markdown; the articles it links to are listed below it so they
can be opened from the keyboard (Markdown links are otherwise mouse-only)."""

from __future__ import annotations

import re
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Markdown, OptionList, Static
from textual.widgets.option_list import Option

from assistant.kb import Article, load_articles

from .. import messages as msg

_LINK = re.compile(r"\]\(([\w.-]+)\.md\)")


def linked_ids(article: Article) -> list[str]:
    """KB articles this one links to (``[text](other-id.md)``), in order, once each."""
    known = load_articles()
    return [i for i in dict.fromkeys(_LINK.findall(article.body)) if i in known and
            i != article.id]


class KBScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("l", "links", "Related"),
    ]

    def __init__(self, article: Article) -> None:
        super().__init__()
        self.article = article
        self.links = linked_ids(article)

    def compose(self) -> ComposeResult:
        yield Static(Text.assemble(("KB ", "dim"), (self.article.title, "bold"),
                                   (f"  {self.article.id}", "dim")), id="kb-header")
        with VerticalScroll(id="kb-body"):
            yield Markdown(self.article.body, id="kb-markdown")
        yield Static(Text("Related (l, then Enter)", style="bold"), id="kb-related-title")
        titles = {a.id: a.title for a in load_articles().values()}
        yield OptionList(*(Option(Text.assemble((i, "bold"), "  ", titles[i]), id=i)
                           for i in self.links), id="kb-related")
        yield Footer()

    def on_mount(self) -> None:
        related = self.query_one("#kb-related", OptionList)
        related.display = bool(self.links)
        if self.links:
            related.highlighted = 0
        self.query_one("#kb-related-title").display = bool(self.links)
        self.query_one("#kb-body").focus()

    def action_links(self) -> None:
        if self.links:
            self.query_one("#kb-related").focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if event.option.id:
            self.post_message(msg.ArticleChosen(event.option.id))

    def on_markdown_link_clicked(self, event: Markdown.LinkClicked) -> None:
        event.stop()
        match = re.fullmatch(r"([\w.-]+)\.md", event.href)
        if match and match.group(1) in load_articles():
            self.post_message(msg.ArticleChosen(match.group(1)))
        else:
            self.notify(f"external link: {event.href}", markup=False)
