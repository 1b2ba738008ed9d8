"""Device meshes and mesh-axes replica groups, as XLA's parser reads and its printer writes
them (xla/hlo/ir/mesh_and_axis.h, replica_group.h):

    mesh['x'=2,'y'=4]                          Mesh: named axes over devices 0..7
    mesh['x'=2,'y'=2], device_ids=(0,2,1,3)    ... over an explicit device order
    mesh['a'=4,'b'=16], device_ids=([4,16]T(1,0))   ... over a transposed iota
    maximal_mesh[device_id=5]                  one device
    'y'   'y':(2)2                             AxisRef: a whole axis, or the sub-axis of
                                               size 2 after pre-size 2
    replica_groups=mesh['x'=2,'y'=2] {'y'}     MeshAxesReplicaGroupList: one group per
                                               value of the other axes ({{0,1},{2,3}})

Owns Mesh, AxisRef, MeshAxesReplicaGroupList (the third form of replica groups, next to
the explicit and iota lists of collective.py, with the same accessors) and their readers.
Imports only numpy, the shape layer's Scanner and the iota canonicalisation of collective.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from math import prod

import numpy as np

from xlapy.errors import InvalidArgumentError
from xlapy.shape.text import Scanner

_QUOTED = re.compile(r"'([^']*)'|\"((?:[^\"\\]|\\.)*)\"")


@dataclass(frozen=True)
class Mesh:
    """Named axes over devices. ``device_ids``: the devices in row-major order over the axes
    when not 0..n-1; ``iota``: (reshape dims, transpose) when given as ``([r...]T(p...))``;
    ``maximal_device``: the one device of a maximal mesh."""

    axis_names: tuple[str, ...] = ()
    axis_sizes: tuple[int, ...] = ()
    device_ids: tuple[int, ...] | None = None
    iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    maximal_device: int | None = None

    def __post_init__(self):
        problem = self._problem()
        if problem:
            raise InvalidArgumentError(f"mesh: {problem}")

    def _problem(self) -> str | None:
        if len(set(self.axis_names)) != len(self.axis_names):
            dup = next(n for n in self.axis_names if self.axis_names.count(n) > 1)
            return f"Mesh has duplicate axis names. Duplicate axis name: {dup}"
        if any(s < 1 for s in self.axis_sizes):
            return f"mesh axis sizes must be >= 1, got {list(self.axis_sizes)}"
        n = prod(self.axis_sizes)
        if self.iota is not None and prod(self.iota[0]) != n:
            return (f"device_ids=([...]) has {prod(self.iota[0])} devices, the mesh axes "
                    f"{n}")
        if self.device_ids is not None:
            ids = list(self.device_ids)
            if len(ids) != n:
                return f"Expected {n} device_ids based on mesh axes, but got {len(ids)}"
            if any(d < 0 for d in ids):
                return f"Mesh device ids must be non-negative. Device id: {min(ids)}"
            if ids == list(range(n)):
                return "Non-iota device assignment has iota device id list [0,1,2,3...]."
            if sorted(ids) != list(range(n)):
                return "Device ids must be a permutation of [0,1,2,3...]."
        return None

    @property
    def is_maximal(self) -> bool:
        return self.maximal_device is not None

    def device_count(self) -> int:
        return 1 if self.is_maximal else prod(self.axis_sizes) if self.axis_sizes else 0

    def devices(self) -> np.ndarray:
        """The device ids as an array of the axis sizes."""
        if self.is_maximal:
            return np.array(self.maximal_device, dtype=np.int64)
        n = prod(self.axis_sizes)
        if self.device_ids is not None:
            flat = np.array(self.device_ids, dtype=np.int64)
        elif self.iota is not None:
            dims, perm = self.iota
            flat = np.arange(n, dtype=np.int64).reshape(dims).transpose(perm).reshape(-1)
        else:
            flat = np.arange(n, dtype=np.int64)
        return flat.reshape(self.axis_sizes)

    def to_text(self) -> str:
        if self.is_maximal:
            return f"maximal_mesh[device_id={self.maximal_device}]"
        axes = ",".join(f"'{name}'={size}" for name, size in zip(self.axis_names,
                                                                self.axis_sizes))
        text = f"mesh[{axes}]"
        if self.device_ids is not None:
            text += ", device_ids=(" + ",".join(map(str, self.device_ids)) + ")"
        elif self.iota is not None and len(self.iota[0]) > 1:
            dims, perm = self.iota
            text += (", device_ids=([" + ",".join(map(str, dims)) + "]T("
                     + ",".join(map(str, perm)) + "))")
        return text

    def __str__(self) -> str:
        return self.to_text()


@dataclass(frozen=True)
class AxisRef:
    """A mesh axis (by index), or its sub-axis ``(pre_size, size)``: the ``size`` devices
    after every ``pre_size``-th along the axis."""

    index: int
    sub: tuple[int, int] | None = None

    def size(self, mesh: Mesh) -> int:
        return self.sub[1] if self.sub is not None else mesh.axis_sizes[self.index]

    def to_text(self, mesh: Mesh) -> str:
        text = f"'{mesh.axis_names[self.index]}'"
        if self.sub is not None:
            text += f":({self.sub[0]}){self.sub[1]}"
        return text

    def problem(self, mesh: Mesh) -> str | None:
        """AxisRef::Validate."""
        if self.sub is None:
            return None
        full = mesh.axis_sizes[self.index]
        pre, size = self.sub
        if pre < 1 or size < 1 or full % (pre * size):
            return (f"Sub-axis next_pre_size must divide the full axis size. Next pre-size: "
                    f"{pre * size}, Axis size: {full}")
        if size >= full:
            return (f"Sub-axis size must be strictly less than the full axis size. Sub-axis "
                    f"size: {size}, Axis size: {full}")
        return None


@dataclass(frozen=True)
class MeshAxesReplicaGroupList:
    """Replica groups over mesh axes: each group holds the devices that differ only along
    ``axes`` (XLA's MeshAxesReplicaGroupList, printed ``mesh[...] {'axis', ...}``).

    >>> groups = read_mesh_replica_groups(Scanner("mesh['x'=2,'y'=2] {'y'}"))
    >>> groups.flattened_replica_groups()
    ((0, 1), (2, 3))
    """

    mesh: Mesh
    axes: tuple[AxisRef, ...]

    @property
    def num_devices_per_group(self) -> int:
        return prod(a.size(self.mesh) for a in self.axes)

    @property
    def num_replica_groups(self) -> int:
        return self.mesh.device_count() // self.num_devices_per_group

    def _reindexed(self) -> tuple[list[int], list[int]]:
        """XLA's ComputeReindexedAxes: the mesh's devices reshaped so that every grouped
        (sub-)axis is a dimension of its own, and those dimensions in ``axes`` order."""
        sizes = self.mesh.axis_sizes
        by_dim: dict[int, list[AxisRef]] = {}
        for axis in self.axes:
            by_dim.setdefault(axis.index, []).append(axis)
        layout: dict[int, tuple[list[int], list[int]]] = {}
        for dim, refs in by_dim.items():
            full = sizes[dim]
            if len(refs) == 1:
                ref = refs[0]
                if ref.sub is None:
                    layout[dim] = ([full], [0])
                else:
                    pre, size = ref.sub
                    layout[dim] = ([pre, size, full // (pre * size)], [1])
                continue
            order = sorted(range(len(refs)), key=lambda i: refs[i].sub[0])
            reshape, sorted_agg, prefix = [], [], 1
            for i in order:
                pre, size = refs[i].sub
                if pre != prefix:  # the devices between two sub-axes
                    reshape.append(pre // prefix)
                    prefix *= pre // prefix
                sorted_agg.append(len(reshape))
                reshape.append(size)
                prefix *= size
            if prefix != full:
                reshape.append(full // prefix)
            agg = [0] * len(refs)
            for k, i in enumerate(order):
                agg[i] = sorted_agg[k]
            layout[dim] = (reshape, agg)
        reindexed, offsets = [], []
        for dim, size in enumerate(sizes):
            offsets.append(len(reindexed))
            reindexed += layout[dim][0] if dim in layout else [size]
        grouped, consumed = [], {}
        for axis in self.axes:
            k = consumed.get(axis.index, 0)
            consumed[axis.index] = k + 1
            grouped.append(layout[axis.index][1][k] + offsets[axis.index])
        return reindexed, grouped

    def to_array(self) -> np.ndarray:
        """The ``[num_replica_groups, num_devices_per_group]`` array of device ids."""
        if self.mesh.is_maximal or not self.axes:
            return self.mesh.devices().reshape(-1, 1)
        reindexed, grouped = self._reindexed()
        rest = [d for d in range(len(reindexed)) if d not in grouped]
        arranged = self.mesh.devices().reshape(reindexed).transpose(rest + grouped)
        return arranged.reshape(-1, self.num_devices_per_group)

    def flattened_replica_groups(self) -> tuple[tuple[int, ...], ...]:
        return tuple(tuple(int(v) for v in row) for row in self.to_array())

    def replica_groups(self):
        from xlapy.hlo.attrs.collective import ReplicaGroup

        return tuple(ReplicaGroup(g) for g in self.flattened_replica_groups())

    def expand(self):
        """The same groups as an explicit list (XLA's ToCollectiveDeviceList)."""
        from xlapy.hlo.attrs.collective import CollectiveDeviceList

        return CollectiveDeviceList(self.flattened_replica_groups())

    def is_empty(self) -> bool:
        return False

    def to_text(self) -> str:
        return f"{self.mesh.to_text()} {{{','.join(a.to_text(self.mesh) for a in self.axes)}}}"

    def __str__(self) -> str:
        return self.to_text()


# -- reading ---------------------------------------------------------------------------------


def _read_quoted(sc: Scanner, what: str) -> str:
    m = sc.peek_re(_QUOTED)
    if not m:
        sc.error(f"expects string ({what} in quotes: 'x'), found {sc.describe_next()}")
    sc.pos = m.end()
    return m.group(1) if m.group(1) is not None else m.group(2)


def _read_int_list(sc: Scanner, open_: str, close: str, what: str) -> list[int]:
    if not sc.eat(open_):
        sc.error(f"expected '{open_}' to start {what}, found {sc.describe_next()}")
    out: list[int] = []
    if sc.eat(close):
        return out
    while True:
        out.append(sc.read_int(what))
        if sc.eat(close):
            return out
        if not sc.eat(","):
            sc.error(f"expected ',' or '{close}' in {what}, found {sc.describe_next()}")


def read_mesh(sc: Scanner) -> Mesh:
    """``mesh[...]`` (with an optional ``, device_ids=(...)``) or
    ``maximal_mesh[device_id=N]`` (XLA's ParseMesh)."""
    sc.skip()
    start = sc.pos
    kind = sc.read_ident()
    if kind == "maximal_mesh":
        if not sc.eat("["):
            sc.error(f"expected '[' after maximal_mesh, found {sc.describe_next()}")
        if sc.read_ident() != "device_id" or not sc.eat("="):
            sc.error("expected device_id= attribute in maximal_mesh")
        device = sc.read_int("a device id")
        if not sc.eat("]"):
            sc.error(f"expected ']' to end maximal_mesh, found {sc.describe_next()}")
        return Mesh(maximal_device=device)
    if kind != "mesh":
        sc.error("Expected 'mesh' or 'maximal_mesh'", start)
    if not sc.eat("["):
        sc.error(f"expected '[' after mesh, found {sc.describe_next()}")
    names, sizes = [], []
    if sc.peek() != "]":
        while True:
            names.append(_read_quoted(sc, "an axis name"))
            if not sc.eat("="):
                sc.error(f"expects '=' after axis name, found {sc.describe_next()}")
            sizes.append(sc.read_int("an axis size"))
            if not sc.eat(","):
                break
    if not sc.eat("]"):
        sc.error(f"expected ']' to end mesh axes, found {sc.describe_next()}")
    if not names:
        return Mesh()
    device_ids = iota = None
    m = re.compile(r"[ \t\n\r]*,[ \t\n\r]*device_ids[ \t\n\r]*=").match(sc.text, sc.pos)
    if m:
        sc.pos = m.end()
        ids_pos = sc.pos
        if not sc.eat("("):
            sc.error(f"expected '(' for device_ids, found {sc.describe_next()}")
        if sc.peek() == "[":
            dims = _read_int_list(sc, "[", "]", "the device_ids iota dimensions")
            perm = list(range(len(dims)))
            if sc.peek_ident() == "T":
                sc.read_ident()
                perm = _read_int_list(sc, "(", ")", "the device_ids transpose")
            if sorted(perm) != list(range(len(dims))):
                sc.error(f"the transpose T({','.join(map(str, perm))}) must be a permutation "
                         f"of 0..{len(dims) - 1}", ids_pos)
            from xlapy.hlo.attrs.collective import canonicalize_iota

            iota = canonicalize_iota(tuple(dims), tuple(perm))
            if len(iota[0]) <= 1:
                iota = None  # a plain iota: printed without device_ids
        else:
            device_ids = []
            while sc.peek() != ")":
                device_ids.append(sc.read_int("a device id"))
                if not sc.eat(","):
                    break
            device_ids = tuple(device_ids)
        if not sc.eat(")"):
            sc.error(f"expected ')' to end device_ids, found {sc.describe_next()}")
        if iota is not None and prod(iota[0]) != prod(sizes):
            sc.error(f"Expected {prod(sizes)} device_ids based on mesh axes, but got "
                     f"{prod(iota[0])}", ids_pos)
    try:
        return Mesh(tuple(names), tuple(sizes), device_ids, iota)
    except InvalidArgumentError as e:
        sc.error(str(e).removeprefix("mesh: "), start)


def read_axis_refs(sc: Scanner, mesh: Mesh) -> tuple[AxisRef, ...]:
    """``{'x', 'y':(2)2}``: axes of ``mesh`` by name (or, as XLA prints them without a mesh,
    by index), each a whole axis or a sub-axis (XLA's ParseAxisRefList)."""
    if not sc.eat("{"):
        sc.error(f"expected '{{' to start a list of mesh axes, found {sc.describe_next()}")
    out: list[AxisRef] = []
    if sc.eat("}"):
        return ()
    while True:
        sc.skip()
        pos = sc.pos
        name = _read_quoted(sc, "a mesh axis name")
        if name in mesh.axis_names:
            index = mesh.axis_names.index(name)
        elif re.fullmatch(r"[0-9]+", name):
            index = int(name)
            if index >= len(mesh.axis_names):
                sc.error(f"axis index {index} is out of bounds for mesh {mesh} which has "
                         f"{len(mesh.axis_names)} axes", pos)
        else:
            sc.error(f"axis '{name}' is not a valid axis name or index in mesh {mesh}", pos)
        sub = None
        if sc.eat(":"):
            if not sc.eat("("):
                sc.error(f"expected '(' before pre_size in sub axis, found {sc.describe_next()}")
            pre = sc.read_int("the pre-size of a sub-axis")
            if not sc.eat(")"):
                sc.error(f"expected ')' after pre_size in sub axis, found {sc.describe_next()}")
            sub = (pre, sc.read_int("the size of a sub-axis"))
        ref = AxisRef(index, sub)
        problem = ref.problem(mesh)
        if problem:
            sc.error(problem, pos)
        out.append(ref)
        if sc.eat("}"):
            return tuple(out)
        if not sc.eat(","):
            sc.error(f"expected ',' or '}}' in a list of mesh axes, found {sc.describe_next()}")


def read_mesh_replica_groups(sc: Scanner) -> MeshAxesReplicaGroupList:
    """``mesh[...] {axes}``: XLA's ParseCollectiveDeviceListBase for the mesh-axes form;
    a group must have more than one device."""
    sc.skip()
    start = sc.pos
    mesh = read_mesh(sc)
    axes = read_axis_refs(sc, mesh)
    seen: set[tuple[int, int, int]] = set()
    for a in axes:  # no two refs may cover the same devices of an axis
        full = mesh.axis_sizes[a.index] if not mesh.is_maximal else 1
        pre, size = a.sub if a.sub is not None else (1, full)
        span = (a.index, pre, pre * size)
        if any(i == a.index and lo < span[2] and span[1] < hi for i, lo, hi in seen):
            sc.error("Axes cannot coexist or axes overlap.", start)
        seen.add(span)
    groups = MeshAxesReplicaGroupList(mesh, axes)
    per_group = groups.num_devices_per_group
    if per_group <= 1:
        sc.error(f"MeshAxesReplicaGroupList must have more than one device per group, but got "
                 f"{per_group}", start)
    return groups
