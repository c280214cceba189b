"""k8s/: every overlay rendered by the real kubectl, validated against Kubernetes' schemas, and held to its contract
(its GPUs, the right nodes, the failure policy, the restricted security context, a spec and a command line the
runner itself accepts). GKE's custom resources, which kubernetes-validate has no schema for, are validated against
their CRD schemas by tests/validate_gke_crds.cjs. The cluster cannot be reached from here; what is applied is
exactly what these tests read."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import hcl2
import pytest
import yaml

from deploy_tools import assert_clean, checkov, kustomize, skips, terraform, tool
from helpers import REPO
from runner import COMPILE_CACHE_ENV, RUN_ID_ENV
from runner.cli import EXIT_INPUT, EXIT_NOT_RESUMABLE, EXIT_REGRESSION, EXIT_SIGTERM, build_parser
from runner.registry import load_all
from runner.cells import expand as cells_of
from runner.shard import families
from runner.spec import load_spec, parse_spec

K8S = REPO / "k8s"
KUBERNETES_VERSION = "1.33.0"  # the oldest release with backoffLimitPerIndex and podFailurePolicy GA
GPU_NODES = {"l4": "nvidia-l4", "h100": "nvidia-h100-80gb", "l4-x2": "nvidia-l4", "l4-x4": "nvidia-l4",
             "h100-x8": "nvidia-h100-80gb"}
# The multi-GPU overlays take a whole node of one machine type (Google Cloud docs, "GPU machine types")
WHOLE_NODES = {"l4-x2": ("g2-standard-24", 2), "l4-x4": ("g2-standard-48", 4), "h100-x8": ("a3-highgpu-8g", 8)}
RESULTS = "gs://test-bucket/results"
IMAGE = "us-central1-docker.pkg.dev/test-project/attnbench/attnbench:runner-test"
SHARDS = 4
SPEC_MOUNT = "/etc/attnbench/spec.yaml"
IAP = ("--iap-domain", "bench.example.com", "--dashboard-ip-name", "lab-dashboard")  # terraform with name = "lab"
NODE_MODULES = REPO / ".venv-tools" / "npm" / "node_modules"
NO_SCHEMA = re.compile(r"Couldn't find schema for kind (\w+) with api version (\S+)")
SPOT_POD_SHARE_S = 15  # GKE: a Spot notice is 30 s, the first 15 for pods, the rest for system pods


def node_selector(gpu: str) -> dict[str, str]:
    """The nodes an overlay's pods ask for: its GPU's, and a whole multi-GPU node's machine type."""
    machine = {"node.kubernetes.io/instance-type": WHOLE_NODES[gpu][0]} if gpu in WHOLE_NODES else {}
    return {"cloud.google.com/gke-accelerator": GPU_NODES[gpu], **machine}


def render_py(*args: str) -> subprocess.CompletedProcess:
    """`python k8s/render.py ARGS` from the repository root, with this test's Python."""
    return subprocess.run([sys.executable, str(K8S / "render.py"), *args], cwd=REPO, capture_output=True, text=True)


def render(tmp: Path, *extra: str, run_id: str = "lab5-test") -> list[dict]:
    """The objects `make submit` would apply: k8s/render.py over specs/lab5.yaml."""
    done = render_py("--spec", str(REPO / "specs/lab5.yaml"), "--shards", str(SHARDS), "--results", RESULTS,
                     "--image", IMAGE, "--run-id", run_id, "--kubectl", tool("kubectl"), "--out", str(tmp), *extra)
    assert done.returncode == 0, done.stderr
    return [doc for name in ("platform.yaml", "job.yaml")
            for doc in yaml.safe_load_all((tmp / run_id / name).read_text()) if doc]


def one(objects: list[dict], kind: str) -> dict:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def pod_specs(objects: list[dict]) -> list[dict]:
    pods = [o["spec"]["template"]["spec"] for o in objects if o["kind"] in ("Job", "Deployment")]
    return pods + [o["spec"]["jobTemplate"]["spec"]["template"]["spec"] for o in objects if o["kind"] == "CronJob"]


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container["env"]}


def expand(args: list[str], values: dict[str, str]) -> list[str]:
    """Kubernetes' $(VAR) expansion of container args."""
    return [re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], arg) for arg in args]


@pytest.fixture(scope="module", params=sorted(GPU_NODES))
def overlay(request) -> tuple[str, list[dict]]:
    return request.param, kustomize(K8S / "overlays" / request.param)


@pytest.fixture(scope="module")
def run_objects(tmp_path_factory) -> list[dict]:
    return render(tmp_path_factory.mktemp("render"))


def render_nightly(out: Path, gpu: str, *extra: str) -> None:
    """`make nightly`'s render of specs/lab5.yaml on `gpu` into out/lab5-nightly/."""
    done = render_py("--spec", str(REPO / "specs/lab5.yaml"), "--results", RESULTS, "--image", IMAGE, "--gpu", gpu,
                     "--run-id", "lab5-nightly", "--nightly", "--kubectl", tool("kubectl"), "--out", str(out), *extra)
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module", params=sorted(GPU_NODES))
def nightly(request, tmp_path_factory) -> tuple[str, list[dict], list[dict]]:
    """(gpu, nightly.yaml's objects, the Job a `make submit` on that GPU would run): `make nightly`'s render."""
    gpu, out = request.param, tmp_path_factory.mktemp("nightly")
    render_nightly(out, gpu, "--schedule", "30 2 * * 1-5")
    objects = [d for d in yaml.safe_load_all((out / "lab5-nightly" / "nightly.yaml").read_text()) if d]
    job = one(list(yaml.safe_load_all((out / "lab5-nightly" / "job.yaml").read_text())), "Job")
    return gpu, objects, job


@pytest.fixture(scope="module")
def addon_objects(tmp_path_factory) -> list[dict]:
    return render(tmp_path_factory.mktemp("addons"), "--gpu", "h100", *IAP, run_id="lab5-addons")


