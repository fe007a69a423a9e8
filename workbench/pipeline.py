"""Pipelines: an ordered list of named stages and a source of input items (:class:`Pipeline`).

Users write a factory ``build(config) -> Pipeline`` (README "Profile your own pipeline"). Nothing
here measures; :func:`first_request_checked` checks a run's first request (a stage returning a
generator, an option nobody read such as ``slowdwn=0.3``).
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import importlib.util
import itertools
import sys
import sysconfig
import traceback
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .config import PipelineConfig
from .device import check_device
from .errors import ConfigError, PipelineError, WorkbenchError, encodable
from .precision import check_precision, collect_quantization
from .roles import ROLES, stage_role


@dataclass(frozen=True)
class Stage:
    """One named step of a pipeline; ``fn`` takes the previous stage's output."""

    name: str
    fn: Callable[[Any], Any]
    role: str | None = None
    describe: Callable[[Any], dict[str, float]] | None = None
    stream: bool = False  # fn returns an iterable of units (tokens, chunks): timing.UnitClock

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name.startswith("_"):
            raise ConfigError(
                f"stage name must be a non-empty string not starting with '_', got {self.name!r}"
            )
        if not callable(self.fn):
            raise ConfigError(
                f"stage {self.name!r}: fn must be callable, got {type(self.fn).__name__}"
            )
        if self.role is not None and self.role not in ROLES:
            raise ConfigError(
                f"stage {self.name!r}: role must be one of {', '.join(ROLES)}, got {self.role!r}"
            )
        if self.describe is not None and not callable(self.describe):
            raise ConfigError(
                f"stage {self.name!r}: describe must be callable (output -> {{name: number}}), "
                f"got {type(self.describe).__name__}"
            )


