"""Render attnbench's Kubernetes manifests for one run: `make render` / `make submit` / `make deploy` call this.

Writes OUT/<run-id>/job.yaml (the spec ConfigMap and the runner Job) and OUT/<run-id>/platform.yaml (namespace,
service accounts, network policies, settings and the dashboard), built by `kubectl kustomize` from a throwaway
kustomization that layers the run's choices over k8s/overlays/<gpu>. With --nightly, also OUT/<run-id>/nightly.yaml:
the spec ConfigMap and a CronJob (k8s/components/nightly) that runs the spec every night and compares it with the run
before (`make nightly`).
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

import yaml

K8S = Path(__file__).resolve().parent
JOB_MAX = 100_000  # Kubernetes' bound on an Indexed Job's completions and parallelism (runner.shard.MAX_SHARDS too)
RUN_ID_MAX = 50  # Job names label every pod and name its hostname (<job>-<index>): leave room under 63
CRONJOB_MAX = 52  # a CronJob's Jobs are named <cronjob>-<minutes since the epoch>, which must stay within 63
SCHEDULE = "0 3 * * *"
# What GKE's ManagedCertificate CRD accepts in spec.domains: a lowercase DNS name, no wildcard, at most 63 characters.
DOMAIN = re.compile(r"(([a-z0-9]+|[a-z0-9][-a-z0-9]*[a-z0-9])\.)+[a-z][-a-z0-9]*[a-z0-9]")
DOMAIN_MAX = 63
# The nightly's second init container, after the run and before compare: `attnbench recheck` measures again the cells
# compare would call slower, on the run's GPU, into RUN-recheck, which compare then takes into account; its --report
# writes the night's report (compare's container writes none: on a confirmed regression recheck fails the Job first).
RECHECK_ARGS = ["recheck", "$(ATTNBENCH_RUN_ID)", "--against", "previous", "--out", "$(ATTNBENCH_RESULTS)",
                "--report", "$(ATTNBENCH_RESULTS)/$(ATTNBENCH_RUN_ID)/report"]


def run_id_for(spec_name: str, now: datetime) -> str:
    """A DNS-1123 Job name from the spec's name and the UTC time: the run id that every retry shares."""
    stem = re.sub(r"[^a-z0-9-]+", "-", spec_name.lower()).strip("-") or "run"
    stamp = now.strftime("%Y%m%d-%H%M%S")
    return f"{stem[: RUN_ID_MAX - len(stamp) - 1].rstrip('-')}-{stamp}"


def nightly_name(spec_name: str, gpu: str) -> str:
    """The CronJob's name: nightly-SPEC-GPU, so that each spec and GPU has one, and applying it again updates it."""
    stem = re.sub(r"[^a-z0-9-]+", "-", f"{spec_name}-{gpu}".lower()).strip("-") or "run"
    return f"nightly-{stem}"[:CRONJOB_MAX].rstrip("-")


def _image(name: str, ref: str) -> dict:
    """A kustomize image entry; REPO@sha256:D and REPO:TAG@sha256:D pin the digest (the tag is then only a label)."""
    if "@" in ref:
        repo, digest = ref.split("@", 1)
        return {"name": name, "newName": untagged(repo), "digest": digest}
    repo, _, tag = ref.rpartition(":")
    if not repo or "/" in tag:
        raise SystemExit(f"render: image {ref!r} needs a tag or a digest (REPO:TAG or REPO@sha256:...)")
    return {"name": name, "newName": repo, "newTag": tag}


def untagged(repo: str) -> str:
    """REPO:TAG -> REPO (a registry's :port, followed by a path, is not a tag)."""
    head, _, tag = repo.rpartition(":")
    return head if head and "/" not in tag else repo


def pull_policy(image: str) -> str:
    """A digest names one image for good: a node pulls it once (IfNotPresent); a tag may move, so every pod asks."""
    return "IfNotPresent" if "@" in image else "Always"


def compile_cache(results: str) -> str:
    """The compilation cache beside the results: gs://bucket/prefix -> gs://bucket/prefix-jax-cache, shared by every
    shard and every later run (a local results folder keeps each pod's own default cache)."""
    return f"{results.rstrip('/')}-jax-cache" if results.startswith("gs://") else "off"


