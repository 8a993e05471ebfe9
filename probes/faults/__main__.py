"""docs/fault-catalogue.md, generated from probes/faults/*.yaml so the page never drifts.

``python -m probes.faults > docs/fault-catalogue.md``; tests/test_docs.py keeps them equal.
"""

from __future__ import annotations

from .catalogue import HOST_SCOPES, FaultCatalogue, Signature, load_faults


def _how(sig: Signature) -> str:
    if sig.raised_by:
        return "a check in code"
    if sig.log is not None:
        return f"log line ({', '.join(sig.log.streams)})"
    return f"facts of `{sig.probe}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(catalogue: FaultCatalogue) -> str:
    sigs = list(catalogue.signatures.values())
    new = [s for s in sigs if not s.raised_by]
    lines = [
        "# Fault catalogue", "",
        "Generated from `probes/faults/*.yaml` (`python -m probes.faults > "
        "docs/fault-catalogue.md`); a test keeps the two equal. The format is "
        "docs/fault-format.md.", "",
        f"{len(sigs)} signatures in {len(catalogue.families)} families: {len(new)} recognised "
        f"by the catalogue itself (facts predicates and log lines), {len(sigs) - len(new)} "
        "raised by a probe's checks and described here. A finding of a signature with scope "
        f"{', '.join(HOST_SCOPES)} and severity error or critical is a *standing fault*: every "
        "walk names it, whichever runbook is walked.", "",
    ]
    for family, title in catalogue.families.items():
        members = [s for s in sigs if s.family == family]
        lines += [f"## {title} (`{family}`)", "",
                  "| code | scope | severity | action | recognised by | what | source | "
                  "healthy twin (must not match) |",
                  "|---|---|---|---|---|---|---|---|"]
        for s in members:
            scope = f"{s.scope} (job on most hosts)" if s.on_most_hosts == "job" else s.scope
            lines.append(f"| `{s.id}` | {scope} | {s.severity} | {s.action} | {_how(s)} | "
                         f"{_cell(s.summary)} | {_cell(s.source)} | {_cell(s.twin)} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(to_markdown(load_faults()), end="")