def validate_crds(objects: list[dict]) -> subprocess.CompletedProcess:
    """tests/validate_gke_crds.cjs over `objects`: one line each, exit 1 on any invalid or unknown."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: the GKE CRD schemas come from npm and run under node")
    if not NODE_MODULES.is_dir():
        pytest.fail(f"{NODE_MODULES} is missing: run `make test-tools` (scripts/install-test-tools.sh) first")
    return subprocess.run([node, str(REPO / "tests" / "validate_gke_crds.cjs"), str(NODE_MODULES)],
                          input=json.dumps(objects), capture_output=True, text=True)


def assert_strict_schema_valid(path: Path, objects: list[dict]) -> None:
    """kubernetes-validate --strict passes every object (written to `path`); those it has no schema for, GKE's
    custom resources, pass their CRD schemas."""
    path.write_text(yaml.safe_dump_all(objects))
    done = subprocess.run([tool("kubernetes-validate"), "--strict", "-k", KUBERNETES_VERSION, str(path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failed" not in done.stdout.lower(), done.stdout
    unchecked = set(NO_SCHEMA.findall(done.stdout + done.stderr))
    custom = [o for o in objects if (o["kind"], o["apiVersion"]) in unchecked]
    assert {(o["kind"], o["apiVersion"]) for o in custom} == unchecked
    if custom:
        crds = validate_crds(custom)
        assert crds.returncode == 0, crds.stdout + crds.stderr


def test_every_overlay_passes_strict_schema_validation(tmp_path, overlay):
    assert_strict_schema_valid(tmp_path / "overlay.yaml", overlay[1])


def test_rendered_runs_pass_strict_schema_validation(tmp_path, run_objects, addon_objects):
    assert_strict_schema_valid(tmp_path / "run.yaml", run_objects)
    assert_strict_schema_valid(tmp_path / "addons.yaml", addon_objects)


def test_gke_custom_resources_are_checked_against_their_crd_schemas(addon_objects):
    custom = [o for o in addon_objects if o["kind"] in ("BackendConfig", "ManagedCertificate")]
    done = validate_crds(custom)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == ["ok", "BackendConfig", "attnbench-dashboard", "ok", "ManagedCertificate",
                                   "attnbench-dashboard"]
    backend, certificate = (json.loads(json.dumps(o)) for o in custom)
    backend["spec"]["timeoutSec"] = "3600"
    certificate["spec"]["domains"] = ["*.example.com"]
    broken = validate_crds([backend, certificate]).stdout.splitlines()
    assert broken[0] == "invalid BackendConfig attnbench-dashboard: data/spec/timeoutSec must be integer"
    assert broken[1].startswith("invalid ManagedCertificate attnbench-dashboard: data/spec/domains/0 must match")


@pytest.mark.parametrize("domain", ["bench.example.com", "Bench.Example.com", "*.example.com", "a" * 60 + ".example"])
def test_every_iap_domain_render_accepts_makes_a_valid_managed_certificate(tmp_path, domain):
    done = render_py("--spec", "specs/lab5.yaml", "--results", RESULTS, "--image", IMAGE, "--run-id", "lab5-domain",
                     "--iap-domain", domain, "--dashboard-ip-name", "lab-dashboard", "--kubectl", tool("kubectl"),
                     "--out", str(tmp_path))
    if done.returncode:
        assert done.returncode == 2 and "--iap-domain must be a lowercase DNS name" in done.stderr, done.stderr
        return
    platform = list(yaml.safe_load_all((tmp_path / "lab5-domain" / "platform.yaml").read_text()))
    crds = validate_crds([one(platform, "ManagedCertificate")])
    assert crds.returncode == 0, f"render.py accepted {domain!r}, which GKE would refuse: {crds.stdout}"


def test_runner_job_gets_its_gpus_on_the_overlays_nodes(overlay):
    gpu, objects = overlay
    pod = one(objects, "Job")["spec"]["template"]["spec"]
    resources = pod["containers"][0]["resources"]
    gpus = WHOLE_NODES[gpu][1] if gpu in WHOLE_NODES else 1
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == gpus
    assert pod["nodeSelector"] == node_selector(gpu)
    tolerated = {(t["key"], t["effect"]) for t in pod["tolerations"]}
    assert {("nvidia.com/gpu", "NoSchedule"), ("cloud.google.com/gke-spot", "NoSchedule")} <= tolerated


def test_runner_job_is_indexed_and_fails_fast_only_on_spec_errors(overlay):
    job = one(overlay[1], "Job")["spec"]
    assert job["completionMode"] == "Indexed"
    assert job["backoffLimitPerIndex"] >= 1 and job["ttlSecondsAfterFinished"] > 0
    assert job["activeDeadlineSeconds"] > 0
    assert job["template"]["spec"]["restartPolicy"] == "Never"  # podFailurePolicy requires it
    assert job["podReplacementPolicy"] == "Failed"  # one writer per shard: no replacement while the old pod flushes
    first, *rest = job["podFailurePolicy"]["rules"]
    assert first == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    grace = job["template"]["spec"]["terminationGracePeriodSeconds"]
    assert 10 < grace <= SPOT_POD_SHARE_S, "the runner's 10 s to exit, inside GKE's 15 s for pods on a Spot notice"
    fail_job = [r for r in rest if r["action"] == "FailJob"]
    assert [r["onExitCodes"]["values"] for r in fail_job] == [[2]]
    fail_index = [r["onExitCodes"]["values"] for r in rest if r["action"] == "FailIndex"]  # needs backoffLimitPerIndex
    assert fail_index == [[EXIT_NOT_RESUMABLE]], "a shard retried on another machine fails alone, not the Job"
    assert all(r["onExitCodes"]["containerName"] == "attnbench" for r in rest)


def test_every_pod_runs_restricted_with_writable_scratch_only_in_volumes(overlay):
    for pod in pod_specs(overlay[1]):
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        volumes = {v["name"]: v for v in pod["volumes"]}
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"] == {"drop": ["ALL"]}
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}
            resources = container["resources"]
            assert {"cpu", "memory"} <= resources["requests"].keys() and {"cpu", "memory"} <= resources["limits"].keys()
            mounts = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"]}
            home = env_of(container)["HOME"]["value"]
            for path in ("/tmp", home):
                assert "emptyDir" in mounts[path], f"{path} must be a writable emptyDir"


def test_runner_has_memory_shm_and_an_emptydir_spool(overlay):
    pod = one(overlay[1], "Job")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory"
    spool = env_of(container)["ATTNBENCH_SPOOL"]["value"]
    assert "emptyDir" in volumes[mounts[spool]]


def test_run_id_is_the_job_name_and_shards_match_completions(run_objects):
    job = one(run_objects, "Job")
    assert job["metadata"]["name"] == "lab5-test"
    env = env_of(job["spec"]["template"]["spec"]["containers"][0])
    run_id = env[RUN_ID_ENV]["valueFrom"]["fieldRef"]["fieldPath"]
    assert run_id == "metadata.labels['batch.kubernetes.io/job-name']"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == SHARDS
    assert env["JOB_COMPLETIONS"]["value"] == str(SHARDS)


def test_results_uri_and_images_come_from_the_render(run_objects):
    settings = next(o for o in run_objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "attnbench-settings")
    assert settings["data"]["results-uri"] == RESULTS  # the dashboard's
    job_env = env_of(one(run_objects, "Job")["spec"]["template"]["spec"]["containers"][0])
    assert job_env["ATTNBENCH_RESULTS"] == {"name": "ATTNBENCH_RESULTS", "value": RESULTS}  # job.yaml carries its own
    # shards and later runs share compiled programs through the bucket (the runner's own SA may write there)
    assert job_env[COMPILE_CACHE_ENV]["value"] == f"{RESULTS}-jax-cache"
    images = {c["image"] for pod in pod_specs(run_objects) for c in pod["containers"]}
    assert images == {IMAGE, IMAGE.replace("runner", "dashboard")}


def spec_text(objects: list[dict]) -> str:
    return next(o for o in objects if o["metadata"]["name"].startswith("attnbench-spec"))["data"]["spec.yaml"]


def test_overlays_spec_passes_the_runners_own_validation(overlay):
    parse_spec(yaml.safe_load(spec_text(overlay[1])), set(load_all()))


def test_rendered_run_carries_the_spec_file_unchanged_and_valid(run_objects):
    text = spec_text(run_objects)
    assert text == (REPO / "specs/lab5.yaml").read_text()
    parse_spec(yaml.safe_load(text), set(load_all()))


def test_job_command_line_is_one_the_cli_accepts(run_objects):
    pod = one(run_objects, "Job")["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert "command" not in container  # the image's entrypoint is `attnbench`
    args = build_parser().parse_args(expand(container["args"], {"ATTNBENCH_RESULTS": RESULTS}))
    assert (args.command, args.spec, args.out) == ("run", SPEC_MOUNT, RESULTS)
    spec_mount = next(m for m in container["volumeMounts"] if m["name"] == "spec")
    assert str(Path(spec_mount["mountPath"]) / "spec.yaml") == SPEC_MOUNT
    assert next(v for v in pod["volumes"] if v["name"] == "spec")["configMap"]["name"].startswith("attnbench-spec")


def test_dashboard_command_line_probes_and_service_agree(run_objects):
    deployment = one(run_objects, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(expand(container["args"], {"ATTNBENCH_RESULTS": RESULTS}))
    assert (args.command, args.results, args.address) == ("dashboard", RESULTS, "0.0.0.0")
    assert container["ports"] == [{"name": "http", "containerPort": args.port}]
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/_stcore/health", "port": "http"}
    service = one(run_objects, "Service")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def test_service_accounts_match_what_terraform_grants(run_objects):
    accounts = {o["metadata"]["name"] for o in run_objects if o["kind"] == "ServiceAccount"}
    used = {pod["serviceAccountName"] for pod in pod_specs(run_objects)}
    assert used == accounts == {"attnbench-runner", "attnbench-dashboard"}
    assert accounts <= granted_accounts(), f"terraform grants nothing to {accounts - granted_accounts()}"
    assert {o["metadata"].get("namespace") for o in run_objects if o["kind"] != "Namespace"} == {"attnbench"}


def test_iap_component_exposes_the_dashboard_with_a_websocket_timeout(addon_objects):
    backend = one(addon_objects, "BackendConfig")["spec"]
    assert backend["timeoutSec"] >= 3600
    assert backend["iap"]["enabled"] is True
    assert backend["iap"]["oauthclientCredentials"]["secretName"]
    assert backend["healthCheck"]["requestPath"] == "/_stcore/health"
    annotations = one(addon_objects, "Service")["metadata"]["annotations"]
    assert '"attnbench-dashboard"' in annotations["cloud.google.com/backend-config"]
    assert one(addon_objects, "ManagedCertificate")["spec"]["domains"] == ["bench.example.com"]
    ingress = one(addon_objects, "Ingress")["metadata"]["annotations"]
    assert ingress["kubernetes.io/ingress.global-static-ip-name"] == "lab-dashboard"
    assert not [o for o in addon_objects if o["kind"] == "Secret"], "no secret values belong in the manifests"


def make_render(out: Path, *settings: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`make render` of specs/lab5.yaml into `out`, with the test's results URI, image and kubectl."""
    return subprocess.run(
        # --old-file: a test never reinstalls .venv under the running suite
        ["make", "--no-print-directory", "--old-file=.venv/.installed", "render", "SPEC=specs/lab5.yaml",
         f"SHARDS={SHARDS}", f"RESULTS_URI={RESULTS}", f"IMAGE={IMAGE}", f"KUBECTL={tool('kubectl')}",
         f"RENDER_DIR={out}", *settings],
        cwd=REPO, capture_output=True, text=True, env={**(env or os.environ), "MAKEFLAGS": ""})


