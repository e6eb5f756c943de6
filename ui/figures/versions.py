"""The library versions the figure machinery's constants were measured against, and a check of the installed ones.

The pixel constants of ``ui.figures`` (margins, text widths, the house style, crowded ticks, the projector's
widths) were read in chromium off what Streamlit 1.67 draws: its light theme's template and its own bundled
plotly.js (4.2.0, in ``streamlit/static``'s PlotlyChart chunk: not plotly.py's copy), whose layout rules
``ui.figures.margins`` follows and whose redraw on ``react`` ``ui.figures.house_style`` avoids. On the Python
side, plotly 7.1's ``to_plotly_json`` writes numeric arrays as base64 specs, which ``house_style._as_lists``
decodes. Another minor version of either may move a pixel or change a rule, so requirements.txt pins both to
these and ``tests/test_figure_versions.py`` fails, naming what to re-measure, when the installed ones differ.
"""

from __future__ import annotations

from importlib.metadata import version

MEASURED_WITH = {"streamlit": "1.67", "plotly": "7.1"}  # package -> major.minor the constants were read from
REMEASURE = ("python -m pytest -m browser tests/test_browser.py tests/test_browser_house_style.py "
             "tests/test_browser_projector.py, and python bench/bench_switches.py --checkout <the old checkout>")


def installed(package: str) -> str:
    """The installed ``package``'s major.minor version ("1.67.0" -> "1.67")."""
    return ".".join(version(package).split(".")[:2])


def unmeasured() -> list[str]:
    """One line per package whose installed major.minor is not the one the constants were measured with."""
    return [f"{package} {installed(package)} is installed, but ui/figures' pixel constants were measured with "
            f"{package} {measured}: re-measure ({REMEASURE}), fix the constants, then update "
            f"ui.figures.versions.MEASURED_WITH and the pin in requirements.txt"
            for package, measured in MEASURED_WITH.items() if installed(package) != measured]