@dataclass
class Pipeline:
    """An ordered list of stages plus the items that feed them.

    items: a callable returning a fresh iterator of input items (one user request payload each;
        ``batch_size`` of them make one pipeline call), or an iterable, cycled.
    config: the configuration it was built from (set by the factory or runner).
    models: the ``torch.nn.Module`` s the stages run, declared so that a run can fingerprint them
        (``Pipeline(models=[m])`` or ``pipe.declare_model(m)``); else the model is ``unknown``.
    agree: ``fn(output_a, output_b) -> share`` in [0, 1] of two configurations' final outputs, for
        ``compare`` and ``audit --try`` (default: argmax agreement, ``analysis.outputs``).
    steps: ``fn(max_num_seqs) -> step API`` of a generative pipeline (``GenerateSteps`` of
        :mod:`workbench.examples._causal_model`), which ``load`` batches continuously.
    """

    name: str
    stages: list[Stage] = field(default_factory=list)
    items: Callable[[], Iterator[Any]] | Iterable[Any] | None = None
    config: PipelineConfig = field(default_factory=PipelineConfig)
    description: str = ""
    models: list[Any] = field(default_factory=list)
    quantization: list[dict] = field(default_factory=list, repr=False)  # set by build_pipeline
    agree: Callable[[Any, Any], float] | None = None
    steps: Callable[[int], Any] | None = None

    def declare_model(self, model: Any) -> Any:
        """Declare a model the stages use (for the run's fingerprint); returns it unchanged."""
        if not any(m is model for m in self.models):
            self.models.append(model)
        return model

    def stage(
        self,
        fn_or_name: Callable[[Any], Any] | str | None = None,
        *,
        role: str | None = None,
        describe: Callable[[Any], dict[str, float]] | None = None,
        stream: bool = False,
    ):
        """Decorator appending a stage: ``@pipe.stage``, ``@pipe.stage("name")``, ``@pipe.stage(role="io")``.

        role: what the stage does, for the audit (:mod:`workbench.roles`).
        describe: ``output -> {attribute: number}`` (payload bytes, sequence length...), called
            after the request outside every timed region, so a run says what the stage's time tracks.
        stream: the stage yields its answer a unit (token, chunk) at a time; each unit is timed
            (:mod:`workbench.timing`) and the next stage gets the whole answer as a list.
        """
        name = None if callable(fn_or_name) else fn_or_name

        def decorate(fn: Callable[[Any], Any]):
            self.add(name or fn.__name__, fn, role=role, describe=describe, stream=stream)
            return fn

        return decorate(fn_or_name) if callable(fn_or_name) else decorate

    def add(
        self,
        name: str,
        fn: Callable[[Any], Any],
        *,
        role: str | None = None,
        describe: Callable[[Any], dict[str, float]] | None = None,
        stream: bool = False,
    ) -> "Pipeline":
        if name in self.stage_names:
            raise ConfigError(f"pipeline {self.name!r} already has a stage named {name!r}")
        if stream and any(s.stream for s in self.stages):
            raise ConfigError(
                f"pipeline {self.name!r}: stage {name!r} streams, and so does an earlier stage; "
                "one stage per pipeline may stream (the one that yields the answer's units)"
            )
        self.stages.append(Stage(name, fn, role, describe, bool(stream)))
        return self

    @property
    def stage_names(self) -> list[str]:
        return [s.name for s in self.stages]

    @property
    def stage_roles(self) -> dict[str, str]:
        """Stage -> role, declared or from the standard names (stages with neither left out)."""
        declared = {s.name: s.role for s in self.stages if s.role}
        return {s.name: r for s in self.stages if (r := stage_role(s.name, declared))}

    def item_iterator(self) -> Iterator[Any]:
        """A fresh iterator over input items; raises if the pipeline has none."""
        if self.items is None:
            raise PipelineError(f"pipeline {self.name!r} has no item source (set items=...)")
        if callable(self.items):
            return iter(self.items())
        return itertools.cycle(self.items)

    def __call__(self, batch: Any) -> Any:
        """Run all stages on one batch, untimed (for checks and notebooks)."""
        out = batch
        for s in self.stages:
            out = list(s.fn(out)) if s.stream else s.fn(out)
        return out

    def validate(self) -> "Pipeline":
        if not self.stages:
            raise PipelineError(f"pipeline {self.name!r} has no stages")
        for what, name in [
            ("pipeline name", self.name),
            *(("stage name", s) for s in self.stage_names),
        ]:
            if not isinstance(name, str) or encodable(name) != name:
                raise PipelineError(
                    f"pipeline {self.name!r}: {what} {name!r} is not text a run can store (UTF-8 "
                    "without lone surrogates); name it with plain text"
                )
        return self


Factory = Callable[[PipelineConfig], Pipeline]


def exception_where(exc: BaseException) -> str | None:
    """``file:line in function`` of the innermost frame of user code, else outside the workbench."""
    frames = [(frame.f_code, line) for frame, line in traceback.walk_tb(exc.__traceback__)]
    outside = [
        (code, line) for code, line in frames if not _is_under(code.co_filename, _WORKBENCH_DIR)
    ]
    user = [(code, line) for code, line in outside if not _is_library(code.co_filename)]
    chosen = (user or outside or [None])[-1]
    if chosen is None:
        return None
    code, line = chosen
    return f"{code.co_filename}:{line} in {code.co_name}"


_WORKBENCH_DIR = str(Path(__file__).resolve().parent)


_LIBRARY_DIRS = {
    str(Path(d).resolve())
    for k in ("stdlib", "platstdlib", "purelib", "platlib")
    if (d := sysconfig.get_paths().get(k))
}


def _is_under(filename: str, folder: str) -> bool:
    try:
        path = str(Path(filename).resolve())
    except (OSError, ValueError):
        return False
    return path == folder or path.startswith(folder + "/")


def _is_library(filename: str) -> bool:
    """Standard library, site-packages, or ``<frozen ...>``."""
    if "site-packages" in filename or "dist-packages" in filename or filename.startswith("<frozen"):
        return True
    return any(_is_under(filename, d) for d in _LIBRARY_DIRS)


