"""terraform/: formatted (terraform fmt), parsed (python-hcl2; providers cannot be downloaded here, so no
`terraform validate`), clean under checkov, and holding the platform's promises: Workload Identity, GPU pools that
scale from zero with GKE's driver, a private versioned bucket, and least-privilege grants to the two KSAs."""

from __future__ import annotations

import re
import subprocess

import hcl2
import pytest
import yaml

from deploy_tools import assert_clean, checkov, skips, terraform
from helpers import REPO

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
    assert first(cluster["workload_identity_config"])["workload_pool"] == "${local.workload_pool}"
    assert first(cluster["release_channel"])["channel"] == "${var.release_channel}"
    assert cluster["enable_shielded_nodes"] is True
    assert cluster["remove_default_node_pool"] is True


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
                           "max_nodes": "${var.l4_max_nodes}"}


def test_l4_machine_type_admits_only_one_gpu_g2_types(config):
    variable = next(block["l4_machine_type"] for block in config["variable"] if "l4_machine_type" in block)
    condition = first(variable["validation"])["condition"]
    pattern = re.fullmatch(r'\$\{can\(regex\("(.+)", var\.l4_machine_type\)\)\}', condition).group(1)
    admitted = [t for t in ("g2-standard-4", "g2-standard-8", "g2-standard-32", "g2-standard-48", "g2-standard-96",
                            "a2-highgpu-1g", "n1-standard-8", "xg2-standard-8") if re.search(pattern, t)]
    assert admitted == ["g2-standard-4", "g2-standard-8", "g2-standard-32"]
    assert re.search(pattern, variable["default"])


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


def test_outputs_feed_the_makefile(config):
    outputs = {name for block in config["output"] for name in block}
    makefile = (REPO / "Makefile").read_text()
    for name in ("image_repository", "results_uri", "dashboard_ip_name"):
        assert name in outputs and f"output -raw {name}" in makefile


def test_next_steps_build_and_push_as_the_readme_does(config):
    outputs = {name: body for block in config["output"] for name, body in block.items()}
    assert outputs["image_repository"]["value"] == "${local.image_repository}"
    steps = outputs["next_steps"]["value"]
    assert 'REGISTRY="${local.image_repository}"' in steps
    builds = [line.strip() for line in steps.splitlines() if "docker" in line and "build" in line]
    readme = (REPO / "README.md").read_text()
    assert len(builds) == 2 and all("buildx build --platform linux/amd64" in b and b in readme for b in builds)


def test_checkov_passes_terraform_with_every_skip_explained():
    reports = checkov("--directory", "terraform", "--framework", "terraform")
    assert_clean(reports)
    print("\n".join(skips(reports)))
