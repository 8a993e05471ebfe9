"""Drill scores (``diag drill``): one row per finished drill in the ``drills`` table."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .base import Connection, new_id, now_utc


@dataclass(frozen=True)
class DrillScore:
    trainee: str
    scenario: str
    runbook: str
    conclusion: str | None
    expected: str | None
    correct: bool
    steps: int
    shortest: int | None
    hints: int
    seconds: float
    finished: datetime = field(default_factory=now_utc)
    id: str = field(default_factory=new_id)


COLUMNS = ("id", "trainee", "scenario", "runbook", "conclusion", "expected", "correct", "steps",
           "shortest", "hints", "seconds", "finished")


def write_drill(con: Connection, score: DrillScore) -> str:
    """Insert *score*; returns its id. Call inside ``Store.write``."""
    con.execute(f"INSERT INTO drills ({', '.join(COLUMNS)}) VALUES "
                f"({', '.join('?' for _ in COLUMNS)})",
                [getattr(score, c) for c in COLUMNS])
    return score.id


def drill_scores(con: Connection, trainee: str, limit: int = 20) -> list[dict[str, Any]]:
    """The trainee's drills, newest first."""
    cur = con.execute(f"SELECT {', '.join(COLUMNS)} FROM drills WHERE trainee = ? "
                      f"ORDER BY finished DESC, id LIMIT {int(limit)}", [trainee])
    return [dict(zip(COLUMNS, row, strict=True)) for row in cur.fetchall()]


def drilled_scenarios(con: Connection, trainee: str) -> set[str]:
    return {r[0] for r in con.execute(
        "SELECT DISTINCT scenario FROM drills WHERE trainee = ?", [trainee]).fetchall()}