def load_factory(spec: str) -> Factory:
    """Load ``module:function`` or ``path/to/file.py:function`` (default function ``build``)."""
    target, _, attr = spec.rpartition(":") if ":" in spec else (spec, "", "build")
    attr = attr or "build"
    if not target:
        raise PipelineError(f"--pipeline {spec!r}: expected MODULE:FUNCTION or FILE.py:FUNCTION")
    module = _import_target(spec, target)
    factory = getattr(module, attr, None)
    if factory is None:
        raise PipelineError(f"--pipeline {spec!r}: {target!r} has no attribute {attr!r}")
    if not callable(factory):
        raise PipelineError(f"--pipeline {spec!r}: {attr!r} is not callable")
    return factory


def _import_target(spec: str, target: str):
    path = Path(target)
    module = None  # a module name: imported in the try below
    if target.endswith(".py") or path.is_file():
        if not path.is_file():
            raise PipelineError(f"--pipeline {spec!r}: file {target!r} does not exist")
        name = f"workbench_user_{abs(hash(str(path.resolve())))}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        if module_spec is None or module_spec.loader is None:
            raise PipelineError(
                f"--pipeline {spec!r}: {target!r} is not a Python file (expected FILE.py:FUNCTION)"
            )
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
    try:
        if module is None:
            return importlib.import_module(target)
        module_spec.loader.exec_module(module)
        return module
    except Exception as exc:
        if module is None and isinstance(exc, ModuleNotFoundError):
            raise PipelineError(
                f"--pipeline {spec!r}: no module named {exc.name!r} (is it on PYTHONPATH?)"
            ) from exc
        raise PipelineError(
            f"--pipeline {spec!r}: importing {target!r} failed: {type(exc).__name__}: {exc}"
        ) from exc


RUNNER_FIELDS = ("batch_size", "threads")  # the runner applies them: a built Pipeline honours them


def resolve_pipeline(target: Pipeline | Factory, config: PipelineConfig | None) -> Pipeline:
    """A built pipeline from a Pipeline or a factory. A built Pipeline takes a config's runner
    fields; a config differing in what was fixed at build (device, precision, options) is refused."""
    if isinstance(target, Pipeline):
        return _with_config(target.validate(), config)
    config = config or PipelineConfig()
    check_precision(config)  # an impossible combination is named even where the device is missing
    check_device(config.device)
    if not callable(target):
        raise PipelineError(
            f"expected a Pipeline, a factory or an example name, got {type(target).__name__}"
        )
    return build_pipeline(target, config)


def _with_config(pipe: Pipeline, config: PipelineConfig | None) -> Pipeline:
    """A copy of ``pipe`` under ``config``'s runner fields, or a ConfigError."""
    if config is None:
        return pipe
    for name in ("device", "precision", "options"):
        built, wanted = getattr(pipe.config, name), getattr(config, name)
        if built != wanted:
            raise ConfigError(
                f"profile(pipeline, config): pipeline {pipe.name!r} was built with {name}={built!r} but the config "
                f"asks for {name}={wanted!r}; a built Pipeline cannot change {name}: pass its factory "
                f"(profile(build, config)) or build the pipeline with Pipeline(..., config=config)"
            )
    return replace(
        pipe, config=pipe.config.replace(**{k: getattr(config, k) for k in RUNNER_FIELDS})
    )


def build_pipeline(factory: Factory, config: PipelineConfig) -> Pipeline:
    """Call a factory and check what it returned (its exceptions as ``PipelineError``)."""
    options = ReadOptions(config.options)
    config = config.replace(options=options)
    try:
        with collect_quantization() as reports, options.watching():
            pipe = factory(config)
    except WorkbenchError:
        raise
    except Exception as exc:
        name = getattr(factory, "__qualname__", repr(factory))
        raise PipelineError(f"pipeline factory {name} failed: {type(exc).__name__}: {exc}") from exc
    if not isinstance(pipe, Pipeline):
        raise PipelineError(
            f"pipeline factory returned {type(pipe).__name__}, expected workbench.Pipeline"
        )
    pipe.config = config
    pipe.quantization = list(reports)
    return pipe.validate()


