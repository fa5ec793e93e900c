"""The README's ring rule, read from the source: imports point inward only, no cycles, the
outer packages use the gateway through its public faces, the core is pure, and the heavy
third-party libraries stay in the packages built around them.

Every ``import`` counts, those under ``TYPE_CHECKING`` and inside functions too: a cycle that
only the type checker sees is still two modules that cannot be understood one at a time.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

SRC = Path(__file__).parents[1] / "src" / "quotagate"

# Which packages each package may import (besides itself and the top-level ``quotagate``,
# which holds only the version). ``commands`` is the composition root and may import anything.
ALLOWED: dict[str, set[str]] = {
    "quota": set(),
    "protocol": set(),
    "security": set(),
    "logs": set(),
    "usage": {"quota", "logs"},
    "store": {"fleet", "logs", "security"},
    "gateway": {"protocol", "quota", "store", "security", "logs"},
    # usage: the bounded hand-over the Kafka usage sink shares with the Parquet writer.
    "fleet": {"quota", "usage", "logs"},
    "instance": {"gateway", "protocol", "fleet", "logs"},
    # security: the tenant rules share the grammar of Kafka's principal mapping rules.
    "enforcement": {"gateway", "protocol", "quota", "store", "usage", "fleet", "logs", "security"},
    "client": {"protocol", "quota", "logs"},
    # security: a candidate quota file's tenant.mapping.rules, read as the gateway reads them.
    "pipeline": {"quota", "usage", "logs", "security"},
    "top": {"quota"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(path): path for path in SRC.rglob("*.py")}


def _imports(module: str) -> Iterator[str]:
    """The quotagate modules ``module`` imports; ``from pkg import sub`` names ``pkg.sub``."""
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("quotagate"))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("quotagate"):
            assert node.module is not None
            submodules = [f"{node.module}.{a.name}" for a in node.names]
            found = [name for name in submodules if name in MODULES]
            yield from found or [node.module]


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_imports_point_inward_only() -> None:
    outward = sorted(
        f"{module} -> {target}"
        for module in MODULES
        for target in _imports(module)
        if _package(module) in ALLOWED
        and _package(target) not in {_package(module), ""}
        and _package(target) not in ALLOWED[_package(module)]
    )
    assert not outward, "\n".join(outward)


# The packages built on the gateway see it only through these faces (``__init__`` modules
# with ``__all__``): the modules behind them may change freely.
GATEWAY_FACES: Final = frozenset({"quotagate.gateway", "quotagate.gateway.auth"})


@pytest.mark.parametrize("package", ["enforcement", "instance", "commands"])
def test_outer_packages_use_only_the_gateways_public_surface(package: str) -> None:
    private = sorted(
        f"{module} -> {target}"
        for module in MODULES
        if _package(module) == package
        for target in _imports(module)
        if target.startswith("quotagate.gateway.") and target not in GATEWAY_FACES
    )
    assert not private, "\n".join(private)


# The sub-packages of ``gateway/``, lowest floor first: each may import only the ones below it
# (its modules at the top, ``connection.py``, ``server.py``, ``config.py``, ..., tie them
# together). An import from one sub-package to another on its floor or above runs back up:
# that is how the knot of config, auth and the upstream's security formed around one enum.
GATEWAY_FLOORS: Final = (
    "settings",
    "limits",
    "stages",
    "upstream",
    "auth",
    "builtin",
    "listening",
    "embedded",
)


def _gateway_sub_package(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) < 3 or parts[1] != "gateway" or not (SRC / "gateway" / parts[2]).is_dir():
        return None
    return parts[2]


def test_every_gateway_sub_package_has_a_floor() -> None:
    found = {path.parent.name for path in (SRC / "gateway").glob("*/__init__.py")}
    assert found == set(GATEWAY_FLOORS)


def test_gateway_sub_packages_import_only_the_floors_below() -> None:
    floor = {name: index for index, name in enumerate(GATEWAY_FLOORS)}
    upward = sorted(
        f"{module} -> {target}"
        for module in MODULES
        if (source := _gateway_sub_package(module)) is not None
        for target in _imports(module)
        if (destination := _gateway_sub_package(target)) not in (None, source)
        and floor[destination] >= floor[source]
    )
    assert not upward, "\n".join(upward)


def _third_party(module: str) -> Iterator[tuple[str, tuple[str, ...]]]:
    """The libraries ``module`` imports, top-level name first, with the names taken from them
    (empty for a plain ``import``)."""
    for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((a.name.split(".")[0], ()) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], tuple(a.name for a in node.names)


# The core takes time and bytes as arguments (docs/design.md): no clock, socket, thread or
# event loop may reach it. ``from datetime import timedelta`` is a duration (kio's type for
# throttle_time), not a clock, and stays allowed.
PURE: Final = frozenset({"quota", "protocol"})
IMPURE: Final = frozenset(
    {
        "time",
        "datetime",
        "socket",
        "ssl",
        "selectors",
        "threading",
        "_thread",
        "multiprocessing",
        "concurrent",
        "asyncio",
        "uvloop",
    }
)
DURATIONS_ONLY: Final = ("datetime", ("timedelta",))


@pytest.mark.parametrize("package", sorted(PURE))
def test_the_core_imports_no_clock_socket_thread_or_event_loop(package: str) -> None:
    impure = sorted(
        f"{module} imports {library}"
        for module in MODULES
        if _package(module) == package
        for library, names in _third_party(module)
        if library in IMPURE and (library, names) != DURATIONS_ONLY
    )
    assert not impure, "\n".join(impure)


# Heavy libraries and the packages allowed to import them: librdkafka only where the fleet's
# topics are (the rest reaches it through ``fleet``), Spark only in the pipeline and its CLI.
CONFINED: Final[dict[str, frozenset[str]]] = {
    "confluent_kafka": frozenset({"fleet"}),
    "pyspark": frozenset({"pipeline", "commands"}),
}


@pytest.mark.parametrize("library", sorted(CONFINED))
def test_heavy_libraries_stay_in_their_packages(library: str) -> None:
    strays = sorted(
        module
        for module in MODULES
        if _package(module) not in CONFINED[library]
        and any(name == library for name, _ in _third_party(module))
    )
    assert not strays, f"{library} imported by: {', '.join(strays)}"


def test_no_import_cycles() -> None:
    graph = {module: {t for t in _imports(module) if t in MODULES} for module in MODULES}
    cycles = [component for component in _strongly_connected(graph) if len(component) > 1]
    assert not cycles, cycles


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iteratively (the graph is small, the recursion limit is not)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root, targets in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(targets)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            advanced = False
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    advanced = True
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(component)
    return components


def test_reading_the_gateway_config_loads_no_librdkafka() -> None:
    # In a fresh interpreter: this process may have loaded it already. A command that only
    # reads its config (or a gateway on the SQLite store) must not pay for librdkafka.
    probe = (
        "import sys, quotagate.gateway.config; "
        "heavy = ('confluent_kafka', 'quotagate.fleet'); "
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", probe],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "[]"


# What the gateway may not know of its plug-ins: their config sections (a plug-in declares
# them, ``Plugin.sections``) and their settings.
PLUGIN_KNOWLEDGE: Final = ("PLUGIN_SECTIONS", "quota_windows", '"quotas"', '"fleet"', '"usage"')


def test_the_gateway_names_no_plug_in_section() -> None:
    named = sorted(
        f"{module} names {word}"
        for module in MODULES
        if _package(module) == "gateway"
        for word in PLUGIN_KNOWLEDGE
        if word in MODULES[module].read_text(encoding="utf-8")
    )
    assert not named, "\n".join(named)


# The per-request rule steps (which quota records what, and when) are written once, in
# quota/decision.py, for gateway and replay alike; the managers define these methods, and the
# `quotagate engine` calculator drives one manager with the numbers it is given.
RECORDING: Final = frozenset(
    {
        "record_and_get_throttle_ms",
        "record_nanos_and_get_throttle_ms",
        "record_exempt",
        "unrecord",
        "new_quota_for",
        "admit_mutations",
    }
)
RECORDING_ALLOWED: Final = frozenset(
    {
        "quotagate.quota.decision",
        "quotagate.quota.client_quota_manager",
        "quotagate.quota.request_quota_manager",
        "quotagate.quota.controller_mutation",
        "quotagate.quota.connection_quotas",
        "quotagate.commands.engine",
    }
)


def _called(node: ast.AST) -> str | None:
    if not isinstance(node, ast.Call):
        return None
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return node.func.id if isinstance(node.func, ast.Name) else None


def test_the_rule_steps_are_written_once() -> None:
    callers = sorted(
        f"{module} calls {name}"
        for module in MODULES
        if module not in RECORDING_ALLOWED
        for node in ast.walk(ast.parse(MODULES[module].read_text(encoding="utf-8")))
        if (name := _called(node)) in RECORDING
    )
    assert not callers, "\n".join(callers)


REPOSITORY = SRC.parents[1]
CITATION = re.compile(r"\bdocs/[\w-]+\.md\b|\bDESIGN\.md\b")


def test_every_cited_design_document_is_in_the_repository() -> None:
    # The design was once cited from a DESIGN.md outside the repository, a rule nobody could
    # read; what the project needs of it is docs/design.md, and every docs/*.md named in the
    # source, the docs and the README must exist.
    texts = [*MODULES.values(), *(REPOSITORY / "docs").glob("*.md"), REPOSITORY / "README.md"]
    missing = sorted(
        f"{path.relative_to(REPOSITORY)} cites {name}"
        for path in texts
        for name in set(CITATION.findall(path.read_text(encoding="utf-8")))
        if not (REPOSITORY / name).is_file()
    )
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_every_package_named_in_the_rule_exists(package: str) -> None:
    assert any(_package(module) == package for module in MODULES)


# Modules that are state machines without I/O (h11's rule): they and every quotagate module
# they reach import no event loop, socket or clock, so their unit tests need neither.
SANS_IO = ("quotagate.gateway.connection_core",)
IO_MODULES = frozenset({"asyncio", "socket", "ssl", "selectors", "threading", "time", "uvloop"})


def _runtime_import_nodes(module: str) -> Iterator[ast.Import | ast.ImportFrom]:
    """``module``'s imports that run: those under ``if TYPE_CHECKING:`` load nothing."""
    todo: list[ast.AST] = [ast.parse(MODULES[module].read_text(encoding="utf-8"))]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        todo.extend(ast.iter_child_nodes(node))