def test_make_render_writes_the_manifests(tmp_path):
    done = make_render(tmp_path, "RUN=lab5-make")
    assert done.returncode == 0, done.stdout + done.stderr
    job = one(list(yaml.safe_load_all((tmp_path / "lab5-make" / "job.yaml").read_text())), "Job")
    assert (job["metadata"]["name"], job["spec"]["completions"]) == ("lab5-make", SHARDS)
    assert (tmp_path / "lab5-make" / "platform.yaml").read_text().count("kind: Deployment") == 1


def test_make_render_takes_the_dashboards_static_ip_from_terraform(tmp_path):
    fake = tmp_path / "bin" / "terraform"  # answers the one question the Makefile asks: the IP's name for name = "lab"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\n[ "$*" = "-chdir=terraform output -json" ] && '
                    'echo \'{"dashboard_ip_name": {"sensitive": false, "type": "string", "value": "lab-dashboard"}}\'\n')
    fake.chmod(0o755)
    done = make_render(tmp_path, "RUN=lab5-iap", "IAP_DOMAIN=bench.example.com",
                       env={**os.environ, "PATH": f"{fake.parent}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stdout + done.stderr
    platform = list(yaml.safe_load_all((tmp_path / "lab5-iap" / "platform.yaml").read_text()))
    ingress = one(platform, "Ingress")["metadata"]["annotations"]
    assert ingress["kubernetes.io/ingress.global-static-ip-name"] == "lab-dashboard"


NO_OUTPUTS = "terraform/ has no outputs here (apply it first) — or give {}.  Stop."


def stateless_checkout(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A scratch copy of the Makefile and terraform/ where terraform has never applied (no state), and the environment
    to run make there: the real terraform, a gcloud that fails (not logged in) first on PATH."""
    terraform()
    root = tmp_path / "checkout"
    shutil.copytree(REPO / "terraform", root / "terraform", ignore=shutil.ignore_patterns("*.tfstate*", ".terraform*"))
    (root / "k8s").mkdir()
    for path in ("Makefile", "k8s/terraform_output.py"):
        shutil.copy(REPO / path, root / path)
    gcloud = tmp_path / "bin" / "gcloud"
    gcloud.parent.mkdir()
    gcloud.write_text("#!/bin/sh\nexit 1\n")
    gcloud.chmod(0o755)
    return root, {**os.environ, "MAKEFLAGS": "", "PATH": f"{gcloud.parent}{os.pathsep}{os.environ['PATH']}"}


def files_in(root: Path) -> set[Path]:
    return {path.relative_to(root) for path in root.rglob("*")}


def test_make_stops_in_one_line_where_terraform_has_no_outputs(tmp_path):
    """Where terraform/ has not applied, `terraform output -raw` exits 0 with a warning box on stdout: the Makefile took
    it for REGISTRY and RESULTS_URI, and the digest lookup's shell ran its backticked `terraform refresh` and `terraform
    console` (a terraform.tfstate in the checkout, under `make -n` too). make now stops, naming what to give."""
    root, env = stateless_checkout(tmp_path)
    before = files_in(root)
    for given, missing in (((), "REGISTRY= and RESULTS_URI="), (("-n",), "REGISTRY= and RESULTS_URI="),
                           ((f"RESULTS_URI={RESULTS}",), "REGISTRY="), ((f"IMAGE={IMAGE}",), "RESULTS_URI=")):
        done = subprocess.run(["make", "-s", "--old-file=.venv/.installed", "render", "SPEC=specs/lab5.yaml", "TAG=t",
                               *given], cwd=root, capture_output=True, text=True, env=env, timeout=30)
        assert done.returncode == 2 and done.stdout == "", given
        assert re.fullmatch(rf"Makefile:\d+: \*\*\* {re.escape(NO_OUTPUTS.format(missing))}\n", done.stderr), given
    assert files_in(root) == before


def test_make_says_why_terraform_gave_no_outputs(tmp_path):
    """'apply it first' came where terraform was not installed, and where `terraform output` failed (a backend "gcs"
    not yet `terraform init`-ed exits 1), whose error the lookup hides; saying why asked terraform a second time."""
    root, env = stateless_checkout(tmp_path)
    failing = tmp_path / "failing" / "terraform"
    failing.parent.mkdir()
    failing.write_text(f"#!/bin/sh\necho called >> {tmp_path / 'calls'}\n"
                       "echo 'Error: Backend initialization required, please run \"terraform init\"' >&2\nexit 1\n")
    failing.chmod(0o755)
    no_terraform = tmp_path / "empty"  # python3 by its path, make's shell by its own (/bin/sh)
    no_terraform.mkdir()
    for path, why in ((f"{failing.parent}{os.pathsep}{env['PATH']}", "`terraform -chdir=terraform output` fails (run "
                       "it to see why)"), (str(no_terraform), "terraform is not on PATH")):
        done = subprocess.run([shutil.which("make"), "-n", "-s", "render", "SPEC=specs/lab5.yaml", "TAG=t1",
                               f"PYTHON={sys.executable}"], cwd=root, capture_output=True, text=True,
                              env={**env, "PATH": path}, timeout=30)
        assert done.returncode == 2 and done.stdout == "", done.stdout
        assert re.fullmatch(rf"Makefile:\d+: \*\*\* {re.escape(why)} — or give REGISTRY= and RESULTS_URI=.  Stop.\n",
                            done.stderr), done.stderr
    assert (tmp_path / "calls").read_text() == "called\n"  # the failing one, once: its answer also said why


def test_make_says_so_where_the_script_that_reads_terraform_cannot_run(tmp_path):
    """Its answer empty, the line began with nothing: "***  — or give REGISTRY= and RESULTS_URI=." (review s14 #11)."""
    root, env = stateless_checkout(tmp_path)
    done = subprocess.run(["make", "-n", "-s", "render", "SPEC=specs/lab5.yaml", "TAG=t1", "PYTHON=/bin/false"],
                          cwd=root, capture_output=True, text=True, env=env, timeout=30)
    why = "terraform/'s outputs are unread: `/bin/false k8s/terraform_output.py` did not answer (give PYTHON= a Python 3)"
    assert (done.returncode, done.stdout) == (2, "")
    assert re.fullmatch(rf"Makefile:\d+: \*\*\* {re.escape(why)} — or give REGISTRY= and RESULTS_URI=.  Stop.\n",
                        done.stderr), done.stderr


@pytest.mark.parametrize("target", ["render", "submit", "deploy", "nightly"])
def test_make_stops_before_it_installs_the_venv(tmp_path, target):
    """On a fresh clone (no .venv) make installed the venv, about 2 minutes, before it stopped 'at once' on a value
    missing: the checks now run as make reads the Makefile. -n: a regression prints the install, and never runs it."""
    root, env = stateless_checkout(tmp_path)
    shutil.copy(REPO / "pyproject.toml", root)
    stops = {(): "terraform/ has no outputs here"}
    if target in ("submit", "nightly"):  # the runner's digest, where gcloud is logged out
        stops[("REGISTRY=reg.example/p", f"RESULTS_URI={RESULTS}")] = "no digest for "
    for given, stop in stops.items():
        done = subprocess.run(["make", "-n", "-s", target, "SPEC=specs/lab5.yaml", "TAG=t1", *given], cwd=root,
                              capture_output=True, text=True, env=fake_cloud(tmp_path) if given else env, timeout=30)
        assert (done.returncode, done.stdout) == (2, ""), done.stdout
        assert re.fullmatch(rf"Makefile:\d+: \*\*\* {stop}.*  Stop.\n", done.stderr), done.stderr
    assert not (root / ".venv").exists()


@pytest.mark.skipif(shutil.which("script") is None, reason="util-linux script (a pseudo-terminal) is not on PATH")
def test_make_render_under_a_terminal_stops_where_terraform_has_no_outputs(tmp_path):
    """Under a terminal the warning box's `terraform console` waited for input: make hung, with no prompt."""
    root, env = stateless_checkout(tmp_path)
    done = subprocess.run(["timeout", "30", "script", "-eqc", "make -s --old-file=.venv/.installed render "
                           "SPEC=specs/lab5.yaml TAG=t", "/dev/null"], cwd=root, capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stdout  # 124 where the timeout ended a hung make
    assert done.stdout.endswith(NO_OUTPUTS.format("REGISTRY= and RESULTS_URI=") + "\n")  # text: \r\n read as \n
    assert not (root / "terraform.tfstate").exists()


def test_a_terraform_output_is_taken_only_where_terraform_has_it_as_one_plain_word():
    sys.path.insert(0, str(K8S))
    from terraform_output import values

    applied = json.dumps({"results_uri": {"value": RESULTS}, "bucket": {"value": "p-attnbench-results"},
                          "dashboard_ip_name": {"value": ""}, "odd": {"value": "a `b`"}, "many": {"value": ["a"]}})
    assert values(applied) == {"results_uri": RESULTS, "bucket": "p-attnbench-results"}
    assert values("{}") == values("") == values("Warning: No outputs") == values("[]") == values('{"a": 1}') == {}


def test_a_digest_pinned_runner_is_pulled_once_per_node(tmp_path, run_objects):
    """By tag every pod start asks the registry (the tag may move); by digest a node that has the image keeps it."""
    digest = "sha256:" + "0" * 64
    pinned = render(tmp_path, "--image", f"{IMAGE}@{digest}", run_id="lab5-digest")
    container = one(pinned, "Job")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{IMAGE.rpartition(':')[0]}@{digest}"
    assert container["imagePullPolicy"] == "IfNotPresent"
    dashboard = one(pinned, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert dashboard["image"] == IMAGE.replace("runner", "dashboard")  # its tag, derived from the runner's
    tagged = one(run_objects, "Job")["spec"]["template"]["spec"]["containers"][0]
    assert tagged["imagePullPolicy"] == "Always"


def granted_accounts() -> set[str]:
    """The Kubernetes service accounts that terraform's bucket IAM members name, as python-hcl2 parses terraform/."""
    from test_terraform import plain

    found = set()
    for path in (REPO / "terraform").glob("*.tf"):
        with path.open() as f:
            for block in plain(hcl2.load(f)).get("resource", []):
                for body in block.get("google_storage_bucket_iam_member", {}).values():
                    found.add(body["member"].rsplit("/", 1)[-1])
    return found


# what the real gcloud says where no account is logged in (Google Cloud SDK 528), on stderr, exit 1
GCLOUD_LOGGED_OUT = """ERROR: (gcloud.artifacts.docker.images.describe) You do not currently have an active account selected.
Please run:

  $ gcloud auth login

to obtain new credentials."""
TERRAFORM_OUTPUTS = json.dumps({"image_repository": {"value": "reg.example/p"},
                                "results_uri": {"value": "gs://tf-bucket/results"}})


def fake_cloud(tmp_path: Path, digest: str = "", outputs: str = TERRAFORM_OUTPUTS) -> dict[str, str]:
    """The environment to run make in with a terraform, a gcloud and a git first on PATH, each logging its calls to
    tmp_path/calls: terraform answers `output -json` with `outputs`; gcloud reports `digest` for the runner tagged t1 in
    reg.example/p, and with no digest fails as a gcloud not logged in does; git gives t1 as the commit's short hash."""
    stubs, calls = tmp_path / "bin", tmp_path / "calls"
    stubs.mkdir(exist_ok=True)
    answers = {"terraform": f"[ \"$*\" = \"-chdir=terraform output -json\" ] && echo '{outputs}'",
               "git": '[ "$*" = "rev-parse --short HEAD" ] && echo t1',
               "gcloud": '[ "$*" = "artifacts docker images describe reg.example/p/attnbench:runner-t1 '
                         f'--format=value(image_summary.digest)" ] && [ -n "{digest}" ] && echo "{digest}" && exit 0\n'
                         f"cat >&2 <<'EOF'\n{GCLOUD_LOGGED_OUT}\nEOF\nexit 1"}
    for name, answer in answers.items():
        (stubs / name).write_text(f'#!/bin/sh\necho "{name} $*" >> {calls}\n{answer}\n')
        (stubs / name).chmod(0o755)
    return {**os.environ, "MAKEFLAGS": "", "PATH": f"{stubs}{os.pathsep}{os.environ['PATH']}"}


def planned(tmp_path: Path, target: str, *settings: str, digest: str = "", outputs: str = TERRAFORM_OUTPUTS,
            **environment: str) -> subprocess.CompletedProcess:
    """`make -n TARGET SETTINGS` of specs/lab5.yaml with fake_cloud's terraform, gcloud and git, `environment` added."""
    return subprocess.run(["make", "-n", "--no-print-directory", "--old-file=.venv/.installed", target,
                           "SPEC=specs/lab5.yaml", *settings], cwd=REPO, capture_output=True, text=True,
                          env={**fake_cloud(tmp_path, digest, outputs), **environment})


def planned_with_registry(tmp_path: Path, target: str, digest: str, *settings: str) -> subprocess.CompletedProcess:
    """`make -n TARGET` for the runner tagged t1 in reg.example/p, where the registry reports `digest` for it."""
    return planned(tmp_path, target, "REGISTRY=reg.example/p", "TAG=t1", f"RESULTS_URI={RESULTS}", *settings,
                   digest=digest)


def test_make_submit_pins_the_runner_by_the_digest_the_registry_reports(tmp_path):
    digest = "sha256:" + "ab" * 32
    done = planned_with_registry(tmp_path, "submit", digest)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"--image (\S+)", done.stdout)[1] == f"reg.example/p/attnbench:runner-t1@{digest}"


@pytest.mark.parametrize("target", ["submit", "nightly"])
def test_make_applies_no_runner_the_registry_does_not_have_unless_told_to(tmp_path, target):
    """A Job whose image was never pushed (or whose lookup failed, gcloud logged out) waited in ImagePullBackOff for
    its 6-hour deadline: submit and nightly stop in one line, gcloud's reason in it, where gcloud's 12-line error came
    first; RUNNER_DIGEST= applies the tag; render writes it, saying nothing of gcloud's error."""
    refused = planned_with_registry(tmp_path, target, "")
    assert refused.returncode == 2 and refused.stdout == ""
    assert re.fullmatch(
        r"Makefile:\d+: \*\*\* no digest for reg.example/p/attnbench:runner-t1: gcloud artifacts docker images describe "
        r'said "You do not currently have an active account selected." — log gcloud in \(gcloud auth login\) or push '
        r"the runner \(docs/gke.md, step 2\), or give RUNNER_DIGEST= to apply the tag unpinned \(offline\).  Stop.\n",
        refused.stderr)
    offline, render = (planned_with_registry(tmp_path, target, "", "RUNNER_DIGEST="),
                       planned_with_registry(tmp_path, "render", ""))
    for done in (offline, render):
        assert done.returncode == 0 and done.stderr == "", done.stdout + done.stderr
        assert re.search(r"--image (\S+)", done.stdout)[1] == "reg.example/p/attnbench:runner-t1"


def test_make_asks_terraform_once_for_all_the_outputs_it_reads(tmp_path):
    """terraform's outputs are read once per make, whatever reads them: each value's own lookup asked terraform twice in
    one `make -n submit` (REGISTRY's and RESULTS_URI's), three times with IAP_DOMAIN= (DASHBOARD_IP_NAME's), and a
    fourth time where make stopped, to say why terraform gave none."""
    digest = "sha256:" + "cd" * 32
    done = planned(tmp_path, "submit", "TAG=t1", "IAP_DOMAIN=bench.example.com", digest=digest)
    assert done.returncode == 0, done.stderr
    assert re.search(r"--image (\S+)", done.stdout)[1] == f"reg.example/p/attnbench:runner-t1@{digest}"
    assert re.search(r"--results (\S+)", done.stdout)[1] == "gs://tf-bucket/results"
    calls = sorted((tmp_path / "calls").read_text().splitlines())  # terraform's outputs, the runner's digest
    assert calls == [f"gcloud artifacts docker images describe reg.example/p/attnbench:runner-t1 "
                     "--format=value(image_summary.digest)", "terraform -chdir=terraform output -json"]


def test_make_asks_git_for_the_runners_tag_once_and_never_where_tag_is_given(tmp_path):
    """TAG, the commit's short hash, was asked of git on each read: three times in one `make -n submit` (IMAGE reads it
    several times). Given on the line or in the environment, TAG is taken as it is and git is not asked."""
    digest = "sha256:" + "ef" * 32
    done = planned(tmp_path, "submit", "REGISTRY=reg.example/p", f"RESULTS_URI={RESULTS}", digest=digest)
    assert done.returncode == 0, done.stderr
    assert re.search(r"--image (\S+)", done.stdout)[1] == f"reg.example/p/attnbench:runner-t1@{digest}"
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [call for call in calls if call.startswith("git ")] == ["git rev-parse --short HEAD"]
    (tmp_path / "calls").unlink()
    unpinned = ("REGISTRY=reg.example/p", f"RESULTS_URI={RESULTS}", "RUNNER_DIGEST=")
    for done, tag in ((planned(tmp_path, "render", *unpinned, "TAG=line"), "line"),
                      (planned(tmp_path, "render", *unpinned, TAG="env"), "env")):
        assert done.returncode == 0, done.stderr
        assert re.search(r"--image (\S+)", done.stdout)[1] == f"reg.example/p/attnbench:runner-{tag}"
    assert not (tmp_path / "calls").exists()


@pytest.mark.parametrize("outputs", ["{}", json.dumps({"results_uri": {"value": RESULTS}}),
                                     json.dumps({"results_uri": {"value": RESULTS}, "terraform": {"value": "missing"}})])
def test_make_that_stops_for_a_value_terraform_lacks_asks_terraform_once(tmp_path, outputs):
    """Where make stops, its line says why terraform gave no value from the answer the values came from, where it
    asked terraform again; an output named terraform is not that answer (it was, beside terraform=ran, and the line
    lost its why)."""
    done = planned(tmp_path, "render", "TAG=t1", "IAP_DOMAIN=bench.example.com", outputs=outputs)
    assert done.returncode == 2 and "terraform/ has no outputs here (apply it first) — or give REGISTRY=" in done.stderr
    assert (tmp_path / "calls").read_text().splitlines() == ["terraform -chdir=terraform output -json"]


@pytest.mark.parametrize("given", [("REGISTRY=reg.example/p", f"RESULTS_URI={RESULTS}"),
                                   (f"IMAGE={IMAGE}", f"RESULTS_URI={RESULTS}", "IAP_DOMAIN=bench.example.com",
                                    "DASHBOARD_IP_NAME=lab-dashboard")])
def test_make_asks_terraform_nothing_where_every_value_it_needs_is_given(tmp_path, given):
    """REGISTRY (or IMAGE), RESULTS_URI and, with IAP_DOMAIN=, DASHBOARD_IP_NAME given: terraform is never run."""
    done = planned(tmp_path, "deploy", *given)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls").read_text() if (tmp_path / "calls").exists() else ""
    assert "terraform" not in calls


@pytest.mark.parametrize("target", ["submit", "nightly"])
def test_make_looks_up_no_runner_where_image_is_given(tmp_path, target):
    """Given IMAGE=, submit and nightly asked terraform for REGISTRY and gcloud for the digest of a runner the Job does
    not use (gcloud's 12-line error above the apply, where it was logged out), as deploy and render did not."""
    done = planned(tmp_path, target, f"IMAGE={IMAGE}", f"RESULTS_URI={RESULTS}")
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert re.search(r"--image (\S+)", done.stdout)[1] == IMAGE
    assert not (tmp_path / "calls").exists()


def test_render_refuses_bad_input(tmp_path):
    done = render_py("--spec", "specs/lab5.yaml", "--shards", "0", "--gpu", "tpu", "--results", "s3://x",
                     "--image", IMAGE, "--out", str(tmp_path))
    assert done.returncode == 2
    for problem in ("--shards must be from 1 to 100,000", "no overlay 'tpu'", "must be a gs:// URI"):
        assert problem in done.stderr
    cells = cells_of(load_spec(REPO / "specs/smoke.yaml", set(load_all())))
    most = len(families(cells))  # a shard takes whole families (runner.shard.assign)
    assert 1 < most < len(cells)
    many = render_py("--spec", "specs/smoke.yaml", "--shards", str(most + 1), "--results", RESULTS, "--image", IMAGE,
                     "--out", str(tmp_path))
    assert many.returncode == 2 and (f"{most + 1} shards for the spec's {len(cells)} cells in {most} families (the "
                                     f"cells that share one set of inputs and reference run on one shard); use at "
                                     f"most {most}") in many.stderr
    assert render_py("--spec", "specs/smoke.yaml", "--shards", str(most), "--results", RESULTS, "--image", IMAGE,
                     "--out", str(tmp_path)).returncode == 0
    huge = render_py("--spec", "specs/lab5.yaml", "--shards", "100001", "--results", RESULTS, "--image", IMAGE,
                     "--out", str(tmp_path))
    assert huge.returncode == 2 and "--shards must be from 1 to 100,000 (got 100,001)" in huge.stderr
    digest = render_py("--spec", "specs/lab5.yaml", "--results", RESULTS, "--image", "r/attnbench@sha256:" + "0" * 64,
                       "--out", str(tmp_path))
    assert digest.returncode == 2 and "--dashboard-image is needed" in digest.stderr
    no_ip = render_py("--spec", "specs/lab5.yaml", "--results", RESULTS, "--image", IMAGE,
                      "--iap-domain", "bench.example.com", "--dashboard-ip-name", "", "--out", str(tmp_path))
    assert no_ip.returncode == 2 and "--iap-domain needs --dashboard-ip-name" in no_ip.stderr


def test_checkov_passes_k8s_with_every_skip_explained():
    reports = checkov("--directory", "k8s", "--framework", "kubernetes", "kustomize")
    assert_clean(reports)
    assert {r["check_type"] for r in reports} == {"kubernetes", "kustomize"}
    print("\n".join(skips(reports)))


def test_checkov_passes_a_rendered_run_with_every_component(tmp_path):
    render(tmp_path, "--gpu", "h100", *IAP, run_id="lab5-checkov")
    reports = checkov("--directory", str(tmp_path / "lab5-checkov"), "--framework", "kubernetes")
    assert_clean(reports)


# --- issue 23: the nightly CronJob ---------------------------------------------------------------------------------

def test_the_nightly_cronjob_passes_strict_schema_validation(tmp_path, nightly):
    gpu, objects, _ = nightly
    assert sorted(o["kind"] for o in objects) == ["ConfigMap", "CronJob"]
    assert_strict_schema_valid(tmp_path / "nightly.yaml", objects)


def test_the_nightly_run_is_the_overlays_runner_and_its_gpu(nightly):
    """The run container, nodes, tolerations and volumes are the submitted Job's, per GPU; only the name differs."""
    gpu, objects, job = nightly
    cron = one(objects, "CronJob")
    assert cron["metadata"]["name"] == f"nightly-lab5-{gpu}" and cron["spec"]["schedule"] == "30 2 * * 1-5"
    pod, runner = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"], job["spec"]["template"]["spec"]
    (run, recheck), submitted = pod["initContainers"], runner["containers"][0]
    assert env_of(run) == env_of(submitted)  # the same settings, in another order (patched in another place)
    assert {k: v for k, v in run.items() if k != "env"} == {k: v for k, v in submitted.items() if k != "env"}
    differ = ("name", "args")  # the recheck measures on the run's GPU, under its env and mounts
    assert {k: v for k, v in recheck.items() if k not in differ} == {k: v for k, v in run.items() if k not in differ}
    assert pod["nodeSelector"] == node_selector(gpu) == runner["nodeSelector"]
    assert (pod["tolerations"], pod["volumes"]) == (runner["tolerations"], runner["volumes"])
    assert pod["serviceAccountName"] == runner["serviceAccountName"] and pod["restartPolicy"] == "Never"
    assert spec_text(objects) == (REPO / "specs/lab5.yaml").read_text()


def pod_environment(job: dict, container: dict) -> dict[str, str]:
    """The plain env a pod of this Job spec gives the container: its values, and JOB_COMPLETION_INDEX where
    Kubernetes sets it (an Indexed Job; the first index here)."""
    given = {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}
    return given | ({"JOB_COMPLETION_INDEX": "0"} if job.get("completionMode") == "Indexed" else {})


def test_the_runner_reads_its_shard_from_the_env_each_job_gives_it(nightly):
    """The submitted Job and the nightly's run both give the runner a shard it accepts (both halves of the pair,
    or neither), of the Job's completions: a half pair is refused with exit 2, which fails the Job at once."""
    from runner.shard import shard_from_env

    _, objects, job = nightly
    cron_job = one(objects, "CronJob")["spec"]["jobTemplate"]["spec"]
    run = cron_job["template"]["spec"]["initContainers"][0]
    for spec, container in ((job["spec"], job["spec"]["template"]["spec"]["containers"][0]), (cron_job, run)):
        shard = shard_from_env(pod_environment(spec, container))
        assert shard is not None and (shard.index, shard.count) == (0, spec["completions"])


def test_the_nightly_job_runs_the_spec_rechecks_it_then_compares_it_with_the_run_before(nightly):
    _, objects, _ = nightly
    pod = one(objects, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (run, recheck), (compare,) = pod["initContainers"], pod["containers"]
    run_env, compare_env = env_of(run), env_of(compare)
    assert run_env[RUN_ID_ENV] == compare_env[RUN_ID_ENV]  # B is the run just made: the Job's name
    assert run_env["ATTNBENCH_RESULTS"]["value"] == compare_env["ATTNBENCH_RESULTS"]["value"] == RESULTS
    assert run_env["ATTNBENCH_COMPILE_CACHE"]["value"] == f"{RESULTS}-jax-cache"
    values = {"ATTNBENCH_RESULTS": RESULTS, "ATTNBENCH_RUN_ID": "nightly-lab5-l4-29433600"}
    ran = build_parser().parse_args(expand(run["args"], values))
    assert (ran.command, ran.spec, ran.out) == ("run", SPEC_MOUNT, RESULTS)
    compared = build_parser().parse_args(expand(compare["args"], values))
    assert (compared.command, compared.runs, compared.against, compared.out, compared.report) == (
        "compare", ["nightly-lab5-l4-29433600"], "previous", RESULTS, None)  # the recheck wrote the report: once
    again = build_parser().parse_args(expand(recheck["args"], values))
    assert (again.command, again.run, again.against, again.out, again.report) == (
        "recheck", "nightly-lab5-l4-29433600", "previous", RESULTS, f"{RESULTS}/nightly-lab5-l4-29433600/report")
    assert "nvidia.com/gpu" not in compare["resources"]["limits"]  # the GPU is the run's; compare reads JSON


def test_the_nightly_job_the_regressions_page_names_is_one_the_default_schedule_makes():
    """A CronJob's Job is named for its scheduled minute since the epoch: the page's example is a night at the
    default schedule's hour (it named a midnight, where the CronJob runs at 03:00 UTC)."""
    from helpers import script

    minute, hour = script("k8s/render.py").SCHEDULE.split()[:2]
    named = re.findall(r"job/nightly-lab5-l4-(\d+)", (REPO / "docs" / "regressions.md").read_text())
    assert named and [int(m) % (24 * 60) for m in named] == [int(hour) * 60 + int(minute)] * len(named)


def test_the_nightly_job_fails_on_a_regression_and_retries_only_what_a_retry_can_fix(nightly):
    _, objects, _ = nightly
    cron = one(objects, "CronJob")["spec"]
    assert cron["concurrencyPolicy"] == "Forbid" and cron["timeZone"] == "Etc/UTC"
    job = cron["jobTemplate"]["spec"]
    # FailIndex needs backoffLimitPerIndex, which needs an Indexed Job (the API server refuses the CronJob without it)
    assert job["completionMode"] == "Indexed" and job["backoffLimitPerIndex"] >= 1
    assert job["podReplacementPolicy"] == "Failed"
    assert job["activeDeadlineSeconds"] > 0
    rules = job["podFailurePolicy"]["rules"]
    assert rules[0] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    by_container = {(r["action"], r["onExitCodes"]["containerName"]): r["onExitCodes"]["values"] for r in rules[1:]}
    assert by_container == {("FailJob", "attnbench"): [EXIT_INPUT], ("Ignore", "attnbench"): [EXIT_SIGTERM],
                            ("FailIndex", "attnbench"): [EXIT_NOT_RESUMABLE],
                            ("FailJob", "recheck"): [EXIT_REGRESSION, EXIT_INPUT], ("Ignore", "recheck"): [EXIT_SIGTERM],
                            ("FailIndex", "recheck"): [EXIT_NOT_RESUMABLE],
                            ("FailJob", "compare"): [EXIT_REGRESSION, EXIT_INPUT]}


def test_a_digest_pinned_nightly_pulls_its_image_as_the_job_does(tmp_path, nightly):
    """The run, recheck and compare containers of a pinned nightly pull once per node, as a pinned Job's; by tag, every
    night."""
    gpu, objects, _ = nightly
    digest = "sha256:" + "0" * 64
    render_nightly(tmp_path, gpu, "--image", f"{IMAGE}@{digest}")

    def containers(cron_objects: list[dict]) -> list[dict]:
        pod = one(cron_objects, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        return pod["initContainers"] + pod["containers"]

    pinned = containers(list(yaml.safe_load_all((tmp_path / "lab5-nightly" / "nightly.yaml").read_text())))
    assert [c["name"] for c in pinned] == ["attnbench", "recheck", "compare"]
    assert {c["image"] for c in pinned} == {f"{IMAGE.rpartition(':')[0]}@{digest}"}
    assert [c["imagePullPolicy"] for c in pinned] == ["IfNotPresent"] * 3
    assert [c["imagePullPolicy"] for c in containers(objects)] == ["Always"] * 3


def test_checkov_passes_the_rendered_nightly_cronjob(tmp_path):
    render_nightly(tmp_path, "h100")
    reports = checkov("--directory", str(tmp_path / "lab5-nightly"), "--framework", "kubernetes")
    assert_clean(reports)
    checked = {c["resource"] for r in reports for c in r["results"]["passed_checks"]}
    assert "CronJob.attnbench.nightly-lab5-h100" in checked, sorted(checked)


def make_nightly(tmp_path: Path, target: str, *settings: str) -> Path:
    """`make TARGET SETTINGS` of lab5's nightly on l4, scheduled 15 4 * * *, into tmp_path/out, with a kubectl that
    renders as the real one does and records what it is told to apply (no cluster from here) in tmp_path/applied;
    the nightly.yaml it wrote."""
    kubectl = tmp_path / "bin" / "kubectl"
    kubectl.parent.mkdir(parents=True)
    kubectl.write_text(f'#!/bin/sh\nif [ "$1" = kustomize ]; then exec {tool("kubectl")} "$@"; fi\n'
                       f'echo "$@" >> {tmp_path / "applied"}\n')
    kubectl.chmod(0o755)
    done = subprocess.run(
        ["make", "--no-print-directory", "--old-file=.venv/.installed", target, *settings, f"RESULTS_URI={RESULTS}",
         f"IMAGE={IMAGE}", f"KUBECTL={kubectl}", f"RENDER_DIR={tmp_path / 'out'}", "RUN=lab5-make-nightly",
         "SCHEDULE=15 4 * * *"],
        cwd=REPO, capture_output=True, text=True, env={**os.environ, "MAKEFLAGS": ""})
    assert done.returncode == 0, done.stdout + done.stderr
    nightly = tmp_path / "out" / "lab5-make-nightly" / "nightly.yaml"
    cron = one(list(yaml.safe_load_all(nightly.read_text())), "CronJob")
    assert (cron["metadata"]["name"], cron["spec"]["schedule"]) == ("nightly-lab5-l4", "15 4 * * *")
    return nightly


def test_make_nightly_renders_and_applies_the_cronjob(tmp_path):
    nightly = make_nightly(tmp_path, "nightly", "SPEC=specs/lab5.yaml", "GPU=l4")
    assert (tmp_path / "applied").read_text() == f"apply -f {nightly}\n"


def test_make_render_nightly_writes_the_cronjob_make_nightly_applies_and_applies_nothing(tmp_path):
    """Reviewing the nightly before `make nightly` applies it took render.py's own flags by hand."""
    lab5 = ("SPEC=specs/lab5.yaml", "GPU=l4")
    reviewed = make_nightly(tmp_path / "render", "render", *lab5, "NIGHTLY=1")
    assert not (tmp_path / "render" / "applied").exists()
    assert reviewed.read_text() == make_nightly(tmp_path / "nightly", "nightly", *lab5).read_text()


def test_make_render_takes_nightly_1_for_the_nightly_and_0_for_none(tmp_path):
    """NIGHTLY=0 rendered the nightly too, as any value did; a value neither 1 nor 0 (NIGHTLY=yes) stops make."""
    said = {value: planned(tmp_path, "render", f"IMAGE={IMAGE}", f"RESULTS_URI={RESULTS}", f"NIGHTLY={value}")
            for value in ("1", "0", "", "yes")}
    assert ["--nightly" in said[value].stdout for value in ("1", "0", "")] == [True, False, False]
    assert said["yes"].returncode == 2 and said["yes"].stdout == ""
    assert re.fullmatch(r"Makefile:\d+: \*\*\* NIGHTLY=yes: give NIGHTLY=1 to render the nightly too, or NIGHTLY=0.  "
                        r"Stop.\n", said["yes"].stderr)


def test_render_refuses_a_nightly_it_cannot_run(tmp_path):
    done = render_py("--spec", "specs/lab5.yaml", "--results", RESULTS, "--image", IMAGE, "--nightly", "--shards", "2",
                     "--schedule", "nightly", "--out", str(tmp_path))
    assert done.returncode == 2
    for problem in ("--nightly runs the spec as one pod", "--schedule must be five cron fields"):
        assert problem in done.stderr
    apply = render_py("--spec", "specs/lab5.yaml", "--results", RESULTS, "--image", IMAGE, "--apply", "nightly",
                      "--out", str(tmp_path))
    assert apply.returncode == 2 and "--apply nightly needs --nightly" in apply.stderr


def test_render_counts_the_families_a_spec_expands_to_not_its_sweep_points(tmp_path):
    """pass [fwd, fwd_bwd] x window [null, 8] is 4 cells in 2 families (a forward cell takes its forward+backward
    twin's inputs and reference), so two shards: a third would be a GPU pod with no cell. A paged cell is a family of
    its own (its pools are drawn as they are, not from its dense twin's cache)."""
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({"name": "x", "defaults": {"seq_len": 64, "causal": True}, "experiments": [
        {"name": "e", "variants": ["xla"], "sweep": {"pass": ["fwd", "fwd_bwd"], "window": [None, 8]}}]}))
    three = render_py("--spec", str(spec), "--shards", "3", "--results", RESULTS, "--image", IMAGE, "--out", str(tmp_path))
    assert three.returncode == 2 and "3 shards for the spec's 4 cells in 2 families " in three.stderr
    assert render_py("--spec", str(spec), "--shards", "2", "--results", RESULTS, "--image", IMAGE,
                     "--out", str(tmp_path)).returncode == 0
    paged = tmp_path / "p.yaml"
    paged.write_text(yaml.safe_dump({"name": "p", "defaults": {"seq_len": 1, "kv_seq_len": 64, "kv_lengths": "equal"},
                                     "experiments": [{"name": "e", "variants": ["xla"], "sweep": {
                                         "page_size": [None, 16], "page_order": ["contiguous", "shuffled"]}}]}))
    four = render_py("--spec", str(paged), "--shards", "4", "--results", RESULTS, "--image", IMAGE, "--out", str(tmp_path))
    assert four.returncode == 2 and "4 shards for the spec's 3 cells in 3 families " in four.stderr
