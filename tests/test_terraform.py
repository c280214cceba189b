"""terraform/: formatted (terraform fmt), parsed (python-hcl2; providers cannot be downloaded here, so no
`terraform validate`), clean under checkov, and holding the platform's promises: Workload Identity, GPU pools that
scale from zero with GKE's driver, a private versioned bucket, and least-privilege grants to the two KSAs."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import hcl2
import pytest
import yaml

import provider_schema
from deploy_tools import assert_clean, checkov, kustomize, skips, terraform, tool
from helpers import REPO
from provider_schema import META_ARGUMENTS, problems, unquote

TERRAFORM = REPO / "terraform"


def plain(value):
    """python-hcl2's output without its quoting of names and strings, and without its __markers__."""
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items() if not k.startswith("__")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


@pytest.fixture(scope="module")
def config() -> dict:
    """Every block of every .tf file, merged by block type."""
    merged: dict[str, list] = {}
    for path in sorted(TERRAFORM.glob("*.tf")):
        with path.open() as f:
            for kind, blocks in plain(hcl2.load(f)).items():
                merged.setdefault(kind, []).extend(blocks)
    return merged


def resource(config: dict, kind: str, name: str) -> dict:
    for block in config["resource"]:
        if kind in block and name in block[kind]:
            return block[kind][name]
    raise AssertionError(f"no resource {kind}.{name}")


def first(value):
    """python-hcl2 gives a nested block as a list of one dict."""
    return value[0] if isinstance(value, list) else value


def test_terraform_fmt_check():
    done = subprocess.run([terraform(), "fmt", "-check", "-recursive", "-diff"], cwd=TERRAFORM,
                          capture_output=True, text=True)
    assert done.returncode == 0, f"run `terraform -chdir=terraform fmt`:\n{done.stdout}{done.stderr}"


def test_every_variable_is_described_and_the_free_ones_validated(config):
    variables = {name: body for block in config["variable"] for name, body in block.items()}
    assert all(body.get("description") for body in variables.values())
    unvalidated = {name for name, body in variables.items() if "validation" not in body and "default" not in body}
    assert not unvalidated, f"inputs without a default need a validation: {unvalidated}"
    example = (TERRAFORM / "terraform.tfvars.example").read_text()
    named = set(re.findall(r"^#?\s*(\w+)\s*=", example, re.MULTILINE))
    assert named <= variables.keys(), f"terraform.tfvars.example names unknown variables: {named - variables.keys()}"
    required = {name for name, body in variables.items() if "default" not in body}
    assert required <= set(re.findall(r"^(\w+)\s*=", example, re.MULTILINE)), "the example must set every required one"


def test_cluster_has_workload_identity_release_channel_and_shielded_nodes(config):
    cluster = resource(config, "google_container_cluster", "this")
    assert first(cluster["workload_identity_config"])["workload_pool"] == "${var.project_id}.svc.id.goog"
    assert first(cluster["release_channel"])["channel"] == "${var.release_channel}"
    assert cluster["enable_shielded_nodes"] is True
    assert cluster["remove_default_node_pool"] is True


def test_the_deleted_default_pools_node_config_is_never_a_change(config):
    """The provider reads node_config back from the cluster, where the pool it shaped is gone: left unignored, the
    block (which forces replacement) differs on every later plan, and each apply would replace the cluster."""
    cluster = resource(config, "google_container_cluster", "this")
    assert cluster["remove_default_node_pool"] is True and "node_config" in cluster
    assert "node_config" in first(cluster["lifecycle"]).get("ignore_changes", [])


def test_gpu_pools_scale_from_zero_with_gke_installed_driver_and_taints(config):
    pool = resource(config, "google_container_node_pool", "gpu")
    assert first(pool["autoscaling"])["total_min_node_count"] == 0
    node = first(pool["node_config"])
    accelerator = first(node["guest_accelerator"])
    assert first(accelerator["gpu_driver_installation_config"])["gpu_driver_version"] == \
        "${var.gpu_driver_version}"
    assert node["spot"] == "${var.spot}"
    assert first(node["taint"])["key"] == "nvidia.com/gpu"
    assert first(node["workload_metadata_config"])["mode"] == "GKE_METADATA"
    pools = next(block["gpu_pools"] for block in config["locals"] if "gpu_pools" in block)
    assert node["machine_type"] == "${each.value.machine_type}"
    assert pools["l4"] == {"machine_type": "${var.l4_machine_type}", "accelerator": "nvidia-l4",
                           "max_nodes": "${var.l4_max_nodes}", "zones": "${var.zones}"}
    assert pools["h100"]["machine_type"] == "a3-highgpu-1g"
    assert node["spot"] == "${var.spot}" and pool["node_locations"] == "${each.value.zones}"


