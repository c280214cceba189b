variable "project_id" {
  description = "Google Cloud project that holds the cluster, bucket and registry."
  type        = string
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id must be a project ID (6-30 lowercase letters, digits, hyphens), not a name or number."
  }
}

variable "region" {
  description = "Region of the cluster, bucket and Artifact Registry repository; must offer L4 GPUs in the zones below."
  type        = string
  default     = "us-central1"
  validation {
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]$", var.region))
    error_message = "region must look like us-central1."
  }
}

variable "zones" {
  description = "Zones of the region where the node pools run; every zone must have the GPUs asked for (gcloud compute accelerator-types list)."
  type        = list(string)
  default     = ["us-central1-a", "us-central1-b", "us-central1-c"]
  validation {
    condition     = length(var.zones) > 0 && alltrue([for z in var.zones : can(regex("^[a-z]+-[a-z]+[0-9]-[a-z]$", z))])
    error_message = "zones must be a non-empty list like [\"us-central1-a\"]."
  }
}

variable "name" {
  description = "Prefix of every resource's name: cluster, node pools, bucket, repository, service account."
  type        = string
  default     = "attnbench"
  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,18}[a-z0-9]$", var.name))
    error_message = "name must be 3-20 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "authorized_cidrs" {
  description = "CIDRs allowed to reach the cluster's API server: your workstations, VPN or CI egress (e.g. [\"203.0.113.7/32\"])."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for cidr in var.authorized_cidrs : can(cidrhost(cidr, 0)) && cidr != "0.0.0.0/0"])
    error_message = "authorized_cidrs must be CIDRs like 203.0.113.7/32, none of them 0.0.0.0/0."
  }
}

variable "authorized_cidr" {
  description = "Deprecated: one CIDR, as earlier versions took it; added to authorized_cidrs. Use authorized_cidrs."
  type        = string
  default     = null
  validation {
    condition     = var.authorized_cidr == null || (can(cidrhost(var.authorized_cidr, 0)) && var.authorized_cidr != "0.0.0.0/0")
    error_message = "authorized_cidr must be a CIDR and not 0.0.0.0/0 (better: move it into authorized_cidrs)."
  }
}

variable "release_channel" {
  description = "GKE release channel: the cluster and nodes follow its Kubernetes versions."
  type        = string
  default     = "REGULAR"
  validation {
    condition     = contains(["RAPID", "REGULAR", "STABLE"], var.release_channel)
    error_message = "release_channel must be RAPID, REGULAR or STABLE."
  }
}

variable "l4_machine_type" {
  description = "G2 machine type of the L4 pool (one L4 each). The Job asks for 6 vCPU and 24 GiB; g2-standard-4's allocatable (about 3.9 vCPU, 13.3 GiB, as docs/gke.md's Node sizes works out) cannot hold it, so the smallest is g2-standard-8."
  type        = string
  default     = "g2-standard-8"
  validation {
    condition     = contains(["g2-standard-8", "g2-standard-12", "g2-standard-16", "g2-standard-32"], var.l4_machine_type)
    error_message = "l4_machine_type must be a one-GPU G2 type that holds the Job's 6 vCPU / 24 GiB: g2-standard-8, -12, -16 or -32."
  }
}

variable "l4_max_nodes" {
  description = "Most L4 nodes at once, across zones: the most shards that run in parallel. The pool scales from 0."
  type        = number
  default     = 4
  validation {
    condition     = var.l4_max_nodes >= 1 && var.l4_max_nodes <= 64 && floor(var.l4_max_nodes) == var.l4_max_nodes
    error_message = "l4_max_nodes must be a whole number from 1 to 64."
  }
}

variable "h100_max_nodes" {
  description = "Most a3-highgpu-1g (one H100 80GB) nodes, for the k8s/overlays/h100 overlay; 0 makes no H100 pool. Needs spot = true: Compute Engine offers a3-highgpu-1g only as Spot or Flex-start VMs."
  type        = number
  default     = 0
  validation {
    condition     = var.h100_max_nodes >= 0 && var.h100_max_nodes <= 16 && floor(var.h100_max_nodes) == var.h100_max_nodes
    error_message = "h100_max_nodes must be a whole number from 0 to 16."
  }
}

variable "h100_zones" {
  description = "Zones of the H100 pool, where the region has nvidia-h100-80gb (gcloud compute accelerator-types list --filter=\"name=nvidia-h100-80gb\"); empty means zones."
  type        = list(string)
  default     = []
  validation {
    condition     = alltrue([for z in var.h100_zones : can(regex("^[a-z]+-[a-z]+[0-9]-[a-z]$", z))])
    error_message = "h100_zones must be zones like [\"us-central1-a\"]."
  }
}

variable "spot" {
  description = "Run the GPU pools on Spot VMs: far cheaper, can be reclaimed with 30 s notice, 15 s of it for the pod (the runner uploads and exits; the index is retried)."
  type        = bool
  default     = true
}

variable "gpu_driver_version" {
  description = "Driver GKE installs on GPU nodes: DEFAULT or LATEST for the node's GKE version (both satisfy the image's >= 525 floor)."
  type        = string
  default     = "LATEST"
  validation {
    condition     = contains(["DEFAULT", "LATEST"], var.gpu_driver_version)
    error_message = "gpu_driver_version must be DEFAULT or LATEST."
  }
}

variable "results_retention_days" {
  description = "Days after which noncurrent (overwritten or deleted) result objects are removed; live results are kept."
  type        = number
  default     = 30
  validation {
    condition     = var.results_retention_days >= 1
    error_message = "results_retention_days must be at least 1."
  }
}

variable "dashboard_static_ip" {
  description = "Reserve a global static IP for the dashboard's IAP Ingress (k8s/components/iap); point your domain's A record at it."
  type        = bool
  default     = false
}

variable "deletion_protection" {
  description = "Refuse to delete the cluster; tear down with -var deletion_protection=false (docs/gke.md, \"Tear down\")."
  type        = bool
  default     = true
}
