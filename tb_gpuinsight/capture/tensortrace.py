"""`TensorTrace`: record the tensor arguments of every torch call made inside a `with` block, as tensor.trace lines.

    with tb_gpuinsight.TensorTrace():             # lines to stderr
        y = torch.matmul(a, b)
    with tb_gpuinsight.TensorTrace("runs/exp1"):  # a directory: writes runs/exp1/{worker}.tensor.trace
        model(x)

One line per tensor argument (and, unless `returns=False`, per returned tensor), fields separated by two spaces:

    [call]  <time ns>  torch.Size([4, 32])  <bytes>  <data pointer>  <arg name>  <function>  <file>:<line>

How calls are seen (no frame tracing): a `TorchFunctionMode` sees every call that goes through torch's
`__torch_function__` protocol: builtins such as `torch.matmul`, operators and tensor methods (`a @ b` is recorded as
`Tensor.matmul`, `x.sum()` as `Tensor.sum`), and `torch.nn.functional` calls. Global module forward hooks add one
record per module call (`Linear.forward`), then the module's own torch calls follow as records of their own.
Calls torch makes from inside another call's `__torch_function__` handling are not seen (the mode is off while it
runs one), and property reads (`x.shape`, `x.grad`) and pure metadata methods (`size`, `dim`, `data_ptr`...) are
skipped: they launch no work.

How argument names are chosen, in this order:
1. the caller's variable name: a local variable of the nearest frame outside torch (your code) that refers to that
   very tensor object (`torch.matmul(q, k)` gives `q` and `k`; `model(x)` gives `x` for the module and for its
   first layer's input);
2. else the parameter name in torch's signature of the function (`weight`, `bias` of `F.linear`; `self` for the
   tensor a method is called on), or the keyword used;
3. else `arg<i>`. A tensor inside a list argument gets `[j]` appended (`tensors[1]`); returned tensors are named
   `return` (`return[j]` for tuples).
The time is `time.time_ns()` when the call starts (or returns, for `[ret]`), the clock Kineto traces use, so records
can be joined to profiler ops by time. The source location is that same nearest frame outside torch (relative to
the working directory when the file is under it).

Scope: only the thread that entered the block is recorded (torch function modes are thread-local; module hooks
check the thread). Blocks nest: an inner block records into its own sink and the outer one still sees the calls.
Hooks are removed on exit, also when the block raises.
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, TextIO, Tuple

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["TensorTrace", "tensor_trace_path", "format_line"]

SEP = "  "
# Methods that read metadata only: no kernel, no data movement, and torch calls them itself all the time.
_METADATA = frozenset({
    "size", "dim", "ndimension", "numel", "nelement", "stride", "data_ptr", "element_size", "is_contiguous",
    "storage_offset", "untyped_storage", "is_floating_point", "is_complex", "get_device", "__len__", "__repr__",
    "__format__", "__bool__", "__hash__", "__index__", "__int__", "__float__", "__iter__", "__reduce_ex__",
    "__get__", "__set__", "__delete__", "_is_view", "is_sparse", "has_names", "requires_grad_", "__contains__",
    "__deepcopy__", "__setstate__", "__getstate__", "_backward_hooks", "dim_order",
})
_PUBLIC_MODULES = {"torch._C._nn": "torch.nn.functional", "torch._C._linalg": "torch.linalg",
                   "torch._C._special": "torch.special", "torch._C._fft": "torch.fft",
                   "torch._C._VariableFunctions": "torch", "torch.functional": "torch"}
_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_THIS_FILE = os.path.abspath(__file__)


def tensor_trace_path(directory: "os.PathLike[str] | str", worker: Optional[str] = None,
                      stamp: Optional[int] = None) -> str:
    """Where a tensor.trace goes so that logdir discovery pairs it: `{worker}.{stamp}.tensor.trace` belongs to the
    span `{worker}.{stamp}.pt.trace.json`; without a stamp, `{worker}.tensor.trace` belongs to the run. The worker
    defaults to `tensorboard_trace_handler`'s `{hostname}_{pid}`."""
    worker = worker or f"{socket.gethostname()}_{os.getpid()}"
    name = f"{worker}.{stamp}.tensor.trace" if stamp is not None else f"{worker}.tensor.trace"
    return os.path.join(os.fspath(directory), name)


