"""Async Pilot tests without a plugin: ``async def test_...`` runs in its own event loop.

The project has no pytest-asyncio/anyio, and these tests need nothing more than
``asyncio.run``; a hard timeout turns a wedged walk thread into a failure, not a hung CI job.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

TEST_TIMEOUT_S = 240


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}
    asyncio.run(asyncio.wait_for(pyfuncitem.obj(**kwargs), TEST_TIMEOUT_S))
    return True