def test_gpu_pools_stream_the_image_through_the_api_it_needs(config):
    """A cold GPU node would otherwise pull the runner's ~7.6 GB layer whole before the pod starts."""
    node = first(resource(config, "google_container_node_pool", "gpu")["node_config"])
    assert first(node["gcfs_config"])["enabled"] is True and node["image_type"] == "COS_CONTAINERD"
    services = {s for block in config["locals"] if "services" in block for s in block["services"]}
    assert "containerfilesystem.googleapis.com" in services


def test_h100_pool_is_spot_only_in_zones_of_its_own(config):
    pool = resource(config, "google_container_node_pool", "gpu")
    rules = [first(rule) for rule in first(pool["lifecycle"])["precondition"]]
    assert [rule["condition"] for rule in rules] == ['${each.key != "h100" || var.spot}']
    pools = next(block["gpu_pools"] for block in config["locals"] if "gpu_pools" in block)
    assert pools["h100"]["zones"] == "${coalescelist(var.h100_zones, var.zones)}"


def test_results_bucket_is_private_versioned_and_expires_old_versions(config):
    bucket = resource(config, "google_storage_bucket", "results")
    assert bucket["uniform_bucket_level_access"] is True
    assert bucket["public_access_prevention"] == "enforced"
    assert first(bucket["versioning"])["enabled"] is True
    assert any("days_since_noncurrent_time" in first(rule["condition"]) for rule in bucket["lifecycle_rule"])


def test_runner_writes_and_dashboard_only_reads_through_wif_principals(config):
    runner = resource(config, "google_storage_bucket_iam_member", "runner_objects")
    dashboard = resource(config, "google_storage_bucket_iam_member", "dashboard_objects")
    assert runner["role"] == "roles/storage.objectUser"
    assert dashboard["role"] == "roles/storage.objectViewer"
    for grant in (runner, dashboard):
        assert grant["bucket"] == "${google_storage_bucket.results.name}"
    principal = next(block["ksa_principal"] for block in config["locals"] if "ksa_principal" in block)
    assert principal.startswith("principal://iam.googleapis.com/projects/${data.google_project.this.number}"
                                "/locations/global/workloadIdentityPools/")
    assert principal.endswith("/subject/ns/${local.namespace}/sa")
    namespace = next(block["namespace"] for block in config["locals"] if "namespace" in block)
    assert namespace == yaml.safe_load((REPO / "k8s/base/kustomization.yaml").read_text())["namespace"]
    granted = {k for block in config["resource"] for k in block}
    assert "google_service_account_key" not in granted, "no keys: Workload Identity only"


def test_the_runner_may_read_the_buckets_metadata_for_the_compile_cache(config):
    """gcsfs asks for storage.buckets.get as JAX's cache starts; objectUser lacks it (legacyBucketReader has it)."""
    grant = resource(config, "google_storage_bucket_iam_member", "runner_bucket_metadata")
    assert grant["role"] == "roles/storage.legacyBucketReader"
    assert grant["bucket"] == "${google_storage_bucket.results.name}"
    assert grant["member"] == resource(config, "google_storage_bucket_iam_member", "runner_objects")["member"]


def test_outputs_feed_the_makefile(config):
    outputs = {name for block in config["output"] for name in block}
    makefile = (REPO / "Makefile").read_text()
    for name in ("image_repository", "results_uri", "dashboard_ip_name"):
        assert name in outputs and f"$(call terraform_output,{name})" in makefile


def test_next_steps_build_and_push_as_the_runbook_does(config):
    outputs = {name: body for block in config["output"] for name, body in block.items()}
    assert outputs["image_repository"]["value"] == "${local.image_repository}"
    steps = outputs["next_steps"]["value"]
    assert 'REGISTRY="${local.image_repository}"' in steps
    builds = [line.strip() for line in steps.splitlines() if "docker" in line and "build" in line]
    runbook = (REPO / "docs" / "gke.md").read_text()
    assert len(builds) == 2 and all("buildx build --platform linux/amd64" in b and b in runbook for b in builds)


