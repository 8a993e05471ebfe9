"""Fan-out: one command over many hosts, bounded in concurrency and in time.

The contract the engine, the TUI and ``--json`` rely on: **every host ends in exactly one
state** (ok, unreachable, auth-failed, host-key-refused, timeout, cancelled), results stream out
as they arrive, and ``fan_out`` returns by the overall deadline however badly the hosts behave —
an on-call engineer waiting on one wedged node out of 512 should get the other 511 answers.

Threads, not asyncio: paramiko is blocking, and a thread pool sized by ``concurrency`` bounds
both the open connections and the load on the login node.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from assistant.fleet.local import FANOUT_OUTPUT_BUDGET, OutputBudget, budget_scope
from assistant.fleet.transport import TRANSPORT_STATES, CommandResult, Transport

log = logging.getLogger(__name__)
_POLL_S = 0.05


def fan_out(transport: Transport, hosts: Iterable[str], command: str | Callable[[str], str], *,
            label: str | None = None, concurrency: int = 64, timeout: float = 30.0,
            deadline: float | None = 120.0,
            on_result: Callable[[CommandResult], None] | None = None,
            cancel: threading.Event | None = None,
            output_budget: int = FANOUT_OUTPUT_BUDGET,
            drop_read_output: bool = False) -> dict[str, CommandResult]:
    """Run *command* (a string, or a function ``host -> command``) on every host.

    - At most *concurrency* hosts run at once; *timeout* bounds each host's command.
    - The output held for all hosts together is bounded by *output_budget* bytes (on top of
      each transport's per-stream limit): memory does not grow with the fleet.
    - *on_result* is called exactly once per host, as results arrive. It is called **from the
      worker threads** for hosts that answered (so it must be thread-safe and quick — e.g. post
      to a queue or the TUI's ``call_from_thread``) and from the calling thread for hosts ended
      by the deadline or cancel. Every call has returned by the time ``fan_out`` returns.
    - At *deadline* seconds (None: no deadline) every unfinished host — running or not yet
      started — gets state ``timeout`` with reason ``"deadline"``; when *cancel* is set they
      get ``cancelled``. Finished results are kept. ``fan_out`` then returns promptly: the
      stuck workers are told to stop (the cancel event the transport sees is set, which closes
      their channels / connection attempts) and are not waited for.

    - *drop_read_output*: the caller reads each answer in *on_result* and keeps what it
      needs; once that returns, the result's stdout and stderr are dropped and their bytes
      given back to the budget. The budget then bounds the output held *at once*, not the
      fleet's sum: at 10,000 hosts a sweep's ~60 KB per host would otherwise starve every host
      past the first ~4,000 of 256 MB (and hold it all until the last host answered).

    Returns ``{host: CommandResult}`` in the order of *hosts* (duplicates removed). A function
    *command* is evaluated for every host before anything runs, so a bug in it raises at once.
    """
    hosts = list(dict.fromkeys(hosts))
    commands = {h: command(h) if callable(command) else command for h in hosts}
    if not hosts:
        return {}
    start = time.monotonic()
    budget = OutputBudget(output_budget)
    stop = threading.Event()  # what the transport sees: set on deadline, cancel, or return
    cond = threading.Condition()
    results: dict[str, CommandResult] = {}
    in_callback = 0
    finalized = False

    def call_back(result: CommandResult) -> None:
        if on_result is None:
            return
        try:
            on_result(result)
        except Exception:  # a broken callback must not lose the other hosts' results
            log.exception("fan_out on_result callback failed for %s", result.host)

    def work(host: str) -> None:
        nonlocal in_callback
        if stop.is_set():
            return
        try:
            with budget_scope(budget):
                result = transport.run(host, commands[host], timeout=timeout, label=label,
                                       cancel=stop)
        except Exception as exc:  # the transport contract says it never raises; if it does...
            result = CommandResult(host=host, state="unreachable",
                                   reason=f"transport error: {type(exc).__name__}: {exc}",
                                   duration_s=time.monotonic() - start)
        if result.state not in TRANSPORT_STATES:
            result.reason = f"{result.state}: {result.reason}".strip(": ")
            result.state = "unreachable"
        result.host = host
        with cond:
            if finalized or host in results:
                return
            results[host] = result
            in_callback += 1
        try:
            call_back(result)
            if drop_read_output and on_result is not None:
                held = _held_bytes(result)
                result.stdout = result.stderr = ""
                budget.give_back(held)
        finally:
            with cond:
                in_callback -= 1
                cond.notify_all()

    executor = ThreadPoolExecutor(max_workers=max(1, min(concurrency, len(hosts))),
                                  thread_name_prefix=f"fanout-{label or 'cmd'}")
    ended: tuple[str, str] | None = None
    try:
        for host in hosts:
            executor.submit(work, host)
        with cond:
            while len(results) < len(hosts):
                if cancel is not None and cancel.is_set():
                    ended = ("cancelled", "cancelled")
                    break
                wait = _POLL_S
                if deadline is not None:
                    remaining = start + deadline - time.monotonic()
                    if remaining <= 0:
                        ended = ("timeout", "deadline")
                        break
                    wait = min(wait, remaining)
                cond.wait(wait)
            finalized = True
            late = [h for h in hosts if h not in results]
            now = time.monotonic()
            for host in late:
                assert ended is not None
                results[host] = CommandResult(host=host, state=ended[0], reason=ended[1],
                                              duration_s=now - start)
    except BaseException:  # KeyboardInterrupt in the caller: stop everything, then re-raise
        stop.set()
        executor.shutdown(wait=False, cancel_futures=True)
        raise
    stop.set()
    executor.shutdown(wait=ended is None, cancel_futures=True)
    for host in late:
        call_back(results[host])
    with cond:
        cond.wait_for(lambda: in_callback == 0)
    return {h: results[h] for h in hosts}


def _held_bytes(result: CommandResult) -> int:
    """The bytes a result's output drew from the budget (what the transport kept, encoded)."""
    return sum(len(text.encode("utf-8", "surrogatepass")) for text in
               (result.stdout, result.stderr) if text)
