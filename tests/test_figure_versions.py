"""The plotly and streamlit versions installed, and pinned in requirements.txt, are those ui/figures' pixel
constants were measured with (ui/figures/versions.py): another version must be re-measured first."""

from __future__ import annotations

import re
from pathlib import Path

from ui.figures import versions

REQUIREMENTS = Path(__file__).resolve().parent.parent / "requirements.txt"


def test_the_installed_plotly_and_streamlit_are_the_measured_ones() -> None:
    assert not versions.unmeasured(), "\n".join(versions.unmeasured())


def test_requirements_pin_the_measured_minor_versions() -> None:
    lines = {re.split(r"[<>=!~ ]", line, maxsplit=1)[0]: line.strip()
             for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines() if line and not line.startswith("#")}
    for package, measured in versions.MEASURED_WITH.items():
        major, minor = measured.split(".")
        assert lines[package] == f"{package}>={measured},<{major}.{int(minor) + 1}", (
            f"requirements.txt pins {lines[package]!r}, but ui/figures was measured with {package} {measured}")


def test_a_different_version_names_what_to_re_measure(monkeypatch) -> None:
    monkeypatch.setattr(versions, "installed", lambda package: "9.9" if package == "plotly" else
                        versions.MEASURED_WITH[package])
    (message,) = versions.unmeasured()
    assert "plotly 9.9 is installed" in message and "bench/bench_switches.py" in message
    assert "requirements.txt" in message and "MEASURED_WITH" in message