class ReadOptions(dict):
    """The options dict a factory receives: while :meth:`watching` (the factory call, the first
    request) it remembers the keys read; iterating over it counts as reading every key."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.read: set[str] = set()
        self.tracking = False

    @contextlib.contextmanager
    def watching(self):
        self.tracking = True
        try:
            yield self
        finally:
            self.tracking = False

    def __reduce__(self):  # pickles (and deep-copies) as the plain dict it stands for
        return (dict, (dict(dict.items(self)),))


def _reading(name: str, every: bool) -> Callable:
    """``dict.<name>`` that, while watching, marks its key read (``every``: all keys)."""
    method = getattr(dict, name)

    def read(self, *args):
        if self.tracking:
            self.read.update(dict.keys(self) if every else args[:1])
        return method(self, *args)

    read.__name__ = name
    return read


for _name in ("__getitem__", "get", "__contains__", "pop", "setdefault"):
    setattr(ReadOptions, _name, _reading(_name, every=False))
for _name in ("__iter__", "keys", "items", "values", "copy"):  # dict.copy: a plain dict
    setattr(ReadOptions, _name, _reading(_name, every=True))


# options the workbench itself reads for every pipeline (precision.prepare_model, the examples' data path)
WORKBENCH_OPTIONS = frozenset({"compile", "channels_last"})


def unread_options(pipe: Pipeline) -> list[str]:
    """The options nobody read so far (empty when they are not tracked)."""
    options = pipe.config.options
    if not isinstance(options, ReadOptions):
        return []
    return sorted(
        k for k in dict.keys(options) if k not in options.read and k not in WORKBENCH_OPTIONS
    )


def check_options_read(pipe: Pipeline) -> None:
    """Refuse an option the factory and the stages never read: a typo, usually."""
    unread = unread_options(pipe)
    if not unread:
        return
    asked = sorted(pipe.config.options.read - set(unread))  # read, given or not (get("slow", 1))
    hints = []
    for key in unread:
        close = difflib.get_close_matches(key, asked, n=1)
        hints.append(f"{key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    known = f"; it reads: {', '.join(asked)}" if asked else ""
    raise ConfigError(
        f"pipeline {pipe.name!r}: option {', '.join(hints)} is never read by its factory or "
        f"stages{known}"
    )


def lazy_output(value: Any) -> str | None:
    """``a generator``/``an iterator (type)`` when ``value`` computes lazily, else None."""
    if isinstance(value, types.GeneratorType):
        return "a generator"
    if isinstance(value, Iterator):
        return f"an iterator ({type(value).__name__})"
    return None


def first_request_checked(run_one: Callable, pipe: Pipeline, *, options: bool = True) -> Callable:
    """``run_one`` whose first call keeps every stage's output (on the host) to check them, and
    checks the options read; later calls run ``run_one`` as it is."""
    keep_all = {} if pipe.config.is_cuda else {"keep": frozenset(range(len(pipe.stages)))}
    state = {"first": True}

    def run(batch, **kwargs):  # kwargs: the guard's starts/ends lists
        if not state["first"]:
            return run_one(batch, **kwargs)
        state["first"] = False
        given = pipe.config.options
        with given.watching() if isinstance(given, ReadOptions) else contextlib.nullcontext():
            t = run_one(batch, **keep_all, **kwargs)
        for i in sorted(t.kept or {}):  # a lazy output's work would be timed in the next stage
            if (what := lazy_output(t.kept[i])) is not None:
                raise PipelineError(
                    f"stage {pipe.stage_names[i]!r} returned {what}: its work would run, and be "
                    f"timed, in the stage that consumes it; return a list (e.g. list(...)) instead, "
                    f"or declare @pipe.stage(stream=True) to time each unit it yields (tokens, chunks)"
                )
        if options:
            check_options_read(pipe)
        t.kept = None
        return t

    return run
