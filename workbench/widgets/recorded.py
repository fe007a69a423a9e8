"""Which recorded run the latency explorer shows for a configuration: matched on its fingerprint,
never on its name, and what it says when there is none; no widget.

A run of another model with the same pipeline name would show another model's latency, so a run
stands in only when ``workbench.fingerprint.recorded_match`` accepts it; host and version
differences are labels. On a device this machine lacks, the thread count is a label too, and the
model fingerprint is the configuration's on the CPU (names, shapes and dtypes: the device does not
change them). Only ``run.json`` is read; a run timed with ``sync="request"`` never stands in.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..config import PipelineConfig
from ..device import check_device
from ..errors import ConfigError, RunRecordError
from ..examples import factory
from ..examples.fingerprints import cached
from ..fingerprint import UNKNOWN, differences, fingerprint_of, model_fingerprint, recorded_match
from ..pipeline import resolve_pipeline
from ..record import META_FILE, read_meta
from .latency_support import cheap_fingerprint


@dataclass(frozen=True)
class Recorded:
    """One recorded profile run: its folder, fingerprint and where it ran."""

    folder: Path
    fingerprint: dict[str, Any]
    device_name: str | None
    created: str


@dataclass(frozen=True)
class Match:
    """A recorded run accepted for a configuration, and what differs (labels for the status line)."""

    run: Recorded
    labels: tuple[str, ...]


class RecordedRuns:
    """Recorded profile runs under ``paths`` (run folders or folders of them; the last matching run
    wins), and ``skipped``: a note per run folder whose ``run.json`` could not be read."""

    def __init__(self, paths: Any = None):
        self.runs: list[Recorded] = []
        self.skipped: list[str] = []
        for folder in _run_folders(paths):
            try:
                meta = read_meta(folder / META_FILE)
            except RunRecordError as exc:
                self.skipped.append(str(exc))
                continue
            if meta.kind != "profile" or meta.sync_policy != "stage":
                continue
            created = str(meta.created or "")[:10]
            self.runs.append(Recorded(folder, fingerprint_of(meta), meta.env.device_name, created))

    @property
    def note(self) -> str:
        """A line for the page ("" when nothing was skipped)."""
        if not self.skipped:
            return ""
        return f"skipped {len(self.skipped)} unreadable recorded run(s): " + "; ".join(self.skipped)

    def cards(self, pipeline: str | None = None) -> dict[str, list[str]]:
        """Device family -> the distinct device names of ``pipeline``'s runs (else every run's)."""
        runs = [
            r
            for r in self.runs
            if pipeline is not None and r.fingerprint.get("pipeline") == pipeline
        ]
        found: dict[str, list[str]] = {}
        for run in runs or self.runs:
            family = str(run.fingerprint.get("device") or "cpu").split(":")[0]
            names = found.setdefault(family, [])
            if (run.device_name or family) not in names:
                names.append(run.device_name or family)
        return found

    def batch_sizes(self, pipeline: str | None = None) -> set[int]:
        """The batch sizes recorded for ``pipeline`` (every pipeline's when None)."""
        return {
            int(r.fingerprint["batch_size"])
            for r in self.runs
            if isinstance(r.fingerprint.get("batch_size"), int)
            and (pipeline is None or r.fingerprint.get("pipeline") == pipeline)
        }

    def find(self, wanted: dict[str, Any], *, measurable: bool = True) -> Match | None:
        """The recorded run that stands in for the ``wanted`` fingerprint, or None (``measurable``:
        False when this machine lacks the device, whose thread count is then a label)."""
        found = None
        for run in self.runs:
            want = wanted
            if not measurable and run.fingerprint.get("threads") != wanted.get("threads"):
                want = wanted | {"threads": run.fingerprint.get("threads")}
            ok, _ = recorded_match(want, _comparable(run.fingerprint))
            if ok:
                labels = difference_labels(want, _comparable(run.fingerprint))
                if want is not wanted:
                    threads = run.fingerprint.get("threads")
                    labels.insert(
                        0, f"recorded with {threads} CPU threads (cannot be measured here)"
                    )
                found = Match(run, tuple(labels))
        return found

    def needs_model(self, wanted: dict[str, Any], *, measurable: bool = True) -> bool:
        """Whether a run matching the cheap fields recorded a model fingerprint (then build to compare
        it, or look a shipped example's up); ``measurable`` as in :meth:`find`."""
        cheap = wanted | {"model": None}
        for run in self.runs:
            if run.fingerprint.get("model") in (None, "unknown"):
                continue
            want = cheap if measurable else cheap | {"threads": run.fingerprint.get("threads")}
            ok, _ = recorded_match(want, _comparable(run.fingerprint) | {"model": None})
            if ok:
                return True
        return False


def difference_labels(wanted: dict[str, Any], recorded: dict[str, Any]) -> list[str]:
    """What an accepted recorded run differs in: ``recorded with torch '2.11', here '2.13'``, and one
    ``not recorded: factory, workbench`` for the fields the run did not record."""
    labels, missing = [], []
    for name, here, there in differences(wanted, recorded):
        if there is None or there == UNKNOWN:
            missing.append(name)
        else:
            labels.append(f"recorded with {name} {there!r}, here {here!r}")
    return labels + ([f"not recorded: {', '.join(missing)}"] if missing else [])


def _comparable(fp: dict[str, Any]) -> dict[str, Any]:
    """A recorded fingerprint with its device reduced to the family the toggle offers (``cuda:0`` -> ``cuda``)."""
    return fp | {"device": str(fp.get("device") or "cpu").split(":")[0]}


def _run_folders(paths: Any) -> list[Path]:
    roots = map(Path, [paths] if isinstance(paths, (str, Path)) else paths or [])
    found = [[root] if (root / META_FILE).is_file() else sorted(root.glob("*")) for root in roots]
    return [f for group in found for f in group if (f / META_FILE).is_file()]  # run folders only


class RunLookup:
    """The recorded runs under ``runs`` and the fingerprints of the configurations looked up so far."""

    def __init__(self, runs: Any = None):
        self.recorded = RecordedRuns(runs)
        self._wanted: dict[tuple, dict] = {}

    def find(
        self, target: Any, config: PipelineConfig, *, measurable: bool, build: bool = True
    ) -> Match | None:
        """The recorded run matching this configuration's fingerprint, or None (``build=False``: None
        also where telling would need the pipeline built)."""
        if not self.recorded.runs:
            return None
        wanted = self.fingerprint(target, config, measurable=measurable, build=build)
        return None if wanted is None else self.recorded.find(wanted, measurable=measurable)

    def fingerprint(
        self, target: Any, config: PipelineConfig, build: bool = True, *, measurable: bool = True
    ) -> dict[str, Any] | None:
        """What a live run of this configuration would record as its fingerprint; the pipeline is
        built only for a model the shipped ``examples.fingerprints`` lack (``build=False``: None)."""
        cache_key = (id(target), config.device, config.batch_size, config.precision, config.threads)
        if cache_key in self._wanted:
            return self._wanted[cache_key]
        wanted = cheap_fingerprint(target, config)
        if not isinstance(target, str) or self.recorded.needs_model(wanted, measurable=measurable):
            built = config if measurable else replace(config, device="cpu")
            known = cached(target, built)  # the shipped examples' fingerprints
            if known is None and not build:
                return None
            if known is None:
                pipe = resolve_pipeline(
                    factory(target) if isinstance(target, str) else target, built
                )
                models = list(getattr(pipe, "models", []) or [])
                known = {"pipeline": pipe.name, "model": model_fingerprint(models)}
            wanted |= known
        self._wanted[cache_key] = wanted
        return wanted

    def recorded_threads(self, target: Any, config: PipelineConfig) -> int | None:
        """The thread count of the recorded run of ``config`` at any thread count, else None."""
        if not self.recorded.runs:
            return None
        wanted = self.fingerprint(target, config, measurable=False)
        match = self.recorded.find(wanted, measurable=False)
        threads = match.run.fingerprint.get("threads") if match is not None else None
        return threads if isinstance(threads, int) and threads >= 1 else None

    def refuse_unmeasurable(self, family: str, config: PipelineConfig) -> None:
        """No recorded run and no such device here: the device check's message, plus what was recorded."""
        same = [
            r.folder.name
            for r in self.recorded.runs
            if str(r.fingerprint.get("device") or "").split(":")[0] == family
        ]
        try:
            check_device(config.device)
        except ConfigError as exc:
            if not same:
                raise
            raise ConfigError(f"{exc}; recorded {family} runs: {', '.join(same)}") from None

    def other_threads_hint(self, target: Any, config: PipelineConfig) -> str:
        """When a recorded run differs from this configuration only in threads, say which threads to pick."""
        wanted = self.fingerprint(target, config)
        match = self.recorded.find(wanted, measurable=False)
        if match is None or match.run.fingerprint.get("threads") == wanted["threads"]:
            return ""
        return (
            f"; a recorded run ({match.run.folder.name}) has {match.run.fingerprint.get('threads')} threads: "
            "pick that to see it"
        )

    def device_options(self, here: list[str], pipeline: str | None = None) -> list:
        """This machine's devices, plus those only recorded runs have, labelled with their cards:
        ``("cuda (recorded on NVIDIA H100 80GB HBM3)", "cuda")`` (``pipeline``'s runs, else all)."""
        cards = self.recorded.cards(pipeline)
        extra = {d: names for d, names in cards.items() if d not in here}
        if not extra:
            return here
        return [(d, d) for d in here] + [
            (f"{d} (recorded on {', '.join(names)})", d) for d, names in extra.items()
        ]
