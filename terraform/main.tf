# A GKE Standard cluster for attnbench: Workload Identity, a release channel, shielded nodes, private nodes,
# Dataplane V2 (enforces the k8s/ network policies), a small CPU pool for the dashboard and GPU pools that
# scale from zero, with the NVIDIA driver installed by GKE.

data "google_project" "this" {
  depends_on = [google_project_service.this] # reads the project through Cloud Resource Manager
}

locals {
  # Every API a resource here calls, and the two the runbook needs: iap (dashboard, step 6) and
  # cloudresourcemanager (project IAM grants, the project lookup), and containerfilesystem, which the GPU pools'
  # image streaming reads images through. Each API-backed resource depends on these.
  services = [
    "artifactregistry.googleapis.com", "cloudresourcemanager.googleapis.com", "compute.googleapis.com",
    "container.googleapis.com", "containerfilesystem.googleapis.com", "iam.googleapis.com", "iap.googleapis.com",
    "storage.googleapis.com",
  ]
  namespace  = "attnbench" # every manifest in k8s/ names it (k8s/base/kustomization.yaml): not a variable
  labels     = { app = "attnbench", managed-by = "terraform" }
  node_roles = ["roles/logging.logWriter", "roles/monitoring.metricWriter", "roles/monitoring.viewer", "roles/stackdriver.resourceMetadata.writer"]
  # authorized_cidr, the single CIDR of earlier versions, is still read, so an old terraform.tfvars keeps working.
  authorized_cidrs = distinct(concat(var.authorized_cidrs, var.authorized_cidr == null ? [] : [var.authorized_cidr]))
  gpu_pools = {
    l4   = { machine_type = var.l4_machine_type, accelerator = "nvidia-l4", max_nodes = var.l4_max_nodes, zones = var.zones }
    h100 = { machine_type = "a3-highgpu-1g", accelerator = "nvidia-h100-80gb", max_nodes = var.h100_max_nodes, zones = coalescelist(var.h100_zones, var.zones) }
  }
  # Where images are pushed and pulled (make's REGISTRY): the one spelling of the Artifact Registry path.
  image_repository = "${var.region}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
}

resource "google_project_service" "this" {
  for_each           = toset(local.services)
  service            = each.value
  disable_on_destroy = false
}

resource "google_compute_network" "this" {
  name                    = var.name
  auto_create_subnetworks = false
  depends_on              = [google_project_service.this]
}

resource "google_compute_subnetwork" "this" {
  name                     = var.name
  network                  = google_compute_network.this.id
  region                   = var.region
  ip_cidr_range            = "10.10.0.0/20"
  private_ip_google_access = true # private nodes reach Artifact Registry, GCS and the driver installer without NAT
  secondary_ip_range {
    range_name    = "pods"
    ip_cidr_range = "10.16.0.0/14"
  }
  secondary_ip_range {
    range_name    = "services"
    ip_cidr_range = "10.20.0.0/20"
  }
  log_config {
    aggregation_interval = "INTERVAL_10_MIN"
    flow_sampling        = 0.5
    metadata             = "INCLUDE_ALL_METADATA"
  }
}

# Written out though it is also the implied rule: nothing from outside reaches the nodes; GKE adds the narrow
# allow rules it needs (control plane, load-balancer health checks) at higher priority.
resource "google_compute_firewall" "deny_ingress" {
  name          = "${var.name}-deny-ingress"
  network       = google_compute_network.this.id
  direction     = "INGRESS"
  priority      = 65534
  source_ranges = ["0.0.0.0/0"]
  deny {
    protocol = "all"
  }
  log_config {
    metadata = "INCLUDE_ALL_METADATA"
  }
}

# Nodes run as this account, not the Compute Engine default: logs, metrics and image pulls only.
resource "google_service_account" "nodes" {
  account_id   = "${var.name}-nodes"
  display_name = "attnbench GKE nodes"
  depends_on   = [google_project_service.this]
}

resource "google_project_iam_member" "nodes" {
  for_each = toset(local.node_roles)
  project  = var.project_id
  role     = each.value
  member   = google_service_account.nodes.member
}