def test_next_steps_submit_a_shard_count_render_accepts(config, tmp_path):
    """next_steps' `make submit` of specs/lab5.yaml asks for at most the spec's families, which render.py refuses to
    exceed, at every l4_max_nodes terraform admits (1..64): terraform itself evaluates the printed count."""
    from runner.cells import expand
    from runner.registry import load_all
    from runner.shard import families
    from runner.spec import load_spec

    lab5 = REPO / "specs" / "lab5.yaml"
    most = len(families(expand(load_spec(lab5, set(load_all())))))
    declared = {name: value for block in config["locals"] for name, value in block.items()}
    assert declared["lab5_families"] == most, f"specs/lab5.yaml has {most} families: set local.lab5_families"
    steps = next(block["next_steps"] for block in config["output"] if "next_steps" in block)["value"]
    submit = re.search(r"make submit SPEC=specs/lab5\.yaml SHARDS=\$\{(.+?)\}\n", steps)
    assert submit, "next_steps submits specs/lab5.yaml with a SHARDS count terraform works out"
    (tmp_path / "variables.tf").write_text((TERRAFORM / "variables.tf").read_text())
    (tmp_path / "locals.tf").write_text(f"locals {{\n  lab5_families = {declared['lab5_families']}\n}}\n")
    printed = {}
    for nodes in (1, 4, 64):
        done = subprocess.run([terraform(), "console", "-no-color", "-var", f"l4_max_nodes={nodes}"], cwd=tmp_path,
                              input=submit.group(1), capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        printed[nodes] = int(done.stdout)
    assert printed == {1: 1, 4: min(4, most), 64: most}
    rendered = subprocess.run([sys.executable, "k8s/render.py", "--spec", str(lab5), "--shards", str(printed[64]),
                               "--results", "gs://b/results", "--image", "r/attnbench:runner-t", "--kubectl",
                               tool("kubectl"), "--out", str(tmp_path / "k8s")], cwd=REPO, capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr


def test_checkov_passes_terraform_with_every_skip_explained():
    reports = checkov("--directory", "terraform", "--framework", "terraform")
    assert_clean(reports)
    print("\n".join(skips(reports)))


# ---- the GPUs the docs offer against the pools terraform makes ------------------------------------------------------

NO_POOL = "no node pool"  # what the docs say of an overlay terraform makes no pool for
SUBMIT = re.compile(r"^\s+make (?:submit|nightly|render) .*\bGPU=(\S+)", re.MULTILINE)


def pool_needs(config: dict) -> dict[str, str | None]:
    """Each overlay under k8s/overlays -> what it needs from terraform: None where the defaults make its pool, the
    variable that sizes its pool where that defaults to 0 nodes, NO_POOL where terraform makes none."""
    pools = next(block["gpu_pools"] for block in config["locals"] if "gpu_pools" in block)
    defaults = {name: body.get("default") for block in config["variable"] for name, body in block.items()}
    needs = {}
    for overlay in sorted(p.name for p in (REPO / "k8s" / "overlays").iterdir()):
        sized_by = re.fullmatch(r"\$\{var\.(\w+)\}", pools[overlay]["max_nodes"]).group(1) if overlay in pools else None
        needs[overlay] = NO_POOL if sized_by is None else (sized_by if not defaults[sized_by] else None)
    return needs


def sections(text: str) -> list[str]:
    return re.split(r"^#+ ", text, flags=re.MULTILINE)


def test_a_command_on_a_gpu_without_a_default_pool_says_what_it_needs(config):
    """A GPU pool that terraform's defaults do not make leaves the pod Pending (a nightly's fails DeadlineExceeded
    after 6 h): a `make submit/nightly GPU=X` line in the docs stands in a section that names what X needs."""
    needs = pool_needs(config)
    assert needs["l4"] is None and needs["h100"] == "h100_max_nodes" and needs["h100-x8"] == NO_POOL
    found = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for section in sections(page.read_text()):
            found += [f"{page.name}: GPU={gpu} without `{needs[gpu]}` in its section ({section.splitlines()[0]})"
                      for gpu in SUBMIT.findall(section) if needs[gpu] and needs[gpu] not in section]
    assert not found, "\n".join(found)


def test_the_runbook_lists_every_overlay_and_component_and_what_each_gpu_needs(config):
    runbook = (REPO / "docs" / "gke.md").read_text()
    where = next(p for p in runbook.split("\n\n") if p.startswith("What is where"))
    for kind in ("overlays", "components"):
        for folder in (REPO / "k8s" / kind).iterdir():
            assert f"`{folder.name}`" in where or f"k8s/{kind}/{folder.name}`" in where, f"What is where: {kind}/{folder.name}"
    row = next(line for line in runbook.splitlines() if line.startswith("| `GPU` |"))
    for overlay, need in pool_needs(config).items():
        assert f"`{overlay}`" in row and (need is None or f"{need}" in row), f"the GPU row on {overlay}: {need}"


# ---- the google provider's schema ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def schema() -> provider_schema.Schema:
    return provider_schema.load()


def raw_blocks() -> list[tuple[str, str, str, dict]]:
    """(kind, type, name, body) of every resource and data block, as python-hcl2 parses them (nested blocks marked)."""
    found = []
    for path in sorted(TERRAFORM.glob("*.tf")):
        with path.open() as f:
            parsed = hcl2.load(f)
        for kind in ("resource", "data"):
            for block in parsed.get(kind, []):
                for kind_type, named in block.items():
                    found += [(kind, unquote(kind_type), unquote(name), body) for name, body in named.items()]
    return found


def test_versions_pin_the_provider_release_whose_schema_is_checked(schema):
    pinned = (TERRAFORM / "versions.tf").read_text()
    minor = ".".join(schema.provider_version.split(".")[:2])
    assert f'version = "~> {minor}"' in pinned, f"pin hashicorp/google to ~> {minor}: the schema checked is {minor}"


def test_every_argument_and_block_is_the_google_providers(schema):
    blocks = raw_blocks()
    assert {kind for kind, *_ in blocks} == {"resource", "data"}
    found = []
    for kind, kind_type, name, body in blocks:
        fqn = schema.bodies.get((kind, kind_type))
        assert fqn, f"{kind}.{kind_type} is no resource or data source of the google provider {schema.provider_version}"
        found += problems(schema, fqn, body, f"{kind_type}.{name}", frozenset(META_ARGUMENTS))
    assert not found, "\n".join(found)


def test_a_misspelt_argument_or_misnested_block_is_caught(schema):
    cluster = next(body for _, kind_type, _, body in raw_blocks() if kind_type == "google_container_cluster")
    fqn = schema.bodies[("resource", "google_container_cluster")]
    misspelt = {**cluster, "node_locatons": cluster["node_locations"]}
    assert problems(schema, fqn, misspelt, "c", frozenset(META_ARGUMENTS)) == \
        [f"c: no argument 'node_locatons' in the google provider {schema.provider_version}"]
    nested = {**cluster, "release_channel": [{"channel": [{"__is_block__": True}], "__is_block__": True}]}
    assert problems(schema, fqn, nested, "c", frozenset(META_ARGUMENTS)) == \
        ["c.release_channel.channel: an attribute (name = value), not a block"]


# ---- dependency rules: what a fresh project needs first -----------------------------------------------------------

# The API each kind of resource calls; a new kind of resource needs its line here (and its API in local.services).
API_OF = {
    "google_artifact_registry_": "artifactregistry.googleapis.com",
    "google_compute_": "compute.googleapis.com",
    "google_container_": "container.googleapis.com",
    "google_project_iam_": "cloudresourcemanager.googleapis.com",
    "google_project": "cloudresourcemanager.googleapis.com",  # the data source
    "google_service_account": "iam.googleapis.com",
    "google_storage_": "storage.googleapis.com",
}
ENABLER = "google_project_service.this"
REFERENCE = re.compile(r"\b(data\.)?(google_\w+)\.(\w+)")
POOL_ATTRIBUTE = "google_container_cluster.this.workload_identity_config[0].workload_pool"


def expanded(config: dict) -> dict[str, str]:
    """Every resource and data block's text by address, with each local.NAME replaced by that local's own text."""
    local_text = {name: json.dumps(value) for block in config["locals"] for name, value in block.items()}

    def expand(text: str, depth: int = 0) -> str:
        assert depth < 10, "locals refer to each other in a cycle"
        return re.sub(r"\blocal\.(\w+)", lambda m: expand(local_text[m.group(1)], depth + 1), text)

    found = {}
    for kind in ("resource", "data"):
        for block in config[kind]:
            for kind_type, named in block.items():
                prefix = "data." if kind == "data" else ""
                found |= {f"{prefix}{kind_type}.{name}": expand(json.dumps(body)) for name, body in named.items()}
    return found


def waits_for(address: str, texts: dict[str, str]) -> set[str]:
    """Everything `address` comes after: the blocks it refers to or depends on, and theirs, transitively."""
    seen, todo = set(), [address]
    while todo:
        for match in REFERENCE.finditer(texts[todo.pop()]):
            found = f"{match.group(1) or ''}{match.group(2)}.{match.group(3)}"
            if found in texts and found not in seen:
                seen.add(found)
                todo.append(found)
    return seen


def api_of(address: str) -> str:
    kind_type = address.removeprefix("data.").split(".")[0]
    prefix = max((p for p in API_OF if kind_type.startswith(p)), key=len, default=None)
    assert prefix, f"{address}: which API does it call? add its kind to API_OF"
    return API_OF[prefix]


def test_every_api_backed_resource_waits_for_the_api_it_calls(config):
    texts = expanded(config)
    services = {s for block in config["locals"] if "services" in block for s in block["services"]}
    needed = {api_of(address) for address in texts if address != ENABLER}
    needed |= {"iap.googleapis.com", "cloudresourcemanager.googleapis.com"}  # the runbook's step 6
    found = [f"local.services lacks {api}" for api in sorted(needed - services)]
    found += [f"{address} does not wait for {ENABLER} ({api_of(address)})" for address in sorted(set(texts) - {ENABLER})
              if ENABLER not in waits_for(address, texts)]
    assert not found, "\n".join(found)


def test_the_runbook_names_every_api_terraform_enables(config):
    """gke.md's step 3 lists the APIs terraform enables itself; it had left out containerfilesystem (image
    streaming)."""
    from helpers import REPO

    services = sorted(s.removesuffix(".googleapis.com") for block in config["locals"] if "services" in block
                      for s in block["services"])
    named = re.search(r"Terraform enables everything else itself\s+\(([^)]*)\)", (REPO / "docs" / "gke.md").read_text())
    assert named and sorted(named[1].replace(",", " ").split()) == services


def test_workload_identity_principals_take_the_pool_from_the_cluster(config):
    texts = expanded(config)
    principals = {address for address, text in texts.items() if "workloadIdentityPools" in text}
    assert principals == {"google_storage_bucket_iam_member.runner_objects",
                          "google_storage_bucket_iam_member.runner_bucket_metadata",
                          "google_storage_bucket_iam_member.dashboard_objects"}
    for address in principals:
        assert POOL_ATTRIBUTE in texts[address] and "svc.id.goog" not in texts[address], \
            f"{address}: the pool must be the cluster's ({POOL_ATTRIBUTE}), which exists only once the cluster does"


# ---- node sizes: the Job's requests against what GKE leaves pods on each machine type ------------------------------

MACHINES = {  # Compute Engine's accelerator-optimized types: vCPUs, memory in GiB (the machine-types API's memoryMb / 1024)
    "g2-standard-4": (4, 16), "g2-standard-8": (8, 32), "g2-standard-12": (12, 48), "g2-standard-16": (16, 64),
    "g2-standard-32": (32, 128), "a3-highgpu-1g": (26, 234),
}
# GKE's reservations (docs, "Plan GKE node sizes", memory and CPU reservations): tiers of (size, share reserved).
CPU_TIERS = [(1, 0.06), (1, 0.01), (2, 0.005), (float("inf"), 0.0025)]
MEMORY_TIERS = [(4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02)]
EVICTION_GIB = 100 / 1024
# Left for GKE's own DaemonSets on a GPU node (logging, metadata server, device plugin, Dataplane V2): our allowance,
# not a published figure; a node whose allocatable leaves less than this may still not take the Job.
SYSTEM_PODS = (1.0, 2.0)  # vCPU, GiB


def reserved(size: float, tiers: list[tuple[float, float]]) -> float:
    total = 0.0
    for width, share in tiers:
        total += min(size, width) * share
        size -= min(size, width)
    return total


def allocatable(machine: str) -> tuple[float, float]:
    """vCPU and GiB GKE leaves for pods on `machine`."""
    vcpus, gib = MACHINES[machine]
    return vcpus - reserved(vcpus, CPU_TIERS), gib - reserved(gib, MEMORY_TIERS) - EVICTION_GIB


def job_requests(gpu: str) -> tuple[float, float]:
    """The overlay's runner Job: requested vCPU and GiB."""
    job = next(o for o in kustomize(REPO / "k8s" / "overlays" / gpu) if o["kind"] == "Job")
    requests = job["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests["memory"].endswith("Gi"), "requests in whole Gi keep this comparison simple"
    return float(requests["cpu"]), float(requests["memory"][:-2])


def fits(requests: tuple[float, float], machine: str) -> bool:
    return all(r + system <= free for r, system, free in zip(requests, SYSTEM_PODS, allocatable(machine)))


def admits(condition: str, value: str) -> bool:
    """A variable's validation, evaluated for `value`: `contains([...], var.x)` or `can(regex("...", var.x))`."""
    if listed := re.fullmatch(r"\$\{contains\((\[.*\]), var\.\w+\)\}", condition):
        return value in json.loads(listed.group(1))
    pattern = re.fullmatch(r'\$\{can\(regex\("(.+)", var\.\w+\)\)\}', condition).group(1)
    return re.search(pattern, value) is not None


def test_allocatable_follows_the_tiers():
    # Worked by hand from the tiers: 4 vCPU keep 60 + 10 + 2 x 5 = 80 m; 32 GiB keep 1 + 0.8 + 0.8 + 16 x 0.06 GiB.
    assert round(4 - allocatable("g2-standard-4")[0], 3) == 0.08
    assert round(32 - allocatable("g2-standard-8")[1] - EVICTION_GIB, 3) == 3.56


def test_the_allocatable_figures_said_are_the_formulas(config):
    """terraform's l4_machine_type description said g2-standard-4 leaves 12 GiB where gke.md's formula gives 13.3: each
    'MACHINE ... about V vCPU and G GiB' said in gke.md's Node sizes and in that description is allocatable's."""
    variable = next(block["l4_machine_type"] for block in config["variable"] if "l4_machine_type" in block)
    node_sizes = (REPO / "docs" / "gke.md").read_text().split("## Node sizes")[1].split("\n## ")[0]
    figures = r"([a-z0-9]+-[a-z0-9-]+)`?(?:'s allocatable \(|'s | leaves | )about ([\d.]+) vCPU(?:,| and) ([\d.]+) GiB"
    said = re.findall(figures, " ".join((variable["description"] + " " + node_sizes).split()))
    assert {machine for machine, _, _ in said} == {"g2-standard-4", "g2-standard-8", "a3-highgpu-1g"}, said
    assert len(said) == 4, said  # g2-standard-4 in both
    for machine, vcpus, gib in said:
        digits = len(gib.partition(".")[2])
        assert (vcpus, gib) == (f"{allocatable(machine)[0]:.1f}", f"{allocatable(machine)[1]:.{digits}f}"), machine


def test_the_jobs_requests_fit_every_machine_type_terraform_admits(config):
    variable = next(block["l4_machine_type"] for block in config["variable"] if "l4_machine_type" in block)
    condition = first(variable["validation"])["condition"]
    admitted = [machine for machine in MACHINES if admits(condition, machine)]
    l4 = job_requests("l4")
    assert variable["default"] in admitted
    assert [m for m in admitted if not fits(l4, m)] == [], f"the L4 Job's {l4} does not fit these"
    rejected = [m for m in MACHINES if m.startswith("g2-") and m not in admitted]
    assert rejected == ["g2-standard-4"] and not fits(l4, "g2-standard-4"), "reject exactly the G2 types it cannot fit"
    pools = next(block["gpu_pools"] for block in config["locals"] if "gpu_pools" in block)
    assert fits(job_requests("h100"), pools["h100"]["machine_type"])