def format_line(kind: str, ts: int, shape: Tuple[int, ...], nbytes: int, ptr: int, name: str, function: str,
                location: str) -> str:
    """One tensor.trace line (no newline). Two spaces never occur inside a field: names are cleaned."""
    shape_text = f"torch.Size([{', '.join(str(int(d)) for d in shape)}])"
    return SEP.join((f"[{kind}]", str(ts), shape_text, str(nbytes), str(ptr), _clean(name), _clean(function),
                     location))


def _clean(text: str) -> str:
    return "_".join(text.split()) or "?"


class _Sink:
    """Where lines go: a text stream we do not own (stderr), or a file we open lazily and close."""

    def __init__(self, path: Optional[str], stream: Optional[TextIO]) -> None:
        self.path = path
        self._stream = stream
        self._owned: Optional[TextIO] = None
        self._lock = threading.Lock()
        self.lines = 0

    def write(self, lines: List[str]) -> None:
        with self._lock:
            if self._stream is None and self._owned is None:
                os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
                self._owned = open(self.path, "a", encoding="utf-8", buffering=1 << 16)
            (self._owned or self._stream).write("\n".join(lines) + "\n")
            self.lines += len(lines)

    def close(self) -> None:
        with self._lock:
            if self._owned is not None:
                self._owned.close()
                self._owned = None
            elif self._stream is not None:
                self._stream.flush()


class _Mode(TorchFunctionMode):
    """Sees each torch call of this thread while pushed; hands it to the recorder, then runs it."""

    def __init__(self, recorder: "TensorTrace") -> None:
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if _compiling():  # inside torch.compile: record nothing, so Dynamo traces straight through
            return func(*args, **kwargs)
        rec = self.recorder
        name = _function_name(func)
        if name is None or rec._is_busy():
            return func(*args, **kwargs)
        rec._record_call(name, args, kwargs, _param_names(func))
        out = func(*args, **kwargs)
        if rec.returns:
            rec._record_return(name, out)
        return out


