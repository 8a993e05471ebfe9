"""The knowledge base: enough articles, well-formed, searchable, and every link resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from assistant.cli import main
from assistant.kb import ArticleError, load_articles, parse_article

CJK = re.compile(r"[\u4e00-\u9fff]")
LINK = re.compile(r"\]\(([a-z0-9-]+)\.md\)")


def test_at_least_25_articles_each_with_english_and_chinese_aliases() -> None:
    articles = load_articles()
    assert len(articles) >= 25
    for article in articles.values():
        assert article.path.stem == article.id
        assert article.title and article.tags
        assert any(CJK.search(a) for a in article.aliases), f"{article.id}: no Chinese alias"
        assert any(not CJK.search(a) for a in article.aliases), f"{article.id}: no English alias"
        assert len(article.body.split()) >= 150, f"{article.id}: too short to stand alone"


def test_links_between_articles_resolve() -> None:
    articles = load_articles()
    for article in articles.values():
        for target in LINK.findall(article.body):
            assert target in articles, f"{article.id} links to missing {target}"


def test_front_matter_errors_are_clear() -> None:
    # A missing front matter or missing keys name the file and what is wrong.
    with pytest.raises(ArticleError, match="no front matter"):
        parse_article("# just markdown\n", Path("kb/x.md"))
    with pytest.raises(ArticleError, match="lacks tags, aliases"):
        parse_article("---\nid: x\ntitle: X\n---\nbody\n", Path("kb/x.md"))


def test_cli_kb_show_and_search(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["kb", "show", "xid-codes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# XID") and "79" in out
    assert main(["kb", "search", "pause", "storm"]) == 0
    assert capsys.readouterr().out.split()[1] == "pfc-pause-storms"
    assert main(["kb", "show", "no-such-article"]) == 2
    assert "no KB article 'no-such-article'" in capsys.readouterr().err
