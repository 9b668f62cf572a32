"""Loading logits from .npy, .npz or .safetensors files (no safetensors package needed).

A file holds one array: [L, V] (one sequence of L positions) or [S, L, V] (S sequences
of equal length L). An .npz or .safetensors file with several arrays must name the one to
use "logits". bf16 (safetensors "BF16", or a uint16 .npy/.npz array marked as bf16 by the
caller) is widened to float32 exactly: the bf16 bits are the high half of a float32.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

from acceptance.errors import InputError


class LogitsFileError(InputError):
    """A logits file cannot be used; the message is one line naming the file."""


SAFETENSORS_DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),  # widened by bf16_bits_to_float32
}
FORMATS = (".npy", ".npz", ".safetensors")
PREFERRED_KEY = "logits"


def bf16_bits_to_float32(bits: np.ndarray) -> np.ndarray:
    """bf16 stored as uint16 → float32 (exact: the bits become the float32's high half)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 → bf16 bits, round to nearest even (NaN stays NaN)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16
    nan = np.isnan(np.asarray(x, dtype=np.float32))
    return np.where(nan, (u >> 16) | np.uint32(0x40), rounded).astype(np.uint16)


def _pick(arrays: dict, path: Path) -> np.ndarray:
    if not arrays:
        raise LogitsFileError(f"{path}: holds no arrays")
    if len(arrays) == 1:
        return next(iter(arrays.values()))
    if PREFERRED_KEY in arrays:
        return arrays[PREFERRED_KEY]
    raise LogitsFileError(
        f"{path}: holds {len(arrays)} arrays ({', '.join(sorted(arrays)[:5])}); name the logits '{PREFERRED_KEY}'"
    )


def _read_safetensors(path: Path) -> np.ndarray:
    """Header: u64 little-endian length, then JSON {name: {dtype, shape, data_offsets}}."""
    size = path.stat().st_size
    with path.open("rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise LogitsFileError(f"{path}: too short for a safetensors file")
        (header_len,) = struct.unpack("<Q", head)
        if header_len > size - 8 or header_len > 100_000_000:
            raise LogitsFileError(f"{path}: bad safetensors header length {header_len}")
        try:
            header = json.loads(f.read(header_len))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise LogitsFileError(f"{path}: bad safetensors header ({exc.__class__.__name__})") from None
    if not isinstance(header, dict):
        raise LogitsFileError(f"{path}: bad safetensors header (not an object)")
    entries = {k: v for k, v in header.items() if k != "__metadata__"}
    if not entries:
        raise LogitsFileError(f"{path}: holds no arrays")
    name = next(iter(entries)) if len(entries) == 1 else PREFERRED_KEY
    if name not in entries:
        raise LogitsFileError(
            f"{path}: holds {len(entries)} tensors ({', '.join(sorted(entries)[:5])}); name the logits '{PREFERRED_KEY}'"
        )
    info = entries[name]
    try:
        dtype_name, shape, (begin, end) = info["dtype"], [int(s) for s in info["shape"]], info["data_offsets"]
    except (KeyError, TypeError, ValueError):
        raise LogitsFileError(f"{path}: bad safetensors entry for {name!r}") from None
    if dtype_name not in SAFETENSORS_DTYPES:
        raise LogitsFileError(f"{path}: tensor {name!r} has dtype {dtype_name}, expected one of {', '.join(SAFETENSORS_DTYPES)}")
    dtype = SAFETENSORS_DTYPES[dtype_name]
    count = int(np.prod(shape)) if shape else 1
    data_start = 8 + header_len
    if end - begin != count * dtype.itemsize or data_start + end > size or begin < 0:
        raise LogitsFileError(f"{path}: tensor {name!r} data offsets do not match its shape {tuple(shape)}")
    data = np.memmap(path, dtype=dtype, mode="r", offset=data_start + begin, shape=(count,)) if count else np.empty(0, dtype)
    data = np.asarray(data).reshape(shape)
    return bf16_bits_to_float32(data) if dtype_name == "BF16" else data


def load_logits(path) -> np.ndarray:
    """The logits array of a file as float32/float64, shape [L, V] or [S, L, V]."""
    path = Path(path)
    if path.suffix not in FORMATS:
        raise LogitsFileError(f"{path}: unknown format {path.suffix or '(no suffix)'}; expected .npy, .npz or .safetensors")
    if not path.is_file():
        raise LogitsFileError(f"{path}: no such file")
    if path.stat().st_size == 0:
        raise LogitsFileError(f"{path}: empty file")
    try:
        if path.suffix == ".npy":
            array = np.load(path, allow_pickle=False, mmap_mode="r")
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as archive:
                array = _pick({k: archive[k] for k in archive.files}, path)
        else:
            array = _read_safetensors(path)
    except LogitsFileError:
        raise
    except (ValueError, OSError, EOFError) as exc:
        first_line = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
        raise LogitsFileError(f"{path}: cannot read {path.suffix} file ({first_line})") from None
    if array.dtype == np.float16:
        array = array.astype(np.float32)
    if not np.issubdtype(array.dtype, np.floating):
        raise LogitsFileError(f"{path}: expected floating-point logits, got dtype {array.dtype}")
    if array.ndim not in (2, 3):
        raise LogitsFileError(f"{path}: expected [positions, vocab] or [sequences, positions, vocab], got shape {array.shape}")
    if array.size == 0:
        raise LogitsFileError(f"{path}: empty array of shape {array.shape}")
    return array