class TensorTrace:
    """Context manager recording the tensor arguments of torch calls made inside it (see the module docstring).

    `path`: None prints to stderr (or to `stream`); a directory (an existing one, a path ending in a separator, or
    a new path whose name has no suffix such as `runs/my_run`, created) gets `tensor_trace_path(path, worker,
    stamp)`; any other path (`x.tensor.trace`) is the file itself. Files are appended to, so one
    file can hold several blocks. `returns`: also write `[ret]` lines for returned tensors. `modules`: also record
    module calls through global forward hooks. `start()` / `stop()` do what entering and leaving do, for a profiler
    handler that cuts one file per span; `lines` counts what was written.
    """

    def __init__(self, path: "os.PathLike[str] | str | None" = None, *, worker: Optional[str] = None,
                 stamp: Optional[int] = None, returns: bool = True, modules: bool = True,
                 stream: Optional[TextIO] = None) -> None:
        self.path = _resolve(path, worker, stamp)
        self.returns = returns
        self.modules = modules
        self._sink = _Sink(self.path, stream if stream is not None or self.path else sys.stderr)
        self._mode: Optional[_Mode] = None
        self._thread: Optional[int] = None
        self._busy = threading.local()  # per thread: set while this instance reads tensors it records

    @property
    def lines(self) -> int:
        """Lines written so far."""
        return self._sink.lines

    # ------------------------------------------------------------------------------------------ lifecycle

    def start(self) -> "TensorTrace":
        """Begin recording calls of the current thread."""
        if self._mode is not None:
            raise RuntimeError("TensorTrace is already recording; use a new instance to nest")
        self._thread = threading.get_ident()
        mode = _Mode(self)
        mode.__enter__()
        self._mode = mode
        try:
            if self.modules:
                _install_module_hooks()
                _RECORDERS.append(self)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop recording and flush (or close) the output. Safe to call twice."""
        mode, self._mode = self._mode, None
        try:
            if self in _RECORDERS:
                _RECORDERS.remove(self)
            if mode is not None:
                mode.__exit__(None, None, None)
        finally:
            self._thread = None
            self._sink.close()

    def __enter__(self) -> "TensorTrace":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------ recording

    def _is_busy(self) -> bool:
        return getattr(self._busy, "active", False)

    def _record_call(self, name: str, args: tuple, kwargs: Dict[str, Any], params: Tuple[str, ...]) -> None:
        ts = time.time_ns()
        tensors = list(_tensor_args(args, kwargs, params))
        if tensors:
            self._emit("call", ts, tensors, name)

    def _record_return(self, name: str, out: Any) -> None:
        ts = time.time_ns()
        tensors = [("return" + suffix, t) for suffix, t in _flatten(out)]
        if tensors:
            self._emit("ret", ts, tensors, name, returned=True)

    def _emit(self, kind: str, ts: int, tensors: List[Tuple[str, torch.Tensor]], function: str,
              returned: bool = False) -> None:
        # Reading shapes and pointers must not reach any torch function mode (ours or an outer block's).
        self._busy.active = True
        try:
            frame = _user_frame(sys._getframe(1))
            location = f"{_shown_path(frame.f_code.co_filename)}:{frame.f_lineno}" if frame is not None else "?:0"
            local_names = _local_names(frame) if frame is not None and not returned else {}
            with torch._C.DisableTorchFunction():
                lines = [format_line(kind, ts, *_describe(t), local_names.get(id(t), param), function, location)
                         for param, t in tensors]
        finally:
            self._busy.active = False
        self._sink.write(lines)

    def _mine(self) -> bool:
        return self._mode is not None and threading.get_ident() == self._thread and not self._is_busy()



# ---------------------------------------------------------------------------------------------- module hooks

# Recorders that take module calls, through two process-wide hooks installed at the first recorder's start and kept
# (idle, they return at once). Inside torch.compile the hooks and the function mode return at once too, so Dynamo
# traces through them without a graph break. Both matter: Dynamo guards on the global hook dicts, so hooks added
# and removed at every recorded window, or hooks that break the graph, make it recompile until, past its recompile
# limit, the profiled model runs eagerly.
_RECORDERS: List["TensorTrace"] = []
_HOOKS: List[Any] = []


def _compiling() -> bool:
    return torch.compiler.is_compiling()


def _install_module_hooks() -> None:
    if not _HOOKS:
        hooks = torch.nn.modules.module
        _HOOKS.extend([hooks.register_module_forward_pre_hook(_module_pre_hook),
                       hooks.register_module_forward_hook(_module_hook)])


def _module_pre_hook(module: torch.nn.Module, args: tuple) -> None:
    if not _RECORDERS or _compiling():
        return
    for rec in list(_RECORDERS):
        if rec._mine():  # module hooks are process-wide: record only the thread that entered the block
            rec._record_call(_module_name(module), args, {}, _param_names(type(module).forward)[1:])


def _module_hook(module: torch.nn.Module, args: tuple, out: Any) -> None:
    if not _RECORDERS or _compiling():
        return
    for rec in list(_RECORDERS):
        if rec.returns and rec._mine():
            rec._record_return(_module_name(module), out)


# ---------------------------------------------------------------------------------------------- helpers

def _resolve(path: "os.PathLike[str] | str | None", worker: Optional[str], stamp: Optional[int]) -> Optional[str]:
    if path is None:
        return None
    text = os.fspath(path)
    if os.path.isdir(text) or text.endswith(("/", os.sep)) or _new_folder(text):
        return tensor_trace_path(text, worker, stamp)
    return text


def _new_folder(path: str) -> bool:
    """A path that does not exist yet and whose name has no suffix (`runs/my_run`) names a folder to create, as a
    logdir run folder does; `runs/x.tensor.trace` or `out.log` name the file."""
    return not os.path.exists(path) and "." not in os.path.basename(path)


_NAMES: Dict[Any, Optional[str]] = {}


def _function_name(func: Callable) -> Optional[str]:
    """Public dotted name of a torch function (`torch.matmul`, `Tensor.sum`, `torch.nn.functional.linear`), or
    None for calls that are not worth a record (property access, metadata methods)."""
    try:
        return _NAMES[func]
    except (KeyError, TypeError):
        pass
    name = getattr(func, "__name__", None) or type(func).__name__
    qual = getattr(func, "__qualname__", "") or ""
    module = getattr(func, "__module__", None) or ""
    if name in _METADATA or name.startswith("__get"):
        out = None
    elif qual.startswith(("TensorBase.", "Tensor.")) or (not module and "." in qual):
        out = "Tensor." + name
    else:
        out = f"{_PUBLIC_MODULES.get(module, module or 'torch')}.{name}"
    try:
        _NAMES[func] = out
    except TypeError:
        pass
    return out


def _shown_path(path: str) -> str:
    """Source files under the working directory are written relative to it: shorter lines, and a trace that does
    not carry the machine's directory layout."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def _module_name(module: torch.nn.Module) -> str:
    return f"{type(module).__name__}.forward"