def _job_patches(run_id: str, shards: int, results: str, image: str) -> tuple[str, str]:
    """A strategic-merge patch that sizes the Job and points it at the results URI, and a JSON patch that renames
    it to the run id."""
    resize = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "attnbench-run"},
        "spec": {
            "completions": shards,
            "parallelism": shards,
            "template": {"spec": {"containers": [
                {"name": "attnbench", "imagePullPolicy": pull_policy(image),
                 "env": [{"name": "JOB_COMPLETIONS", "value": str(shards)},
                         {"name": "ATTNBENCH_RESULTS", "value": results},
                         {"name": "ATTNBENCH_COMPILE_CACHE", "value": compile_cache(results)}]}
            ]}},
        },
    }
    rename = [{"op": "replace", "path": "/metadata/name", "value": run_id}]
    return yaml.safe_dump(resize, sort_keys=False), json.dumps(rename)


def _nightly_patch(args, name: str) -> str:
    """The CronJob renamed and scheduled, its run and compare containers pointed at the results URI (the run's
    compilation cache beside it, as a submitted run's) and pulling the image as the Job does (the component copies the
    Job's container before the Job's own patch sets its pull policy)."""
    results = {"name": "ATTNBENCH_RESULTS", "value": args.results}
    pull = pull_policy(args.image)
    patch = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "attnbench-nightly"},
        "spec": {"schedule": args.schedule, "jobTemplate": {"spec": {"template": {"spec": {
            "initContainers": [{"name": "attnbench", "imagePullPolicy": pull, "env": [
                results, {"name": "ATTNBENCH_COMPILE_CACHE", "value": compile_cache(args.results)}]}],
            "containers": [{"name": "compare", "imagePullPolicy": pull, "env": [results]}],
        }}}}},
    }
    rename = [{"op": "replace", "path": "/metadata/name", "value": name}]
    return yaml.safe_dump(patch, sort_keys=False), json.dumps(rename)


def kustomization(args, run_id: str, workdir: Path) -> dict:
    """The run's kustomization: the GPU overlay, the optional components, the spec, the images and the bucket."""
    components = []
    patches = []
    job_target = {"group": "batch", "version": "v1", "kind": "Job", "name": "attnbench-run"}
    if args.iap_domain:
        components.append(os.path.relpath(K8S / "components" / "iap", workdir))
        patches += [{
            "target": {"group": "networking.gke.io", "kind": "ManagedCertificate", "name": "attnbench-dashboard"},
            "patch": json.dumps([{"op": "replace", "path": "/spec/domains", "value": [args.iap_domain]}]),
        }, {
            "target": {"group": "networking.k8s.io", "kind": "Ingress", "name": "attnbench-dashboard"},
            "patch": json.dumps([{"op": "replace", "value": args.dashboard_ip_name,
                                  "path": "/metadata/annotations/kubernetes.io~1ingress.global-static-ip-name"}]),
        }]
    resize, rename = _job_patches(run_id, args.shards, args.results, args.image)  # resize first: it finds the Job by its base name
    patches += [{"target": job_target, "patch": resize}, {"target": job_target, "patch": rename}]
    if args.nightly:
        components.append(os.path.relpath(K8S / "components" / "nightly", workdir))
        cron_target = {"group": "batch", "version": "v1", "kind": "CronJob", "name": "attnbench-nightly"}
        settings, renamed = _nightly_patch(args, args.nightly)
        patches += [{"target": cron_target, "patch": settings}, {"target": cron_target, "patch": renamed}]
    images = [_image("attnbench-runner", args.image), _image("attnbench-dashboard", args.dashboard_image)]
    return {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(K8S / "overlays" / args.gpu, workdir)],
        "components": components,
        "configMapGenerator": [
            {"name": "attnbench-spec", "behavior": "replace", "files": ["spec.yaml"]},
            {"name": "attnbench-settings", "behavior": "merge",
             "literals": [f"results-uri={args.results}"], "options": {"disableNameSuffixHash": True}},
        ],
        "images": images,
        "patches": patches,
    }


