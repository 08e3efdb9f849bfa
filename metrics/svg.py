"""Line charts as inline SVG, drawn by the server (the LAT admin's, metrics/charts.py): no script
and no library, which a few hundred daily points do not need. Colours come from the admin's
light and dark themes (metrics/static/metrics/charts.css); the series differ by dash as well as
by colour. A series is one polyline per run of consecutive days with a known value, so an
unknown or missing day is a gap; a lone known day is a dot.

The plot area is PLOT_LEFT..PLOT_RIGHT by PLOT_TOP..PLOT_BOTTOM in the viewBox's units. Days
map linearly from the chart's first day (PLOT_LEFT) to its last (PLOT_RIGHT), a single day to
the middle; values from the y axis's lowest tick (PLOT_BOTTOM) to its highest (PLOT_TOP). The
ticks are `y_scale`'s: Y_INTERVALS or fewer steps of 1, 2 or 5 times a power of ten."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import date, timedelta
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from typing import TYPE_CHECKING

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

if TYPE_CHECKING:
    from metrics.charts import Chart

WIDTH = 720
HEIGHT = 250
PLOT_LEFT = 76
PLOT_RIGHT = WIDTH - 36
PLOT_TOP = 12
PLOT_BOTTOM = HEIGHT - 60
Y_INTERVALS = 4
MAX_DAY_TICKS = 7
DOT_RADIUS = 2.5
FLAT = 10**6  # values less than a FLAT-th of their size apart are drawn as one value

Run = list[tuple[date, Decimal]]


def y_scale(values: Iterable[Decimal], *, zero_based: bool) -> tuple[Decimal, Decimal, Decimal]:
    """The y axis of `values` (some known): its lowest tick, highest tick and step."""
    known = list(values)
    low, high = min(known), max(known)
    if zero_based:
        low, high = min(low, Decimal(0)), max(high, Decimal(0))
    if high - low <= max(abs(low), abs(high)) / FLAT:
        # One value, or values closer than the eye could tell (a rate's rounding dust, whose
        # ticks would need 18 decimals): one step of a few percent either side of them rounded
        # to the step, or 0 to 1 for zeros.
        middle = (low + high) / 2
        if not middle:
            low, high = Decimal(0), Decimal(1)
        else:
            step = _nice_step(abs(middle) / 40)
            centre = (middle / step).to_integral_value() * step
            return centre - step, centre + step, step
    step = _nice_step((high - low) / Y_INTERVALS)
    bottom = (low / step).to_integral_value(ROUND_FLOOR) * step
    top = (high / step).to_integral_value(ROUND_CEILING) * step
    return bottom, top, step


def _nice_step(raw: Decimal) -> Decimal:
    power = Decimal(1).scaleb(raw.adjusted())
    return next(power * m for m in (1, 2, 5, 10) if power * m >= raw)


def day_ticks(first: date, last: date) -> list[date]:
    """At most MAX_DAY_TICKS labelled days: every n days from the first over a short span, the
    first of every month or every few months over a long one."""
    span = (last - first).days
    if span <= 92:
        step = next(s for s in (1, 2, 3, 7, 14) if span // s + 1 <= MAX_DAY_TICKS)
        return [first + timedelta(days=n) for n in range(0, span + 1, step)]
    months = []
    month = first.replace(day=1)
    while month <= last:
        if month >= first:
            months.append(month)
        month = (month + timedelta(days=32)).replace(day=1)
    every = next(m for m in (1, 2, 3, 6) if -(-len(months) // m) <= MAX_DAY_TICKS)
    return months[::every]


def runs(days: Sequence[date], values: Sequence[Decimal | None]) -> list[Run]:
    """The series cut where a value is unknown or a day is missing."""
    out: list[Run] = []
    run: Run = []
    previous: date | None = None
    for day, value in zip(days, values, strict=True):
        if run and (value is None or previous is None or (day - previous).days > 1):
            out.append(run)
            run = []
        if value is not None:
            run.append((day, value))
        previous = day
    if run:
        out.append(run)
    return out


def _number(value: float) -> str:
    return f"{value:.1f}"


def line_chart(chart: Chart) -> SafeString:
    """The chart as an <svg> element (its `empty` charts are not drawn: the page says so)."""
    first, last = chart.days[0], chart.days[-1]
    known = [v for s in chart.series for v in s.values if v is not None]
    bottom, top, step = y_scale(known, zero_based=chart.zero_based)
    places = max(0, -int(step.normalize().as_tuple().exponent))
    span = (last - first).days

    def x(day: date) -> float:
        if span == 0:
            return (PLOT_LEFT + PLOT_RIGHT) / 2
        return PLOT_LEFT + (day - first).days / span * (PLOT_RIGHT - PLOT_LEFT)

    def y(value: Decimal) -> float:
        return PLOT_BOTTOM - float((value - bottom) / (top - bottom)) * (PLOT_BOTTOM - PLOT_TOP)

    ident = f"lat-chart-{chart.key}"
    parts: list[str] = [
        format_html(
            '<svg xmlns="http://www.w3.org/2000/svg" class="lat-chart" data-chart="{}" '
            'viewBox="0 0 {} {}" width="{}" height="{}" role="img" '
            'aria-labelledby="{}-title {}-desc">',
            chart.key,
            WIDTH,
            HEIGHT,
            WIDTH,
            HEIGHT,
            ident,
            ident,
        ),
        format_html(
            '<title id="{}-title">{}, one point a day (UTC), {} to {}</title>',
            ident,
            chart.title,
            first,
            last,
        ),
        format_html('<desc id="{}-desc">{}</desc>', ident, _description(chart)),
    ]
    # The y axis: a grid line and a label at each tick, the unit along the axis.
    tick = bottom
    while tick <= top:
        at = _number(y(tick))
        parts.append(
            format_html(
                '<line class="chart-grid" x1="{}" x2="{}" y1="{}" y2="{}"/>'
                '<text class="chart-label chart-y-label" x="{}" y="{}" text-anchor="end">{}</text>',
                PLOT_LEFT,
                PLOT_RIGHT,
                at,
                at,
                PLOT_LEFT - 6,
                _number(y(tick) + 4),
                f"{tick:,.{places}f}",
            )
        )
        tick += step
    parts.append(
        format_html(
            '<text class="chart-label chart-axis-title" text-anchor="middle" '
            'transform="translate(14 {}) rotate(-90)">{}</text>',
            (PLOT_TOP + PLOT_BOTTOM) // 2,
            chart.unit,
        )
    )
    # The x axis: the baseline, and a mark and a date at each labelled day.
    parts.append(
        format_html(
            '<line class="chart-axis" x1="{}" x2="{}" y1="{}" y2="{}"/>',
            PLOT_LEFT,
            PLOT_RIGHT,
            PLOT_BOTTOM,
            PLOT_BOTTOM,
        )
    )
    for day in day_ticks(first, last):
        at = _number(x(day))
        parts.append(
            format_html(
                '<line class="chart-axis" x1="{}" x2="{}" y1="{}" y2="{}"/>'
                '<text class="chart-label chart-x-label" x="{}" y="{}" text-anchor="middle">'
                "{}</text>",
                at,
                at,
                PLOT_BOTTOM,
                PLOT_BOTTOM + 4,
                at,
                PLOT_BOTTOM + 18,
                day.isoformat(),
            )
        )
    # The series, then their legend under the axis.
    legend_x = PLOT_LEFT
    legend_y = HEIGHT - 12
    for number, series in enumerate(chart.series, start=1):
        parts.append(
            format_html(
                '<g class="chart-series chart-series-{}" data-series="{}">', number, series.key
            )
        )
        for run in runs(chart.days, series.values):
            if len(run) == 1:
                ((day, value),) = run
                parts.append(
                    format_html(
                        '<circle class="chart-dot" cx="{}" cy="{}" r="{}"/>',
                        _number(x(day)),
                        _number(y(value)),
                        DOT_RADIUS,
                    )
                )
            else:
                points = " ".join(f"{_number(x(day))},{_number(y(value))}" for day, value in run)
                parts.append(
                    format_html('<polyline class="chart-line" fill="none" points="{}"/>', points)
                )
        parts.append(
            format_html(
                '<line class="chart-legend-line" x1="{}" x2="{}" y1="{}" y2="{}"/>'
                '<text class="chart-label chart-legend" x="{}" y="{}">{}</text></g>',
                legend_x,
                legend_x + 22,
                legend_y - 4,
                legend_y - 4,
                legend_x + 28,
                legend_y,
                series.label,
            )
        )
        legend_x += 28 + 7 * len(series.label) + 24
    parts.append("</svg>")
    return mark_safe("".join(parts))  # each part built by format_html, which escapes


def _description(chart: Chart) -> str:
    """What a screen reader says of the chart: each series' known days, range and last value."""
    lines = []
    for series in chart.series:
        known = [
            (day, v) for day, v in zip(chart.days, series.values, strict=True) if v is not None
        ]
        if not known:
            lines.append(f"{series.label}: unknown on every day.")
            continue
        values = [v for _, v in known]
        day, value = known[-1]
        lines.append(
            f"{series.label}: known on {len(known)} of {len(chart.days)} days, from "
            f"{chart.text(min(values))} to {chart.text(max(values))} {chart.unit}, "
            f"{chart.text(value)} on {day}."
        )
    lines.append("Days without a value are gaps in the line.")
    return " ".join(lines)
