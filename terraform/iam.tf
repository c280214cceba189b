# Workload Identity Federation for GKE: the Kubernetes service accounts themselves are the principals, so there
# is no Google service account to impersonate and no key anywhere. Each grant is on the one bucket only.
# The pool is the cluster's: it exists only once the cluster does, so the grants wait for it (on a fresh project IAM
# otherwise answers "Identity Pool does not exist").

locals {
  workload_pool = google_container_cluster.this.workload_identity_config[0].workload_pool
  ksa_principal = "principal://iam.googleapis.com/projects/${data.google_project.this.number}/locations/global/workloadIdentityPools/${local.workload_pool}/subject/ns/${local.namespace}/sa"
}

# The runner writes, rereads (to resume) and replaces result objects.
resource "google_storage_bucket_iam_member" "runner_objects" {
  bucket = google_storage_bucket.results.name
  role   = "roles/storage.objectUser"
  member = "${local.ksa_principal}/attnbench-runner"
}

# The dashboard only reads.
resource "google_storage_bucket_iam_member" "dashboard_objects" {
  bucket = google_storage_bucket.results.name
  role   = "roles/storage.objectViewer"
  member = "${local.ksa_principal}/attnbench-dashboard"
}