def build(args, run_id: str) -> list[dict]:
    """Run `kubectl kustomize` on the run's kustomization; return the objects."""
    with tempfile.TemporaryDirectory(prefix="attnbench-render-") as tmp:
        workdir = Path(tmp)
        shutil.copyfile(args.spec, workdir / "spec.yaml")
        (workdir / "kustomization.yaml").write_text(yaml.safe_dump(kustomization(args, run_id, workdir)))
        done = subprocess.run([args.kubectl, "kustomize", str(workdir)], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"render: kubectl kustomize failed:\n{done.stderr.strip()}")
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def with_recheck(objects: list[dict]) -> list[dict]:
    """The objects, the nightly CronJob's pod given its `recheck` init container after the run's: a clone of the run's
    container as rendered (its image, GPU, env, mounts and security settings), RECHECK_ARGS its arguments."""
    made = copy.deepcopy(objects)
    for obj in made:
        if obj["kind"] == "CronJob":
            containers = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["initContainers"]
            containers.append({**copy.deepcopy(containers[0]), "name": "recheck", "args": RECHECK_ARGS})
    return made


def is_run_object(obj: dict) -> bool:
    """The per-run objects (the Job and its spec ConfigMap); the rest, the nightly CronJob aside, is the platform,
    applied once."""
    return obj["kind"] == "Job" or is_spec(obj)


def is_spec(obj: dict) -> bool:
    return obj["kind"] == "ConfigMap" and obj["metadata"]["name"].startswith("attnbench-spec")


def write(objects: list[dict], path: Path) -> None:
    path.write_text(yaml.safe_dump_all(objects, sort_keys=False))