resource "google_container_cluster" "this" {
  # checkov:skip=CKV_GCP_24:PodSecurityPolicy was removed from Kubernetes in 1.25; k8s/base/namespace.yaml enforces the restricted Pod Security Standard instead.
  # checkov:skip=CKV_GCP_65:Access is through IAM roles on the project; a Google Groups RBAC domain is an organisation choice this module cannot make.
  # checkov:skip=CKV_GCP_66:Binary Authorization needs an organisation policy and attestors; images come only from the project's own Artifact Registry.
  # checkov:skip=CKV_GCP_12:Network policy is enforced by Dataplane V2 (datapath_provider ADVANCED_DATAPATH), which takes no network_policy block.
  name                        = var.name
  location                    = var.region
  node_locations              = var.zones
  network                     = google_compute_network.this.id
  subnetwork                  = google_compute_subnetwork.this.id
  datapath_provider           = "ADVANCED_DATAPATH"
  enable_shielded_nodes       = true
  enable_intranode_visibility = true
  remove_default_node_pool    = true
  initial_node_count          = 1
  deletion_protection         = var.deletion_protection
  resource_labels             = local.labels

  release_channel {
    channel = var.release_channel
  }
  workload_identity_config {
    workload_pool = "${var.project_id}.svc.id.goog" # the pool exists once the cluster does: iam.tf reads it from here
  }
  ip_allocation_policy {
    cluster_secondary_range_name  = "pods"
    services_secondary_range_name = "services"
  }
  private_cluster_config {
    enable_private_nodes    = true
    enable_private_endpoint = false
    master_ipv4_cidr_block  = "172.16.0.0/28"
  }
  master_authorized_networks_config {
    dynamic "cidr_blocks" {
      for_each = local.authorized_cidrs
      content {
        cidr_block   = cidr_blocks.value
        display_name = "operators"
      }
    }
  }
  master_auth {
    client_certificate_config {
      issue_client_certificate = false
    }
  }
  logging_config {
    enable_components = ["SYSTEM_COMPONENTS", "WORKLOADS"]
  }
  monitoring_config {
    enable_components = ["SYSTEM_COMPONENTS"]
  }
  # The initial default pool is deleted at once; it still has to be a hardened one.
  # This block only shapes that pool at creation: the provider reads node_config back from the cluster
  # (hashicorp/terraform-provider-google, resourceContainerClusterRead: d.Set("node_config",
  # flattenNodeConfig(cluster.NodeConfig))), which no longer matches once the pool is gone, and the block forces
  # replacement, so every later apply would plan a new cluster (GoogleCloudPlatform/cloud-foundation-fabric issue
  # #1275; its modules/gke-cluster-standard/main.tf ignores node_config for this reason): ignore_changes below.
  node_config {
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    image_type      = "COS_CONTAINERD"
    metadata        = { disable-legacy-endpoints = "true" }
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
    workload_metadata_config {
      mode = "GKE_METADATA"
    }
  }
  lifecycle {
    ignore_changes = [node_config]
    precondition {
      condition     = length(local.authorized_cidrs) > 0
      error_message = "Set authorized_cidrs (the CIDRs that may reach the cluster's API server), e.g. [\"203.0.113.7/32\"]."
    }
  }
  depends_on = [google_project_service.this]
}

resource "google_container_node_pool" "cpu" {
  name           = "${var.name}-cpu"
  cluster        = google_container_cluster.this.id
  location       = var.region
  node_locations = [var.zones[0]]
  autoscaling {
    total_min_node_count = 1
    total_max_node_count = 2
  }
  management {
    auto_repair  = true
    auto_upgrade = true
  }
  node_config {
    machine_type    = "e2-standard-4"
    image_type      = "COS_CONTAINERD"
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    metadata        = { disable-legacy-endpoints = "true" }
    labels          = local.labels
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
    workload_metadata_config {
      mode = "GKE_METADATA"
    }
  }
}

# One pool per GPU model, 0..max nodes; GKE installs the driver and taints the nodes so only GPU pods land there.
resource "google_container_node_pool" "gpu" {
  for_each       = { for name, pool in local.gpu_pools : name => pool if pool.max_nodes > 0 }
  name           = "${var.name}-${each.key}"
  cluster        = google_container_cluster.this.id
  location       = var.region
  node_locations = each.value.zones
  autoscaling {
    total_min_node_count = 0
    total_max_node_count = each.value.max_nodes
    location_policy      = "ANY" # take GPUs in whichever zone has them
  }
  management {
    auto_repair  = true
    auto_upgrade = true
  }
  node_config {
    machine_type    = each.value.machine_type
    image_type      = "COS_CONTAINERD"
    spot            = var.spot
    disk_type       = "pd-balanced"
    disk_size_gb    = 200
    service_account = google_service_account.nodes.email
    oauth_scopes    = ["https://www.googleapis.com/auth/cloud-platform"]
    metadata        = { disable-legacy-endpoints = "true" }
    labels          = local.labels
    # Image streaming: a new node starts the runner (one ~7.6 GB layer) while its data is still streaming in from
    # Artifact Registry, reading what the process touches first, instead of pulling all of it before the pod starts.
    gcfs_config {
      enabled = true
    }
    guest_accelerator {
      type  = each.value.accelerator
      count = 1
      gpu_driver_installation_config {
        gpu_driver_version = var.gpu_driver_version
      }
    }
    taint {
      key    = "nvidia.com/gpu"
      value  = "present"
      effect = "NO_SCHEDULE"
    }
    dynamic "taint" {
      for_each = var.spot ? [1] : []
      content {
        key    = "cloud.google.com/gke-spot"
        value  = "true"
        effect = "NO_SCHEDULE"
      }
    }
    shielded_instance_config {
      enable_secure_boot          = true
      enable_integrity_monitoring = true
    }
    workload_metadata_config {
      mode = "GKE_METADATA"
    }
  }
  lifecycle {
    # Compute Engine offers a3-highgpu-1g (and -2g, -4g) only as Spot or Flex-start VMs; this module provisions
    # Spot (docs/gke.md, "Hardware comparisons").
    precondition {
      condition     = each.key != "h100" || var.spot
      error_message = "h100_max_nodes > 0 needs spot = true: a3-highgpu-1g is offered only as Spot (or Flex-start) VMs."
    }
  }
}

resource "google_compute_global_address" "dashboard" {
  count      = var.dashboard_static_ip ? 1 : 0
  name       = "${var.name}-dashboard"
  depends_on = [google_project_service.this]
}
