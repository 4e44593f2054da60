"""Coverage of a conformance campaign: how often each action ran and each partition and replica state
transition was taken, which valid ones were never reached, as a table and as a picture (the two state
machines as graphs, edges weighted by how often they were taken)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import networkx as nx  # type: ignore[import-untyped]  # no stubs in the dev dependencies
from rich.table import Table

from kcm.conformance.check.svg import Svg, box_exit
from kcm.spec.atomic_output import write_output
from kcm.spec.states import VALID_PREVIOUS_PARTITION_STATES, VALID_PREVIOUS_REPLICA_STATES, transitions
from kcm.spec.trace.format import Event
from kcm.spec.vocabulary import ACTIONS

MACHINES: Final = ("partition", "replica")
REACHED, UNREACHED, INVALID = "#1f5fa8", "#b0b0b0", "#c62828"
PANEL_W, PANEL_H, TITLE_H = 620.0, 540.0, 60.0
BOX_H = 26.0


def valid_edges(machine: str) -> list[tuple[str, str]]:
    table = VALID_PREVIOUS_PARTITION_STATES if machine == "partition" else VALID_PREVIOUS_REPLICA_STATES
    return sorted(transitions(table))


def states(machine: str) -> list[str]:
    table = VALID_PREVIOUS_PARTITION_STATES if machine == "partition" else VALID_PREVIOUS_REPLICA_STATES
    return list(table)


@dataclass
class Coverage:
    actions: Counter[str] = field(default_factory=Counter)
    transitions: dict[str, Counter[tuple[str, str]]] = field(
        default_factory=lambda: {m: Counter() for m in MACHINES})
    invalid: dict[str, Counter[tuple[str, str]]] = field(default_factory=lambda: {m: Counter() for m in MACHINES})

    def observe(self, event: Event) -> None:
        self.actions[event["action"]] += 1
        args = event["args"]
        for key, counters in (("transitions", self.transitions), ("invalid_transitions", self.invalid)):
            for entry in args.get(key, ()):
                src, dst = entry[-2], entry[-1]
                if src is not None:  # None: a state loaded with the controller's context, not a transition
                    counters[entry[0]][(src, dst)] += 1

    def merge(self, other: Coverage) -> None:
        self.actions.update(other.actions)
        for m in MACHINES:
            self.transitions[m].update(other.transitions[m])
            self.invalid[m].update(other.invalid[m])

    def counts(self) -> dict[str, Any]:
        """The raw counts as JSON values (edges as [src, dst, n]), for a coverage counted in another process."""
        def edges(counters: dict[str, Counter[tuple[str, str]]]) -> dict[str, list[list[Any]]]:
            return {m: [[s, d, n] for (s, d), n in c.items()] for m, c in counters.items()}

        return {"actions": dict(self.actions), "transitions": edges(self.transitions), "invalid": edges(self.invalid)}

    @classmethod
    def from_counts(cls, counts: dict[str, Any]) -> Coverage:
        coverage = cls(Counter(counts["actions"]))
        for kind, into in (("transitions", coverage.transitions), ("invalid", coverage.invalid)):
            for machine, edges in counts[kind].items():
                into[machine].update({(src, dst): n for src, dst, n in edges})
        return coverage

    # -- figures ---------------------------------------------------------------------------------------------

    def unreached_actions(self) -> list[str]:
        return [a for a in ACTIONS if a != "Init" and not self.actions[a]]

    def unreached(self, machine: str) -> list[tuple[str, str]]:
        return [e for e in valid_edges(machine) if not self.transitions[machine][e]]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "actions": dict(sorted(self.actions.items())),
            "actions_covered": f"{len(ACTIONS) - 1 - len(self.unreached_actions())}/{len(ACTIONS) - 1}",
            "actions_unreached": self.unreached_actions(),
        }
        for m in MACHINES:
            edges = valid_edges(m)
            out[f"{m}_transitions"] = {f"{s} -> {d}": self.transitions[m][(s, d)] for s, d in edges}
            out[f"{m}_transitions_covered"] = f"{len(edges) - len(self.unreached(m))}/{len(edges)}"
            out[f"{m}_transitions_unreached"] = [f"{s} -> {d}" for s, d in self.unreached(m)]
            out[f"{m}_transitions_invalid"] = {f"{s} -> {d}": n for (s, d), n in sorted(self.invalid[m].items())}
        return out

    def tables(self) -> list[Table]:
        actions = Table(title="actions exercised", title_justify="left")
        actions.add_column("action")
        actions.add_column("steps", justify="right")
        for action in ACTIONS:
            if action != "Init":
                count = self.actions[action]
                actions.add_row(action, f"{count:,}" if count else "[red]never[/]")
        out = [actions]
        for m in MACHINES:
            edges = Table(title=f"{m} state transitions", title_justify="left")
            edges.add_column("from")
            edges.add_column("to")
            edges.add_column("taken", justify="right")
            for src, dst in valid_edges(m):
                count = self.transitions[m][(src, dst)]
                edges.add_row(src, dst, f"{count:,}" if count else "[red]never[/]")
            for (src, dst), count in sorted(self.invalid[m].items()):
                edges.add_row(src, dst, f"[red]{count:,} refused (invalid)[/]")
            out.append(edges)
        return out

    # -- the picture ------------------------------------------------------------------------------------------

    def svg(self) -> str:
        picture = Svg(PANEL_W * len(MACHINES), PANEL_H + TITLE_H)
        picture.text(12, 24, "Conformance coverage: state transitions taken (edge width ~ log of count)",
                     size=15, anchor="start", weight="bold")
        for x, colour, label in ((12, REACHED, "blue: taken (count on the edge)"),
                                 (230, UNREACHED, "grey dashed: valid, never reached"),
                                 (450, INVALID, "red: invalid, attempted and refused")):
            picture.text(x, 44, label, size=11, anchor="start", fill=colour)
        for i, m in enumerate(MACHINES):
            self._panel(picture, m, i * PANEL_W, TITLE_H)
        return picture.render([REACHED, UNREACHED, INVALID])

    def write_svg(self, path: Path) -> Path:
        write_output(path, self.svg())
        return path

    def _panel(self, picture: Svg, machine: str, left: float, top: float) -> None:
        graph = nx.DiGraph()
        graph.add_nodes_from(states(machine))
        for edge in valid_edges(machine):
            graph.add_edge(*edge, count=self.transitions[machine][edge], colour=REACHED)
        for edge, count in self.invalid[machine].items():
            graph.add_edge(*edge, count=count, colour=INVALID)
        layout = nx.circular_layout(graph, scale=1.0)
        cx, cy = left + PANEL_W / 2, top + PANEL_H / 2 + 25
        # an ellipse wider than high: the state names are long boxes
        rx, ry = PANEL_W / 2 - 110, PANEL_H / 2 - 70
        where = {n: (cx + float(p[0]) * rx, cy - float(p[1]) * ry) for n, p in layout.items()}
        taken = [d["count"] for _, _, d in graph.edges(data=True)]
        top_count = max(taken, default=0)
        covered = sum(1 for e in valid_edges(machine) if self.transitions[machine][e])
        picture.text(cx, top + 20, f"{machine} state machine: {covered}/{len(valid_edges(machine))} "
                     "valid transitions taken", size=13, weight="bold")
        for src, dst, data in graph.edges(data=True):
            self._edge(picture, where, src, dst, data["count"], top_count, data["colour"], graph.has_edge(dst, src))
        for node, (x, y) in where.items():
            w = 7.0 * len(node) + 16
            picture.rect(x - w / 2, y - BOX_H / 2, w, BOX_H, fill="#f4f1e8")
            picture.text(x, y + 4, node, size=11)

    def _edge(self, picture: Svg, where: dict[str, tuple[float, float]], src: str, dst: str, count: int,
              top_count: int, colour: str, paired: bool) -> None:
        colour = colour if count else UNREACHED
        width = 1.0 + (5.0 * math.log1p(count) / math.log1p(top_count) if count and top_count else 0.0)
        title = f"{src} -> {dst}: {count:,}"
        (x1, y1), (x2, y2) = where[src], where[dst]
        if src == dst:
            d = f"M{x1 - 12:.1f},{y1 - BOX_H / 2:.1f} C{x1 - 40:.1f},{y1 - 70:.1f} {x1 + 40:.1f},{y1 - 70:.1f} " \
                f"{x1 + 12:.1f},{y1 - BOX_H / 2:.1f}"
            picture.path(d, colour, width, dashed=not count, title=title)
            if count:
                picture.text(x1, y1 - 58, f"{count:,}", size=10, fill=colour)
            return
        # Two opposite edges bend to either side so that both stay visible.
        bend = 0.18 if paired else 0.0
        mx, my = (x1 + x2) / 2 - (y2 - y1) * bend, (y1 + y2) / 2 + (x2 - x1) * bend
        sx, sy = box_exit(x1, y1, 7.0 * len(src) / 2 + 8, BOX_H / 2, mx, my)
        ex, ey = box_exit(x2, y2, 7.0 * len(dst) / 2 + 8, BOX_H / 2, mx, my)
        picture.path(f"M{sx:.1f},{sy:.1f} Q{mx:.1f},{my:.1f} {ex:.1f},{ey:.1f}", colour, width, dashed=not count,
                     title=title)
        if count:
            # the curve's midpoint: halfway between the chord's midpoint and the control point
            lx, ly = (sx + ex) / 4 + mx / 2, (sy + ey) / 4 + my / 2
            picture.text(lx, ly - 3, f"{count:,}", size=10, fill=colour)