def _cells(spec: Path) -> tuple[int, int] | None:
    """The spec's cells as the runner plans them and their families (a shard takes whole ones: runner.shard.assign),
    or None where the spec does not load (the run says why)."""
    sys.path.insert(0, str(K8S.parent))
    from runner.cells import expand
    from runner.registry import load_all
    from runner.shard import families
    from runner.spec import SpecError, load_spec

    try:  # expanded, not cells.count: sweep points a serving axis resolves alike are one cell
        cells = expand(load_spec(spec, set(load_all())))
    except SpecError:
        return None
    return len(cells), len(families(cells))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="k8s/render.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", required=True, type=Path, help="experiment spec (YAML) the Job runs")
    parser.add_argument("--shards", type=int, default=1, help="Job completions = parallelism = shards (one GPU each)")
    parser.add_argument("--gpu", default="l4", help="overlay under k8s/overlays/: l4, h100, or a whole multi-GPU node: l4-x2, l4-x4, h100-x8")
    parser.add_argument("--results", required=True, help="results URI, gs://BUCKET/results")
    parser.add_argument("--image", required=True, help="runner image, REGISTRY/attnbench:runner-TAG[@sha256:...]; "
                        "with a digest each node pulls it once (make submit looks it up)")
    parser.add_argument("--dashboard-image", help="dashboard image (default: --image's repository, tag runner-X -> "
                        "dashboard-X; required when --image has no runner- tag)")
    parser.add_argument("--run-id", help="Job name and run id (default: SPEC-NAME-YYYYmmdd-HHMMSS, UTC)")
    parser.add_argument("--iap-domain", help="expose the dashboard at this domain through IAP (adds the iap component)")
    parser.add_argument("--dashboard-ip-name", help="with --iap-domain: the Ingress's global static IP "
                        "(terraform output dashboard_ip_name)")
    parser.add_argument("--kubectl", default=os.environ.get("KUBECTL", "kubectl"), help="kubectl binary")
    parser.add_argument("--out", type=Path, default=Path("build/k8s"), help="output folder")
    parser.add_argument("--nightly", action="store_true", help="also write nightly.yaml: a CronJob (nightly-SPEC-GPU) "
                        "that runs the spec on a schedule and fails when it regressed against the run before")
    parser.add_argument("--schedule", default=SCHEDULE, help=f"with --nightly: when, in cron syntax, UTC (default: "
                        f"{SCHEDULE!r})")
    parser.add_argument("--apply", choices=["job", "platform", "nightly"], help="then `kubectl apply -f` that file")
    args = parser.parse_args(argv)
    problems = []
    if not 1 <= args.shards <= JOB_MAX:
        problems.append(f"--shards must be from 1 to {JOB_MAX:,} (got {args.shards:,})")
    elif args.shards > 1 and args.spec.is_file() and (found := _cells(args.spec)) and args.shards > found[1]:
        cells, families = found
        problems.append(f"--shards: {args.shards:,} shards for the spec's {cells:,} cells in {families:,} "
                        f"famil{'y' if families == 1 else 'ies'} (the cells that share one set of inputs and reference "
                        f"run on one shard); use at most {families:,} (each shard is a GPU pod, and a pod with no cell "
                        "refuses to start)")
    if not (K8S / "overlays" / args.gpu).is_dir():
        known = ", ".join(sorted(p.name for p in (K8S / "overlays").iterdir()))
        problems.append(f"--gpu: no overlay {args.gpu!r} (known: {known})")
    if not args.results.startswith("gs://"):
        problems.append(f"--results must be a gs:// URI (got {args.results!r})")
    if not args.spec.is_file():
        problems.append(f"--spec: no such file {args.spec}")
    if args.run_id and not re.fullmatch(rf"[a-z0-9]([a-z0-9-]{{0,{RUN_ID_MAX - 2}}}[a-z0-9])?", args.run_id):
        problems.append(f"--run-id must be lowercase letters, digits and '-', at most {RUN_ID_MAX} characters")
    if args.iap_domain and not (DOMAIN.fullmatch(args.iap_domain) and len(args.iap_domain) <= DOMAIN_MAX):
        problems.append(f"--iap-domain must be a lowercase DNS name of at most {DOMAIN_MAX} characters, no wildcard "
                        f"(GKE's ManagedCertificate; got {args.iap_domain!r})")
    if args.iap_domain and not args.dashboard_ip_name:
        problems.append("--iap-domain needs --dashboard-ip-name (terraform output dashboard_ip_name; "
                        "empty until terraform applies dashboard_static_ip = true)")
    if args.dashboard_image is None:
        repo, _, tag = args.image.split("@")[0].rpartition(":")
        if not repo or not tag.startswith("runner"):
            problems.append("--dashboard-image is needed unless --image is REPO:runner-TAG[@sha256:...]")
        else:
            args.dashboard_image = f"{repo}:dashboard{tag[len('runner'):]}"
    if args.nightly and args.shards != 1:
        problems.append("--nightly runs the spec as one pod: leave --shards at 1")
    if len(args.schedule.split()) != 5:
        problems.append(f"--schedule must be five cron fields, such as {SCHEDULE!r} (got {args.schedule!r})")
    if args.apply == "nightly" and not args.nightly:
        problems.append("--apply nightly needs --nightly")
    if problems:
        parser.error("; ".join(problems))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spec_name = (yaml.safe_load(args.spec.read_text()) or {}).get("name", "run")
    run_id = args.run_id or run_id_for(str(spec_name), datetime.now(timezone.utc))
    args.nightly = nightly_name(str(spec_name), args.gpu) if args.nightly else None
    objects = with_recheck(build(args, run_id))
    out = args.out / run_id
    out.mkdir(parents=True, exist_ok=True)
    write([o for o in objects if is_run_object(o)], out / "job.yaml")
    write([o for o in objects if not is_run_object(o) and o["kind"] != "CronJob"], out / "platform.yaml")
    print(f"run id: {run_id}\nwrote {out / 'platform.yaml'} and {out / 'job.yaml'}")
    if args.nightly:
        write([o for o in objects if is_spec(o) or o["kind"] == "CronJob"], out / "nightly.yaml")
        print(f"wrote {out / 'nightly.yaml'}: CronJob {args.nightly}, {args.schedule!r} UTC")
    if args.apply:
        return subprocess.run([args.kubectl, "apply", "-f", str(out / f"{args.apply}.yaml")]).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
