"""Validation layer 5: the runbook as a graph — every node reachable from the start, every
node able to reach a conclusion, and no loop an automated walk could not leave."""

from __future__ import annotations

from .issue import Report
from .model import Runbook


def check(runbook: Runbook, report: Report) -> None:
    import networkx as nx

    graph = nx.DiGraph()
    graph.add_nodes_from(runbook.nodes)
    for node in runbook.nodes.values():
        graph.add_edges_from((node.id, target) for target in runbook.successors(node)
                             if target in runbook.nodes)
    if runbook.start not in graph:
        return  # already reported as a reference error
    reachable = nx.descendants(graph, runbook.start) | {runbook.start}
    for node_id in runbook.nodes:
        if node_id not in reachable:
            report.add("graph", ("nodes", node_id),
                       f"unreachable: no path from start '{runbook.start}' leads here")
    conclusions = {n.id for n in runbook.conclusions()}
    if not conclusions:
        report.add("graph", ("nodes",), "the runbook has no conclusion node")
        return
    # Every node with a path to some conclusion, in one backward search from all of them (a
    # search per conclusion made a generated 20,000-node runbook take minutes).
    can_conclude = set(conclusions)
    frontier = list(conclusions)
    while frontier:
        for before in graph.predecessors(frontier.pop()):
            if before not in can_conclude:
                can_conclude.add(before)
                frontier.append(before)
    for node_id in runbook.nodes:
        if node_id not in can_conclude:
            report.add("graph", ("nodes", node_id),
                       "dead end: no path from here reaches a conclusion")
    automated = graph.subgraph(n for n, node in runbook.nodes.items() if node.kind != "question")
    order = {node_id: i for i, node_id in enumerate(runbook.nodes)}
    reported = set()
    for cycle in nx.simple_cycles(automated):
        # Start the loop at its earliest node in the file; the last node's goto closes it.
        first = min(range(len(cycle)), key=lambda i: order[cycle[i]])
        cycle = cycle[first:] + cycle[:first]
        if tuple(cycle) in reported:
            continue
        reported.add(tuple(cycle))
        loop = " -> ".join([*cycle, cycle[0]])
        report.add("graph", ("nodes", cycle[-1]),
                   f"cycle without a question node ({loop}): an automated walk would loop "
                   "forever")
