"""A few SVG primitives written as text, enough to draw labelled graphs (the coverage picture) and the
log strips of the HTML reports' timelines without a plotting library."""

from __future__ import annotations

import math
from xml.sax.saxutils import escape, quoteattr


class Svg:
    def __init__(self, width: float, height: float) -> None:
        self.width = width
        self.height = height
        self.parts: list[str] = []

    def text(self, x: float, y: float, content: str, size: float = 12, anchor: str = "middle",
             weight: str = "normal", fill: str = "#222") -> None:
        self.parts.append(f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}" '
                          f'font-weight="{weight}" fill="{fill}">{escape(content)}</text>')

    def rect(self, x: float, y: float, w: float, h: float, fill: str, stroke: str = "#333",
             radius: float = 6, title: str = "") -> None:
        shape = (f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" rx="{radius:g}" '
                 f'fill="{fill}" stroke="{stroke}"')
        self.parts.append(f"{shape}><title>{escape(title)}</title></rect>" if title else f"{shape}/>")

    def line(self, x1: float, y1: float, x2: float, y2: float, stroke: str, width: float = 1.0,
             title: str = "") -> None:
        tip = f"<title>{escape(title)}</title>" if title else ""
        self.parts.append(f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
                          f'stroke-width="{width:g}">{tip}</line>')

    def path(self, d: str, stroke: str, width: float, dashed: bool = False, arrow: bool = True,
             title: str = "") -> None:
        dash = ' stroke-dasharray="5,4"' if dashed else ""
        marker = f' marker-end="url(#arrow-{_marker_id(stroke)})"' if arrow else ""
        tip = f"<title>{escape(title)}</title>" if title else ""
        self.parts.append(f'<path d={quoteattr(d)} fill="none" stroke="{stroke}" stroke-width="{width:.2f}"'
                          f"{dash}{marker}>{tip}</path>")

    def render(self, colours: list[str], background: bool = True) -> str:
        markers = "".join(
            f'<marker id="arrow-{_marker_id(c)}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" markerUnits="userSpaceOnUse" orient="auto"><path d="M0,0 L10,5 L0,10 z" '
            f'fill="{c}"/></marker>'
            for c in colours
        )
        body = "\n".join(self.parts)
        fill = '<rect width="100%" height="100%" fill="white"/>\n' if background else ""
        return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{self.width:.0f}" height="{self.height:.0f}" '
                f'viewBox="0 0 {self.width:.0f} {self.height:.0f}" font-family="Helvetica, Arial, sans-serif">\n'
                f'<defs>{markers}</defs>\n{fill}{body}\n</svg>\n')


def _marker_id(colour: str) -> str:
    return colour.lstrip("#")


def box_exit(cx: float, cy: float, half_w: float, half_h: float, tx: float, ty: float) -> tuple[float, float]:
    """Where the segment from a box's centre towards (tx, ty) leaves the box."""
    dx, dy = tx - cx, ty - cy
    if dx == 0 and dy == 0:
        return cx, cy
    scale = min(half_w / abs(dx) if dx else math.inf, half_h / abs(dy) if dy else math.inf)
    return cx + dx * scale, cy + dy * scale