_SIGNATURES: Dict[Any, Tuple[str, ...]] = {}


def _param_names(func: Callable) -> Tuple[str, ...]:
    """Positional parameter names of a torch function: from its Python signature, else from the signature
    torch.overrides documents for it (builtins have none of their own)."""
    try:
        return _SIGNATURES[func]
    except (KeyError, TypeError):
        pass
    import inspect

    names: Tuple[str, ...] = ()
    for candidate in (func, _overrides().get(func)):
        if candidate is None:
            continue
        try:
            params = inspect.signature(candidate).parameters.values()
        except (TypeError, ValueError):
            continue
        names = tuple(p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
        break
    try:
        _SIGNATURES[func] = names
    except TypeError:
        pass
    return names


_OVERRIDES: Optional[Dict[Any, Callable]] = None


def _overrides() -> Dict[Any, Callable]:
    global _OVERRIDES
    if _OVERRIDES is None:  # built once, lazily: about 5 ms
        _OVERRIDES = torch.overrides.get_testing_overrides()
    return _OVERRIDES


def _tensor_args(args: tuple, kwargs: Dict[str, Any], params: Tuple[str, ...]) -> Iterable[Tuple[str, torch.Tensor]]:
    for i, value in enumerate(args):
        base = params[i] if i < len(params) else f"arg{i}"
        for suffix, t in _flatten(value):
            yield base + suffix, t
    for key, value in kwargs.items():
        for suffix, t in _flatten(value):
            yield key + suffix, t


def _flatten(value: Any) -> Iterable[Tuple[str, torch.Tensor]]:
    """("", t) for a tensor; ("[j]", t) for tensors in a list or tuple (one level: torch.cat, tuple returns)."""
    if isinstance(value, torch.Tensor):
        yield "", value
    elif isinstance(value, (list, tuple)):
        for j, item in enumerate(value):
            if isinstance(item, torch.Tensor):
                yield f"[{j}]", item


def _describe(t: torch.Tensor) -> Tuple[Tuple[int, ...], int, int]:
    """(shape, bytes, data pointer); 0 bytes and pointer for tensors without plain storage (meta, nested, fake)."""
    try:
        shape = tuple(t.shape)
    except Exception:  # nested tensors have no single shape
        return (), 0, 0
    try:
        return shape, t.numel() * t.element_size(), t.data_ptr()
    except Exception:
        return shape, 0, 0


_USER_CODE: Dict[Any, bool] = {}


def _user_frame(frame):
    """The nearest frame whose code is outside torch and outside this module (the user's call site)."""
    while frame is not None:
        code = frame.f_code
        user = _USER_CODE.get(code)
        if user is None:
            path = os.path.abspath(code.co_filename)
            user = _USER_CODE[code] = not (path.startswith(_TORCH_DIR) or path == _THIS_FILE
                                           or code.co_filename.startswith("<frozen"))
        if user:
            return frame
        frame = frame.f_back
    return None


def _local_names(frame) -> Dict[int, str]:
    """id(tensor) -> the first local variable name bound to it in `frame`."""
    names: Dict[int, str] = {}
    for key, value in frame.f_locals.items():
        if isinstance(value, torch.Tensor) and id(value) not in names:
            names[id(value)] = key
    return names
