"""The house's rules, checked on the source: what may import what, ui/ in rooms, pages as glue."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# ui's rooms, lowest first: a room imports only from itself and the rooms before it.
ROOMS = ("charts", "state", "figures", "models", "compute", "sections")
MAX_PAGE_LINES = 150
MAX_UI_MODULES = 12


def imports(path: Path) -> set[str]:
    """Every module a file imports at run time (absolute; ``from . import x`` is not used in ui/)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):  # ``if TYPE_CHECKING:`` imports are for the type checker, not at run time
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_the_package_never_imports_the_app_or_streamlit_or_transformers():
    for path in (ROOT / "transformer").rglob("*.py"):
        bad = {m for m in imports(path) if m.split(".")[0] in ("ui", "streamlit", "transformers", "pages")}
        assert not bad, f"{path.relative_to(ROOT)} imports {sorted(bad)}"


@pytest.mark.parametrize("room", ROOMS)
def test_a_room_imports_only_the_rooms_below_it(room):
    allowed = set(ROOMS[: ROOMS.index(room) + 1])
    for path in (ROOT / "ui" / room).rglob("*.py"):
        used = {m.split(".")[1] for m in imports(path) if m.startswith("ui.") and len(m.split(".")) > 1}
        assert used <= allowed, f"{path.relative_to(ROOT)} imports ui rooms {sorted(used - allowed)}"


# ui/figures: how a figure reaches the browser (margins, text sizes, house style, crowded ticks, the projector's
# restyle, the figure cache). Chart modules only build figures; the rest of the app uses the package's entry point.
FIGURES = ROOT / "ui" / "figures"
MACHINERY = {p.stem for p in FIGURES.glob("*.py")} - {"__init__"}
# the one light import of a submodule from outside: the Model page's SVG diagram measures its text before Plotly
FIGURES_SUBMODULES_ALLOWED = {"ui/sections/architecture.py": {"ui.figures.text_size"}}


def figure_machinery_imported(path: Path) -> set[str]:
    """The submodules of ui.figures that ``path`` imports (``from ui.figures import show_chart`` is not one)."""
    parts = [m.split(".") for m in imports(path) if m.startswith("ui.figures.")]
    return {".".join(p[:3]) for p in parts if p[2] in MACHINERY}


def test_no_chart_module_imports_the_figure_machinery():
    assert {"margins", "text_size", "house_style", "crowding", "projector", "cache"} <= MACHINERY
    for path in (ROOT / "ui" / "charts").rglob("*.py"):
        name = path.relative_to(ROOT)
        assert path.stem not in MACHINERY, f"{name}: the figure machinery lives in ui/figures"
        used = {m for m in imports(path) if m == "ui.figures" or m.startswith("ui.figures.")}
        assert not used, f"{name} imports {sorted(used)}: a chart module builds a plain figure, ui.figures shows it"


def test_pages_and_sections_use_the_figures_entry_point():
    outside = [ROOT / "app.py", *(ROOT / "pages").glob("*.py"),
               *(p for p in (ROOT / "ui").rglob("*.py") if FIGURES not in p.parents)]
    for path in outside:
        name = path.relative_to(ROOT).as_posix()
        used = figure_machinery_imported(path) - FIGURES_SUBMODULES_ALLOWED.get(name, set())
        assert not used, f"{name} imports {sorted(used)}: use the entry point, ``from ui.figures import ...``"


def test_presentation_state_holds_the_mode_not_the_restyle():
    used = imports(ROOT / "ui" / "state" / "presentation.py")
    assert not {m for m in used if m.split(".")[0] == "plotly" or m.startswith("ui.figures")}, sorted(used)


def test_ui_is_in_rooms_each_with_a_docstring():
    loose = [p.name for p in (ROOT / "ui").glob("*.py") if p.name != "__init__.py"]
    assert len(loose) <= MAX_UI_MODULES, loose
    for room in ROOMS:
        init = ROOT / "ui" / room / "__init__.py"
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), f"{init} needs a docstring"


def test_pages_are_glue():
    for page in [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py"))]:
        lines = len(page.read_text(encoding="utf-8").splitlines())
        assert lines <= MAX_PAGE_LINES, f"{page.name} has {lines} lines: move its sections into ui/"
        assert not any(m == "torch" or m.startswith("torch.") for m in imports(page)), f"{page.name} imports torch"


def test_test_tooling_lives_with_the_tests():
    assert not (ROOT / "ui" / "devserver.py").exists() and (ROOT / "tests" / "devserver.py").exists()
