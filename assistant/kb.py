"""The knowledge base: Markdown articles with YAML front matter, shipped in kb/ and found along
the search path (``--kb``, ``$DIAG_KB``, ``~/.config/diag/kb``: a team's article of the same id
overrides the shipped one)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assistant import cache as content_cache
from assistant.locations import search_path


@dataclass(frozen=True)
class Article:
    id: str
    title: str
    tags: tuple[str, ...]
    aliases: tuple[str, ...]
    body: str
    path: Path


class ArticleError(ValueError):
    pass


def parse_article(text: str, path: Path) -> Article:
    if not text.startswith("---"):
        raise ArticleError(f"{path}: no front matter (the file must start with ---)")
    _, front, body = text.split("---", 2) if text.count("---") >= 2 else ("", "", "")
    if not front:
        raise ArticleError(f"{path}: front matter is not closed with ---")
    from assistant import yamlfile

    try:
        located = yamlfile.load(front)
    except yamlfile.YamlError as exc:
        # The front matter starts on the file's second line (after the opening ---).
        raise ArticleError(f"{path}:{exc.mark.line + 1}: {exc.message}") from None
    if located.empty:
        what = yamlfile.empty_message(front).replace("the file", "the front matter")
        raise ArticleError(f"{path}: {what} (it needs id, title, tags, aliases)")
    meta = located.data
    if not isinstance(meta, dict):
        raise ArticleError(f"{path}: the front matter is not a mapping of id, title, tags, "
                           "aliases")
    missing = [key for key in ("id", "title", "tags", "aliases") if key not in meta]
    if missing:
        raise ArticleError(f"{path}: front matter lacks {', '.join(missing)}")
    return Article(
        id=str(meta["id"]),
        title=str(meta["title"]),
        tags=tuple(map(str, meta["tags"])),
        aliases=tuple(map(str, meta["aliases"])),
        body=body.lstrip("\n"),
        path=path,
    )


def load_articles(directory: Path | None = None) -> dict[str, Article]:
    """The articles in *directory*, or along the search path (first one of an id wins).
    Parsed articles are kept in the content-keyed cache: ``diag match`` starts without a YAML
    parse."""
    directories = [directory] if directory else search_path("kb")
    paths = [path for d in directories for path in sorted(d.glob("*.md"))]
    texts = [path.read_bytes() for path in paths]

    def build() -> dict[str, Article]:
        from assistant import yamlfile

        articles: dict[str, Article] = {}
        for path in paths:
            try:
                text = yamlfile.read_text(path)  # bounded, UTF-8 with the bad byte's position
            except yamlfile.YamlFileError as exc:
                raise ArticleError(str(exc)) from None
            article = parse_article(text, path)
            articles.setdefault(article.id, article)
        return articles

    return content_cache.cached("kb", _key(paths, texts), build, _plain, _articles)


def _plain(articles: dict[str, Article]) -> list[tuple[object, ...]]:
    """The articles as plain data for the start cache (data that cannot run, see
    ``assistant.cache``)."""
    return [(a.id, a.title, a.tags, a.aliases, a.body, str(a.path)) for a in articles.values()]


def _articles(plain: list[list[Any]]) -> dict[str, Article]:
    return {entry[0]: Article(entry[0], entry[1], tuple(entry[2]), tuple(entry[3]), entry[4],
                              Path(entry[5])) for entry in plain}


def _key(paths: list[Path], texts: list[bytes]) -> str:
    return content_cache.digest([Path(__file__).read_bytes(),
                                 *(part for path, data in zip(paths, texts, strict=True)
                                   for part in (str(path), data))])


def kb_ids() -> set[str]:
    return set(load_articles())


def get_article(article_id: str) -> Article:
    articles = load_articles()
    if article_id not in articles:
        raise KeyError(f"no KB article '{article_id}'")
    return articles[article_id]
