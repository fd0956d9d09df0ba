"""Mapping description files (TOML) for ``autotune mapping``: networks, nodes, modules,
connections, latency paths. The format is documented in docs/studies.md and by
the files in ``assets/mappings/``; every error names the file and the entry.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from studies.pipeline_mapping.model import (
    Connection,
    Mapping,
    MappingError,
    Module,
    Network,
    Node,
    Placement,
)

TOP = {"frame", "network", "node", "module", "connection", "latency"}
KEYS = {
    "network": {"name", "bandwidth_MBps", "latency_ms"},
    "node": {"name", "cpus", "networks"},
    "module": {"name", "time_ms", "load", "node", "nodes", "cpu", "cpus", "exchange_MB", "fixed"},
    "connection": {"from", "to", "kind", "volume_MB", "network"},
    "latency": {"path"},
}


@dataclass(frozen=True)
class MappingFile:
    """A loaded file: the mapping, the modules whose rate is the frame rate, and the modules
    ``--search`` must leave where they are."""

    path: Path
    mapping: Mapping
    frame: tuple[str, ...]
    fixed: frozenset[str]


def load_mapping(path: Path) -> MappingFile:
    """Read and check ``path``; raise :class:`MappingError` naming the file and the entry."""
    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise MappingError(f"{path}: not valid TOML: {exc}") from None
    try:
        return _parse(path, doc)
    except MappingError as exc:
        raise MappingError(f"{path}: {exc}") from None


def _parse(path: Path, doc: dict[str, Any]) -> MappingFile:
    for key in doc:
        if key not in TOP:
            raise MappingError(f"unknown key {key!r} (expected {', '.join(sorted(TOP))})")
    networks = []
    for e in _tables(doc, "network"):
        where = f"network {_name(e, 'network')!r}"
        networks.append(Network(e["name"], _number(e, where, "bandwidth_MBps"),
                                _number(e, where, "latency_ms", 0.0)))
    nodes = []
    for e in _tables(doc, "node"):
        where = f"node {_name(e, 'node')!r}"
        nodes.append(Node(e["name"], _whole(e, where, "cpus"),
                          tuple(_strings(e, where, "networks", []))))
    modules, fixed = [], set()
    for e in _tables(doc, "module"):
        modules.append(_module(e))
        if _get(e, "module", "fixed", False, bool):
            fixed.add(modules[-1].name)
    connections = []
    for i, e in enumerate(_tables(doc, "connection"), 1):
        where = f"connection {i}"
        dst = e.get("to")
        if isinstance(dst, str):
            dst = [dst]
        if not (isinstance(dst, list) and dst and all(isinstance(d, str) for d in dst)):
            raise MappingError(f"{where}: 'to' must be a module name or a list of them")
        connections.append(Connection(_get(e, where, "from", None, str, required=True),
                                      tuple(dst), _get(e, where, "kind", "fifo", str),
                                      _number(e, where, "volume_MB", 0.0),
                                      _get(e, where, "network", None, str)))
    paths = tuple(tuple(_strings(e, "latency path", "path", None))
                  for e in _tables(doc, "latency"))
    frame = doc.get("frame", [])
    frame = [frame] if isinstance(frame, str) else frame
    if not (isinstance(frame, list) and all(isinstance(f, str) for f in frame)):
        raise MappingError("'frame' must be a module name or a list of them")
    mapping = Mapping(tuple(networks), tuple(nodes), tuple(modules), tuple(connections), paths)
    mapping.validate()
    names = [m.name for m in modules]
    for f in frame:
        if f not in names:
            raise MappingError(f"frame: unknown module {f!r}")
    linked = {(c.src, d) for c in connections for d in c.dst}
    for path in paths:
        for a, b in zip(path, path[1:], strict=False):
            if (a, b) not in linked:
                raise MappingError(f"latency path {' -> '.join(path)}: no connection from "
                                   f"{a!r} to {b!r}")
    sinks = [n for n in names if n not in {c.src for c in connections}]
    return MappingFile(path, mapping, tuple(frame or sinks), frozenset(fixed))


def _module(e: dict[str, Any]) -> Module:
    name = _name(e, "module")
    where = f"module {name!r}"
    if ("node" in e) == ("nodes" in e):
        raise MappingError(f"{where}: give either 'node' or 'nodes'")
    nodes = [_get(e, where, "node", None, str)] if "node" in e else _strings(e, where, "nodes",
                                                                             None)
    if not nodes:
        raise MappingError(f"{where}: 'nodes' is empty")
    if "cpu" in e and "cpus" in e:
        raise MappingError(f"{where}: give either 'cpu' or 'cpus'")
    if "cpus" in e:
        cpus = e["cpus"]
        if not (isinstance(cpus, list) and len(cpus) == len(nodes)
                and all(isinstance(c, int) and not isinstance(c, bool) for c in cpus)):
            raise MappingError(f"{where}: 'cpus' must list one CPU number per node")
    else:
        cpu = e.get("cpu")
        if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int)):
            raise MappingError(f"{where}: 'cpu' must be a CPU number, got {cpu!r}")
        cpus = [cpu] * len(nodes)
    return Module(name, _number(e, where, "time_ms"), _number(e, where, "load"),
                  tuple(Placement(n, c) for n, c in zip(nodes, cpus, strict=True)),
                  _number(e, where, "exchange_MB", 0.0))


def _tables(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    entries = doc.get(kind, [])
    if not (isinstance(entries, list) and all(isinstance(e, dict) for e in entries)):
        raise MappingError(f"{kind!r} must be an array of tables ([[{kind}]])")
    for i, e in enumerate(entries, 1):
        for key in e:
            if key not in KEYS[kind]:
                label = e.get("name") if isinstance(e.get("name"), str) else i
                raise MappingError(f"{kind} {label!r}: unknown key {key!r} (expected "
                                   f"{', '.join(sorted(KEYS[kind]))})")
    return entries


def _name(e: dict[str, Any], kind: str) -> str:
    name = e.get("name")
    if not (isinstance(name, str) and name):
        raise MappingError(f"a {kind} has no name")
    return name


def _get(e: dict[str, Any], where: str, key: str, default: Any, kind: type,
         required: bool = False) -> Any:
    if key not in e:
        if required:
            raise MappingError(f"{where}: '{key}' is missing")
        return default
    value = e[key]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise MappingError(f"{where}: '{key}' must be a {kind.__name__}, got {value!r}")
    return value


def _number(e: dict[str, Any], where: str, key: str, default: float | None = None) -> float:
    if key not in e and default is None:
        raise MappingError(f"{where}: '{key}' is missing")
    value = e.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MappingError(f"{where}: '{key}' must be a number, got {value!r}")
    return float(value)


def _whole(e: dict[str, Any], where: str, key: str) -> int:
    value = e.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise MappingError(f"{where}: '{key}' must be a whole number, got {value!r}")
    return value


def _strings(e: dict[str, Any], where: str, key: str, default: list[str] | None) -> list[str]:
    value = e.get(key, default)
    if value is None:
        raise MappingError(f"{where}: '{key}' is missing")
    if not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
        raise MappingError(f"{where}: '{key}' must be a list of names, got {value!r}")
    return value
