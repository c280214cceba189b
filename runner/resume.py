"""The resume rule: a rerun of a run id resumes the run only where its cells are timed as the run's were.

Before its first cell, and again when a store out of reach at start-up first answers (before anything is uploaded),
the machine this process measures on is checked against the manifests the run's cells were measured under
(`measured_under`: its own part's in the spool and in the store where they hold cells, and every other shard's in the
store from the moment it is there; two shards that start together can still miss each other's: docs/results.md, "Two
shards starting together"). A difference in a fact that decides which kernels run or what they compute
(`refuses_resume`: a material fact of runner.compare but those in runner.record.RESUMABLE) refuses the resume
(OtherMachine: exit 4, said by `refusal`): one run never holds cells timed under two settings. A difference in a
RESUMABLE fact (the GPU driver) goes on, said in one line, and the run's manifest keeps the earlier values
(earlier_facts, runner.record.merged_earlier: `Resume`). A refusal found after cells were measured into the spool
moves them to a run id of their own that nothing holds yet (`set_aside`): nothing measured is lost, and none is mixed
into the refused run when it resumes from that spool; a move a kill stopped is finished by the next run of either id
(`finish_moves`).
"""

from __future__ import annotations

import itertools
import sys
import threading
from pathlib import Path

from runner import counted, rerun_flags
from runner.record import RESUMABLE, Machine, Manifest, merged_earlier, resumable_facts
from runner.results import Part, moving_name
from runner.spool import PULL_TIMEOUT_S, Refused, Spool
from runner.store import LocalStore, Store, StoreError


class OtherMachine(Refused):
    """The run's cells were measured on a machine that differs from this process's in facts that refuse a resume
    (refuses_resume; the message: those differences as one line). `late`: found when the store first answered, after
    cells were measured into the spool, rather than before the first cell."""

    def __init__(self, changes: str, late: bool = False):
        super().__init__(changes)
        self.late = late


def refuses_resume(fact: str) -> bool:
    """Whether a difference of the fact between a run's manifest and this machine refuses resuming the run here: a
    material fact of the machine but those a resume goes on across (RESUMABLE)."""
    from runner.compare import material  # pandas: loaded by a resume alone

    return material(fact) and fact not in RESUMABLE


def machine_changes(run: Manifest, machine: Machine):
    """How `machine` differs from the one `run` was measured on, in the facts that change what a time means (a frame
    of fact, a: the run's, b: the machine's): what resuming the run there would mix into it. The machine alone is
    compared: the GPU, its driver and power limit, the device count, library versions, XLA_FLAGS and kernel env
    (run.same_run owns the spec and power policy; attnbench's own version may change, as same_run allows a resume
    after an upgrade)."""
    from runner.compare import differences, material_of

    return material_of(differences(run, run.model_copy(update={"machine": machine})))


def resumed_across(runs: list[Manifest], machine: Machine) -> tuple[str, dict[str, list[str]]]:
    """Resuming a run whose cells were measured under `runs` (its parts' manifests) on `machine`: the differences that
    refuse it, as one line ('' where none), and the earlier values of the facts it goes on across (RESUMABLE), with
    those the manifests kept of processes before them, where they differ from the machine's."""
    from runner.compare import said

    refused, earlier = [], []
    for run in runs:
        found = machine_changes(run, machine)
        refuses = found["fact"].map(refuses_resume).astype(bool)
        refused += [said(found[refuses])] if refuses.any() else []
        earlier += [{row.fact: [row.a] for row in found[~refuses].itertuples()}, run.earlier_facts or {}]
    return "; ".join(dict.fromkeys(refused)), merged_earlier(earlier, resumable_facts(machine))


def measured_under(spool: Spool, parts: list[Part], late: bool) -> list[Manifest]:
    """The manifests a resume's cells would join: the spool's where it holds cells (at start-up: by a late check it
    is this process's own), and each of the store's `parts` that holds cells or is another shard's (a shard that holds
    none yet is measuring, or about to)."""
    spooled = None if late else spool.manifest()
    held = [spooled] if spooled and spool.keys() else []
    return held + [p.manifest for p in parts if p.manifest and (p.cells or p.shard != spool.shard)]


