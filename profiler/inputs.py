"""Reading the files a user hands us, safely: every reader of a profile, layer spec, suite, shapes file,
correction, run dataset or nccl-tests log goes through here.

A file is read only when it is a regular file (a FIFO, device, socket or directory is refused before it is
opened, and the open never blocks), no larger than the cap for its kind, and valid UTF-8. YAML and JSON
become plain data only (dicts, lists, str, int, float, bool, None): no tags beyond those, no aliases of
lists or mappings (a "billion laughs" file cannot expand), bounded nesting, bounded integer literals and
no duplicate keys. Every number is finite and, unless zero, between MIN_MAGNITUDE and MAX_MAGNITUDE in
magnitude (check_numbers): beyond them lies no size, rate or time of a machine or a run, and arithmetic on
them overflows or divides by zero. Every failure is a one-line UserError naming the file (and the field).
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

import yaml

from profiler.errors import UserError

MiB = 1 << 20
#: largest file accepted per kind, in bytes (a calibrated profile of 1,700 samples is about 3 MiB)
MAX_BYTES = {
    "profile": 128 * MiB,
    "correction": 128 * MiB,
    "runs": 256 * MiB,
    "nccl-tests": 64 * MiB,
    "layer spec": 16 * MiB,
    "shapes": 16 * MiB,
    "suite": 1 * MiB,
    "corpus": 16 * MiB,
    "file": 64 * MiB,
}
MAX_DEPTH = 64  # nesting of mappings and lists
MAX_INT_CHARS = 100  # length of an integer literal (Python refuses above 4300 digits; no real field needs 30)
#: the magnitudes a number in an input file may have (zero aside): the shipped files span 4e-19 .. 1e18
MIN_MAGNITUDE, MAX_MAGNITUDE = 1e-30, 1e30

_PLAIN_TAGS = {f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map")}
_INT_TAG = "tag:yaml.org,2002:int"
_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _PlainLoader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader without the implicit types that are not plain data: timestamps stay strings, '<<'
    is an ordinary key and '=' an ordinary string."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers
                if tag not in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:merge", "tag:yaml.org,2002:value")]
        for first, resolvers in _Base.yaml_implicit_resolvers.items()
    }


def _os_reason(err: OSError) -> str:
    if err.errno == errno.ELOOP:
        return "symbolic link loop"
    if err.errno == errno.ENAMETOOLONG:
        return "file name too long"
    return (err.strerror or err.__class__.__name__).lower()


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: str | os.PathLike, kind: str = "file", label: str | None = None) -> bytes:
    """The bytes of a regular file of at most MAX_BYTES[kind]; label (default: the path) starts every error."""
    label = label or str(path)
    limit = MAX_BYTES.get(kind, MAX_BYTES["file"])
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{label}: no such file") from None
    except OSError as err:
        raise UserError(f"{label}: cannot read ({_os_reason(err)})") from None
    except ValueError:  # an embedded NUL byte in the name
        raise UserError(f"{label}: not a valid file name") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{label}: {_kind_of(info.st_mode)}, expected a regular file")
    if info.st_size > limit:
        raise UserError(f"{label}: {info.st_size / MiB:.1f} MiB is larger than the {limit // MiB} MiB accepted for a {kind} file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as err:
        raise UserError(f"{label}: cannot read ({_os_reason(err)})") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between stat and open
            raise UserError(f"{label}: not a regular file")
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 22, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    except OSError as err:
        raise UserError(f"{label}: cannot read ({_os_reason(err)})") from None
    finally:
        os.close(fd)
    if total > limit:
        raise UserError(f"{label}: larger than the {limit // MiB} MiB accepted for a {kind} file")
    return b"".join(chunks)


def decode_utf8(data: bytes, label: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); the error gives the offset of the first bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise UserError(f"{label}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})") from None


def read_text(path: str | os.PathLike, kind: str = "file", label: str | None = None) -> str:
    return decode_utf8(read_bytes(path, kind, label), label or str(path))


# ---- YAML -----------------------------------------------------------------------------------------------------
def _yaml_error(err: yaml.YAMLError, label: str, invalid: str) -> UserError:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f":{mark.line + 1}" if mark is not None else ""
    problem = getattr(err, "problem", None) or str(err).splitlines()[0]
    return UserError(f"{label}{where}: {invalid}: {problem}")


def _refuse_scalar(node: yaml.ScalarNode, label: str) -> None:
    """A scalar other than plain data (a tag), or an integer literal too long to convert safely."""
    if node.tag not in _PLAIN_TAGS:
        raise UserError(f"{label}:{node.start_mark.line + 1}: YAML tag "
                        f"{node.tag.replace('tag:yaml.org,2002:', '!!')!r} is not accepted (plain data only)")
    if node.tag == _INT_TAG and len(node.value) > MAX_INT_CHARS:
        raise UserError(f"{label}:{node.start_mark.line + 1}: integer literal of {len(node.value)} characters "
                        f"(at most {MAX_INT_CHARS} accepted)")


def _check_nodes(root: yaml.Node, label: str) -> None:
    """Refuse aliases of lists and mappings (one reached twice: what an alias bomb multiplies), tags other
    than plain types, deep nesting, long integer literals and duplicate keys, before anything is
    constructed. Scalars, most of a profile, are checked in the loop over their parent."""
    if isinstance(root, yaml.ScalarNode):
        _refuse_scalar(root, label)
        return
    scalar = yaml.ScalarNode
    seen: set[int] = set()
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        line = node.start_mark.line + 1
        if id(node) in seen:
            raise UserError(f"{label}:{line}: YAML aliases (*name) are not accepted; write the value out")
        seen.add(id(node))
        if node.tag not in _PLAIN_TAGS:
            raise UserError(f"{label}:{line}: YAML tag {node.tag.replace('tag:yaml.org,2002:', '!!')!r} is not accepted (plain data only)")
        if depth > MAX_DEPTH:
            raise UserError(f"{label}:{line}: nested more than {MAX_DEPTH} levels deep")
        if isinstance(node, yaml.SequenceNode):
            for child in node.value:
                if child.__class__ is scalar:
                    if child.tag not in _PLAIN_TAGS or (child.tag == _INT_TAG and len(child.value) > MAX_INT_CHARS):
                        _refuse_scalar(child, label)
                else:
                    stack.append((child, depth + 1))
            continue
        keys = set()
        for key, value in node.value:
            for child in (key, value):
                if child.__class__ is scalar:
                    if child.tag not in _PLAIN_TAGS or (child.tag == _INT_TAG and len(child.value) > MAX_INT_CHARS):
                        _refuse_scalar(child, label)
                else:
                    stack.append((child, depth + 1))
            if key.__class__ is scalar:
                if (key.tag, key.value) in keys:
                    raise UserError(f"{label}:{key.start_mark.line + 1}: duplicate key {key.value!r}")
                keys.add((key.tag, key.value))


def compose_yaml(text: str, label: str, invalid: str = "not valid YAML") -> yaml.Node | None:
    """The checked node tree of one YAML document (None for an empty one), with line numbers for messages;
    `invalid` words a syntax error."""
    loader = _PlainLoader(text)
    try:
        node = loader.get_single_node()
    except yaml.YAMLError as err:
        raise _yaml_error(err, label, invalid) from None
    finally:
        loader.dispose()
    if node is not None:
        _check_nodes(node, label)
    return node


def construct_yaml(node: yaml.Node | None, label: str) -> Any:
    """Plain data from a node tree compose_yaml checked."""
    if node is None:
        return None
    loader = _PlainLoader("")
    try:
        data = loader.construct_document(node)
    except (yaml.YAMLError, ValueError, OverflowError) as err:
        raise UserError(f"{label}: not valid YAML: {str(err).splitlines()[0] if str(err) else type(err).__name__}") from None
    finally:
        loader.dispose()
    return check_numbers(data, label)


#: YAML text at least this long is parsed once and kept as JSON in profiler.disk_cache (a calibrated GPU
#: profile of 3 MB takes seconds to compose in PyYAML and milliseconds to read back as JSON)
CACHE_YAML_CHARS = 256 * 1024
_YAML_CACHE = ("yaml", "paraoracle-parsed-yaml", 1)


def _string_keys_only(data: Any) -> bool:
    """Whether every mapping key below `data` is a string (JSON keeps no other kind)."""
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if not all(key.__class__ is str for key in item):
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def parse_yaml(text: str, label: str, invalid: str = "not valid YAML") -> Any:
    """Plain data from YAML text (see the module docstring); a long text that parsed cleanly before is read
    back from the disk cache, keyed by its SHA-256 (read as any JSON input is, so checked again)."""
    if len(text) < CACHE_YAML_CHARS:
        return construct_yaml(compose_yaml(text, label, invalid), label)
    from profiler import disk_cache

    kind, fmt, version = _YAML_CACHE
    key = hashlib.sha256(text.encode()).hexdigest()
    cached = disk_cache.load(kind, key, fmt, version)
    if cached is not None:
        return cached
    data = construct_yaml(compose_yaml(text, label, invalid), label)
    if _string_keys_only(data):
        disk_cache.store(kind, key, fmt, version, data)
    return data


def _out_of_range(value: Any) -> bool:
    """A number (not a bool) that is infinite, NaN, or outside MIN_MAGNITUDE..MAX_MAGNITUDE and not zero."""
    if value.__class__ is bool or not isinstance(value, (int, float)):
        return False
    size = abs(value)
    return not (size <= MAX_MAGNITUDE and (size >= MIN_MAGNITUDE or size == 0))


def check_numbers(data: Any, label: str, max_depth: int | None = None) -> Any:
    """`data` unchanged when every number in it is in range (_out_of_range); else a UserError naming the
    first bad field by its path (`coefficients.compute.gemm/fwd/float32.launch_s.value`). max_depth: also refuse
    mappings and lists nested deeper (JSON's bound, MAX_DEPTH), in the same walk. Plain ints and floats are tested
    inline (a graph of the cache holds hundreds of thousands), anything else numeric through _out_of_range."""
    top, low = MAX_MAGNITUDE, MIN_MAGNITUDE
    stack = [(data, 1)] if isinstance(data, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        if max_depth is not None and depth > max_depth:
            raise UserError(f"{label}: nested more than {max_depth} levels deep")
        for child in (item.values() if isinstance(item, dict) else item):
            cls = child.__class__
            if cls is int or cls is float:
                if -top <= child <= top and (child == 0 or child >= low or child <= -low):
                    continue
            elif cls is dict or cls is list or isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
                continue
            elif cls is str or cls is bool or child is None or not _out_of_range(child):
                continue
            raise UserError(f"{label}: field '{_path_to(data, child)}': {child!r} is out of range (numbers must "
                            f"be finite and, unless zero, within {MIN_MAGNITUDE:g} .. {MAX_MAGNITUDE:g} in magnitude)")
    if _out_of_range(data):
        raise UserError(f"{label}: {data!r} is out of range (numbers must be finite, within {MAX_MAGNITUDE:g})")
    return data


def _path_to(data: Any, target: Any) -> str:
    """The dotted path of the first value `target` (by identity) below `data` (only walked on an error)."""
    stack = [(data, "")]
    while stack:
        item, path = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, child in pairs:
            where = f"{path}.{key}" if path else str(key)
            if child is target:
                return where
            stack.append((child, where))
    return "?"


def read_yaml(path: str | os.PathLike, kind: str = "file", label: str | None = None) -> Any:
    """Plain data from a YAML file (see the module docstring for what is refused)."""
    label = label or str(path)
    return parse_yaml(read_text(path, kind, label), label)


# ---- JSON -----------------------------------------------------------------------------------------------------
def _json_int(label: str):
    def parse(literal: str) -> int:
        if len(literal) > MAX_INT_CHARS:
            raise UserError(f"{label}: integer literal of {len(literal)} characters (at most {MAX_INT_CHARS} accepted)")
        return int(literal)
    return parse


def _json_object(label: str):
    def build(pairs: list[tuple[str, Any]]) -> dict:
        out = dict(pairs)
        if len(out) != len(pairs):
            seen = set()
            duplicate = next(k for k, _ in pairs if k in seen or seen.add(k))
            raise UserError(f"{label}: duplicate key {duplicate!r}")
        return out
    return build


def parse_json(text: str, label: str, line: int | None = None) -> Any:
    """Plain data from JSON text: bounded nesting and integer literals, no duplicate keys. `line`: the
    line of a JSONL file the text is (errors then read path:line)."""
    if line is not None:
        label = f"{label}:{line}"
    try:
        data = json.loads(text, parse_int=_json_int(label), object_pairs_hook=_json_object(label))
    except json.JSONDecodeError as err:
        where = "" if line is not None else f":{err.lineno}"
        raise UserError(f"{label}{where}: not valid JSON ({err.msg}, column {err.colno})") from None
    except RecursionError:
        raise UserError(f"{label}: nested more than {MAX_DEPTH} levels deep") from None
    return check_numbers(data, label, MAX_DEPTH)


def read_json(path: str | os.PathLike, kind: str = "file", label: str | None = None) -> Any:
    label = label or str(path)
    return parse_json(read_text(path, kind, label), label)


def read_structured(path: str | os.PathLike, kind: str = "file", label: str | None = None) -> Any:
    """JSON for a .json file, YAML otherwise."""
    return (read_json if Path(path).suffix.lower() == ".json" else read_yaml)(path, kind, label)
