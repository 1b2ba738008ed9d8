"""Device meshes and mesh axes: XLA's ``Mesh`` / ``AxisRef`` (xla/hlo/ir/mesh_and_axis.h), the
named (V3) sharding ``NamedSharding`` and the mesh-axes replica groups
``MeshAxesReplicaGroupList``, with their text forms as XLA prints them:

    mesh['x'=2,'y'=4]                              axes in order, devices an iota
    mesh['x'=2,'y'=2], device_ids=(0,2,1,3)        explicit device order
    mesh['a'=4,'b'=16], device_ids=([4,16]T(1,0))  device order as a transposed iota
    maximal_mesh[device_id=5]                      one device
    'b':(2)2                                       sub-axis: size 2 after a pre-size of 2
    {mesh['a'=2,'b'=4], [{'a'}, {'b', ?}], replicated={...}, unreduced={...}, manual={...}}
    replica_groups=mesh['axis_0'=2,'axis_1'=2] {'axis_1'}

A sub-axis ``'b':(p)s`` is the part of axis ``b`` of size ``s`` whose devices step by the
product ``p`` of the parts before it (``p=1`` is the major part). ``to_v2`` turns a named
sharding into the tile-assignment (GSPMD) form the partitioner works on, as XLA's
V3ToV2Sharding: each tensor dimension is tiled by the product of its axes, the devices are
the mesh's reshaped so every sub-axis is a dimension and transposed to (dimension axes,
manual, unreduced, the rest replicated).

Imports only the shape layer's scanner, numpy and (lazily) the metadata reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from math import prod

import numpy as np

from xlapy.shape.text import Scanner

_QUOTED = re.compile(r"'([^']*)'")


@dataclass(frozen=True)
class AxisRef:
    """Axis ``index`` of a mesh, or its sub-axis ``(pre_size)size``."""

    index: int
    pre_size: int | None = None
    size: int | None = None

    def is_sub_axis(self) -> bool:
        return self.pre_size is not None

    def length(self, mesh: Mesh) -> int:
        return self.size if self.is_sub_axis() else mesh.axis_sizes[self.index]

    def to_text(self, mesh: Mesh) -> str:
        text = f"'{mesh.axis_names[self.index]}'"
        if self.is_sub_axis():
            text += f":({self.pre_size}){self.size}"
        return text


@dataclass(frozen=True)
class Mesh:
    """Named axes over devices: ``device_ids`` row-major over ``axis_sizes`` (None: the
    iota 0..n-1; ``iota``: (reshape_dims, perm) when written as a transposed iota).
    ``maximal_device`` for ``maximal_mesh[device_id=N]``."""

    axis_names: tuple[str, ...] = ()
    axis_sizes: tuple[int, ...] = ()
    device_ids: tuple[int, ...] | None = None
    iota: tuple[tuple[int, ...], tuple[int, ...]] | None = None
    maximal_device: int | None = None

    @property
    def num_devices(self) -> int:
        return 1 if self.maximal_device is not None else prod(self.axis_sizes)

    def devices(self) -> np.ndarray:
        """The device ids as an array of shape ``axis_sizes``."""
        if self.maximal_device is not None:
            return np.array([self.maximal_device], np.int64)
        if self.iota is not None:
            dims, perm = self.iota
            flat = np.arange(prod(dims), dtype=np.int64).reshape(dims).transpose(perm)
            return flat.reshape(self.axis_sizes)
        if self.device_ids is not None:
            return np.array(self.device_ids, np.int64).reshape(self.axis_sizes)
        return np.arange(self.num_devices, dtype=np.int64).reshape(self.axis_sizes)

    def axis_index(self, name: str) -> int:
        return self.axis_names.index(name)

    def to_text(self) -> str:
        if self.maximal_device is not None:
            return f"maximal_mesh[device_id={self.maximal_device}]"
        axes = ",".join(f"'{n}'={s}" for n, s in zip(self.axis_names, self.axis_sizes))
        text = f"mesh[{axes}]"
        if self.iota is not None:
            dims, perm = self.iota
            text += f", device_ids=([{','.join(map(str, dims))}]T({','.join(map(str, perm))}))"
        elif self.device_ids is not None:
            text += f", device_ids=({','.join(map(str, self.device_ids))})"
        return text


@dataclass(frozen=True)
class DimSharding:
    """The axes sharding one tensor dimension (major first); ``closed=False`` prints ``?``."""

    axes: tuple[AxisRef, ...] = ()
    closed: bool = True

    def to_text(self, mesh: Mesh) -> str:
        parts = [a.to_text(mesh) for a in self.axes]
        if not self.closed:
            parts.append("?")
        return "{" + ", ".join(parts) + "}"


@dataclass(frozen=True)
class NamedSharding:
    """XLA's NamedSharding. ``kind``: ``dims`` (per-dimension axes), ``replicated``,
    ``unreduced``, ``manual`` (every axis) or ``maximal``; ``unreduced_kind`` the optional
    reduction named in ``unreduced=max{...}``."""

    mesh: Mesh
    kind: str = "dims"
    dims: tuple[DimSharding, ...] = ()
    replicated: tuple[AxisRef, ...] = ()
    unreduced: tuple[AxisRef, ...] = ()
    unreduced_kind: str = ""
    manual: tuple[AxisRef, ...] = ()
    metadata: tuple = field(default=(), compare=False)

    def to_text(self, include_metadata: bool = True) -> str:
        mesh = self.mesh
        parts = [mesh.to_text()]
        if self.kind in ("replicated", "unreduced", "manual"):
            parts.append(self.kind)
        elif self.kind == "dims":
            parts.append("[" + ", ".join(d.to_text(mesh) for d in self.dims) + "]")
            for key, axes in (("replicated", self.replicated), ("unreduced", self.unreduced),
                              ("manual", self.manual)):
                if axes:
                    kind = self.unreduced_kind if key == "unreduced" else ""
                    parts.append(f"{key}={kind}{{" + ", ".join(a.to_text(mesh) for a in axes)
                                 + "}")
        if include_metadata and self.metadata:
            parts.append("metadata={" + ", ".join("{" + m.to_text() + "}"
                                                 for m in self.metadata) + "}")
        return "{" + ", ".join(parts) + "}"

    def refined_axes(self) -> list[AxisRef]:
        """Every mesh axis, split into the sub-axes this sharding uses, in mesh order (major
        part of each axis first): XLA's GetOrderedAxisRefs."""
        mesh = self.mesh
        cuts: dict[int, set[int]] = {i: {1, s} for i, s in enumerate(mesh.axis_sizes)}
        for a in self.all_axes():
            if a.is_sub_axis():
                cuts[a.index].update((a.pre_size, a.pre_size * a.size))
        out = []
        for i in range(len(mesh.axis_sizes)):
            points = sorted(cuts[i])
            if len(points) == 2:
                out.append(AxisRef(i))
                continue
            for lo, hi in zip(points, points[1:]):
                out.append(AxisRef(i, lo, hi // lo))
        return out

    def all_axes(self) -> list[AxisRef]:
        axes = [a for d in self.dims for a in d.axes]
        return axes + list(self.replicated) + list(self.unreduced) + list(self.manual)


def _covers(refined: AxisRef, axis: AxisRef, mesh: Mesh) -> bool:
    """Whether the refined piece ``refined`` is part of ``axis``."""
    if refined.index != axis.index:
        return False
    if not axis.is_sub_axis():
        return True
    lo = refined.pre_size if refined.is_sub_axis() else 1
    hi = lo * refined.length(mesh)
    return axis.pre_size <= lo and hi <= axis.pre_size * axis.size


def named_to_tiles(named: NamedSharding):
    """The V2 form of a dims-kind named sharding: (tile dimensions, device array in that
    shape, subgroup types) before HloSharding's normalisation; ``rank`` tile dimensions are
    data dimensions, then one per subgroup type (manual, unreduced, replicated)."""
    mesh = named.mesh
    refined = named.refined_axes()
    sizes = [r.length(mesh) for r in refined]
    devices = mesh.devices().reshape(sizes) if sizes else mesh.devices().reshape(1)

    def pieces(axis: AxisRef) -> list[int]:
        return [i for i, r in enumerate(refined) if _covers(r, axis, mesh)]

    order: list[int] = []
    tile_dims: list[int] = []
    for d in named.dims:
        size = 1
        for a in d.axes:
            for i in pieces(a):
                order.append(i)
                size *= sizes[i]
        tile_dims.append(size)
    types: list[str] = []
    for key, axes in (("manual", named.manual), ("unreduced", named.unreduced)):
        size = 1
        for a in axes:
            for i in pieces(a):
                order.append(i)
                size *= sizes[i]
        if size > 1:
            tile_dims.append(size)
            types.append(key)
    rest = [i for i in range(len(refined)) if i not in order]
    if rest:
        order += rest
        tile_dims.append(prod(sizes[i] for i in rest))
        types.append("replicated")
    array = devices.transpose(order).reshape(tile_dims) if sizes else devices.reshape(tile_dims)
    return tuple(tile_dims), array, tuple(types), (tuple(sizes), tuple(order))


# -- reading --------------------------------------------------------------------------------


def read_mesh(sc: Scanner) -> Mesh:
    """``mesh[...]`` (with an optional ``, device_ids=(...)``) or ``maximal_mesh[...]``."""
    word_pos = sc.pos
    word = sc.read_ident()
    if word == "maximal_mesh":
        sc.expect("[", "to start maximal_mesh")
        key = sc.read_ident()
        if key != "device_id":
            sc.error("expected 'device_id=' in maximal_mesh[...]")
        sc.expect("=", "after device_id")
        device = sc.read_int("a device id")
        sc.expect("]", "to end maximal_mesh")
        return Mesh(maximal_device=device)
    if word != "mesh":
        sc.error("expected 'mesh[' or 'maximal_mesh['", word_pos)
    sc.expect("[", "to start the mesh axes")
    names: list[str] = []
    sizes: list[int] = []
    ids_inside = None
    if not sc.eat("]"):
        while True:
            if sc.peek_ident() == "device_ids":  # mesh['x'=2, device_ids=(...)]
                ids_inside = sc.pos
                break
            names.append(read_axis_name(sc))
            sc.expect("=", "after a mesh axis name")
            size_pos = sc.pos
            sizes.append(sc.read_int("a mesh axis size"))
            if sizes[-1] < 1:
                sc.error(f"mesh axis '{names[-1]}' has size {sizes[-1]}; sizes must be >= 1",
                         size_pos)
            if not sc.eat(","):
                break
        if ids_inside is None:
            sc.expect("]", "to end the mesh axes")
    if len(set(names)) != len(names):
        sc.error("Mesh has duplicate axis names", word_pos)
    mesh = Mesh(tuple(names), tuple(sizes))
    save = sc.pos
    if ids_inside is not None or (sc.eat(",") and sc.peek_ident() == "device_ids"):
        sc.read_ident()
        sc.expect("=", "after device_ids")
        sc.expect("(", "to start device_ids")
        ids_pos = sc.pos
        if sc.peek() == "[":
            dims = _int_list(sc, "[", "]")
            perm = list(range(len(dims)))
            if sc.peek_ident() == "T":
                sc.read_ident()
                perm = _int_list(sc, "(", ")")
            if prod(dims) != prod(sizes) or sorted(perm) != list(range(len(dims))):
                sc.error(f"device_ids iota [{','.join(map(str, dims))}] does not fit the "
                         f"mesh's {prod(sizes)} devices", ids_pos)
            mesh = Mesh(tuple(names), tuple(sizes), iota=(tuple(dims), tuple(perm)))
        else:
            ids = [sc.read_int("a device id")]
            while sc.eat(","):
                ids.append(sc.read_int("a device id"))
            if len(ids) != prod(sizes):
                sc.error(f"the mesh has {prod(sizes)} devices, but device_ids lists "
                         f"{len(ids)}", ids_pos)
            if sorted(ids) != list(range(prod(sizes))):
                sc.error(f"device_ids ({','.join(map(str, ids))}) must be a permutation of "
                         f"0..{prod(sizes) - 1}", ids_pos)
            mesh = Mesh(tuple(names), tuple(sizes), device_ids=tuple(ids))
        sc.expect(")", "to end device_ids")
        if ids_inside is not None:
            sc.expect("]", "to end the mesh axes")
    else:
        sc.pos = save
    return mesh


def read_axis_name(sc: Scanner) -> str:
    sc.skip()
    m = _QUOTED.match(sc.text, sc.pos)
    if not m:
        sc.error(f"expected a quoted mesh axis name ('x'), found {sc.describe_next()}")
    sc.pos = m.end()
    return m.group(1)


def read_axis_ref(sc: Scanner, mesh: Mesh) -> AxisRef:
    sc.skip()
    pos = sc.pos
    name = read_axis_name(sc)
    if name in mesh.axis_names:
        index = mesh.axis_index(name)
    elif name.isdigit():  # an axis given by its index
        index = int(name)
        if index >= len(mesh.axis_names):
            sc.error(f"axis index {index} is out of bounds for mesh {mesh.to_text()}", pos)
    else:
        sc.error(f"'{name}' is not a valid axis name or index of mesh {mesh.to_text()}", pos)
    if sc.eat(":"):
        sc.expect("(", "to start a sub-axis pre-size")
        pre = sc.read_int("a sub-axis pre-size")
        sc.expect(")", "to end a sub-axis pre-size")
        size = sc.read_int("a sub-axis size")
        full = mesh.axis_sizes[index]
        if pre < 1 or size <= 1 or full % (pre * size) or size >= full:
            sc.error(f"sub-axis '{name}':({pre}){size} does not fit axis '{name}' of size "
                     f"{full}", pos)
        return AxisRef(index, pre, size)
    return AxisRef(index)


def read_axis_list(sc: Scanner, mesh: Mesh) -> tuple[tuple[AxisRef, ...], bool]:
    """``{'a', 'b':(2)2, ?}``: the axes and whether the list is closed (no ``?``)."""
    sc.expect("{", "to start a list of mesh axes")
    axes: list[AxisRef] = []
    closed = True
    if sc.eat("}"):
        return (), True
    while True:
        if sc.eat("?"):
            closed = False
        else:
            axes.append(read_axis_ref(sc, mesh))
        if sc.eat("}"):
            return tuple(axes), closed
        sc.expect(",", "or '}' in a list of mesh axes")


def read_named_sharding(sc: Scanner, loc: int) -> NamedSharding:
    """The body of ``{mesh[...], ...}`` after its ``{``, up to and including the ``}``."""
    mesh = read_mesh(sc)
    if mesh.maximal_device is not None:
        metadata = ()
        if sc.eat(","):
            metadata = _read_metadata(sc)
        sc.expect("}", "to end the sharding")
        return NamedSharding(mesh, "maximal", metadata=metadata)
    values: dict = {"kind": "dims"}
    seen_dims = False
    while sc.eat(","):
        sc.skip()
        if sc.peek() == "[":
            sc.expect("[")
            dims = []
            if not sc.eat("]"):
                while True:
                    axes, closed = read_axis_list(sc, mesh)
                    dims.append(DimSharding(axes, closed))
                    if sc.eat("]"):
                        break
                    sc.expect(",", "or ']' in the dimension shardings")
            values["dims"] = tuple(dims)
            seen_dims = True
            continue
        word_pos = sc.pos
        word = sc.read_ident()
        if word in ("replicated", "unreduced", "manual") and sc.peek() != "=":
            values["kind"] = word
        elif word in ("replicated", "unreduced", "manual"):
            sc.expect("=")
            if word == "unreduced" and sc.peek_ident():
                values["unreduced_kind"] = sc.read_ident()
            values[word] = read_axis_list(sc, mesh)[0]
        elif word == "metadata":
            sc.expect("=")
            values["metadata"] = _read_metadata(sc)
        else:
            sc.error("expected a dimension sharding list [...], replicated, unreduced, manual "
                     "or metadata= in a named sharding", word_pos)
    sc.expect("}", "to end the sharding")
    if values["kind"] != "dims" and seen_dims:
        sc.error(f"a {values['kind']} named sharding has no dimension shardings", loc)
    named = NamedSharding(mesh, **values)
    used: set[tuple] = set()
    for a in named.all_axes():
        key = (a.index, a.pre_size, a.size)
        if key in used:
            sc.error(f"axis {a.to_text(mesh)} is used twice in the sharding", loc)
        used.add(key)
    return named


def _read_metadata(sc: Scanner) -> tuple:
    """``{...}`` or ``{{...}, {...}}`` (a leading ``metadata=`` is read too)."""
    from xlapy.hlo.module_data import OpMetadata

    if sc.peek_ident() == "metadata":
        sc.read_ident()
        sc.expect("=", "after metadata")
    sc.skip()
    if not (sc.text.startswith("{", sc.pos) and sc.text[sc.pos + 1:].lstrip().startswith("{")):
        return (OpMetadata.read(sc),)
    sc.expect("{")
    out = []
    while True:
        out.append(OpMetadata.read(sc))
        if sc.eat("}"):
            return tuple(out)
        sc.expect(",", "or '}' in a list of metadata")


def _int_list(sc: Scanner, open_: str, close: str) -> list[int]:
    sc.expect(open_)
    out: list[int] = []
    if sc.eat(close):
        return out
    while True:
        out.append(sc.read_int())
        if sc.eat(close):
            return out
        sc.expect(",", f"or '{close}'")


# -- replica groups over mesh axes ----------------------------------------------------------


@dataclass(frozen=True)
class MeshAxesReplicaGroupList:
    """``replica_groups=mesh['x'=2,'y'=2] {'x'}``: one group per combination of the other
    axes, holding the devices along the listed axes (XLA's MeshAxesReplicaGroupList)."""

    mesh: Mesh
    axes: tuple[AxisRef, ...]

    def to_text(self) -> str:
        return f"{self.mesh.to_text()} {{{','.join(a.to_text(self.mesh) for a in self.axes)}}}"

    def __str__(self) -> str:
        return self.to_text()

    @property
    def num_devices_per_group(self) -> int:
        return prod(a.length(self.mesh) for a in self.axes)

    @property
    def num_replica_groups(self) -> int:
        return self.mesh.num_devices // self.num_devices_per_group

    def flattened_replica_groups(self) -> tuple[tuple[int, ...], ...]:
        named = NamedSharding(self.mesh, "dims", manual=self.axes)
        refined = named.refined_axes()
        sizes = [r.length(self.mesh) for r in refined]
        grouped = []
        # Group members vary along the axes in mesh order (XLA's ComputeReindexedAxes); the
        # sub-axes of one mesh axis keep the order they are written in.
        for index in range(len(self.mesh.axis_sizes)):
            for a in self.axes:
                if a.index == index:
                    grouped += [i for i, r in enumerate(refined) if _covers(r, a, self.mesh)]
        order = [i for i in range(len(refined)) if i not in grouped] + grouped
        array = self.mesh.devices().reshape(sizes).transpose(order)
        rows = array.reshape(-1, self.num_devices_per_group)
        return tuple(tuple(int(v) for v in row) for row in rows)

    def replica_groups(self):
        from xlapy.hlo.attrs.collective import ReplicaGroup

        return tuple(ReplicaGroup(g) for g in self.flattened_replica_groups())

    def expand(self):
        from xlapy.hlo.attrs.collective import CollectiveDeviceList

        return CollectiveDeviceList(self.flattened_replica_groups())

    def is_empty(self) -> bool:
        return False


def read_mesh_replica_groups(sc: Scanner) -> MeshAxesReplicaGroupList:
    start = sc.pos
    mesh = read_mesh(sc)
    # XLA's words first (ParseCollectiveDeviceListBase), then which groups
    single = "MeshAxesReplicaGroupList must have more than one device per group, but got"
    if mesh.maximal_device is not None:
        sc.error(f"{single} 1 (a maximal_mesh has no axes)", start)
    axes, closed = read_axis_list(sc, mesh)
    if not closed:
        sc.error("mesh-axes replica groups name axes, not '?'", start)
    if not axes:
        sc.error(f"{single} 1 (no axes named)", start)
    groups = MeshAxesReplicaGroupList(mesh, axes)
    if groups.num_devices_per_group <= 1:
        sc.error(f"{single} {groups.num_devices_per_group} ({groups.to_text()})", start)
    return groups


__all__ = ["AxisRef", "DimSharding", "Mesh", "MeshAxesReplicaGroupList", "NamedSharding",
           "named_to_tiles", "read_axis_list", "read_mesh", "read_mesh_replica_groups",
           "read_named_sharding"]