class Resume:
    """The check of this process's machine against the manifests the run's cells were measured under, at start-up
    (runner.spool.Uploader.measuring_on) and when a store out of reach then first answers (its pull): a difference in
    a fact that refuses a resume raises OtherMachine; one it goes on across (the driver) is said in a line and kept
    in the manifest (earlier)."""

    def __init__(self, spool: Spool, machine: Machine):
        self.spool, self.machine = spool, machine
        self.earlier: dict[str, list[str]] = {}
        self.manifest_written = False  # this process's manifest is the spool's: one found later is added to it
        self._lock = threading.Lock()

    def __call__(self, parts: list[Part], late: bool) -> None:
        manifests = measured_under(self.spool, parts, late)
        if not manifests:
            return
        refused, earlier = resumed_across(manifests, self.machine)
        if refused:
            raise OtherMachine(refused, late)
        with self._lock:
            merged = merged_earlier([self.earlier, earlier], resumable_facts(self.machine))
            if merged == self.earlier:
                return
            said = "; ".join(f"{fact} {', '.join(values)}" for fact, values in merged.items())
            print(f"warning: run {self.spool.run_id}: its earlier cells were measured under {said}, not this "
                  "process's; resuming, and its manifest keeps that (earlier_facts)", file=sys.stderr, flush=True)
            self.earlier = merged
            if self.manifest_written and (manifest := self.spool.manifest()):
                self.spool.write_manifest(manifest.model_copy(update={"earlier_facts": merged}))


def set_aside(spool: Spool, base: str, store: Store) -> Spool:
    """Move a closed spool's part (its manifest and cells, each record's run id with them) to a run id of its own in
    the same spool, `base` or `base-2`, `base-3` … where the spool or `store` holds `base` (ids are to the second), so
    a rerun under it finishes and uploads it; the in-flight marker stays. The part the cells are in now, closed: the
    new id's, or `spool` itself where it holds no cell (nothing moved)."""
    if not spool.keys():
        return spool
    run_id = _claimed(spool, base, store)
    return _moved(spool, run_id)


def _claimed(spool: Spool, base: str, store: Store) -> str:
    """A run id no spool folder or store run holds, its folder made here (a second process gets another) with the
    marker naming the part whose cells move to it (moving_from), before any of them moves."""
    for run_id in (base if n == 1 else f"{base}-{n}" for n in itertools.count(1)):
        if not _stored(store, run_id) and _made(spool.local.root / run_id):
            spool.local.put(moving_from(run_id, spool.shard), spool.run_id.encode())
            return run_id


def _stored(store: Store, run_id: str) -> bool:
    try:
        return bool(store.with_timeout(PULL_TIMEOUT_S).names(f"{run_id}/"))
    except StoreError:  # it answered a moment ago; an id to the second that it holds is not worth a wait
        return False


def _made(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True)
    except FileExistsError:
        return False
    return True


def moving_from(run_id: str, shard: str | None) -> str:
    """The marker, in the folder of the run id a part's cells move to, that names the run they move from: there from
    before the first write of the move until after its last, so a rerun of either id finishes a move a kill stopped."""
    return f"{run_id}/{moving_name(shard)}"


def _moved(spool: Spool, run_id: str) -> Spool:
    """The move itself, marker to marker (moving_from), each step safe to repeat where a kill stopped it
    (finish_moves): the manifest, the cells, the old part's files removed, then the marker."""
    records, manifest = spool.records(), spool.manifest()
    with Spool(spool.local, run_id, spool.shard) as aside:
        if manifest:
            aside.write_manifest(manifest.model_copy(update={"run_id": run_id}))
        aside.add_quietly([record.model_copy(update={"run_id": run_id}) for record in records])
    for name in (spool.cells_name, spool.manifest_name, moving_from(run_id, spool.shard)):
        spool.local.delete(name)
    return aside


def finish_moves(local: LocalStore, run_id: str, shard: str | None) -> None:
    """Finish each move of a part's cells (set_aside) from or to `run_id` that a killed process left half done, before
    the part is opened: so no cell is in two runs of the spool, and none without its manifest."""
    for path in local.root.glob(f"*/{moving_name(shard)}"):
        source, target = path.read_text(), path.parent.name
        if run_id in (source, target):
            with Spool(local, source, shard) as spool:
                _moved(spool, target)


def aside_said(aside: Spool) -> str:
    """Where `set_aside` moved the cells, as a clause."""
    moved = len(aside.keys())
    held = "the 1 cell it held was" if moved == 1 else f"the {counted(moved, 'cell')} it held were"
    return f"{held} moved to run {aside.run_id} in the spool {aside.dir}"


def aside_rerun(aside: Spool, spool_root: Path) -> str:
    """The rerun of `run` that finishes the run `set_aside` made and uploads it, as a clause: the flags it adds to the
    refused command, every one it needs where the run id, shard and spool came from the environment."""
    part = f"shard {aside.shard} of that run (its only one)" if aside.shard else "that run"
    flags = rerun_flags(aside.run_id, aside.shard, Path(spool_root))
    return f"rerun the same command with {flags} to finish {part} and upload it"


def refusal(run_id: str, changes: str) -> str:
    """Why resuming the run `run_id` on this machine is refused (exit 4), as a clause: `changes`, its material
    differences from the machine the run's cells were measured on (the command line says what to run next)."""
    return (f"run id {run_id}: resuming it here would mix cells timed under two settings (the run's → this "
            f"process's: {changes})")