def _loads(module: str) -> tuple[set[str], set[str]]:
    """What importing ``module`` loads: the quotagate modules, and the other top-level names."""
    ours: set[str] = set()
    others: set[str] = set()
    for node in _runtime_import_nodes(module):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    ours.add(alias.name)
                else:
                    others.add(alias.name.split(".")[0])
        elif node.level == 0 and node.module:
            if node.module.startswith("quotagate"):
                submodules = {f"{node.module}.{a.name}" for a in node.names} & MODULES.keys()
                ours |= submodules or {node.module}
            else:
                others.add(node.module.split(".")[0])
    return ours & MODULES.keys(), others


def _reached(module: str) -> dict[str, set[str]]:
    """Every quotagate module importing ``module`` loads, with its other imports."""
    reached: dict[str, set[str]] = {}
    todo = [module]
    while todo:
        current = todo.pop()
        if current in reached:
            continue
        ours, reached[current] = _loads(current)
        todo.extend(ours)
    return reached


@pytest.mark.parametrize("module", SANS_IO)
def test_sans_io_modules_reach_no_event_loop_socket_or_clock(module: str) -> None:
    found = sorted(
        f"{reached} imports {name}"
        for reached, others in _reached(module).items()
        for name in others & IO_MODULES
    )
    assert not found, "\n".join(found)
